//! Sessions of `stockade serve`, through the real server and a real HTTP client: a workspace
//! kept between runs (a file uploaded, transformed by Python, downloaded; a file one run writes
//! read by the next), its paths confined (`..`, absolute, a symlink or special file a run
//! leaves), one run at a time, the three clocks and the cap, a session reachable only with the
//! token that made it, and a killed server leaving no jail, its sessions there again when it
//! starts again. Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use server::*;
use std::time::Duration;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";

fn open_session(s: &Server, body: &Value) -> String {
    let r = call(s, "POST", "/v1/sessions", body.to_string().into_bytes());
    let v = r.json();
    assert_eq!(r.status, 201, "{v}");
    let id = v["id"].as_str().expect("an id").to_string();
    // Where it lives, for a balancer to learn (docs/deploy.md).
    let location = r.headers.get("location").and_then(|l| l.to_str().ok());
    assert_eq!(location, Some(format!("/v1/sessions/{id}").as_str()));
    id
}

fn unb64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(v.as_str().expect("base64 text")).expect("base64")
}

#[test]
fn a_workspace_keeps_its_files_between_runs_and_gives_them_back() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let id = open_session(&s, &json!({"runtime": "python"}));
    let at = |rest: &str| format!("/v1/sessions/{id}{rest}");

    // A file uploaded (binary-safe), transformed by Python, downloaded.
    let csv = b"name,n\na,1\nb,2\n\xff\n".to_vec();
    let r = call(&s, "PUT", &at("/files/in/data.csv"), csv.clone());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let code = "rows = open('/app/in/data.csv', 'rb').read().splitlines()\n\
                open('/app/out.csv', 'w').write(str(len(rows)) + ' rows\\n')\n\
                print('wrote')";
    let (status, v) = json_call(&s, "POST", &at("/runs"), &json!({"code": code, "return-files": ["*.csv"]}));
    assert_eq!((status, v["status"].as_str(), v["stdout"]["text"].as_str()), (200, Some("ok"), Some("wrote\n")), "{v}");
    assert_eq!(v["session"]["id"], json!(id));
    assert!(v["session"]["run"].as_str().is_some_and(|r| r.starts_with("r-")), "{v}");
    assert_eq!(v["session"]["workspace"]["files"], 2, "{v}");
    // The request's return-files chose out.csv, not the uploaded file below in/.
    let back: Vec<&str> = v["files"].as_array().expect("files").iter().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(back, ["out.csv"]);
    assert_eq!(unb64(&v["files"][0]["content"]), b"4 rows\n");
    let r = call(&s, "GET", &at("/files/out.csv"), Vec::new());
    assert_eq!((r.status, r.body.as_ref()), (200, b"4 rows\n".as_ref()));
    let r = call(&s, "GET", &at("/files/in/data.csv"), Vec::new());
    assert_eq!(r.body.as_ref(), csv.as_slice(), "the upload is binary-safe");

    // The next run reads what the last one wrote, and a request's files go into the workspace.
    let body = json!({
        "code": "print(open('/app/out.csv').read().strip(), open('/app/note.txt').read())",
        "files": [{"path": "note.txt", "content": base64::engine::general_purpose::STANDARD.encode("hi")}],
    });
    let (_, v) = json_call(&s, "POST", &at("/runs"), &body);
    assert_eq!(v["stdout"]["text"], "4 rows hi\n", "{v}");
    let (status, list) = json_call(&s, "GET", &at("/files"), &Value::Null);
    assert_eq!(status, 200, "{list}");
    let files: Vec<(&str, u64)> = list["files"]
        .as_array()
        .expect("a listing")
        .iter()
        .map(|f| (f["path"].as_str().unwrap_or(""), f["bytes"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(files, [("in/data.csv", csv.len() as u64), ("note.txt", 2), ("out.csv", 7)]);
    assert!(list["files"][0]["modified-unix-ms"].as_u64().is_some_and(|t| t > 1_700_000_000_000), "{list}");

    // Deleting a file: the next run does not see it.
    assert_eq!(call(&s, "DELETE", &at("/files/note.txt"), Vec::new()).status, 204);
    let (_, v) = json_call(&s, "POST", &at("/runs"), &json!({"code": "import os; print(sorted(os.listdir('/app')))"}));
    assert_eq!(v["stdout"]["text"], "['in', 'out.csv']\n", "{v}");

    // Streamed, as one-off runs are: output events, then the report with the session's part.
    let (status, events) = post_stream_to(&s.socket, &at("/runs"), &json!({"code": "print('streamed')"}));
    assert_eq!(status, 200);
    assert_eq!(events[0].1, json!({"stdout": "streamed\n"}), "{events:?}");
    let last = &events.last().expect("a last event").1;
    assert_eq!(last["report"]["session"]["id"], json!(id), "{last}");

    // A JavaScript session too; each session's workspace is its own.
    let js = open_session(&s, &json!({"runtime": "javascript"}));
    let (_, v) = json_call(
        &s,
        "POST",
        &format!("/v1/sessions/{js}/runs"),
        &json!({"code": "const f = std.open('/app/j.txt', 'w'); f.puts('from js'); f.close(); console.log(os.readdir('/app')[0].filter(n => n[0] != '.').join())"}),
    );
    assert_eq!(v["stdout"]["text"], "j.txt\n", "{v}");
    let r = call(&s, "GET", &format!("/v1/sessions/{js}/files/j.txt"), Vec::new());
    assert_eq!(r.body.as_ref(), b"from js");

    // The quota: one file larger than a workspace is refused before it is read; files that
    // together go past it are refused at the one that would.
    // (Its headers alone: the answer comes before the body, and the connection closes.)
    let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let head = format!("PUT {} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n", at("/files/big"), (8 << 20) + 1);
    std::io::Write::write_all(&mut c, head.as_bytes()).expect("headers");
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut c, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("sessions.workspace-max-bytes"), "{answer}");
    // Sent in chunks (no length declared), it is refused as soon as it goes past a workspace's
    // most (8 MiB), not read on up to a body's (16 MiB): the answer comes though the body has
    // not ended (before, the server waited for the rest of it and answered 408).
    let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    // A server that stopped reading without answering fails the test instead of holding it.
    c.set_write_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let head = format!("PUT {} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n", at("/files/big"));
    std::io::Write::write_all(&mut c, head.as_bytes()).expect("headers");
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..9 {
        let sent = std::io::Write::write_all(&mut c, format!("{:x}\r\n", chunk.len()).as_bytes())
            .and_then(|()| std::io::Write::write_all(&mut c, &chunk))
            .and_then(|()| std::io::Write::write_all(&mut c, b"\r\n"));
        if sent.is_err() {
            break;
        }
    }
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c, &mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("sessions.workspace-max-bytes"), "{answer}");
    assert_eq!(call(&s, "PUT", &at("/files/half1"), vec![0u8; 5 << 20]).status, 200);
    let r = call(&s, "PUT", &at("/files/half2"), vec![0u8; 5 << 20]);
    assert_eq!(r.status, 413);
    assert!(r.json()["error"]["message"].as_str().is_some_and(|m| m.contains("sessions.workspace-max-bytes")));

    // Deleted: 204, then the session is gone, and says so to its owner.
    assert_eq!(call(&s, "DELETE", &at(""), Vec::new()).status, 204);
    let (status, v) = json_call(&s, "GET", &at(""), &Value::Null);
    assert_eq!((status, v["error"]["code"].as_str()), (410, Some("session-ended")), "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("deleted")), "{v}");
}

#[test]
fn paths_stay_in_the_workspace_and_what_a_run_leaves_is_checked_on_the_host() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let id = open_session(&s, &json!({"runtime": "python"}));
    let put = |path: &str| call(&s, "PUT", &format!("/v1/sessions/{id}/files/{path}"), b"x".to_vec());
    for (path, why) in [
        ("..%2Fescape", "'..'"),
        ("a/..%2F..%2Fescape", "'..'"),
        ("%2Fetc%2Fpasswd", "absolute"),
        ("a%00b", "NUL"),
        ("a//b", "empty part"),
    ] {
        let r = put(path);
        let v = r.json();
        assert_eq!((r.status, v["error"]["field"].as_str()), (400, Some("path")), "{path}: {v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains(why)), "{path}: {v}");
    }
    assert_eq!(put("f").status, 200);
    let r = put("f/below");
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (409, Some("file-conflict")), "a file is no directory");

    // In a run's request: the same checks, naming the field.
    let body = json!({"code": "1", "files": [{"path": "../x", "content": ""}]});
    let (status, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &body);
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("files[0].path")), "{v}");

    // What a run leaves that is not a regular file with a UTF-8 name is not kept, and the
    // answer says what and why (the host's python3 can make them; the Wasm guests cannot, and
    // no run can make a fifo or a device: the filter refuses mknod).
    if python3().is_none() {
        eprintln!("skip (the rest): no /usr/bin/python3 for a runtime that makes symlinks and fifos");
        return;
    }
    let s = Server::start(
        "",
        "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = 0\n",
        false,
    );
    let id = open_session(&s, &json!({"runtime": "python3"}));
    let code = "import os\n\
                os.symlink('/etc/passwd', '/app/link')\n\
                open(b'/app/\\xff', 'w').write('x')\n\
                open('/app/kept.txt', 'w').write('k')";
    let (_, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": code}));
    assert_eq!(v["status"], "ok", "{v}");
    let dropped: Vec<(String, String)> = v["session"]["dropped"]
        .as_array()
        .expect("dropped")
        .iter()
        .map(|d| (d["path"].as_str().unwrap_or("").to_string(), d["reason"].as_str().unwrap_or("").to_string()))
        .collect();
    let reason = |p: &str| dropped.iter().find(|d| d.0 == p).map(|d| d.1.as_str()).unwrap_or("");
    assert!(reason("link").contains("symlink"), "{dropped:?}");
    assert!(reason("\u{fffd}").contains("not UTF-8"), "{dropped:?}");
    assert_eq!(v["session"]["dropped-count"], 2);
    assert_eq!(v["session"]["workspace"]["files"], 1, "{v}");
    let r = call(&s, "GET", &format!("/v1/sessions/{id}/files/link"), Vec::new());
    assert_eq!(r.status, 404, "a symlink is never followed out: {}", String::from_utf8_lossy(&r.body));
    let (_, v) = json_call(
        &s,
        "POST",
        &format!("/v1/sessions/{id}/runs"),
        &json!({"code": "import os; print(sorted(os.listdir('/app')))"}),
    );
    assert_eq!(v["stdout"]["text"], "['kept.txt']\n", "{v}");
}

#[test]
fn one_run_at_a_time_three_clocks_and_a_cap() {
    if !guests() {
        return;
    }
    let s = Server::start(
        "",
        &format!("[sessions]\nmax = 3\nmax-per-token = 3\nidle-timeout-ms = 60000\n{RUNTIMES}"),
        false,
    );
    s.wait_warm();
    // Each run's own wall limit, within the session's.
    let id = open_session(&s, &json!({"runtime": "python", "limits": {"wall-timeout-ms": 1500}}));
    let (status, v) = json_call(
        &s,
        "POST",
        &format!("/v1/sessions/{id}/runs"),
        &json!({"code": "1", "limits": {"wall-timeout-ms": 5000}}),
    );
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("limits.wall-timeout-ms")), "{v}");
    let sock = s.socket.clone();
    let path = format!("/v1/sessions/{id}/runs");
    let long = std::thread::spawn(move || {
        let r = request(
            To::Unix(&sock),
            "POST",
            &path,
            &[JSON],
            json!({"code": "while True: pass"}).to_string().into_bytes(),
        );
        r.json()
    });
    let running = || json_call(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["running"].clone();
    assert!(wait_for(Duration::from_secs(5), || running().is_string()), "the run did not start");
    let run = running();
    let (status, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": "print(1)"}));
    assert_eq!((status, v["error"]["code"].as_str(), &v["error"]["run"]), (409, Some("session-busy"), &run), "{v}");
    let r = call(&s, "PUT", &format!("/v1/sessions/{id}/files/x"), b"x".to_vec());
    assert_eq!(r.status, 409, "the workspace does not change under a run");
    let v = long.join().expect("the long run");
    assert_eq!((v["status"].as_str(), &v["session"]["run"]), (Some("timeout"), &run), "{v}");
    let (_, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": "print(2)"}));
    assert_eq!(v["stdout"]["text"], "2\n", "the session goes on after a run past its wall limit: {v}");

    // The cap: past it, 429 with Retry-After.
    let _b = open_session(&s, &json!({"runtime": "javascript"}));
    let idle = open_session(&s, &json!({"runtime": "javascript", "idle-timeout-ms": 1000}));
    let r = call(&s, "POST", "/v1/sessions", json!({"runtime": "python"}).to_string().into_bytes());
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (429, Some("too-many-sessions")));
    let retry: u64 = r.headers.get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok()).expect("Retry-After");
    assert!((1..=2).contains(&retry), "the first session to end ends within {retry} s");

    // The idle clock slides with use; the lifetime does not.
    let life = {
        std::thread::sleep(Duration::from_millis(1500));
        let (status, v) = json_call(&s, "GET", &format!("/v1/sessions/{idle}"), &Value::Null);
        assert_eq!(status, 410, "{v}");
        assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("idle timeout")), "{v}");
        open_session(&s, &json!({"runtime": "javascript", "idle-timeout-ms": 800, "max-lifetime-ms": 2000}))
    };
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(300));
        let (status, _) = json_call(&s, "GET", &format!("/v1/sessions/{life}/files"), &Value::Null);
        assert_eq!(status, 200, "a session in use outlives its idle timeout");
    }
    std::thread::sleep(Duration::from_millis(800));
    let (status, v) = json_call(&s, "GET", &format!("/v1/sessions/{life}"), &Value::Null);
    assert_eq!(status, 410, "{v}");
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("lifetime")), "{v}");
    let (status, v) =
        json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python", "max-lifetime-ms": 99_999_999}));
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("max-lifetime-ms")), "{v}");

    let metrics = call(&s, "GET", "/metrics", Vec::new()).body;
    let metrics = String::from_utf8_lossy(&metrics);
    for line in [
        "stockade_sessions_ended_total{reason=\"idle-timeout\"} 1",
        "stockade_sessions_ended_total{reason=\"max-lifetime\"} 1",
        "stockade_sessions_created_total 4",
        "stockade_sessions_open 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "no {line:?} in:\n{metrics}");
    }
}

#[test]
fn a_session_is_reached_only_with_the_token_that_made_it() {
    if !guests() {
        return;
    }
    let s = Server::start("", &format!("[sessions]\nmax-per-token = 2\n{RUNTIMES}"), true);
    s.wait_warm();
    let tcp = s.tcp.expect("a TCP listener");
    let ask = |token: &str, method: &str, path: &str, body: Value| {
        let auth = format!("Bearer {token}");
        let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
        let r = request(To::Tcp(tcp), method, path, &[JSON, ("authorization", &auth)], body);
        (r.status, String::from_utf8_lossy(&r.body).to_string())
    };
    let (status, made) = ask(TOKEN, "POST", "/v1/sessions", json!({"runtime": "python"}));
    assert_eq!(status, 201, "{made}");
    let id = serde_json::from_str::<Value>(&made).expect("JSON")["id"].as_str().expect("id").to_string();
    assert_eq!(ask(TOKEN, "PUT", &format!("/v1/sessions/{id}/files/secret.txt"), json!("x")).0, 200);

    // Another token: the same answer as for an id never made, whatever it asks.
    let never = "s-0123456789abcdef0123456789abcdef";
    for (method, rest, body) in [
        ("GET", "", Value::Null),
        ("GET", "/files", Value::Null),
        ("GET", "/files/secret.txt", Value::Null),
        ("POST", "/runs", json!({"code": "print(1)"})),
        ("PUT", "/files/secret.txt", json!("overwritten")),
        ("DELETE", "/files/secret.txt", Value::Null),
        ("DELETE", "", Value::Null),
    ] {
        let theirs = ask(OTHER_TOKEN, method, &format!("/v1/sessions/{id}{rest}"), body.clone());
        let unknown = ask(OTHER_TOKEN, method, &format!("/v1/sessions/{never}{rest}"), body);
        assert_eq!(theirs.0, 403, "{method} {rest}: {theirs:?}");
        assert_eq!(theirs.1.replace(&id, "ID"), unknown.1.replace(never, "ID"), "{method} {rest}");
    }
    let (_, list) = ask(OTHER_TOKEN, "GET", "/v1/sessions", Value::Null);
    assert_eq!(list, r#"{"sessions":[]}"#);
    // The unix socket's clients are not the token's either.
    let (status, _) = json_call(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null);
    assert_eq!(status, 404);
    // Its maker still has it, untouched.
    let (status, body) = ask(TOKEN, "GET", &format!("/v1/sessions/{id}/files/secret.txt"), Value::Null);
    assert_eq!((status, body.as_str()), (200, "\"x\""));
    // One token cannot take every session: past its own cap, 429; another token still gets one.
    assert_eq!(ask(TOKEN, "POST", "/v1/sessions", json!({"runtime": "javascript"})).0, 201);
    let (status, body) = ask(TOKEN, "POST", "/v1/sessions", json!({"runtime": "javascript"}));
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("sessions.max-per-token"), "{body}");
    assert_eq!(ask(OTHER_TOKEN, "POST", "/v1/sessions", json!({"runtime": "javascript"})).0, 201);
}

#[test]
fn a_killed_server_leaves_no_jail_and_its_sessions_come_back() {
    if !guests() {
        return;
    }
    let mut s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let pid = s.pid();
    let id = open_session(&s, &json!({"runtime": "python"}));
    assert_eq!(call(&s, "PUT", &format!("/v1/sessions/{id}/files/big.bin"), vec![7u8; 1 << 20]).status, 200);
    let sock = s.socket.clone();
    let path = format!("/v1/sessions/{id}/runs");
    std::thread::spawn(move || {
        let _ = std::panic::catch_unwind(|| {
            request(
                To::Unix(&sock),
                "POST",
                &path,
                &[JSON],
                json!({"code": "open('/app/half.txt', 'w').write('x')\nwhile True: pass"}).to_string().into_bytes(),
            )
        });
    });
    let running = || json_call(&s, "GET", &format!("/v1/sessions/{id}"), &Value::Null).1["running"].is_string();
    assert!(wait_for(Duration::from_secs(5), running), "the run did not start");
    let family = descendants_of(pid);
    let mounts = mount_count();
    s.stop(libc::SIGKILL, Duration::from_secs(5)).expect("killed");
    let gone = |pids: &[i32]| pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    assert!(wait_for(Duration::from_secs(3), || gone(&family)), "the session's jail outlived the server");
    assert!(mount_count() <= mounts, "mounts left");
    let left = cgroups_of(pid);
    let again = s.restart(libc::SIGKILL);
    again.wait_warm();
    assert!(left.iter().all(|d| !d.exists()), "the next start did not reap {left:?}");
    // The session is there again as of its last answered change: the upload, not the run that
    // never answered.
    let (status, v) = json_call(&again, "GET", &format!("/v1/sessions/{id}"), &Value::Null);
    assert_eq!((status, v["runs"].as_u64(), v["running"].as_str()), (200, Some(0), None), "{v}");
    let (_, list) = json_call(&again, "GET", &format!("/v1/sessions/{id}/files"), &Value::Null);
    assert_eq!(list["files"].as_array().map(Vec::len), Some(1), "{list}");
    let r = call(&again, "GET", &format!("/v1/sessions/{id}/files/big.bin"), Vec::new());
    assert_eq!((r.status, r.body.len()), (200, 1 << 20));
}

/// A file download is an answer as any other: held within the server's answers budget until its
/// client takes it. Four clients that ask for an 8 MiB file and read nothing hold the budget (32
/// MiB here); a fifth is told the server is busy, and once they go, a download goes through.
#[test]
fn file_downloads_are_held_within_the_answers_budget() {
    if !guests() {
        return;
    }
    let config = format!("[requests]\nanswers-in-flight-max-bytes = 33554432\n{RUNTIMES}");
    let s = Server::start("", &config, false);
    let id = open_session(&s, &json!({"runtime": "python"}));
    let file = format!("/v1/sessions/{id}/files/big.bin");
    assert_eq!(call(&s, "PUT", &file, vec![7u8; 8 << 20]).status, 200);
    let head = format!("GET {file} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    let stalled: Vec<std::os::unix::net::UnixStream> = (0..4)
        .map(|_| {
            use std::io::Write;
            let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
            c.write_all(head.as_bytes()).expect("ask");
            c
        })
        .collect();
    // Each of them has its answer under way (its head sent) before a fifth asks.
    let heads = || {
        stalled.iter().all(|c| {
            let mut b = [0u8; 12];
            let peek = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
            rustix::net::recv(c, &mut b, peek).is_ok_and(|(n, _)| &b[..n] == b"HTTP/1.1 200")
        })
    };
    assert!(wait_for(Duration::from_secs(10), heads), "the four downloads did not start");
    let busy = call(&s, "GET", &file, Vec::new()).status == 503;
    assert!(busy, "a fifth download went past the answers budget");
    let r = call(&s, "GET", &file, Vec::new());
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (503, Some("busy")));
    drop(stalled);
    assert!(wait_for(Duration::from_secs(5), || call(&s, "GET", &file, Vec::new()).status == 200));
}

/// The shipped shares leave room for others: one token holds at most a quarter of the sessions
/// (8 of 32) and two live ones (of 8); past either, 429 naming the key, while another token still
/// gets its own.
#[test]
fn one_token_holds_its_share_of_sessions_and_of_live_ones() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, true);
    let tcp = s.tcp.expect("a TCP listener");
    let make = |token: &str, body: Value| {
        let auth = format!("Bearer {token}");
        let r = request(
            To::Tcp(tcp),
            "POST",
            "/v1/sessions",
            &[JSON, ("authorization", &auth)],
            body.to_string().into_bytes(),
        );
        (r.status, String::from_utf8_lossy(&r.body).to_string())
    };
    for _ in 0..8 {
        assert_eq!(make(TOKEN, json!({"runtime": "python"})).0, 201);
    }
    let (status, body) = make(TOKEN, json!({"runtime": "python"}));
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("sessions.max-per-token"), "{body}");
    for _ in 0..2 {
        assert_eq!(make(OTHER_TOKEN, json!({"runtime": "python", "mode": "live"})).0, 201);
    }
    let (status, body) = make(OTHER_TOKEN, json!({"runtime": "javascript", "mode": "live"}));
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("sessions.live-max-per-token"), "{body}");
    assert_eq!(make(OTHER_TOKEN, json!({"runtime": "javascript"})).0, 201, "a workspace session is still in its share");
}

/// A run that leaves a file nested deeper than a run may be given files (32 directories): the
/// file is not kept, the answer names it and why, and the session's later runs go on.
#[test]
fn a_file_nested_too_deep_is_named_and_not_kept() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let id = open_session(&s, &json!({"runtime": "python"}));
    let code = "import os\np = '/'.join(['d'] * 40)\nos.makedirs(p)\nopen(p + '/f', 'w').write('x')\nopen('top.txt', 'w').write('y')";
    let (status, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": code}));
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")), "{v}");
    let dropped = v["session"]["dropped"].as_array().cloned().unwrap_or_default();
    let deep = format!("{}/f", vec!["d"; 40].join("/"));
    assert!(
        dropped
            .iter()
            .any(|d| d["path"] == deep.as_str() && d["reason"].as_str().is_some_and(|r| r.contains("deeper than 32"))),
        "{v}"
    );
    let (status, v) =
        json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": "print(open('top.txt').read())"}));
    assert_eq!((status, v["stdout"]["text"].as_str()), (200, Some("y\n")), "{v}");
    let (status, files) = json_call(&s, "GET", &format!("/v1/sessions/{id}/files"), &Value::Null);
    assert_eq!((status, files["files"].as_array().map(Vec::len)), (200, Some(1)), "{files}");
    // A live session's the same: its later runs go on.
    let (_, made) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "python", "mode": "live"}));
    let id = made["id"].as_str().expect("id").to_string();
    let (status, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": code}));
    assert_eq!((status, v["status"].as_str()), (200, Some("ok")), "{v}");
    let (status, v) =
        json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": "print(open('top.txt').read())"}));
    assert_eq!((status, v["stdout"]["text"].as_str()), (200, Some("y\n")), "{v}");
}
