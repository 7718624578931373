//! Helpers for integration tests: run the built `stockade` binary, read its report, and look at
//! the host from outside the jail.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use stockade::Report;

/// The binary under test.
pub fn stockade() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_stockade"));
    c.stdin(Stdio::null());
    c
}

/// Runs `stockade run <args>` with `--report -` and returns the parsed report and the raw output.
pub fn run_report(args: &[&str]) -> (Report, Output) {
    let mut c = stockade();
    c.arg("run").arg("--report").arg("-").args(args);
    let out = c.output().expect("spawn stockade");
    let text = String::from_utf8_lossy(&out.stdout);
    let report = Report::from_json(&text).unwrap_or_else(|e| {
        panic!("no report ({e}); stdout: {text}; stderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    (report, out)
}

/// Runs `stockade run <args>` with output forwarded; returns the process output.
pub fn run(args: &[&str]) -> Output {
    stockade().arg("run").args(args).output().expect("spawn stockade")
}

pub fn stdout_of(r: &Report) -> &str {
    r.stdout.text.as_deref().unwrap_or("")
}

/// Host pids whose command line contains `marker` (the test process excluded).
pub fn processes_with(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return found };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(pid);
            }
        }
    }
    found
}

/// Waits until `cond` holds or `limit` passes.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// A unique marker for a test's processes and files.
pub fn marker(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{name}{}{}", std::process::id(), nanos)
}

/// A unique sleep duration, so the sleeping process can be found on the host by its command line.
pub fn marker_sleep() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("30.{:09}", nanos ^ std::process::id())
}

pub fn python3() -> Option<PathBuf> {
    let p = Path::new("/usr/bin/python3");
    if p.exists() {
        Some(p.to_path_buf())
    } else {
        eprintln!("skip: /usr/bin/python3 is not installed");
        None
    }
}

pub fn is_root() -> bool {
    // SAFETY-free: read the effective uid from /proc instead of calling libc.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// The number of mounts in the host's (this process's) mount namespace.
pub fn mount_count() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo").map(|s| s.lines().count()).unwrap_or(0)
}

/// A policy file (world-readable, for tests that run stockade as another user).
pub fn policy_file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".toml").tempfile().expect("tmp");
    std::fs::write(f.path(), text).expect("write");
    std::fs::set_permissions(f.path(), std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    f
}

/// The default policy, but with exec allowed: for tests of other walls that run shell
/// pipelines (`sleep`, `cat`, `ls`...).
pub fn exec_policy() -> tempfile::NamedTempFile {
    policy_file("version = 1\n[seccomp]\nallow = [\"exec\"]\n")
}

pub fn path_of(f: &tempfile::NamedTempFile) -> String {
    f.path().display().to_string()
}
