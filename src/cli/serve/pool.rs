//! Jails built ahead: a [`Slot`] is one jail released ahead of its run on a thread of its own
//! (the thread that made the jail stays with it: the jail's parent-death signal follows it),
//! waiting at its gate; a [`Pool`] keeps a runtime's slots filled in the background. A slot
//! serves exactly one run and is then gone: runs never share a jail.

use super::config::{Kind, Runtime};
use super::metrics::Metrics;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use stockade::handover;
use stockade::wasm::{self, GuestCode, WasmJob, WasmPlan};
use stockade::{Error, Gate, Gated, Job, Plan, Policy};
use tokio::sync::{Notify, oneshot};

/// Where a run's files go and come from, inside every jail the server builds.
pub const WORK_DIR: &str = "/app";

/// How a runtime's jails are built: a prepared plan, reused for every jail.
#[derive(Debug)]
pub enum Recipe {
    Wasm(WasmPlan),
    Program(Plan),
}

/// What a recipe is for: a runtime's code waiting on stdin, or one request's Wasm module.
pub enum Code<'a> {
    Runtime(&'a Runtime),
    Module { bytes: Vec<u8>, args: &'a [String] },
}

impl Recipe {
    /// Prepares the jails of `code` under `policy` (blocking: it opens the policy's grants).
    pub fn build(code: Code<'_>, policy: &Policy, runner: &std::path::Path) -> Result<Recipe, Error> {
        let wasm_job = |code: GuestCode, args: &[String]| {
            let mut job = WasmJob::new(code, runner);
            // A server never compiles a guest in its own process (`stockade guest install` does).
            job.compile_guests = false;
            job.args = args.to_vec();
            // The guest reads the run's stdin (after a module's bytes, when it compiles one).
            job.stdin = Some(Vec::new());
            job
        };
        match code {
            Code::Runtime(rt) => match &rt.kind {
                Kind::Guest { python } => {
                    let code = if *python { GuestCode::PythonFromStdin } else { GuestCode::JsFromStdin };
                    Ok(Recipe::Wasm(wasm::prepare(policy, &wasm_job(code, &[]))?))
                }
                Kind::Program { path, args, framed } => {
                    let mut policy = policy.clone();
                    policy.add_empty_dir(WORK_DIR, "the run's work directory")?;
                    policy.set_cwd(WORK_DIR, "the run's work directory")?;
                    let mut job = Job::new(path.clone()).args(args.iter().cloned());
                    if *framed {
                        job = job.args(["-c".to_string(), handover::PYTHON_BOOTSTRAP.to_string()]);
                    }
                    Ok(Recipe::Program(Plan::prepare(&policy, &job.stdin_bytes(Vec::new()))?))
                }
            },
            Code::Module { bytes, args } => {
                Ok(Recipe::Wasm(wasm::prepare(policy, &wasm_job(GuestCode::ModuleBytes(bytes), args))?))
            }
        }
    }

    /// The plan of the jail (for its layers).
    pub fn plan(&self) -> &Plan {
        match self {
            Recipe::Wasm(w) => w.plan(),
            Recipe::Program(p) => p,
        }
    }
}

/// How long work that is not the answer (a run's clean-up, a refill) waits after the answer is
/// sent: on a small host, the CPU the answer's last steps need.
const AFTER_ANSWER: Duration = Duration::from_millis(5);

/// Jail threads alive: a draining server waits for them, so that every jail it built is taken
/// down and its cgroup removed before it exits.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Counts a jail thread down when it ends, however it ends.
struct Live;

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How many jail threads are alive.
pub fn live_jails() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// One jail released ahead of its run, waiting at its gate.
#[derive(Debug)]
pub struct Slot {
    pub gate: Arc<Gate>,
    done: Option<oneshot::Receiver<Result<Gated, SlotError>>>,
}

/// Why a slot was not built, or its run did not end with a report.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// The library refused or failed (a jail that could not be built, files that could not be
    /// put, a supervisor resource).
    #[error(transparent)]
    Jail(Error),
    /// The jail's thread could not start, or ended before it said anything.
    #[error("supervisor: a jail's thread: {0}")]
    Thread(String),
    /// The jail's thread panicked: a bug. That run is lost (its jail taken down as the thread
    /// unwound); the server goes on.
    #[error("internal error: a jail's thread panicked ({0})")]
    Panicked(String),
}

impl Slot {
    /// Builds a jail on a thread of its own and waits until it is released (blocking). `Err`
    /// says why in words. `one_run`: the jail is built for the run about to open it (a death
    /// before the opening is that run's).
    pub fn start(recipe: Arc<Recipe>, one_run: bool) -> Result<Slot, SlotError> {
        let gate = if one_run { Gate::for_one_run() } else { Gate::new() };
        let gate = Arc::new(gate.map_err(SlotError::Jail)?);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), SlotError>>(1);
        let (done_tx, done) = oneshot::channel();
        let g = gate.clone();
        LIVE.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new().name("stockade-jail".into()).spawn(move || {
            let _live = Live;
            // A panic here is a bug of ours: it ends this run (its jail is taken down as the
            // thread unwinds: `Prepared` and its cgroup leaf clean up when dropped), never the
            // server and the other runs in flight.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| jail_thread(&recipe, &g, &ready_tx)));
            let mut gated = match ran {
                Ok(Some(gated)) => gated.map_err(SlotError::Jail),
                Ok(None) => return,
                Err(payload) => {
                    let why = panic_words(payload.as_ref());
                    eprintln!("stockade serve: internal error: a jail's thread panicked ({why}); its run is lost");
                    let _ = ready_tx.try_send(Err(SlotError::Panicked(why.clone())));
                    Err(SlotError::Panicked(why))
                }
            };
            // The answer first; then the run's cgroup goes.
            let cleanup = match &mut gated {
                Ok(Gated::Ran(f)) => f.cleanup.take(),
                _ => None,
            };
            let _ = done_tx.send(gated);
            // The answer goes out first: this thread's clean-up waits a moment rather than take
            // the CPU the answer needs.
            if cleanup.is_some() {
                std::thread::sleep(AFTER_ANSWER);
            }
            if let Some(note) = cleanup.and_then(stockade::Cleanup::done) {
                eprintln!("stockade serve: {note}");
            }
        });
        if let Err(e) = spawned {
            LIVE.fetch_sub(1, Ordering::SeqCst);
            return Err(SlotError::Thread(e.to_string()));
        }
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Slot { gate, done: Some(done) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SlotError::Thread("it ended before the jail was built".into())),
        }
    }

    /// Whether the jail is still waiting; `Err`: why it is not (it died, or was cancelled).
    fn alive(&mut self) -> Result<(), String> {
        let Some(done) = self.done.as_mut() else { return Err("it was used".into()) };
        match done.try_recv() {
            Err(oneshot::error::TryRecvError::Empty) => Ok(()),
            Ok(Ok(Gated::NotStarted(why))) => Err(why),
            Ok(Err(e)) => Err(e.to_string()),
            _ => Err("its thread ended".into()),
        }
    }

    /// Starts the run and waits for its end.
    pub async fn run(mut self, start: stockade::Start) -> Result<Gated, SlotError> {
        self.gate.open(start);
        let ended = || Ok(Gated::NotStarted("the jail's thread ended".into()));
        match self.done.take() {
            Some(done) => done.await.unwrap_or_else(|_| ended()),
            None => ended(),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // An unused slot: its jail is taken down (a used one's gate is already open).
        self.gate.cancel();
    }
}

/// A jail's thread: builds the jail, says whether it is ready, and runs it through its gate.
/// `None`: it could not be built (said on `ready`).
fn jail_thread(
    recipe: &Recipe,
    gate: &Gate,
    ready: &std::sync::mpsc::SyncSender<Result<(), SlotError>>,
) -> Option<Result<Gated, Error>> {
    let gated = match recipe {
        Recipe::Wasm(w) => said(w.prestart(), ready)?.run_gated(gate),
        Recipe::Program(plan) => said(plan.prestart(), ready)?.run_gated(gate, |_| None),
    };
    inject_panic(&gated);
    Some(gated)
}

/// Says on `ready` whether the jail was built.
fn said<T>(built: Result<T, Error>, ready: &std::sync::mpsc::SyncSender<Result<(), SlotError>>) -> Option<T> {
    match built {
        Ok(t) => {
            let _ = ready.send(Ok(()));
            Some(t)
        }
        Err(e) => {
            let _ = ready.send(Err(SlotError::Jail(e)));
            None
        }
    }
}

/// Test builds only: a panic on the jail's thread after a run whose stdout holds
/// `$STOCKADE_TEST_PANIC` (how `tests/serve.rs` proves that a panic ends one run, not the server).
#[cfg(debug_assertions)]
fn inject_panic(gated: &Result<Gated, Error>) {
    if let (Some(marker), Ok(Gated::Ran(f))) = (std::env::var_os("STOCKADE_TEST_PANIC"), gated)
        && let (Some(out), Some(marker)) = (f.report.stdout.text.as_deref(), marker.to_str())
        && !marker.is_empty()
        && out.contains(marker)
    {
        panic!("injected by STOCKADE_TEST_PANIC");
    }
}

#[cfg(not(debug_assertions))]
fn inject_panic(_: &Result<Gated, Error>) {}

/// A panic's message, when it has one.
fn panic_words(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// After this many jails of a runtime failed in a row (built, or died waiting), the runtime is
/// unavailable until one is built again.
const FAILURES_UNAVAILABLE: u32 = 3;
/// A runtime without warm jails is proven by building one (and taking it down) this often.
const PROBE_EVERY: Duration = Duration::from_secs(60);
/// The longest a failing pool waits before it tries again.
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A runtime's warm jails: `target` of them kept waiting, refilled in the background; and
/// whether the runtime can run at all: its jails are built (and, without warm ones, a probe
/// jail is built every [`PROBE_EVERY`]), and after [`FAILURES_UNAVAILABLE`] failures in a row
/// it is unavailable, with the reason, until one is built again.
#[derive(Debug)]
pub struct Pool {
    pub runtime: String,
    pub target: usize,
    recipe: Mutex<Arc<Recipe>>,
    /// What the recipe is made from, to make it again when the host changed under it.
    config: Runtime,
    policy: Policy,
    runner: PathBuf,
    ready: Mutex<VecDeque<Slot>>,
    wake: Notify,
    stopping: AtomicBool,
    health: Mutex<Health>,
    says: Says,
    metrics: Arc<Metrics>,
}

/// How a runtime's jails have fared.
#[derive(Debug, Default)]
struct Health {
    /// A jail was built (and parked) at least once, last at this time.
    built: Option<std::time::Instant>,
    /// Failures since the last jail built.
    failures: u32,
    reason: Option<String>,
}

impl Pool {
    /// Prepares `rt`'s jails under `policy` (blocking: it opens the policy's grants).
    pub fn new(rt: &Runtime, policy: &Policy, runner: &std::path::Path, metrics: Arc<Metrics>) -> Result<Pool, Error> {
        if let Kind::Guest { python } = rt.kind {
            // Every artifact a request may need (with fuel, too) is there before any run.
            wasm::check_installed(python, &wasm::guests::default_dir())?;
        }
        let recipe = Recipe::build(Code::Runtime(rt), policy, runner)?;
        Ok(Pool {
            runtime: rt.name.clone(),
            target: rt.warm,
            recipe: Mutex::new(Arc::new(recipe)),
            config: rt.clone(),
            policy: policy.clone(),
            runner: runner.to_path_buf(),
            ready: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
            health: Mutex::new(Health::default()),
            says: Says::default(),
            metrics,
        })
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The recipe the runtime's jails are built from now.
    pub fn recipe(&self) -> Arc<Recipe> {
        self.recipe.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// `Err(why)` while the runtime cannot run: its last [`FAILURES_UNAVAILABLE`] jails (or
    /// more) could not be built or died before their run. Requests for it are refused then.
    pub fn available(&self) -> Result<(), String> {
        let h = self.health();
        match (h.failures, &h.reason) {
            (n, Some(why)) if n >= FAILURES_UNAVAILABLE => {
                Err(format!("its last {n} jails could not be built or died before their run: {why}"))
            }
            _ => Ok(()),
        }
    }

    /// [`Pool::available`], and a jail of it was built: what readiness asks.
    pub fn ready(&self) -> Result<(), String> {
        self.available()?;
        match self.health().built {
            Some(_) => Ok(()),
            None => Err("no jail of it was built yet".into()),
        }
    }

    /// A waiting jail, if one is ready (the oldest first) and was built from what the host has
    /// now. The pool refills when told the run is over ([`Pool::refill`]): building a jail and
    /// starting its interpreter takes CPU the run in flight would otherwise share (and within a
    /// second in any case).
    pub fn take(&self) -> Option<Slot> {
        if self.recipe().plan().changed_on_host(true).is_some() {
            // Built with a file the host has replaced since: the refill makes the recipe anew
            // and retires them; this run gets a jail of its own, made from what is there now.
            self.wake.notify_one();
            return None;
        }
        loop {
            let mut s = self.waiting().pop_front()?;
            match s.alive() {
                Ok(()) => return Some(s),
                Err(why) => self.died(&why),
            }
        }
    }

    /// Wakes the refill.
    pub fn refill(&self) {
        self.wake.notify_one();
    }

    /// How many jails wait now.
    pub fn fill(&self) -> usize {
        self.waiting().len()
    }

    /// A warm jail ended before its run (`why`): counted, said (at most once a minute for one
    /// reason), and a failure of the runtime.
    pub fn died(&self, why: &str) {
        self.metrics.warm_died(&self.runtime, 1);
        self.metrics.setup_failed(&self.runtime);
        self.says.say(&format!("runtime {}: a warm jail ended before its run: {why}", self.runtime));
        self.failed(why);
    }

    fn failed(&self, why: &str) {
        let mut h = self.health();
        h.failures = h.failures.saturating_add(1);
        h.reason = Some(why.to_string());
    }

    fn built(&self) {
        self.health().built = Some(std::time::Instant::now());
    }

    /// Its jails hold: they stay alive while they wait (the pool is full with none dead), a
    /// probe was built, or one served a run. The failures so far are forgotten. (Being built is
    /// not enough: a jail that dies on arrival is built every time.)
    pub fn holds(&self) {
        let mut h = self.health();
        h.failures = 0;
        h.reason = None;
    }

    /// Keeps the pool filled until [`Pool::stop`], one jail at a time: jails built with a host
    /// file that has changed since are retired (and the recipe made anew), dead ones replaced;
    /// failures back off (1 s, doubling to 30 s), are counted and said. Without warm jails, a
    /// probe jail is built every [`PROBE_EVERY`] (or until one is built again, while failing).
    pub async fn keep_filled(self: Arc<Self>) {
        let metrics = self.metrics.clone();
        let mut backoff = Duration::from_secs(1);
        while !self.stopping.load(Ordering::SeqCst) {
            if let Err(why) = self.renew_if_changed().await {
                metrics.setup_failed(&self.runtime);
                self.failed(&why);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            let dead: Vec<String> = {
                let mut ready = self.waiting();
                let mut dead = Vec::new();
                ready.retain_mut(|s| s.alive().map_err(|why| dead.push(why)).is_ok());
                dead
            };
            for why in &dead {
                self.died(why);
            }
            metrics.warm_fill(&self.runtime, self.fill());
            if !dead.is_empty() {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            let probe_due = self.target == 0
                && (self.available().is_err() || self.health().built.is_none_or(|t| t.elapsed() >= PROBE_EVERY));
            if self.fill() >= self.target && !probe_due {
                // Full, and none of the waiting jails died since the last look: they hold.
                if self.target > 0 {
                    self.holds();
                    backoff = Duration::from_secs(1);
                }
                // Woken after a run, or every second to see that the waiting jails are alive.
                if tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await.is_ok() {
                    tokio::time::sleep(AFTER_ANSWER).await;
                }
                continue;
            }
            let recipe = self.recipe();
            match tokio::task::spawn_blocking(move || Slot::start(recipe, false)).await {
                Ok(Ok(slot)) => {
                    self.built();
                    if self.target == 0 {
                        // A probe: built, it is taken down as it drops.
                        self.holds();
                        backoff = Duration::from_secs(1);
                        continue;
                    }
                    if self.stopping.load(Ordering::SeqCst) {
                        continue;
                    }
                    self.waiting().push_back(slot);
                }
                Ok(Err(e)) => {
                    let why = e.to_string();
                    metrics.setup_failed(&self.runtime);
                    self.says.say(&format!("runtime {}: cannot build a jail: {why}", self.runtime));
                    self.failed(&why);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                }
                Err(_) => break,
            }
        }
        self.stop();
    }

    /// When a file the jails show from the host changed there since the recipe was made: the
    /// recipe is made again (from what is there now) and the waiting jails, which hold the old
    /// one, are taken down. `Err`: the recipe cannot be made now.
    async fn renew_if_changed(self: &Arc<Self>) -> Result<(), String> {
        let recipe = self.recipe();
        let Some(path) = recipe.plan().changed_on_host(false).map(std::path::Path::to_path_buf) else {
            return Ok(());
        };
        let me = self.clone();
        let built =
            tokio::task::spawn_blocking(move || Recipe::build(Code::Runtime(&me.config), &me.policy, &me.runner))
                .await
                .map_err(|_| "the recipe's builder ended abnormally".to_string())?
                .map_err(|e| {
                    format!("{} changed on the host and the jail cannot be made again: {e}", path.display())
                })?;
        *self.recipe.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(built);
        let retired: Vec<Slot> = self.waiting().drain(..).collect();
        self.says.say(&format!(
            "runtime {}: {} changed on the host: its jails are made again ({} waiting ones retired)",
            self.runtime,
            path.display(),
            retired.len()
        ));
        Ok(())
    }

    /// Stops refilling and takes every waiting jail down.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        let slots: Vec<Slot> = self.waiting().drain(..).collect();
        drop(slots);
    }
}

/// Lines for the log, each said at most once a minute (how many more came is said with the
/// next): a failing host must not flood the log.
#[derive(Debug, Default)]
struct Says(Mutex<std::collections::HashMap<String, (std::time::Instant, u64)>>);

impl Says {
    const EVERY: Duration = Duration::from_secs(60);

    fn say(&self, line: &str) {
        let mut said = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if said.len() > 64 {
            said.retain(|_, (at, _)| at.elapsed() < Self::EVERY);
        }
        match said.get_mut(line) {
            Some((at, more)) if at.elapsed() < Self::EVERY => *more += 1,
            Some((at, more)) => {
                eprintln!("stockade serve: {line} ({} more like it in the last minute)", *more);
                *at = std::time::Instant::now();
                *more = 0;
            }
            None => {
                eprintln!("stockade serve: {line}");
                said.insert(line.to_string(), (std::time::Instant::now(), 0));
            }
        }
    }
}

/// The path of this binary, which runs as the Wasm runner inside the jails.
pub fn runner() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}
