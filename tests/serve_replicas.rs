//! Replicas on one state directory (`sessions.replica-lease-ms`), through real servers and a real
//! HTTP client: a session is held by one server at a time, so that a run asked of another while
//! the holder runs it is refused (409 `session-busy`), never run at once; between runs, the
//! holder hands a live session over (hibernated) to the replica asked for it, which resumes it
//! with its variables, and a workspace session's files go with it; a replica killed with SIGKILL
//! loses no answered run: its live session resumes on another once its lease lapsed. A server
//! alone and replicas never share a directory. Needs the Wasm guests (skips without them).

mod common;
mod server;

use serde_json::{Value, json};
use server::*;
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 1000;

fn config() -> String {
    format!(
        "[sessions]\nreplica-lease-ms = {LEASE_MS}\n\
         [runtimes.python]\nguest = \"python\"\nwarm = 1\n"
    )
}

fn open(s: &Server, mode: &str) -> String {
    let (status, v) = json_call(s, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": mode}));
    assert_eq!(status, 201, "{v}");
    v["id"].as_str().expect("id").to_string()
}

fn run_of(s: &Server, id: &str, code: &str) -> (u16, Value) {
    json_call(s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": code}))
}

/// A run that must be answered: its stdout, and what became of its interpreter.
fn run(s: &Server, id: &str, code: &str) -> (String, String) {
    let (status, v) = run_of(s, id, code);
    assert_eq!(status, 200, "{v}");
    let out = v["stdout"]["text"].as_str().unwrap_or_default().to_string();
    (out, v["session"]["interpreter"].as_str().unwrap_or_default().to_string())
}

fn pair() -> Option<(Server, Server)> {
    if !guests() {
        return None;
    }
    let a = Server::start("", &config(), false);
    let b = a.beside("", &config());
    a.wait_warm();
    b.wait_warm();
    Some((a, b))
}

#[test]
fn one_replica_at_a_time_runs_a_session_and_the_other_takes_it_over_between_runs() {
    let Some((a, b)) = pair() else { return };
    let id = open(&a, "live");
    assert_eq!(run(&a, &id, "n = 0\nprint('ok')").0, "ok\n");

    // A long run on a: b, asked meanwhile, refuses (it never runs the session at once).
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| run_of(&a, &id, "import time\ntime.sleep(4)\nn += 1\nprint(n)"));
        let running = common::wait_for(Duration::from_secs(10), || {
            json_call(&a, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["running"].is_string()
        });
        assert!(running, "the slow run did not start");
        let t0 = Instant::now();
        let (status, v) = run_of(&b, &id, "n += 10\nprint(n)");
        assert_eq!((status, v["error"]["code"].as_str()), (409, Some("session-busy")), "{v}");
        assert!(t0.elapsed() < Duration::from_millis(3000), "b waited {:?}", t0.elapsed());
        let (status, v) = slow.join().expect("the slow run");
        assert_eq!((status, v["stdout"]["text"].as_str()), (200, Some("1\n")), "b's run did not happen: {v}");
    });

    // Between runs, b takes it: a hands its interpreter over (hibernated), b resumes it.
    assert_eq!(run(&b, &id, "n += 1\nprint(n)"), ("2\n".into(), "resumed".into()));
    assert_eq!(run(&b, &id, "n += 1\nprint(n)"), ("3\n".into(), "kept".into()));
    // And back.
    assert_eq!(run(&a, &id, "n += 1\nprint(n)"), ("4\n".into(), "resumed".into()));
    let (status, v) = json_call(&b, "GET", &format!("/v1/sessions/{id}"), &Value::Null);
    assert_eq!((status, v["runs"].as_u64()), (200, Some(5)), "{v}");

    // A workspace session made on b: its files are a's to read once a asks for it.
    let ws = open(&b, "workspace");
    let put = call(&b, "PUT", &format!("/v1/sessions/{ws}/files/notes.txt"), b"from b".to_vec());
    assert_eq!(put.status, 200, "{}", String::from_utf8_lossy(&put.body));
    assert_eq!(run(&a, &ws, "print(open('notes.txt').read())").0, "from b\n");
    let got = call(&b, "GET", &format!("/v1/sessions/{ws}/files/notes.txt"), Vec::new());
    assert_eq!((got.status, &got.body[..]), (200, &b"from b"[..]));

    // Ended on one, it is gone on the other too.
    assert_eq!(call(&a, "DELETE", &format!("/v1/sessions/{ws}"), Vec::new()).status, 204);
    let (status, _) = run_of(&b, &ws, "print(1)");
    assert!(status == 404 || status == 403 || status == 410, "{status}");
}

#[test]
fn a_killed_replicas_live_session_resumes_on_another_as_of_its_last_answered_run() {
    let Some((mut a, b)) = pair() else { return };
    let id = open(&a, "live");
    run(&a, &id, "x = 41\ndef f(v): return v + 1\nclass C:\n    k = 'c'\nprint('ok')");
    assert_eq!(run(&a, &id, "x += 1\nprint(x)"), ("42\n".into(), "kept".into()));
    a.stop(libc::SIGKILL, Duration::from_secs(10)).expect("a did not die");

    // b takes it once a's lease lapsed: every answered run of a is there.
    let t0 = Instant::now();
    assert_eq!(run(&b, &id, "print(f(x), C.k)"), ("43 c\n".into(), "resumed".into()));
    assert!(t0.elapsed() < Duration::from_millis(LEASE_MS * 3 / 2 + 2000), "took {:?}", t0.elapsed());
    // a's jails went with it; b's goes on.
    assert_eq!(run(&b, &id, "x += 1\nprint(x)"), ("43\n".into(), "kept".into()));
}

#[test]
fn a_server_alone_and_replicas_do_not_share_a_state_directory() {
    let alone = Server::start("", "[runtimes.python]\nguest = \"python\"\nwarm = 0\n", false);
    let dir = tempfile::tempdir().expect("dir");
    let replica = dir.path().join("replica.toml");
    let text = std::fs::read_to_string(&alone.config).expect("config").replace("api.sock", "replica.sock");
    std::fs::write(&replica, format!("{text}\n[sessions]\nreplica-lease-ms = {LEASE_MS}\n")).expect("write");
    let out = std::process::Command::new(common::stockade_bin())
        .arg("serve")
        .arg(&replica)
        .arg("--state-dir")
        .arg(alone.state_dir())
        .output()
        .expect("stockade serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a replica started beside a server alone: {err}");
    assert!(err.contains("in use by another server") && err.contains("replica-lease-ms"), "{err}");
}
