//! Stage 2 of the jail: `stockade __runner CONFIG`, exec'd inside the jail from a prepared fd.
//!
//! Before Wasmtime exists (no engine thread, no tokio thread yet) the runner installs its own
//! seccomp filter on top of the jail's: no exec at all, no socket of any family, nothing of the
//! jail's denied groups. Then it loads the precompiled artifact — or, for a module not compiled
//! yet, reads the module's bytes from stdin (the very bytes the supervisor hashed), compiles them
//! here, inside the jail and under its limits, and hands the artifact to the supervisor on fd 4
//! before any guest code runs — gives the guest WASI preview 1 with its args, an allow-listed
//! environment, `/app` and any read-only data directories, and runs `_start` under its
//! deadline (the wall-clock limit, which ends this process: see [`deadline_tick`]), optional
//! fuel, `StoreLimits`-style limits and a bounded Wasm stack. Guest stdout/stderr are this
//! process's, i.e. the supervisor's capped pipes. What happened goes to the supervisor as JSON
//! lines on fd 3 (`{"phase":"compile"}` first when it compiles, so a run killed while compiling
//! says so; the summary last).

use super::engine::{self, EngineKind};
use crate::layers::bpf::{self, Action};
use crate::layers::seccomp;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use wasmtime::{Linker, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

/// The fd the runner reports on (the supervisor's pipe, kept open across the exec).
pub const SUMMARY_FD: i32 = 3;
/// The fd a module compiled here goes back to the supervisor on (serialized, for its cache).
pub const ARTIFACT_FD: i32 = 4;
/// What the runner writes on fd 3 before it starts compiling.
pub const COMPILE_MARKER: &str = "{\"phase\":\"compile\"}";

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
    /// The precompiled artifact to load; `None`: compile the module read from stdin.
    pub artifact: Option<PathBuf>,
    /// The artifact's device and inode when the supervisor checked it: the runner loads that
    /// file and no other.
    #[serde(default)]
    pub artifact_id: (u64, u64),
    /// With no artifact: the module's size in bytes, all of which stdin holds.
    pub module_bytes: Option<u64>,
    pub fuel: Option<u64>,
    pub timeout_ms: u64,
    pub memory_max_bytes: u64,
    pub table_elements_max: u64,
    pub instances_max: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub preopens: Vec<Preopen>,
    /// The guest reads the runner's stdin (after the module's bytes, when it compiles one);
    /// `false`: its stdin is empty.
    #[serde(default)]
    pub guest_stdin: bool,
    /// The wall-clock limit counts from the first byte on stdin, not from the start: a guest
    /// started ahead of its run (a warm interpreter) waits for its code there.
    #[serde(default)]
    pub clock_from_stdin: bool,
    /// What of the guest runs.
    #[serde(default)]
    pub entry: Entry,
    /// The jail's host-call channel, as the runner's fds (requests, answers): the Python guest's
    /// `stockade_host` calls through it.
    #[serde(default)]
    pub host_calls: Option<(i32, i32)>,
    /// `stockade guest install` only, outside any jail: the Python guest's run writes to this file
    /// the list of the pages of its linear memory it wrote and those it only read (see `pages.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_pages: Option<PathBuf>,
    /// In a jail, as its init: once its summary is written and its fds closed, the runner does
    /// not exit but waits for its supervisor's word (see
    /// [`Job::announces_end`](crate::Job::announces_end)): its cgroup frozen, then a kill after
    /// the answer, so that the kernel's taking down of this process (a millisecond on a small
    /// machine) is not on the answer's way; or `SIGUSR1`, to exit. At most [`LINGER_MAX`]. Not
    /// for a runner run alone.
    #[serde(default)]
    pub linger: bool,
    /// The guest serves turns (a live session's interpreter, see `turns.rs`): their frames come
    /// on the runner's stdin, which the guest never reads itself, and the runner says each one's
    /// end on fd 3. Each turn's clock is its supervisor's: the runner keeps no deadline of its own.
    #[serde(default)]
    pub turns: bool,
}

/// What of the guest the runner calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Entry {
    /// A WASI preview 1 command module's `_start`, with `argv`.
    #[default]
    Start,
    /// The pre-initialized Python guest (a component, see `component.rs`): a fresh instance of
    /// its snapshot, whose `run` export gets the code and `args` as `sys.argv[1:]` (no code: both
    /// come framed on stdin). `argv` is only shown.
    PythonRun { code: Option<String>, args: Vec<String> },
}

/// How the guest ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// `_start` returned or the guest called `proc_exit`.
    Exited,
    /// The guest ran out of fuel.
    FuelExhausted,
    /// Its deadline (the wall-clock limit) ended it.
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
    /// Compiling the module here (no precompiled artifact yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<f64>,
    pub instantiate_ms: f64,
    pub run_ms: f64,
    /// The runner's peak resident set (its own, as its reaping would have told).
    #[serde(default)]
    pub max_rss_bytes: u64,
}

/// Limits the guest's store and remembers what it asked for.
pub(super) struct Limits {
    memory_max: usize,
    table_elements_max: usize,
    instances_max: usize,
    memory_peak: usize,
    memory_limit_hit: bool,
    /// The largest table asked for.
    table_peak: usize,
    /// How many memories and tables were made.
    memories_made: usize,
    tables_made: usize,
    /// A run's: its memory figures are told as they change (see [`Told`]).
    told: bool,
}

impl Limits {
    /// A run's limits (`c`'s; `instances_max`: the policy's for a module, the guest's own for the
    /// Python component).
    fn of(c: &RunnerConfig, instances_max: u32) -> Limits {
        Limits {
            memory_max: usize::try_from(c.memory_max_bytes).unwrap_or(usize::MAX),
            table_elements_max: usize::try_from(c.table_elements_max).unwrap_or(usize::MAX),
            instances_max: instances_max as usize,
            told: true,
            ..Limits::none()
        }
    }

    /// No limit: a preloaded guest's fresh instance is made under these, and what it took is
    /// recorded, to be checked against each run's own limits ([`Limits::admits`]).
    pub(super) fn none() -> Limits {
        Limits {
            memory_max: usize::MAX,
            table_elements_max: usize::MAX,
            instances_max: PRELOAD_INSTANCES_MAX,
            memory_peak: 0,
            memory_limit_hit: false,
            table_peak: 0,
            memories_made: 0,
            tables_made: 0,
            told: false,
        }
    }

    /// Tells the run's memory figures (see [`Told`]), when these are a run's limits.
    fn tell(&self) {
        if self.told {
            TOLD.memory_peak.store(self.memory_peak, Ordering::Relaxed);
            TOLD.memory_limit_hit.store(self.memory_limit_hit, Ordering::Relaxed);
        }
    }

    /// The largest linear memory asked for so far, in bytes: right after instantiating, the
    /// size of the guest's memory as its image made it.
    pub(super) fn memory_peak(&self) -> usize {
        self.memory_peak
    }

    /// Whether a memory growth was refused (since [`Limits::turn_begins`]).
    pub(super) fn memory_limit_hit(&self) -> bool {
        self.memory_limit_hit
    }

    /// A turn of a guest that serves turns begins: a refused growth is counted from here.
    pub(super) fn turn_begins(&mut self) {
        self.memory_limit_hit = false;
    }

    /// Whether these limits would have let an instance be made that took `took` (one instance,
    /// or the Python component's fixed number): otherwise a run instantiates afresh, under its
    /// own limits, and fails as it always did.
    fn admits(&self, took: &Limits) -> bool {
        took.memory_peak <= self.memory_max
            && took.table_peak <= self.table_elements_max
            && took.memories_made <= self.memories()
            && took.tables_made <= self.tables()
            && self.instances_max >= 1
    }
}

/// At most this many instances, memories and tables (×4) for a preloaded guest's instance.
const PRELOAD_INSTANCES_MAX: usize = 1024;

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        let admitted = desired <= self.memory_max;
        if admitted {
            self.memories_made += usize::from(current == 0);
            self.memory_peak = self.memory_peak.max(desired);
        } else {
            self.memory_limit_hit = true;
        }
        self.tell();
        Ok(admitted)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        self.tables_made += usize::from(current == 0);
        self.table_peak = self.table_peak.max(desired);
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

pub(super) struct State<W> {
    pub(super) wasi: W,
    pub(super) limits: Limits,
    /// The JavaScript guest's turn, when it serves turns (see `turns.rs`).
    pub(super) turn: Option<super::turns::TurnIo>,
}

/// How a guest's call went, as [`run`] reports it.
pub(super) struct Ran {
    /// The guest's exit status, or how it ended otherwise.
    pub(super) result: wasmtime::Result<i32>,
    pub(super) times: Times,
    pub(super) fuel_left: Option<u64>,
    pub(super) memory_peak: usize,
    pub(super) memory_limit_hit: bool,
}

impl Ran {
    /// What became of a call on `store` begun at `started`. The process ends right after: its
    /// memory goes with it, so the guest's store, instance and linear memory are not torn down
    /// piece by piece first (milliseconds for a Python guest).
    pub(super) fn of<W>(store: Store<State<W>>, result: wasmtime::Result<i32>, times: Times) -> Ran {
        let limits = &store.data().limits;
        let ran = Ran {
            result,
            times,
            fuel_left: store.get_fuel().ok(),
            memory_peak: limits.memory_peak,
            memory_limit_hit: limits.memory_limit_hit,
        };
        std::mem::forget(store);
        ran
    }
}

/// How long loading and instantiating took, and when the guest started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Times {
    pub(super) load: Duration,
    pub(super) compile: Option<Duration>,
    pub(super) instantiate: Duration,
    pub(super) started: Instant,
}

/// The store of a guest: its WASI, its limits, its fuel and its deadline.
/// `instances_max`: the policy's for a module, the guest's own for the Python component.
pub(super) fn store<W>(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    wasi: W,
    instances_max: u32,
) -> Result<Store<State<W>>, String> {
    let turn = c.turns.then(|| super::turns::TurnIo::new(c.fuel));
    let mut store = Store::new(engine, State { wasi, limits: Limits::of(c, instances_max), turn });
    store.limiter(|s| &mut s.limits);
    arm(&mut store, c)?;
    Ok(store)
}

/// A store for a preloaded guest's fresh instance: no WASI of a run's, no limit (what the
/// instance takes is recorded), no deadline while it is made.
pub(super) fn fresh_store<W>(engine: &wasmtime::Engine, wasi: W) -> Store<State<W>> {
    let mut store = Store::new(engine, State { wasi, limits: Limits::none(), turn: None });
    store.limiter(|s| &mut s.limits);
    // Made outside any run: a start function of the guest's own runs unmetered.
    let _ = store.set_fuel(u64::MAX);
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// An instance (a module's or a component's) in its store.
pub(super) type Instanced<W, I> = (Store<State<W>>, I);

/// Makes a preloaded guest's fresh instance (`fresh`, the store it was made in) this run's:
/// its WASI, its limits, its fuel and its deadline. `None`: the run's limits would not have
/// admitted the instance; the run instantiates afresh.
pub(super) fn adopt<W, I>(
    fresh: Instanced<W, I>,
    c: &RunnerConfig,
    wasi: W,
    instances_max: u32,
) -> Result<Option<Instanced<W, I>>, String> {
    let (mut store, instance) = fresh;
    let mut limits = Limits::of(c, instances_max);
    let took = &store.data().limits;
    if !limits.admits(took) {
        return Ok(None);
    }
    limits.memory_peak = took.memory_peak;
    limits.tell();
    *store.data_mut() = State { wasi, limits, turn: None };
    arm(&mut store, c)?;
    Ok(Some((store, instance)))
}

/// A store's fuel and, with fuel, its epoch deadline (the next tick) for a run.
fn arm<W>(store: &mut Store<State<W>>, c: &RunnerConfig) -> Result<(), String> {
    if let Some(fuel) = c.fuel {
        store.set_fuel(fuel).map_err(|e| one_line(&e))?;
        store.set_epoch_deadline(1);
    }
    Ok(())
}

/// The runner's own filter: the jail's groups, plus every exec and every socket.
fn runner_filter() -> Vec<crate::sys::SockFilter> {
    let mut entries: Vec<bpf::Entry> = seccomp::entries(&[], &[])
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

fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
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
            let (summary, code) = run(&config);
            finish(&summary, code, Some(&config))
        }
        Err(e) => finish(&load_error(format!("bad runner configuration: {e}")), 125, None),
    }
}

/// The supervisor's channel for the runner's account (fd 3), while it is open.
fn summary_out() -> std::sync::MutexGuard<'static, Option<std::fs::File>> {
    static OUT: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);
    OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Ends the runner: `summary` to the supervisor, its channels closed, then exit with `code`.
/// Called by whichever comes first of the run's end (`config`: the run's) and its deadline
/// (`None`, on the deadline's thread, the guest's code still running): the other waits for the
/// process to go.
fn finish(summary: &Summary, code: i32, config: Option<&RunnerConfig>) -> ! {
    static ENDING: AtomicBool = AtomicBool::new(false);
    if ENDING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    if let Some(mut f) = summary_out().take() {
        let line = format!("{}\n", serde_json::to_string(summary).unwrap_or_default());
        let _ = f.write_all(line.as_bytes());
    }
    // The guest's output went straight to fds 1 and 2 (nothing buffered in this process). The
    // run is over for the supervisor once its output channels are closed with the summary given
    // (the job `announces_end`): it need not wait for this process's memory to be torn down.
    // With them, the other channels it was given, which nothing of it uses any more: a module's
    // artifact (still open when it was not written) and the host-call channel. Only those: the
    // other fds belong to threads still running (the tokio runtime of `wasi_runtime` polls its own),
    // and one closed under them would abort the process.
    // At a deadline (no `config`), the guest's code may still run: the fds it has stay until the
    // process exits, so that none is reused under it.
    if let Some(c) = config {
        if c.module_bytes.is_some() {
            drop(crate::sys::take_inherited_fd(ARTIFACT_FD));
        }
        if let Some((requests, answers)) = c.host_calls {
            crate::sys::close(requests);
            crate::sys::close(answers);
        }
        crate::sys::close(1);
        crate::sys::close(2);
    }
    // Only as its jail's init, and only once its guest is done: the supervisor's word reaches
    // init (through its pidfd). A runner under stockade's init (a one-off run's), or one whose
    // deadline ended a guest still running, exits now.
    if config.is_some_and(|c| c.linger) && std::process::id() == 1 {
        crate::sys::wait_to_go(LINGER_MAX);
    }
    crate::sys::exit_now(code)
}

/// The longest a runner waits for its supervisor's word after its account (see
/// [`RunnerConfig::linger`]): a backstop; the word comes as soon as the supervisor has read the
/// account.
pub const LINGER_MAX: Duration = Duration::from_secs(1);

pub(super) fn load_error(message: String) -> Summary {
    Summary {
        outcome: Outcome::LoadError,
        guest_exit_code: None,
        message: Some(message),
        fuel_consumed: None,
        memory_peak_bytes: 0,
        memory_limit_hit: false,
        load_ms: 0.0,
        compile_ms: None,
        instantiate_ms: 0.0,
        run_ms: 0.0,
        max_rss_bytes: crate::sys::max_rss_bytes(),
    }
}

/// Reads the module (`size` bytes) from stdin, compiles it, and hands the serialized artifact to
/// the supervisor on fd 4, all before any of its code can run.
fn compile(engine: &wasmtime::Engine, size: u64) -> Result<(wasmtime::Module, Duration), String> {
    use std::io::Read;
    if let Some(f) = summary_out().as_mut() {
        let _ = writeln!(f, "{COMPILE_MARKER}");
    }
    let mut bytes = Vec::new();
    // Unbuffered: the guest's stdin is what follows the module, byte for byte.
    stdin_file()
        .and_then(|f| f.take(size).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read the module from stdin: {e}"))?;
    if bytes.len() as u64 != size {
        return Err(format!("the module on stdin has {} bytes, not {size}", bytes.len()));
    }
    let t = Instant::now();
    let module = wasmtime::Module::new(engine, &bytes).map_err(|e| format!("cannot compile: {}", one_line(&e)))?;
    let took = t.elapsed();
    if let Some(fd) = crate::sys::take_inherited_fd(ARTIFACT_FD) {
        let artifact = module.serialize().map_err(|e| format!("cannot serialize: {}", one_line(&e)))?;
        let _ = std::fs::File::from(fd).write_all(&artifact);
    }
    Ok((module, took))
}

/// An error chain in one line, without backtraces.
pub(super) fn one_line(e: &wasmtime::Error) -> String {
    // The chain's messages, without the guest's backtrace (a context of many lines).
    let skip = usize::from(e.downcast_ref::<wasmtime::WasmBacktrace>().is_some());
    let said: Vec<String> =
        e.chain().skip(skip).filter_map(|c| c.to_string().lines().next().map(str::to_string)).collect();
    said.join(": ")
}

/// This process's stdin as a file of its own (unbuffered, unlike `std::io::stdin`).
pub(super) fn stdin_file() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    Ok(std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?))
}

/// The runner's main in a jail that runs it as a copy of the process that built it (see
/// [`crate::InProcess`]): `argv` is the exec'd runner's (`stockade __runner CONFIG...`).
pub fn main_in_process(argv: &[std::ffi::CString]) -> i32 {
    let config: String = argv.iter().skip(2).map(|a| a.to_string_lossy()).collect();
    main(&config)
}

/// What this process loaded ahead for `c` (see `preload.rs`), when it is the artifact `c` names.
pub(super) fn preloaded(c: &RunnerConfig) -> Option<std::sync::Arc<super::preload::Loaded>> {
    let kind = if c.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let component = matches!(c.entry, Entry::PythonRun { .. });
    let key = super::preload::Key { path: c.artifact.clone()?, id: c.artifact_id, kind, component };
    super::preload::find(&key)
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
        Entry::Start => start(&engine, c, guest, t0),
        Entry::PythonRun { .. } if c.turns => super::component::python_turns(&engine, c, guest, t0),
        Entry::PythonRun { code, args } => super::component::run_python(&engine, c, code.as_deref(), args, guest, t0),
    };
    let ran = match ran {
        Ok(r) => r,
        Err(message) => return (load_error(message), 125),
    };
    let fuel_consumed = c.fuel.map(|f| f.saturating_sub(ran.fuel_left.unwrap_or(0)));
    let memory = (ran.memory_peak, ran.memory_limit_hit);
    let summary = summary(ended(ran.result), fuel_consumed, memory, &ran.times, c.clock_from_stdin);
    let exit = super::guest_end(&summary).exit_code();
    (summary, exit)
}

/// The runner's account of a guest that ended as `end` says (its outcome, exit code and
/// message), with `memory` (its peak and whether a growth was refused) and its times `t`.
fn summary(
    end: (Outcome, Option<i32>, Option<String>),
    fuel_consumed: Option<u64>,
    memory: (usize, bool),
    t: &Times,
    clock_from_stdin: bool,
) -> Summary {
    let (outcome, guest_exit_code, message) = end;
    // Counted from the start of the guest's run: its first byte of stdin, when it waited for it.
    let run = match super::stdin::STDIN_STARTED.get() {
        Some(at) if clock_from_stdin => (*at).max(t.started).elapsed(),
        _ if clock_from_stdin => Duration::ZERO,
        _ => t.started.elapsed(),
    };
    Summary {
        outcome,
        guest_exit_code,
        message,
        fuel_consumed,
        memory_peak_bytes: memory.0 as u64,
        memory_limit_hit: memory.1,
        load_ms: ms(t.load),
        compile_ms: t.compile.map(ms),
        instantiate_ms: ms(t.instantiate),
        run_ms: ms(run),
        max_rss_bytes: crate::sys::max_rss_bytes(),
    }
}

/// A command module's run (begun at `t0`): loaded (or compiled here), instantiated (or the copy
/// of the instance this process made ahead taken), its `_start` called.
fn start(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Ran, String> {
    let fresh = match loaded.and_then(super::preload::Loaded::take_fresh) {
        Some(super::preload::Fresh::Module(store, instance)) => {
            adopt((store, instance), c, wasi_ctx(c)?.build_p1(), c.instances_max)?
        }
        _ => None,
    };
    let Made { load, compile, mut store, instance, t1 } = match fresh {
        Some((store, instance)) => {
            let load = t0.elapsed();
            deadline_tick(engine, c, load, None);
            Made { load, compile: None, store, instance, t1: Instant::now() }
        }
        None => instantiate_module(engine, c, loaded, t0)?,
    };
    let start =
        instance.get_typed_func::<(), ()>(&mut store, "_start").map_err(|e| format!("no _start: {}", one_line(&e)))?;
    let times = tell(Times { load, compile, instantiate: t1.elapsed(), started: Instant::now() });
    if let Some(t) = store.data_mut().turn.as_mut() {
        // Said at its first read of stdin, where it waits for its first turn.
        t.ready = Some(super::turns::Account::Ready { load_ms: ms(times.load), instantiate_ms: ms(times.instantiate) });
    }
    let result = start.call(&mut store, ()).map(|()| 0);
    returned();
    Ok(Ran::of(store, result, times))
}

/// A command module's instance, ready for its `_start`: how long loading and compiling took,
/// and when instantiating began.
struct Made {
    load: Duration,
    compile: Option<Duration>,
    store: Store<State<WasiP1Ctx>>,
    instance: wasmtime::Instance,
    t1: Instant,
}

/// The module loaded (or compiled here) and instantiated in this run (`t0`: when the run began).
fn instantiate_module(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Made, String> {
    let (pre, compile) = match (&c.artifact, c.module_bytes, loaded.map(|l| &l.guest)) {
        (Some(_), _, Some(super::preload::Guest::Module(pre))) => (pre.clone(), None),
        (Some(artifact), _, _) => match crate::sys::load_artifact(engine, artifact, c.artifact_id) {
            Ok(m) => (instance_pre(engine, &m, c.host_calls, c.turns)?, None),
            Err(e) => return Err(format!("cannot load {}: {}", artifact.display(), one_line(&e))),
        },
        (None, Some(size), _) => {
            let (m, took) = compile(engine, size)?;
            (instance_pre(engine, &m, c.host_calls, c.turns)?, Some(took))
        }
        (None, None, _) => return Err("no artifact and no module to compile".into()),
    };
    let load = t0.elapsed() - compile.unwrap_or_default();
    let mut store = store(engine, c, wasi_ctx(c)?.build_p1(), c.instances_max)?;
    deadline_tick(engine, c, load, compile);
    let t1 = Instant::now();
    let instance = pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", one_line(&e)))?;
    std::mem::forget(pre);
    Ok(Made { load, compile, store, instance, t1 })
}

/// A preloaded module's fresh instance, in a store of its own (see `preload.rs`).
pub(super) fn fresh(
    engine: &wasmtime::Engine,
    pre: &Pre,
) -> wasmtime::Result<Instanced<WasiP1Ctx, wasmtime::Instance>> {
    let mut store = fresh_store(engine, WasiCtxBuilder::new().build_p1());
    let instance = pre.instantiate(&mut store)?;
    Ok((store, instance))
}

/// A command module's imports resolved against WASI preview 1.
pub(super) type Pre = wasmtime::InstancePre<State<WasiP1Ctx>>;

/// Resolves `module`'s imports (WASI preview 1) in `engine`, with the jail's host-call channel
/// (`p1calls.rs`) when the run has one, and its turns' stdin and status (`turns`). A module
/// preloaded by a warm runner has neither: a run with host calls is never a warm one, nor is a
/// live session's interpreter.
pub(super) fn instance_pre(
    engine: &wasmtime::Engine,
    module: &wasmtime::Module,
    host_calls: Option<(i32, i32)>,
    turns: bool,
) -> Result<Pre, String> {
    let mut linker: Linker<State<WasiP1Ctx>> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s| &mut s.wasi).map_err(|e| one_line(&e))?;
    if host_calls.is_some() || turns {
        super::p1calls::link(&mut linker, host_calls, turns).map_err(|e| one_line(&e))?;
    }
    linker.instantiate_pre(module).map_err(|e| format!("cannot link: {}", one_line(&e)))
}

/// The guest's WASI: its argv and environment, stdout and stderr inherited (the supervisor's
/// capped pipes), its stdin when it reads one, its preopened directories, to be built for
/// preview 1 or 2. `Err` in words.
pub(super) fn wasi_ctx(c: &RunnerConfig) -> Result<WasiCtxBuilder, String> {
    let mut wasi = WasiCtxBuilder::new();
    // Blocking WASI calls (file I/O in /app) run on this thread, not through a tokio
    // blocking pool: no thread hand-off per call, and no extra threads at all.
    wasi.args(&c.argv).envs(&c.env).inherit_stdout().inherit_stderr().allow_blocking_current_thread(true);
    // No sockets of any kind, no name lookups (WASI preview 2 has both; the jail has no network
    // and the runner's filter no socket(2) either).
    wasi.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    seed_randomness(&mut wasi)?;
    if c.guest_stdin {
        // The guest reads fd 0 itself (no thread between it and its input).
        match stdin_file() {
            Ok(f) => {
                wasi.stdin(super::stdin::GuestStdin(wasmtime_wasi::cli::InputFile::new(f)));
            }
            Err(e) => return Err(format!("cannot give the guest its stdin: {e}")),
        }
    }
    for p in &c.preopens {
        let perms = if p.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        if let Err(e) = wasi.preopened_dir(&p.host, &p.guest, perms) {
            return Err(format!("cannot open {} for the guest: {}", p.host.display(), one_line(&e)));
        }
    }
    Ok(wasi)
}

/// Seeds every random source the guest has from the kernel, in this process. WASI's defaults
/// come from the thread's `rand` generator, whose state a process copied from another (a warm
/// runner is a copy of its spawner) shares with every other copy: `rand` does not reseed on
/// fork, and two runs would draw the same numbers.
fn seed_randomness(wasi: &mut WasiCtxBuilder) -> Result<(), String> {
    use rand::SeedableRng;
    let mut seeds = [0u8; 80];
    crate::sys::os_random(&mut seeds).map_err(|e| format!("cannot seed the guest's random generators: {e}"))?;
    let (secure, rest) = seeds.split_at(32);
    let (insecure, seed) = rest.split_at(32);
    let array = |b: &[u8]| <[u8; 32]>::try_from(b).unwrap_or_default();
    wasi.secure_random(rand::rngs::StdRng::from_seed(array(secure)))
        .insecure_random(rand::rngs::SmallRng::from_seed(array(insecure)))
        .insecure_random_seed(u128::from_le_bytes(<[u8; 16]>::try_from(seed).unwrap_or_default()));
    Ok(())
}

/// What a run has told so far, for its deadline to account for it from another thread (see
/// [`deadline_tick`]): its times once its guest's code starts, its memory figures as they change,
/// and whether its guest's call has returned.
struct Told {
    times: std::sync::OnceLock<Times>,
    memory_peak: AtomicUsize,
    memory_limit_hit: AtomicBool,
    returned: AtomicBool,
}

static TOLD: Told = Told {
    times: std::sync::OnceLock::new(),
    memory_peak: AtomicUsize::new(0),
    memory_limit_hit: AtomicBool::new(false),
    returned: AtomicBool::new(false),
};

/// Tells the run's times, as its guest's code starts (see [`Told`]).
pub(super) fn tell(times: Times) -> Times {
    let _ = TOLD.times.set(times);
    times
}

/// Tells that the guest's call returned (see [`Told`]): the run's own end accounts for it, not
/// its deadline.
pub(super) fn returned() {
    TOLD.returned.store(true, Ordering::SeqCst);
}

/// How long a fuel-metered guest has, after the epoch tick, to reach its next check and trap
/// before its deadline ends the runner all the same: a guest waiting in a host call has no check
/// to reach.
const EPOCH_GRACE: Duration = Duration::from_millis(100);

/// The wall-clock limit, set as instantiation begins (`load` and `compile`: what it took before).
/// It counts from now, or from the guest's first read of its stdin (a waiting guest's code came,
/// see `stdin.rs`). The limit is a task of the runner's tokio runtime (see [`wasi_runtime`]),
/// whose one worker sleeps until it: no thread of its own. Then it ends the runner's process, and
/// with it the guest, whatever the guest is doing: running its code (which has no check of its
/// own, see [`EngineKind::Plain`]) or waiting in a host call. Its account is the runner's, as
/// interrupted. A fuel-metered guest's code has epoch checks: it traps at its next one, so the
/// fuel it consumed is accounted for ([`EPOCH_GRACE`] later, it is ended as the others are).
pub(super) fn deadline_tick(engine: &wasmtime::Engine, c: &RunnerConfig, load: Duration, compile: Option<Duration>) {
    if c.turns {
        // Each turn's clock is its supervisor's (its deadline ends the jail).
        return;
    }
    let ticker = c.fuel.map(|_| engine.clone());
    let timeout = Duration::from_millis(c.timeout_ms);
    let clock_from_stdin = c.clock_from_stdin;
    let now = Instant::now();
    // The times so far, should the deadline come before the guest's code starts.
    let armed = Times { load, compile, instantiate: Duration::ZERO, started: now };
    // Without a runtime `run` refuses before any guest starts: this is not reached then.
    let Some(runtime) = wasi_runtime() else { return };
    runtime.spawn(async move {
        let mut from = now;
        if clock_from_stdin {
            // Nothing wakes this task when the code comes (no wake-up on the run's way): it
            // looks at the guest's first read once a whole limit has passed since it last
            // looked, so it looks again by the time the limit has passed since that read.
            from = loop {
                tokio::time::sleep(timeout).await;
                if let Some(at) = super::stdin::STDIN_STARTED.get() {
                    break *at;
                }
            };
        }
        tokio::time::sleep(timeout.saturating_sub(from.elapsed())).await;
        if let Some(engine) = ticker {
            engine.increment_epoch();
            tokio::time::sleep(EPOCH_GRACE).await;
        }
        interrupted(armed, clock_from_stdin);
    });
}

/// Ends a run at its deadline, from the deadline's thread, unless its guest's call has returned:
/// the account of an interrupted guest, from what the run told (see [`Told`]), and the process's
/// exit. A deadline that came before the guest's code started (`armed`: the times when the
/// deadline was set, as instantiation began) counts instantiation until now, and no run.
fn interrupted(armed: Times, clock_from_stdin: bool) {
    if TOLD.returned.load(Ordering::SeqCst) {
        return;
    }
    let t = match TOLD.times.get() {
        Some(t) => *t,
        None => Times { instantiate: armed.started.elapsed(), started: Instant::now(), ..armed },
    };
    let memory = (TOLD.memory_peak.load(Ordering::Relaxed), TOLD.memory_limit_hit.load(Ordering::Relaxed));
    let end = (Outcome::Interrupted, None, Some(Trap::Interrupt.to_string()));
    let summary = summary(end, None, memory, &t, clock_from_stdin);
    finish(&summary, super::guest_end(&summary).exit_code(), None)
}

/// The tokio runtime wasmtime-wasi's host calls run their futures on (they find it entered):
/// one worker, which drives its timers and also ticks the deadline. Without it, wasmtime-wasi
/// starts a runtime of its own with a worker per CPU, and the deadline took a thread of its own:
/// threads made and torn down with every run. Made once; never dropped (the process exits).
fn wasi_runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: std::sync::OnceLock<Option<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("stockade-wasi")
                .enable_io()
                .enable_time()
                .build()
                .ok()
        })
        .as_ref()
}

/// How the guest's `_start` ended: returned or exited (with its code), out of fuel,
/// interrupted at its deadline, or trapped (the trap in one line).
fn ended(result: wasmtime::Result<i32>) -> (Outcome, Option<i32>, Option<String>) {
    match result {
        Ok(code) => (Outcome::Exited, Some(code), None),
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
    }
}
