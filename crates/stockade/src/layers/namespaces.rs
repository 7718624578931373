//! Namespaces: all are created by the one `clone3` that starts the run, so nothing runs in the
//! host's namespaces after fork. The parent only computes the flags; there is no child half.

use crate::layers::{Enforcement, LayerReport};
use crate::policy::Namespaces;
use crate::sys;
use std::os::fd::AsFd;

/// The `clone3` flags for a policy's namespaces.
#[derive(Debug, Clone, Copy)]
pub struct NsPlan {
    pub clone_flags: u64,
    asked: Namespaces,
}

const TABLE: [(&str, i32); 7] = [
    ("user", libc::CLONE_NEWUSER),
    ("pid", libc::CLONE_NEWPID),
    ("mount", libc::CLONE_NEWNS),
    ("net", libc::CLONE_NEWNET),
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("cgroup", libc::CLONE_NEWCGROUP),
];

fn wanted(ns: &Namespaces, name: &str) -> bool {
    match name {
        "user" => ns.user,
        "pid" => ns.pid,
        "mount" => ns.mount,
        "net" => ns.net,
        "ipc" => ns.ipc,
        "uts" => ns.uts,
        _ => ns.cgroup,
    }
}

/// Computes the clone flags.
pub fn prepare(ns: &Namespaces) -> NsPlan {
    let clone_flags = TABLE.iter().filter(|(name, _)| wanted(ns, name)).fold(0u64, |acc, (_, flag)| acc | *flag as u64);
    NsPlan { clone_flags, asked: *ns }
}

impl NsPlan {
    /// One report entry per namespace (all created by the same successful clone3).
    pub fn report(&self) -> Vec<LayerReport> {
        TABLE
            .iter()
            .map(|(name, _)| {
                let layer = format!("namespace.{name}");
                if wanted(&self.asked, name) {
                    LayerReport::new(&layer, "new", "new")
                } else {
                    LayerReport::new(&layer, "host", "host").with_status(
                        Enforcement::NotEnforced,
                        &format!("disabled by the policy: namespaces.{name} = false"),
                    )
                }
            })
            .collect()
    }
}

/// After `clone3` refused the run's flags: which namespace is it? Tries the user namespace alone,
/// then each other one with it, in a child that exits at once. Only runs on the failure path.
pub fn find_refused(flags: u64) -> Option<&'static str> {
    let user = libc::CLONE_NEWUSER as u64;
    let try_flags = |f: u64| -> bool {
        match sys::clone_into(f, None, || sys::exit(0)) {
            Ok((_, pidfd)) => {
                let _ = sys::waitid_pidfd(pidfd.as_fd());
                true
            }
            Err(_) => false,
        }
    };
    let base = flags & user;
    if base != 0 && !try_flags(base) {
        return Some("user");
    }
    TABLE
        .iter()
        .filter(|(_, f)| *f as u64 != user && flags & *f as u64 != 0)
        .find_map(|(name, f)| (!try_flags(base | *f as u64)).then_some(*name))
}
