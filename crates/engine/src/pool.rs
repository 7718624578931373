//! A runtime's warm jails: a [`Pool`] keeps its [`Slot`]s filled in the background, and knows
//! whether the runtime can run at all.
//!
//! Imports (layers): `config`, `ending`, `metrics`, `slot`, `spawner`.

use super::ending::AFTER_ANSWER;
use super::metrics::Metrics;
use super::slot::{Slot, SlotError, Tracker};
use super::spawner::Spawner;
use crate::config::{Kind, Runtime};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use stockade::runtime::Recipe;
use stockade::wasm;
use stockade::{Error, Policy};
use tokio::sync::Notify;

/// After this many jails of a runtime failed in a row (built, or died waiting), the runtime is
/// unavailable until one is built again.
const FAILURES_UNAVAILABLE: u32 = 3;
/// A runtime without warm jails is proven by building one (and taking it down) this often.
const PROBE_EVERY: Duration = Duration::from_secs(60);
/// A full pool holds (its failures are forgotten) when each of its jails has waited this long
/// alive: a jail that dies on arrival is built, and fills the pool, every time.
const HOLD_AFTER: Duration = Duration::from_secs(1);
/// The longest a failing pool waits before it tries again.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The longest a run that found no warm jail waits for one being built (see [`Pool::take_soon`])
/// before it builds its own.
const WAIT_FOR_WARM: Duration = Duration::from_millis(250);

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
    /// A jail was parked (for the runs waiting for one).
    parked: Notify,
    /// Runs waiting for a jail being built ([`Pool::take_soon`]).
    waiters: AtomicUsize,
    /// The most jails it builds at once for runs waiting for them: the server's run slots.
    builders: usize,
    stopping: AtomicBool,
    health: Mutex<Health>,
    says: Says,
    metrics: Arc<Metrics>,
    /// The engine's count of jail threads.
    jails: Tracker,
    /// Where its warm jails come from, when not from this process's threads.
    spawner: std::sync::OnceLock<Arc<Spawner>>,
    /// The spawner has ended (seen once).
    orphaned: AtomicBool,
}

/// How a runtime's jails have fared.
#[derive(Debug, Default)]
struct Health {
    /// A jail was built (and parked) at least once, last at this time.
    built: Option<std::time::Instant>,
    /// Where the last jail built got its network namespace.
    net: Option<stockade::NetJoined>,
    /// Failures since the last jail built.
    failures: u32,
    reason: Option<String>,
    /// Runs in a row whose jail failed as it started them (a report of `setup-failed`): such a
    /// host parks jails fine and every run fails. Forgotten only when a run starts.
    run_failures: u32,
    run_reason: Option<String>,
}

impl Pool {
    /// Prepares `rt`'s jails under `policy` (blocking: it opens the policy's grants).
    pub fn new(
        rt: &Runtime,
        policy: &Policy,
        runner: &std::path::Path,
        metrics: Arc<Metrics>,
        jails: Tracker,
        builders: usize,
    ) -> Result<Pool, Error> {
        if let Kind::Guest(guest) = rt.kind {
            // Every artifact a request may need (with fuel, too) is there before any run.
            wasm::check_installed(guest, &wasm::guests::default_dir())?;
        }
        let recipe = Recipe::build(rt.code(), policy, runner)?;
        Ok(Pool {
            runtime: rt.name.clone(),
            target: rt.warm,
            recipe: Mutex::new(Arc::new(recipe)),
            config: rt.clone(),
            policy: policy.clone(),
            runner: runner.to_path_buf(),
            ready: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            parked: Notify::new(),
            waiters: AtomicUsize::new(0),
            builders: builders.max(1),
            stopping: AtomicBool::new(false),
            health: Mutex::new(Health::default()),
            says: Says::default(),
            metrics,
            jails,
            spawner: std::sync::OnceLock::new(),
            orphaned: AtomicBool::new(false),
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

    /// [`Pool::available`], a jail of it was built, and its runs start: what readiness asks.
    pub fn ready(&self) -> Result<(), String> {
        self.available()?;
        let h = self.health();
        if let (n, Some(why)) = (h.run_failures, &h.run_reason)
            && n >= FAILURES_UNAVAILABLE
        {
            return Err(format!("its last {n} runs failed as their jails started them: {why}"));
        }
        match h.built {
            Some(_) => Ok(()),
            None => Err("no jail of it was built yet".into()),
        }
    }

    /// A run of the runtime is over, with `report`: one whose jail failed as it started it is a
    /// failure of the runtime (readiness says so after [`FAILURES_UNAVAILABLE`] in a row), one
    /// that started proves its jails hold.
    pub fn ran(&self, report: &stockade::Report) {
        if report.status == stockade::Status::SetupFailed {
            self.run_failed(report.error.as_deref().unwrap_or("its jail failed as it started its run"));
            return;
        }
        {
            let mut h = self.health();
            h.run_failures = 0;
            h.run_reason = None;
        }
        self.holds();
    }

    /// A run's jail, built for it, ended as it started the run (`why`): a failure of the runtime,
    /// as [`Pool::ran`] counts one.
    pub fn run_failed(&self, why: &str) {
        self.metrics.setup_failed(&self.runtime);
        self.says.say(&format!("runtime {}: a run failed as its jail started it: {why}", self.runtime));
        let mut h = self.health();
        h.run_failures = h.run_failures.saturating_add(1);
        h.run_reason = Some(why.to_string());
    }

    /// Whether readiness waits for a run to start: its last runs failed as they started.
    pub fn runs_failing(&self) -> bool {
        self.health().run_failures >= FAILURES_UNAVAILABLE
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

    /// A waiting jail ([`Pool::take`]), or, when none is ready and the pool is building them
    /// (it has warm jails, it built one, it is not failing), the next it parks, waited for at
    /// most [`WAIT_FOR_WARM`]. A run that finds the pool empty under load then takes the jail
    /// already being built for it instead of building another beside it on the same CPUs: the
    /// refill builds as many at once as runs wait, up to the server's run slots.
    pub async fn take_soon(&self) -> Option<Slot> {
        if let Some(s) = self.take() {
            return Some(s);
        }
        let building = self.target > 0 && self.health().built.is_some() && self.available().is_ok();
        if !building || self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_one();
        let deadline = tokio::time::Instant::now() + WAIT_FOR_WARM;
        let got = loop {
            let parked = self.parked.notified();
            if let Some(s) = self.take() {
                break Some(s);
            }
            if tokio::time::timeout_at(deadline, parked).await.is_err() {
                break self.take();
            }
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        got
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

    fn built(&self, net: stockade::NetJoined) {
        let mut h = self.health();
        h.built = Some(std::time::Instant::now());
        h.net = Some(net);
    }

    /// Where the network namespace of the jail it built last came from (`None`: none built yet).
    pub fn net(&self) -> Option<stockade::NetJoined> {
        self.health().net
    }

    /// Its jails hold: they stay alive while they wait (the pool is full with none dead), a
    /// probe was built, or one served a run. The failures so far are forgotten. (Being built is
    /// not enough: a jail that dies on arrival is built every time.)
    pub fn holds(&self) {
        let mut h = self.health();
        h.failures = 0;
        h.reason = None;
    }

    /// Keeps the pool filled until [`Pool::stop`], one jail at a time (or one for each run waiting
    /// for one, up to its builders: see [`Pool::take_soon`]): jails built with a host
    /// file that has changed since are retired (and the recipe made anew), dead ones replaced;
    /// failures back off (1 s, doubling to 30 s), are counted and said. Without warm jails, a
    /// probe jail is built every [`PROBE_EVERY`] (or until one is built again, while failing).
    pub async fn keep_filled(self: Arc<Self>) {
        let metrics = self.metrics.clone();
        let mut backoff = Duration::from_secs(1);
        // The jails being built: one at a time, or one for each run waiting for one.
        let mut builds: tokio::task::JoinSet<Result<(), String>> = tokio::task::JoinSet::new();
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
            // Its runs fail as they start: a jail runs nothing, to see whether they start again
            // (no client's run comes while readiness says no).
            if self.runs_failing() && self.probe_run().await {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            // Full, counting the jails being built, and building for every run that waits (up
            // to its builders).
            let (building, waiters) = (builds.len(), self.waiters.load(Ordering::SeqCst));
            let full = self.fill() + building >= self.target && building >= waiters.min(self.builders);
            if full && !(probe_due && building == 0) {
                // None of the waiting jails died since the last look, each alive for a while:
                // they hold.
                if self.target > 0 && building == 0 && self.waiting().iter().all(|s| s.waited() >= HOLD_AFTER) {
                    self.holds();
                    backoff = Duration::from_secs(1);
                }
                // Woken after a run, by a build's end, or every second to see that the waiting
                // jails are alive; a run's answer goes out before the refill takes its CPU, unless
                // runs wait for it.
                tokio::select! {
                    Some(done) = builds.join_next(), if building > 0 => {
                        match self.built_one(done, &mut backoff).await {
                            Some(()) => {}
                            None => break,
                        }
                    }
                    woken = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()) => {
                        if woken.is_ok() && self.waiters.load(Ordering::SeqCst) == 0 {
                            tokio::time::sleep(AFTER_ANSWER).await;
                        }
                    }
                }
                continue;
            }
            if building >= self.builders {
                let Some(done) = builds.join_next().await else { continue };
                if self.built_one(done, &mut backoff).await.is_none() {
                    break;
                }
                continue;
            }
            let me = self.clone();
            builds.spawn_blocking(move || me.new_slot().map(|slot| me.park(slot)).map_err(|e| e.to_string()));
        }
        self.stop();
    }

    /// A build's end, as the refill sees it: a probe's resets the back-off; a failure is counted,
    /// said, and backed off. `None`: the runtime's threads are gone.
    async fn built_one(
        &self,
        done: Result<Result<(), String>, tokio::task::JoinError>,
        backoff: &mut Duration,
    ) -> Option<()> {
        match done {
            // A probe, built (and taken down): the runtime can run.
            Ok(Ok(())) if self.target == 0 => *backoff = Duration::from_secs(1),
            Ok(Ok(())) => {}
            Ok(Err(why)) => {
                self.metrics.setup_failed(&self.runtime);
                self.says.say(&format!("runtime {}: cannot build a jail: {why}", self.runtime));
                self.failed(&why);
                tokio::time::sleep(*backoff).await;
                *backoff = (*backoff * 2).min(BACKOFF_MAX);
            }
            Err(_) => return None,
        }
        Some(())
    }

    /// A jail just built: parked for a run (and the runs waiting told), or, a probe's (no warm
    /// jails) or one built as the pool stops, taken down as it drops.
    fn park(&self, slot: Slot) {
        self.built(slot.net());
        if self.target == 0 {
            self.holds();
            return;
        }
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        self.waiting().push_back(slot);
        self.parked.notify_one();
    }

    /// Runs one jail with no code (its runtime's empty run), as a run would: a waiting one, or
    /// one built for it; and counts how it went ([`Pool::ran`]). `false` when none was there.
    async fn probe_run(self: &Arc<Self>) -> bool {
        let slot = match self.take() {
            Some(slot) => slot,
            None => {
                let me = self.clone();
                match tokio::task::spawn_blocking(move || me.new_slot()).await {
                    Ok(Ok(slot)) => slot,
                    _ => return false,
                }
            }
        };
        let stdin = match &self.config.kind {
            Kind::Guest(g) if !g.language().probe_framed => Vec::new(),
            Kind::Program { framed: false, .. } => Vec::new(),
            _ => stockade::handover::frame("", &[]),
        };
        let files = Some(stockade::Exchange { dir: stockade::runtime::WORK_DIR.into(), ..Default::default() });
        let start =
            stockade::Start { stdin, files, limits: stockade::policy::Limits::of(&self.policy), ..Default::default() };
        if let Ok(stockade::Gated::Ran(f)) = slot.run(start).await {
            self.ran(&f.report);
        }
        true
    }

    /// When a file the jails show from the host changed there since the recipe was made: the
    /// recipe is made again (from what is there now) and the waiting jails, which hold the old
    /// one, are taken down. `Err`: the recipe cannot be made now.
    async fn renew_if_changed(self: &Arc<Self>) -> Result<(), String> {
        let me = self.clone();
        let remade = tokio::task::spawn_blocking(move || me.remade())
            .await
            .map_err(|_| "the recipe's builder ended abnormally".to_string())??;
        let Some(path) = remade else { return Ok(()) };
        let retired: Vec<Slot> = self.waiting().drain(..).collect();
        self.says.say(&format!(
            "runtime {}: {} changed on the host: its jails are made again ({} waiting ones retired)",
            self.runtime,
            path.display(),
            retired.len()
        ));
        Ok(())
    }

    /// Makes the recipe again when a file it shows from the host changed there (blocking):
    /// `Some(that file)` when it did.
    fn remade(&self) -> Result<Option<PathBuf>, String> {
        let recipe = self.recipe();
        let Some(path) = recipe.plan().changed_on_host(false).map(std::path::Path::to_path_buf) else {
            return Ok(None);
        };
        self.remake(Some(&path))?;
        Ok(Some(path))
    }

    /// Makes the recipe again (blocking); `changed`: the host file that is why.
    fn remake(&self, changed: Option<&std::path::Path>) -> Result<(), String> {
        let built = Recipe::build(self.config.code(), &self.policy, &self.runner).map_err(|e| match changed {
            Some(path) => format!("{} changed on the host and the jail cannot be made again: {e}", path.display()),
            None => format!("the jail cannot be made again: {e}"),
        })?;
        *self.recipe.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(built);
        Ok(())
    }

    /// The recipe, made again first when the host changed under it (blocking): the spawner's,
    /// which holds a copy of this pool of its own.
    pub fn recipe_now(&self) -> Result<Arc<Recipe>, String> {
        self.remade()?;
        Ok(self.recipe())
    }

    /// From now on, the pool's jails are built by `spawner`'s helpers.
    pub fn use_spawner(&self, spawner: Arc<Spawner>) {
        let _ = self.spawner.set(spawner);
    }

    /// Whether its jails come from a spawner (still there).
    pub fn spawned(&self) -> bool {
        self.spawner.get().is_some_and(|s| s.alive())
    }

    /// A jail of the pool's recipe for the one run about to open it, from a helper of the
    /// spawner (blocking): what a run that found no warm jail gets when [`Pool::spawned`].
    pub fn one_run_slot(&self) -> Result<Slot, SlotError> {
        match self.spawner.get() {
            Some(spawner) => Slot::of_helper(spawner, &self.runtime, true, &self.jails),
            None => Err(SlotError::Helper("the pool has no spawner".into())),
        }
    }

    /// One jail of the pool, waiting at its gate (blocking): a helper's, when there is a
    /// spawner, else one on a thread of this process.
    fn new_slot(&self) -> Result<Slot, SlotError> {
        match self.spawner.get() {
            Some(spawner) if spawner.alive() => Slot::of_helper(spawner, &self.runtime, false, &self.jails),
            Some(_) => {
                if !self.orphaned.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "stockade serve: runtime {}: the spawner has ended: its jails are built on the server's threads",
                        self.runtime
                    );
                    // Made again, which reaps what the spawner's helpers left (their cgroups).
                    if let Err(why) = self.remake(None) {
                        self.says.say(&format!("runtime {}: {why}", self.runtime));
                    }
                }
                Slot::start(self.recipe(), false, &self.jails)
            }
            None => Slot::start(self.recipe(), false, &self.jails),
        }
    }

    /// Stops refilling and takes every waiting jail down.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        let slots: Vec<Slot> = self.waiting().drain(..).collect();
        drop(slots);
    }
}

impl super::spawner::RecipeSource for Pool {
    fn recipe_now(&self) -> Result<Arc<Recipe>, String> {
        Pool::recipe_now(self)
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
