//! Stage 2 of the jail: `stockade __runner CONFIG`, exec'd inside the jail from a prepared fd.
//!
//! Before Wasmtime exists (no engine thread, no tokio thread yet) the runner installs its own
//! seccomp filter on top of the jail's: no exec at all, no socket of any family, nothing of the
//! jail's denied groups. Then it loads the precompiled artifact — or, for a module not compiled
//! yet, reads the module's bytes from stdin (the very bytes the supervisor hashed), compiles them
//! here, inside the jail and under its limits, and hands the artifact to the supervisor on fd 4
//! before any guest code runs — gives the guest WASI preview 1 with its args, an allow-listed
//! environment, `/app` and any read-only data directories, and runs `_start` under its
//! deadline (the wall-clock limit, which ends this process: see
//! [`deadline_tick`](super::deadline::deadline_tick)), optional fuel, `StoreLimits`-style limits
//! and a bounded Wasm stack. Guest stdout/stderr are this process's, i.e. the supervisor's capped
//! pipes. What happened goes to the supervisor as JSON lines on fd 3 (`{"phase":"compile"}` first
//! when it compiles, so a run killed while compiling says so; the summary last).
//!
//! This file holds the runner's start-up: its filter, its configuration read from its
//! arguments, and which guest's run it starts. The rest is in files of its own: its
//! configuration and account (`shared.rs`), its guest's store (`limits.rs`, `store.rs`), a
//! command module's run (`module.rs`) and the Python guest's (`python.rs`), its deadline
//! (`deadline.rs`) and its end (`exit.rs`).
//!
//! Imports: engine.rs, shared.rs, preload.rs, batch.rs, module.rs, python.rs, deadline.rs,
//! exit.rs, mod.rs; the top of the runner's files: none of them imports it (`mod.rs` declares it).

use super::deadline::wasi_runtime;
use super::engine::{self, EngineKind};
use super::exit::{ended, finish, load_error, summary, summary_out};
use super::shared::one_line;
use crate::layers::bpf::{self, Action};
use crate::layers::seccomp;
use std::time::Instant;

// The runner's configuration and account, at the paths they had (they are `shared.rs`'s).
pub use super::shared::{
    ARTIFACT_FD, COMPILE_MARKER, Entry, LINGER_MAX, Outcome, Preopen, RunnerConfig, SUMMARY_FD, Summary,
};

/// The runner's own filter: the jail's groups, plus every exec and every socket.
fn runner_filter() -> Vec<crate::sys::SockFilter> {
    let mut entries: Vec<bpf::Entry> = seccomp::entries(&[], &[], false)
        .into_iter()
        .filter(|e| {
            ![libc::SYS_execve, libc::SYS_execveat, libc::SYS_socket, libc::SYS_socketpair].contains(&i64::from(e.nr))
        })
        .map(|e| bpf::Entry { action: if e.action == Action::Notify { Action::Errno(1) } else { e.action }, ..e })
        .collect();
    for nr in [libc::SYS_execve, libc::SYS_execveat, libc::SYS_socket, libc::SYS_socketpair] {
        entries.push(bpf::Entry { nr: u32::try_from(nr).unwrap_or(u32::MAX), rules: vec![], action: Action::Errno(1) });
    }
    bpf::compile(entries)
}

/// For a program that builds Wasm jails with itself as their runner (the engine takes
/// `current_exe()`; `stockade` has its `__runner` command): the first call of its `main`. When
/// this process is a jail's runner (exec'd as `PROGRAM __runner CONFIG...`), it runs the guest
/// and returns the runner's exit code, for `main` to return at once; else `None`, having done
/// nothing.
pub fn enter() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != "__runner") {
        return None;
    }
    let config: Option<String> = args.map(|a| a.into_string().ok()).collect();
    let code = match config {
        Some(json) => main(&json),
        None => {
            eprintln!("stockade runner: its configuration is not UTF-8");
            125
        }
    };
    Some(std::process::ExitCode::from(u8::try_from(code).unwrap_or(125)))
}

/// The runner's main: returns the process exit code.
pub fn main(config_json: &str) -> i32 {
    // First, before any thread: the supervisor's word to go (`SIGUSR1`) blocked in every thread
    // (a runner that does not wait never takes it); no exec, no sockets, from here on.
    crate::sys::block_go_signal();
    if let Err(e) = crate::sys::seccomp_install(&runner_filter(), false) {
        eprintln!("stockade runner: cannot install its seccomp filter: {e}");
        return 125;
    }
    if let Some(fd) = crate::sys::take_inherited_fd(SUMMARY_FD) {
        *summary_out() = Some(std::fs::File::from(fd));
    }
    match serde_json::from_str::<RunnerConfig>(config_json) {
        Ok(config) => {
            let (summary, code) = if config.batch { super::batch::serve(&config) } else { run(&config) };
            finish(&summary, code, Some(&config))
        }
        Err(e) => finish(&load_error(format!("bad runner configuration: {e}")), 125, None),
    }
}

/// The runner's main in a jail that runs it as a copy of the process that built it (see
/// [`crate::InProcess`]): `argv` is the exec'd runner's (`stockade __runner CONFIG...`).
pub fn main_in_process(argv: &[std::ffi::CString]) -> i32 {
    let config: String = argv.iter().skip(2).map(|a| a.to_string_lossy()).collect();
    main(&config)
}

/// What this process loaded ahead for `c` (see `preload.rs`), when it is the artifact `c` names.
pub(super) fn preloaded(c: &RunnerConfig) -> Option<std::sync::Arc<super::preload::Loaded>> {
    super::preload::find(&super::preload::key_of(c)?)
}

fn run(c: &RunnerConfig) -> (Summary, i32) {
    let kind = if c.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let t0 = Instant::now();
    let Some(runtime) = wasi_runtime() else {
        return (load_error("cannot start the runner's tokio runtime".into()), 125);
    };
    let _entered = runtime.enter();
    let loaded = preloaded(c);
    let engine = match &loaded {
        Some(l) => l.engine.clone(),
        None => match engine::engine(kind) {
            Ok(e) => e,
            Err(e) => return (load_error(one_line(&e)), 125),
        },
    };
    // A guest that serves turns is instantiated here, with its turns' channels.
    let guest = loaded.as_deref().filter(|_| !c.turns);
    let ran = match &c.entry {
        Entry::Start => super::module::start(&engine, c, guest, t0),
        Entry::PythonRun { .. } if c.turns => super::python::python_turns(&engine, c, guest, t0),
        Entry::PythonRun { code, args } => super::python::run_python(&engine, c, code.as_deref(), args, guest, t0),
    };
    let ran = match ran {
        Ok(r) => r,
        Err(message) => return (load_error(message), 125),
    };
    let fuel_consumed = c.fuel.map(|f| f.saturating_sub(ran.fuel_left.unwrap_or(0)));
    let memory = (ran.memory_peak, ran.memory_limit_hit);
    let mut summary = summary(ended(ran.result), fuel_consumed, memory, &ran.times, c.clock_from_stdin);
    summary.given = (!ran.given.is_empty()).then(|| String::from_utf8_lossy(&ran.given).into_owned());
    let exit = super::guest_end(&summary).exit_code();
    (summary, exit)
}
