//! A long-lived supervisor (`stockade serve`) on cgroup v2 owning the cgroup it was started in,
//! when that is delegated to it (systemd `Delegate=yes`, a container's own cgroup namespace): the
//! layout systemd documents for delegated subtrees. cgroup v2 lets a cgroup enable controllers
//! for its children only while it holds no process itself, so the supervisor moves into a leaf
//! of its own (`supervisor/`), enables memory, pids and cpu in its cgroup and in `runs/`, and
//! makes each run's leaf below `runs/`.
//!
//! Nothing is touched on a hybrid or v1 host (the v1 controllers are used as by `stockade run`),
//! or where the cgroup is not delegated (the runs' plans then refuse with the how-to, as
//! `stockade run` does).

use super::CgroupError;
use super::host::{Host, Shape};
use std::path::Path;

/// The controllers a service enables for its runs, where the host offers them.
const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// What [`take_delegated`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegation {
    /// The supervisor is in `<own>/supervisor`; runs go below this cgroup (`<own>/runs`), with
    /// these controllers enabled.
    Taken { runs: String, controllers: Vec<String> },
    /// Not cgroup v2 with controllers: nothing changed.
    NotV2,
    /// The cgroup is not writable by this process, or holds other processes too: nothing
    /// changed.
    NotDelegated { cgroup: String },
}

/// Arranges the delegated subtree (see the module's documentation).
pub fn take_delegated(host: &Host) -> Result<Delegation, CgroupError> {
    let Some(v2) = host.v2.as_ref().filter(|_| host.shape() == Shape::V2) else { return Ok(Delegation::NotV2) };
    let Some(dir) = v2.dir(&v2.own) else {
        return Err(CgroupError::ParentOutside { cgroup: v2.own.clone(), mount: v2.mount.display().to_string() });
    };
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| CgroupError::Io { what, path, source }
    };
    let available = std::fs::read_to_string(dir.join("cgroup.controllers")).map_err(io("read", &dir))?;
    let wanted: Vec<String> =
        CONTROLLERS.iter().filter(|c| available.split_whitespace().any(|a| a == **c)).map(|c| c.to_string()).collect();
    if wanted.is_empty() {
        return Ok(Delegation::NotV2);
    }
    if !crate::sys::writable(&dir.join("cgroup.subtree_control")) || !crate::sys::writable(&dir.join("cgroup.procs")) {
        return Ok(Delegation::NotDelegated { cgroup: v2.own.clone() });
    }
    // A cgroup delegated to this server holds this process alone (systemd's unit, a container's
    // own). One shared with others (root's login session, say) is not taken, writable or not.
    let me = std::process::id().to_string();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).map_err(io("read", &dir))?;
    if procs.split_whitespace().any(|p| p != me) {
        return Ok(Delegation::NotDelegated { cgroup: v2.own.clone() });
    }
    let mkdir = |p: &Path| match std::fs::create_dir(p) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(CgroupError::Io { what: "create", path: p.to_path_buf(), source: e })
        }
        _ => Ok(()),
    };
    let write = |p: &Path, value: &str| {
        std::fs::write(p, value).map_err(|source| CgroupError::Write {
            path: p.to_path_buf(),
            value: value.into(),
            source,
        })
    };
    let supervisor = dir.join("supervisor");
    let runs = dir.join("runs");
    mkdir(&supervisor)?;
    // "0": the writing process, with all its threads.
    write(&supervisor.join("cgroup.procs"), "0")?;
    mkdir(&runs)?;
    let enable: String = wanted.iter().map(|c| format!("+{c}")).collect::<Vec<_>>().join(" ");
    write(&dir.join("cgroup.subtree_control"), &enable)?;
    write(&runs.join("cgroup.subtree_control"), &enable)?;
    let own = v2.own.trim_end_matches('/');
    Ok(Delegation::Taken { runs: format!("{own}/runs"), controllers: wanted })
}
