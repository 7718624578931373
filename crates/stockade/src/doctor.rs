//! `stockade doctor`: is this host ready, and would a policy run here? Each check reads the
//! kernel's own answer (sysctls, a `clone3` probe in a child that exits at once, the Landlock
//! ABI query, the cgroup mounts) and says what it means for a run.
//!
//! Imports (layers): `error`, `host`, `layers`, `plan`, `policy`, `report`, `supervisor`, `sys`, `wasm`.

use crate::host::{kernel_at_least, kernel_release, seccomp_actions, userns_restrictions};
use crate::layers::cgroup::{self, host::Host};
use crate::layers::namespaces;
use crate::policy::Policy;
use crate::{Job, Output, Plan, Report, Status};
use serde::Serialize;
use std::path::Path;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ok,
    /// Works, with a caveat the detail names.
    Warn,
    /// Missing: runs that need it are refused.
    Fail,
}

/// One host check.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    /// What fixes it on this host, when it is not ok: the commands, with this user's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Check {
    Check { name, verdict, detail: detail.into(), fix: None }
}

/// What the host gives, check by check. `probe` allows the one active test: a `clone3` into
/// every namespace, in a child that exits at once.
pub fn host_checks(probe: bool, guest_dir: Option<&Path>) -> Vec<Check> {
    let mut out = Vec::new();
    let release = kernel_release();
    out.push(if kernel_at_least(&release, 5, 12) {
        check("kernel", Verdict::Ok, format!("Linux {release} (>= 5.12: clone3, close_range, mount_setattr, pidfd)"))
    } else {
        check("kernel", Verdict::Fail, format!("Linux {release}: stockade needs >= 5.12 (clone3, mount_setattr)"))
    });

    let root = crate::sys::geteuid() == 0;
    out.push(namespaces_check(probe, root));

    if root {
        out.push(capabilities_check());
    }

    let hidden = crate::host::proc_overmounts();
    out.push(if hidden.is_empty() {
        check("proc", Verdict::Ok, "nothing hides part of /proc: a jail may mount its own")
    } else {
        let shown: Vec<&str> = hidden.iter().take(4).map(String::as_str).collect();
        check(
            "proc",
            Verdict::Fail,
            format!(
                "{} mount(s) hide part of /proc ({}{}): runs in a user namespace with filesystem.proc other than \"none\" are refused; {}",
                hidden.len(),
                shown.join(", "),
                if hidden.len() > shown.len() { ", ..." } else { "" },
                crate::host::PROC_HINT
            ),
        )
    });

    let abi = crate::sys::landlock_abi();
    out.push(match abi {
        0 => check(
            "landlock",
            Verdict::Fail,
            "no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock): policies with landlock.required = true refuse to run",
        ),
        a if a < 4 => check(
            "landlock",
            Verdict::Warn,
            format!("ABI {a}: filesystem rules; no TCP rules (ABI 4) or scoping (ABI 6) — the network namespace and seccomp cover those"),
        ),
        a => check("landlock", Verdict::Ok, format!("ABI {a} (stockade applies up to 6)")),
    });

    out.push(match seccomp_actions() {
        Some(a) if a.split_whitespace().any(|x| x == "user_notif") && a.contains("kill_process") => {
            check("seccomp", Verdict::Ok, format!("filters with {a}"))
        }
        Some(a) => check(
            "seccomp",
            Verdict::Fail,
            format!("actions {a}: the exec gate needs user_notif and kill_process (Linux >= 5.0)"),
        ),
        None => check("seccomp", Verdict::Fail, "no seccomp filters (CONFIG_SECCOMP_FILTER)"),
    });

    let host = Host::current();
    let want = crate::policy::CgroupPolicy {
        enabled: true,
        best_effort: true,
        parent: None,
        memory_max_bytes: Some(512 << 20),
        pids_max: Some(64),
        cpu_max_us: Some((100_000, 100_000)),
    };
    out.push(match cgroup::plan(&want, &host) {
        Ok(plan) => {
            let r = plan.report(true);
            let verdict = match r.status {
                crate::Enforcement::Enforced => Verdict::Ok,
                crate::Enforcement::Partial => Verdict::Warn,
                crate::Enforcement::NotEnforced => Verdict::Fail,
            };
            let missing = r.reason.map(|m| format!("; {m}")).unwrap_or_default();
            let c = check(
                "cgroups",
                verdict,
                format!("{}{missing}", r.applied).replace(" (cgroups.best-effort = true)", ""),
            );
            Check { fix: (verdict != Verdict::Ok).then(|| cgroup_fix(&host, root)), ..c }
        }
        Err(e) => Check { fix: Some(cgroup_fix(&host, root)), ..check("cgroups", Verdict::Fail, e.to_string()) },
    });

    #[cfg(feature = "wasm")]
    out.push(guests_check(guest_dir));
    #[cfg(not(feature = "wasm"))]
    let _ = guest_dir;
    out
}

/// What gives this user cgroups to limit its runs in, for this host's shape: a delegated systemd
/// scope on cgroup v2, a cgroup root hands the user on v1 (systemd delegates no v1 controller),
/// or runs without cgroup limits.
pub fn cgroup_fix(host: &Host, root: bool) -> String {
    use cgroup::host::Shape;
    let without =
        "or run without cgroup limits: --cgroups-best-effort (cgroups.best-effort = true; every report says so)";
    if root {
        return format!(
            "root makes its cgroups below its own: mount the cgroup filesystem writable (in a container: docs/deploy.md), {without}"
        );
    }
    let user = user_name(crate::sys::geteuid());
    match host.shape() {
        Shape::V2 => format!(
            "run it in a scope of your own with the controllers delegated: systemd-run --user --scope -p Delegate=yes stockade ...; {without}"
        ),
        Shape::Hybrid | Shape::V1 => {
            let mut mounts: Vec<String> = Vec::new();
            for c in ["memory", "pids", "cpu"] {
                if let Some(h) = host.v1.get(c) {
                    let m = h.mount.display().to_string();
                    if !mounts.contains(&m) {
                        mounts.push(m);
                    }
                }
            }
            format!(
                "as root, once: for d in {}; do mkdir -p $d/stockade-{user} && chown {user} $d/stockade-{user} $d/stockade-{user}/cgroup.procs $d/stockade-{user}/tasks; done; then: stockade run --cgroup-parent /stockade-{user} ... (or cgroups.parent = \"/stockade-{user}\"); {without}",
                mounts.join(" ")
            )
        }
        Shape::None => format!("mount cgroup2 on /sys/fs/cgroup, {without}"),
    }
}

/// A user's name (from /etc/passwd), or the uid as a number (which chown takes too).
fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.get(2)?.parse::<u32>().ok()? == uid).then(|| f[0].to_string())
        })
        .unwrap_or_else(|| uid.to_string())
}

/// Whether the namespaces can be created here (`probe`: tried, in a child that exits at
/// once), and which sysctls restrict them.
fn namespaces_check(probe: bool, root: bool) -> Check {
    let restrictions = userns_restrictions();
    let all = namespaces::prepare(&crate::policy::Namespaces {
        user: true,
        pid: true,
        mount: true,
        net: true,
        ipc: true,
        uts: true,
        cgroup: true,
    })
    .clone_flags;
    let refused = if probe { namespaces::find_refused(all) } else { None };
    match (refused, restrictions.is_empty()) {
        (Some(ns), _) => check(
            "namespaces",
            Verdict::Fail,
            format!(
                "clone3 refused the {ns} namespace{}{}",
                if restrictions.is_empty() { String::new() } else { format!(": {}", restrictions.join("; ")) },
                if restrictions.is_empty() && crate::host::under_seccomp_filter() {
                    format!("; {}", crate::host::SECCOMP_HINT)
                } else {
                    String::new()
                }
            ),
        ),
        (None, true) => check(
            "namespaces",
            Verdict::Ok,
            if probe {
                "user, pid, mount, net, ipc, uts and cgroup namespaces created (clone3 with CLONE_PIDFD)"
            } else {
                "no sysctl restricts user namespaces (not probed)"
            },
        ),
        (None, false) => check(
            "namespaces",
            if root { Verdict::Ok } else { Verdict::Warn },
            format!(
                "{}{}",
                if probe { "created as this user; " } else { "" },
                restrictions.join("; ") + if root { " (root is not affected)" } else { "" }
            ),
        ),
    }
}

/// Root with every capability stockade uses, or which are missing and what for.
fn capabilities_check() -> Check {
    let missing = crate::host::missing_root_caps();
    if missing.is_empty() {
        return check("capabilities", Verdict::Ok, "root, with every capability stockade uses");
    }
    let what: Vec<String> = crate::host::ROOT_CAPS
        .iter()
        .filter(|(_, name, _)| missing.contains(name))
        .map(|(_, name, why)| format!("{name} ({why})"))
        .collect();
    check(
        "capabilities",
        Verdict::Fail,
        format!(
            "root without {}: runs are refused; a container dropped them (--cap-drop): give them back \
             (docker/podman --cap-add, Kubernetes securityContext.capabilities.add), or run stockade as a normal \
             user",
            what.join(", ")
        ),
    )
}

#[cfg(feature = "wasm")]
fn guests_check(dir: Option<&Path>) -> Check {
    use crate::wasm::{engine::EngineKind, guests, snapshot};
    let dir = dir.map_or_else(guests::default_dir, Path::to_path_buf);
    let mut missing = Vec::new();
    let mut ok = Vec::new();
    let python = ("python", snapshot::artifact_stem(), snapshot::verify(&dir).map(|_| ()));
    let fetched = guests::ALL.into_iter().map(|g| (g.name, g.name, guests::verify(&g, &dir).map(|_| ())));
    for (name, stem, verified) in std::iter::once(python).chain(fetched) {
        match verified {
            Ok(()) => {
                let unusable = EngineKind::ALL.into_iter().find_map(|kind| {
                    let artifact = guests::artifact_path(&dir, stem, kind);
                    let why = match artifact.exists() {
                        true => crate::wasm::engine::check_artifact(&artifact, kind).err()?,
                        false => "missing".to_string(),
                    };
                    Some(format!("{}: {}", artifact.display(), why))
                });
                if let Some(why) = unusable {
                    missing.push(format!(
                        "{name} not precompiled for this stockade ({why}; `stockade run` compiles it on first use, a \
                         server refuses to start: `stockade guest install`)"
                    ));
                } else {
                    ok.push(name);
                }
            }
            Err(e) => missing.push(e.to_string()),
        }
    }
    let where_ = dir.display();
    match (ok.len(), missing.is_empty()) {
        (_, true) => {
            check("guests", Verdict::Ok, format!("{} installed, verified and precompiled in {where_}", ok.join(", ")))
        }
        (0, false) => check(
            "guests",
            Verdict::Warn,
            format!("{}: `stockade run --python/--js` needs `stockade guest install`", missing.join("; ")),
        ),
        _ => check("guests", Verdict::Warn, format!("{} ready in {where_}; {}", ok.join(", "), missing.join("; "))),
    }
}

/// What a policy gets here: a real run of `self_exe --version` under it, so every layer is
/// built exactly as for a job (the binary is granted read-only).
pub fn try_policy(policy: &Policy, self_exe: &Path) -> Result<Report, crate::Error> {
    let mut p = policy.clone();
    p.add_read_only(&self_exe.display().to_string(), "doctor")?;
    let plan = Plan::prepare(&p, &Job::new(self_exe.display().to_string()).arg("--version"))?;
    plan.run(Output::Capture)
}

/// Whether a doctor's trial run means the policy runs here.
pub fn runs_here(r: &Report) -> bool {
    r.status == Status::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_compare_numerically() {
        assert!(kernel_at_least("6.18.44-fc", 5, 12));
        assert!(kernel_at_least("5.12.0", 5, 12));
        assert!(!kernel_at_least("5.4.0-150-generic", 5, 12));
        assert!(!kernel_at_least("?", 5, 12));
    }
}
