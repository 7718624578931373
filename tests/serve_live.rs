//! Live sessions of `stockade serve`, through the real server and a real HTTP client: one jailed
//! interpreter keeps its state between runs (Python under the Wasm runner, the host's python3
//! under the bootstrap, QuickJS), each run with its own wall limit and output caps; a run past its
//! wall limit takes the interpreter down, says so, and the next run gets a new one with the files
//! kept; files reach a live interpreter between its runs; deleting the session or killing the
//! server leaves nothing. Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::*;
use std::time::Duration;

const RUNTIMES: &str = "[runtimes.python]\nguest = \"python\"\nwarm = 0\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 0\n\
                        [runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\n\
                        policy = \"wrap-python\"\nwarm = 0\n";

fn live(s: &Server, runtime: &str) -> String {
    let (status, v) = json_call(s, "POST", "/v1/sessions", &json!({"runtime": runtime, "mode": "live"}));
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["mode"], "live", "{v}");
    v["id"].as_str().expect("an id").to_string()
}

/// One run of session `id`: its answer, with what it says of the interpreter.
fn run(s: &Server, id: &str, body: Value) -> (Value, String) {
    let (status, v) = json_call(s, "POST", &format!("/v1/sessions/{id}/runs"), &body);
    assert_eq!(status, 200, "{v}");
    let how = v["session"]["interpreter"].as_str().unwrap_or("(none)").to_string();
    (v, how)
}

fn out(v: &Value) -> &str {
    v["stdout"]["text"].as_str().unwrap_or("")
}

#[test]
fn a_live_interpreter_keeps_its_state_between_runs() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let mut runtimes = vec!["python"];
    match python3() {
        Some(_) => runtimes.push("python3"),
        None => eprintln!("skip python3: no /usr/bin/python3"),
    }
    for rt in runtimes {
        let id = live(&s, rt);
        let (v, how) = run(&s, &id, json!({"code": "import json\nx = 41\ndef f(a): return a + 1"}));
        assert_eq!((v["status"].as_str(), how.as_str()), (Some("ok"), "started"), "{rt}: {v}");
        let (v, how) = run(&s, &id, json!({"code": "print(f(x), json.dumps([x]))"}));
        assert_eq!((out(&v), how.as_str()), ("42 [41]\n", "kept"), "{rt}: {v}");
        // An exception is the run's (its traceback, status 1); the interpreter goes on.
        let (v, how) = run(&s, &id, json!({"code": "x += 1\nraise ValueError('no')"}));
        assert_eq!(
            (v["status"].as_str(), v["exit-code"].as_i64(), how.as_str()),
            (Some("exited-nonzero"), Some(1), "kept")
        );
        let err = v["stderr"]["text"].as_str().unwrap_or("");
        assert!(err.contains("ValueError: no") && err.contains("Traceback"), "{rt}: {err}");
        // SystemExit ends the run with its status, not the interpreter; a run has its stdin.
        let (v, how) =
            run(&s, &id, json!({"code": "import sys\nprint(x, sys.stdin.read())\nsys.exit(3)", "stdin": "in"}));
        assert_eq!((out(&v), v["exit-code"].as_i64(), how.as_str()), ("42 in\n", Some(3), "kept"), "{rt}: {v}");
        // Output past the run's cap is the run's own, as for any run: under the policy's
        // `output.over-cap = "end"` it ends the run (and its interpreter) at the cap, at once.
        let body = json!({"code": "print('a' * 100000)\nprint('tail', end='')", "limits": {"stdout-max-bytes": 1000}});
        let (v, how) = run(&s, &id, body);
        assert_eq!(
            (v["status"].as_str(), v["stdout"]["truncated"].as_bool(), how.as_str()),
            (Some("output-limit"), Some(true), "restarted"),
            "{rt}: {v}"
        );
        assert!(v["stdout"]["bytes"].as_u64().is_some_and(|b| b > 1000), "{rt}: {v}");
        let (v, _) = run(&s, &id, json!({"code": "print('tail', end='')"}));
        assert_eq!(out(&v), "tail", "{rt}: {v}");
        assert_eq!(json_call(&s, "DELETE", &format!("/v1/sessions/{id}"), &Value::Null).0, 204);
    }

    let id = live(&s, "javascript");
    let (_, how) = run(&s, &id, json!({"code": "var y = 20; function g(a) { return a * 2 + 2; }"}));
    assert_eq!(how, "started");
    let (v, how) = run(&s, &id, json!({"code": "console.log(g(y))"}));
    assert_eq!((out(&v), how.as_str()), ("42\n", "kept"), "{v}");
    let (v, how) = run(&s, &id, json!({"code": "throw new Error('no')"}));
    assert_eq!((v["exit-code"].as_i64(), how.as_str()), (Some(1), "kept"), "{v}");
    assert!(v["stderr"]["text"].as_str().unwrap_or("").contains("Error: no"), "{v}");
    let (status, v) = json_call(&s, "POST", &format!("/v1/sessions/{id}/runs"), &json!({"code": "1", "stdin": "x"}));
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("stdin")), "{v}");
    let (v, _) = run(&s, &id, json!({"code": "console.log(y)"}));
    assert_eq!(out(&v), "20\n", "a refused run leaves the interpreter as it was: {v}");
}

#[test]
fn a_run_past_its_wall_limit_restarts_the_interpreter_and_keeps_the_files() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    s.wait_warm();
    // The server's own helpers (its spawner), before any interpreter.
    let helpers = descendants_of(s.pid());
    let id = live(&s, "python");
    let at = |rest: &str| format!("/v1/sessions/{id}{rest}");
    let (_, how) = run(&s, &id, json!({"code": "open('made.txt', 'w').write('made'); z = 1"}));
    assert_eq!(how, "started");
    // Files reach the live interpreter between its runs, both ways.
    assert_eq!(call(&s, "PUT", &at("/files/up.txt"), b"up".to_vec()).status, 200);
    let (v, how) = run(&s, &id, json!({"code": "print(open('up.txt').read(), z)\nimport os; os.remove('made.txt')"}));
    assert_eq!((out(&v), how.as_str()), ("up 1\n", "kept"), "{v}");
    assert_eq!(call(&s, "GET", &at("/files/made.txt"), Vec::new()).status, 404, "a file the run removed");
    assert_eq!(call(&s, "DELETE", &at("/files/up.txt"), Vec::new()).status, 204);
    let (v, _) =
        run(&s, &id, json!({"code": "import os\nprint(sorted(os.listdir('.')))\nopen('kept.txt', 'w').write('kept')"}));
    assert_eq!(out(&v), "[]\n", "a file deleted between runs is gone: {v}");

    let t = std::time::Instant::now();
    let (v, how) = run(&s, &id, json!({"code": "while True: pass", "limits": {"wall-timeout-ms": 500}}));
    assert_eq!((v["status"].as_str(), how.as_str()), (Some("timeout"), "restarted"), "{v}");
    assert!(t.elapsed() < Duration::from_secs(5), "the run was held past its wall limit: {:?}", t.elapsed());
    let (v, how) = run(&s, &id, json!({"code": "print(open('kept.txt').read(), 'z' in globals())"}));
    assert_eq!((out(&v), how.as_str()), ("kept False\n", "started"), "{v}");
    let (_, metrics) = get_text(&s, "/metrics");
    assert!(metrics.contains("stockade_sessions_restarted_total 1"), "{metrics}");

    // Deleting the session takes its interpreter down: no process left of it.
    let family: Vec<i32> = descendants_of(s.pid()).into_iter().filter(|p| !helpers.contains(p)).collect();
    assert!(!family.is_empty(), "the live interpreter's jail is running");
    assert_eq!(json_call(&s, "DELETE", &at(""), &Value::Null).0, 204);
    let gone = |pids: &[i32]| pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    assert!(wait_for(Duration::from_secs(5), || gone(&family)), "the interpreter outlived its session");
}

#[test]
fn live_sessions_have_a_cap_of_their_own_and_a_killed_server_leaves_nothing_of_them() {
    if !guests() {
        return;
    }
    let mut s = Server::start("", &format!("{RUNTIMES}[sessions]\nlive-max = 1\n"), false);
    let pid = s.pid();
    let id = live(&s, "python");
    run(&s, &id, json!({"code": "x = 1"}));
    // A second live session is past sessions.live-max; a workspace session is not.
    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "javascript", "mode": "live"}));
    assert_eq!((status, v["error"]["code"].as_str()), (429, Some("too-many-sessions")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("sessions.live-max"), "{v}");
    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "javascript"}));
    assert_eq!(status, 201, "{v}");

    let family = descendants_of(pid);
    let mounts = mount_count();
    s.stop(libc::SIGKILL, Duration::from_secs(5)).expect("killed");
    let gone = |pids: &[i32]| pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    assert!(wait_for(Duration::from_secs(3), || gone(&family)), "the live interpreter outlived the server");
    assert!(mount_count() <= mounts, "mounts left");
    let left = cgroups_of(pid);
    let again = Server::start("", RUNTIMES, false);
    again.wait_warm();
    assert!(left.iter().all(|d| !d.exists()), "the next start did not reap {left:?}");
}

/// `GET path` as text.
/// A live session's runs call their host, each run with its own tools and budgets (counted
/// from zero in each run) while the interpreter keeps its state; a run without tools has its
/// calls refused, and the interpreter is kept.
#[test]
fn a_live_interpreter_calls_its_host_with_each_run_s_own_tools() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let python = [
        "import stockade_host as h\nx = h.call('add', {'a': 40, 'b': 2})\n\
         try:\n    h.call('add', {'a': 1, 'b': 1})\nexcept h.ToolError as e:\n    print('refused:', e)",
        "print(x + h.call('add', {'a': 0, 'b': 1}))",
        "try:\n    h.call('add', {})\nexcept h.ToolError as e:\n    print(e)",
    ];
    let js = [
        "x = host.call('add', {a: 40, b: 2}); try { host.call('add', {a: 1, b: 1}); } catch (e) { print('refused: ' + e.message); }",
        "print(x + host.call('add', {a: 0, b: 1}))",
        "try { host.call('add', {}) } catch (e) { print(e.message) }",
    ];
    let mut cases = vec![("python", python), ("javascript", js)];
    if python3().is_some() {
        cases.push(("python3", python));
    }
    for (rt, code) in cases {
        let id = live(&s, rt);
        let path = format!("/v1/sessions/{id}/runs");
        let turn = |code: &str| {
            let body = json!({"code": code, "tools": [{"name": "add", "max-calls": 1}]});
            let (status, events, answers) = post_stream_answering(&s.socket, &path, &body, |v| {
                let c = v.get("call")?;
                let at = format!("/v1/sessions/{id}/runs/{}/calls/{}", c["run"].as_str()?, c["id"].as_str()?);
                let sum = c["args"]["a"].as_i64().unwrap_or(0) + c["args"]["b"].as_i64().unwrap_or(0);
                Some((at, json!({"ok": sum})))
            });
            assert_eq!((status, answers.as_slice()), (200, [204].as_slice()), "{rt}: {events:?}");
            let out: String = events.iter().filter_map(|(_, e)| e["stdout"].as_str()).collect();
            let report = events.last().expect("a last line").1["report"].clone();
            (out, report)
        };
        let (said, r) = turn(code[0]);
        assert!(said.starts_with("refused: ") && said.contains("max-calls"), "{rt}: {said} {r}");
        let outcomes: Vec<&str> =
            r["host-calls"].as_array().expect("host-calls").iter().filter_map(|c| c["outcome"].as_str()).collect();
        assert_eq!(outcomes, ["ok", "refused"], "{rt}: {r}");
        let (said, r) = turn(code[1]);
        assert_eq!(said, "43\n", "{rt}: the state kept, the budget the run's own: {r}");
        assert_eq!(
            (r["session"]["interpreter"].as_str(), r["host-calls"].as_array().map(Vec::len)),
            (Some("kept"), Some(1)),
            "{r}"
        );
        let (v, how) = run(&s, &id, json!({"code": code[2]}));
        assert_eq!((out(&v), how.as_str()), ("this run has no host calls\n", "kept"), "{rt}: {v}");
        // Its interpreter goes: one client's share of live sessions is two.
        assert_eq!(json_call(&s, "DELETE", &format!("/v1/sessions/{id}"), &Value::Null).0, 204);
    }
}
