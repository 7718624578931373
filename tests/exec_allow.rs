//! `process.exec-allow`, from outside: under `wrap-python` (which lists `/usr/bin/python3`) the
//! host's python3 may exec itself, so `multiprocessing.shared_memory.SharedMemory` and a `Pool`
//! with the spawn start method work, while a shell through `subprocess` is refused with EPERM and
//! named in the report; the ELF interpreter run as the program is refused; an exec whose path
//! another thread swaps between the supervisor's check and the kernel's (a listed file, then a
//! shell) never runs the shell (Landlock's execute right holds it); a wrong list is refused,
//! naming the key. Needs `/usr/bin/python3` (skips without it, saying so).

mod common;

use common::*;
use std::path::Path;
use stockade::Status;

const PYTHON: &str = "/usr/bin/python3";

fn wrap_policy() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/wrap-python.toml").display().to_string()
}

fn python(code: &str) -> stockade::Report {
    let policy = wrap_policy();
    run_report(&["--policy", &policy, "--", PYTHON, "-c", code]).0
}

fn ready() -> bool {
    if !Path::new(PYTHON).exists() {
        eprintln!("skip: no {PYTHON} on this host");
        return false;
    }
    true
}

const MULTIPROCESSING: &str = r#"
import multiprocessing as mp, subprocess
from multiprocessing import shared_memory
def square(x):
    return x * x
if __name__ == "__main__":
    s = shared_memory.SharedMemory(create=True, size=16)
    s.buf[0] = 7
    print("shared", s.buf[0])
    s.close()
    s.unlink()
    mp.set_start_method("spawn")
    with mp.Pool(2) as p:
        print("pool", p.map(square, [1, 2, 3]))
    try:
        subprocess.run(["sh", "-c", "echo SHELL RAN"])
    except PermissionError as e:
        print("refused", e.errno)
"#;

#[test]
fn python_execs_itself_for_multiprocessing_and_a_shell_is_refused_and_named() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("mp.py");
    std::fs::write(&script, MULTIPROCESSING).expect("script");
    let s = script.display().to_string();
    let policy = wrap_policy();
    let (r, _) = run_report(&["--policy", &policy, "--ro", &s, "--", PYTHON, &s]);
    assert_eq!(r.status, Status::Ok, "{}", r.to_json());
    assert_eq!(stdout_of(&r), "shared 7\npool [1, 4, 9]\nrefused 1\n", "{}", r.to_json());
    let said = r.error.as_deref().unwrap_or("");
    assert!(said.contains("not in process.exec-allow") && said.contains("/bin/sh"), "{said}");
    let seccomp = r.enforcement.iter().find(|l| l.layer == "seccomp").expect("seccomp");
    assert!(seccomp.applied.contains("process.exec-allow"), "{}", seccomp.applied);
    let landlock = r.enforcement.iter().find(|l| l.layer == "landlock").expect("landlock");
    assert!(landlock.asked.contains("execute only of"), "{}", landlock.asked);
}

#[test]
fn the_elf_interpreter_run_as_the_program_is_refused() {
    if !ready() {
        return;
    }
    let Some(ld) = stockade::layers::exec::elf_interpreter(&std::fs::canonicalize(PYTHON).expect("python3")) else {
        eprintln!("skip: {PYTHON} names no ELF interpreter");
        return;
    };
    let code = format!(
        "import os\ntry:\n    os.execv({:?}, ['ld', '/bin/sh', '-c', 'echo SHELL RAN'])\nexcept PermissionError as e:\n    print('refused', e.errno)",
        ld.display().to_string()
    );
    let r = python(&code);
    assert_eq!(stdout_of(&r), "refused 1\n", "{}", r.to_json());
}

/// One thread execs a buffer that another keeps flipping between python3's path and a shell's:
/// the supervisor may read python3 and let the exec through while the kernel then reads the
/// shell; Landlock's execute right refuses it (EACCES). Each attempt in a child of its own.
const RACE: &str = r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
A, B = b"/usr/bin/python3\0", b"/bin/sh\0"
stop = False
def flip():
    while not stop:
        ctypes.memmove(buf, A, len(A))
        ctypes.memmove(buf, B, len(B))
argv = (ctypes.c_char_p * 4)(b"x", b"-c", b"echo SHELL RAN", None)
for _ in range(150):
    pid = os.fork()
    if pid == 0:
        stop = False
        threading.Thread(target=flip, daemon=True).start()
        for _ in range(200):
            libc.execv(buf, argv)
        os._exit(0)
    os.waitpid(pid, 0)
print("done")
"#;

#[test]
fn an_exec_raced_to_another_file_never_runs_it() {
    if !ready() {
        return;
    }
    let r = python(RACE);
    let out = stdout_of(&r);
    assert!(!out.contains("SHELL RAN"), "the shell ran: {}", r.to_json());
    assert!(out.ends_with("done\n"), "{}", r.to_json());
}

#[test]
fn a_wrong_exec_allow_is_refused_naming_the_key() {
    for (list, says) in [
        ("[\"python3\"]", "process.exec-allow[0]"),
        ("[\"/usr/bin/../bin/sh\"]", "process.exec-allow[0]"),
        ("[\"/bin/true\", \"/bin/true\"]", "process.exec-allow[1]"),
    ] {
        let f = policy_file(&format!("version = 1\n[process]\nexec-allow = {list}\n"));
        let out = stockade().args(["policy", "check"]).arg(f.path()).output().expect("stockade");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{list}: {err}");
    }
    let f = policy_file("version = 1\n[process]\nexec-allow = [\"/bin/true\"]\n[seccomp]\nallow = [\"exec\"]\n");
    let out = stockade().args(["policy", "check"]).arg(f.path()).output().expect("stockade");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already lets the program exec anything"));
    // A file that is not there refuses the run, naming its entry; nothing runs.
    let f = policy_file("version = 1\n[process]\nexec-allow = [\"/nonexistent/python\"]\n");
    let (r, _) = run_report(&["--policy", &path_of(&f), "--", "/bin/true"]);
    assert_eq!(r.status, Status::SetupFailed, "{}", r.to_json());
    assert!(r.error.as_deref().unwrap_or("").contains("process.exec-allow[0]"), "{}", r.to_json());
}
