//! Helpers for integration tests: run the built `stockade` binary, read its report, and look at
//! the host from outside the jail.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

/// An HTTP server on 127.0.0.1: answers each request with what `answer` gives its path (a
/// content type and a body; `None`: 404), counts the connections it accepted and keeps the
/// request lines it read.
pub struct Host {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    lines: Arc<Mutex<Vec<String>>>,
}

type Answer = dyn Fn(&str) -> Option<(&'static str, Vec<u8>)> + Send + Sync;

impl Host {
    fn answering(answer: Arc<Answer>) -> Host {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (accepted, lines) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (a, l) = (accepted.clone(), lines.clone());
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                a.fetch_add(1, Ordering::SeqCst);
                let (l, answer) = (l.clone(), answer.clone());
                std::thread::spawn(move || answer_one(s, &l, &*answer));
            }
        });
        Host { port, accepted, lines }
    }

    /// Answers every request with `body`.
    pub fn serving(body: Vec<u8>) -> Host {
        Host::answering(Arc::new(move |_: &str| Some(("text/plain", body.clone()))))
    }

    /// Answers each path of `paths` with its bytes (a path ending in `/` as HTML), 404 otherwise.
    pub fn serving_paths(paths: Vec<(String, Vec<u8>)>) -> Host {
        Host::answering(Arc::new(move |path: &str| {
            let (_, body) = paths.iter().find(|(p, _)| p == path)?;
            Some((if path.ends_with('/') { "text/html" } else { "application/octet-stream" }, body.clone()))
        }))
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }
}

fn answer_one(mut s: TcpStream, lines: &Mutex<Vec<String>>, answer: &Answer) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
    let path = line.split(' ').nth(1).unwrap_or("").to_string();
    lines.lock().expect("lines").push(line);
    match answer(&path) {
        Some((kind, body)) => {
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
        None => {
            let _ = write!(s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    }
}
