//! A kernel older than what a policy asks for: the run refuses when the layer is required, and
//! runs with the layer reported `partial` when it is best-effort. Needs a kernel whose Landlock
//! ABI is below 6 — the test VM (`cargo xtask vm-test`, Linux 6.1, ABI 2); skips elsewhere.

mod common;

use common::*;
use stockade::{Enforcement, Status};

#[test]
fn landlock_below_min_abi_refuses_when_required_and_is_partial_when_not() {
    let abi = stockade::host::landlock_abi();
    if abi >= 6 || abi == 0 {
        eprintln!("skip: Landlock ABI {abi} here; this test needs 1..5 (run it with `cargo xtask vm-test`)");
        return;
    }
    let required = policy_file("version = 1\n[landlock]\nrequired = true\nmin-abi = 6\n");
    let out = stockade()
        .args(["run", "--policy", &path_of(&required), "--", "/bin/sh", "-c", "echo ran"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "the program ran");
    assert!(
        stderr.contains(&format!(
            "landlock: the policy needs Landlock ABI 6 (abstract-unix-socket and signal scoping) but this kernel has ABI {abi}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("landlock.min-abi") && stderr.contains("landlock.required = false"), "{stderr}");

    let best_effort = policy_file("version = 1\n[landlock]\nrequired = false\nmin-abi = 6\n");
    let (r, _) = run_report(&["--policy", &path_of(&best_effort), "--", "/bin/sh", "-c", "echo ran"]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "ran\n"), "{r:?}");
    let ll = r.enforcement.iter().find(|l| l.layer == "landlock").expect("landlock layer");
    assert_eq!(ll.status, Enforcement::Partial, "{ll:?}");
    assert!(ll.applied.starts_with(&format!("ABI {abi} ")), "{ll:?}");
    assert!(ll.reason.as_deref().is_some_and(|r| r.contains("below landlock.min-abi = 6")), "{ll:?}");
}

#[test]
fn the_default_policy_runs_with_every_layer_accounted_for() {
    let (r, _) = run_report(&["--", "/bin/sh", "-c", "echo ok"]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "ok\n"), "{r:?}");
    for layer in &r.enforcement {
        assert_eq!(layer.status, Enforcement::Enforced, "{layer:?}");
    }
    let ll = r.enforcement.iter().find(|l| l.layer == "landlock").expect("landlock layer");
    let abi = stockade::host::landlock_abi();
    assert!(ll.applied.starts_with(&format!("ABI {} ", abi.min(6))), "{ll:?}");
}
