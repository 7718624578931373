//! cgroups: one leaf per run, with memory, pids and CPU limits, the whole tree's accounting, and
//! a kill switch for everything in it.
//!
//! Each limit goes where the host has its controller: cgroup v2 when the parent's
//! `cgroup.subtree_control` enables it, else the v1 hierarchy of that controller. On cgroup v2
//! (pure or hybrid) the run always gets a v2 leaf as well: the child is born in it
//! (`clone3(CLONE_INTO_CGROUP)`, no moment outside), `cgroup.kill` takes the whole tree, and
//! `cpu.stat` gives its CPU time without a controller. v1 has no such clone: the child moves
//! itself, first thing, by writing `0` to each v1 leaf's `tasks` file, which the parent opened.
//! A single thread moving itself skips the kernel's thread-group lock, whose write side waits
//! for an RCU grace period when no move happened lately: a parent writing the child's pid to
//! `cgroup.procs` paid 4-8 ms per hierarchy for it, the child's own move well under 1 ms.
//!
//! stockade only writes to cgroups it created (`stockade-PID-START-SEQ`), never moves a process
//! but its run's child, and removes each leaf after the run. A leaf left by a supervisor that was
//! killed (its PID and start time no longer match a live process) is killed and removed the next
//! time stockade prepares a run in that parent.

pub mod host;
mod leaf;
pub mod service;

pub use leaf::{CpuFiles, Leaf};

use crate::layers::{Enforcement, LayerReport};
use crate::policy::CgroupPolicy;
use host::{Host, Shape};
use leaf::reap_stale;
use std::ffi::CStr;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "cgroups: the {controller} controller is not available to stockade here ({shape}; {detail}), and \
         cgroups.{key} needs it. Delegate it (systemd: Delegate=yes on the unit, or `systemd-run --scope -p \
         Delegate=yes stockade ...`; docker: --cgroupns=private), point --cgroup-parent / cgroups.parent at a \
         cgroup where it is, or set cgroups.best-effort = true (--cgroups-best-effort). `stockade doctor` \
         prints the commands for this host"
    )]
    Missing { controller: &'static str, key: &'static str, shape: &'static str, detail: String },
    #[error(
        "cgroups: a program that serves turns (a live session of a program runtime) is frozen between its turns, \
         every thread of it, with its cgroup2 leaf's cgroup.freeze; here ({shape}) stockade has no cgroup2 \
         hierarchy to make one in{off}. Mount cgroup2 (a hybrid host has it at /sys/fs/cgroup/unified), or use a \
         Wasm runtime for live sessions (its guest waits in its runner between turns)"
    )]
    NoFreezer { shape: &'static str, off: &'static str },
    #[error("cgroups: the parent cgroup {cgroup} is not visible here (not under {mount})")]
    ParentOutside { cgroup: String, mount: String },
    #[error("cgroups: cannot {what} {}: {}", path.display(), crate::sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cgroups: cannot write {value:?} to {}: {}", path.display(), crate::sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Write {
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },
}

/// A limited resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Controller::Memory => "memory-max-bytes",
            Controller::Pids => "pids-max",
            Controller::Cpu => "cpu-max-percent",
        }
    }
}

/// Files to write in a leaf, in order, with their values.
type Writes = Vec<(&'static CStr, String)>;

/// A v1 hierarchy the run gets a leaf in, and what to write there.
#[derive(Debug, Clone)]
struct V1Part {
    controller: &'static str,
    parent: PathBuf,
    writes: Writes,
}

/// Where the run's leaves go and what they hold.
#[derive(Debug, Clone)]
pub struct CgroupPlan {
    enabled: bool,
    shape: Shape,
    v2_parent: Option<PathBuf>,
    v2_writes: Writes,
    /// The v2 leaf carries limits (so it must be created; otherwise it is a convenience).
    v2_required: bool,
    v1: Vec<V1Part>,
    applied: Vec<String>,
    missing: Vec<String>,
    asked: String,
}

/// What the run's cgroup recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    pub memory_peak_bytes: Option<u64>,
    pub oom_kills: u64,
    pub pids_peak: Option<u64>,
    pub pids_limit_hit: bool,
    /// How many forks the process limit refused (`pids.events`' `max`).
    pub pids_max_events: u64,
    /// CPU time of every process that ran in the leaf, microseconds.
    pub cpu_user_us: Option<u64>,
    pub cpu_sys_us: Option<u64>,
}

/// Prepares the plan ([`plan`]) and reaps leaves that killed supervisors left behind in its
/// parents.
pub fn prepare(policy: &CgroupPolicy, host: &Host) -> Result<CgroupPlan, CgroupError> {
    let plan = plan(policy, host)?;
    for dir in plan.v2_parent.iter().chain(plan.v1.iter().map(|p| &p.parent)) {
        reap_stale(dir);
    }
    Ok(plan)
}

/// Picks where each limit goes and checks the parents, touching nothing (`stockade policy
/// explain` and `doctor` show it).
pub fn plan(policy: &CgroupPolicy, host: &Host) -> Result<CgroupPlan, CgroupError> {
    let mut plan = CgroupPlan {
        enabled: policy.enabled,
        shape: host.shape(),
        v2_parent: None,
        v2_writes: Vec::new(),
        v2_required: false,
        v1: Vec::new(),
        applied: Vec::new(),
        missing: Vec::new(),
        asked: String::new(),
    };
    let mut asked = Vec::new();
    if let Some(m) = policy.memory_max_bytes {
        asked.push(format!("memory <= {m} bytes, no swap"));
    }
    if let Some(p) = policy.pids_max {
        asked.push(format!("pids <= {p}"));
    }
    if let Some((q, p)) = policy.cpu_max_us {
        asked.push(format!("cpu <= {q} us per {p} us"));
    }
    plan.asked = if asked.is_empty() { "a cgroup of its own, no limits".into() } else { asked.join(", ") };
    if !policy.enabled {
        return Ok(plan);
    }

    let v2_parent = match &host.v2 {
        Some(v2) => {
            let cg = policy.parent.clone().unwrap_or_else(|| v2.own.clone());
            match v2.dir(&cg) {
                Some(d) => Some(d),
                None => {
                    return Err(CgroupError::ParentOutside { cgroup: cg, mount: v2.mount.display().to_string() });
                }
            }
        }
        None => None,
    };
    let v2_controllers = v2_parent.as_deref().map(host::subtree_controllers).unwrap_or_default();
    // Each limit, with the files that set it on cgroup v2 and on v1.
    let wanted: Vec<(Controller, Writes, Writes)> = [
        policy.memory_max_bytes.map(|m| {
            (
                Controller::Memory,
                vec![
                    (c"memory.max", m.to_string()),
                    (c"memory.swap.max", "0".into()),
                    (c"memory.oom.group", "1".into()),
                ],
                vec![(c"memory.limit_in_bytes", m.to_string()), (c"memory.memsw.limit_in_bytes", m.to_string())],
            )
        }),
        policy
            .pids_max
            .map(|p| (Controller::Pids, vec![(c"pids.max", p.to_string())], vec![(c"pids.max", p.to_string())])),
        policy.cpu_max_us.map(|(q, p)| {
            (
                Controller::Cpu,
                vec![(c"cpu.max", format!("{q} {p}"))],
                vec![(c"cpu.cfs_period_us", p.to_string()), (c"cpu.cfs_quota_us", q.to_string())],
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect();

    let v2_writable = v2_parent.as_deref().is_some_and(crate::sys::writable);
    for (c, v2_writes, v1_writes) in wanted {
        if v2_writable && v2_controllers.iter().any(|x| x == c.name()) {
            plan.v2_writes.extend(v2_writes);
            plan.v2_required = true;
            plan.applied.push(format!("{} (v2)", c.name()));
            continue;
        }
        let mut not_writable = None;
        if let Some(h) = host.v1.get(c.name()) {
            let cg = policy.parent.clone().unwrap_or_else(|| h.own.clone());
            let parent = h.dir(&cg).ok_or_else(|| CgroupError::ParentOutside {
                cgroup: cg.clone(),
                mount: h.mount.display().to_string(),
            })?;
            if crate::sys::writable(&parent) {
                plan.v1.push(V1Part { controller: c.name(), parent, writes: v1_writes });
                plan.applied.push(format!("{} (v1)", c.name()));
                continue;
            }
            not_writable = Some(parent);
        }
        let detail = match (&not_writable, &v2_parent, plan.shape) {
            (Some(p), _, _) if !p.exists() => format!("its v1 cgroup {} does not exist", p.display()),
            (Some(p), _, _) => format!("its v1 cgroup {} {}", p.display(), why_not_writable(p)),
            (None, Some(p), _) if !p.exists() => format!("the cgroup {} does not exist", p.display()),
            (None, Some(p), _) if !v2_writable && v2_controllers.iter().any(|x| x == c.name()) => {
                format!("the cgroup {} {}", p.display(), why_not_writable(p))
            }
            (None, Some(p), _) => format!("not in {}/cgroup.subtree_control and no v1 hierarchy has it", p.display()),
            (None, None, Shape::None) => "no cgroup filesystem is mounted".into(),
            (None, None, _) => "no mounted hierarchy has it".into(),
        };
        if !policy.best_effort {
            return Err(CgroupError::Missing { controller: c.name(), key: c.key(), shape: plan.shape.name(), detail });
        }
        plan.missing.push(format!("{} ({detail})", c.name()));
    }
    // Pure v1: CPU time comes from cpuacct (its own leaf, unless co-mounted with a limited one),
    // a convenience made only where this user may (a container's read-only cgroupfs has none).
    if v2_parent.is_none()
        && let Some(h) = host.v1.get("cpuacct")
        && !plan.v1.iter().any(|p| p.parent.starts_with(&h.mount))
        && let Some(parent) = h.dir(&policy.parent.clone().unwrap_or_else(|| h.own.clone()))
        && crate::sys::writable(&parent)
    {
        plan.v1.push(V1Part { controller: "cpuacct", parent, writes: Vec::new() });
    }
    // Without limits there, a cgroup2 leaf is a convenience: only where this user may make one.
    plan.v2_parent = v2_parent.filter(|_| v2_writable);
    Ok(plan)
}

/// Why this user cannot make cgroups in `dir`: a read-only cgroup filesystem (a container's,
/// unless it has a cgroup namespace and a writable mount of its own) or no delegation.
fn why_not_writable(dir: &Path) -> &'static str {
    if crate::sys::statvfs_read_only(dir) {
        "is on a read-only cgroup filesystem (in a container: give it a writable cgroup v2 of its own: \
         docker >= 28: --cgroupns=private --security-opt writable-cgroups=true; podman: --cgroupns=private \
         --security-opt unmask=/sys/fs/cgroup; containerd >= 2.1 (Kubernetes): cgroup_writable = true in the \
         runtime's options)"
    } else {
        "is not writable by this user: not delegated"
    }
}

impl CgroupPlan {
    /// `Ok` when the run's jail can be frozen whole between its turns (a cgroup2 leaf, made
    /// with it); else why not ([`CgroupError::NoFreezer`]).
    pub fn freezer(&self) -> Result<(), CgroupError> {
        match (self.enabled, &self.v2_parent) {
            (true, Some(_)) => Ok(()),
            (enabled, _) => Err(CgroupError::NoFreezer {
                shape: self.shape.name(),
                off: if enabled { "" } else { " (the policy sets cgroups.enabled = false: set it true)" },
            }),
        }
    }

    pub fn report(&self, leaf_made: bool) -> LayerReport {
        if !self.enabled {
            return LayerReport::new("cgroup", "none", "none")
                .with_status(Enforcement::NotEnforced, "disabled by the policy: cgroups.enabled = false");
        }
        let mut where_ = Vec::new();
        if self.v2_parent.is_some() && leaf_made {
            where_.push("a cgroup2 leaf (born in it; cgroup.kill; cpu.stat)".to_string());
        }
        if !self.applied.is_empty() {
            where_.push(format!("limits: {}", self.applied.join(", ")));
        }
        let applied =
            format!("{}: {}", self.shape.name(), if where_.is_empty() { "none".into() } else { where_.join("; ") });
        let r = LayerReport::new("cgroup", &self.asked, &applied);
        if !self.missing.is_empty() {
            let status = if self.applied.is_empty() { Enforcement::NotEnforced } else { Enforcement::Partial };
            return r.with_status(
                status,
                &format!("not available here: {} (cgroups.best-effort = true)", self.missing.join(", ")),
            );
        }
        r
    }
}

/// Child side: moves the calling (single-threaded) process into each v1 leaf by writing `0`
/// ("this thread") to its `tasks` file, then, with `new_namespace`, enters a cgroup namespace
/// rooted at those leaves (`clone3` left it out: made there, it would have been rooted at the
/// supervisor's cgroups, and `/proc/self/cgroup` would show the leaf's name, which carries the
/// supervisor's host pid). Raw calls on fds the parent opened; the detail of a failure is the
/// leaf's index (the number of leaves: the unshare).
pub fn apply(tasks: &[RawFd], new_namespace: bool) -> Result<(), (u32, crate::sys::Errno)> {
    for (i, fd) in tasks.iter().enumerate() {
        crate::sys::write(*fd, b"0").map_err(|e| (u32::try_from(i).unwrap_or(u32::MAX), e))?;
    }
    if new_namespace {
        let step = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
        crate::sys::unshare(libc::CLONE_NEWCGROUP).map_err(|e| (step, e))?;
    }
    Ok(())
}

impl CgroupPlan {
    /// The controller of the `i`th v1 leaf (for a failure's message).
    /// How many v1 leaves a run gets.
    pub fn v1_leaves(&self) -> usize {
        self.v1.len()
    }

    pub fn v1_controller(&self, i: u32) -> &'static str {
        self.v1.get(i as usize).map_or("?", |p| p.controller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_controller_is_refused_with_the_key_and_the_way_out() {
        let policy = CgroupPolicy {
            enabled: true,
            best_effort: false,
            parent: None,
            memory_max_bytes: Some(1 << 30),
            pids_max: None,
            cpu_max_us: None,
        };
        let host = Host::default();
        let err = prepare(&policy, &host).expect_err("no cgroups at all").to_string();
        assert!(err.starts_with("cgroups: the memory controller is not available to stockade here"), "{err}");
        assert!(err.contains("cgroups.memory-max-bytes needs it") && err.contains("Delegate=yes"), "{err}");
        let plan = prepare(&CgroupPolicy { best_effort: true, ..policy }, &host).expect("best effort");
        assert_eq!(plan.report(false).status, Enforcement::NotEnforced);
    }
}
