//! Helpers for integration tests: run the built `stockade` binary, read its report, and look at
//! the host from outside the jail.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use stockade::Report;

/// The binary under test: `$STOCKADE_BIN` when set (the test VM, where the build tree is not
/// at its host path), else the one cargo built.
pub fn stockade_bin() -> PathBuf {
    std::env::var_os("STOCKADE_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_stockade")), PathBuf::from)
}

pub fn stockade() -> Command {
    let mut c = Command::new(stockade_bin());
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

/// The attack helper (tests/escape/helper.c: one program, a subcommand per attack, for the wall
/// tests; the escape suite builds one program per attack from the same directory), built static
/// once per test binary into
/// `target/tmp/helpers/`. `None` (with a skip message) when no C compiler is installed.
pub fn attack_helper() -> Option<PathBuf> {
    use std::sync::OnceLock;
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // The test VM has no compiler: xtask copies a prebuilt helper in and names it.
            if let Some(p) = std::env::var_os("STOCKADE_TEST_HELPER") {
                return Some(PathBuf::from(p));
            }
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/escape/helper.c");
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("helpers");
            std::fs::create_dir_all(&dir).ok()?;
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).ok()?;
            let out = dir.join("attack");
            let tmp = dir.join(format!("attack.{}", std::process::id()));
            let status = Command::new("gcc").args(["-static", "-O1", "-o"]).arg(&tmp).arg(&src).status();
            match status {
                Ok(s) if s.success() => {}
                // No compiler (the test VM): use a helper built and copied in beforehand.
                _ if out.exists() => return Some(out),
                _ => {
                    eprintln!("skip: cannot build tests/escape/helper.c (needs gcc and libc6-dev)");
                    return None;
                }
            }
            std::fs::rename(&tmp, &out).ok()?;
            Some(out)
        })
        .clone()
}

/// Host pid of a process whose command line starts with `prefix` (e.g. the helper's path and
/// a unique argument): never the stockade process that carries it further along its own.
pub fn find_process(prefix: &str, exclude: u32) -> Option<i32> {
    let mut pid = None;
    wait_for(Duration::from_secs(5), || {
        pid = processes_with(prefix).into_iter().find(|p| {
            *p != exclude as i32
                && std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").starts_with(prefix))
        });
        pid.is_some()
    });
    pid
}

/// A world-writable temporary directory (the jail's uid must be able to write it).
pub fn shared_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).expect("chmod");
    d
}

/// True when no process whose command line starts with `prefix` exists (allowing 200 ms for
/// processes already killed to be reaped).
pub fn none_left(prefix: &str) -> bool {
    let gone = || {
        processes_with(prefix).into_iter().all(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| !String::from_utf8_lossy(&c).replace('\0', " ").starts_with(prefix))
                .unwrap_or(true)
        })
    };
    wait_for(Duration::from_millis(200), gone)
}

/// `bin` at a path every user can reach: itself when each directory above it lets others through
/// (and it is theirs to run); else a link to it (a copy, across file systems) in a directory of
/// its own, kept while the returned guard lives. A checkout in root's home (`/root`, mode 0700)
/// keeps its build out of another uid's reach.
pub fn runnable_by_anyone(bin: &Path) -> (PathBuf, Option<tempfile::TempDir>) {
    use std::os::unix::fs::PermissionsExt;
    let others_may = |p: &Path, bits: u32| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & bits == bits);
    let reachable = bin.ancestors().skip(1).all(|d| d.as_os_str().is_empty() || others_may(d, 0o001));
    if reachable && others_may(bin, 0o005) {
        return (bin.to_path_buf(), None);
    }
    let dir = tempfile::Builder::new().prefix("stockade-bin").tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let there = dir.path().join(bin.file_name().unwrap_or_default());
    if std::fs::hard_link(bin, &there).is_err() {
        std::fs::copy(bin, &there).expect("copy the binary");
    }
    std::fs::set_permissions(&there, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (there, Some(dir))
}
