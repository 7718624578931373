//! Host calls through `stockade serve`, with a real client: a streaming run's calls come as
//! `call` events, the client answers each at `/v1/runs/{run}/calls/{id}`, and the run gets the
//! answer; the budgets are the server's (a tool not declared, past its `max-calls`, a tool that
//! fails, one never answered past its `timeout-ms` without holding the run past its wall limit);
//! an answer from another token, a second answer, a run without `?stream` are refused; the report
//! lists every call. Needs the host's /usr/bin/python3 (the python3 runtime's bootstrap gives
//! its runs `stockade_host`).

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::*;
use std::time::{Duration, Instant};

const RUNTIMES: &str = "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\n\
                        policy = \"wrap-python\"\nwarm = 1\n";

#[test]
fn a_run_calls_its_client_s_tools_within_their_budgets() {
    if python3().is_none() {
        eprintln!("skip: no /usr/bin/python3");
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let code = "import stockade_host as h\n\
                print(h.call('search', {'q': 'jails'}))\n\
                for args in [('search', {'q': 'again'}), ('search', {'q': 'third'}), ('nope', None), ('fail', None), ('slow', None)]:\n\
                \x20   try:\n\
                \x20       print(h.call(*args))\n\
                \x20   except h.ToolError as e:\n\
                \x20       print('error:', e)";
    let body = json!({
        "runtime": "python3",
        "code": code,
        "tools": [{"name": "search", "max-calls": 2}, {"name": "fail"}, {"name": "slow", "timeout-ms": 300}],
    });
    let t = Instant::now();
    let mut calls = Vec::new();
    let (status, events, answers) = post_stream_answering(&s.socket, "/v1/runs", &body, |v| {
        let c = v.get("call")?;
        calls.push(c.clone());
        let at = format!("/v1/runs/{}/calls/{}", c["run"].as_str()?, c["id"].as_str()?);
        match c["name"].as_str()? {
            "search" => Some((at, json!({"ok": {"hits": [c["args"]["q"].clone()]}}))),
            "fail" => Some((at, json!({"error": "the index is down"}))),
            // Never answered: its timeout answers for it.
            _ => None,
        }
    });
    assert_eq!(status, 200);
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    let events: Vec<Value> = events.into_iter().map(|(_, v)| v).collect();
    assert_eq!(answers, [204, 204, 204], "{events:?}");
    let names: Vec<&str> = calls.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["search", "search", "fail", "slow"], "the server's refusals never reach the client");
    let last = events.last().expect("a last line");
    let r = &last["report"];
    let out: String = events.iter().filter_map(|e| e["stdout"].as_str()).collect();
    assert_eq!(r["status"], "ok", "{last}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "{'hits': ['jails']}", "{out}");
    assert_eq!(lines[1], "{'hits': ['again']}", "{out}");
    assert!(lines[2].contains("max-calls"), "{out}");
    assert!(lines[3].contains("no tool \"nope\""), "{out}");
    assert_eq!(lines[4], "error: the index is down", "{out}");
    assert!(lines[5].contains("did not answer within 300 ms"), "{out}");
    let outcomes: Vec<(&str, &str)> = r["host-calls"]
        .as_array()
        .expect("host-calls")
        .iter()
        .map(|c| (c["name"].as_str().unwrap_or(""), c["outcome"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("search", "ok"),
            ("search", "ok"),
            ("search", "refused"),
            ("nope", "refused"),
            ("fail", "error"),
            ("slow", "timeout")
        ]
    );

    // A tool that hangs longer than the run may live: the run's wall limit ends it on time.
    let body = json!({
        "runtime": "python3",
        "code": "import stockade_host as h\nh.call('slow')",
        "tools": [{"name": "slow", "timeout-ms": 60000}],
        "limits": {"wall-timeout-ms": 1000},
    });
    let t = Instant::now();
    let (_, events) = post_stream_to(&s.socket, "/v1/runs", &body);
    let events: Vec<Value> = events.into_iter().map(|(_, v)| v).collect();
    let last = events.last().expect("a last line");
    assert_eq!(last["report"]["status"], "timeout", "{last}");
    assert!(t.elapsed() < Duration::from_secs(5), "the wait held the run past its limit: {:?}", t.elapsed());
    assert_eq!(last["report"]["host-calls"][0]["outcome"], "timeout", "{last}");
}

#[test]
fn answers_are_the_run_s_caller_s_and_a_run_with_tools_streams() {
    if python3().is_none() {
        eprintln!("skip: no /usr/bin/python3");
        return;
    }
    let s = Server::start("", RUNTIMES, true);
    s.wait_warm();
    // Without ?stream there is nobody to answer: refused, naming the field.
    let body = json!({"runtime": "python3", "code": "1", "tools": [{"name": "t"}]});
    let (status, v) = json_call(&s, "POST", "/v1/runs", &body);
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("tools")), "{v}");
    for (tools, field) in [
        (json!([{"name": "a b"}]), "tools[0].name"),
        (json!([{"name": "t"}, {"name": "t"}]), "tools[1].name"),
        (json!([{"name": "t", "timeout-ms": 600000}]), "tools[0].timeout-ms"),
        (json!([{"name": "t", "max-calls": 0}]), "tools[0].max-calls"),
    ] {
        let body = json!({"runtime": "python3", "code": "1", "tools": tools});
        let (status, v) = json_call(&s, "POST", "/v1/runs?stream=ndjson", &body);
        assert_eq!((status, v["error"]["field"].as_str()), (400, Some(field)), "{v}");
    }
    // A stranger's answer, and a second answer, are not the call's.
    let code = "import stockade_host as h\nprint(h.call('t', 1))";
    let body = json!({"runtime": "python3", "code": code, "tools": [{"name": "t"}]});
    let tcp = s.tcp.expect("tcp");
    let mut seen = Vec::new();
    let (_, events, answers) = post_stream_answering(&s.socket, "/v1/runs", &body, |v| {
        let c = v.get("call")?;
        let at = format!("/v1/runs/{}/calls/{}", c["run"].as_str()?, c["id"].as_str()?);
        // From a thread of its own: the helper's client blocks on a runtime of its own.
        let stranger = at.clone();
        let r = std::thread::spawn(move || {
            let auth = format!("Bearer {OTHER_TOKEN}");
            let headers = [("content-type", "application/json"), ("authorization", auth.as_str())];
            request(To::Tcp(tcp), "POST", &stranger, &headers, b"{\"ok\": 666}".to_vec())
        })
        .join()
        .expect("the stranger's answer");
        seen.push((r.status, String::from_utf8_lossy(&r.body).into_owned()));
        // An answer that is neither (both at once) is refused, and the call still waits.
        let (both, socket) = (at.clone(), s.socket.clone());
        let r = std::thread::spawn(move || {
            request(To::Unix(&socket), "POST", &both, &[JSON], b"{\"ok\": 1, \"error\": \"x\"}".to_vec())
        })
        .join()
        .expect("the answer with both");
        seen.push((r.status, String::from_utf8_lossy(&r.body).into_owned()));
        Some((at, json!({"ok": 42})))
    });
    let events: Vec<Value> = events.into_iter().map(|(_, v)| v).collect();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, 404, "{}", seen[0].1);
    assert!(seen[0].1.contains("call-not-found"), "{}", seen[0].1);
    assert_eq!(seen[1].0, 400, "one of ok or error: {}", seen[1].1);
    assert_eq!(answers, [204]);
    let out: String = events.iter().filter_map(|e| e["stdout"].as_str()).collect();
    assert_eq!(out, "42\n", "{events:?}");
    let run = events.iter().find_map(|e| e["call"]["run"].as_str()).expect("a call").to_string();
    let r = call(&s, "POST", &format!("/v1/runs/{run}/calls/c-1"), b"{\"ok\": 1}".to_vec());
    assert_eq!(r.status, 404, "an answered call takes no second answer");
}

/// The Wasm runner's guests call their host as the host's python3 does: the Python guest's
/// `stockade_host` (its WIT import) and the JavaScript guest's `host` (QuickJS's two channel fds,
/// shadowed by the runner), through the runner, on the jail's channel; a run without tools
/// fails its calls at once, a warm one included; a runtime that has no host calls is refused
/// naming the ones that do.
#[test]
fn the_wasm_guests_call_their_host_too() {
    if !guests() {
        return;
    }
    let runtimes = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n\
                    [runtimes.wat]\nprogram = \"/bin/cat\"\nbootstrap = \"stdin\"\npolicy = \"wrap-python\"\nwarm = 0\n";
    let s = Server::start("", runtimes, false);
    s.wait_warm();
    let python = "import stockade_host as h\n\
                  print(h.call('add', {'a': 40, 'b': 2}))\n\
                  try:\n    h.call('nope')\nexcept h.ToolError as e:\n    print('error:', e)";
    // A file's writes and reads go through WASI's own fd_write and fd_read (beside the channel's).
    let js = "const f = std.open('/app/x.txt', 'w'); f.puts('file ok'); f.close(); print(std.loadFile('/app/x.txt'));\n\
              print(host.call('add', {a: 40, b: 2, s: 'd\u{e9}j\u{e0} \u{1F600}'}));\n\
              try { host.call('nope'); } catch (e) { print(e.name + ': ' + e.message, e instanceof host.ToolError); }";
    for (runtime, code, echoed) in [
        ("python", python, "42\nerror: no tool \"nope\""),
        ("javascript", js, "file ok\n42\nToolError: no tool \"nope\""),
    ] {
        let body = json!({"runtime": runtime, "code": code, "tools": [{"name": "add"}]});
        let mut args = Vec::new();
        let (status, events, answers) = post_stream_answering(&s.socket, "/v1/runs", &body, |v| {
            let c = v.get("call")?;
            args.push(c["args"].clone());
            let at = format!("/v1/runs/{}/calls/{}", c["run"].as_str()?, c["id"].as_str()?);
            let sum = c["args"]["a"].as_i64().unwrap_or(0) + c["args"]["b"].as_i64().unwrap_or(0);
            Some((at, json!({"ok": sum})))
        });
        assert_eq!((status, answers.as_slice()), (200, [204].as_slice()), "{runtime}: {events:?}");
        let out: String = events.iter().filter_map(|(_, e)| e["stdout"].as_str()).collect();
        assert!(out.starts_with(echoed), "{runtime}: {out} {events:?}");
        let last = &events.last().expect("a last line").1;
        assert_eq!(last["report"]["host-calls"].as_array().map(Vec::len), Some(2), "{last}");
        if runtime == "javascript" {
            assert!(out.ends_with(" true\n"), "a ToolError: {out}");
            assert_eq!(args[0]["s"], "d\u{e9}j\u{e0} \u{1F600}", "the arguments' text, as UTF-8: {args:?}");
        }
    }
    // A run without tools (a warm one): a call fails at once.
    for (runtime, code, said) in [
        (
            "python",
            "import stockade_host as h\ntry:\n    h.call('add', 1)\nexcept h.ToolError as e:\n    print(e)",
            "this run has no host calls\n",
        ),
        ("javascript", "try { host.call('add', 1) } catch (e) { print(e.message) }", "this run has no host calls\n"),
    ] {
        let r = post_run(&s.socket, &json!({"runtime": runtime, "code": code}));
        assert_eq!(r.json()["stdout"]["text"], said, "{runtime}: {}", r.json());
    }
    let body = json!({"runtime": "wat", "code": "1", "tools": [{"name": "t"}]});
    let (status, v) = json_call(&s, "POST", "/v1/runs?stream=ndjson", &body);
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("tools")), "{v}");
    let said = v["error"]["message"].as_str().unwrap_or("");
    assert!(said.contains("python") && said.contains("javascript"), "{v}");
}

/// A run with tools takes a warm jail, as a run without does: held by a helper of the spawner
/// (its calls relayed to the server, which answers them) or by a thread of the server's own.
#[test]
fn a_run_with_tools_is_served_by_a_warm_jail() {
    if !guests() || python3().is_none() {
        eprintln!("skip: needs the Wasm guests and /usr/bin/python3");
        return;
    }
    let runtimes = format!(
        "[runtimes.python]\nguest = \"python\"\nwarm = 1\n[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n{RUNTIMES}"
    );
    let py = "import stockade_host as h\nprint(h.call('add', {'a': 40, 'b': 2}))";
    for spawner in ["true", "false"] {
        let s = Server::start(&format!("spawner = {spawner}"), &runtimes, false);
        for (runtime, code) in
            [("python", py), ("python3", py), ("javascript", "print(host.call('add', {a: 40, b: 2}))")]
        {
            s.wait_warm();
            let body = json!({"runtime": runtime, "code": code, "tools": [{"name": "add"}]});
            let (status, events, answers) = post_stream_answering(&s.socket, "/v1/runs", &body, |v| {
                let c = v.get("call")?;
                let at = format!("/v1/runs/{}/calls/{}", c["run"].as_str()?, c["id"].as_str()?);
                Some((at, json!({"ok": c["args"]["a"].as_i64()? + c["args"]["b"].as_i64()?})))
            });
            let what = format!("{runtime}, spawner = {spawner}");
            assert_eq!((status, answers.as_slice()), (200, [204].as_slice()), "{what}: {events:?}");
            let out: String = events.iter().filter_map(|(_, e)| e["stdout"].as_str()).collect();
            assert_eq!(out, "42\n", "{what}: {events:?}");
            let r = &events.last().expect("a last line").1["report"];
            assert!(r.get("warm-start").is_some(), "{what}: a warm jail served it: {r}");
            assert_eq!(r["host-calls"][0]["outcome"], "ok", "{what}: {r}");
        }
    }
}

/// A run asked with `Upgrade: stockade-calls` is answered 101, and its connection carries its
/// events one way and its calls' answers the other, one JSON line each: an answer to no call
/// waiting is refused on the stream and the connection goes on; a line that is no answer is
/// refused and ends the connection. Without `?stream`, or to another protocol, 400.
#[test]
fn a_run_s_calls_are_answered_on_its_own_upgraded_connection() {
    use std::io::{BufRead, BufReader, Read, Write};
    if python3().is_none() {
        eprintln!("skip: no /usr/bin/python3");
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let upgrade = |query: &str, protocol: &str, code: &str| {
        let body =
            json!({"runtime": "python3", "code": code, "tools": [{"name": "add", "timeout-ms": 2000}]}).to_string();
        let mut c = std::os::unix::net::UnixStream::connect(&s.socket).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        // A refused upgrade may be answered (and its connection closed) before its body is all
        // written: what the server answered is read all the same.
        let _ = write!(
            c,
            "POST /v1/runs{query} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: Upgrade\r\nUpgrade: {protocol}\r\n\r\n{body}",
            body.len()
        );
        let mut r = BufReader::new(c.try_clone().expect("clone"));
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            if r.read_line(&mut head).expect("head") == 0 {
                break;
            }
        }
        (c, r, head)
    };
    let code = "import stockade_host as h\nprint(h.call('add', [40, 2]))\nprint(h.call('add', [1, 1]))";
    let (mut c, mut r, head) = upgrade("?stream=ndjson", "stockade-calls", code);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let (mut out, mut refused, mut report) = (String::new(), Vec::new(), Value::Null);
    let mut line = String::new();
    while r.read_line(&mut line).expect("a line") > 0 {
        let ev: Value = serde_json::from_str(&line).expect("JSON");
        line.clear();
        if let Some(call) = ev.get("call") {
            let sum: i64 = call["args"].as_array().expect("args").iter().filter_map(Value::as_i64).sum();
            // First an answer to a call that does not wait, then the answer.
            writeln!(c, "{}", json!({"run": call["run"], "call": "c-nope", "ok": 0})).expect("write");
            writeln!(c, "{}", json!({"run": call["run"], "call": call["id"], "ok": sum})).expect("write");
        } else if let Some(r) = ev.get("answer-refused") {
            refused.push(r.clone());
        } else if let Some(t) = ev["stdout"].as_str() {
            out.push_str(t);
        } else if ev.get("report").is_some() {
            report = ev["report"].clone();
        }
    }
    assert_eq!(out, "42\n2\n", "{report}");
    assert_eq!(report["status"], "ok", "{report}");
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused.iter().all(|r| r["call"] == "c-nope" && r["error"]["code"].is_string()), "{refused:?}");
    // A line that is no answer: refused, and the connection ends (the run goes on unanswered).
    let (mut c, mut r, head) = upgrade("?stream=ndjson", "stockade-calls", code);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    writeln!(c, "not an answer").expect("write");
    let mut rest = String::new();
    let _ = r.read_to_string(&mut rest);
    assert!(rest.contains("\"answer-refused\"") && rest.contains("\"line\""), "{rest}");
    assert!(!rest.contains("\"report\""), "the connection ended before the run: {rest}");
    // Without ?stream, or to another protocol: 400 naming what is wrong.
    for (query, protocol, field) in [("", "stockade-calls", "stream"), ("?stream=ndjson", "websocket", "Upgrade")] {
        let (_, mut r, head) = upgrade(query, protocol, "print(1)");
        assert!(head.starts_with("HTTP/1.1 400"), "{head}");
        // The connection stays open (kept alive): its body is what came within a moment.
        r.get_ref().set_read_timeout(Some(Duration::from_millis(500))).expect("timeout");
        let mut body = String::new();
        let _ = r.read_to_string(&mut body);
        assert!(body.contains(&format!("\"field\":\"{field}\"")), "{body}");
    }
}

/// Answers and tool lists are bounded before they are decoded: an answer to a call that does not
/// wait is refused before its body is read (15 MiB, four times, cost the server's memory nothing),
/// and a list of 15 MiB of tools is refused at its seventeenth, as it is read.
#[test]
fn answers_and_tool_lists_are_refused_before_they_cost_the_server() {
    if python3().is_none() {
        eprintln!("skip: no /usr/bin/python3");
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    let peak = peak_rss_kib(s.pid());
    let body = format!("{{\"ok\": \"{}\"}}", "a".repeat(15 << 20)).into_bytes();
    for _ in 0..4 {
        let head = format!(
            "POST /v1/runs/r-0123456789abcdef/calls/c-1 HTTP/1.1\r\nhost: localhost\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        assert_eq!(raw_status(&s.socket, &head, body.clone()), 404);
    }
    let grew = peak_rss_kib(s.pid()).saturating_sub(peak);
    assert!(grew < 24 << 10, "answers to no call grew the server's peak by {grew} KiB");
    let tools: Vec<Value> = (0..700_000).map(|i| json!({"name": format!("tool{i:06}")})).collect();
    let body = json!({"runtime": "python3", "code": "print(1)", "tools": tools}).to_string();
    assert!(body.len() > 14 << 20, "{}", body.len());
    let peak = peak_rss_kib(s.pid());
    let r = call(&s, "POST", "/v1/runs?stream=ndjson", body.into_bytes());
    let v = r.json();
    assert_eq!((r.status, v["error"]["field"].as_str()), (400, Some("tools")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("more than 16 tools"), "{v}");
    let grew = peak_rss_kib(s.pid()).saturating_sub(peak);
    assert!(grew < 40 << 10, "a list of tools grew the server's peak by {grew} KiB");
}
