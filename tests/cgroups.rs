//! cgroup limits, observed from outside: the run's cgroup figures, the host's free memory, the
//! processes and cgroup directories left behind (none). Runs on this host's cgroup layout and in
//! the cgroup v2 VM (`cargo xtask vm-test`). Needs root (to create cgroups); says so otherwise.

mod common;
mod server;

use common::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stockade::layers::cgroup::host::Host;
use stockade::{Report, Status};

fn ready() -> Option<PathBuf> {
    if !is_root() {
        eprintln!("skip: creating cgroups needs root here");
        return None;
    }
    attack_helper()
}

/// The directories where this process's runs put their cgroups (one per hierarchy).
fn leaf_parents() -> Vec<PathBuf> {
    let host = Host::current();
    host.v2.iter().chain(host.v1.values()).filter_map(|h| h.dir(&h.own)).collect()
}

/// Cgroups left by the stockade process `pid`.
fn leaves_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("stockade-{pid}-");
    leaf_parents()
        .into_iter()
        .flat_map(|p| std::fs::read_dir(p).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// On a pure cgroup v2 host, this process's cgroup: its directory and its name (else says why
/// the test skips).
fn pure_v2() -> Option<(PathBuf, String)> {
    let host = Host::current();
    let Some(v2) = host.v2.as_ref().filter(|_| host.v1.is_empty()) else {
        eprintln!("skip: not a pure cgroup v2 host (run with `cargo xtask vm-test`)");
        return None;
    };
    Some((v2.dir(&v2.own).expect("own dir"), v2.own.clone()))
}

/// Runs the helper in the jail under `policy`, checking nothing is left behind afterwards.
fn run_helper(helper: &std::path::Path, policy: &str, extra: &[&str], args: &[&str]) -> Report {
    let p = policy_file(policy);
    let dir = helper.parent().expect("dir").display().to_string();
    let h = helper.display().to_string();
    let mut cmd = stockade();
    cmd.args(["run", "--report", "-", "--policy", &path_of(&p), "--ro", &dir]).args(extra).arg("--").arg(&h).args(args);
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let r = Report::from_json(&String::from_utf8_lossy(&out.stdout))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(leaves_of(pid), Vec::<PathBuf>::new(), "a cgroup of the run was left behind");
    r
}

fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok())
        .map_or(0, |kb: u64| kb * 1024)
}

#[test]
fn memory_beyond_the_limit_ends_in_oom_and_the_host_is_not_dented() {
    let Some(helper) = ready() else { return };
    let limit: u64 = 64 << 20;
    let policy = format!("version = 1\n[cgroups]\nmemory-max-bytes = {limit}\n");
    let before = mem_available();
    let lowest = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (lowest, stop) = (lowest.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                lowest.fetch_min(mem_available(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let r = run_helper(&helper, &policy, &[], &["alloc", "256"]);
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    assert_eq!(r.status, Status::Oom, "{r:?}");
    assert!(r.oom_kills >= 1, "{r:?}");
    assert!(!stdout_of(&r).contains("touched"), "the allocation completed");
    let peak = r.memory_peak_bytes.expect("memory peak reported");
    assert!(peak <= limit + (1 << 20), "peak {peak} over the {limit} limit");
    let dent = before.saturating_sub(lowest.load(Ordering::Relaxed));
    assert!(dent < limit + (96 << 20), "host MemAvailable fell by {dent} bytes (limit {limit})");
}

#[test]
fn two_thousand_forks_stop_at_pids_max() {
    let Some(helper) = ready() else { return };
    // No RLIMIT_NPROC here: the cgroup limit is what must hold.
    let policy = "version = 1\n[cgroups]\npids-max = 20\n[rlimits]\nmax-open-files = 256\n";
    let r = run_helper(&helper, policy, &[], &["forks", "2000"]);
    assert_eq!(r.status, Status::PidsLimit, "{r:?}");
    assert!(r.pids_limit_hit);
    let out = stdout_of(&r);
    let forked: u32 = out.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("forked count");
    assert!(forked < 20, "{out}");
    assert!(out.contains("refused"), "{out}");
    if let Some(peak) = r.pids_peak {
        assert!(peak <= 20, "pids peak {peak}");
    }
}

#[test]
fn a_spinner_under_a_20_percent_quota_gets_at_most_a_quarter_of_a_cpu() {
    let Some(helper) = ready() else { return };
    let policy = "version = 1\n[cgroups]\ncpu-max-percent = 20\n";
    let r = run_helper(&helper, policy, &["--timeout", "2s"], &["spin", "10"]);
    assert_eq!(r.status, Status::Timeout, "{r:?}");
    let cpu = r.cpu_user_ms + r.cpu_sys_ms;
    assert!(cpu <= 0.25 * r.wall_ms, "cpu {cpu} ms over {} ms wall", r.wall_ms);
    assert!(cpu >= 0.05 * r.wall_ms, "the spinner got no CPU at all: {cpu} ms");
}

#[test]
fn the_cpu_time_rlimit_ends_the_run_as_cpu_limit() {
    let Some(helper) = ready() else { return };
    let policy = "version = 1\n[rlimits]\ncpu-seconds = 1\nmax-open-files = 256\n";
    let r = run_helper(&helper, policy, &[], &["spin", "5"]);
    assert_eq!(r.status, Status::CpuLimit, "{r:?}");
}

#[test]
fn a_spinner_that_ignores_sigterm_is_gone_at_the_timeout() {
    let Some(helper) = ready() else { return };
    let start = Instant::now();
    let r = run_helper(&helper, "version = 1\n", &["--timeout", "300ms"], &["spin-ignore-term"]);
    assert_eq!(r.status, Status::Timeout, "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(3), "took {:?}", start.elapsed());
    let h = helper.display().to_string();
    assert!(none_left(&format!("{h} spin-ignore-term")), "the spinner survived");
}

#[test]
fn a_leaf_left_by_a_killed_supervisor_is_reaped_by_the_next_start() {
    let Some(helper) = ready() else { return };
    let dir = helper.parent().expect("dir").display().to_string();
    let h = helper.display().to_string();
    let mut child = stockade().args(["run", "--ro", &dir, "--", &h, "sleep", "30"]).spawn().expect("spawn");
    let pid = child.id();
    assert!(wait_for(Duration::from_secs(10), || !leaves_of(pid).is_empty()), "no leaf appeared");
    assert!(find_process(&format!("{h} sleep 30"), pid).is_some(), "the run did not start");
    child.kill().expect("SIGKILL the supervisor");
    child.wait().expect("reap");
    assert!(wait_for(Duration::from_secs(5), || none_left(&format!("{h} sleep 30"))));
    assert!(!leaves_of(pid).is_empty(), "the killed supervisor's leaf should still be there");
    // The next run in the same parent removes it.
    let out = stockade().args(["run", "--", "/bin/sh", "-c", "true"]).output().expect("next run");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(leaves_of(pid), Vec::<PathBuf>::new(), "the stale leaf was not reaped");
}

#[test]
fn a_parent_without_the_controller_refuses_on_cgroup_v2() {
    let Some(helper) = ready() else { return };
    let Some((own, own_name)) = pure_v2() else { return };
    let name = format!("stockade-test-nomem-{}", std::process::id());
    let dir = own.join(&name);
    std::fs::create_dir(&dir).expect("mkdir test parent");
    let parent = format!("{}/{name}", own_name.trim_end_matches('/'));
    let p = policy_file("version = 1\n");
    let h = helper.display().to_string();
    let out = stockade()
        .args(["run", "--policy", &path_of(&p), "--cgroup-parent", &parent, "--", &h, "sleep", "0"])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let entries = std::fs::read_dir(&dir).map(|d| d.filter_map(Result::ok).filter(|e| e.path().is_dir()).count());
    std::fs::remove_dir(&dir).expect("rmdir test parent");
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("the memory controller is not available"), "{stderr}");
    assert!(stderr.contains("cgroups.memory-max-bytes") && stderr.contains("best-effort"), "{stderr}");
    assert_eq!(entries.unwrap_or(0), 0, "a leaf was left in the parent");
}

/// A container's cgroup filesystem is read-only: with `best-effort` the run goes ahead and the
/// report says the cgroup layer was not enforced; without it the refusal says why. Like a
/// container on this host: on a host with v1 hierarchies, those read-only and no cgroup2 (hidden
/// where the host has one); on a pure cgroup v2 host, the cgroup2 mount read-only. Made in a
/// private mount namespace (`unshare -m`), never on the host.
#[test]
fn a_read_only_cgroup_filesystem_is_not_enforced_under_best_effort_and_refused_otherwise() {
    let Some(helper) = ready() else { return };
    if std::process::Command::new("unshare").arg("--help").output().is_err() {
        eprintln!("skip: unshare is not installed");
        return;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mounts = |kind: &str| -> Vec<String> {
        mountinfo
            .lines()
            .filter(|l| l.split(" - ").nth(1).is_some_and(|t| t.split(' ').next() == Some(kind)))
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .collect()
    };
    let (v1, v2) = (mounts("cgroup"), mounts("cgroup2"));
    let mut container = String::new();
    if v1.is_empty() {
        for m in &v2 {
            container.push_str(&format!("mount -o remount,bind,ro {m} || exit 99; "));
        }
    } else {
        for m in &v2 {
            container.push_str(&format!("umount {m} || exit 99; "));
        }
        for m in &v1 {
            container.push_str(&format!("mount -o remount,bind,ro {m} || exit 99; "));
        }
    }
    let run = |policy: &str| {
        let p = policy_file(policy);
        let h = helper.display().to_string();
        let dir = helper.parent().expect("dir").display().to_string();
        let script = format!(
            "{container}exec {} run --report - --policy {} --ro {dir} -- {h} sleep 0",
            stockade_bin().display(),
            path_of(&p)
        );
        let out = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "/bin/sh", "-c", &script])
            .output()
            .expect("unshare");
        assert_ne!(out.status.code(), Some(99), "remount failed: {}", String::from_utf8_lossy(&out.stderr));
        (Report::from_json(&String::from_utf8_lossy(&out.stdout)), out)
    };
    let (r, out) = run("version = 1\n[cgroups]\nbest-effort = true\n");
    let r = r.unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let layer = r.enforcement.iter().find(|l| l.layer == "cgroup").expect("cgroup layer");
    assert_eq!(layer.status, stockade::Enforcement::NotEnforced, "{layer:?}");
    assert!(layer.reason.as_deref().unwrap_or("").contains("read-only"), "{layer:?}");
    let (r, out) = run("version = 1\n");
    let r = r.expect("a refusal report");
    assert_eq!(r.status, Status::SetupFailed, "{r:?}");
    let err = r.error.unwrap_or_default();
    assert!(err.contains("read-only") && err.contains("best-effort"), "{err}");
    assert_eq!(out.status.code(), Some(125));
}

/// `stockade serve` started alone in a cgroup of its own on cgroup v2 (what systemd's
/// `Delegate=yes` and a container's cgroup namespace give it) takes that cgroup: it moves into
/// `supervisor/`, enables memory, pids and cpu, and its runs' leaves are made below `runs/` with
/// their limits; after SIGTERM nothing of theirs is left. Started in a cgroup that holds another
/// process too, it takes nothing.
#[test]
fn a_server_alone_in_its_v2_cgroup_puts_its_runs_below_it() {
    let Some(helper) = ready() else { return };
    let Some((own, _)) = pure_v2() else { return };
    let controllers = std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
    if !["memory", "pids"].iter().all(|c| controllers.split_whitespace().any(|x| x == *c)) {
        eprintln!("skip: memory and pids are not enabled for this process's child cgroups ({controllers:?})");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let helpers = helper.parent().expect("helper dir").display().to_string();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    std::fs::write(policies.join("native.toml"), format!("version = 1\n[filesystem]\nread-only = [\"{helpers}\"]\n"))
        .expect("policy");
    let socket = dir.path().join("api.sock");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "version = 1\n[server]\nlisten = [\"unix:{}\"]\n[policies]\ndir = \"{}\"\n\
             [runtimes.native]\nprogram = \"{}\"\nargs = [\"sleep\", \"1\"]\nbootstrap = \"stdin\"\npolicy = \"native\"\nwarm = 0\n",
            socket.display(),
            policies.display(),
            helper.display()
        ),
    )
    .expect("config");
    let cgroup = own.join(format!("stockade-test-serve-{}", std::process::id()));
    std::fs::create_dir(&cgroup).expect("mkdir the server's cgroup");
    // The server alone in its cgroup: the shell moves itself in, then becomes the server.
    let start = |cg: &std::path::Path| {
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec {} serve {}",
            cg.display(),
            stockade_bin().display(),
            config.display()
        );
        std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the server")
    };
    let mut child = start(&cgroup);
    let up = wait_for(Duration::from_secs(60), || socket.exists());
    let procs = std::fs::read_to_string(cgroup.join("supervisor/cgroup.procs")).unwrap_or_default();
    let runs_control = std::fs::read_to_string(cgroup.join("runs/cgroup.subtree_control")).unwrap_or_default();
    // A run, and its leaf below runs/ while it sleeps.
    let (tx, rx) = std::sync::mpsc::channel();
    let s = socket.clone();
    let run = std::thread::spawn(move || {
        let r = server::post_run(&s, &serde_json::json!({"runtime": "native", "code": "x"}));
        let _ = tx.send(());
        r
    });
    let mut leaf_limit = None;
    let seen = wait_for(Duration::from_secs(30), || {
        let leaf = std::fs::read_dir(cgroup.join("runs")).into_iter().flatten().flatten().find(|e| e.path().is_dir());
        if let Some(limit) = leaf.and_then(|l| std::fs::read_to_string(l.path().join("memory.max")).ok()) {
            leaf_limit = Some(limit);
        }
        // The leaf is made, then its limits written: wait for them (or for the run's end).
        leaf_limit.as_deref().is_some_and(|l| l.trim() != "max") || rx.try_recv().is_ok()
    });
    let answer = run.join().expect("the run's thread");
    let _ = std::process::Command::new("kill").arg(child.id().to_string()).status();
    let status = child.wait().expect("wait");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let left: Vec<_> =
        std::fs::read_dir(cgroup.join("runs")).into_iter().flatten().flatten().filter(|e| e.path().is_dir()).collect();
    // Take the test's cgroup down (the server is gone: its cgroups are empty).
    for sub in ["runs", "supervisor", ""] {
        let _ = std::fs::remove_dir(cgroup.join(sub));
    }
    assert!(up, "the server did not start: {stderr}");
    assert!(
        procs.split_whitespace().any(|p| p == child.id().to_string()),
        "the server is not in supervisor/: {procs:?} {stderr}"
    );
    assert!(runs_control.contains("memory") && runs_control.contains("pids"), "runs/ controls {runs_control:?}");
    assert!(seen, "no run leaf appeared below runs/: {stderr}");
    assert_eq!(leaf_limit.as_deref().map(str::trim), Some("536870912"), "the run's leaf memory.max");
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    assert!(status.success(), "{stderr}");
    assert!(left.is_empty(), "run leaves left: {left:?}");
    assert!(!cgroup.exists(), "the test's cgroup could not be removed");

    // Shared with another process: not taken.
    let shared = own.join(format!("stockade-test-shared-{}", std::process::id()));
    std::fs::create_dir(&shared).expect("mkdir");
    let mut other = std::process::Command::new("/bin/sh")
        .args(["-c", &format!("echo $$ > {}/cgroup.procs && exec sleep 30", shared.display())])
        .spawn()
        .expect("another process");
    wait_for(Duration::from_secs(5), || {
        std::fs::read_to_string(shared.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty())
    });
    let _ = std::fs::remove_file(&socket);
    let mut child = start(&shared);
    let _ = wait_for(Duration::from_secs(30), || socket.exists() || child.try_wait().ok().flatten().is_some());
    let taken = shared.join("supervisor").exists();
    let _ = std::process::Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let mut said = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut said);
    }
    let _ = other.kill();
    let _ = other.wait();
    let _ = std::fs::remove_dir(shared.join("supervisor"));
    let _ = std::fs::remove_dir(shared.join("runs"));
    let _ = std::fs::remove_dir(&shared);
    assert!(!taken, "a cgroup shared with another process was taken");
    assert!(said.contains("is not delegated to this process"), "{said}");
}
