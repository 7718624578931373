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
    done: Option<oneshot::Receiver<Result<Gated, Error>>>,
}

impl Slot {
    /// Builds a jail on a thread of its own and waits until it is released (blocking). `Err`
    /// says why in words.
    pub fn start(recipe: Arc<Recipe>) -> Result<Slot, String> {
        let gate = Arc::new(Gate::new().map_err(|e| e.to_string())?);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<(), Error>>(1);
        let (done_tx, done) = oneshot::channel();
        let g = gate.clone();
        LIVE.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new().name("stockade-jail".into()).spawn(move || {
            let _live = Live;
            let mut gated = match &*recipe {
                Recipe::Wasm(w) => match w.prestart() {
                    Ok(p) => {
                        let _ = ready_tx.send(Ok(()));
                        p.run_gated(&g)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                },
                Recipe::Program(plan) => match plan.prestart() {
                    Ok(p) => {
                        let _ = ready_tx.send(Ok(()));
                        p.run_gated(&g, |_| None)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                },
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
            return Err(format!("supervisor: cannot start a jail's thread: {e}"));
        }
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Slot { gate, done: Some(done) }),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("supervisor: the jail's thread ended before the jail was built".into()),
        }
    }

    /// Whether the jail is still waiting (not dead, not cancelled).
    fn alive(&mut self) -> bool {
        self.done.as_mut().is_some_and(|d| matches!(d.try_recv(), Err(oneshot::error::TryRecvError::Empty)))
    }

    /// Starts the run and waits for its end.
    pub async fn run(mut self, start: stockade::Start) -> Result<Gated, Error> {
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

/// A runtime's warm jails: `target` of them kept waiting, refilled in the background.
#[derive(Debug)]
pub struct Pool {
    pub runtime: String,
    pub recipe: Arc<Recipe>,
    pub target: usize,
    ready: Mutex<VecDeque<Slot>>,
    wake: Notify,
    stopping: AtomicBool,
}

impl Pool {
    pub fn new(runtime: &str, recipe: Arc<Recipe>, target: usize) -> Pool {
        Pool {
            runtime: runtime.to_string(),
            recipe,
            target,
            ready: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
        }
    }

    fn ready(&self) -> std::sync::MutexGuard<'_, VecDeque<Slot>> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A waiting jail, if one is ready (the oldest first). The pool refills when told the run
    /// is over ([`Pool::refill`]): building a jail and starting its interpreter takes CPU the
    /// run in flight would otherwise share (and within a second in any case).
    pub fn take(&self) -> Option<Slot> {
        let mut ready = self.ready();
        loop {
            let mut s = ready.pop_front()?;
            if s.alive() {
                return Some(s);
            }
        }
    }

    /// Wakes the refill.
    pub fn refill(&self) {
        self.wake.notify_one();
    }

    /// How many jails wait now.
    pub fn fill(&self) -> usize {
        self.ready().len()
    }

    /// Keeps the pool filled until [`Pool::stop`]: one jail at a time, dead ones replaced; a
    /// failing build backs off (1 s, doubling to 30 s) and is counted.
    pub async fn keep_filled(self: Arc<Self>, metrics: Arc<Metrics>) {
        let mut backoff = Duration::from_secs(1);
        while !self.stopping.load(Ordering::SeqCst) {
            {
                let mut ready = self.ready();
                let before = ready.len();
                ready.retain_mut(Slot::alive);
                let died = before - ready.len();
                if died > 0 {
                    metrics.warm_died(&self.runtime, died);
                }
            }
            metrics.warm_fill(&self.runtime, self.fill());
            if self.fill() >= self.target {
                // Woken after a run, or every second to see that the waiting jails are alive.
                if tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await.is_ok() {
                    tokio::time::sleep(AFTER_ANSWER).await;
                }
                continue;
            }
            let recipe = self.recipe.clone();
            match tokio::task::spawn_blocking(move || Slot::start(recipe)).await {
                Ok(Ok(slot)) => {
                    backoff = Duration::from_secs(1);
                    if self.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    self.ready().push_back(slot);
                }
                Ok(Err(e)) => {
                    metrics.setup_failed(&self.runtime);
                    eprintln!("stockade serve: runtime {}: cannot build a warm jail: {e}", self.runtime);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
                Err(_) => break,
            }
        }
        self.stop();
    }

    /// Stops refilling and takes every waiting jail down.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        let slots: Vec<Slot> = self.ready().drain(..).collect();
        drop(slots);
    }
}

/// The path of this binary, which runs as the Wasm runner inside the jails.
pub fn runner() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}
