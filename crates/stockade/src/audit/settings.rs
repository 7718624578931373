//! The table of every reviewed setting: its key, title, weight in the score, and how exposed a
//! policy leaves it (0 tightest, 1 off). `score`, `diff`, `lint` and `explain` all read it.

use super::{DATA_DIRS, SECRET_FILES, SYSTEM_DIRS, Setting, looks_secret};
use crate::policy::{Limit, Policy, ProcMode, RlimitKey, StdinMode, SyscallGroup};

pub(crate) fn under(path: &std::path::Path, dirs: &[&str]) -> bool {
    dirs.iter().any(|d| path.starts_with(d))
}

/// `t` between `lo` (0.0) and `hi` (1.0) on a log scale, clamped.
pub(super) fn log_scale(t: f64, lo: f64, hi: f64) -> f64 {
    if t <= lo {
        return 0.0;
    }
    ((t / lo).ln() / (hi / lo).ln()).clamp(0.0, 1.0)
}

fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

fn on_off(b: bool) -> String {
    if b { "on".into() } else { "off".into() }
}

pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

pub(crate) fn opt_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| "unlimited".into(), bytes)
}

fn allowed(p: &Policy, g: SyscallGroup) -> bool {
    p.seccomp.allow.contains(&g)
}

/// The other denied-by-default groups a policy re-allows.
fn other_allowed(p: &Policy) -> Vec<&'static str> {
    p.seccomp
        .allow
        .iter()
        .filter(|g| !matches!(g, SyscallGroup::Network | SyscallGroup::Exec))
        .map(|g| g.name())
        .collect()
}

fn cgroup_limit(p: &Policy, v: Option<u64>) -> Option<u64> {
    if p.cgroups.enabled { v } else { None }
}

pub(super) fn rlimit(p: &Policy, key: RlimitKey) -> Option<Limit> {
    p.rlimits.iter().find(|(k, _)| *k == key).map(|(_, l)| *l)
}

fn rlimit_exposure(l: Option<Limit>, lo: f64, hi: f64) -> f64 {
    match l {
        Some(Limit::Value(v)) => log_scale(v as f64, lo, hi),
        _ => 1.0,
    }
}

fn rlimit_value(l: Option<Limit>) -> String {
    match l {
        Some(Limit::Value(v)) => v.to_string(),
        Some(Limit::Unlimited) => "unlimited".into(),
        None => "not set".into(),
    }
}

fn grants(p: &Policy, writable: bool) -> String {
    let list: Vec<String> =
        p.filesystem.grants.iter().filter(|g| g.writable == writable).map(|g| g.path.display().to_string()).collect();
    if list.is_empty() { "none".into() } else { list.join(", ") }
}

/// How much an egress list opens: nothing without one; every listed host some (a wildcard or a
/// non-public address more); all of it when sockets are not held to the proxy at all.
fn egress_exposure(p: &Policy) -> f64 {
    use crate::policy::EgressHost;
    if p.seccomp.allow_network() || !p.namespaces.net {
        return 1.0;
    }
    let per = |r: &crate::policy::EgressRule| match &r.host {
        EgressHost::Name(_) => 0.05,
        EgressHost::Below(_) => 0.15,
        EgressHost::Ip(ip) if crate::policy::egress::is_public(*ip) => 0.05,
        EgressHost::Ip(_) => 0.2,
    };
    let list = &p.network.egress_allow;
    if list.is_empty() { 0.0 } else { (0.3 + list.iter().map(per).sum::<f64>()).min(1.0) }
}

/// Every reviewed setting, in report order.
pub const SETTINGS: &[Setting] = &[
    Setting {
        key: "seccomp.allow: network",
        title: "network system calls (non-unix sockets)",
        weight: 6.0,
        exposure: |p| flag(allowed(p, SyscallGroup::Network)),
        value: |p| if allowed(p, SyscallGroup::Network) { "allowed".into() } else { "denied".into() },
    },
    Setting {
        key: "network.egress-allow",
        title: "hosts reachable through the egress proxy",
        weight: 3.0,
        exposure: egress_exposure,
        value: |p| {
            let l: Vec<String> = p.network.egress_allow.iter().map(ToString::to_string).collect();
            if l.is_empty() { "none".into() } else { l.join(", ") }
        },
    },
    Setting {
        key: "namespaces.net",
        title: "network namespace (no interfaces)",
        weight: 7.0,
        exposure: |p| flag(!p.namespaces.net),
        value: |p| on_off(p.namespaces.net),
    },
    Setting {
        key: "seccomp.allow: exec",
        title: "exec after the program starts",
        weight: 7.0,
        exposure: |p| flag(allowed(p, SyscallGroup::Exec)),
        value: |p| if allowed(p, SyscallGroup::Exec) { "allowed".into() } else { "denied".into() },
    },
    Setting {
        key: "process.exec-allow",
        title: "files the program may exec after it starts",
        // Taken from the exec row's 9: a policy that allows every exec scores as before.
        weight: 2.0,
        exposure: |p| match (allowed(p, SyscallGroup::Exec), p.exec_allow.is_empty()) {
            (true, _) => 1.0,
            // Listed files only, and what their ELF interpreter can be made to load.
            (false, false) => 0.5,
            (false, true) => 0.0,
        },
        value: |p| {
            let l: Vec<String> = p.exec_allow.iter().map(|f| f.display().to_string()).collect();
            if l.is_empty() { "none".into() } else { l.join(", ") }
        },
    },
    Setting {
        key: "seccomp.allow: other groups",
        title: "kernel surface re-allowed (io_uring, bpf, namespaces, mount, ptrace, ...)",
        weight: 10.0,
        exposure: |p| other_allowed(p).len() as f64 / (SyscallGroup::ALL.len() - 2) as f64,
        value: |p| {
            let o = other_allowed(p);
            if o.is_empty() { "none".into() } else { o.join(", ") }
        },
    },
    Setting {
        key: "seccomp.required",
        title: "refuse to run without seccomp",
        weight: 2.0,
        exposure: |p| flag(!p.seccomp.required),
        value: |p| p.seccomp.required.to_string(),
    },
    Setting {
        key: "seccomp.kill",
        title: "groups whose use kills the run",
        weight: 0.0,
        exposure: |p| 1.0 - p.seccomp.kill.len() as f64 / SyscallGroup::ALL.len() as f64,
        value: |p| {
            let k: Vec<&str> = p.seccomp.kill.iter().map(|g| g.name()).collect();
            if k.is_empty() { "none".into() } else { k.join(", ") }
        },
    },
    Setting {
        key: "landlock.required",
        title: "refuse to run below landlock.min-abi",
        weight: 2.0,
        exposure: |p| flag(!p.landlock.required),
        value: |p| p.landlock.required.to_string(),
    },
    Setting {
        key: "landlock.min-abi",
        title: "Landlock ABI the policy needs",
        weight: 0.0,
        exposure: |p| (6.0 - f64::from(p.landlock.min_abi)) / 5.0,
        value: |p| p.landlock.min_abi.to_string(),
    },
    Setting {
        key: "namespaces.user",
        title: "user namespace",
        weight: 5.0,
        exposure: |p| flag(!p.namespaces.user),
        value: |p| on_off(p.namespaces.user),
    },
    Setting {
        key: "namespaces.pid",
        title: "pid namespace (host processes invisible, run dies as one)",
        weight: 5.0,
        exposure: |p| flag(!p.namespaces.pid),
        value: |p| on_off(p.namespaces.pid),
    },
    Setting {
        key: "namespaces.mount",
        title: "mount namespace and minimal root (off: the host's whole filesystem)",
        weight: 7.0,
        exposure: |p| flag(!p.namespaces.mount),
        value: |p| on_off(p.namespaces.mount),
    },
    Setting {
        key: "namespaces.ipc",
        title: "ipc namespace",
        weight: 2.0,
        exposure: |p| flag(!p.namespaces.ipc),
        value: |p| on_off(p.namespaces.ipc),
    },
    Setting {
        key: "namespaces.uts",
        title: "uts namespace (hostname)",
        weight: 1.0,
        exposure: |p| flag(!p.namespaces.uts),
        value: |p| on_off(p.namespaces.uts),
    },
    Setting {
        key: "namespaces.cgroup",
        title: "cgroup namespace",
        weight: 1.0,
        exposure: |p| flag(!p.namespaces.cgroup),
        value: |p| on_off(p.namespaces.cgroup),
    },
    Setting {
        key: "identity.host-uid",
        title: "host uid the jail runs as (when stockade runs as root)",
        weight: 1.0,
        exposure: |p| flag(p.identity.host_uid != 65534 || p.identity.host_gid != 65534),
        value: |p| format!("{}:{}", p.identity.host_uid, p.identity.host_gid),
    },
    Setting {
        key: "filesystem.read-write",
        title: "writable host paths",
        weight: 5.0,
        exposure: |p| {
            let w: Vec<_> = p.filesystem.grants.iter().filter(|g| g.writable).collect();
            if w.iter().any(|g| under(&g.path, SYSTEM_DIRS)) {
                1.0
            } else if w.is_empty() {
                0.0
            } else {
                0.5
            }
        },
        value: |p| grants(p, true),
    },
    Setting {
        key: "filesystem.read-only",
        title: "read-only host paths",
        weight: 2.0,
        exposure: |p| {
            let g = &p.filesystem.grants;
            if g.iter().any(|g| under(&g.path, DATA_DIRS) || g.path == std::path::Path::new("/etc")) {
                1.0
            } else if g.iter().any(|g| under(&g.path, SECRET_FILES)) {
                0.5
            } else {
                0.0
            }
        },
        value: |p| grants(p, false),
    },
    Setting {
        key: "filesystem.writable-exec",
        title: "executing files in writable places",
        weight: 3.0,
        exposure: |p| flag(p.filesystem.writable_exec),
        value: |p| if p.filesystem.writable_exec { "allowed".into() } else { "denied (noexec)".into() },
    },
    Setting {
        key: "filesystem.proc",
        title: "/proc inside",
        weight: 2.0,
        exposure: |p| match p.filesystem.proc {
            ProcMode::None => 0.0,
            ProcMode::PidOnly => 0.1,
            ProcMode::Full => 1.0,
        },
        value: |p| {
            match p.filesystem.proc {
                ProcMode::None => "none",
                ProcMode::PidOnly => "pid-only",
                ProcMode::Full => "full",
            }
            .into()
        },
    },
    Setting {
        key: "filesystem.tmp-size-bytes",
        title: "private /tmp",
        weight: 0.0,
        exposure: |p| p.filesystem.tmp_size_bytes.map_or(0.0, |t| log_scale(t as f64, 1.0, (1u64 << 40) as f64)),
        value: |p| p.filesystem.tmp_size_bytes.map_or_else(|| "none".into(), bytes),
    },
    Setting {
        key: "filesystem.shm-size-bytes",
        title: "private /dev/shm",
        weight: 0.0,
        exposure: |p| p.filesystem.shm_size_bytes.map_or(0.0, |t| log_scale(t as f64, 1.0, (1u64 << 40) as f64)),
        value: |p| p.filesystem.shm_size_bytes.map_or_else(|| "none".into(), bytes),
    },
    Setting {
        key: "filesystem.writable-max-bytes",
        title: "quota of each writable directory",
        weight: 0.0,
        exposure: |p| log_scale(p.filesystem.writable_max_bytes as f64, 1.0, (1u64 << 40) as f64),
        value: |p| bytes(p.filesystem.writable_max_bytes),
    },
    Setting {
        key: "filesystem.writable-max-files",
        title: "files in each writable directory",
        weight: 0.0,
        exposure: |p| log_scale(p.filesystem.writable_max_files as f64, 1.0, (1u64 << 32) as f64),
        value: |p| p.filesystem.writable_max_files.to_string(),
    },
    Setting {
        key: "identity.owner-uid-count",
        title: "each run's per-user kernel counters its own (not root's)",
        weight: 0.0,
        exposure: |p| flag(p.identity.owner_uids.is_none()),
        value: |p| match p.identity.owner_uids {
            Some((first, count)) => format!("{count} uids from {first}"),
            None => "off: runs share the caller's counters".into(),
        },
    },
    Setting {
        key: "filesystem.dev",
        title: "minimal /dev (null, zero, full, random, urandom)",
        weight: 0.0,
        exposure: |p| flag(p.filesystem.dev),
        value: |p| on_off(p.filesystem.dev),
    },
    Setting {
        key: "limits.wall-timeout-ms",
        title: "wall-clock limit",
        weight: 4.0,
        exposure: |p| log_scale(p.wall_timeout.as_millis() as f64, 10_000.0, 86_400_000.0),
        value: |p| format!("{} ms", p.wall_timeout.as_millis()),
    },
    Setting {
        key: "cgroups.enabled",
        title: "a cgroup of its own (limits, accounting, kill as one)",
        weight: 1.0,
        exposure: |p| flag(!p.cgroups.enabled),
        value: |p| p.cgroups.enabled.to_string(),
    },
    Setting {
        key: "cgroups.memory-max-bytes",
        title: "memory of the whole run",
        weight: 5.0,
        exposure: |p| {
            cgroup_limit(p, p.cgroups.memory_max_bytes)
                .map_or(1.0, |m| log_scale(m as f64, (512u64 << 20) as f64, (64u64 << 30) as f64))
        },
        value: |p| opt_bytes(cgroup_limit(p, p.cgroups.memory_max_bytes)),
    },
    Setting {
        key: "cgroups.pids-max",
        title: "processes and threads at once",
        weight: 4.0,
        exposure: |p| cgroup_limit(p, p.cgroups.pids_max).map_or(1.0, |n| log_scale(n as f64, 64.0, 4096.0)),
        value: |p| cgroup_limit(p, p.cgroups.pids_max).map_or_else(|| "unlimited".into(), |n| n.to_string()),
    },
    Setting {
        key: "cgroups.cpu-max-percent",
        title: "CPU bandwidth",
        weight: 2.0,
        exposure: |p| {
            cgroup_limit(p, p.cgroups.cpu_max_us.map(|(q, per)| q * 100 / per.max(1)))
                .map_or(1.0, |pct| log_scale(pct as f64, 100.0, 1600.0))
        },
        value: |p| {
            cgroup_limit(p, p.cgroups.cpu_max_us.map(|(q, per)| q * 100 / per.max(1)))
                .map_or_else(|| "unlimited".into(), |pct| format!("{pct} % of one CPU"))
        },
    },
    Setting {
        key: "cgroups.best-effort",
        title: "run without a missing cgroup controller",
        weight: 2.0,
        exposure: |p| flag(p.cgroups.best_effort || !p.cgroups.enabled),
        value: |p| p.cgroups.best_effort.to_string(),
    },
    Setting {
        key: "rlimits.core-bytes",
        title: "core dumps",
        weight: 1.0,
        exposure: |p| match rlimit(p, RlimitKey::CoreBytes) {
            Some(Limit::Value(0)) => 0.0,
            _ => 1.0,
        },
        value: |p| rlimit_value(rlimit(p, RlimitKey::CoreBytes)),
    },
    Setting {
        key: "rlimits.max-open-files",
        title: "open files per process",
        weight: 1.0,
        exposure: |p| rlimit_exposure(rlimit(p, RlimitKey::MaxOpenFiles), 256.0, 1_048_576.0),
        value: |p| rlimit_value(rlimit(p, RlimitKey::MaxOpenFiles)),
    },
    Setting {
        key: "rlimits.file-size-bytes",
        title: "largest file written",
        weight: 1.0,
        exposure: |p| rlimit_exposure(rlimit(p, RlimitKey::FileSizeBytes), (64u64 << 20) as f64, (64u64 << 30) as f64),
        value: |p| rlimit_value(rlimit(p, RlimitKey::FileSizeBytes)),
    },
    Setting {
        key: "output.stdout-max-bytes",
        title: "stdout passed on",
        weight: 1.0,
        exposure: |p| p.stdout_max_bytes.map_or(1.0, |b| log_scale(b as f64, (1u64 << 20) as f64, (1u64 << 30) as f64)),
        value: |p| opt_bytes(p.stdout_max_bytes),
    },
    Setting {
        key: "output.stderr-max-bytes",
        title: "stderr passed on",
        weight: 1.0,
        exposure: |p| p.stderr_max_bytes.map_or(1.0, |b| log_scale(b as f64, (1u64 << 20) as f64, (1u64 << 30) as f64)),
        value: |p| opt_bytes(p.stderr_max_bytes),
    },
    Setting {
        key: "environment.pass",
        title: "caller's environment variables passed in",
        weight: 2.0,
        exposure: |p| {
            if p.env_pass.iter().any(|n| looks_secret(n)) {
                1.0
            } else {
                (p.env_pass.len() as f64 / 10.0).min(1.0) * 0.5
            }
        },
        value: |p| if p.env_pass.is_empty() { "none".into() } else { p.env_pass.join(", ") },
    },
    Setting {
        key: "environment.set",
        title: "variables set to fixed values",
        weight: 0.0,
        exposure: |_| 0.0,
        value: |p| {
            let v: Vec<String> = p.env_set.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if v.is_empty() { "none".into() } else { v.join(" ") }
        },
    },
    Setting {
        key: "process.stdin",
        title: "the caller's stdin",
        weight: 1.0,
        exposure: |p| flag(p.stdin == StdinMode::Inherit),
        value: |p| if p.stdin == StdinMode::Inherit { "inherited".into() } else { "/dev/null".into() },
    },
    Setting {
        key: "process.hostname",
        title: "hostname inside",
        weight: 0.0,
        exposure: |_| 0.0,
        value: |p| p.hostname.clone(),
    },
    Setting {
        key: "filesystem.cwd",
        title: "working directory",
        weight: 0.0,
        exposure: |_| 0.0,
        value: |p| p.filesystem.cwd.display().to_string(),
    },
    Setting {
        key: "wasm.memory-max-bytes",
        title: "Wasm linear memory",
        weight: 1.0,
        exposure: |p| log_scale(p.wasm.memory_max_bytes as f64, (256u64 << 20) as f64, (4u64 << 30) as f64),
        value: |p| bytes(p.wasm.memory_max_bytes),
    },
    Setting {
        key: "wasm.fuel",
        title: "Wasm fuel",
        weight: 0.0,
        exposure: |p| p.wasm.fuel.map_or(1.0, |f| log_scale(f as f64, 1e9, 1e13)),
        value: |p| p.wasm.fuel.map_or_else(|| "unlimited".into(), |f| f.to_string()),
    },
    Setting {
        key: "wasm.python-modules",
        title: "Python modules in the guest's view",
        weight: 0.0,
        exposure: |p| p.wasm.python_modules.as_ref().map_or(1.0, |m| (m.len() as f64 / 200.0).min(1.0)),
        value: |p| p.wasm.python_modules.as_ref().map_or_else(|| "the whole standard library".into(), |m| m.join(", ")),
    },
];
