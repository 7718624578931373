//! Wrapped interpreters run what their users run: the payloads of a peer service's own test suite
//! (snekbox's nsjail tests), run with `policies/examples/wrap-python.toml` around the host's
//! `/usr/bin/python3`, each judged by what came out and how the run ended: print, a process
//! pool, a thread pool, numpy (when the host has it), a timeout, an OOM, a fork bomb, a write to
//! the read-only root, a segfault.

mod common;

use common::*;
use std::path::Path;
use stockade::{Report, Status};

const PYTHON: &str = "/usr/bin/python3";

fn wrap_policy() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/wrap-python.toml").display().to_string()
}

fn python(code: &str, extra: &[&str]) -> Report {
    let policy = wrap_policy();
    let mut args = vec!["--policy", policy.as_str()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", PYTHON, "-c", code]);
    run_report(&args).0
}

fn ready() -> bool {
    if !Path::new(PYTHON).exists() {
        eprintln!("skip: no {PYTHON} on this host");
        return false;
    }
    true
}

fn err_of(r: &Report) -> &str {
    r.stderr.text.as_deref().unwrap_or("")
}

#[test]
fn print_pools_and_threads_work() {
    if !ready() {
        return;
    }
    let r = python("print('hello from', 'python')", &[]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "hello from python\n"), "{r:?}");
    // multiprocessing's SemLock lives in /dev/shm.
    let r = python("import multiprocessing as mp\nwith mp.Pool(2) as p: print(p.map(abs, [-1, -2, 3]))", &[]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "[1, 2, 3]\n"), "{}", err_of(&r));
    let r = python(
        "from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(4) as ex: print(sum(ex.map(lambda x: x * x, range(100))))",
        &[],
    );
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "328350\n"), "{}", err_of(&r));
}

#[test]
fn numpy_imports_through_etc_alternatives() {
    if !ready() {
        return;
    }
    let probe = std::process::Command::new(PYTHON).args(["-c", "import numpy"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("skip: numpy is not installed for {PYTHON} (Debian: python3-numpy)");
        return;
    }
    let r = python("import numpy as np\nprint(int(np.arange(10).sum()), np.linalg.inv(np.eye(2)).tolist())", &[]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "45 [[1.0, 0.0], [0.0, 1.0]]\n"), "{}", err_of(&r));
}

#[test]
fn timeout_oom_fork_bomb_read_only_and_segfault_end_as_such() {
    if !ready() {
        return;
    }
    let r = python("while True: pass", &["--timeout", "1s"]);
    assert_eq!((r.status, r.stockade_exit_code), (Status::Timeout, 124), "{r:?}");
    if is_root() {
        // The cgroup's memory limit (512 MiB), not Python's own MemoryError.
        let r = python("x = bytearray(1024 ** 3)\nx[::4096] = b'1' * len(x[::4096])", &[]);
        assert_eq!((r.status, r.stockade_exit_code), (Status::Oom, 137), "{r:?}");
        // As snekbox's test expects: fork fails with EAGAIN (the process limit, 64, or the
        // cgroup's), the program ends with 1, and no more than the limit ever ran.
        let r = python("import os\nwhile 1:\n    os.fork()", &["--timeout", "5s"]);
        assert!(matches!(r.status, Status::ExitedNonzero | Status::PidsLimit), "{r:?}");
        assert_eq!(r.exit_code, Some(1), "{r:?}");
        assert!(err_of(&r).contains("BlockingIOError: [Errno 11] Resource temporarily unavailable"), "{}", err_of(&r));
        assert!(r.pids_peak.is_some_and(|p| p <= 65), "{r:?}");
    } else {
        eprintln!("skip: the OOM and fork-bomb payloads need the cgroup limits, which need root here");
    }
    let r = python("open('/usr/stockade-test', 'w')", &[]);
    assert_eq!(r.status, Status::ExitedNonzero, "{r:?}");
    assert!(err_of(&r).contains("OSError: [Errno 30] Read-only file system"), "{}", err_of(&r));
    let r = python("import ctypes\nctypes.string_at(0)", &[]);
    assert_eq!((r.status, r.signal, r.stockade_exit_code), (Status::Signaled, Some(11), 139), "{r:?}");
}

/// `sysinfo` (what `sysconf(_SC_PHYS_PAGES)` and `os.sysconf` read) shows the run its own
/// figures, not the host's: before, its process count moved with what the host and other runs
/// did (a channel between runs).
#[test]
fn sysinfo_shows_the_run_its_own_figures() {
    if !ready() {
        return;
    }
    let code = "import ctypes, os\n\
        L = ctypes.c_ulong\n\
        class S(ctypes.Structure):\n    _fields_ = [('uptime', ctypes.c_long), ('loads', L * 3), ('total', L), ('free', L), ('shared', L), \
        ('buffer', L), ('tswap', L), ('fswap', L), ('procs', ctypes.c_ushort), ('pad', ctypes.c_ushort), ('th', L), ('fh', L), \
        ('unit', ctypes.c_uint)]\n\
        s = S()\n\
        rc = ctypes.CDLL(None, use_errno=True).sysinfo(ctypes.byref(s))\n\
        print(rc, s.total * s.unit, s.free * s.unit, s.procs, s.uptime, s.loads[0], os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE'))";
    let r = python(code, &[]);
    assert_eq!(r.status, Status::Ok, "{}", err_of(&r));
    let f: Vec<u64> = stdout_of(&r).split_whitespace().filter_map(|x| x.parse().ok()).collect();
    assert_eq!(f.len(), 7, "{}", stdout_of(&r));
    let (rc, total, free, procs, uptime, load, phys) = (f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
    assert_eq!(rc, 0);
    assert!((1..=4).contains(&procs), "the run has a few processes, the host many: {procs}");
    assert!(uptime < 30 && load == 0, "uptime {uptime}, load {load}");
    assert!(free <= total && total == phys, "{total} {free} {phys}");
    let limit = r.enforcement.iter().find(|l| l.layer == "cgroup").is_some_and(|l| l.applied.contains("memory"));
    if limit {
        // The run's memory limit is its memory.
        assert_eq!(total, 536_870_912, "{r:?}");
    }
}

/// Host calls: the jailed program calls its caller's tools through the channel its jail was
/// built with (`import stockade_host`), and the caller's side holds every budget: a tool not
/// declared, past its `max-calls`, a request past its bytes, a tool that fails, one that hangs
/// past its timeout (the run's own wall limit still holds), every call in the report.
#[test]
fn host_calls_reach_the_caller_within_their_budgets() {
    if !ready() {
        return;
    }
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use stockade::{HostCalls, Start, Tool, handover};
    let plan = bootstrap_plan();
    let code = "import stockade_host as h\n\
                print(h.call('add', {'a': 2, 'b': 40}))\n\
                for what in [('add', 1), ('nope', 1), ('fail', 1), ('slow', 1), ('add', 'x' * 5000)]:\n\
                \x20   try:\n\
                \x20       print(h.call(*what))\n\
                \x20   except h.ToolError as e:\n\
                \x20       print('error:', e)\n\
                print('after')";
    let answer = |name: &str, args: &str| -> Result<String, String> {
        match name {
            "add" => {
                let v: serde_json::Value = serde_json::from_str(args).map_err(|e| e.to_string())?;
                Ok((v["a"].as_i64().unwrap_or(0) + v["b"].as_i64().unwrap_or(0)).to_string())
            }
            "fail" => Err("the index is down".into()),
            _ => {
                std::thread::sleep(Duration::from_secs(30));
                Ok("null".into())
            }
        }
    };
    let tools = vec![
        Tool { max_calls: 2, max_request_bytes: 1024, ..Tool::new("add") },
        Tool::new("fail"),
        Tool { timeout: Duration::from_millis(300), ..Tool::new("slow") },
    ];
    let t = Instant::now();
    let host = HostCalls { tools, answer: Arc::new(answer) };
    let f = gated(&plan, Start { stdin: handover::frame(code, &[]), host: Some(host.into()), ..Start::default() });
    let r = &f.report;
    assert!(t.elapsed() < Duration::from_secs(10), "a hanging tool held the run: {:?}", t.elapsed());
    assert_eq!(r.status, Status::Ok, "{}", err_of(r));
    let out = stdout_of(r);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "42", "{out}");
    assert_eq!(lines[1], "0", "{out}");
    assert!(lines[2].contains("no tool \"nope\""), "{out}");
    assert_eq!(lines[3], "error: the index is down", "{out}");
    assert!(lines[4].contains("did not answer within 300 ms"), "{out}");
    assert!(lines[5].contains("max-request-bytes") || lines[5].contains("max-calls"), "{out}");
    assert_eq!(lines[6], "after", "{out}");
    let outcomes: Vec<(&str, &str)> = r.host_calls.iter().map(|c| (c.name.as_str(), c.outcome.as_str())).collect();
    assert_eq!(outcomes[0], ("add", "ok"), "{:?}", r.host_calls);
    assert_eq!(outcomes[2..5], [("nope", "refused"), ("fail", "error"), ("slow", "timeout")], "{:?}", r.host_calls);
    assert_eq!(r.host_calls[0].response_bytes, 2);

    // A run without host calls: a call fails at once, it does not wait.
    let code = "import stockade_host as h\ntry:\n    h.call('add', 1)\nexcept h.ToolError as e:\n    print(e)";
    let f = gated(&plan, Start { stdin: handover::frame(code, &[]), ..Start::default() });
    assert_eq!(stdout_of(&f.report), "this run has no host calls\n", "{}", err_of(&f.report));
}

/// A program that floods its host-call channel is cut off at the first frame past every tool's
/// bytes: nothing past the cap is read, and the run goes on.
#[test]
fn a_flooded_host_call_channel_is_closed_unread() {
    if !ready() {
        return;
    }
    use std::sync::Arc;
    use stockade::{HostCalls, Start, Tool, handover};
    let plan = bootstrap_plan();
    // A frame that says 1 GiB, then 64 MiB of bytes.
    let code = "import os, struct\n\
                try:\n    os.write(3, struct.pack('>I', 1 << 30))\n    for _ in range(1024): os.write(3, b'x' * 65536)\n\
                except OSError as e:\n    print('closed:', e.errno)\n\
                print('after')";
    let host = HostCalls { tools: vec![Tool::new("t")], answer: Arc::new(|_: &str, _: &str| Ok("1".into())) };
    let f = gated(&plan, Start { stdin: handover::frame(code, &[]), host: Some(host.into()), ..Start::default() });
    let r = &f.report;
    assert_eq!(stdout_of(r), "closed: 32\nafter\n", "{}", err_of(r));
    assert_eq!(r.host_calls.len(), 1, "{:?}", r.host_calls);
    assert!(r.host_calls[0].reason.as_deref().unwrap_or("").contains("1073741824 bytes"), "{:?}", r.host_calls);
}

/// The host's python3 under stockade's bootstrap, in a jail with a host-call channel.
fn bootstrap_plan() -> stockade::Plan {
    use stockade::{Job, Plan, Policy, handover};
    let mut policy = Policy::load(Path::new(&wrap_policy())).expect("policy");
    policy.add_empty_dir("/app", "test").expect("app");
    let mut job = Job::new(PYTHON).args(["-c", handover::PYTHON_BOOTSTRAP]).stdin_bytes(Vec::new());
    job.host_calls = true;
    Plan::prepare(&policy, &job).expect("plan")
}

/// One run of a jail of `plan` released ahead of it, started with `start`.
fn gated(plan: &stockade::Plan, start: stockade::Start) -> stockade::Finished {
    use stockade::{Gate, Gated};
    let gate = Gate::new().expect("gate");
    std::thread::scope(|s| {
        let g = &gate;
        let run = s.spawn(move || plan.prestart().expect("prestart").run_gated(g, |_| None).expect("run"));
        gate.open(start);
        let Gated::Ran(f) = run.join().expect("thread") else { panic!("the run did not start") };
        *f
    })
}
