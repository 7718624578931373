//! The jail, observed from outside: run the built binary and check the host.

mod common;

use common::*;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};
use stockade::{Enforcement, Status};

#[test]
fn shell_and_python_run_on_the_default_policy_and_output_reaches_the_caller() {
    let out = run(&["--", "/bin/sh", "-c", "echo hi; echo oops >&2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    if python3().is_some() {
        let out = run(&["--", "/usr/bin/python3", "-c", "print(1)"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    }
}

#[test]
fn exit_codes_follow_the_program_and_signals() {
    let (r, out) = run_report(&["--", "/bin/sh", "-c", "exit 7"]);
    assert_eq!((r.status, r.exit_code, out.status.code()), (Status::ExitedNonzero, Some(7), Some(7)));
    let (r, out) = run_report(&["--", "/bin/sh", "-c", "kill -SEGV $$"]);
    assert_eq!((r.status, r.signal, out.status.code()), (Status::Signaled, Some(11), Some(128 + 11)));
    assert_eq!(r.signal_name.as_deref(), Some("SIGSEGV"));
    // The program is not PID 1, so a signal it sends itself has its normal effect.
    let (r, _) = run_report(&["--", "/bin/sh", "-c", "kill -TERM $$; sleep 5"]);
    assert_eq!(r.signal, Some(libc::SIGTERM));
}

#[test]
fn a_file_outside_rw_stays_unchanged() {
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(work.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(outside.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "original").expect("write");
    let w = work.path().display().to_string();
    let v = victim.display().to_string();
    let script = format!(
        "echo pwned > {v}; echo pwned > /usr/stockade-test; ln -s {v} {w}/link; echo pwned > {w}/link; \
         ln {v} {w}/hard; echo written > {w}/ok"
    );
    let p = exec_policy();
    let (r, _) = run_report(&["--policy", &path_of(&p), "--rw", &w, "--", "/bin/sh", "-c", &script]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(stdout_of(&r).is_empty());
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "original");
    assert!(!std::path::Path::new("/usr/stockade-test").exists());
    assert_eq!(std::fs::read_to_string(work.path().join("ok")).expect("ok written"), "written\n");
    // The planted symlink points at a path that does not exist inside: the write created nothing
    // on the host side either.
    assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 1);
}

#[test]
fn files_the_program_writes_are_owned_by_an_unprivileged_host_uid() {
    let work = tempfile::tempdir().expect("tempdir");
    let w = work.path().display().to_string();
    std::fs::set_permissions(work.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let (r, _) = run_report(&["--rw", &w, "--", "/bin/sh", "-c", &format!("echo x > {w}/f")]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let meta = std::fs::metadata(work.path().join("f")).expect("written");
    assert_ne!(meta.uid(), 0, "the program ran as host root");
    assert_ne!(meta.gid(), 0);
    if is_root() {
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
}

#[test]
fn no_host_path_outside_the_grants_is_reachable() {
    let script = "for p in /etc/passwd /../../etc/passwd /proc/1/root/etc/passwd /proc/self/cwd/../../etc/passwd \
                  /proc/self/root/../etc/passwd /dev/../etc/passwd; do cat $p 2>/dev/null; done; ls /root /home 2>&1; \
                  ls /proc/sys /proc/kallsyms 2>&1; echo done";
    let p = exec_policy();
    let (r, _) = run_report(&["--policy", &path_of(&p), "--", "/bin/sh", "-c", script]);
    let out = stdout_of(&r);
    assert!(out.ends_with("done\n"), "{out}");
    assert!(!out.contains("root:x:0:0"), "host /etc/passwd leaked: {out}");
}

#[test]
fn background_and_daemonised_children_are_gone_when_run_returns() {
    let a = marker_sleep();
    let b = marker_sleep();
    let script = format!("sleep {a} & setsid sh -c 'sleep {b} & exit 0' & sleep 0.2; exit 0");
    let p = exec_policy();
    let (r, _) = run_report(&["--policy", &path_of(&p), "--", "/bin/sh", "-c", &script]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(processes_with(&format!("sleep {a}")).is_empty(), "background child survived");
    assert!(processes_with(&format!("sleep {b}")).is_empty(), "setsid grandchild survived");
}

#[test]
fn a_300ms_timeout_returns_on_time_and_leaves_nothing() {
    let s = marker_sleep();
    let script = format!("sleep {s} & setsid sleep {s} & trap '' TERM; while :; do :; done");
    let start = Instant::now();
    let p = exec_policy();
    let (r, out) = run_report(&["--policy", &path_of(&p), "--timeout", "300ms", "--", "/bin/sh", "-c", &script]);
    let took = start.elapsed();
    assert_eq!(r.status, Status::Timeout, "{r:?}");
    assert_eq!(out.status.code(), Some(124));
    assert!(took >= Duration::from_millis(300) && took < Duration::from_millis(400), "took {took:?}");
    assert!((300.0..360.0).contains(&r.wall_ms), "wall-ms {}", r.wall_ms);
    // The spinner's CPU time is accounted even though the run was killed.
    assert!(r.cpu_user_ms + r.cpu_sys_ms > 150.0, "cpu {} + {}", r.cpu_user_ms, r.cpu_sys_ms);
    assert!(processes_with(&format!("sleep {s}")).is_empty(), "a process of the run survived the timeout");
}

#[test]
fn the_timeout_holds_without_a_pid_namespace_too() {
    let policy = tempfile::NamedTempFile::new().expect("tmp");
    std::fs::write(
        policy.path(),
        "version = 1\n[namespaces]\npid = false\n[filesystem]\nproc = \"none\"\n[seccomp]\nallow = [\"exec\"]\n",
    )
    .expect("write");
    let p = policy.path().display().to_string();
    let s = marker_sleep();
    let script = format!("sleep {s} & trap '' TERM; while :; do :; done");
    let start = Instant::now();
    let (r, _) = run_report(&["--policy", &p, "--timeout", "300ms", "--", "/bin/sh", "-c", &script]);
    assert_eq!(r.status, Status::Timeout, "{r:?}");
    assert!(start.elapsed() < Duration::from_millis(400), "took {:?}", start.elapsed());
    assert!(processes_with(&format!("sleep {s}")).is_empty(), "a process of the run survived");
    assert!(processes_with(&script).is_empty(), "the spinner survived the timeout");
    // On a normal end too, the run's process group goes with it.
    let t = marker_sleep();
    let (r, _) = run_report(&["--policy", &p, "--", "/bin/sh", "-c", &format!("sleep {t} & exit 0")]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(processes_with(&format!("sleep {t}")).is_empty(), "a background child survived");
    let lifecycle = r.enforcement.iter().find(|l| l.layer == "lifecycle").expect("lifecycle layer");
    assert_eq!(lifecycle.status, Enforcement::Partial);
    let pid = r.enforcement.iter().find(|l| l.layer == "namespace.pid").expect("pid layer");
    assert_eq!(pid.status, Enforcement::NotEnforced);
}

#[test]
fn killing_the_supervisor_kills_the_run() {
    let s = marker_sleep();
    let p = exec_policy();
    let mut child = stockade()
        .args(["run", "--policy", &path_of(&p), "--", "/bin/sh", "-c", &format!("sleep {s}; echo never")])
        .spawn()
        .expect("spawn");
    let pattern = format!("sleep {s}");
    assert!(
        wait_for(Duration::from_secs(5), || processes_with(&pattern).iter().any(|p| *p != child.id() as i32)),
        "the run did not start"
    );
    child.kill().expect("SIGKILL the supervisor");
    child.wait().expect("reap");
    assert!(
        wait_for(Duration::from_secs(2), || processes_with(&pattern).is_empty()),
        "the run outlived its supervisor"
    );
}

#[test]
fn the_program_has_no_controlling_terminal_and_its_own_session() {
    let s = marker_sleep();
    let p = exec_policy();
    let mut child = stockade()
        .args(["run", "--policy", &path_of(&p), "--", "/bin/sh", "-c", &format!("sleep {s}")])
        .spawn()
        .expect("spawn");
    // The sleep process itself (its command line starts with "sleep"), not the supervisor or the
    // run's init, which carry the same words further along until init scrubs them.
    let pid = find_process(&format!("sleep {s}"), child.id()).expect("the run started");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat.rsplit_once(") ").expect("stat format").1.split(' ').collect();
    let (session, tty) = (fields[3], fields[4]);
    assert_eq!(tty, "0", "the program has a controlling terminal");
    let my_stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let my_session = my_stat.rsplit_once(") ").expect("format").1.split(' ').nth(3).expect("sid").to_string();
    assert_ne!(session, my_session, "the program shares the caller's session");
    child.kill().expect("kill");
    child.wait().expect("wait");
}

#[test]
fn the_report_lists_every_layer_and_output_caps_hold() {
    // Past the cap, by default: the run ends at once, reported as such.
    let ending = policy_file("version = 1\n[output]\nstdout-max-bytes = 1000\n[seccomp]\nallow = [\"exec\"]\n");
    let (r, out) = run_report(&["--policy", &path_of(&ending), "--", "/bin/sh", "-c", "head -c 5000000 /dev/zero"]);
    assert_eq!((r.status, out.status.code()), (Status::OutputLimit, Some(137)), "{r:?}");
    assert!(r.stdout.truncated && r.stdout.bytes > 1000 && r.stdout.bytes < 5_000_000, "{:?}", r.stdout);
    assert_eq!(r.stdout.text.as_deref().map(str::len), Some(1000));
    // With `over-cap = "truncate"` the run goes on: every byte counted, the cap's worth kept.
    let policy = policy_file(
        "version = 1\n[output]\nstdout-max-bytes = 1000\nover-cap = \"truncate\"\n[seccomp]\nallow = [\"exec\"]\n",
    );
    let p = path_of(&policy);
    let (r, _) = run_report(&["--policy", &p, "--", "/bin/sh", "-c", "head -c 5000000 /dev/zero"]);
    assert_eq!((r.status, r.stdout.bytes), (Status::Ok, 5_000_000));
    assert!(r.stdout.truncated);
    assert_eq!(r.stdout.text.as_deref().map(str::len), Some(1000));
    let layers: Vec<&str> = r.enforcement.iter().map(|l| l.layer.as_str()).collect();
    for l in ["namespace.user", "namespace.pid", "namespace.net", "identity", "filesystem", "rlimits", "lifecycle"] {
        assert!(layers.contains(&l), "missing layer {l}: {layers:?}");
    }
    assert!(r.enforcement.iter().all(|l| l.status == Enforcement::Enforced), "{:?}", r.enforcement);
    // Forwarded output is capped the same way.
    let out = stockade()
        .args(["run", "--policy", &p, "--", "/bin/sh", "-c", "head -c 5000000 /dev/zero"])
        .output()
        .expect("run");
    assert_eq!(out.stdout.len(), 1000);
}

#[test]
fn rlimits_and_hostname_apply_inside() {
    let p = exec_policy();
    let (r, _) = run_report(&["--policy", &path_of(&p), "--", "/bin/sh", "-c", "ulimit -c; ulimit -n; hostname"]);
    assert_eq!(stdout_of(&r), "0\n256\nstockade\n");
}

#[test]
fn several_runs_at_once_do_not_hold_each_other() {
    // A long run must not keep a short one's pipes open (each child closes fds it inherited).
    let p = exec_policy();
    let pp = path_of(&p);
    let long = std::thread::spawn(move || run_report(&["--policy", &pp, "--", "/bin/sh", "-c", "sleep 3"]));
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|i| std::thread::spawn(move || run_report(&["--", "/bin/sh", "-c", &format!("echo {i}")])))
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let (r, _) = h.join().expect("thread");
        assert_eq!(stdout_of(&r), format!("{i}\n"));
    }
    assert!(start.elapsed() < Duration::from_secs(2), "short runs waited for the long one");
    assert_eq!(long.join().expect("thread").0.status, Status::Ok);
}

#[test]
fn stdin_is_null_unless_asked() {
    let mut c = stockade();
    let p = exec_policy();
    c.args(["run", "--policy", &path_of(&p), "--", "/bin/sh", "-c", "cat; echo end"])
        .stdin(std::process::Stdio::piped());
    c.stdout(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(b"secret-input\n").expect("write");
    let mut s = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut s).expect("read");
    child.wait().expect("wait");
    assert_eq!(s, "end\n");
    let mut c = stockade();
    c.args(["run", "--policy", &path_of(&p), "--stdin", "--", "/bin/sh", "-c", "cat"])
        .stdin(std::process::Stdio::piped());
    c.stdout(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    child.stdin.take().expect("stdin").write_all(b"passed\n").expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "passed\n");
}

#[test]
fn an_unprivileged_caller_maps_to_itself() {
    if !is_root() {
        eprintln!("skip: needs root to start stockade as another user");
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(work.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    let w = work.path().display().to_string();
    // The build may be where uid 4242 cannot reach it (a clone in root's home).
    let (bin, _keep) = runnable_by_anyone(&stockade_bin());
    let mut c = std::process::Command::new(bin);
    // A normal user has no cgroup to make leaves in here: best effort, and the report says so.
    let p = policy_file("version = 1\n[seccomp]\nallow = [\"exec\"]\n[cgroups]\nbest-effort = true\n");
    c.args([
        "run",
        "--policy",
        &path_of(&p),
        "--rw",
        &w,
        "--report",
        "-",
        "--",
        "/bin/sh",
        "-c",
        &format!("id -u; echo x > {w}/f"),
    ]);
    c.uid(4242).gid(4242);
    let out = c.output().expect("run as 4242");
    let r = stockade::Report::from_json(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(stdout_of(&r), "65534\n");
    let cg = r.enforcement.iter().find(|l| l.layer == "cgroup").expect("cgroup layer");
    assert_ne!(cg.status, Enforcement::Enforced, "{cg:?}");
    assert!(cg.reason.as_deref().is_some_and(|r| r.contains("best-effort")), "{cg:?}");
    assert_eq!(std::fs::metadata(work.path().join("f")).expect("f").uid(), 4242);
}

/// Run by root, each run's program has a host uid of its own (the uid owning its user
/// namespace), so no per-user quota is shared between runs: before, every run was host uid
/// 65534, and one run holding large pipes shrank every other run's new pipes (and the host's
/// `nobody` processes') to a page. What it leaves in a host directory still belongs to 65534.
#[test]
fn each_run_has_a_host_uid_of_its_own_and_no_shared_per_user_quota() {
    if !is_root() {
        eprintln!("skip: needs root (a normal user's runs are that user)");
        return;
    }
    let Some(py) = python3() else { return };
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/wrap-python.toml").display().to_string();
    let hog = "import fcntl, os, time\n\
               n = 0\n\
               try:\n    for _ in range(200):\n        r, w = os.pipe(); fcntl.fcntl(w, 1031, 1 << 20); n += 1\n\
               except OSError: pass\n\
               print(open('/proc/self/uid_map').read().split()[1], n, flush=True)\n\
               time.sleep(3)";
    let probe =
        "import fcntl, os\nr, w = os.pipe()\nprint(open('/proc/self/uid_map').read().split()[1], fcntl.fcntl(w, 1032))";
    let py = py.display().to_string();
    let hogging = {
        let (policy, py) = (policy.clone(), py.clone());
        std::thread::spawn(move || run_report(&["--policy", &policy, "--", &py, "-c", hog]).0)
    };
    std::thread::sleep(Duration::from_millis(1500));
    let (r, _) = run_report(&["--policy", &policy, "--", &py, "-c", probe]);
    let h = hogging.join().expect("hog");
    assert_eq!((h.status, r.status), (Status::Ok, Status::Ok), "{h:?} {r:?}");
    let hog_out: Vec<u64> = stdout_of(&h).split_whitespace().filter_map(|x| x.parse().ok()).collect();
    let probe_out: Vec<u64> = stdout_of(&r).split_whitespace().filter_map(|x| x.parse().ok()).collect();
    assert_eq!((hog_out.len(), probe_out.len()), (2, 2), "{} / {}", stdout_of(&h), stdout_of(&r));
    assert!(hog_out[1] >= 60, "the hog took {} MiB of pipes", hog_out[1]);
    assert_ne!(hog_out[0], probe_out[0], "two runs at once had the same host uid");
    assert!(hog_out[0] != 65534 && probe_out[0] != 65534 && probe_out[0] != 0);
    assert_eq!(probe_out[1], 65536, "another run's pipes shrank this run's: {}", stdout_of(&r));
    let id = r.enforcement.iter().find(|l| l.layer == "identity").expect("identity");
    assert!(id.applied.contains("no other run has it"), "{id:?}");
}
