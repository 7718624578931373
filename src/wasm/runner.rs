//! Stage 2 of the jail: `stockade __runner CONFIG`, exec'd inside the jail from a prepared fd.
//!
//! Before Wasmtime exists (no engine thread, no tokio thread yet) the runner installs its own
//! seccomp filter on top of the jail's: no exec at all, no socket of any family, nothing of the
//! jail's denied groups. Then it loads the precompiled artifact (never compiles), gives the
//! guest WASI preview 1 with its args, an allow-listed environment, `/app` and any read-only data
//! directories, and runs `_start` under an epoch deadline (the wall-clock limit), optional fuel,
//! `StoreLimits`-style limits and a bounded Wasm stack. Guest stdout/stderr are this process's,
//! i.e. the supervisor's capped pipes. What happened goes to the supervisor as JSON on fd 3.

use super::engine::{self, EngineKind};
use crate::layers::bpf::{self, Action, Entry};
use crate::layers::seccomp;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wasmtime::{Linker, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// The fd the runner reports on (the supervisor's pipe, kept open across the exec).
pub const SUMMARY_FD: i32 = 3;

/// A directory the guest sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preopen {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// Everything the runner needs, from the supervisor, as one JSON argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfig {
    pub artifact: PathBuf,
    pub fuel: Option<u64>,
    pub timeout_ms: u64,
    pub memory_max_bytes: u64,
    pub table_elements_max: u64,
    pub instances_max: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub preopens: Vec<Preopen>,
}

/// How the guest ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// `_start` returned or the guest called `proc_exit`.
    Exited,
    /// The guest ran out of fuel.
    FuelExhausted,
    /// The epoch deadline (the wall-clock limit) interrupted it.
    Interrupted,
    /// Any other trap (unreachable, stack exhausted, out-of-bounds...).
    Trap,
    /// The runner could not load or start the guest.
    LoadError,
}

/// What the runner reports on fd 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Summary {
    pub outcome: Outcome,
    pub guest_exit_code: Option<i32>,
    /// The trap or load error, one line.
    pub message: Option<String>,
    pub fuel_consumed: Option<u64>,
    /// Largest linear memory the guest had.
    pub memory_peak_bytes: u64,
    /// A memory growth was refused at `wasm.memory-max-bytes`.
    pub memory_limit_hit: bool,
    pub load_ms: f64,
    pub instantiate_ms: f64,
    pub run_ms: f64,
}

/// Limits the guest's store and remembers what it asked for.
struct Limits {
    memory_max: usize,
    table_elements_max: usize,
    instances_max: usize,
    memory_peak: usize,
    memory_limit_hit: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_max {
            self.memory_limit_hit = true;
            return Ok(false);
        }
        self.memory_peak = self.memory_peak.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements_max)
    }

    fn instances(&self) -> usize {
        self.instances_max
    }

    fn tables(&self) -> usize {
        self.instances_max * 4
    }

    fn memories(&self) -> usize {
        self.instances_max
    }
}

struct State {
    wasi: WasiP1Ctx,
    limits: Limits,
}

/// The runner's own filter: the jail's groups, plus every exec and every socket.
fn runner_filter() -> Vec<crate::sys::SockFilter> {
    let mut entries: Vec<Entry> = seccomp::entries(&[], &[])
        .into_iter()
        .filter(|e| {
            ![libc::SYS_execve, libc::SYS_execveat, libc::SYS_socket, libc::SYS_socketpair].contains(&i64::from(e.nr))
        })
        .map(|e| Entry { action: if e.action == Action::Notify { Action::Errno(1) } else { e.action }, ..e })
        .collect();
    for nr in [libc::SYS_execve, libc::SYS_execveat, libc::SYS_socket, libc::SYS_socketpair] {
        entries.push(Entry { nr: u32::try_from(nr).unwrap_or(u32::MAX), rules: vec![], action: Action::Errno(1) });
    }
    bpf::compile(entries)
}

fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// The runner's main: returns the process exit code.
pub fn main(config_json: &str) -> i32 {
    // First, before any thread: no exec, no sockets, from here on.
    if let Err(e) = crate::sys::seccomp_install(&runner_filter(), false) {
        eprintln!("stockade runner: cannot install its seccomp filter: {e}");
        return 125;
    }
    let summary_out = crate::sys::fd_if_open(SUMMARY_FD);
    let (summary, code) = match serde_json::from_str::<RunnerConfig>(config_json) {
        Ok(config) => run(&config),
        Err(e) => (load_error(format!("bad runner configuration: {e}")), 125),
    };
    if let Some(fd) = summary_out {
        let mut f = std::fs::File::from(fd);
        let _ = f.write_all(serde_json::to_string(&summary).unwrap_or_default().as_bytes());
    }
    code
}

fn load_error(message: String) -> Summary {
    Summary {
        outcome: Outcome::LoadError,
        guest_exit_code: None,
        message: Some(message),
        fuel_consumed: None,
        memory_peak_bytes: 0,
        memory_limit_hit: false,
        load_ms: 0.0,
        instantiate_ms: 0.0,
        run_ms: 0.0,
    }
}

/// First line of an error chain, without backtraces.
fn one_line(e: &wasmtime::Error) -> String {
    format!("{e:#}").lines().next().unwrap_or("").to_string()
}

fn run(c: &RunnerConfig) -> (Summary, i32) {
    let kind = if c.fuel.is_some() { EngineKind::EpochFuel } else { EngineKind::Epoch };
    let t0 = Instant::now();
    let engine = match engine::engine(kind) {
        Ok(e) => e,
        Err(e) => return (load_error(one_line(&e)), 125),
    };
    let module = match crate::sys::deserialize_module(&engine, &c.artifact) {
        Ok(m) => m,
        Err(e) => return (load_error(format!("cannot load {}: {}", c.artifact.display(), one_line(&e))), 125),
    };
    let load = t0.elapsed();

    let mut wasi = WasiCtxBuilder::new();
    // Blocking WASI calls (file I/O in /app) run on this thread, not through a tokio
    // blocking pool: no thread hand-off per call, and no extra threads at all.
    wasi.args(&c.argv).envs(&c.env).inherit_stdout().inherit_stderr().allow_blocking_current_thread(true);
    for p in &c.preopens {
        let perms = if p.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        if let Err(e) = wasi.preopened_dir(&p.host, &p.guest, perms) {
            return (load_error(format!("cannot open {} for the guest: {}", p.host.display(), one_line(&e))), 125);
        }
    }
    let limits = Limits {
        memory_max: usize::try_from(c.memory_max_bytes).unwrap_or(usize::MAX),
        table_elements_max: usize::try_from(c.table_elements_max).unwrap_or(usize::MAX),
        instances_max: c.instances_max as usize,
        memory_peak: 0,
        memory_limit_hit: false,
    };
    let mut store = Store::new(&engine, State { wasi: wasi.build_p1(), limits });
    store.limiter(|s| &mut s.limits);
    if let Some(fuel) = c.fuel
        && let Err(e) = store.set_fuel(fuel)
    {
        return (load_error(one_line(&e)), 125);
    }
    store.set_epoch_deadline(1);
    let mut linker: Linker<State> = Linker::new(&engine);
    if let Err(e) = wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s| &mut s.wasi) {
        return (load_error(one_line(&e)), 125);
    }
    // The wall-clock limit, as an epoch tick: the guest traps at its next check.
    let ticker = engine.clone();
    let timeout = Duration::from_millis(c.timeout_ms);
    std::thread::spawn(move || {
        std::thread::sleep(timeout);
        ticker.increment_epoch();
    });

    let t1 = Instant::now();
    let instance = match linker.instantiate(&mut store, &module) {
        Ok(i) => i,
        Err(e) => return (load_error(format!("cannot instantiate: {}", one_line(&e))), 125),
    };
    let start = match instance.get_typed_func::<(), ()>(&mut store, "_start") {
        Ok(f) => f,
        Err(e) => return (load_error(format!("no _start: {}", one_line(&e))), 125),
    };
    let instantiate = t1.elapsed();
    let t2 = Instant::now();
    let result = start.call(&mut store, ());
    let run = t2.elapsed();

    let fuel_consumed = c.fuel.map(|f| f.saturating_sub(store.get_fuel().unwrap_or(0)));
    let (outcome, code, message) = match result {
        Ok(()) => (Outcome::Exited, Some(0), None),
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                (Outcome::Exited, Some(exit.0), None)
            } else if let Some(trap) = e.downcast_ref::<Trap>() {
                match trap {
                    Trap::OutOfFuel => (Outcome::FuelExhausted, None, Some(trap.to_string())),
                    Trap::Interrupt => (Outcome::Interrupted, None, Some(trap.to_string())),
                    other => (Outcome::Trap, None, Some(other.to_string())),
                }
            } else {
                (Outcome::Trap, None, Some(one_line(&e)))
            }
        }
    };
    let limits = &store.data().limits;
    let summary = Summary {
        outcome,
        guest_exit_code: code,
        message,
        fuel_consumed,
        memory_peak_bytes: limits.memory_peak as u64,
        memory_limit_hit: limits.memory_limit_hit,
        load_ms: ms(load),
        instantiate_ms: ms(instantiate),
        run_ms: ms(run),
    };
    let exit = match outcome {
        Outcome::Exited => code.unwrap_or(0),
        Outcome::Interrupted => 124,
        Outcome::FuelExhausted => 137,
        Outcome::Trap => 134,
        Outcome::LoadError => 125,
    };
    (summary, exit)
}
