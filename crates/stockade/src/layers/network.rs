//! Network: what the jail can reach from its own network namespace. Nothing, by default: the
//! namespace `clone3` made has a loopback that is down and no other interface, and the filter
//! refuses every socket but a unix one.
//!
//! With an egress list (`network.egress-allow`) the child brings its loopback up and listens on
//! `127.0.0.1:PROXY_PORT` in it, before its privileges go, and hands the listening socket to the
//! supervisor over the release channel: the supervisor's proxy (`crate::egress`) accepts on it
//! and reaches, from the host's network, only what the list names. The namespace has no route
//! anywhere else; the filter keeps the program to TCP sockets and `connect` (no bind, listen,
//! UDP or raw socket); Landlock (ABI 4+) pins `connect` to the proxy's port.

use crate::layers::LayerReport;
use crate::policy::Policy;
use crate::sys::{self, Errno};

/// The proxy's port on the jail's own loopback (its namespace has nothing else on it).
pub const PROXY_PORT: u16 = 3128;
/// Connections the kernel queues for the proxy before it accepts them.
const BACKLOG: i32 = 64;

/// The proxy's address, as the program's environment names it.
pub const PROXY_URL: &str = "http://127.0.0.1:3128";

/// The variables that point a program's HTTP clients at the proxy (both spellings: curl reads
/// only the lowercase `http_proxy`), and empty `NO_PROXY` lists, so that no host goes around it.
pub const PROXY_VARS: [&str; 6] = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"];
pub const NO_PROXY_VARS: [&str; 2] = ["NO_PROXY", "no_proxy"];

#[derive(Debug, Clone)]
pub struct NetPlan {
    /// The policy's list, in words, when the jail has its proxy.
    egress: Option<String>,
}

pub fn prepare(policy: &Policy) -> NetPlan {
    let n = &policy.network;
    let egress = n.egress().then(|| {
        let hosts: Vec<String> = n.egress_allow.iter().map(ToString::to_string).collect();
        format!("{} (at most {} connections, {} bytes)", hosts.join(", "), n.egress_max_connections, n.egress_max_bytes)
    });
    NetPlan { egress }
}

/// Child side: with an egress list, the loopback up and the proxy's listening socket made and
/// sent to the supervisor over `sync`. Returns the step that failed (0: the loopback, 1: the
/// socket, 2: sending it).
pub fn apply(plan: &NetPlan, sync: i32) -> Result<(), (u32, Errno)> {
    if plan.egress.is_none() {
        return Ok(());
    }
    sys::loopback_up().map_err(|e| (0, e))?;
    let fd = sys::listen_loopback(PROXY_PORT, BACKLOG).map_err(|e| (1, e))?;
    let sent = sys::send_fd(sync, fd);
    sys::close(fd);
    sent.map_err(|e| (2, e))
}

impl NetPlan {
    /// Whether the child sends the supervisor a listening socket.
    pub fn egress(&self) -> bool {
        self.egress.is_some()
    }

    pub fn step_name(step: u32) -> &'static str {
        match step {
            0 => "bring the loopback up",
            1 => "listen on the proxy's port",
            _ => "hand the proxy's socket to the supervisor",
        }
    }

    /// The layer's entry, for a jail with an egress list (without one, the namespace's entry
    /// says it all: `namespace.net`).
    pub fn report(&self) -> Option<LayerReport> {
        let list = self.egress.as_ref()?;
        Some(LayerReport::new(
            "network",
            &format!("egress to {list}"),
            &format!(
                "the jail's own network namespace: loopback only, the supervisor's proxy on 127.0.0.1:{PROXY_PORT} \
                 (HTTP CONNECT and absolute-form HTTP; names resolved by the proxy, private addresses refused unless \
                 listed), no route elsewhere"
            ),
        ))
    }
}
