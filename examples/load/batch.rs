//! `load --batches ROUNDS`: batches (`POST /v1/batches`) against one jail per run, in the same
//! rounds: 1,000 fresh `print(i)` runs in one batch against runs of the same code through
//! `/v1/runs` with 4 clients for 3 s; a judge's 100 inputs (read a line, print its square) in
//! one batch against the same 100 runs sent one by one with 4 clients; 1,000 runs of which one
//! loops (its wall clock 2 s) and one allocates past its linear memory. Medians of the rounds.

use super::Client;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A batch's answer and how long it took (`Err`: the status and body).
async fn batch(c: &mut Client, body: &Value) -> (Value, Duration) {
    let (status, bytes, took) = c.send("POST", "/v1/batches", body.to_string().into_bytes()).await;
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    assert_eq!(status, 200, "a batch failed: {v}");
    (v, took)
}

fn right(v: &Value, want: impl Fn(usize) -> String) -> usize {
    let results = v["results"].as_array().map_or(&[][..], Vec::as_slice);
    results.iter().enumerate().filter(|(i, r)| r["status"] == "ok" && r["stdout"]["text"] == want(*i)).count()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// The judge's 100 runs one by one, 4 clients: how long they took.
async fn separately(socket: &str, code: &str) -> Duration {
    let t = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..4 {
        let (socket, code) = (socket.to_string(), code.to_string());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&socket).await;
            for i in (k..100).step_by(4) {
                let body = json!({"runtime": "python", "code": code, "stdin": format!("{i}\n")});
                let (status, bytes, _) = c.send("POST", "/v1/runs", body.to_string().into_bytes()).await;
                let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                assert!(status == 200 && v["stdout"]["text"] == format!("{}\n", i * i), "run {i}: {v}");
            }
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
    t.elapsed()
}

pub async fn batches(socket: &str, rounds: usize) {
    let mut c = Client::connect(socket).await;
    let runs = |rt: &str| -> Vec<Value> {
        (0..1000)
            .map(|i| json!({"code": if rt == "python" { format!("print({i})") } else { format!("console.log({i})") }}))
            .collect()
    };
    let judge = "n = int(input())\nprint(n * n)";
    let inputs: Vec<Value> =
        (0..100).map(|i| json!({"stdin": format!("{i}\n"), "expect": format!("{}\n", i * i)})).collect();
    let (mut rates, mut per_run, mut judged) = (vec![Vec::new(); 2], vec![Vec::new(); 2], (Vec::new(), Vec::new()));
    let mut ended = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (k, rt) in ["python", "javascript"].into_iter().enumerate() {
            let (v, took) = batch(&mut c, &json!({"runtime": rt, "runs": runs(rt)})).await;
            assert_eq!(right(&v, |i| format!("{i}\n")), 1000, "{}", v["summary"]);
            rates[k].push(1000.0 / took.as_secs_f64());
            let (n, errors) = super::for_time(socket, rt, 4, Duration::from_secs(3)).await;
            assert_eq!(errors, 0, "runs of {rt} failed");
            per_run[k].push(n as f64 / 3.0);
        }
        let (v, took) = batch(&mut c, &json!({"runtime": "python", "code": judge, "inputs": inputs})).await;
        assert_eq!(v["summary"]["verdicts"]["accepted"], 100, "{}", v["summary"]);
        judged.0.push(took.as_secs_f64());
        judged.1.push(separately(socket, judge).await.as_secs_f64());
        let mut mixed = runs("python");
        mixed[300] = json!({"code": "while True: pass", "limits": {"wall-timeout-ms": 2000}});
        mixed[700] = json!({"code": "x = []\nwhile True: x.append(bytearray(1 << 20))", "limits": {"wasm-memory-max-bytes": 67108864}});
        let (v, took) = batch(&mut c, &json!({"runtime": "python", "runs": mixed})).await;
        let statuses = (v["results"][300]["status"].clone(), v["results"][700]["status"].clone());
        assert_eq!(statuses, (json!("timeout"), json!("wasm-memory-limit")), "{}", v["summary"]);
        assert_eq!(right(&v, |i| format!("{i}\n")), 998, "{}", v["summary"]);
        ended.0.push(took.as_secs_f64());
        ended.1.push(v["summary"]["jails"].as_f64().unwrap_or(0.0));
    }
    println!("\nbatches (POST /v1/batches, the server's concurrency), medians of {rounds} rounds");
    println!("what                                              batch          one jail per run   ratio");
    for (k, rt) in ["Python", "JavaScript"].into_iter().enumerate() {
        let (b, p) = (median(rates[k].clone()), median(per_run[k].clone()));
        println!(
            "{rt:<10} print(i), 1,000 runs                   {b:>8.0} runs/s   {p:>8.0} runs/s     {:>6.2}x",
            b / p
        );
    }
    let (b, s) = (median(judged.0), median(judged.1));
    println!(
        "a judge's 100 inputs (square of a line)          {:>8.1} ms       {:>8.1} ms         {:>6.2}x",
        b * 1000.0,
        s * 1000.0,
        s / b
    );
    let rate = median(rates[0].clone());
    let w = median(ended.0);
    println!(
        "1,000 runs, one looping (2 s) and one out of memory: {:.2} s (the 998 others at the batch rate: {:.2} s, + 2 s), {} jails",
        w,
        998.0 / rate,
        median(ended.1)
    );
}
