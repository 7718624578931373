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
