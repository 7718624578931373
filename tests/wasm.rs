//! The embedded Wasm runner, observed from outside: what must work inside, what must not, and
//! the guests' integrity. Needs the guests installed where `stockade` looks for them
//! (`./setup.sh` does; or `stockade guest install --dir DIR` and `STOCKADE_GUEST_DIR=DIR`, as
//! .ci/run does); skips otherwise.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use stockade::{Report, Status};

fn guest_dir() -> Option<PathBuf> {
    let d = stockade::wasm::guests::default_dir();
    if d.join("python314.wasm").exists() && d.join("quickjs.wasm").exists() {
        return Some(d);
    }
    eprintln!(
        "skip: guests not installed in {} (./setup.sh, or stockade guest install --dir DIR and STOCKADE_GUEST_DIR=DIR)",
        d.display()
    );
    None
}

fn wasm(dir: &std::path::Path, args: &[&str]) -> (Report, std::process::Output) {
    let d = dir.display().to_string();
    let mut all = vec!["--guest-dir", d.as_str()];
    all.extend_from_slice(args);
    run_report(&all)
}

#[test]
fn python_runs_what_code_execution_needs() {
    let Some(g) = guest_dir() else { return };
    let code = "import json, sqlite3, re\n\
                db = sqlite3.connect(':memory:')\n\
                print(db.execute('select 6*7').fetchone()[0], json.dumps({'a': [1]}), re.sub('b', 'c', 'abc'))\n\
                open('/app/out.txt', 'w').write('hello')\n\
                print(open('/app/out.txt').read())";
    let (r, _) = wasm(&g, &["--python", code]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "42 {\"a\": [1]} acc\nhello\n"), "{r:?}");
    assert_eq!(r.guest_exit_code, Some(0));
    let t = r.wasm_time.expect("times reported");
    assert!(t.load_ms > 0.0 && t.run_ms > 0.0, "{t:?}");
    let (r, _) = wasm(&g, &["--python", "print(sum(range(10)))"]);
    assert_eq!(stdout_of(&r), "45\n");
}

/// The runner ends by closing its fds with its summary given: the run is reported then, the jail
/// taken down and reaped after; what the report says is what the process's end would have said.
#[test]
fn a_run_ends_when_its_runner_says_so_and_is_reported_whole() {
    let Some(g) = guest_dir() else { return };
    // A marker of this run's own: the other tests' runners may be alive beside it.
    let m = marker("runner-ends");
    let code = format!("import sys\n# {m}\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)");
    let (r, out) = wasm(&g, &["--python", &code]);
    assert_eq!(
        (r.status, r.exit_code, r.guest_exit_code, out.status.code()),
        (Status::ExitedNonzero, Some(3), Some(3), Some(3)),
        "{r:?}"
    );
    assert_eq!((stdout_of(&r), r.stderr.text.as_deref()), ("out\n", Some("err\n")), "{r:?}");
    // The runner's own peak (it was not reaped before the report), and no leftover said.
    assert!(r.max_rss_bytes > 1 << 20, "{r:?}");
    assert_eq!(r.error, None, "{r:?}");
    assert!(
        wait_for(Duration::from_millis(200), || processes_with(&m).is_empty()),
        "a runner outlived its run: {:?}",
        processes_with(&m)
    );
}

#[test]
fn a_workspace_keeps_files_between_runs_and_the_host_sees_them() {
    let Some(g) = guest_dir() else { return };
    let ws = shared_dir();
    let w = ws.path().display().to_string();
    let (r, _) = wasm(&g, &["--workspace", &w, "--python", "open('/app/state.txt', 'w').write('run one')"]);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(std::fs::read_to_string(ws.path().join("state.txt")).expect("on the host"), "run one");
    let (r, _) = wasm(&g, &["--workspace", &w, "--python", "print(open('/app/state.txt').read())"]);
    assert_eq!(stdout_of(&r), "run one\n");
    // A fresh workspace holds nothing of stockade's, and is gone afterwards.
    let (r, _) = wasm(&g, &["--python", "import os; print(os.listdir('/app'))"]);
    assert_eq!(stdout_of(&r), "[]\n");
}

#[test]
fn javascript_logs_and_uses_std_files_in_app() {
    let Some(g) = guest_dir() else { return };
    let code = "let f = std.open('/app/j.txt', 'w'); f.puts('from js'); f.close(); console.log(std.loadFile('/app/j.txt'), 6 * 7);";
    let (r, _) = wasm(&g, &["--js", code]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "from js 42\n"), "{r:?}");
}

#[test]
fn python_cannot_reach_the_host() {
    let Some(g) = guest_dir() else { return };
    let ws = shared_dir();
    let w = ws.path().display().to_string();
    // A link planted in the workspace on the host side, pointing out of it.
    std::os::unix::fs::symlink("/etc", ws.path().join("planted")).expect("symlink");
    let outside = shared_dir();
    let escape = outside.path().join("escaped");
    let code = format!(
        "import os\n\
         for p in ['/etc/passwd', '/app/../etc/passwd', '/app/planted/passwd']:\n\
         \x20   try: print('READ', len(open(p).read()))\n\
         \x20   except OSError as e: print('denied', type(e).__name__)\n\
         for p in ['/app/../escaped', '{e}', '/app/planted/x', '/python/os.py']:\n\
         \x20   try: open(p, 'w').write('x'); print('WROTE', p)\n\
         \x20   except OSError as e: print('denied', type(e).__name__)\n\
         import socket, threading, subprocess\n\
         for name, f in [('socket', lambda: socket.create_connection(('127.0.0.1', 1))),\n\
         \x20              ('thread', lambda: threading.Thread(target=print).start()),\n\
         \x20              ('subprocess', lambda: subprocess.run(['/bin/sh', '-c', 'true']))]:\n\
         \x20   try: f(); print('DID', name)\n\
         \x20   except Exception as e: print('denied', name)",
        e = escape.display()
    );
    let (r, _) = wasm(&g, &["--workspace", &w, "--python", &code]);
    let out = stdout_of(&r);
    assert!(!out.contains("READ") && !out.contains("WROTE") && !out.contains("DID"), "{out}");
    assert_eq!(out.matches("denied").count(), 10, "{out}");
    assert!(!escape.exists() && !outside.path().join("x").exists());
    assert!(!std::path::Path::new("/etc/x").exists());
    // The standard library the guest imports from is the pinned one, untouched.
    let lib = std::fs::read_dir(&g)
        .expect("ls")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python314-lib-"));
    let os_py = std::fs::read_to_string(lib.expect("extracted library").path().join("os.py")).expect("os.py");
    assert!(os_py.len() > 1000 && os_py.contains("def makedirs"), "os.py was changed");
}

#[test]
fn spinning_and_sleeping_guests_end_at_the_wall_clock_limit() {
    let Some(g) = guest_dir() else { return };
    for code in ["while True: pass", "import time; time.sleep(20); print('slept')"] {
        let start = Instant::now();
        let (r, out) = wasm(&g, &["--timeout", "1s", "--python", code]);
        assert_eq!(r.status, Status::Timeout, "{code}: {r:?}");
        assert_eq!(out.status.code(), Some(124));
        assert!(start.elapsed() < Duration::from_secs(3), "{code}: took {:?}", start.elapsed());
        assert!(!stdout_of(&r).contains("slept"));
    }
}

#[test]
fn memory_beyond_the_wasm_limit_is_refused() {
    let Some(g) = guest_dir() else { return };
    let (r, _) = wasm(&g, &["--python", "x = bytearray(2**30)"]);
    assert_eq!(r.status, Status::WasmMemoryLimit, "{r:?}");
    assert!(r.stderr.text.as_deref().is_some_and(|t| t.contains("MemoryError")), "{r:?}");
    assert!(r.wasm_memory_peak_bytes.is_some_and(|p| p <= 256 << 20), "{r:?}");
    // 2**31 does not even fit a wasm32 size: refused before any memory is asked for.
    let (r, _) = wasm(&g, &["--python", "x = bytearray(2**31)"]);
    assert_eq!(r.status, Status::ExitedNonzero, "{r:?}");
    assert!(r.wasm_memory_peak_bytes.is_some_and(|p| p < 64 << 20), "{r:?}");
}

#[test]
fn an_output_flood_is_capped_and_never_lands_on_the_host_disk() {
    let Some(g) = guest_dir() else { return };
    let tmp_before = std::fs::read_dir(std::env::temp_dir()).expect("tmp").count();
    let out = stockade()
        .args([
            "run",
            "--guest-dir",
            &g.display().to_string(),
            "--python",
            "import sys\nfor _ in range(200): sys.stdout.write('x' * 1000000)",
        ])
        .output()
        .expect("run");
    // The run ends at its cap (output.over-cap = "end"): 137, the cap's worth passed on.
    assert_eq!(out.status.code(), Some(137), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout.len(), 1 << 20, "more than the cap reached the caller");
    let t = std::time::Instant::now();
    let (r, _) = wasm(&g, &["--python", "import sys\nfor _ in range(200): sys.stdout.write('x' * 1000000)"]);
    assert_eq!(r.status, Status::OutputLimit, "{r:?}");
    assert!(r.stdout.truncated && r.stdout.bytes > 1 << 20 && r.stdout.bytes < 200_000_000, "{:?}", r.stdout);
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(std::fs::read_dir(std::env::temp_dir()).expect("tmp").count() <= tmp_before + 2);
}

#[test]
fn a_trapping_module_reports_the_trap_without_host_backtraces() {
    let Some(g) = guest_dir() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let module = dir.path().join("trap.wasm");
    let bytes = wat::parse_str(
        r#"(module (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
                   (memory (export "memory") 1)
                   (func (export "_start") unreachable))"#,
    )
    .expect("wat");
    std::fs::write(&module, bytes).expect("write");
    let m = module.display().to_string();
    let out = stockade()
        .env("RUST_BACKTRACE", "1")
        .args(["run", "--guest-dir", &g.display().to_string(), "--report", "-", "--wasm", &m])
        .output()
        .expect("run");
    let r = Report::from_json(&String::from_utf8_lossy(&out.stdout)).expect("report");
    assert_eq!(r.status, Status::WasmTrap, "{r:?}");
    assert!(r.error.as_deref().is_some_and(|e| e.contains("unreachable")), "{r:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("{stderr}{}", r.stderr.text.unwrap_or_default());
    assert!(!all.contains("stack backtrace") && !all.contains("rust_begin_unwind"), "{all}");
    // The same module with fuel: it never burns any, and a proc_exit code comes back as is.
    let exit = dir.path().join("exit.wasm");
    let bytes = wat::parse_str(
        r#"(module (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
                   (memory (export "memory") 1)
                   (func (export "_start") i32.const 7 call $exit))"#,
    )
    .expect("wat");
    std::fs::write(&exit, bytes).expect("write");
    let (r, out) = wasm(&g, &["--wasm", &exit.display().to_string()]);
    assert_eq!((r.status, r.guest_exit_code, out.status.code()), (Status::ExitedNonzero, Some(7), Some(7)), "{r:?}");
}

#[test]
fn fuel_bounds_a_spinner() {
    let Some(g) = guest_dir() else { return };
    let p = policy_file("version = 1\n[wasm]\nfuel = 200000000\n");
    let (r, _) = wasm(&g, &["--policy", &path_of(&p), "--python", "while True: pass"]);
    assert_eq!(r.status, Status::FuelExhausted, "{r:?}");
    assert_eq!(r.fuel_consumed, Some(200_000_000));
}

#[test]
fn a_tampered_guest_or_artifact_is_refused() {
    let Some(g) = guest_dir() else { return };
    let copy = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::copy(g.join("quickjs.wasm"), copy.path().join("quickjs.wasm")).expect("copy");
    let mut bytes = std::fs::read(copy.path().join("quickjs.wasm")).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(copy.path().join("quickjs.wasm"), bytes).expect("write");
    let c = copy.path().display().to_string();
    let out = stockade().args(["guest", "verify", "--dir", &c]).output().expect("verify");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("expected f9742952"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And the run refuses it rather than compiling it.
    let out = stockade().args(["run", "--guest-dir", &c, "--js", "console.log(1)"]).output().expect("run");
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing it"), "{}", String::from_utf8_lossy(&out.stderr));
    // An artifact anyone could have replaced is not loaded.
    let artifact = std::fs::read_dir(&g)
        .expect("ls")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.to_string_lossy();
            // The artifact of a run without fuel (the fuel-metered one sits beside it).
            name.contains("quickjs.wasmtime") && !name.contains("fuel") && p.extension().is_some_and(|x| x == "cwasm")
        })
        .expect("quickjs artifact");
    let planted = copy.path().join(artifact.file_name().expect("name"));
    std::fs::copy(&artifact, &planted).expect("copy");
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = stockade().args(["run", "--guest-dir", &c, "--js", "console.log(1)"]).output().expect("run");
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("writable by group or others"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every Python run is a fresh instance of the install's snapshot: what the snapshot fixed at
/// build time and a run must not share with another is drawn again (the `random` module's
/// state) or read again (the environment the policy sets), and nothing one run does is seen by
/// the next.
#[test]
fn each_python_run_starts_from_the_snapshot_afresh() {
    let Some(g) = guest_dir() else { return };
    let p = policy_file("version = 1\n[environment]\nset = { GREETING = \"hello\" }\n");
    let code = "import os, random, sys\n\
                print(random.random(), os.environ.get('GREETING'), getattr(sys, 'left_behind', None))\n\
                sys.left_behind = 'by the first run'";
    let outputs: Vec<String> = (0..2)
        .map(|_| {
            let (r, _) = wasm(&g, &["--policy", &path_of(&p), "--python", code]);
            assert_eq!(r.status, Status::Ok, "{r:?}");
            stdout_of(&r).to_string()
        })
        .collect();
    let fields: Vec<Vec<&str>> = outputs.iter().map(|o| o.split_whitespace().collect()).collect();
    assert_eq!((fields[0][1], fields[0][2]), ("hello", "None"), "{outputs:?}");
    assert_eq!((fields[1][1], fields[1][2]), ("hello", "None"), "{outputs:?}");
    assert_ne!(fields[0][0], fields[1][0], "two runs drew the same random numbers: {outputs:?}");
}

/// The snapshot has loaded the standard library's data modules (so a run does not pay for them)
/// and none that reaches outside the interpreter (under a module list, a loaded module would be
/// within reach); what one run does to a loaded module is not the next run's.
#[test]
fn the_snapshot_holds_the_data_modules_and_no_run_changes_them_for_the_next() {
    let Some(g) = guest_dir() else { return };
    let code = "import json, sys\n\
                data = ('json', 'csv', 'decimal', 'statistics', 'datetime', 'fractions', 'hashlib')\n\
                reach = ('socket', 'subprocess', 'shutil', 'tempfile', 'ctypes', 'ssl', 'select', \
                         'urllib.request', 'http.client')\n\
                print(all(m in sys.modules for m in data), [m for m in reach if m in sys.modules], \
                      getattr(json, 'left_behind', None), json.dumps({'a': 1}))\n\
                json.left_behind = 'by the first run'\n\
                json.dumps = None";
    for _ in 0..2 {
        let (r, _) = wasm(&g, &["--python", code]);
        assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "True [] None {\"a\": 1}\n"), "{r:?}");
    }
}

/// Without `/proc` in the jail (`filesystem.proc = "none"`) the runner still loads the Python
/// guest it was given (it maps the artifact through its descriptor's `/proc` entry when there
/// is one): it used to fail to load it.
#[test]
fn python_runs_in_a_jail_without_proc() {
    let Some(g) = guest_dir() else { return };
    let p = policy_file("version = 1\n[filesystem]\nproc = \"none\"\n");
    let (r, _) = wasm(&g, &["--policy", &path_of(&p), "--python", "import os; print(os.path.exists('/proc'), 6 * 7)"]);
    assert_eq!((r.status, stdout_of(&r)), (Status::Ok, "False 42\n"), "{r:?}");
}

/// `wasm.python-modules` is a boundary, not a convention: under the shipped example, every listed
/// module imports, and a module left out is not in the guest's view at all — not through
/// `import`, `importlib`, a file path, `sys.path` or a replaced `__import__`. A name the library
/// lacks and a program on the host are refused, each naming the key.
#[test]
fn a_python_module_list_is_a_boundary() {
    let Some(g) = guest_dir() else { return };
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/examples/python-allowlist.toml");
    let listed = stockade::Policy::load(std::path::Path::new(example))
        .expect("the example policy")
        .wasm
        .python_modules
        .expect("a module list");
    let code = format!(
        "import builtins, importlib, importlib.machinery, os, sys, types\n\
         for m in {listed:?}:\n\
         \x20   importlib.import_module(m)\n\
         print('listed ok')\n\
         sys.path.insert(0, '/')\n\
         builtins.__import__ = __import__\n\
         for m in ['socket', 'subprocess', 'urllib.request', 'http.client', 'ctypes', 'shutil']:\n\
         \x20   sys.modules.pop(m, None)\n\
         \x20   try: importlib.import_module(m); print('IMPORTED', m)\n\
         \x20   except ModuleNotFoundError: print('absent', m)\n\
         loader = importlib.machinery.SourceFileLoader('s', '/python/socket.py')\n\
         try: loader.exec_module(types.ModuleType('s')); print('LOADED')\n\
         except OSError: print('absent file')\n\
         print(sorted(n for n in os.listdir('/python') if n.startswith(('socket', 'subprocess'))))"
    );
    let (r, _) = wasm(&g, &["--policy", example, "--python", &code]);
    let out = stdout_of(&r);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(out.starts_with("listed ok\n") && !out.contains("IMPORTED") && !out.contains("LOADED"), "{out}");
    assert_eq!(out.matches("absent").count(), 7, "{out}");
    assert!(out.ends_with("[]\n"), "{out}");
    // The same code under the default policy sees the whole library.
    let (r, _) = wasm(&g, &["--python", "import socket, subprocess; print('whole')"]);
    assert_eq!(stdout_of(&r), "whole\n", "{r:?}");

    let unknown = policy_file("version = 1\n[wasm]\npython-modules = [\"json\", \"no_such_module\"]\n");
    let out = stockade().args(["run", "--policy", &path_of(&unknown), "--python", "print(1)"]).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(125) && err.contains("wasm.python-modules") && err.contains("no_such_module"),
        "{err}"
    );
    let bad = policy_file("version = 1\n[wasm]\npython-modules = [\"json; import os\"]\n");
    let out = stockade().args(["policy", "check", &path_of(&bad)]).output().expect("check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("wasm.python-modules") && err.contains("not a module name"), "{err}");
    let out = stockade().args(["run", "--policy", example, "--", "/bin/true"]).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(125) && err.contains("wasm.python-modules") && err.contains("on the host"),
        "{err}"
    );
}

/// The Python guest is refused when its component is not what its install recorded, and a run
/// never compiles one it cannot verify.
#[test]
fn a_tampered_python_guest_is_refused() {
    let Some(g) = guest_dir() else { return };
    let copy = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for name in ["python314.wasm", "python314.json"] {
        std::fs::copy(g.join(name), copy.path().join(name)).expect("copy");
    }
    let lib = std::fs::read_dir(&g)
        .expect("ls")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python314-lib-"))
        .expect("the standard library");
    let copied = std::process::Command::new("cp").arg("-a").arg(lib.path()).arg(copy.path()).status().expect("cp");
    assert!(copied.success());
    let component = copy.path().join("python314.wasm");
    let mut bytes = std::fs::read(&component).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&component, bytes).expect("write");
    let c = copy.path().display().to_string();
    let out = stockade().args(["guest", "verify", "--dir", &c]).output().expect("verify");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() != Some(0) && err.contains("python314.wasm") && err.contains("refusing it"), "{err}");
    let out = stockade().args(["run", "--guest-dir", &c, "--python", "print(1)"]).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(125) && err.contains("refusing it"), "{err}");
    let artifacts = std::fs::read_dir(copy.path())
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cwasm"));
    assert_eq!(artifacts.count(), 0, "an artifact was compiled from the tampered component");
    // A guest built from another stockade's guest program (its entry point, its `run`) is not
    // this stockade's to run: refused, naming the fix, whatever its artifacts.
    std::fs::copy(g.join("python314.wasm"), &component).expect("copy");
    let manifest = copy.path().join("python314.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let mut recorded: serde_json::Value = serde_json::from_str(&text).expect("json");
    recorded["inputs"]["program-sha256"] = serde_json::json!("0".repeat(64));
    std::fs::write(&manifest, recorded.to_string()).expect("write");
    let out = stockade().args(["run", "--guest-dir", &c, "--python", "print(1)"]).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(125) && err.contains("another stockade's guest program"), "{err}");
}

/// A guest started ahead of its run: the interpreter loads and waits for its code, framed on
/// stdin; its run behaves as the same code run cold (`--python`, `--js`): output, arguments,
/// stdin, exit codes and tracebacks; its clock starts at the hand-over.
#[test]
fn a_waiting_interpreter_runs_the_code_it_is_handed_as_a_cold_one_would() {
    use stockade::wasm::{GuestCode, WasmJob};
    use stockade::{Gate, Gated, Policy, Start, handover};
    let Some(g) = guest_dir() else { return };
    let cases: [(bool, &str, &[&str], &str); 12] = [
        (true, "print(1)", &[], ""),
        (true, "import sys; print(sys.argv[1:], sys.stdin.read())", &["a", "é b"], "in\nput"),
        (true, "x = 1\n1/0", &[], ""),
        (true, "def f(:", &[], ""),
        (true, "import sys; sys.exit(7)", &[], ""),
        (true, "raise SystemExit('bye')", &[], ""),
        (true, "import sys; sys.exit(-1)", &[], ""),
        (true, "import atexit; atexit.register(lambda: print('at exit'))\nprint('body')", &[], ""),
        (false, "console.log(1 + 1)", &[], ""),
        (false, "throw new Error('boom')", &[], ""),
        (false, "function f() { null.x }\nf()", &[], ""),
        (false, "console.log(JSON.stringify(scriptArgs.slice(1)))", &["a", "b c"], ""),
    ];
    for (python, code, args, stdin) in cases {
        let waiting = if python { GuestCode::PythonFromStdin } else { GuestCode::JsFromStdin };
        let mut job = WasmJob::new(waiting, stockade_bin());
        job.guest_dir = Some(g.clone());
        let plan = stockade::wasm::prepare(&Policy::builtin(), &job).expect("plan");
        let gate = Gate::new().expect("gate");
        let warm = std::thread::scope(|s| {
            // The wait is counted from the release, which follows the jail's build: the sleep
            // starts once the jail is built (a loaded host builds it slower).
            let (built_tx, built) = std::sync::mpsc::channel();
            let (plan, gate) = (&plan, &gate);
            let run = s.spawn(move || {
                let prepared = plan.prestart().expect("prestart");
                let _ = built_tx.send(());
                prepared.run_gated(gate).expect("run")
            });
            built.recv().expect("built");
            std::thread::sleep(Duration::from_millis(if python { 400 } else { 100 }));
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let mut bytes = handover::frame(code, &args);
            bytes.extend_from_slice(stdin.as_bytes());
            gate.open(Start { stdin: bytes, ..Start::default() });
            match run.join().expect("thread") {
                Gated::Ran(f) => f.report,
                Gated::NotStarted(why) => panic!("{code}: did not start: {why}"),
            }
        });
        let flag = if python { "--python" } else { "--js" };
        let d = g.display().to_string();
        let mut cold_args = vec!["--guest-dir", d.as_str(), flag, code];
        cold_args.extend_from_slice(args);
        // The CLI's guests get no stdin: stdin is compared through the warm run only.
        let (cold, _) = run_report(&cold_args);
        if stdin.is_empty() {
            assert_eq!(warm.stdout.text, cold.stdout.text, "{code}: stdout");
        } else {
            assert_eq!(stdout_of(&warm), "['a', 'é b'] in\nput\n", "{code}");
        }
        assert_eq!(warm.stderr.text, cold.stderr.text, "{code}: stderr");
        assert_eq!((warm.status, warm.exit_code), (cold.status, cold.exit_code), "{code}");
        assert_eq!(warm.guest_exit_code, cold.guest_exit_code, "{code}");
        let w = warm.warm_start.expect("warm-start");
        assert!(w.waited_ms >= 90.0, "{w:?}");
        // (Python has no start-up left to move ahead of the hand-over: its guest is a snapshot
        // of an interpreter already started, instantiated fresh for each run, warm or cold.)
    }
}

/// A network attempt from Wasm Python says that the network is off (the WASI build has no
/// resolver: it used to fail with `AttributeError: module '_socket' has no attribute
/// 'getaddrinfo'`), and the host sees no connection.
#[test]
fn a_python_network_attempt_says_the_network_is_off() {
    let Some(g) = guest_dir() else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let code = format!(
        "import socket, urllib.request\n\
         for f in (lambda: socket.create_connection(('127.0.0.1', {port}), 1), lambda: urllib.request.urlopen('http://example.com', timeout=1)):\n\
         \x20   try:\n\
         \x20       f()\n\
         \x20   except Exception as e:\n\
         \x20       print(type(e).__name__, e)"
    );
    let (r, out) = wasm(&g, &["--python", &code]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(r.status, Status::Ok, "{r:?} {stdout}");
    assert_eq!(stdout.matches("the network is off in this stockade jail").count(), 2, "{stdout}");
    assert!(!stdout.contains("AttributeError"), "{stdout}");
    assert!(listener.accept().is_err(), "the host got a connection");
}

/// The runner's own wall, its deadline, ends a spinning guest, and one waiting in a host call,
/// with no jail to kill it: the runner alone (`stockade __runner`), which nobody else stops, ends
/// itself at its deadline as interrupted (124), and its account on fd 3 says so, with the guest's
/// memory. A cold guest's deadline counts from the start; a guest waiting for its code counts from
/// the code's arrival, however long it waited.
#[test]
fn the_runner_alone_ends_a_spinner_at_its_own_deadline() {
    use std::io::Write;
    use stockade::wasm::{GuestCode, WasmJob};
    let Some(g) = guest_dir() else { return };
    let mut policy = stockade::Policy::builtin();
    policy.set_wall_timeout(Duration::from_millis(800), "--timeout").expect("timeout");
    let app = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let account = outside.path().join("account");
    let mut metered = policy.clone();
    metered.wasm.fuel = Some(u64::MAX / 4);
    let runner = |code: GuestCode, policy: &stockade::Policy| {
        let mut job = WasmJob::new(code, stockade_bin());
        job.guest_dir = Some(g.clone());
        let config = stockade::wasm::runner_config(policy, &job, app.path()).expect("config");
        // The runner's account goes to fd 3: here a file.
        let mut c = std::process::Command::new("/bin/sh");
        c.args(["-c", "exec \"$0\" __runner \"$1\" 3>\"$2\""]).arg(stockade_bin());
        c.arg(serde_json::to_string(&config).expect("json")).arg(&account);
        c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::null());
        c.spawn().expect("runner")
    };
    // The account of an interrupted guest, with the memory its instance had.
    let interrupted = |what: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(&account).expect("the runner's account");
        let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or("")).expect("json");
        assert_eq!(summary["outcome"], "interrupted", "{what}: {summary}");
        assert!(summary["memory-peak-bytes"].as_u64().is_some_and(|b| b >= 65536), "{what}: {summary}");
        let ms = |k: &str| summary[k].as_f64().unwrap_or(0.0);
        assert!(ms("instantiate-ms") + ms("run-ms") >= 700.0, "{what}: {summary}");
        summary
    };
    let ends = |child: &mut std::process::Child, within: Duration| {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(status) = child.try_wait().expect("wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    };
    // A spinner, and a guest asleep in a host call (where no check in its code could stop it),
    // each with and without fuel. A metered spinner traps at its epoch check, and its fuel is
    // counted; a metered sleeper has no check to reach and is ended all the same.
    let sleep = "import time\ntime.sleep(30)";
    for (code, fuel) in [("while True: pass", false), (sleep, false), ("while True: pass", true), (sleep, true)] {
        let start = Instant::now();
        let mut cold = runner(GuestCode::Python(code.into()), if fuel { &metered } else { &policy });
        let status = ends(&mut cold, Duration::from_secs(10)).expect("a cold guest ends by its own deadline");
        assert_eq!(status.code(), Some(124), "cold {code:?}, fuel {fuel}: {status:?}");
        assert!(start.elapsed() >= Duration::from_millis(800), "cold {code:?}: ended early, {:?}", start.elapsed());
        let summary = interrupted(code);
        let counted = summary["fuel-consumed"].as_u64().is_some_and(|f| f > 0);
        assert_eq!(counted, fuel && code != sleep, "fuel {fuel}, {code:?}: {summary}");
    }

    for python in [false, true] {
        let mut waiting = runner(if python { GuestCode::PythonFromStdin } else { GuestCode::JsFromStdin }, &policy);
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(waiting.try_wait().expect("wait"), None, "a waiting guest's clock starts with its code");
        // One thread beside the guest's: the runner's runtime's worker, which ticks the deadline
        // (no thread for the tick, no runtime of wasmtime-wasi's own with a worker per CPU).
        let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", waiting.id()))
            .expect("tasks")
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .collect();
        assert_eq!(threads.len(), 2, "{threads:?}");
        assert!(threads.iter().any(|t| t == "stockade-wasi"), "{threads:?}");
        // Handed over on a stdin kept open, as a live interpreter's turns are: the guest reads
        // its code at once, and its clock must start all the same.
        let handed = Instant::now();
        let code = if python { "while True: pass" } else { "while (true) {}" };
        let mut stdin = waiting.stdin.take().expect("stdin");
        stdin.write_all(&stockade::handover::frame(code, &[])).expect("hand the code over");
        let status = ends(&mut waiting, Duration::from_secs(10)).expect("a waiting spinner ends by its own deadline");
        drop(stdin);
        assert_eq!(status.code(), Some(124), "waiting, python {python}: {status:?}");
        let after = handed.elapsed();
        assert!(after >= Duration::from_millis(700), "waiting, python {python}: ended {after:?} after its code");
        interrupted(if python { "waiting python" } else { "waiting javascript" });
    }
}
