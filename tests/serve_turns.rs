//! The attacks on live sessions, each tried from outside: a real server, a real HTTP client, and
//! the host watched (the CPU time of the server's jails, the server's own memory and CPU). A
//! live turn is a run of the library: it ends when its interpreter is back in its read (said by
//! the Wasm runner, or seen by the supervisor), never on bytes the code writes; nothing of the
//! interpreter runs between turns; every limit a turn asks is applied or refused. Needs the Wasm
//! guests (skips without them, saying so); the python3 cases need /usr/bin/python3.

mod common;
mod server;

use common::*;
use serde_json::{Value, json};
use server::*;
use std::time::{Duration, Instant};

// One client here holds every live session it makes (the shipped share is two).
const RUNTIMES: &str = "[sessions]\nlive-max-per-token = 8\n[runtimes.python]\nguest = \"python\"\nwarm = 0\n\
                        [runtimes.javascript]\nguest = \"javascript\"\nwarm = 0\n\
                        [runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\n\
                        policy = \"wrap-python\"\nwarm = 0\n";

fn live(s: &Server, runtime: &str, limits: Value) -> String {
    let body = json!({"runtime": runtime, "mode": "live", "limits": limits});
    let (status, v) = json_call(s, "POST", "/v1/sessions", &body);
    assert_eq!(status, 201, "{}", brief(&v));
    v["id"].as_str().expect("an id").to_string()
}

/// One run of session `id`: its status code, its answer, and how long it took.
fn turn(s: &Server, id: &str, body: Value) -> (u16, Value, Duration) {
    let t = Instant::now();
    let (status, v) = json_call(s, "POST", &format!("/v1/sessions/{id}/runs"), &body);
    (status, v, t.elapsed())
}

/// Python that ends its turn the way the code could once: the live loop's nonce, found in a frame
/// above it, written as the loop wrote it (a stand-in when there is none), then a spin.
const SAYS_DONE: &str = "import sys\nf = sys._getframe()\nwhile f is not None and 'nonce' not in f.f_locals:\n    f = f.f_back\n\
                         n = f.f_locals['nonce'].decode() if f is not None else '0' * 32\n\
                         sys.stdout.write(n + ' 0\\n'); sys.stdout.flush(); sys.stderr.write(n + '\\n'); sys.stderr.flush()\n\
                         while True: pass";

/// An answer in brief (its output cut), for a failed assertion's message.
fn brief(v: &Value) -> String {
    let mut v = v.clone();
    for stream in ["stdout", "stderr"] {
        if let Some(t) = v[stream]["text"].as_str() {
            v[stream]["text"] = Value::from(t.chars().take(300).collect::<String>());
        }
    }
    v["enforcement"] = Value::Null;
    v.to_string()
}

/// The CPU time (s) the processes below the server use over `d`: its jails, its helpers.
fn jails_cpu_over(s: &Server, d: Duration) -> f64 {
    let ticks = || -> u64 {
        descendants_of(s.pid())
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
            .filter_map(|st| {
                let rest = st.rsplit_once(") ")?.1.split(' ').collect::<Vec<_>>();
                Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
            })
            .sum()
    };
    let before = ticks();
    std::thread::sleep(d);
    ticks().saturating_sub(before) as f64 / 100.0
}

/// The server's own resident memory, KiB.
fn server_rss_kib(s: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The server's own CPU time so far, s.
fn server_cpu_s(s: &Server) -> f64 {
    let st = std::fs::read_to_string(format!("/proc/{}/stat", s.pid())).unwrap_or_default();
    let rest: Vec<&str> = st.rsplit_once(") ").map(|(_, r)| r.split(' ').collect()).unwrap_or_default();
    let n = |i: usize| rest.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    (n(11) + n(12)) as f64 / 100.0
}

/// Code that says it is done and goes on: the turn is over only when its interpreter is back in
/// its read, so it runs to its wall limit and the interpreter is taken down; nothing of it burns
/// the host's CPU afterwards. A python3 thread left running is frozen between turns, and runs
/// (and is counted) in the next one.
#[test]
fn a_turn_that_says_it_is_done_runs_until_its_interpreter_is_back() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    // Python: its live loop's end as it once was (the nonce read from the loop's frame, where
    // there is one), then a spin; JavaScript: its loop's read of the next turn replaced by a spin.
    let cases = [
        ("python", SAYS_DONE),
        ("javascript", "std.in.getline = () => { for (;;) {} }; console.log('0'.repeat(32) + ' 0')"),
    ];
    for (rt, code) in cases {
        let id = live(&s, rt, json!({}));
        let (status, v, took) = turn(&s, &id, json!({"code": code, "limits": {"wall-timeout-ms": 1000}}));
        assert_eq!(status, 200, "{rt}: {}", brief(&v));
        assert_eq!(
            (v["status"].as_str(), v["session"]["interpreter"].as_str()),
            (Some("timeout"), Some("restarted")),
            "{rt}: {}",
            brief(&v)
        );
        assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(4), "{rt}: {took:?}");
        let cpu = jails_cpu_over(&s, Duration::from_secs(1));
        assert!(cpu < 0.2, "{rt}: its jails used {cpu} s of CPU after the turn's answer");
        let (_, v, _) = turn(&s, &id, json!({"code": if rt == "python" { "print(1)" } else { "console.log(1)" }}));
        assert_eq!(
            (v["stdout"]["text"].as_str(), v["session"]["interpreter"].as_str()),
            (Some("1\n"), Some("started"))
        );
    }
    if python3().is_none() {
        return eprintln!("skip python3: no /usr/bin/python3");
    }
    let id = live(&s, "python3", json!({}));
    let spin =
        "import threading\ndef spin():\n    while True: pass\nthreading.Thread(target=spin, daemon=True).start()";
    let (_, v, took) = turn(&s, &id, json!({"code": spin}));
    assert_eq!(
        (v["status"].as_str(), v["session"]["interpreter"].as_str()),
        (Some("ok"), Some("started")),
        "{}",
        brief(&v)
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    let cpu = jails_cpu_over(&s, Duration::from_secs(1));
    assert!(cpu < 0.2, "the thread ran between turns: {cpu} s of CPU");
    // Thawed for the next turn, the thread runs in it, and its CPU time is that turn's.
    let (_, v, _) = turn(&s, &id, json!({"code": "import time\ntime.sleep(0.6)"}));
    let used = v["cpu-user-ms"].as_f64().unwrap_or(0.0) + v["cpu-sys-ms"].as_f64().unwrap_or(0.0);
    assert!(used >= 250.0, "the next turn counted {used} ms of CPU: {}", brief(&v));
    let cpu = jails_cpu_over(&s, Duration::from_secs(1));
    assert!(cpu < 0.2, "the thread ran after the next turn: {cpu} s of CPU");
}

/// Output written between turns waits in the jail (the writer blocks there), never in the
/// server: a python3 thread that prints on after its turn grows the server by nothing, and the
/// next turn gets it under its own cap. A turn that prints 50 MB under a 1 MiB cap ends at the
/// cap, at once.
#[test]
fn output_between_turns_stays_in_the_jail_and_a_flood_ends_at_its_cap() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let id = live(&s, "python", json!({}));
    let rss = server_rss_kib(&s);
    let (_, v, took) = turn(&s, &id, json!({"code": "print('a' * 50_000_000)"}));
    assert_eq!(v["status"].as_str(), Some("output-limit"), "{}", brief(&v));
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(server_rss_kib(&s) < rss + 32 * 1024, "the server grew by {} KiB", server_rss_kib(&s) - rss);
    if python3().is_none() {
        return eprintln!("skip python3: no /usr/bin/python3");
    }
    let id = live(&s, "python3", json!({}));
    let flood = "import threading\ndef flood():\n    while True: print('x' * 65536, flush=True)\n\
                 threading.Thread(target=flood, daemon=True).start()";
    let (_, v, _) = turn(&s, &id, json!({"code": flood}));
    assert_eq!(v["session"]["interpreter"].as_str(), Some("started"), "{}", brief(&v));
    let rss = server_rss_kib(&s);
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        server_rss_kib(&s) < rss + 8 * 1024,
        "output between turns grew the server by {} KiB",
        server_rss_kib(&s) - rss
    );
    let (_, v, took) = turn(&s, &id, json!({"code": "import time\ntime.sleep(5)"}));
    assert_eq!(v["status"].as_str(), Some("output-limit"), "{}", brief(&v));
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// Host-call frames from a turn with no tools are refused unread: eight 12 MB frames cost the
/// server neither their memory nor its CPU, and the turn goes on.
#[test]
fn host_call_frames_of_a_turn_without_tools_are_dropped_unread() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    // Frames of 12 MB: the Wasm guest's own copies of one (its JSON, its UTF-8) fit its 256 MiB.
    let code = "import stockade_host\nn = 0\nbig = 'a' * 12_000_000\nfor _ in range(8):\n    try:\n        stockade_host.call('x', big)\n    \
                except stockade_host.ToolError as e:\n        n += 1; why = str(e)\nprint(n, why)";
    let mut runtimes = vec!["python"];
    if python3().is_some() {
        runtimes.push("python3");
    }
    for rt in runtimes {
        let id = live(&s, rt, json!({}));
        let (rss, cpu) = (server_rss_kib(&s), server_cpu_s(&s));
        let (_, v, _) = turn(&s, &id, json!({"code": code, "limits": {"wall-timeout-ms": 8000}}));
        assert_eq!(v["stdout"]["text"].as_str(), Some("8 this run has no host calls\n"), "{rt}: {}", brief(&v));
        assert_eq!(v["session"]["interpreter"].as_str(), Some("started"), "{rt}: {}", brief(&v));
        let grew = server_rss_kib(&s).saturating_sub(rss);
        assert!(grew < 48 * 1024, "{rt}: the server grew by {grew} KiB");
        let used = server_cpu_s(&s) - cpu;
        assert!(used < 2.0, "{rt}: the server spent {used} s of CPU");
        let calls = v["host-calls"].as_array().map_or(0, Vec::len);
        assert_eq!(calls, 8, "{rt}: {}", brief(&v));
    }
}

/// A turn's limits are applied, or refused naming the key: the wall clock, the output caps and
/// (for a session made with fuel) the fuel are the turn's; memory, processes and a guest's memory
/// are the interpreter's for its life, set when the session is made, and a turn asking others is
/// refused with the session's value, before any interpreter is started for it.
#[test]
fn a_turn_s_limits_are_applied_or_refused() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    let id = live(&s, "python", json!({}));
    for (key, value) in [("memory-max-bytes", 4_000_000u64), ("wasm-memory-max-bytes", 2_000_000), ("pids-max", 8)] {
        let (status, v, _) = turn(&s, &id, json!({"code": "x = 1", "limits": {key: value}}));
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (400, Some(format!("limits.{key}").as_str())),
            "{}",
            brief(&v)
        );
        assert!(message.contains("when the session is made"), "{}", brief(&v));
    }
    let (status, v, _) = turn(&s, &id, json!({"code": "x = 1", "limits": {"fuel": 100_000}}));
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("limits.fuel")), "{}", brief(&v));
    // None of these started an interpreter: the first run that does is this one.
    let (_, v, _) = turn(&s, &id, json!({"code": "print(1)"}));
    assert_eq!(v["session"]["interpreter"].as_str(), Some("started"), "{}", brief(&v));

    // A session made with its limits: memory for the interpreter's life, fuel for each turn.
    let id = live(&s, "python", json!({"fuel": 2_000_000_000u64, "memory-max-bytes": 256 << 20}));
    let (_, v, _) = turn(&s, &id, json!({"code": "x = sum(range(100))", "limits": {"memory-max-bytes": 256 << 20}}));
    assert_eq!(v["status"].as_str(), Some("ok"), "{}", brief(&v));
    let (_, v, _) = turn(&s, &id, json!({"code": "y = sum(range(10**7))", "limits": {"fuel": 100_000}}));
    assert_eq!(v["status"].as_str(), Some("fuel-exhausted"), "{}", brief(&v));
    let (_, v, _) = turn(&s, &id, json!({"code": "print(sum(range(10**5)))"}));
    assert_eq!(v["stdout"]["text"].as_str(), Some("4999950000\n"), "the session's own fuel: {}", brief(&v));
    let consumed = v["fuel-consumed"].as_u64().unwrap_or(0);
    assert!(consumed > 0 && consumed < 2_000_000_000, "{}", brief(&v));
}

/// A live interpreter's first turn reports its own CPU time and the memory it took, as every
/// later turn does.
#[test]
fn the_first_turn_reports_its_cpu_and_memory() {
    if !guests() {
        return;
    }
    let s = Server::start("", RUNTIMES, false);
    for rt in ["python", "javascript"] {
        let id = live(&s, rt, json!({}));
        let code = if rt == "python" {
            "print(sum(i * i for i in range(300_000)))"
        } else {
            "let t = 0; for (let i = 0; i < 3e6; i++) t += i; console.log(t)"
        };
        let (_, v, _) = turn(&s, &id, json!({"code": code}));
        assert_eq!(v["session"]["interpreter"].as_str(), Some("started"), "{rt}: {}", brief(&v));
        let used = v["cpu-user-ms"].as_f64().unwrap_or(0.0) + v["cpu-sys-ms"].as_f64().unwrap_or(0.0);
        assert!(used > 0.0, "{rt}: {}", brief(&v));
        assert!(v["memory-peak-bytes"].as_u64().is_some_and(|b| b > 0), "{rt}: {}", brief(&v));
        assert!(v["wasm-memory-peak-bytes"].as_u64().is_some_and(|b| b > 0), "{rt}: {}", brief(&v));
    }
}

/// A host program's live interpreter is frozen between its turns with its cgroup2 leaf: under a
/// policy without cgroups the session is refused when it is made, naming why, and a workspace
/// session of the runtime is still made.
#[test]
fn a_live_program_session_needs_a_cgroup_to_freeze_it() {
    if !guests() || python3().is_none() {
        return eprintln!("skip: needs the guests and /usr/bin/python3");
    }
    let dir = tempfile::tempdir().expect("tmp");
    let wrap = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/wrap-python.toml"),
    )
    .expect("wrap-python");
    std::fs::write(dir.path().join("nocg.toml"), format!("{wrap}\n[cgroups]\nenabled = false\nmemory-max-bytes = \"unlimited\"\npids-max = \"unlimited\"\ncpu-max-percent = \"unlimited\"\n")).expect("policy");
    let config = format!(
        "[policies]\ndir = \"{}\"\n[runtimes.py]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"nocg\"\nwarm = 0\n",
        dir.path().display()
    );
    let s = Server::start("", &config, false);
    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "py", "mode": "live"}));
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("mode")), "{v}");
    assert!(message.contains("cgroup.freeze") && message.contains("cgroups.enabled"), "{v}");
    let (status, v) = json_call(&s, "POST", "/v1/sessions", &json!({"runtime": "py"}));
    assert_eq!(status, 201, "{v}");
}
