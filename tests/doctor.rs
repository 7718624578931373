//! `stockade doctor` against the kernel's own answers, here and (through `cargo xtask vm-test`)
//! in the cgroup v2 VM with its older kernel and lower Landlock ABI.

mod common;

use common::*;

/// The kernel's Landlock ABI, asked directly (0: none).
fn landlock_abi() -> i64 {
    // SAFETY: a NULL attribute with size 0 and LANDLOCK_CREATE_RULESET_VERSION only queries.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    rc.max(0)
}

fn cgroup_shape() -> &'static str {
    if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "v2"
    } else if std::path::Path::new("/sys/fs/cgroup/unified").exists() {
        "hybrid"
    } else {
        "v1"
    }
}

fn doctor(args: &[&str]) -> (Option<i32>, String) {
    let out = stockade().arg("doctor").args(args).output().expect("doctor");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn doctor_reports_this_host_as_the_kernel_does() {
    if !is_root() {
        eprintln!("skip: needs root (cgroups are not delegated to this user, so doctor would say so)");
        return;
    }
    let (code, out) = doctor(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let check =
        |name: &str| v["checks"].as_array().expect("checks").iter().find(|c| c["name"] == name).cloned().expect(name);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    assert!(check("kernel")["detail"].as_str().expect("detail").contains(release.trim()));
    let abi = landlock_abi();
    let ll = check("landlock");
    if abi == 0 {
        assert_eq!(ll["verdict"], "fail", "{ll}");
    } else {
        assert!(ll["detail"].as_str().expect("detail").contains(&format!("ABI {abi}")), "{ll}");
    }
    assert_eq!(check("namespaces")["verdict"], "ok");
    // The proc check says what mountinfo says (the container test sees mounts hiding parts).
    let hidden = stockade::host::proc_overmounts();
    assert_eq!(check("proc")["verdict"], if hidden.is_empty() { "ok" } else { "fail" }, "{}", check("proc"));
    for m in &hidden {
        assert!(check("proc")["detail"].as_str().expect("detail").contains(m.as_str()) || hidden.len() > 4);
    }
    assert_eq!(check("seccomp")["verdict"], "ok");
    let cg = check("cgroups");
    let detail = cg["detail"].as_str().expect("detail");
    match cgroup_shape() {
        "v2" => assert!(detail.starts_with("cgroup v2") || detail.contains("(v2)"), "{detail}"),
        shape => assert!(detail.starts_with(shape), "{shape}: {detail}"),
    }
    // Nothing failed, so doctor exits 0 (guests may be missing: that is only a warning).
    let failed = v["checks"].as_array().expect("checks").iter().any(|c| c["verdict"] == "fail");
    assert_eq!(code, Some(if failed { 1 } else { 0 }), "{out}");
}

#[test]
fn doctor_says_whether_a_policy_runs_here() {
    if !is_root() {
        eprintln!("skip: needs root (a run's cgroup needs a delegated parent otherwise)");
        return;
    }
    let default = stockade().args(["policy", "default"]).output().expect("default");
    let f = policy_file(&String::from_utf8_lossy(&default.stdout));
    let p = path_of(&f);
    let (code, out) = doctor(&["--policy", &p]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("policy {p}: runs here")), "{out}");
    assert!(out.contains("enforced      seccomp"), "{out}");
    // A policy that needs Landlock ABI 6 runs exactly where the kernel has it.
    let f = policy_file("version = 1\n[landlock]\nrequired = true\nmin-abi = 6\n");
    let p = path_of(&f);
    let (code, out) = doctor(&["--policy", &p]);
    if landlock_abi() >= 6 {
        assert_eq!(code, Some(0), "{out}");
        assert!(out.contains("runs here"), "{out}");
    } else {
        assert_eq!(code, Some(1), "{out}");
        assert!(out.contains("does NOT run here") && out.contains("Landlock"), "{out}");
    }
    // A cgroup parent that does not exist: never runs, and doctor names it.
    let f = policy_file("version = 1\n[cgroups]\nparent = \"/stockade-doctor-no-such-parent\"\n");
    let p = path_of(&f);
    let (code, out) = doctor(&["--policy", &p]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("does NOT run here") && out.contains("stockade-doctor-no-such-parent"), "{out}");
}

/// A root without a capability stockade uses (a container's `--cap-drop`) is told which, by
/// `stockade run` (whose run is refused) and by `doctor` alike. Before: "cannot take owner uid …
/// operation not permitted", naming no capability, while doctor said OK.
#[test]
fn a_missing_capability_is_named_by_run_and_by_doctor() {
    if !is_root() {
        eprintln!("skip: needs root (the capabilities are root's)");
        return;
    }
    let drops = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-setuid", "--inh-caps", "-setuid", "--", "/bin/true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !drops {
        eprintln!("skip: no setpriv that drops from the bounding set (util-linux's; busybox's cannot)");
        return;
    }
    let without = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--bounding-set", "-setuid", "--inh-caps", "-setuid", "--"])
            .arg(stockade_bin())
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("setpriv")
    };
    let out = without(&["run", "--", "/bin/true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("CAP_SETUID") && err.contains("--cap-add"), "{err}");
    let out = without(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let caps = v["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "capabilities").cloned();
    let caps = caps.expect("a capabilities check");
    assert_eq!(caps["verdict"], "fail", "{caps}");
    assert!(caps["detail"].as_str().unwrap_or("").contains("CAP_SETUID"), "{caps}");
    let (_, out) = doctor(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let caps = v["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "capabilities").cloned();
    assert_eq!(caps.expect("a capabilities check")["verdict"], "ok");
}
