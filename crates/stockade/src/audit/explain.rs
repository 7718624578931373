//! `stockade policy explain`: the resolved policy in plain words — what the program sees, what
//! it cannot do, every limit with its unit, and what this host would enforce — without running
//! anything.

use super::{bytes, opt_bytes, score};
use crate::layers::cgroup::{self, host::Host};
use crate::policy::{Limit, Policy, ProcMode, StdinMode, SyscallGroup};
use serde::Serialize;

/// The explanation, in sections of lines (the JSON form has the same lines).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Explanation {
    pub policy: String,
    pub score: f64,
    pub sees: Vec<String>,
    pub cannot: Vec<String>,
    pub limits: Vec<String>,
    pub on_this_host: Vec<String>,
}

impl Explanation {
    /// The text form.
    pub fn to_text(&self) -> String {
        let mut s = format!("policy {} (exposure score {:.1} / 10)\n", self.policy, self.score);
        for (title, lines) in [
            ("What the program sees", &self.sees),
            ("What it cannot do", &self.cannot),
            ("Limits", &self.limits),
            ("On this host (nothing was run)", &self.on_this_host),
        ] {
            s.push('\n');
            s.push_str(title);
            s.push('\n');
            for l in lines {
                s.push_str("  ");
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() { "none".into() } else { items.join(", ") }
}

/// Explains a policy; `host` adds what this machine would enforce.
pub fn explain(p: &Policy, host: bool) -> Explanation {
    let sees = sees(p);
    let cannot = cannot(p);
    let limits = limits(p);
    let on_this_host = if host { on_this_host(p) } else { Vec::new() };
    Explanation { policy: p.origin.clone(), score: score(p).score, sees, cannot, limits, on_this_host }
}

/// What the program sees: its filesystem, identity, environment, stdin and hostname.
fn sees(p: &Policy) -> Vec<String> {
    let mut sees = Vec::new();
    if p.namespaces.mount {
        sees_filesystem(p, &mut sees);
    } else {
        sees.push("the host's whole filesystem, as the jail's user may access it (namespaces.mount = false)".into());
    }
    let id = p.identity;
    sees.push(format!(
        "its identity: uid {} gid {} inside; on the host uid {} gid {} when stockade runs as root, else the caller's",
        id.uid, id.gid, id.host_uid, id.host_gid
    ));
    let set: Vec<String> = p.env_set.iter().map(|(k, v)| format!("{k}={v}")).collect();
    sees.push(format!("environment: {}; from the caller's: {}", list(&set), list(&p.env_pass)));
    sees.push(format!(
        "stdin: {}; hostname: {}",
        if p.stdin == StdinMode::Inherit { "the caller's" } else { "/dev/null" },
        if p.namespaces.uts { p.hostname.as_str() } else { "the host's" }
    ));
    sees
}

/// The lines of the jail's own filesystem (namespaces.mount): grants, writable copies, /dev/shm, /tmp, /proc, /dev.
fn sees_filesystem(p: &Policy, sees: &mut Vec<String>) {
    let fs = &p.filesystem;
    let paths = |writable: bool, optional: bool| -> Vec<String> {
        fs.grants
            .iter()
            .filter(|g| g.writable == writable && g.optional == optional)
            .map(|g| g.path.display().to_string())
            .collect()
    };
    sees.push("a fresh read-only root (tmpfs) holding only:".into());
    sees.push(format!("  read-only, executable: {}", list(&paths(false, false))));
    let optional = paths(false, true);
    if !optional.is_empty() {
        sees.push(format!("  read-only where present on the host: {}", list(&optional)));
    }
    let exec = if fs.writable_exec { "executable" } else { "not executable (noexec)" };
    sees.push(format!(
        "  writable, {exec}: {} (each a copy on a tmpfs of at most {} and {} files, written back when the run \
         ends)",
        list(&paths(true, false)),
        bytes(fs.writable_max_bytes),
        fs.writable_max_files
    ));
    if fs.dev {
        sees.push(format!(
            "  /dev/shm: {}",
            fs.shm_size_bytes.map_or_else(|| "none".into(), |t| format!("private tmpfs of {}, {exec}", bytes(t)))
        ));
    }
    sees.push(format!(
        "  /tmp: {}",
        fs.tmp_size_bytes.map_or_else(|| "none".into(), |t| format!("private tmpfs of {}, {exec}", bytes(t)))
    ));
    sees.push(format!(
        "  /proc: {}",
        match fs.proc {
            ProcMode::PidOnly => "its own processes only (subset=pid: no /proc/sys, /proc/kallsyms)",
            ProcMode::Full => "its own processes and every kernel-wide file",
            ProcMode::None => "none",
        }
    ));
    sees.push(format!(
        "  /dev: {}",
        if fs.dev { "null, zero, full, random, urandom, and the fd/stdio links" } else { "none" }
    ));
    sees.push(format!("  working directory {}", fs.cwd.display()));
}

/// What the program cannot do: network, exec, system call groups, host counters, namespaces, privileges.
fn cannot(p: &Policy) -> Vec<String> {
    let mut cannot = Vec::new();
    let egress: Vec<String> = p.network.egress_allow.iter().map(ToString::to_string).collect();
    let net = match (p.namespaces.net, p.seccomp.allow_network()) {
        (true, false) if !egress.is_empty() => format!(
            "reach any host but {} (at most {} connections, {} bytes a run): only through the supervisor's proxy, \
             which resolves names itself and refuses non-public addresses not listed; its network namespace has no \
             route out, its filter allows TCP sockets and connect only (no UDP, DNS, bind or listen), Landlock \
             pins connect to the proxy's port",
            list(&egress),
            p.network.egress_max_connections,
            p.network.egress_max_bytes
        ),
        (true, false) => "open any network connection: no interfaces (network namespace), network system calls denied, Landlock TCP rules".to_string(),
        (true, true) => "reach any network: its namespace has only a downed loopback (network system calls allowed)".into(),
        (false, false) => "open non-unix sockets (seccomp) — but it shares the host's network namespace".into(),
        (false, true) => "(nothing stops network access: host network namespace, network system calls allowed)".into(),
    };
    cannot.push(net);
    cannot.push(if p.seccomp.deny_exec() {
        "run another program after it starts: every exec after the first is refused by the supervisor's seccomp gate"
            .into()
    } else {
        "(exec is allowed: it can start any program it can see)".into()
    });
    let answered =
        |g: &SyscallGroup| matches!(g, SyscallGroup::Network | SyscallGroup::Exec | SyscallGroup::HostCounters);
    let denied: Vec<String> = SyscallGroup::ALL
        .iter()
        .filter(|g| !p.seccomp.allow.contains(g) && !answered(g))
        .map(|g| g.name().to_string())
        .collect();
    cannot.push(format!("use these system call groups (EPERM): {}", list(&denied)));
    if !p.seccomp.allow.contains(&SyscallGroup::HostCounters) && !p.seccomp.kill.contains(&SyscallGroup::HostCounters) {
        cannot.push(
            "read the host's counters (sysinfo): the supervisor answers with the run's own memory, processes and uptime"
                .into(),
        );
    }
    let kill: Vec<String> = p.seccomp.kill.iter().map(|g| g.name().to_string()).collect();
    if !kill.is_empty() {
        cannot.push(format!("use these without the whole run being killed (seccomp-violation): {}", list(&kill)));
    }
    let ns = p.namespaces;
    let shared: Vec<String> = [
        ("user", ns.user),
        ("pid", ns.pid),
        ("mount", ns.mount),
        ("net", ns.net),
        ("ipc", ns.ipc),
        ("uts", ns.uts),
        ("cgroup", ns.cgroup),
    ]
    .iter()
    .filter(|(_, on)| !on)
    .map(|(n, _)| n.to_string())
    .collect();
    cannot.push(if shared.is_empty() {
        "see or signal host processes, IPC objects or the hostname: every namespace is new".into()
    } else {
        format!("(shares these namespaces with the host: {})", list(&shared))
    });
    cannot.push("hold any capability, gain privileges (no_new_privs, securebits locked), or run as host root".into());
    cannot
}

/// Every limit with its unit: wall clock, cgroups, rlimits, output caps, Wasm guests.
fn limits(p: &Policy) -> Vec<String> {
    let mut limits =
        vec![format!("wall clock: {} ms, then every process of the run is killed", p.wall_timeout.as_millis())];
    let cg = &p.cgroups;
    if cg.enabled {
        limits.push(format!("memory: {} for the whole run, no swap", opt_bytes(cg.memory_max_bytes)));
        limits.push(format!(
            "processes and threads: {}",
            cg.pids_max.map_or_else(|| "unlimited".into(), |n| format!("{n} at once"))
        ));
        limits.push(format!(
            "CPU: {}",
            cg.cpu_max_us.map_or_else(
                || "unlimited".into(),
                |(q, per)| format!("{} % of one CPU ({q} us per {per} us)", q * 100 / per.max(1))
            )
        ));
        if cg.best_effort {
            limits.push("(a limit whose controller the host lacks is skipped: cgroups.best-effort)".into());
        }
    } else {
        limits.push("(no cgroup: no memory, process or CPU limit for the run as a whole)".into());
    }
    let rl: Vec<String> = p
        .rlimits
        .iter()
        .map(|(k, l)| match l {
            Limit::Value(v) => format!("{} {v}", k.key()),
            Limit::Unlimited => format!("{} unlimited", k.key()),
        })
        .collect();
    limits.push(format!("rlimits (per process, soft = hard): {}", list(&rl)));
    limits.push(format!(
        "output: stdout {}, stderr {} passed on{}",
        opt_bytes(p.stdout_max_bytes),
        opt_bytes(p.stderr_max_bytes),
        match (p.over_cap, p.stdout_max_bytes.or(p.stderr_max_bytes)) {
            (_, None) => "",
            (crate::policy::OverCap::End, Some(_)) => "; a run that writes past a cap is killed (output-limit)",
            (crate::policy::OverCap::Truncate, Some(_)) => "; the rest is counted and dropped while the run goes on",
        }
    ));
    limits.push(format!(
        "Wasm guests: {} of linear memory, fuel {}, {} table elements, {} instances",
        bytes(p.wasm.memory_max_bytes),
        p.wasm.fuel.map_or_else(|| "unlimited".into(), |f| f.to_string()),
        p.wasm.table_elements_max,
        p.wasm.instances_max
    ));
    limits
}

/// What this host would enforce: kernel, Landlock, seccomp, user namespaces, cgroups (nothing is run).
fn on_this_host(p: &Policy) -> Vec<String> {
    let mut on_this_host = vec![format!("kernel: Linux {}", crate::host::kernel_release())];
    let abi = crate::sys::landlock_abi();
    let ll = &p.landlock;
    on_this_host.push(match (abi, abi >= ll.min_abi, ll.required) {
        (_, true, _) => format!(
            "Landlock: kernel ABI {abi}, applied up to ABI {} (policy needs {}): enforced",
            abi.min(6),
            ll.min_abi
        ),
        (0, false, true) => "Landlock: none in this kernel: the run would be refused (landlock.required)".into(),
        (_, false, true) => {
            format!("Landlock: kernel ABI {abi} < landlock.min-abi {}: the run would be refused", ll.min_abi)
        }
        (_, false, false) => {
            format!("Landlock: kernel ABI {abi} < landlock.min-abi {}: partial (landlock.required = false)", ll.min_abi)
        }
    });
    on_this_host.push(match crate::host::seccomp_actions() {
        Some(a) if a.contains("user_notif") => "seccomp: filters with user notification: enforced".into(),
        _ if p.seccomp.required => "seccomp: not usable here: the run would be refused (seccomp.required)".into(),
        _ => "seccomp: not usable here: not enforced (seccomp.required = false)".into(),
    });
    let restrictions = crate::host::userns_restrictions();
    if p.namespaces.user && !restrictions.is_empty() {
        on_this_host.push(format!("user namespaces: restricted: {}", restrictions.join("; ")));
    }
    on_this_host.push(match cgroup::plan(&p.cgroups, &Host::current()) {
        Ok(plan) => {
            let r = plan.report(true);
            format!("cgroups: {}{}", r.applied, r.reason.map(|m| format!(" — {m}")).unwrap_or_default())
        }
        Err(e) => format!("cgroups: the run would be refused: {e}"),
    });
    on_this_host
}
