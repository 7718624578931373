//! `Idempotency-Key` through the real server: a run asked again with its key gets the first
//! answer and never runs twice (asked after it, or while it runs), a session's run too (the
//! session counts one run); the key with another request is 422; a streamed run cannot carry one.
//! Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use serde_json::{Value, json};
use server::*;
use std::time::Duration;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n";

fn keyed(s: &Server, path: &str, key: &str, body: &Value) -> Response {
    request(To::Unix(&s.socket), "POST", path, &[JSON, ("idempotency-key", key)], body.to_string().into_bytes())
}

fn replayed(r: &Response) -> bool {
    r.headers.get("idempotency-replayed").is_some_and(|v| v == "true")
}

#[test]
fn a_run_asked_again_with_its_key_is_answered_once() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    // What a second run would print otherwise: a random number of its own.
    let body = json!({"runtime": "python", "code": "import random, time\ntime.sleep(0.4)\nprint(random.random())"});
    let first = keyed(&s, "/v1/runs", "k-1", &body);
    assert_eq!(first.status, 200);
    assert!(!replayed(&first));
    let again = keyed(&s, "/v1/runs", "k-1", &body);
    assert_eq!((again.status, replayed(&again)), (200, true));
    assert_eq!(again.body, first.body, "the first answer, not a second run");
    // Two at once with a new key: one runs, the other waits for its answer.
    let (a, b) = std::thread::scope(|t| {
        let a = t.spawn(|| keyed(&s, "/v1/runs", "k-2", &body));
        std::thread::sleep(Duration::from_millis(100));
        let b = t.spawn(|| keyed(&s, "/v1/runs", "k-2", &body));
        (a.join().expect("a"), b.join().expect("b"))
    });
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(a.body, b.body);
    assert!(replayed(&a) != replayed(&b), "one ran, the other was given its answer");
    let (_, metrics) = get_text(&s, "/metrics");
    let runs: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("stockade_runs_total{") && l.contains("runtime=\"python\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(runs, 2.0, "{metrics}");
    // The key with another request: refused, naming the key.
    let other = json!({"runtime": "python", "code": "print(2)"});
    let r = keyed(&s, "/v1/runs", "k-1", &other);
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (422, Some("idempotency-mismatch")));
    // A streamed run's answer is not kept: a key with one is refused.
    let r = keyed(&s, "/v1/runs?stream=ndjson", "k-3", &body);
    assert_eq!((r.status, r.json()["error"]["field"].as_str()), (400, Some("Idempotency-Key")));
    for bad in ["", "a b", &"x".repeat(256)] {
        let r = keyed(&s, "/v1/runs", bad, &other);
        assert_eq!((r.status, r.json()["error"]["field"].as_str()), (400, Some("Idempotency-Key")), "{bad:?}");
    }
}

#[test]
fn a_session_s_run_asked_again_with_its_key_runs_once() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let (status, made) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": "live"}));
    assert_eq!(status, 201, "{made}");
    let id = made["id"].as_str().expect("id").to_string();
    let path = format!("/v1/sessions/{id}/runs");
    let body = json!({"code": "n = globals().get('n', 0) + 1\nprint(n)"});
    let first = keyed(&s, &path, "turn-1", &body);
    let again = keyed(&s, &path, "turn-1", &body);
    assert_eq!((first.status, again.status, replayed(&again)), (200, 200, true));
    assert_eq!(first.json()["stdout"]["text"], "1\n");
    assert_eq!(again.body, first.body);
    let (_, info) = json_call(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null);
    assert_eq!(info["runs"], 1, "{info}");
    let next = keyed(&s, &path, "turn-2", &body);
    assert_eq!(next.json()["stdout"]["text"], "2\n", "a new key is a new run");
}
