//! Egress through an allow-list (`network.egress-allow`, `--egress`), against servers on this
//! host's loopback only: what the list names answers through the supervisor's proxy; an unlisted
//! port, a listed name whose address is private, a connect that skips the proxy, a UDP send, a
//! name lookup from inside and connections or bytes past the caps are refused (the server sees
//! nothing of them) and reported; nothing of the proxy outlives the run.

mod common;

use common::*;
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stockade::report::{Cut, Refusal};
use stockade::{Job, Output, Plan, Policy, Report, Status};

const PYTHON: &str = "/usr/bin/python3";
const CURL: &str = "/usr/bin/curl";

/// One test at a time: the last counts this process's threads and fds.
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn have(path: &str) -> bool {
    let there = std::path::Path::new(path).exists();
    if !there {
        eprintln!("skip: no {path} on this host");
    }
    there
}

fn python(code: &str, flags: &[&str]) -> Report {
    let mut args: Vec<&str> = flags.to_vec();
    args.extend(["--", PYTHON, "-c", code]);
    run_report(&args).0
}

fn egress(r: &Report) -> &stockade::report::EgressReport {
    r.egress.as_ref().unwrap_or_else(|| panic!("no egress in the report: {r:?}"))
}

#[test]
fn a_listed_host_answers_through_the_proxy_and_the_report_lists_it() {
    let _alone = alone();
    if !have(PYTHON) || !have(CURL) {
        return;
    }
    let host = Host::serving(b"hello from the host\n".to_vec());
    let listed = format!("127.0.0.1:{}", host.port);
    let url = format!("http://127.0.0.1:{}/from-python", host.port);
    let r = python(
        &format!("import urllib.request\nprint(urllib.request.urlopen({url:?}).read().decode(), end='')"),
        &["--egress", &listed],
    );
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "hello from the host\n"), "{r:?}");
    let e = egress(&r);
    assert_eq!((e.allowed, e.refused, e.connections.len()), (1, 0, 1), "{e:?}");
    let c = &e.connections[0];
    assert_eq!((c.host.as_str(), c.port, c.method.as_str(), c.allowed), ("127.0.0.1", host.port, "GET", true));
    assert!(c.bytes_out > 0 && c.bytes_in >= 20, "{c:?}");
    // A tunnel (CONNECT), as https goes.
    let tunnel = format!("http://127.0.0.1:{}/through-a-tunnel", host.port);
    let (r, _) = run_report(&["--egress", &listed, "--", CURL, "-sS", "--proxytunnel", &tunnel]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "hello from the host\n"), "{r:?}");
    assert_eq!(egress(&r).connections[0].method, "CONNECT");
    assert_eq!(host.lines(), ["GET /from-python HTTP/1.1", "GET /through-a-tunnel HTTP/1.1"]);
    // Each layer says what it enforced.
    let layer = |name: &str| r.enforcement.iter().find(|l| l.layer == name).map(|l| l.applied.clone());
    assert!(layer("network").is_some_and(|a| a.contains("proxy on 127.0.0.1:3128")), "{:?}", layer("network"));
    assert!(layer("seccomp").is_some_and(|a| a.contains("TCP sockets")), "{:?}", layer("seccomp"));
    if stockade::host::landlock_abi() >= 4 {
        assert!(layer("landlock").is_some_and(|a| a.contains("connect only to port 3128")), "{:?}", layer("landlock"));
    }
}

#[test]
fn what_the_list_does_not_name_never_reaches_the_host() {
    let _alone = alone();
    if !have(PYTHON) {
        return;
    }
    let host = Host::serving(b"should not be read\n".to_vec());
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let (port, udp_port) = (host.port, udp.local_addr().expect("addr").port());
    let code = format!(
        r#"
import socket, urllib.request
def tried(what, f):
    try:
        f()
        print(what, "reached")
    except Exception as e:
        print(what, "refused", type(e).__name__)
tried("unlisted-port", lambda: urllib.request.urlopen("http://127.0.0.1:{port}/unlisted").read())
tried("private-name", lambda: urllib.request.urlopen("http://localhost:{port}/private").read())
tried("direct", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
tried("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp_port})))
tried("lookup", lambda: socket.getaddrinfo("example.com", 443))
tried("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
tried("bind", lambda: socket.socket().bind(("127.0.0.1", 0)))
"#
    );
    // Listed: the name `localhost` (which resolves to loopback) and another port.
    let (name, other) = (format!("localhost:{port}"), format!("127.0.0.1:{}", port.wrapping_add(1).max(1)));
    let r = python(&code, &["--egress", &name, "--egress", &other]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let out = stdout_of(&r);
    for what in ["unlisted-port", "private-name", "direct", "udp", "lookup", "raw", "bind"] {
        assert!(out.contains(&format!("{what} refused")), "{what}: {out}");
    }
    assert_eq!(host.accepted(), 0, "the host saw a connection: {:?}", host.lines());
    let mut buf = [0u8; 8];
    assert!(udp.recv(&mut buf).is_err(), "a datagram reached the host");
    let e = egress(&r);
    let why: Vec<Option<Refusal>> = e.connections.iter().map(|c| c.refused).collect();
    assert_eq!(why, [Some(Refusal::NotListed), Some(Refusal::PrivateAddress)], "{e:?}");
    assert_eq!((e.allowed, e.refused), (0, 2));
}

#[test]
fn connections_and_bytes_past_the_caps_are_refused_and_cut() {
    let _alone = alone();
    if !have(PYTHON) {
        return;
    }
    let host = Host::serving(vec![b'x'; 1 << 20]);
    let listed = format!("127.0.0.1:{}", host.port);
    let policy = policy_file(&format!(
        "version = 1\n[network]\negress-allow = [{listed:?}]\negress-max-connections = 1\negress-max-bytes = 100000\n"
    ));
    let code = format!(
        r#"
import urllib.request
for i in range(2):
    try:
        body = urllib.request.urlopen("http://{listed}/big").read()
        print(i, "read", len(body))
    except Exception as e:
        print(i, "refused", type(e).__name__)
"#
    );
    let r = python(&code, &["--policy", &path_of(&policy)]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let out = stdout_of(&r);
    // The first is cut short of its megabyte; the second is refused before it reaches the host.
    assert!(!out.contains("read 1048576"), "{out}");
    assert!(out.contains("1 refused"), "{out}");
    assert_eq!(host.accepted(), 1);
    let e = egress(&r);
    assert_eq!((e.allowed, e.refused), (1, 1), "{e:?}");
    assert_eq!(e.connections[0].cut, Some(Cut::MaxBytes), "{e:?}");
    assert!(e.bytes_out + e.bytes_in <= 100_000, "{e:?}");
    assert_eq!(e.connections[1].refused, Some(Refusal::MaxConnections), "{e:?}");
}

#[test]
fn pip_installs_from_a_listed_index() {
    let _alone = alone();
    if !have(PYTHON)
        || !std::process::Command::new(PYTHON)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        eprintln!("skip: no pip for {PYTHON} (Debian: python3-pip)");
        return;
    }
    let wheel = tiny_wheel();
    let index = format!("<html><body><a href=\"{WHEEL}\">{WHEEL}</a></body></html>");
    let host = Host::serving_paths(vec![
        (format!("/simple/egresspkg/{WHEEL}"), wheel),
        ("/simple/egresspkg/".into(), index.into_bytes()),
    ]);
    let listed = format!("127.0.0.1:{}", host.port);
    let code = format!(
        "import runpy, sys\nsys.argv = ['pip', 'install', '--no-cache-dir', '--disable-pip-version-check', '--index-url', \
         'http://{listed}/simple/', '--target', '/tmp/t', 'egresspkg']\ntry:\n    runpy.run_module('pip', run_name='__main__')\n\
         except SystemExit as e:\n    assert not e.code, e.code\nsys.path.insert(0, '/tmp/t')\nimport egresspkg\nprint(egresspkg.VALUE)"
    );
    let r = python(&code, &["--egress", &listed, "--timeout", "60s"]);
    assert_eq!(r.status, Status::Ok, "{}", r.stderr.text.as_deref().unwrap_or(""));
    assert!(stdout_of(&r).ends_with("installed through the egress proxy\n"), "{}", stdout_of(&r));
    assert!(egress(&r).allowed >= 2, "{:?}", r.egress);
}

const WHEEL: &str = "egresspkg-0.1-py3-none-any.whl";

/// A wheel of one module, made by the host's python3 (its zipfile and hashlib).
fn tiny_wheel() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join(WHEEL);
    let script = r#"
import base64, hashlib, sys, zipfile
files = {"egresspkg/__init__.py": "VALUE = 'installed through the egress proxy'\n",
         "egresspkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: egresspkg\nVersion: 0.1\n",
         "egresspkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
record = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b'=').decode()},{len(v)}" for k, v in files.items()]
files["egresspkg-0.1.dist-info/RECORD"] = "\n".join(record + ["egresspkg-0.1.dist-info/RECORD,,"]) + "\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for k, v in files.items():
        z.writestr(k, v)
"#;
    let made = std::process::Command::new(PYTHON).args(["-c", script]).arg(&path).status().expect("python3");
    assert!(made.success());
    std::fs::read(&path).expect("wheel")
}

/// The proxy's threads in this process, by name (`egress`, `egress-conn`; the test binary's main
/// thread is named for the binary, `egress-HASH`).
fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("egress")))
        .count()
}

/// What this process's fds are (`socket:[INODE]`, `pipe:[INODE]`, paths).
fn open_fds() -> std::collections::BTreeSet<String> {
    let fds = std::fs::read_dir("/proc/self/fd").expect("fds").flatten();
    fds.filter_map(|f| std::fs::read_link(f.path()).ok()).map(|l| l.display().to_string()).collect()
}

#[test]
fn every_connection_ends_with_the_run_and_nothing_of_the_proxy_is_left() {
    let _alone = alone();
    if !have(PYTHON) {
        return;
    }
    // A host that holds its connection open: it sees the end when the proxy closes it.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (seen_end, seen) = (Arc::new(Mutex::new(None)), Arc::new(AtomicUsize::new(0)));
    let (e, s) = (seen_end.clone(), seen.clone());
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            s.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 1024];
            while conn.read(&mut buf).is_ok_and(|n| n > 0) {}
            *e.lock().expect("end") = Some(std::time::Instant::now());
        }
    });
    let mut policy = Policy::builtin();
    policy.add_egress(&format!("127.0.0.1:{port}"), "test").expect("egress");
    policy.set_wall_timeout(Duration::from_millis(1500), "test").expect("timeout");
    let code = format!(
        "import socket, time\ns = socket.create_connection(('127.0.0.1', 3128))\n\
         s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n')\nprint(s.recv(100).decode().split()[1], flush=True)\n\
         s.sendall(b'still here')\ntime.sleep(60)"
    );
    let plan = Plan::prepare(&policy, &Job::new(PYTHON).args(["-c", &code])).expect("plan");
    let (threads, fds) = (proxy_threads(), open_fds());
    let r = plan.run(Output::Capture).expect("run");
    let ended = std::time::Instant::now();
    assert_eq!((r.status, stdout_of(&r)), (Status::Timeout, "200\n"), "{r:?}");
    let c = &egress(&r).connections[0];
    // Ended by the run: the program's end closed its side, or the proxy cut it at the run's end.
    assert_eq!((c.allowed, c.bytes_out), (true, 10), "{c:?}");
    assert!(matches!(c.cut, None | Some(Cut::RunOver)), "{c:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert!(
        wait_for(Duration::from_secs(2), || seen_end
            .lock()
            .expect("end")
            .is_some_and(|t| t <= ended + Duration::from_millis(200))),
        "the host's connection outlived the run"
    );
    // Other tests' servers may have closed theirs since; nothing may be new.
    let new: Vec<String> = open_fds().difference(&fds).cloned().collect();
    assert_eq!((proxy_threads(), new), (threads, vec![]), "the proxy left threads or fds");
}

/// Needs no python3, curl or guest: `cargo xtask vm-test` runs it in the Linux 6.1 VM too, whose
/// Landlock (ABI 2) cannot pin `connect` to the proxy's port.
#[test]
fn a_static_program_tunnels_through_the_proxy_and_reaches_nothing_else() {
    let _alone = alone();
    let Some(helper) = attack_helper() else { return };
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            s.fetch_add(1, Ordering::SeqCst);
            let mut ping = [0u8; 4];
            if conn.read_exact(&mut ping).is_ok() && &ping == b"ping" {
                let _ = std::io::Write::write_all(&mut conn, b"pong");
            }
        }
    });
    let (dir, h) = (helper.parent().expect("dir").display().to_string(), helper.display().to_string());
    let listed = format!("127.0.0.1:{port}");
    let run_helper = |cmd: &str| run_report(&["--ro", &dir, "--egress", &listed, "--", &h, cmd, &port]).0;
    let r = run_helper("tunnel");
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "proxy: HTTP/1.1 200\nhost: pong\n"), "{r:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    for cmd in ["tcp4", "udp4"] {
        let r = run_helper(cmd);
        assert!(stdout_of(&r).contains(": failed: "), "{cmd}: {}", stdout_of(&r));
    }
    assert_eq!(seen.load(Ordering::SeqCst), 1, "a connect that skipped the proxy reached the host");
    let landlock = r.enforcement.iter().find(|l| l.layer == "landlock").map(|l| l.applied.clone()).unwrap_or_default();
    let pinned = if stockade::host::landlock_abi() >= 4 { "connect only to port 3128" } else { "connect not pinned" };
    assert!(landlock.contains(pinned), "{landlock}");
}

#[test]
fn bad_lists_are_refused_naming_the_entry() {
    let _alone = alone();
    for (text, key) in [
        ("[network]\negress-allow = [\"pypi.org\"]\n", "network.egress-allow[0]"),
        ("[network]\negress-allow = [\"127.1:80\"]\n", "network.egress-allow[0]"),
        ("[network]\negress-allow = [\"a.org:1\", \"A.org:1\"]\n", "network.egress-allow[1]"),
        ("[network]\negress-allow = [\"a.org:1\"]\negress-max-connections = 0\n", "network.egress-max-connections"),
        ("[namespaces]\nnet = false\n[network]\negress-allow = [\"a.org:1\"]\n", "network.egress-allow"),
        (
            "[seccomp]\nallow = [\"network\", \"unix-connect\"]\n[network]\negress-allow = [\"a.org:1\"]\n",
            "seccomp.allow[0]",
        ),
    ] {
        let f = policy_file(&format!("version = 1\n{text}"));
        let out = run(&["--policy", &path_of(&f), "--", "/bin/true"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(key), "{text}: {err}");
    }
    let out = run(&["--egress", "example.org", "--", "/bin/true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--egress example.org"), "{out:?}");
    // A Wasm guest keeps no sockets.
    let out = run(&["--egress", "example.org:443", "--python", "print(1)"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("keeps no sockets"), "{out:?}");
}
