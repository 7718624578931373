//! What a run's egress proxy saw: every connection the program asked it for, allowed or refused
//! and why, the bytes each way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most connections a report lists one by one; the rest are counted (`left-out`).
pub const MAX_LISTED: usize = 256;

/// The run's egress, when its policy has an egress list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EgressReport {
    /// Connections the proxy opened for the program.
    pub allowed: u64,
    /// Requests it refused.
    pub refused: u64,
    /// Bytes from the program to the hosts, and back, all connections together.
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Connections not listed below (past the first 256).
    #[serde(default)]
    pub left_out: u64,
    /// Each connection, in the order asked.
    pub connections: Vec<EgressConnection>,
}

/// One connection the program asked the proxy for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EgressConnection {
    /// The host as the program named it (empty when its request could not be read).
    pub host: String,
    pub port: u16,
    /// `CONNECT` (a tunnel: https, anything over TCP), or the method of a plain `http://` request.
    pub method: String,
    pub allowed: bool,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// The address the proxy connected to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub bytes_out: u64,
    pub bytes_in: u64,
    /// Why the proxy ended it, when it did (not the program or the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<Cut>,
}

/// Why the proxy refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// `network.egress-allow` names no such host and port.
    NotListed,
    /// A listed name resolved only to loopback, private, link-local or other non-public
    /// addresses that the list does not name.
    PrivateAddress,
    /// The name did not resolve.
    CannotResolve,
    /// No address of it accepted the connection.
    CannotConnect,
    /// Past `network.egress-max-connections`.
    MaxConnections,
    /// Not a request the proxy speaks (HTTP CONNECT, or absolute-form `http://`), or none came.
    BadRequest,
    /// Too many requests waiting at once.
    Busy,
}

impl Refusal {
    pub const ALL: [Refusal; 7] = [
        Refusal::NotListed,
        Refusal::PrivateAddress,
        Refusal::CannotResolve,
        Refusal::CannotConnect,
        Refusal::MaxConnections,
        Refusal::BadRequest,
        Refusal::Busy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Refusal::NotListed => "not-listed",
            Refusal::PrivateAddress => "private-address",
            Refusal::CannotResolve => "cannot-resolve",
            Refusal::CannotConnect => "cannot-connect",
            Refusal::MaxConnections => "max-connections",
            Refusal::BadRequest => "bad-request",
            Refusal::Busy => "busy",
        }
    }
}

/// Why the proxy ended a connection it had opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Cut {
    /// Past `network.egress-max-bytes`.
    MaxBytes,
    /// The run was over.
    RunOver,
}
