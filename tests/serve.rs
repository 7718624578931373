//! `stockade serve`, started for real and spoken to with a real HTTP client (hyper's) over its
//! unix socket and loopback TCP: every endpoint and error code, auth, tightening-only limits,
//! files in and out, streaming, warm pools and their refill, the concurrency cap and queue,
//! header and body timeouts, drain on SIGTERM, and a restart after SIGKILL with nothing left.
//! Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use base64::Engine as _;
use common::*;
use serde_json::json;
use server::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn unb64(s: &serde_json::Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s.as_str().expect("a base64 string")).expect("base64")
}

#[test]
fn runs_python_javascript_and_a_module_and_says_what_it_serves() {
    if !guests() {
        return;
    }
    let s = Server::start("concurrency = 2", RUNTIMES, false);
    s.wait_warm();
    let (status, health) = get(&s.socket, "/v1/health");
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")), "{health}");

    let r = post_run(
        &s.socket,
        &json!({"runtime": "python", "code": "import sys; print(sys.argv[1:], input())", "argv": ["a b"], "stdin": "typed\n"}),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["stdout"]["text"], "['a b'] typed\n");
    assert!(v["warm-start"]["waited-ms"].as_f64().is_some(), "a warm jail served it: {v}");
    // The same report as `stockade run --report -`, in the same order.
    let keys: Vec<&str> = v.as_object().expect("object").keys().map(String::as_str).take(3).collect();
    assert_eq!(keys, ["schema-version", "status", "exit-code"]);
    assert_eq!(v["argv"], json!(["python", "import sys; print(sys.argv[1:], input())", "a b"]));

    let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "console.log(6 * 7)"})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("42\n")), "{v}");

    let v = post_run(&s.socket, &json!({"runtime": "python", "code": "raise SystemExit(3)"})).json();
    assert_eq!((v["status"].as_str(), v["exit-code"].as_i64()), (Some("exited-nonzero"), Some(3)), "{v}");

    // A module sent with the request: compiled in a jail, run in one, its stdin its own.
    let module = wat::parse_str(
        r#"(module
            (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 8) "from wasm\n")
            (func (export "_start") (i32.store (i32.const 0) (i32.const 8)) (i32.store (i32.const 4) (i32.const 10))
              (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 20)))))"#,
    )
    .expect("wat");
    let v = post_run(&s.socket, &json!({"runtime": "wasm", "module": b64(&module)})).json();
    assert_eq!((v["status"].as_str(), v["stdout"]["text"].as_str()), (Some("ok"), Some("from wasm\n")), "{v}");

    let (status, info) = get(&s.socket, "/v1/info");
    assert_eq!(status, 200);
    let names: Vec<&str> =
        info["runtimes"].as_array().expect("runtimes").iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["javascript", "python"], "{info}");
    assert!(
        info["policies"]
            .as_array()
            .expect("policies")
            .iter()
            .any(|p| p["name"] == "default" && p["limits"]["wall-timeout-ms"] == 10000)
    );
    let layers = info["runtimes"][1]["enforcement"].as_array().expect("what the host enforces");
    assert!(layers.iter().any(|l| l["layer"] == "seccomp" && l["status"] == "enforced"), "{layers:?}");
    // The answer is the typed Info the OpenAPI schema describes, whole.
    let typed: stockade::api::info::Info = serde_json::from_value(info.clone()).expect("an Info");
    assert_eq!(serde_json::to_value(&typed).expect("json"), info);
    let (_, health) = get(&s.socket, "/v1/health");
    let typed: stockade::api::info::Health = serde_json::from_value(health.clone()).expect("a Health");
    assert_eq!(typed.status, stockade::api::info::Readiness::Ok, "{health}");

    let m = request(To::Unix(&s.socket), "GET", "/metrics", &[], Vec::new());
    let text = String::from_utf8_lossy(&m.body);
    assert_eq!(m.status, 200);
    for needle in [
        "stockade_runs_total{runtime=\"python\",status=\"ok\"} 1",
        "stockade_runs_total{runtime=\"python\",status=\"exited-nonzero\"} 1",
        "stockade_runs_total{runtime=\"wasm\",status=\"ok\"} 1",
        "stockade_run_latency_seconds_count{runtime=\"javascript\",warm=\"true\"} 1",
        "stockade_queue_depth 0",
        "stockade_warm_target{runtime=\"python\"} 1",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }
}

#[test]
fn bad_requests_get_the_right_status_naming_the_field_and_leave_nothing() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let jails_before = descendants_of(s.pid()).len();
    let send = |body: &str| {
        request(
            To::Unix(&s.socket),
            "POST",
            "/v1/runs",
            &[("content-type", "application/json")],
            body.as_bytes().to_vec(),
        )
    };
    let field_of = |r: &Response| r.json()["error"]["field"].as_str().map(String::from);
    let cases: Vec<(&str, u16, Option<&str>, &str)> = vec![
        ("{\"runtime\": \"python\", \"code\": ", 400, Some("code"), "EOF"),
        ("{\"runtime\": \"python\", \"code\": \"1\", \"colour\": 1}", 400, Some("colour"), "unknown field"),
        ("{\"runtime\": \"python\"}", 400, Some("code"), "missing"),
        ("{\"runtime\": \"python\", \"code\": 5}", 400, Some("code"), "invalid type"),
        ("{\"runtime\": \"ruby\", \"code\": \"1\"}", 400, Some("runtime"), "unknown runtime \"ruby\""),
        ("{\"runtime\": \"python\", \"code\": \"1\", \"policy\": \"lax\"}", 404, Some("policy"), "no policy \"lax\""),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"files\": [{\"path\": \"../x\", \"content\": \"\"}]}",
            400,
            Some("files[0].path"),
            "'..'",
        ),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"files\": [{\"path\": \"/etc/x\", \"content\": \"\"}]}",
            400,
            Some("files[0].path"),
            "absolute",
        ),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"files\": [{\"path\": \"x\", \"content\": \"%%\"}]}",
            400,
            Some("files[0].content"),
            "base64",
        ),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"limits\": {\"memory-max-bytes\": 999999999999}}",
            400,
            Some("limits.memory-max-bytes"),
            "looser than policy \"default\"'s 536870912",
        ),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"limits\": {\"wall-timeout-ms\": 0}}",
            400,
            Some("limits.wall-timeout-ms"),
            "more than 0",
        ),
        (
            "{\"runtime\": \"python\", \"code\": \"1\", \"return-files\": [\"../*\"]}",
            400,
            Some("return-files[0]"),
            "'..'",
        ),
        ("{\"runtime\": \"python\", \"code\": \"1\"} {}", 400, None, "trailing"),
    ];
    for (body, status, field, words) in cases {
        let r = send(body);
        let text = String::from_utf8_lossy(&r.body).to_string();
        assert_eq!(r.status, status, "{body}: {text}");
        assert_eq!(field_of(&r).as_deref(), field, "{body}: {text}");
        let message = r.json()["error"]["message"].as_str().unwrap_or("").to_string();
        assert!(message.contains(words), "{body}: {text}");
    }
    // Too large, declared or not: refused before it is all read.
    for head in ["content-length: 17825792\r\n", "transfer-encoding: chunked\r\n"] {
        let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let req = format!("POST /v1/runs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{head}\r\n");
        c.write_all(req.as_bytes()).expect("headers");
        if head.starts_with("transfer") {
            let chunk = format!("100000\r\n{}\r\n", "x".repeat(0x100000));
            for _ in 0..17 {
                if c.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
            }
        }
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).unwrap_or(0);
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 413"), "{head}: {text}");
    }
    // The wrong type, an unknown endpoint or method.
    let r = request(To::Unix(&s.socket), "POST", "/v1/runs", &[("content-type", "text/plain")], b"{}".to_vec());
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (415, Some("unsupported-media-type")));
    assert_eq!(request(To::Unix(&s.socket), "GET", "/v2/runs", &[], Vec::new()).status, 404);
    assert_eq!(request(To::Unix(&s.socket), "GET", "/v1/runs", &[], Vec::new()).status, 405);
    let r = request(
        To::Unix(&s.socket),
        "POST",
        "/v1/runs?stream=sse",
        &[("content-type", "application/json")],
        b"{}".to_vec(),
    );
    assert_eq!((r.status, field_of(&r).as_deref()), (400, Some("stream")));

    // Nothing was started for any of them, and the server is fine.
    assert_eq!(descendants_of(s.pid()).len(), jails_before, "a refused request left a jail");
    let (status, _) = get(&s.socket, "/v1/health");
    assert_eq!(status, 200);
    let text =
        String::from_utf8_lossy(&request(To::Unix(&s.socket), "GET", "/metrics", &[], Vec::new()).body).to_string();
    assert!(text.contains("stockade_refusals_total{reason=\"bad-request\"} 13"), "{text}");
}

#[test]
fn tcp_needs_a_token_and_limits_only_tighten() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, true);
    let tcp = s.tcp.expect("a TCP port");
    let body = json!({"runtime": "javascript", "code": "console.log('x'.repeat(100))"}).to_string().into_bytes();
    let ct = ("content-type", "application/json");
    let r = request(To::Tcp(tcp), "POST", "/v1/runs", &[ct], body.clone());
    assert_eq!((r.status, r.headers.get("www-authenticate").map(|v| v.to_str().unwrap_or(""))), (401, Some("Bearer")));
    let r = request(
        To::Tcp(tcp),
        "POST",
        "/v1/runs",
        &[ct, ("authorization", "Bearer not-the-token-at-all")],
        body.clone(),
    );
    assert_eq!(r.status, 403);
    let auth = format!("Bearer {TOKEN}");
    let r = request(To::Tcp(tcp), "POST", "/v1/runs", &[ct, ("authorization", &auth)], body);
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("ok")));
    // Health is open (probes); metrics are not. (Once every pool has its first jail: before
    // that, health is 503, starting.)
    s.wait_warm();
    assert_eq!(request(To::Tcp(tcp), "GET", "/v1/health", &[], Vec::new()).status, 200);
    assert_eq!(request(To::Tcp(tcp), "GET", "/metrics", &[], Vec::new()).status, 401);

    // Tighter limits hold: the output cap, the wall-clock limit (a warm jail takes both), a
    // memory limit (a jail of its own).
    let v = post_run(
        &s.socket,
        &json!({"runtime": "javascript", "code": "console.log('x'.repeat(100))", "limits": {"stdout-max-bytes": 10}}),
    )
    .json();
    assert_eq!(
        (v["stdout"]["truncated"].as_bool(), v["stdout"]["text"].as_str()),
        (Some(true), Some("xxxxxxxxxx")),
        "{v}"
    );
    let t = Instant::now();
    let v = post_run(
        &s.socket,
        &json!({"runtime": "python", "code": "while True: pass", "limits": {"wall-timeout-ms": 300}}),
    )
    .json();
    assert_eq!((v["status"].as_str(), v["wall-timeout-ms"].as_u64()), (Some("timeout"), Some(300)), "{v}");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let v = post_run(
        &s.socket,
        &json!({"runtime": "python", "code": "print(1)", "limits": {"memory-max-bytes": 100000000, "pids-max": 8}}),
    )
    .json();
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v.get("warm-start").is_none(), "a tighter memory limit needs a jail of its own: {v}");
    let cg = v["enforcement"]
        .as_array()
        .expect("layers")
        .iter()
        .find(|l| l["layer"] == "cgroup")
        .cloned()
        .unwrap_or_default();
    assert!(cg["asked"].as_str().unwrap_or("").contains("memory <= 100000000 bytes"), "{cg}");
}

#[test]
fn files_go_in_and_come_back_capped_and_said() {
    if !guests() {
        return;
    }
    let s = Server::start(
        "",
        "[requests]\nreturn-files-max-count = 3\n[runtimes.python]\nguest = \"python\"\nwarm = 1\n",
        false,
    );
    let code = "import os\n\
                data = open('in/data.csv').read()\n\
                os.makedirs('out', exist_ok=True)\n\
                open('out/sum.txt', 'w').write(str(sum(int(x) for x in data.split(','))))\n\
                f = open('out/unclosed.txt', 'w'); f.write('kept')\n\
                for i in range(5): open(f'n{i}.dat', 'w').write(str(i))\n\
                open('pic.png', 'wb').write(bytes(range(256)))";
    let v = post_run(
        &s.socket,
        &json!({
            "runtime": "python",
            "code": code,
            "files": [{"path": "in/data.csv", "content": b64(b"1,2,3")}],
            "return-files": ["out/*", "*.png"],
        }),
    )
    .json();
    assert_eq!(v["status"], "ok", "{v}");
    let files = v["files"].as_array().expect("files");
    let got: Vec<(&str, Vec<u8>)> =
        files.iter().map(|f| (f["path"].as_str().unwrap_or(""), unb64(&f["content"]))).collect();
    assert_eq!(got[0], ("out/sum.txt", b"6".to_vec()), "{v}");
    assert_eq!(got[1], ("out/unclosed.txt", b"kept".to_vec()), "an unclosed file is flushed at exit");
    assert_eq!(got[2], ("pic.png", (0..=255u8).collect::<Vec<u8>>()));
    assert_eq!(v["files-capped"], false);
    let v = post_run(&s.socket, &json!({"runtime": "python", "code": code, "files": [{"path": "in/data.csv", "content": b64(b"1")}], "return-files": ["*"]})).json();
    assert_eq!((v["files"].as_array().map(Vec::len), v["files-capped"].as_bool()), (Some(3), Some(true)), "{v}");
}

#[test]
fn streaming_sends_output_as_it_happens() {
    if !guests() {
        return;
    }
    let s = Server::start("", "[runtimes.python]\nguest = \"python\"\nwarm = 1\n", false);
    s.wait_warm();
    let code = "import sys, time\nprint('first', flush=True)\ntime.sleep(0.6)\nprint('second', flush=True)\nsys.stderr.write('err\\n')";
    let (status, events) = post_stream(&s.socket, &json!({"runtime": "python", "code": code}));
    assert_eq!(status, 200);
    let first =
        events.iter().find(|(_, e)| e["stdout"] == "first\n").unwrap_or_else(|| panic!("no first event: {events:?}"));
    let last = events.last().expect("events");
    assert!(last.1["report"]["status"] == "ok", "{:?}", last.1);
    assert!(last.0 - first.0 >= Duration::from_millis(400), "the first line came at the end: {events:?}");
    assert!(events.iter().any(|(_, e)| e["stderr"] == "err\n"), "{events:?}");
    // A refusal is a plain JSON error, not a stream.
    let (status, events) = post_stream(&s.socket, &json!({"runtime": "nope", "code": "1"}));
    assert_eq!(status, 400, "{events:?}");
}

#[test]
fn the_pool_refills_and_the_queue_is_bounded() {
    if !guests() {
        return;
    }
    let s = Server::start(
        "concurrency = 1\nqueue = 1\nqueue-timeout-ms = 20000",
        "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n",
        false,
    );
    s.wait_warm();
    let v = post_run(&s.socket, &json!({"runtime": "javascript", "code": "1"})).json();
    assert_eq!(v["status"], "ok");
    // Taken jails are replaced.
    s.wait_warm();
    // One runs, one waits, the third is told to come back.
    let sock = s.socket.clone();
    let slow = json!({"runtime": "javascript", "code": "os.sleep(1500)"});
    let a = std::thread::spawn({
        let (sock, slow) = (sock.clone(), slow.clone());
        move || post_run(&sock, &slow).status
    });
    std::thread::sleep(Duration::from_millis(300));
    let b = std::thread::spawn({
        let (sock, slow) = (sock.clone(), slow.clone());
        move || post_run(&sock, &slow).status
    });
    std::thread::sleep(Duration::from_millis(300));
    let r = post_run(&sock, &slow);
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    assert_eq!(r.json()["error"]["code"], "queue-full");
    assert_eq!((a.join().expect("a"), b.join().expect("b")), (200, 200));
}

#[test]
fn a_slow_client_cannot_hold_the_server() {
    if !guests() {
        return;
    }
    let s = Server::start(
        "header-timeout-ms = 500\nbody-timeout-ms = 500",
        "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 0\n",
        false,
    );
    // Headers that never end: the connection is closed.
    let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
    c.write_all(b"POST /v1/runs HTTP/1.1\r\nhost: x\r\n").expect("write");
    let t = Instant::now();
    let mut buf = Vec::new();
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = c.read_to_end(&mut buf);
    assert!(t.elapsed() < Duration::from_secs(3), "held for {:?}", t.elapsed());
    // A body that never comes: 408.
    let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
    c.write_all(
        b"POST /v1/runs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"run",
    )
    .expect("write");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = [0u8; 512];
    let n = c.read(&mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert_eq!(get(&s.socket, "/v1/health").0, 200);
}

#[test]
fn sigterm_drains_and_sigkill_leaves_nothing_the_next_start_does_not_reap() {
    if !guests() {
        return;
    }
    let mut s =
        Server::start("drain-timeout-ms = 10000", "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n", false);
    s.wait_warm();
    let pid = s.pid();
    assert!(!cgroups_of(pid).is_empty() || !is_root(), "warm jails have cgroups");
    let family = descendants_of(pid);
    // A run in flight when SIGTERM comes finishes; the server then exits, leaving nothing.
    let sock = s.socket.clone();
    let running = std::thread::spawn(move || {
        post_run(&sock, &json!({"runtime": "javascript", "code": "os.sleep(800); console.log('done')"}))
    });
    std::thread::sleep(Duration::from_millis(300));
    let status = s.stop(libc::SIGTERM, Duration::from_secs(15)).expect("the server exits after draining");
    assert!(status.success(), "{status:?}: {}", s.log());
    let r = running.join().expect("run");
    assert_eq!((r.status, r.json()["stdout"]["text"].as_str()), (200, Some("done\n")));
    assert!(!s.socket.exists(), "the socket is removed");
    assert!(cgroups_of(pid).is_empty(), "cgroups left: {:?}", cgroups_of(pid));
    let gone = |pids: &[i32]| pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    assert!(wait_for(Duration::from_secs(2), || gone(&family)), "left: {family:?}");

    // SIGKILL: its jails die with it, the waiting ones and one in the middle of its run; what it
    // left, the next start reaps.
    let mut s = Server::start("", "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 2\n", false);
    s.wait_warm();
    let pid = s.pid();
    let body = json!({"runtime": "javascript", "code": "os.sleep(8000)"}).to_string();
    let mut running = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
    let head = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    running.write_all(format!("{head}{body}").as_bytes()).expect("send the run");
    std::thread::sleep(Duration::from_millis(500));
    let jails = descendants_of(pid);
    assert!(!jails.is_empty());
    s.stop(libc::SIGKILL, Duration::from_secs(5)).expect("killed");
    assert!(wait_for(Duration::from_secs(3), || gone(&jails)), "jails outlived a killed server");
    drop(running);
    let left = cgroups_of(pid);
    let again = Server::start("", "[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n", false);
    again.wait_warm();
    assert!(left.iter().all(|d| !d.exists()), "the next start did not reap {left:?}");
    drop(again);
}

/// docs/openapi.json is what the server describes itself as (the request and report schemas
/// come from the types). After an intended change: `STOCKADE_BLESS=1 cargo test --test serve`.
#[test]
fn the_openapi_file_is_the_generated_one() {
    let out = stockade().args(["serve", "--openapi"]).output().expect("run");
    assert!(out.status.success());
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    let got = String::from_utf8_lossy(&out.stdout).to_string();
    if std::env::var_os("STOCKADE_BLESS").is_some() {
        std::fs::write(&file, &got).expect("bless");
    }
    let want = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(got == want, "docs/openapi.json is stale: STOCKADE_BLESS=1 cargo test --test serve");
    let doc: serde_json::Value = serde_json::from_str(&got).expect("JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/runs",
        "/v1/sessions",
        "/v1/sessions/{id}",
        "/v1/sessions/{id}/runs",
        "/v1/sessions/{id}/files",
        "/v1/sessions/{id}/files/{path}",
        "/v1/health",
        "/v1/health/ready",
        "/v1/health/live",
        "/v1/info",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is not described");
    }
    let props = doc["components"]["schemas"]["RunBody"]["properties"].as_object().expect("RunBody");
    for field in
        ["runtime", "code", "module", "argv", "stdin", "stdin-base64", "files", "policy", "limits", "return-files"]
    {
        assert!(props.contains_key(field), "{field} is not in the request schema");
    }
}

/// Socket activation: started by `systemd-socket-activate` (systemd's own tool for the socket
/// unit protocol: LISTEN_FDS, LISTEN_PID, the socket at fd 3), the server serves on the socket it
/// was given, tells systemd it is ready and then stopping (NOTIFY_SOCKET, Type=notify), leaves the
/// socket in place when it stops (it is systemd's), and refuses `systemd` when no socket was
/// passed.
#[test]
fn socket_activation_serves_on_the_socket_systemd_passes() {
    let activate = std::path::Path::new("/usr/bin/systemd-socket-activate");
    if !guests() || !activate.exists() {
        eprintln!("skip: needs the guests and systemd-socket-activate (package systemd)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("api.sock");
    let config = dir.path().join("serve.toml");
    std::fs::write(&config, format!("version = 1\n[server]\nlisten = [\"systemd\"]\n{RUNTIMES}")).expect("config");
    let notify_path = dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("notify socket");
    notify.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let said = |notify: &std::os::unix::net::UnixDatagram| {
        let mut buf = [0u8; 256];
        let n = notify.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    // `stockade serve` under systemd-socket-activate with `options` and a socket at `path`.
    let activated = |options: &[String], path: &std::path::Path| {
        std::process::Command::new(activate)
            .args(options)
            .arg("-l")
            .arg(path)
            .arg(stockade_bin())
            .arg("serve")
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("systemd-socket-activate")
    };
    // systemd-socket-activate passes on only the variables it is told to (-E).
    // The guests the other tests use (STOCKADE_GUEST_DIR, when set), not only the system's.
    let guest_dir = format!("STOCKADE_GUEST_DIR={}", stockade::wasm::guests::default_dir().display());
    let notify_to = format!("NOTIFY_SOCKET={}", notify_path.display());
    let mut child = activated(&["-E".into(), notify_to, "-E".into(), guest_dir.clone()], &socket);
    // A failed assertion must not leave the server running.
    struct Reap(u32);
    impl Drop for Reap {
        fn drop(&mut self) {
            if std::fs::read(format!("/proc/{}/cmdline", self.0)).is_ok_and(|c| c.windows(5).any(|w| w == b"serve")) {
                let _ = std::process::Command::new("kill").arg("-KILL").arg(self.0.to_string()).status();
            }
        }
    }
    let _reap = Reap(child.id());
    // Listening, not only made: systemd-socket-activate binds (the file appears) before it
    // listens, and a connection in between is refused. (A connection that closes at once is
    // what the server's first one may be: it starts the server like any other.)
    let listening = || std::os::unix::net::UnixStream::connect(&socket).is_ok();
    assert!(wait_for(Duration::from_secs(10), listening), "the socket is made and listened on");
    // The first connection starts the server (exec: the same pid), which serves it.
    let r = post_run(&socket, &json!({"runtime": "python", "code": "print(6 * 7)"}));
    assert_eq!((r.status, r.json()["stdout"]["text"].as_str()), (200, Some("42\n")), "{}", r.json());
    assert_eq!(said(&notify), "READY=1\n");
    let r = post_run(&socket, &json!({"runtime": "javascript", "code": "console.log(7 * 6)"}));
    assert_eq!(r.json()["stdout"]["text"], "42\n");
    let pid = child.id();
    let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    assert_eq!(said(&notify), "STOPPING=1\n");
    let status = child.wait().expect("wait");
    let mut log = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut log).expect("log");
    assert!(status.success(), "{status:?}: {log}");
    assert!(log.contains(&format!("listening on unix:{} (from systemd)", socket.display())), "{log}");
    assert!(socket.exists(), "the socket is systemd's: it stays for the next start");
    assert!(wait_for(Duration::from_secs(2), || children_of(pid).is_empty()));

    // A unit with Accept=yes passes a connection, not a listener: refused, saying so.
    let accepting = dir.path().join("accept.sock");
    let mut child = activated(&["--accept".into(), "-E".into(), guest_dir], &accepting);
    let _reap_accepting = Reap(child.id());
    // Bound before listened on (as above): the first connection that is not refused is the one
    // systemd-socket-activate accepts and hands to the server.
    let mut conn = None;
    assert!(
        wait_for(Duration::from_secs(10), || {
            conn = std::os::unix::net::UnixStream::connect(&accepting).ok();
            conn.is_some()
        }),
        "the socket is made and listened on"
    );
    let mut conn = conn.expect("connected");
    conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut rest = Vec::new();
    let _ = conn.read_to_end(&mut rest); // closed by the server as it refuses
    let _ = std::process::Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    let _ = child.wait();
    let mut log = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut log).expect("log");
    assert!(log.contains("is not listening (Accept=yes?)"), "{log}");

    // Without a socket passed in, `systemd` is refused, naming the socket unit.
    let out = stockade().args(["serve", "--listen", "systemd"]).arg(&config).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no socket was passed in") && err.contains("stockade.socket"),
        "{err}"
    );
}
