//! `stockade mcp`, spoken to as an MCP client would: JSON-RPC lines over the real binary's stdin
//! and stdout (initialize, tools/list, tools/call), runs in this process's engine and through a
//! running server (`--serve`); the operator's limits hold (a timeout, an oversized output), the
//! model cannot loosen them nor pick a policy, refusals are tool errors naming the field; the
//! operator's host tools (`--host-tools`) answer the code's calls, and only theirs.
//! Needs the Wasm guests (skips without them, saying so).

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::guests;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// The binary under test, spoken to line by line.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    /// The server's answer to `initialize`.
    init: Value,
}

impl Mcp {
    /// Starts `stockade mcp ARGS` and initializes the session (checking the server's answer).
    fn start(args: &[&str]) -> Mcp {
        Mcp::start_with_env(args, &[])
    }

    /// The same, with these environment variables set.
    fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Mcp {
        let mut child = Command::new(stockade_bin())
            .arg("mcp")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn stockade mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stdin = child.stdin.take();
        let mut m = Mcp { child, stdin, lines, next_id: 1, init: Value::Null };
        let init = m.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "stockade", "{init}");
        assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
        m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m.init = init;
        m
    }

    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    /// One request; its response (notifications in between are skipped).
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).expect("an answer within 60 s");
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line}: {e}"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        self.call("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Closes stdin (the client goes away): the server ends cleanly.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = wait_exit(&mut self.child, Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "stockade mcp did not end cleanly: {status:?}");
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

/// Python that ends its turn the way the code could once: the live loop's nonce, found in a frame
/// above it, written as the loop wrote it (a stand-in when there is none), then a spin.
const SAYS_DONE: &str = "import sys\nf = sys._getframe()\nwhile f is not None and 'nonce' not in f.f_locals:\n    f = f.f_back\n\
                         n = f.f_locals['nonce'].decode() if f is not None else '0' * 32\n\
                         sys.stdout.write(n + ' 0\\n'); sys.stdout.flush(); sys.stderr.write(n + '\\n'); sys.stderr.flush()\n\
                         while True: pass";

/// A tool's structured result (asserting it is not an error).
fn ran(answer: &Value) -> &Value {
    let r = &answer["result"];
    assert_ne!(r["isError"], json!(true), "a tool error: {answer}");
    assert!(r["structuredContent"].is_object(), "no structured content: {answer}");
    &r["structuredContent"]
}

/// A tool error's text.
fn tool_error(answer: &Value) -> String {
    let r = &answer["result"];
    assert_eq!(r["isError"], json!(true), "not a tool error: {answer}");
    r["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

#[test]
fn tools_run_python_and_javascript_here() {
    if !guests() {
        return;
    }
    let mut m = Mcp::start(&[]);
    let list = m.call("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().expect("tools").clone();
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    // The host's python3 is a tool where the configuration has it (the built-in one has it where
    // /usr/bin/python3 is).
    let mut want = vec!["list_files", "read_file", "run_javascript", "run_python", "write_file"];
    if std::path::Path::new("/usr/bin/python3").exists() {
        want.insert(4, "run_python3");
    }
    assert_eq!(names, want, "{list}");
    for t in tools.iter().filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with("run_"))) {
        assert_eq!(t["inputSchema"]["required"], json!(["code"]), "{t}");
        assert!(t["outputSchema"]["properties"]["stdout"].is_object(), "{t}");
        assert!(t["inputSchema"]["properties"].get("policy").is_none(), "the model picks no policy: {t}");
    }

    let out = m.tool("run_python", json!({"code": "print(6 * 7)"}));
    let r = ran(&out);
    assert_eq!(
        (r["status"].as_str(), r["stdout"].as_str(), r["exit_code"].as_i64()),
        (Some("ok"), Some("42\n"), Some(0))
    );
    assert!(r["wall_ms"].as_f64().is_some_and(|w| w > 0.0), "{r}");

    let code = "import sys\nprint(open('data.txt').read().upper(), sys.stdin.read())\nsys.exit(3)";
    let out = m.tool("run_python", json!({"code": code, "files": {"data.txt": "from the agent"}, "stdin": "piped"}));
    let r = ran(&out);
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("exited-nonzero"), Some(3)), "{r}");
    assert_eq!(r["stdout"], "FROM THE AGENT piped\n");

    let out = m.tool("run_javascript", json!({"code": "console.log([1, 2, 3].map(x => x * 2).join())"}));
    assert_eq!(ran(&out)["stdout"], "2,4,6\n");
    // The value of the code's last expression, as structured content.
    let out = m.tool("run_javascript", json!({"code": "[1, 2].map(x => x * 2)"}));
    assert_eq!(ran(&out)["value"], json!([2, 4]), "{out}");
    let out = m.tool("run_python", json!({"code": "(1, 2)"}));
    assert_eq!(ran(&out)["value_repr"], "(1, 2)", "{out}");
    // The figures python3 left open, as image content after the JSON.
    let plt = std::process::Command::new("/usr/bin/python3").args(["-c", "import matplotlib"]).status();
    if plt.is_ok_and(|s| s.success()) {
        let code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 + 1";
        let out = m.tool("run_python3", json!({"code": code}));
        assert_eq!((ran(&out)["value"].as_i64(), ran(&out)["figures"].as_u64()), (Some(2), Some(1)), "{out}");
        let content = out["result"]["content"].as_array().expect("content");
        let image = content.iter().find(|c| c["type"] == "image").expect("an image block");
        assert_eq!(image["mimeType"], "image/png", "{image}");
        use base64::Engine as _;
        let png =
            base64::engine::general_purpose::STANDARD.decode(image["data"].as_str().unwrap_or("")).unwrap_or_default();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    } else {
        eprintln!("skip the figures: the host's python3 has no matplotlib");
    }

    // A network attempt inside fails inside; the host sees no connection.
    let out = m.tool("run_python", json!({"code": "import socket\ntry:\n socket.create_connection(('127.0.0.1', 9), 1)\nexcept Exception as e:\n print('refused', type(e).__name__)"}));
    assert!(ran(&out)["stdout"].as_str().is_some_and(|s| s.starts_with("refused")), "{out}");

    // Refusals are tool errors naming the field; the model cannot loosen the policy or pick one.
    let out = m.tool("run_python", json!({"code": "1", "limits": {"wall_timeout_ms": 1_000_000_000u64}}));
    assert!(tool_error(&out).contains("limits.wall-timeout-ms"), "{out}");
    let out = m.tool("run_python", json!({"code": "1", "files": {"../escape": "x"}}));
    assert!(tool_error(&out).contains("files[0].path"), "{out}");
    let out = m.tool("run_python", json!({"code": "1", "policy": "wide-open"}));
    assert!(out["error"].is_object() || out["result"]["isError"] == json!(true), "a policy from the model: {out}");
    m.finish();
}

/// One session per runtime for the client's connection: what a call leaves in /app is there
/// for the next, the file tools reach it; through the engine here and through a server. With
/// `--session none`, every call a fresh /app and no file tools.
#[test]
fn calls_share_a_workspace_and_the_file_tools_reach_it() {
    if !guests() {
        return;
    }
    let s = server::Server::start(
        "",
        "[runtimes.python]\nguest = \"python\"\nwarm = 1\n[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n",
        false,
    );
    let socket = s.socket.display().to_string();
    for args in [vec![], vec!["--serve", socket.as_str()]] {
        let mut m = Mcp::start(&args);
        let out = m.tool("write_file", json!({"path": "in/data.csv", "content": "a,b\n1,2\n"}));
        assert_eq!(ran(&out)["files"][0]["path"], "in/data.csv", "{out}");
        let code =
            "rows = open('in/data.csv').read().split()\nopen('count.txt', 'w').write(str(len(rows)))\nprint(rows)";
        let r = ran(&m.tool("run_python", json!({"code": code}))).clone();
        assert_eq!(r["stdout"], "['a,b', '1,2']\n", "{args:?}: {r}");
        assert_eq!(r["workspace_files"], json!(["count.txt", "in/data.csv"]), "{r}");
        let r = ran(&m.tool("run_python", json!({"code": "print(open('count.txt').read())"}))).clone();
        assert_eq!(r["stdout"], "2\n", "the next call sees what the last one left: {r}");
        let out = m.tool("read_file", json!({"path": "count.txt"}));
        assert_eq!(ran(&out)["content"], "2", "{out}");
        let out = m.tool("list_files", json!({}));
        assert_eq!(ran(&out)["files"].as_array().map(Vec::len), Some(2), "{out}");
        // JavaScript's session is its own.
        let r = ran(&m.tool(
            "run_javascript",
            json!({"code": "console.log(os.readdir('/app')[0].filter(n => n[0] != '.').length)"}),
        ))
        .clone();
        assert_eq!(r["stdout"], "0\n", "{r}");
        let e = tool_error(&m.tool("read_file", json!({"path": "../etc/passwd"})));
        assert!(e.contains("'..'"), "{e}");
        m.finish();
    }
    // The client's sessions ended with it.
    let (_, v) = server::get(&s.socket, "/v1/sessions");
    assert_eq!(v["sessions"], json!([]), "{v}");

    let mut m = Mcp::start(&["--session", "none"]);
    let list = m.call("tools/list", json!({}));
    let python3 = usize::from(std::path::Path::new("/usr/bin/python3").exists());
    assert_eq!(list["result"]["tools"].as_array().map(Vec::len), Some(2 + python3), "{list}");
    let r = ran(&m.tool("run_python", json!({"code": "open('x.txt', 'w').write('1')"}))).clone();
    assert!(r.get("workspace_files").is_none(), "{r}");
    let r = ran(&m.tool("run_python", json!({"code": "import os; print(os.listdir('.'))"}))).clone();
    assert_eq!(r["stdout"], "[]\n", "{r}");
    m.finish();

    // Live: one interpreter per language keeps its variables between calls, here and through a
    // server; a call past its time limit says that the interpreter was restarted.
    for args in [vec!["--session", "live"], vec!["--session", "live", "--serve", socket.as_str()]] {
        let mut m = Mcp::start(&args);
        ran(&m.tool("run_python", json!({"code": "x = 41"})));
        let r = ran(&m.tool("run_python", json!({"code": "print(x + 1)"}))).clone();
        assert_eq!(r["stdout"], "42\n", "{args:?}: {r}");
        let r = ran(&m.tool("run_javascript", json!({"code": "var y = 1"}))).clone();
        assert_eq!(r["status"], "ok", "{r}");
        let r = ran(&m.tool("run_javascript", json!({"code": "console.log(y + 1)"}))).clone();
        assert_eq!(r["stdout"], "2\n", "{r}");
        let r =
            ran(&m.tool("run_python", json!({"code": "while True: pass", "limits": {"wall_timeout_ms": 300}}))).clone();
        assert_eq!(r["status"], "timeout", "{r}");
        assert!(r["notes"].to_string().contains("restarted"), "{r}");
        let r = ran(&m.tool("run_python", json!({"code": "print('x' in globals())"}))).clone();
        assert_eq!(r["stdout"], "False\n", "{r}");
        // Code that writes what looks like the end of its turn and goes on is still in its turn:
        // its time limit ends it (the model's code cannot end a turn early and run on).
        let says_done = SAYS_DONE;
        let t = std::time::Instant::now();
        let r = ran(&m.tool("run_python", json!({"code": says_done, "limits": {"wall_timeout_ms": 500}}))).clone();
        assert_eq!(r["status"], "timeout", "{args:?}: {r}");
        assert!(t.elapsed() >= Duration::from_millis(450), "{:?}", t.elapsed());
        m.finish();
    }
}

/// With a state directory, a live session outlives `stockade mcp`: its interpreter is hibernated
/// as it ends, and the next `stockade mcp` on the directory resumes it.
#[test]
fn live_sessions_outlive_mcp_with_a_state_directory() {
    if !guests() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let state = dir.path().join("state").display().to_string();
    let args = ["--session", "live", "--state-dir", state.as_str()];
    let mut m = Mcp::start(&args);
    ran(&m.tool("run_python", json!({"code": "import fractions\nx = fractions.Fraction(1, 3)"})));
    m.finish();
    let mut m = Mcp::start(&args);
    let r = ran(&m.tool("run_python", json!({"code": "print(x * 3)"}))).clone();
    assert_eq!(r["stdout"], "1\n", "{r}");
    m.finish();
    // Without one, the sessions go with the process.
    let mut m = Mcp::start(&["--session", "live"]);
    ran(&m.tool("run_python", json!({"code": "x = 1"})));
    m.finish();
    let mut m = Mcp::start(&["--session", "live"]);
    let r = ran(&m.tool("run_python", json!({"code": "print('x' in globals())"}))).clone();
    assert_eq!(r["stdout"], "False\n", "{r}");
    m.finish();
}

#[test]
fn the_operator_s_limits_hold() {
    if !guests() {
        return;
    }
    let mut m = Mcp::start(&["--wall-timeout-ms", "700", "--output-max-bytes", "100"]);
    let out = m.tool("run_python", json!({"code": "while True: pass"}));
    assert_eq!(ran(&out)["status"], "timeout", "{out}");
    let out = m.tool("run_python", json!({"code": "print('x' * 100000)"}));
    let r = ran(&out);
    assert_eq!((r["stdout"].as_str().map(str::len), r["stdout_truncated"].as_bool()), (Some(100), Some(true)), "{r}");
    // A call may tighten further, never loosen: a looser limit is refused, naming the call's
    // field and the operator's ceiling (as the schema the model reads says), not clamped.
    let out =
        m.tool("run_javascript", json!({"code": "console.log('y'.repeat(50))", "limits": {"output_max_bytes": 10}}));
    assert_eq!(ran(&out)["stdout"], "y".repeat(10));
    let out = m.tool(
        "run_python",
        json!({"code": "import time; time.sleep(0.3); print('done')", "limits": {"wall_timeout_ms": 60_000}}),
    );
    let e = tool_error(&out);
    assert!(e.contains("limits.wall_timeout_ms") && e.contains("looser than the operator's ceiling's 700"), "{e}");
    assert!(e.contains("--wall-timeout-ms"), "the operator's flag is named: {e}");
    let out = m.tool(
        "run_python",
        json!({"code": "import time; time.sleep(0.3); print('done')", "limits": {"wall_timeout_ms": 690}}),
    );
    assert_eq!(ran(&out)["stdout"], "done\n", "{out}");
    m.finish();
}

/// An operator's ceiling looser than the policy would fail every call: `stockade mcp` refuses to
/// start, naming the flag and the policy's limit.
#[test]
fn a_ceiling_looser_than_the_policy_is_refused_at_start() {
    if !guests() {
        return;
    }
    let out = Command::new(stockade_bin())
        .args(["mcp", "--wall-timeout-ms", "999999999"])
        .stdin(Stdio::null())
        .output()
        .expect("run stockade mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(stderr.contains("--wall-timeout-ms: 999999999 is looser than policy \"default\"'s 10000"), "{stderr}");
}

#[test]
fn a_front_for_a_running_server() {
    if !guests() {
        return;
    }
    let runtimes =
        "[runtimes.python]\nguest = \"python\"\nwarm = 1\n[runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";
    let mut s = server::Server::start("", runtimes, false);
    s.wait_warm();
    let socket = s.socket.display().to_string();
    let mut m = Mcp::start(&["--serve", &socket]);
    let out = m.tool("run_python", json!({"code": "print(sum(range(10)))"}));
    assert_eq!(ran(&out)["stdout"], "45\n", "{out}");
    let out = m.tool("run_javascript", json!({"code": "1", "files": {"/abs": "x"}}));
    assert!(tool_error(&out).contains("files[0].path"), "{out}");
    m.finish();
    assert!(s.stop(libc::SIGTERM, Duration::from_secs(30)).is_some_and(|x| x.success()), "{}", s.log());
    // A server that is gone: the tool says so.
    let mut m = Mcp::start(&["--serve", &socket]);
    let out = m.tool("run_python", json!({"code": "print(1)"}));
    assert!(tool_error(&out).starts_with("unavailable"), "{out}");
    m.finish();
}

/// A host that cannot build a jail (here: no guests where the configuration looks) does not
/// make `stockade mcp` vanish before `initialize` (an agent's client would only show
/// "disconnected"): it answers, and every call is a tool error saying why.
#[test]
fn a_host_that_cannot_build_jails_still_answers_and_says_why() {
    let empty = tempfile::tempdir().expect("tempdir");
    let mut m = Mcp::start_with_env(&[], &[("STOCKADE_GUEST_DIR", empty.path().to_str().expect("utf-8"))]);
    let out = m.tool("run_python", json!({"code": "print(1)"}));
    let e = tool_error(&out);
    assert!(e.starts_with("unavailable: this host cannot run jails:") && e.contains("stockade guest install"), "{e}");
    m.finish();
}

/// `--host-tools`: the operator's programs answer the code's host calls (Python's and
/// JavaScript's), each with its arguments on stdin and only the environment it was given; a
/// failing one's stderr is the code's error; one past its `timeout-ms` is killed with what it
/// started; the model is told of them (here with live sessions: a run of a session's interpreter;
/// without sessions, a one-off run). A file with a mistake stops the server, naming the key.
#[test]
fn the_operator_s_host_tools_answer_the_code() {
    use std::os::unix::fs::PermissionsExt;
    if !guests() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write a tool");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p.display().to_string()
    };
    let echo = script(
        "echo",
        r#"printf '{"got": %s, "secret": "%s", "hidden": "%s"}' "$(cat)" "$SECRET_VAR" "${HIDDEN_VAR:-none}""#,
    );
    let fail = script("fail", "echo 'the index is down' >&2\nexit 3");
    let pid_file = dir.path().join("pid");
    let hang = script(
        "hang",
        &format!("echo $$ > {}\nsleep 30 &\necho $! >> {}\nwait", pid_file.display(), pid_file.display()),
    );
    let file = dir.path().join("tools.toml");
    let text = format!(
        "version = 1\n\
         [[tool]]\nname = \"echo\"\ndescription = \"Echoes its arguments\"\ncommand = [\"{echo}\"]\nenv = [\"SECRET_VAR\"]\n\
         [[tool]]\nname = \"fail\"\ndescription = \"Always fails\"\ncommand = [\"{fail}\"]\n\
         [[tool]]\nname = \"hang\"\ndescription = \"Never answers\"\ncommand = [\"{hang}\"]\ntimeout-ms = 300\n"
    );
    std::fs::write(&file, &text).expect("write the tools file");
    let env = [("SECRET_VAR", "s3"), ("HIDDEN_VAR", "leaked")];
    let mut m = Mcp::start_with_env(&["--session", "live", "--host-tools", &file.display().to_string()], &env);
    let told = m.init["result"]["instructions"].as_str().unwrap_or_default().to_string();
    assert!(told.contains("`echo`: Echoes its arguments.") && told.contains("host.call"), "{told}");
    let code = "import stockade_host as h\nprint(h.call('echo', {'q': 1}))\n\
                for t in ('fail', 'hang', 'nope'):\n    try:\n        h.call(t)\n    except h.ToolError as e:\n        print('error:', e)";
    let t = std::time::Instant::now();
    let out = m.tool("run_python", json!({"code": code}));
    let said = ran(&out)["stdout"].as_str().unwrap_or_default().to_string();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[0], "{'got': {'q': 1}, 'secret': 's3', 'hidden': 'none'}", "{said}");
    assert_eq!(lines[1], "error: the index is down", "{said}");
    assert!(lines[2].contains("within 300 ms"), "{said}");
    assert!(lines[3].contains("no tool \"nope\""), "{said}");
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    // The hanging tool and what it started are gone.
    let pids: Vec<i32> =
        std::fs::read_to_string(&pid_file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), 2, "the tool ran and started its child");
    let gone = || pids.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists());
    assert!(wait_for(Duration::from_secs(5), gone), "a tool past its time was left running: {pids:?}");
    let out = m.tool("run_javascript", json!({"code": "print(JSON.stringify(host.call('echo', [1, 'x'])))"}));
    assert_eq!(ran(&out)["stdout"], "{\"got\":[1,\"x\"],\"secret\":\"s3\",\"hidden\":\"none\"}\n", "{out}");
    m.finish();

    // Without sessions: a one-off run calls them too.
    let mut m = Mcp::start_with_env(&["--session", "none", "--host-tools", &file.display().to_string()], &env);
    let out = m.tool("run_python", json!({"code": "import stockade_host as h\nprint(h.call('echo', 2)['got'])"}));
    assert_eq!(ran(&out)["stdout"], "2\n", "{out}");
    m.finish();

    // The shipped example works as it is.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/contrib/mcp-host-tools.toml");
    let mut m = Mcp::start(&["--session", "none", "--host-tools", example]);
    let out = m.tool("run_python", json!({"code": "import stockade_host as h\nprint(len(h.call('today')))"}));
    assert_eq!(ran(&out)["stdout"], "10\n", "an ISO date: {out}");
    m.finish();

    // Without the flag the code has none.
    let mut m = Mcp::start(&["--session", "none"]);
    let out = m.tool(
        "run_python",
        json!({"code": "import stockade_host as h\ntry:\n    h.call('echo')\nexcept h.ToolError as e:\n    print(e)"}),
    );
    assert_eq!(ran(&out)["stdout"], "this run has no host calls\n", "{out}");
    m.finish();

    // A mistake in the file: the server does not start, and says where.
    std::fs::write(&file, text.replacen(&echo, "echo", 1)).expect("rewrite");
    let out = Command::new(stockade_bin())
        .args(["mcp", "--host-tools", &file.display().to_string()])
        .stdin(Stdio::null())
        .output()
        .expect("run stockade mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(
        stderr.contains("tools.toml") && stderr.contains("tool[0].command") && stderr.contains("absolute path"),
        "{stderr}"
    );
}
