//! A client for `stockade serve` behind `cargo xtask load` and the service rows of `cargo xtask
//! bench`: hyper's HTTP/1.1 client over the unix socket, one connection per client.
//!
//! Usage:
//!   load --socket PATH --requests N --concurrency C [--runtimes python,javascript,...]
//!       N requests spread over C clients, round-robin over the runtimes: p50/p99 latency, runs
//!       per second, errors (any answer but 200 with status ok), per runtime; warm jails that
//!       ended before their run count as errors.
//!   load --socket PATH --latency ROUNDS --spaced-ms MS --stockade BIN [--native-code CODE]
//!       one request per runtime per round, spaced so the warm pools refill, interleaved with the
//!       same code through `stockade run` (the CLI) in the same rounds: medians and ratios.
//!   load --socket PATH --throughput SECS --concurrency C [--runtimes ...]
//!       each runtime for SECS with C clients: runs per second.
//!   load --socket PATH --sessions ROUNDS --spaced-ms MS [--runtimes ...]
//!       per runtime, a one-off run, a run of a workspace session (a 4 KiB file in it) and a
//!       one-off run carrying the same file in and back, in turn, spaced: medians and ratios.
//!   load --socket PATH --batches ROUNDS
//!       batches against one jail per run (`load/batch.rs`): runs per second of 1,000 fresh runs,
//!       a judge's 100 inputs, 1,000 runs with a looper and an allocator; medians.
//!   load --socket PATH --hibernate ROUNDS --spaced-ms MS --big RUNTIME
//!       live Python sessions of three sizes (the 1 GiB one of runtime RUNTIME), each round a kept
//!       turn, a hibernation, a resumed turn and a fork: medians and ratios (`load/hibernate.rs`).
//!   load --socket PATH --cycles N --pid PID --state DIR
//!       N hibernations and resumed turns of one session: what server PID holds before and after.
//!   load --socket PATH --parked N --pid PID --state DIR
//!       N hibernated sessions: the server's RSS before and after.
//!   load --socket PATH --against PATH --labels A,B --throughput SECS --rounds K --concurrency C
//!       the same on two servers, alternating between them K times per runtime: the median
//!       rates and their ratio (the first server's over the second's).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[path = "load/batch.rs"]
mod batch;
#[path = "load/hibernate.rs"]
mod hibernate;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// The code each runtime runs.
fn code_for(runtime: &str) -> &'static str {
    match runtime {
        "javascript" => "console.log(1)",
        "native" => "",
        // The host's python3 with pandas preloaded (`preload = ["pandas"]`).
        "pandas" => "import pandas as pd; print(pd.DataFrame({\"a\": [1, 2]}).a.sum())",
        _ => "print(1)",
    }
}

struct Client {
    sender: SendRequest<Full<Bytes>>,
}

impl Client {
    async fn connect(socket: &str) -> Client {
        let io = tokio::net::UnixStream::connect(socket).await.expect("connect to the server's socket");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.expect("handshake");
        tokio::spawn(conn);
        Client { sender }
    }

    /// One run: whether it answered 200 with status ok, and how long it took.
    async fn run(&mut self, runtime: &str) -> (bool, Duration) {
        let body = serde_json::json!({"runtime": runtime, "code": code_for(runtime)}).to_string();
        let req = Request::builder()
            .method("POST")
            .uri("/v1/runs")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let t = Instant::now();
        let Ok(resp) = self.sender.send_request(req).await else { return (false, t.elapsed()) };
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let took = t.elapsed();
        let ok = status == 200 && serde_json::from_slice::<serde_json::Value>(&body).is_ok_and(|v| v["status"] == "ok");
        if !ok {
            // The status and what the program said on stderr (a runner's panic, say), else the body.
            let said = serde_json::from_slice::<serde_json::Value>(&body).ok().map(|v| {
                format!("{} {} stderr: {}", v["status"], v["error"], v["stderr"]["text"].as_str().unwrap_or(""))
            });
            let said = said.unwrap_or_else(|| String::from_utf8_lossy(&body).chars().take(300).collect());
            eprintln!("{runtime}: {status} {said}");
        }
        (ok, took)
    }
}

impl Client {
    /// One request: its status, its body and how long it took.
    async fn send(&mut self, method: &str, uri: &str, body: Vec<u8>) -> (u16, Bytes, Duration) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let t = Instant::now();
        let resp = self.sender.send_request(req).await.expect("send");
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        (status, body, t.elapsed())
    }

    /// The sum of one metric's samples in the server's `/metrics` (0 when absent).
    async fn metric(&mut self, name: &str) -> f64 {
        self.metric_with(name, &[]).await
    }

    /// The sum of metric `name` over its series whose labels hold every one of `labels`.
    async fn metric_with(&mut self, name: &str, labels: &[&str]) -> f64 {
        let req = Request::builder()
            .uri("/metrics")
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))
            .expect("request");
        let resp = self.sender.send_request(req).await.expect("GET /metrics");
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter(|l| labels.iter().all(|want| l.contains(want)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// The runs of `runtime` a warm jail served so far, and those it did not (`/metrics`).
async fn warm_cold(socket: &str, runtime: &str) -> (f64, f64) {
    let mut c = Client::connect(socket).await;
    let name = "stockade_run_latency_seconds_count";
    let rt = format!("runtime=\"{runtime}\"");
    (c.metric_with(name, &[&rt, "warm=\"true\""]).await, c.metric_with(name, &[&rt, "warm=\"false\""]).await)
}

/// Warm jails that ended before their run (each one a run that had to go cold): none is right.
async fn warm_died(socket: &str) -> usize {
    let n = Client::connect(socket).await.metric("stockade_warm_died_total").await;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a counter: whole and small
    let n = n as usize;
    if n > 0 {
        eprintln!("{n} warm jail(s) ended before their run");
    }
    n
}

/// The `per_mille`th quantile of sorted durations, in milliseconds (nearest rank).
fn pct(sorted: &[Duration], per_mille: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let last = sorted.len() - 1;
    let i = (last * per_mille).div_ceil(1000).min(last);
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let socket = arg(&args, "--socket").expect("--socket PATH");
    let runtimes: Vec<String> =
        arg(&args, "--runtimes").unwrap_or_else(|| "python,javascript".into()).split(',').map(String::from).collect();
    let concurrency: usize = arg(&args, "--concurrency").map_or(2, |c| c.parse().expect("concurrency"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if let Some(rounds) = arg(&args, "--latency") {
        let rounds: usize = rounds.parse().expect("rounds");
        let spaced = Duration::from_millis(arg(&args, "--spaced-ms").map_or(150, |m| m.parse().expect("ms")));
        let stockade = arg(&args, "--stockade").expect("--stockade BIN");
        rt.block_on(latency(&socket, &runtimes, rounds, spaced, &stockade, &args));
        return;
    }
    if let Some(rounds) = arg(&args, "--batches") {
        rt.block_on(batch::batches(&socket, rounds.parse().expect("rounds")));
        return;
    }
    let spaced = Duration::from_millis(arg(&args, "--spaced-ms").map_or(150, |m| m.parse().expect("ms")));
    if let Some(rounds) = arg(&args, "--hibernate") {
        let big = arg(&args, "--big").unwrap_or_else(|| "python".into());
        rt.block_on(hibernate::sizes(&socket, rounds.parse().expect("rounds"), spaced, &big));
        return;
    }
    let pid: Option<u32> = arg(&args, "--pid").map(|p| p.parse().expect("pid"));
    let state = arg(&args, "--state").map(std::path::PathBuf::from);
    if let (Some(n), Some(pid), Some(state)) = (arg(&args, "--cycles"), pid, &state) {
        rt.block_on(hibernate::cycles(&socket, pid, state, n.parse().expect("cycles")));
        return;
    }
    if let (Some(n), Some(pid), Some(state)) = (arg(&args, "--parked"), pid, &state) {
        rt.block_on(hibernate::parked(&socket, pid, state, n.parse().expect("sessions")));
        return;
    }
    if let Some(rounds) = arg(&args, "--sessions") {
        let rounds: usize = rounds.parse().expect("rounds");
        let spaced = Duration::from_millis(arg(&args, "--spaced-ms").map_or(150, |m| m.parse().expect("ms")));
        rt.block_on(sessions(&socket, &runtimes, rounds, spaced));
        return;
    }
    if let (Some(secs), Some(other)) = (arg(&args, "--throughput"), arg(&args, "--against")) {
        let secs: f64 = secs.parse().expect("seconds");
        let rounds: usize = arg(&args, "--rounds").map_or(3, |k| k.parse().expect("rounds"));
        let labels = arg(&args, "--labels").unwrap_or_else(|| "A,B".into());
        let (a, b) = labels.split_once(',').expect("--labels A,B");
        let errors = rt.block_on(against(&[&socket, &other], (a, b), &runtimes, concurrency, secs, rounds));
        if errors > 0 {
            std::process::exit(1);
        }
        return;
    }
    if let Some(secs) = arg(&args, "--throughput") {
        let secs: f64 = secs.parse().expect("seconds");
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let costs = interpreter_costs(&args);
        rt.block_on(async {
            println!(
                "runtime        clients   runs/s   errors   warm (/metrics)   one interpreter start (CPU)   the CPU's rate   served / that"
            );
            for r in &runtimes {
                let before = warm_cold(&socket, r).await;
                let (n, errors) = for_time(&socket, r, concurrency, Duration::from_secs_f64(secs)).await;
                let rate = n as f64 / secs;
                let after = warm_cold(&socket, r).await;
                let (w, c) = (after.0 - before.0, after.1 - before.1);
                let warm = format!("{:.1} %", 100.0 * w / (w + c).max(1.0));
                match costs.get(r.as_str()) {
                    Some(cost) => {
                        let allowed = cores as f64 / cost.as_secs_f64();
                        println!(
                            "{r:<14} {concurrency:>7} {rate:>8.1} {errors:>8} {warm:>17} {:>22.2} ms {:>14.1} /s {:>14.2}",
                            cost.as_secs_f64() * 1000.0,
                            allowed,
                            rate / allowed
                        );
                    }
                    None => println!("{r:<14} {concurrency:>7} {rate:>8.1} {errors:>8} {warm:>17}"),
                }
            }
            if warm_died(&socket).await > 0 {
                std::process::exit(1);
            }
        });
        return;
    }
    let requests: usize = arg(&args, "--requests").map_or(100, |n| n.parse().expect("requests"));
    let errors =
        rt.block_on(async { load(&socket, &runtimes, requests, concurrency).await + warm_died(&socket).await });
    if errors > 0 {
        std::process::exit(1);
    }
}

/// Runs per second of each runtime on two servers, `rounds` times in turn: prints the medians
/// and their ratio; returns the errors (and warm jails that died) of both.
async fn against(
    sockets: &[&str; 2],
    labels: (&str, &str),
    runtimes: &[String],
    concurrency: usize,
    secs: f64,
    rounds: usize,
) -> usize {
    let (a, b) = labels;
    println!("runtime        clients  {a:>12}  {b:>12}   {a} / {b}   (runs/s, medians of {rounds} rounds in turn)");
    let mut errors = 0;
    for r in runtimes {
        let mut rates = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (i, socket) in sockets.iter().enumerate() {
                let (n, e) = for_time(socket, r, concurrency, Duration::from_secs_f64(secs)).await;
                rates[i].push(n as f64 / secs);
                errors += e;
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (ra, rb) = (median(&mut rates[0]), median(&mut rates[1]));
        println!("{r:<14} {concurrency:>7}  {ra:>12.1}  {rb:>12.1}   {:>6.2}x", ra / rb);
    }
    errors + warm_died(sockets[0]).await + warm_died(sockets[1]).await
}

/// N requests over C clients; prints per-runtime figures; returns the errors.
async fn load(socket: &str, runtimes: &[String], requests: usize, concurrency: usize) -> usize {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (socket, runtimes, next) = (socket.to_string(), runtimes.to_vec(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&socket).await;
            let mut seen: Vec<(String, bool, Duration)> = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= requests {
                    break;
                }
                let r = &runtimes[i % runtimes.len()];
                let (ok, took) = c.run(r).await;
                seen.push((r.clone(), ok, took));
            }
            seen
        }));
    }
    let mut by: BTreeMap<String, (Vec<Duration>, usize)> = BTreeMap::new();
    for t in tasks {
        for (r, ok, took) in t.await.expect("client") {
            let e = by.entry(r).or_default();
            e.0.push(took);
            if !ok {
                e.1 += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("{requests} requests, {concurrency} clients, {secs:.1} s");
    println!("runtime        requests   p50 ms   p99 ms   runs/s   errors");
    let mut errors = 0;
    for (r, (mut lat, e)) in by {
        lat.sort();
        println!(
            "{r:<14} {:>8} {:>8.2} {:>8.2} {:>8.1} {e:>8}",
            lat.len(),
            pct(&lat, 500),
            pct(&lat, 990),
            lat.len() as f64 / secs
        );
        errors += e;
    }
    errors
}

/// One runtime for `secs` with C clients: runs done and errors.
async fn for_time(socket: &str, runtime: &str, concurrency: usize, secs: Duration) -> (usize, usize) {
    let end = Instant::now() + secs;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (socket, runtime) = (socket.to_string(), runtime.to_string());
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(&socket).await;
            let (mut n, mut e) = (0, 0);
            while Instant::now() < end {
                if c.run(&runtime).await.0 { n += 1 } else { e += 1 }
            }
            (n, e)
        }));
    }
    let mut total = (0, 0);
    for t in tasks {
        let (n, e) = t.await.expect("client");
        total.0 += n;
        total.1 += e;
    }
    total
}

/// Spaced rounds: each runtime through the server, and the same code through the CLI.
async fn latency(socket: &str, runtimes: &[String], rounds: usize, spaced: Duration, stockade: &str, args: &[String]) {
    let mut client = Client::connect(socket).await;
    let mut served: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut cli: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let guest_dir = arg(args, "--guest-dir");
    for _ in 0..rounds {
        for r in runtimes {
            tokio::time::sleep(spaced).await;
            let (ok, took) = client.run(r).await;
            assert!(ok, "{r} failed through the server");
            served.entry(r.clone()).or_default().push(took);
            let mut cmd = std::process::Command::new(stockade);
            cmd.arg("run");
            if let Some(g) = &guest_dir {
                cmd.args(["--guest-dir", g]);
            }
            match r.as_str() {
                "python" => cmd.args(["--python", code_for(r)]),
                "javascript" => cmd.args(["--js", code_for(r)]),
                "python3" | "pandas" => cmd
                    .args(["--policy", &arg(args, "--wrap-python").expect("--wrap-python FILE")])
                    .args(["--", "/usr/bin/python3", "-c", code_for(r)]),
                _ => cmd
                    .args(["--ro", &arg(args, "--native-dir").expect("--native-dir DIR")])
                    .args(["--", &arg(args, "--native-true").expect("--native-true PATH")]),
            };
            cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            tokio::time::sleep(spaced).await;
            let t = Instant::now();
            let ok = cmd.status().is_ok_and(|s| s.success());
            assert!(ok, "{r} failed through the CLI");
            cli.entry(r.clone()).or_default().push(t.elapsed());
        }
    }
    println!("runtime        served p50 ms  p90 ms   CLI p50 ms   served / CLI");
    let p50 = |r: &str| served.get(r).map(|s| pct(&sorted(s), 500));
    if let (Some(p), Some(q)) = (p50("pandas"), p50("python3")) {
        println!("pandas preloaded, served p50 / python3 print(1) served p50: {:.3}", p / q);
    }
    for r in runtimes {
        let (mut s, mut c) = (served.remove(r).unwrap_or_default(), cli.remove(r).unwrap_or_default());
        s.sort();
        c.sort();
        println!(
            "{r:<14} {:>13.2} {:>7.2} {:>12.2} {:>14.3}",
            pct(&s, 500),
            pct(&s, 900),
            pct(&c, 500),
            pct(&s, 500) / pct(&c, 500)
        );
    }
}

fn sorted(d: &[Duration]) -> Vec<Duration> {
    let mut d = d.to_vec();
    d.sort();
    d
}

/// One-off runs against runs of a workspace session holding a 4 KiB file, in turn; one-off
/// runs that carry the same file in and take it back, as a session's run does; and a turn of a
/// live session (`x += 1`, its interpreter kept).
async fn sessions(socket: &str, runtimes: &[String], rounds: usize, spaced: Duration) {
    use base64::Engine as _;
    let mut client = Client::connect(socket).await;
    println!(
        "runtime        one-off p50 ms   session p50 ms   session / one-off   one-off, the file in and out   session / that   live x += 1 p50 ms   live / one-off"
    );
    for r in runtimes {
        let (status, made, _) =
            client.send("POST", "/v1/sessions", serde_json::json!({"runtime": r}).to_string().into_bytes()).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&made));
        let id =
            serde_json::from_slice::<serde_json::Value>(&made).expect("JSON")["id"].as_str().expect("id").to_string();
        let file = vec![b'x'; 4096];
        let (status, _, _) = client.send("PUT", &format!("/v1/sessions/{id}/files/data.txt"), file.clone()).await;
        assert_eq!(status, 200);
        let content = base64::engine::general_purpose::STANDARD.encode(&file);
        let plain = serde_json::json!({"runtime": r, "code": code_for(r)}).to_string().into_bytes();
        let carried = serde_json::json!({"runtime": r, "code": code_for(r), "files": [{"path": "data.txt", "content": content}], "return-files": ["**"]})
            .to_string()
            .into_bytes();
        let in_session = serde_json::json!({"code": code_for(r)}).to_string().into_bytes();
        let live = serde_json::json!({"runtime": r, "mode": "live"}).to_string().into_bytes();
        let (status, made, _) = client.send("POST", "/v1/sessions", live).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&made));
        let live_id =
            serde_json::from_slice::<serde_json::Value>(&made).expect("JSON")["id"].as_str().expect("id").to_string();
        let first = if r.contains("javascript") { "var x = 0" } else { "x = 0" };
        let (status, _, _) = client
            .send(
                "POST",
                &format!("/v1/sessions/{live_id}/runs"),
                serde_json::json!({"code": first}).to_string().into_bytes(),
            )
            .await;
        assert_eq!(status, 200);
        let turn = serde_json::json!({"code": "x += 1"}).to_string().into_bytes();
        let mut times: [Vec<Duration>; 4] = Default::default();
        for _ in 0..rounds {
            for (i, (uri, body)) in [
                ("/v1/runs".to_string(), &plain),
                (format!("/v1/sessions/{id}/runs"), &in_session),
                ("/v1/runs".to_string(), &carried),
                (format!("/v1/sessions/{live_id}/runs"), &turn),
            ]
            .into_iter()
            .enumerate()
            {
                tokio::time::sleep(spaced).await;
                let (status, answer, took) = client.send("POST", &uri, body.clone()).await;
                assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
                times[i].push(took);
            }
        }
        let _ = client.send("DELETE", &format!("/v1/sessions/{id}"), Vec::new()).await;
        let _ = client.send("DELETE", &format!("/v1/sessions/{live_id}"), Vec::new()).await;
        let [once, kept, carried, live] = times.map(|mut t| {
            t.sort();
            pct(&t, 500)
        });
        println!(
            "{r:<14} {once:>14.2} {kept:>16.2} {:>19.3} {carried:>30.2} {:>16.3} {live:>20.2} {:>16.3}",
            kept / once,
            kept / carried,
            live / once
        );
    }
}

/// The CPU one interpreter start costs, outside any jail (the floor of what a run of it costs):
/// Python `print(1)` through the Wasm runner alone, and the host's `python3 -c 'print(1)'`.
/// Children's CPU time from /proc/self/stat (clock ticks), over 40 runs each.
fn interpreter_costs(args: &[String]) -> BTreeMap<&'static str, Duration> {
    use stockade::wasm::{self, GuestCode, WasmJob};
    let mut out = BTreeMap::new();
    let children_cpu = || -> Duration {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let f: Vec<&str> = stat.rsplit_once(") ").map_or(vec![], |(_, r)| r.split(' ').collect());
        // cutime and cstime: fields 16 and 17 of stat, 14 and 15 after the command (from state).
        let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let ticks = field(13) + field(14);
        Duration::from_millis(ticks * 10)
    };
    let mut measure = |name: &'static str, cmd: &mut dyn FnMut() -> std::process::Command| {
        let before = children_cpu();
        let n = 40;
        for _ in 0..n {
            let ok = cmd()
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{name}: the interpreter alone failed");
        }
        out.insert(name, (children_cpu() - before) / n);
    };
    if let (Some(g), Some(bin)) = (arg(args, "--guest-dir"), arg(args, "--stockade")) {
        let mut job = WasmJob::new(GuestCode::Python("print(1)".into()), &bin);
        job.guest_dir = Some(g.into());
        let app = tempfile::tempdir().expect("temp dir");
        let config = wasm::runner_config(&stockade::Policy::builtin(), &job, app.path()).expect("runner config");
        let json = serde_json::to_string(&config).expect("json");
        measure("python", &mut || {
            let mut c = std::process::Command::new(&bin);
            c.args(["__runner", &json]);
            c
        });
    }
    if std::path::Path::new("/usr/bin/python3").exists() {
        measure("python3", &mut || {
            let mut c = std::process::Command::new("/usr/bin/python3");
            c.args(["-c", "print(1)"]);
            c
        });
    }
    out
}
