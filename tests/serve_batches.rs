//! Batches (`POST /v1/batches`) through the real server and a real HTTP client: every run a fresh
//! instance (no global, module or file of another run of its batch), every ending of a run ending
//! it alone (the others right), a judge's verdicts, the caps and refusals naming the field, the
//! stream, and a client that hangs up ending its batch (its jails gone). Needs the Wasm guests
//! (skips without them, saying so).

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::*;
use std::time::{Duration, Instant};

const RUNTIMES: &str = "[requests]\nbatch-max-runs = 1000\n\
                        [runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";

fn batch(s: &Server, body: &Value) -> Value {
    let (status, v) = json_call(s, "POST", "/v1/batches", body);
    assert_eq!(status, 200, "{v}");
    v
}

fn refused(s: &Server, body: &Value) -> (u16, String, String) {
    let (status, v) = json_call(s, "POST", "/v1/batches", body);
    let e = &v["error"];
    (status, e["field"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string())
}

fn stdout(r: &Value) -> &str {
    r["stdout"]["text"].as_str().unwrap_or("")
}

#[test]
fn every_run_of_a_batch_is_a_fresh_instance() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    let leave = "import sys\nsys.left = 1\nleft = 1\nopen('/app/left', 'w').write('x')\nimport colorsys\nprint('left')";
    let look = "import sys, os\nprint(hasattr(sys, 'left'), 'left' in globals(), os.listdir('/app'), 'colorsys' in sys.modules)";
    let runs: Vec<Value> = (0..64).map(|i| json!({"code": if i % 2 == 0 { leave } else { look }})).collect();
    let v = batch(&s, &json!({"runtime": "python", "runs": runs}));
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 64);
    let id = v["batch-id"].as_str().expect("an id");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(
            (r["status"].as_str(), r["jail"].as_str(), r["batch-id"].as_str()),
            (Some("ok"), Some("batch"), Some(id))
        );
        assert!(r["enforcement"].as_array().is_some_and(|l| !l.is_empty()), "{r}");
        let want = if i % 2 == 0 { "left\n" } else { "False False [] False\n" };
        assert_eq!(stdout(r), want, "run {i}: {r}");
    }
    assert!(v["summary"]["jails"].as_u64().is_some_and(|j| (1..=2).contains(&j)), "{v}");
    let js: Vec<Value> = (0..20)
        .map(|i| json!({"code": if i % 2 == 0 { "globalThis.left = 1; console.log('left')" } else { "console.log(typeof left)" }}))
        .collect();
    let v = batch(&s, &json!({"runtime": "javascript", "runs": js}));
    for (i, r) in v["results"].as_array().expect("results").iter().enumerate() {
        assert_eq!(stdout(r), if i % 2 == 0 { "left\n" } else { "undefined\n" }, "run {i}: {r}");
    }
}

#[test]
fn each_ending_ends_its_run_alone() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    let wall = json!({"wall-timeout-ms": 1000});
    let cases = [
        (json!({"code": "print(1)", "expect": "1"}), "ok", "accepted"),
        (json!({"code": "print(2)", "expect": "3"}), "ok", "wrong-answer"),
        (json!({"code": "raise ValueError('no')", "expect": ""}), "exited-nonzero", "runtime-error"),
        (json!({"code": "while True: pass", "limits": wall, "expect": ""}), "timeout", "timeout"),
        (
            json!({"code": "x = bytearray(300 << 20)", "limits": {"wasm-memory-max-bytes": 67108864}, "expect": ""}),
            "wasm-memory-limit",
            "memory-limit",
        ),
        (
            json!({"code": "print('x' * 100000)", "limits": {"stdout-max-bytes": 1000}, "expect": ""}),
            "output-limit",
            "output-limit",
        ),
        (json!({"code": "import sys; sys.exit(3)", "expect": ""}), "exited-nonzero", "runtime-error"),
    ];
    let mut runs = Vec::new();
    for (run, _, _) in &cases {
        runs.push(run.clone());
        runs.push(json!({"code": "print(7 * 6)", "expect": "42"}));
    }
    let v = batch(&s, &json!({"runtime": "python", "runs": runs}));
    let results = v["results"].as_array().expect("results");
    for (i, (_, status, verdict)) in cases.iter().enumerate() {
        let r = &results[2 * i];
        assert_eq!((r["status"].as_str(), r["verdict"].as_str()), (Some(*status), Some(*verdict)), "case {i}: {r}");
        let next = &results[2 * i + 1];
        assert_eq!((stdout(next), next["verdict"].as_str()), ("42\n", Some("accepted")), "after case {i}: {next}");
    }
    assert_eq!(results[6]["wall-timeout-ms"], 1000, "{}", results[6]);
    let summary = &v["summary"];
    assert_eq!(summary["runs"], 14);
    assert_eq!(summary["verdicts"]["accepted"], 8, "{summary}");
    assert_eq!(summary["statuses"]["timeout"], 1, "{summary}");
}

#[test]
fn a_judge_runs_one_program_against_many_inputs() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    let inputs: Vec<Value> = (0..100)
        .map(|i| {
            let square = if i == 17 { 0 } else { i * i };
            json!({"stdin": format!("{i}\n"), "expect": format!("{square}\n")})
        })
        .collect();
    let code = "n = int(input())\nprint(n * n)";
    let v = batch(&s, &json!({"runtime": "python", "code": code, "inputs": inputs}));
    let verdicts: Vec<&str> =
        v["results"].as_array().expect("results").iter().map(|r| r["verdict"].as_str().unwrap_or("")).collect();
    assert_eq!(verdicts.iter().filter(|x| **x == "accepted").count(), 99, "{v}");
    assert_eq!(verdicts[17], "wrong-answer");
    assert_eq!(v["summary"]["verdicts"], json!({"accepted": 99, "wrong-answer": 1}));
    // Exact: the newline print adds must be expected too.
    let exact = json!({"runtime": "javascript", "code": "console.log(6 * 7)", "compare": "exact",
                       "inputs": [{"expect": "42"}, {"expect": "42\n"}]});
    let v = batch(&s, &exact);
    let verdicts: Vec<&str> =
        v["results"].as_array().expect("results").iter().map(|r| r["verdict"].as_str().unwrap_or("")).collect();
    assert_eq!(verdicts, ["wrong-answer", "accepted"], "{v}");
}

#[test]
fn a_bad_batch_is_refused_naming_its_field_before_anything_runs() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", &format!("{RUNTIMES}\n"), false);
    let one = json!([{"code": "print(1)"}]);
    let cases = [
        (json!({"runtime": "python"}), "runs"),
        (json!({"runtime": "python", "runs": one, "code": "print(1)", "inputs": [{}]}), "runs"),
        (json!({"runtime": "python", "inputs": [{}]}), "code"),
        (json!({"runtime": "python", "code": "print(1)", "inputs": [{"code": "print(2)"}]}), "inputs[0].code"),
        (json!({"runtime": "ruby", "runs": one}), "runtime"),
        (
            json!({"runtime": "python", "runs": [{"code": "1", "limits": {"memory-max-bytes": 1 << 28}}]}),
            "runs[0].limits.memory-max-bytes",
        ),
        (
            json!({"runtime": "python", "runs": [{"code": "1"}, {"code": "1", "limits": {"wall-timeout-ms": 1u64 << 40}}]}),
            "runs[1].limits.wall-timeout-ms",
        ),
        (
            json!({"runtime": "python", "limits": {"wall-timeout-ms": 1000}, "runs": [{"code": "1", "limits": {"wall-timeout-ms": 2000}}]}),
            "runs[0].limits.wall-timeout-ms",
        ),
        (
            json!({"runtime": "python", "runs": [{"code": "1", "stdin": "a", "stdin-base64": "YQ=="}]}),
            "runs[0].stdin-base64",
        ),
        (json!({"runtime": "python", "runs": [{"code": "1", "nope": 1}]}), "runs[0]"),
    ];
    for (body, field) in cases {
        let (status, got, message) = refused(&s, &body);
        assert_eq!(status, 400, "{body}: {message}");
        assert!(got.starts_with(field), "{body}: field {got:?} ({message}), not {field:?}");
    }
    let many: Vec<Value> = (0..1001).map(|_| json!({"code": "1"})).collect();
    let (status, field, message) = refused(&s, &json!({"runtime": "python", "runs": many}));
    assert_eq!((status, field.as_str()), (400, "runs"), "{message}");
    assert!(message.contains("batch-max-runs"), "{message}");
}

#[test]
fn a_streamed_batch_gives_each_result_as_it_ends() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    let runs: Vec<Value> = (0..40).map(|i| json!({"code": format!("print({i})")})).collect();
    let (status, events) = post_stream_to(&s.socket, "/v1/batches", &json!({"runtime": "python", "runs": runs}));
    assert_eq!(status, 200);
    let (last, results) = events.split_last().expect("events");
    let mut seen: Vec<u64> = results.iter().map(|(_, e)| e["index"].as_u64().expect("an index")).collect();
    for (_, e) in results {
        let i = e["index"].as_u64().unwrap_or(0);
        assert_eq!(stdout(&e["result"]), format!("{i}\n"), "{e}");
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..40).collect::<Vec<u64>>());
    assert_eq!(last.1["summary"]["runs"], 40, "{}", last.1);
    let (_, metrics) = get_text(&s, "/metrics");
    let counted = metrics.lines().find(|l| l.starts_with("stockade_batch_runs_total{") && l.contains("status=\"ok\""));
    assert!(counted.is_some_and(|l| l.ends_with(" 40")), "{metrics}");
}

#[test]
fn a_client_that_hangs_up_ends_its_batch() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    s.wait_warm();
    let before = descendants_of(s.pid()).len();
    // 400 runs of about 50 ms each: 10 s on two jails, were it left to run.
    let runs: Vec<Value> =
        (0..400).map(|_| json!({"code": "import time\nt = time.time()\nwhile time.time() - t < 0.05: pass"})).collect();
    let body = json!({"runtime": "python", "runs": runs}).to_string();
    let head = format!(
        "POST /v1/batches?stream=ndjson HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    {
        use std::io::{BufRead, Write};
        let mut conn = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
        conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(body.as_bytes())).expect("send");
        let mut lines = std::io::BufReader::new(conn.try_clone().expect("clone"));
        let mut got = 0;
        let mut line = String::new();
        while got < 3 && lines.read_line(&mut line).is_ok_and(|n| n > 0) {
            got += usize::from(line.contains("\"index\""));
            line.clear();
        }
        assert_eq!(got, 3, "three results came");
    }
    let t = Instant::now();
    let gone = wait_for(Duration::from_secs(4), || descendants_of(s.pid()).len() <= before);
    assert!(gone, "the batch's jails were still there {:?} after its client hung up", t.elapsed());
    let (status, v) = json_call(&s, "POST", "/v1/runs", &json!({"runtime": "python", "code": "print(5)"}));
    assert_eq!((status, stdout(&v)), (200, "5\n"), "{v}");
}

#[test]
fn a_thousand_runs_with_a_looper_and_an_allocator_end_within_the_looper_s_limit() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    let plain = |n: usize| -> Vec<Value> { (0..n).map(|i| json!({"code": format!("print({i})")})).collect() };
    let t = Instant::now();
    let v = batch(&s, &json!({"runtime": "python", "runs": plain(998)}));
    let alone = t.elapsed();
    assert_eq!(v["summary"]["statuses"]["ok"], 998, "{}", v["summary"]);
    let mut runs = plain(1000);
    runs[300] = json!({"code": "while True: pass", "limits": {"wall-timeout-ms": 2000}});
    runs[700] = json!({"code": "x = []\nwhile True: x.append(bytearray(1 << 20))", "limits": {"wasm-memory-max-bytes": 67108864}});
    let t = Instant::now();
    let v = batch(&s, &json!({"runtime": "python", "runs": runs}));
    let took = t.elapsed();
    let results = v["results"].as_array().expect("results");
    assert_eq!(results[300]["status"], "timeout", "{}", results[300]);
    assert_eq!(results[700]["status"], "wasm-memory-limit", "{}", results[700]);
    let right =
        results.iter().enumerate().filter(|(i, r)| r["status"] == "ok" && stdout(r) == format!("{i}\n")).count();
    assert_eq!(right, 998, "{}", v["summary"]);
    let most = alone + Duration::from_millis(2000 + 3000);
    assert!(took < most, "the batch took {took:?}: more than the looper's 2 s and the rest's {alone:?} (+3 s)");
}
