//! `stockade policy lint`: warnings with stable ids, each with the key to look at, a one-line
//! why and a fix. A valid policy can still be a weak one; these say where.

use super::{DATA_DIRS, SYSTEM_DIRS, looks_secret, under};
use crate::policy::{Policy, ProcMode, RlimitKey, StdinMode, SyscallGroup};
use serde::Serialize;

/// One warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Warning {
    /// Stable id: `SL` and three digits; never reused for another rule.
    pub id: &'static str,
    /// Stable short name.
    pub name: &'static str,
    /// The policy key to look at (as in the file, for its line and column).
    pub key: String,
    pub why: String,
    pub fix: String,
}

/// Every rule: id, name, and what it says in one line (for `docs/` and `--help`).
pub const RULES: &[(&str, &str, &str)] = &[
    ("SL001", "network-allowed", "the program may open network sockets, or shares the host's network"),
    ("SL002", "exec-allowed", "the program may run other programs after it starts"),
    ("SL003", "syscall-group-allowed", "a denied-by-default kernel interface is re-allowed"),
    ("SL004", "writable-system-dir", "a system directory is writable inside"),
    ("SL005", "no-memory-limit", "nothing bounds the run's memory"),
    ("SL006", "no-pids-limit", "nothing bounds the run's process count (fork bombs)"),
    ("SL007", "long-timeout", "the wall-clock limit is over ten minutes"),
    ("SL008", "rlimit-as-with-wasm", "an address-space rlimit breaks the Wasm runner's memory reservations"),
    ("SL009", "best-effort-layer", "a layer may silently be missing on a weaker host"),
    ("SL010", "env-passes-secrets", "a passed environment variable looks like a secret"),
    ("SL011", "output-uncapped", "program output is not capped"),
    ("SL012", "writable-exec", "files written inside may be executed"),
    ("SL013", "namespace-off", "a namespace is shared with the host"),
    ("SL014", "proc-full", "/proc shows the kernel's global files"),
    ("SL015", "data-dir-visible", "a directory with users' or services' data is visible"),
    ("SL016", "stdin-inherited", "the program reads the caller's stdin"),
    ("SL017", "egress-wildcard", "the egress list lets the program reach any name below a domain"),
    ("SL018", "egress-private-address", "the egress list names a loopback, private or link-local address"),
];

fn warn(id: &'static str, key: impl Into<String>, why: impl Into<String>, fix: impl Into<String>) -> Warning {
    let name = RULES.iter().find(|r| r.0 == id).map_or("?", |r| r.1);
    Warning { id, name, key: key.into(), why: why.into(), fix: fix.into() }
}

/// The key of `group` in `seccomp.allow`, as written (`seccomp.allow[N]`).
fn allow_key(p: &Policy, g: SyscallGroup) -> String {
    p.seccomp.allow.iter().position(|x| *x == g).map_or("seccomp.allow".into(), |i| format!("seccomp.allow[{i}]"))
}

/// Lints a validated policy.
pub fn lint(p: &Policy) -> Vec<Warning> {
    let mut w = Vec::new();
    lint_network_exec(p, &mut w);
    lint_egress(p, &mut w);
    lint_system_dirs(p, &mut w);
    lint_limits(p, &mut w);
    lint_best_effort(p, &mut w);
    lint_env_output(p, &mut w);
    lint_exposure(p, &mut w);
    w
}

/// SL017-SL018: an egress list's wide entries.
fn lint_egress(p: &Policy, w: &mut Vec<Warning>) {
    use crate::policy::EgressHost;
    for (i, r) in p.network.egress_allow.iter().enumerate() {
        let key = format!("network.egress-allow[{i}]");
        match &r.host {
            EgressHost::Below(d) => w.push(warn(
                "SL017",
                key,
                format!("{r} lets the program reach every name below {d}, whoever runs them"),
                "list the names the program needs",
            )),
            EgressHost::Ip(ip) if !crate::policy::egress::is_public(*ip) => w.push(warn(
                "SL018",
                key,
                format!("{r} is not a public address: the program can reach the service there (the host's own, say)"),
                "list a service the program needs only, on its port",
            )),
            _ => {}
        }
    }
}

/// SL001–SL003: network access, exec after start, and re-allowed system call groups.
fn lint_network_exec(p: &Policy, w: &mut Vec<Warning>) {
    if p.seccomp.allow_network() {
        w.push(warn(
            "SL001",
            allow_key(p, SyscallGroup::Network),
            "network system calls are allowed: the program may open TCP/UDP sockets",
            "remove \"network\" from seccomp.allow (the network namespace alone leaves only a downed loopback)",
        ));
    }
    if !p.namespaces.net {
        w.push(warn(
            "SL001",
            "namespaces.net",
            "the program shares the host's network: every interface, every listening service on localhost",
            "set namespaces.net = true",
        ));
    }
    if !p.seccomp.deny_exec() {
        w.push(warn(
            "SL002",
            allow_key(p, SyscallGroup::Exec),
            "exec is allowed after the program starts: it can run shells and binaries it can read",
            "remove \"exec\" from seccomp.allow unless the program must start others (then keep writable-exec off)",
        ));
    }
    for g in &p.seccomp.allow {
        if matches!(g, SyscallGroup::Network | SyscallGroup::Exec) {
            continue;
        }
        w.push(warn(
            "SL003",
            allow_key(p, *g),
            format!("the {:?} system call group is denied by default and re-allowed here", g.name()),
            format!("remove {:?} from seccomp.allow unless the program cannot run without it", g.name()),
        ));
    }
}

/// SL004: system directories granted writable.
fn lint_system_dirs(p: &Policy, w: &mut Vec<Warning>) {
    for g in p.filesystem.grants.iter().filter(|g| g.writable && under(&g.path, SYSTEM_DIRS)) {
        w.push(warn(
            "SL004",
            g.origin.clone(),
            format!("{} is a system directory and is writable inside", g.path.display()),
            "grant a dedicated work directory read-write instead",
        ));
    }
}

/// SL005–SL008: missing memory and process limits, a long wall clock, an address-space rlimit.
fn lint_limits(p: &Policy, w: &mut Vec<Warning>) {
    if !p.cgroups.enabled || p.cgroups.memory_max_bytes.is_none() {
        let key = if p.cgroups.enabled { "cgroups.memory-max-bytes" } else { "cgroups.enabled" };
        w.push(warn(
            "SL005",
            key,
            "no memory limit: one run can take the host's memory",
            "set cgroups.memory-max-bytes (and cgroups.enabled = true)",
        ));
    }
    if !p.cgroups.enabled || p.cgroups.pids_max.is_none() {
        let key = if p.cgroups.enabled { "cgroups.pids-max" } else { "cgroups.enabled" };
        w.push(warn(
            "SL006",
            key,
            "no process limit: a fork bomb inside takes the host's pid space",
            "set cgroups.pids-max (and cgroups.enabled = true)",
        ));
    }
    if p.wall_timeout.as_secs() > 600 {
        w.push(warn(
            "SL007",
            "limits.wall-timeout-ms",
            format!(
                "the wall-clock limit is {} s: a stuck or hostile run holds its resources that long",
                p.wall_timeout.as_secs()
            ),
            "lower limits.wall-timeout-ms to what the job needs",
        ));
    }
    if p.rlimits.iter().any(|(k, l)| *k == RlimitKey::AddressSpaceBytes && matches!(l, crate::policy::Limit::Value(_)))
    {
        w.push(warn(
            "SL008",
            "rlimits.address-space-bytes",
            "Wasmtime reserves several GiB of address space per linear memory: the Wasm runner fails under this limit",
            "remove rlimits.address-space-bytes; bound memory with cgroups.memory-max-bytes and wasm.memory-max-bytes",
        ));
    }
}

/// SL009: layers that may silently be missing on a weaker host.
fn lint_best_effort(p: &Policy, w: &mut Vec<Warning>) {
    for (key, on, what) in [
        (
            "landlock.required",
            !p.landlock.required,
            "on a kernel below landlock.min-abi the run goes ahead without (some of) Landlock",
        ),
        ("seccomp.required", !p.seccomp.required, "on a kernel without seccomp the run goes ahead without its filter"),
        (
            "cgroups.best-effort",
            p.cgroups.enabled && p.cgroups.best_effort,
            "a missing cgroup controller is skipped, not refused",
        ),
    ] {
        if on {
            w.push(warn(
                "SL009",
                key,
                format!("{what} (the report says so, the caller may not look)"),
                format!("set {key} = {}", key != "cgroups.best-effort"),
            ));
        }
    }
}

/// SL010–SL011: secret-looking passed variables and uncapped output.
fn lint_env_output(p: &Policy, w: &mut Vec<Warning>) {
    for (i, name) in p.env_pass.iter().enumerate() {
        if looks_secret(name) {
            w.push(warn(
                "SL010",
                format!("environment.pass[{i}]"),
                format!("{name} looks like a secret, and the program can read and leak it"),
                "pass only what the program needs; give secrets to the supervisor, not the job",
            ));
        }
    }
    for (key, cap) in [("output.stdout-max-bytes", p.stdout_max_bytes), ("output.stderr-max-bytes", p.stderr_max_bytes)]
    {
        if cap.is_none() {
            w.push(warn(
                "SL011",
                key,
                "output is unlimited: a flood reaches the caller (or its memory, with --report -)",
                format!("set {key} (default 1048576)"),
            ));
        }
    }
}

/// SL012–SL016: writable-exec, shared namespaces, full /proc, visible data directories, inherited stdin.
fn lint_exposure(p: &Policy, w: &mut Vec<Warning>) {
    if p.filesystem.writable_exec {
        w.push(warn(
            "SL012",
            "filesystem.writable-exec",
            "files the program writes (in /tmp and read-write paths) may be executed or mapped executable",
            "set filesystem.writable-exec = false",
        ));
    }
    let ns = p.namespaces;
    for (key, on) in [
        ("namespaces.user", ns.user),
        ("namespaces.pid", ns.pid),
        ("namespaces.mount", ns.mount),
        ("namespaces.ipc", ns.ipc),
        ("namespaces.uts", ns.uts),
        ("namespaces.cgroup", ns.cgroup),
    ] {
        if !on {
            w.push(warn(
                "SL013",
                key,
                format!("{key} = false: the program shares it with the host"),
                format!("set {key} = true"),
            ));
        }
    }
    if p.filesystem.proc == ProcMode::Full {
        w.push(warn(
            "SL014",
            "filesystem.proc",
            "/proc has /proc/sys, /proc/kallsyms and the other kernel-wide files",
            "set filesystem.proc = \"pid-only\"",
        ));
    }
    for g in p.filesystem.grants.iter().filter(|g| !g.writable && under(&g.path, DATA_DIRS)) {
        w.push(warn(
            "SL015",
            g.origin.clone(),
            format!("{} holds users' or services' data and is visible inside", g.path.display()),
            "grant the one directory the job needs",
        ));
    }
    if p.stdin == StdinMode::Inherit {
        w.push(warn(
            "SL016",
            "process.stdin",
            "the program reads the caller's stdin (a terminal, or the caller's input stream)",
            "set process.stdin = \"null\" and pass input through a file",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_policy_has_no_warnings() {
        assert_eq!(lint(&Policy::builtin()), vec![]);
    }

    #[test]
    fn ids_are_unique() {
        for (i, r) in RULES.iter().enumerate() {
            assert!(RULES[..i].iter().all(|x| x.0 != r.0 && x.1 != r.1), "{r:?}");
        }
    }
}
