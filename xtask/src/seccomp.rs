//! `cargo xtask seccomp-profiles [--check]`: the container seccomp profiles, made from the
//! runtime's own default (moby's `profiles/seccomp/default.json` v0.2.3, the profile Docker and
//! containerd ship, in `xtask/seccomp/moby-default.json`) with only what building a jail needs
//! added. Two forms:
//! - `contrib/container/seccomp.json`: Docker's format (`--security-opt seccomp=FILE`), its
//!   capability and architecture conditions kept;
//! - `contrib/kubernetes/seccomp.json`: plain OCI (a Kubernetes `Localhost` profile: containerd
//!   reads it without the conditions), resolved for x86-64 and the runtime's default capabilities.
//!
//! With `--check`, fails when the files in the tree differ from what this makes.

use serde_json::{Value, json};
use std::path::Path;

/// What a jail needs that the default refuses without CAP_SYS_ADMIN, each with why. Checked by
/// `cargo xtask container`: without any one of these, a run is refused (but unshare, which only
/// a cgroup v1 run with writable cgroups takes).
fn additions() -> Vec<Value> {
    const CLONE_NEWCGROUP: u64 = 0x0200_0000;
    const KEYCTL_JOIN_SESSION_KEYRING: u64 = 1;
    vec![
        json!({
            "names": ["clone3"],
            "action": "SCMP_ACT_ALLOW",
            "comment": "stockade: each run is one clone3 into new user, pid, mount, net, ipc, uts and cgroup \
                namespaces (CLONE_PIDFD, CLONE_INTO_CGROUP: clone3 only). The default answers ENOSYS; seccomp \
                cannot read clone3's flags (they are in memory), so this allows clone3 as such. The clone rule \
                of the default stays: clone(2) with namespace flags is still refused."
        }),
        json!({
            "names": ["unshare"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": CLONE_NEWCGROUP, "op": "SCMP_CMP_EQ"}],
            "comment": "stockade: on cgroup v1 the run moves into its cgroups, then enters a new cgroup namespace \
                (unshare(CLONE_NEWCGROUP) exactly; no other flag)"
        }),
        json!({
            "names": ["mount", "umount2", "pivot_root", "mount_setattr"],
            "action": "SCMP_ACT_ALLOW",
            "comment": "stockade: the run's root is a fresh tmpfs in its own mount namespace (bind mounts of \
                the granted paths, read-only flags set with mount_setattr, its own /proc and /dev), entered \
                with pivot_root, the old root unmounted. The kernel allows these only in a mount namespace \
                the run's user namespace owns; the run's own filter denies them to the program"
        }),
        json!({
            "names": ["sethostname", "setdomainname"],
            "action": "SCMP_ACT_ALLOW",
            "comment": "stockade: the run's hostname and domain name, in its own uts namespace"
        }),
        json!({
            "names": ["keyctl"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": KEYCTL_JOIN_SESSION_KEYRING, "op": "SCMP_CMP_EQ"}],
            "comment": "stockade: a fresh session keyring per run (KEYCTL_JOIN_SESSION_KEYRING only), so that \
                no run reaches the keys of the session it was started from"
        }),
    ]
}

/// The container default's capabilities (Docker's and containerd's): the Kubernetes profile is
/// resolved against them.
const DEFAULT_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_str).collect())
}

/// The runtime's default profile, as kept in the tree.
fn upstream(root: &Path) -> Result<Value, String> {
    let src = root.join("xtask/seccomp/moby-default.json");
    let text = std::fs::read_to_string(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", src.display()))
}

/// Docker's format: the default, less its clone3-is-ENOSYS rule, plus the additions.
fn docker(upstream: &Value) -> Result<Value, String> {
    let mut p = upstream.clone();
    let rules = p.get_mut("syscalls").and_then(Value::as_array_mut).ok_or("the default has no syscalls list")?;
    let before = rules.len();
    rules.retain(|r| !(strs(r.get("names")) == ["clone3"] && r["action"] == "SCMP_ACT_ERRNO"));
    if rules.len() + 1 != before {
        return Err("the default's clone3 ENOSYS rule was not found exactly once".into());
    }
    rules.extend(additions());
    Ok(p)
}

/// Plain OCI for x86-64 and the default capabilities: conditions resolved, rules that do not
/// apply dropped.
fn oci(docker: &Value) -> Result<Value, String> {
    let x86 = ["amd64", "x32", "x86"];
    let mut out = Vec::new();
    for r in docker["syscalls"].as_array().ok_or("no syscalls")? {
        let inc = &r["includes"];
        let exc = &r["excludes"];
        // Conditions this resolves; a new kind upstream must be read before it is flattened.
        // (minKernel is met: the nodes need Linux >= 6.3.)
        for cond in [inc, exc] {
            if let Some(k) =
                cond.as_object().and_then(|o| o.keys().find(|k| !["caps", "arches", "minKernel"].contains(&k.as_str())))
            {
                return Err(format!("a rule of the default has a condition this does not resolve: {k} in {r}"));
            }
        }
        let caps_ok = strs(inc.get("caps")).iter().all(|c| DEFAULT_CAPS.contains(c))
            && !strs(exc.get("caps")).iter().any(|c| DEFAULT_CAPS.contains(c));
        let inc_arches = strs(inc.get("arches"));
        let arch_ok = (inc_arches.is_empty() || inc_arches.iter().any(|a| x86.contains(a)))
            && !strs(exc.get("arches")).iter().any(|a| x86.contains(a));
        if !(caps_ok && arch_ok) {
            continue;
        }
        let mut rule = serde_json::Map::new();
        for key in ["names", "action", "errnoRet", "args", "comment"] {
            if let Some(v) = r.get(key).filter(|v| !v.is_null()) {
                rule.insert(key.into(), v.clone());
            }
        }
        out.push(Value::Object(rule));
    }
    Ok(json!({
        "defaultAction": docker["defaultAction"],
        "defaultErrnoRet": docker["defaultErrnoRet"],
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": out,
    }))
}

/// The Docker profile without one of the additions' calls (`cargo xtask container` shows each
/// is needed).
pub fn docker_without(root: &Path, call: &str) -> Result<String, String> {
    let mut p = docker(&upstream(root)?)?;
    let rules = p["syscalls"].as_array_mut().ok_or("no syscalls")?;
    let n = rules.len();
    for r in rules.iter_mut().skip(n - additions().len()) {
        if let Some(names) = r["names"].as_array_mut() {
            names.retain(|x| x != call);
        }
    }
    rules.retain(|r| r["names"].as_array().is_some_and(|a| !a.is_empty()));
    serde_json::to_string(&p).map_err(|e| e.to_string())
}

/// The calls the additions allow.
pub fn added_calls() -> Vec<String> {
    additions().iter().flat_map(|r| strs(r.get("names")).into_iter().map(String::from).collect::<Vec<_>>()).collect()
}

pub fn profiles(root: &Path, args: &[String]) -> Result<(), String> {
    let check = args.iter().any(|a| a == "--check");
    let docker = docker(&upstream(root)?)?;
    let oci = oci(&docker)?;
    let mut stale = Vec::new();
    for (path, value) in [("contrib/container/seccomp.json", &docker), ("contrib/kubernetes/seccomp.json", &oci)] {
        let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n";
        let file = root.join(path);
        if check {
            if std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str()) {
                stale.push(path);
            }
        } else {
            std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
            println!("wrote {path}");
        }
    }
    if !stale.is_empty() {
        return Err(format!(
            "{} differ from what xtask/src/seccomp.rs makes: run cargo xtask seccomp-profiles",
            stale.join(", ")
        ));
    }
    if check {
        println!("seccomp profiles: up to date with xtask/seccomp/moby-default.json and the additions");
    }
    Ok(())
}
