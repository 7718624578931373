//! Bad input gets a clear error naming the file, key or path, and leaves nothing behind.

mod common;

use common::*;

struct Refusal {
    code: Option<i32>,
    stderr: String,
}

/// Runs stockade, checking that no mount appeared and no process of the run is left.
fn refused(args: &[&str]) -> Refusal {
    let mounts = mount_count();
    let out = stockade().args(args).output().expect("spawn");
    assert_eq!(mount_count(), mounts, "a mount was left behind");
    Refusal { code: out.status.code(), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

fn policy_file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".toml").tempfile().expect("tmp");
    std::fs::write(f.path(), text).expect("write");
    f
}

#[test]
fn unreadable_policy() {
    let r = refused(&["run", "--policy", "/nonexistent/p.toml", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert_eq!(r.stderr, "stockade: /nonexistent/p.toml: no such file or directory\n");
    let r = refused(&["run", "--policy", "/usr", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert_eq!(r.stderr, "stockade: /usr: is a directory, not a regular file\n");
    // A device would be read until memory runs out: refused, as is anything but a regular file.
    let r = refused(&["run", "--policy", "/dev/zero", "--", "/bin/true"]);
    assert_eq!(r.stderr, "stockade: /dev/zero: is a device, not a regular file\n");
    // The review tools say it the same way.
    let r = refused(&["policy", "check", "/nonexistent/p.toml"]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(1), "stockade: /nonexistent/p.toml: no such file or directory\n"));
}

/// One check of each value, wherever it comes from: `--timeout 0` and a file's
/// `wall-timeout-ms = 0` are refused in the same words.
#[test]
fn a_value_is_refused_in_the_same_words_from_a_flag_or_a_file() {
    let r = refused(&["run", "--timeout", "0", "--", "/bin/true"]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(125), "stockade: --timeout: must be > 0\n"));
    let f = policy_file("version = 1\n[limits]\nwall-timeout-ms = 0\n");
    let p = f.path().display().to_string();
    let r = refused(&["run", "--policy", &p, "--", "/bin/true"]);
    assert_eq!(r.stderr, format!("stockade: {p}:3:19: limits.wall-timeout-ms: must be > 0\n"));
    let r = refused(&["run", "--timeout", "8d", "--", "/bin/true"]);
    assert!(r.stderr.contains("unknown unit \"d\""), "{}", r.stderr);
    let r = refused(&["run", "--timeout", "200h", "--", "/bin/true"]);
    assert_eq!(r.stderr, "stockade: --timeout: must be <= 604800000 (one week)\n");
}

#[test]
fn malformed_policy_names_file_and_line() {
    let f = policy_file("version = 1\n[limits\nwall-timeout-ms = 5\n");
    let p = f.path().display().to_string();
    let r = refused(&["run", "--policy", &p, "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.starts_with(&format!("stockade: {p}:2:")), "{}", r.stderr);
}

#[test]
fn unknown_key_and_out_of_range_values_name_the_key() {
    let f = policy_file("version = 1\n[namespaces]\nnett = false\n");
    let p = f.path().display().to_string();
    let r = refused(&["run", "--policy", &p, "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains(&format!("{p}:3:1: namespaces.nett: unknown field `nett`")), "{}", r.stderr);

    let f = policy_file("version = 1\n[limits]\nwall-timeout-ms = 0\n[identity]\nhost-uid = 0\n");
    let p = f.path().display().to_string();
    let r = refused(&["run", "--policy", &p, "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains(&format!("{p}:3:19: limits.wall-timeout-ms: must be > 0")), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("{p}:5:12: identity.host-uid: must not be 0")), "{}", r.stderr);

    let f = policy_file("version = 3\n");
    let p = f.path().display().to_string();
    let r = refused(&["run", "--policy", &p, "--", "/bin/true"]);
    assert!(r.stderr.contains("version: unsupported version 3"), "{}", r.stderr);
}

#[test]
fn missing_program() {
    let r = refused(&["run"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains("nothing to run: give -- PROGRAM [ARGS...] (or --python, --js, --wasm)"), "{}", r.stderr);
    let r = refused(&["run", "--", "no-such-program-stockade"]);
    assert_eq!(r.code, Some(127));
    assert!(r.stderr.contains("program \"no-such-program-stockade\": not found in the jail's PATH"), "{}", r.stderr);
    let r = refused(&["run", "--", "/nonexistent/prog"]);
    assert_eq!(r.code, Some(127));
    assert_eq!(r.stderr, "stockade: program /nonexistent/prog: no such file or directory\n");
}

#[test]
fn program_outside_the_visible_paths() {
    let r = refused(&["run", "--", "/etc/passwd"]);
    assert_eq!(r.code, Some(127));
    assert!(r.stderr.contains("program /etc/passwd is not visible inside the jail"), "{}", r.stderr);
    // A script whose interpreter is not visible is refused the same way, naming the interpreter.
    let dir = tempfile::tempdir().expect("tmp");
    let script = dir.path().join("s");
    std::fs::write(&script, "#!/opt/nonexistent-interp/bin/x\n").expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let d = dir.path().display().to_string();
    let s = script.display().to_string();
    let r = refused(&["run", "--ro", &d, "--", &s]);
    assert_eq!(r.code, Some(127));
    assert!(r.stderr.contains("/opt/nonexistent-interp/bin/x: no such file or directory"), "{}", r.stderr);
    // Not executable.
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    let r = refused(&["run", "--ro", &d, "--", &s]);
    assert_eq!(r.code, Some(126));
    assert!(r.stderr.contains("has no execute permission"), "{}", r.stderr);
}

#[test]
fn grant_paths_that_do_not_exist_or_are_refused() {
    let r = refused(&["run", "--ro", "/nonexistent/dir", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert_eq!(r.stderr, "stockade: --ro /nonexistent/dir: no such file or directory\n");
    let r = refused(&["run", "--rw", "/proc/self", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert!(r.stderr.contains("--rw /proc/self: \"/proc/self\" is inside /proc"), "{}", r.stderr);
    let r = refused(&["run", "--ro", "/", "--", "/bin/true"]);
    assert!(r.stderr.contains("would show the whole host"), "{}", r.stderr);
    let r = refused(&["run", "--timeout", "0", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
}

#[test]
fn a_working_directory_missing_inside_is_refused_before_start() {
    let r = refused(&["run", "--cwd", "/nonexistent", "--", "/bin/true"]);
    assert_eq!(r.code, Some(125));
    assert_eq!(
        r.stderr,
        "stockade: filesystem.cwd: /nonexistent does not exist inside the jail (use /tmp, a granted directory, or \
         one inside it)\n"
    );
}

#[test]
fn user_namespaces_disabled() {
    // Inside a user namespace of our own, set the namespace limit to 0 and try. Only uid 0 is
    // mapped there, so no uid of the owner range can own the run's namespace: root owns it.
    let bin = stockade_bin().display().to_string();
    let mounts = mount_count();
    let p = policy_file("version = 1\n[identity]\nowner-uid-count = 0\n");
    let policy = path_of(&p);
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "/bin/sh", "-c"])
        .arg(format!("echo 0 > /proc/sys/user/max_user_namespaces && exec {bin} run --policy {policy} -- /bin/true"))
        .output();
    let Ok(out) = out else {
        eprintln!("skip: unshare(1) is not available");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unshare failed") {
        eprintln!("skip: this host does not allow the test's own user namespace: {stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("namespaces: cannot create the user namespace: no space left on device"), "{stderr}");
    assert!(stderr.contains("user.max_user_namespaces"), "{stderr}");
    assert!(stderr.contains("namespaces.user = false"), "{stderr}");
    assert_eq!(mount_count(), mounts);
    // Another namespace refused: the message names it and the key that turns it off.
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "/bin/sh", "-c"])
        .arg(format!("echo 0 > /proc/sys/user/max_net_namespaces && exec {bin} run --policy {policy} -- /bin/true"))
        .output()
        .expect("unshare");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("cannot create the net namespace: no space left on device"), "{stderr}");
    assert!(stderr.contains("to run without it, set namespaces.net = false"), "{stderr}");
}

#[test]
fn policy_check_reports_every_file() {
    let good = policy_file("version = 1\n");
    let bad = policy_file("version = 1\n[rlimits]\nmax-open-files = 1\ncore-bytes = -1\n");
    let out = stockade().args(["policy", "check"]).arg(good.path()).arg(bad.path()).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains(&format!("{}: ok", good.path().display())), "{stdout}");
    assert!(stderr.contains(&format!("{}:4:14: rlimits.core-bytes", bad.path().display())), "{stderr}");
}

/// Run by "root" in a user namespace where the owner uids are not mapped (a container's), the
/// default policy refuses, naming the key that lets root's counters be shared instead.
#[test]
fn unmapped_owner_uids_refuse_with_the_key() {
    let bin = stockade_bin().display().to_string();
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "/bin/sh", "-c"])
        .arg(format!("exec {bin} run -- /bin/true"))
        .output();
    let Ok(out) = out else {
        eprintln!("skip: unshare(1) is not available");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unshare failed") {
        eprintln!("skip: this host does not allow the test's own user namespace: {stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("the owner uids 2130706432-2130771967 are not all mapped"), "{stderr}");
    assert!(stderr.contains("identity.owner-uid-count = 0"), "{stderr}");
}

/// A limit that ends a run is said in one line on stderr (the exit status alone says little to a
/// person), and `--quiet` keeps it silent; a command-line problem is said with one `stockade:`.
#[test]
fn a_run_ended_by_a_limit_says_so_once_and_quiet_keeps_it_silent() {
    let out = run(&["--timeout", "200ms", "--", "/bin/sleep", "5"]);
    assert_eq!(out.status.code(), Some(124));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim(), "stockade: the run passed its wall-clock limit (200 ms) and was killed: timeout");
    let out = run(&["--quiet", "--timeout", "200ms", "--", "/bin/sleep", "5"]);
    assert_eq!((out.status.code(), String::from_utf8_lossy(&out.stderr).trim()), (Some(124), ""));
    let out = stockade().args(["serve", "--check", "--listen", "bogus"]).output().expect("serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("stockade: --listen: "), "{stderr}");
    assert!(!stderr.contains("stockade: stockade:"), "{stderr}");
}
