//! The engine: runs requests in jails, for any front (`stockade serve`'s HTTP, `stockade mcp`).
//! Admission (a bounded number of runs at once, a bounded queue behind them), a warm jail when
//! one waits and the request's limits allow, else a jail built for the request, the hand-over,
//! and the result. The jail work is synchronous and stays on the jail's own thread; only the
//! waiting is async. Its one door is [`door`]: [`Engine::call`] with a [`Command`], and
//! [`Engine::admit`] for a run a front streams; its life is [`Engine::new`] (or
//! [`start::start_engine`]), [`Engine::fill_pools`] and [`Engine::drain`]. The stores behind
//! the door (sessions, host calls, metrics, the answers' budget) are its own.

#![forbid(unsafe_code)]

pub mod batch;
pub mod budget;
pub mod calls;
pub mod config;
pub mod door;
mod ending;
mod handoff;
mod health;
pub mod hibernate;
pub mod live;
pub mod metrics;
mod pool;
mod replicas;
pub mod sessions;
mod slot;
mod spawner;
pub mod start;
pub mod state;
mod turns;

pub use door::{Admitted, Command, Held, Host, Output, Reply, Run};
pub use health::Readiness;

use crate::config::{Bounds, Config, Kind, Runtime};
use metrics::Metrics;
use pool::Pool;
use slot::{Slot, SlotError, Tracked, Tracker};
use spawner::Spawner;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;
use stockade::api::session::{Mode, SessionBody, SessionInfo};
use stockade::api::{ApiError, Catalog, ErrorCode, RunRequest, RunResult, Target};
use stockade::layers::filesystem::exchange::Taken;
use stockade::policy::Limits;
use stockade::runtime::{Code, Recipe, WORK_DIR};
use stockade::{Exchange, Gated, JailLimit, Start, handover};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The server's state.
#[derive(Debug)]
pub struct Engine {
    /// What requests are checked against: the runtimes, every named policy (once), the caps.
    catalog: Catalog,
    /// How each runtime's jails are built.
    runtimes: BTreeMap<String, Runtime>,
    bounds: Bounds,
    metrics: Arc<Metrics>,
    /// Warm jails, by runtime (for its own policy).
    pools: BTreeMap<String, Arc<Pool>>,
    /// One permit per run at once.
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    /// Runs in progress, and jail threads alive: a draining engine waits for both to be none.
    running: Tracker,
    jails: Tracker,
    draining: AtomicBool,
    /// This binary: the Wasm runner inside the jails.
    runner: PathBuf,
    started: Instant,
    /// The process that builds the warm jails, when one was forked ([`Engine::fork_spawner`]).
    spawner: std::sync::OnceLock<Arc<Spawner>>,
    /// Runs that share a workspace.
    sessions: Arc<sessions::Sessions>,
    /// Streaming runs' host calls waiting for their clients' answers.
    calls: Arc<calls::Calls>,
    /// Bytes of answers held for their clients at once.
    answers: budget::Budget,
}

/// Where a run's output goes: into its report, or to pipes a streaming response reads.
pub type Streams = Option<(OwnedFd, OwnedFd)>;

impl Engine {
    /// Builds every runtime's recipe (the same checks a run does: guests installed, programs
    /// present, cgroups available) and its pool; refuses with the first runtime that cannot run
    /// here.
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Result<Engine, String> {
        let runner = std::env::current_exe().map_err(|e| format!("cannot find stockade's own binary: {e}"))?;
        let jails = Tracker::new();
        let mut pools = BTreeMap::new();
        for rt in config.runtimes.values() {
            let Some(policy) = config.catalog.policies.get(&rt.policy) else { continue };
            let pool = Pool::new(rt, policy, &runner, metrics.clone(), jails.clone(), config.bounds.concurrency)
                .map_err(|e| format!("{}: runtimes.{}: {e}", config.origin, rt.name))?;
            metrics.warm_target(&rt.name, rt.warm);
            pools.insert(rt.name.clone(), Arc::new(pool));
        }
        let dir = match &config.bounds.state_dir {
            Some(path) => state::StateDir::open(path, config.bounds.sessions.replica_lease_ms.is_some()),
            None => state::StateDir::temporary(),
        }
        .map_err(|e| format!("{}: sessions.state-dir: {e}", config.origin))?;
        let (sessions, problems) = sessions::Sessions::new(config.bounds.sessions, metrics.clone(), Arc::new(dir));
        for p in problems {
            eprintln!("stockade: {p}");
        }
        let sessions = Arc::new(sessions);
        Ok(Engine {
            slots: Arc::new(Semaphore::new(config.bounds.concurrency)),
            catalog: config.catalog.clone(),
            runtimes: config.runtimes.clone(),
            bounds: config.bounds.clone(),
            metrics,
            pools,
            queued: AtomicUsize::new(0),
            running: Tracker::new(),
            jails,
            draining: AtomicBool::new(false),
            runner,
            started: Instant::now(),
            spawner: std::sync::OnceLock::new(),
            sessions,
            calls: Arc::default(),
            answers: budget::Budget::new(config.bounds.answers_in_flight_max_bytes),
        })
    }

    /// What requests are checked against.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Seconds since the engine was built.
    pub fn uptime_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Forks the spawner that builds the warm pools' jails from now on, outside this process
    /// ([`spawner`]). This process must have a single thread still (before the async runtime).
    /// `scrub` runs first in the spawner (see [`Spawner::fork`]), after the state directory's key
    /// is wiped there.
    pub fn fork_spawner(&self, scrub: impl FnOnce()) -> Result<(), String> {
        let scrub = || {
            self.sessions.scrub();
            scrub();
        };
        let spawner =
            Arc::new(Spawner::fork(&self.pools, scrub).map_err(|e| format!("cannot start the spawner: {e}"))?);
        for p in self.pools.values() {
            p.use_spawner(spawner.clone());
        }
        let _ = self.spawner.set(spawner);
        Ok(())
    }

    /// Whether the runtimes' jails come from the spawner (forked, and still there).
    pub fn spawned(&self) -> bool {
        self.spawner.get().is_some_and(|s| s.alive())
    }

    /// Starts filling the warm pools, and proving the runtimes without any (in the background);
    /// and ending sessions as their clocks run out.
    pub fn fill_pools(self: &Arc<Self>) {
        for p in self.pools.values() {
            tokio::spawn(p.clone().keep_filled());
        }
        self.keep_leases();
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
            loop {
                tick.tick().await;
                if !hibernate::keep_sessions(&engine).await {
                    break;
                }
            }
        });
    }

    /// Opens a session for `owner` (checked as [`Sessions::check`](sessions::Sessions::check)
    /// does; a live one only of a runtime that can keep an interpreter).
    pub(crate) fn open_session(&self, owner: sessions::Owner, body: SessionBody) -> Result<SessionInfo, ApiError> {
        let spec = self.sessions.check(body, &self.catalog)?;
        if spec.mode == Mode::Live && self.live_language(&spec.runtime).is_none() {
            return Err(ApiError::field(
                "mode",
                format!(
                    "runtime {} reads its code whole from stdin: it cannot keep an interpreter between runs",
                    spec.runtime
                ),
            ));
        }
        // A host program's interpreter is frozen between its turns: this host must be able to.
        let program = matches!(self.runtimes.get(&spec.runtime).map(|r| &r.kind), Some(Kind::Program { .. }));
        if spec.mode == Mode::Live
            && program
            && let Some(pool) = self.pools.get(&spec.runtime)
            && let Err(e) = pool.recipe().plan().can_serve_turns(stockade::TurnEnd::Read)
        {
            return Err(ApiError::field(
                "mode",
                format!("runtime {} cannot keep a live interpreter on this server: {e}", spec.runtime),
            ));
        }
        self.sessions.create(owner, spec)
    }

    /// The most bytes a workspace holds (`sessions.workspace-max-bytes`): a file over it is
    /// refused before its body is read.
    pub fn workspace_max_bytes(&self) -> u64 {
        self.sessions.workspace_max_bytes()
    }

    /// `Err` (503, naming the runtime and why) while a request's runtime cannot run here.
    pub(crate) fn available(&self, req: &RunRequest) -> Result<(), ApiError> {
        let Target::Runtime(name) = &req.target else { return Ok(()) };
        let Some(pool) = self.pools.get(name) else { return Ok(()) };
        pool.available().map_err(|why| {
            self.metrics.refused(ErrorCode::RuntimeUnavailable.as_str());
            ApiError::new(ErrorCode::RuntimeUnavailable, format!("runtime {name} is unavailable: {why}")).retry_after(5)
        })
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    pub fn running(&self) -> usize {
        self.running.count()
    }

    /// Stops taking runs: queued requests get 503, warm jails are taken down. Returns when no
    /// run is left and every jail's thread has taken its jail down (its cgroup removed).
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.slots.close();
        for p in self.pools.values() {
            p.stop();
        }
        self.running.idle().await;
        self.hibernate_all().await;
        self.sessions.release_all();
        self.jails.idle().await;
        if let Some(spawner) = self.spawner.get().cloned() {
            let _ = tokio::task::spawn_blocking(move || spawner.stop()).await;
        }
    }

    /// A place to run: at once when one is free, else in the queue (bounded in length and time).
    pub(crate) async fn take_slot(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        let draining = || ApiError::new(ErrorCode::Draining, "the server is shutting down");
        if self.draining() {
            self.metrics.refused(ErrorCode::Draining.as_str());
            return Err(draining());
        }
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(p);
        }
        let b = &self.bounds;
        if self.queued.fetch_add(1, Ordering::SeqCst) >= b.queue {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.metrics.refused(ErrorCode::QueueFull.as_str());
            return Err(ApiError::new(
                ErrorCode::QueueFull,
                format!("{} runs are running and {} waiting: try again shortly", b.concurrency, b.queue),
            )
            .retry_after(1));
        }
        self.metrics.queued(1);
        // Counted out however the wait ends: a client that hangs up while queued drops this
        // future mid-wait, and only a guard's `Drop` runs then.
        let in_queue = InQueue(self);
        let waited = tokio::time::timeout(b.queue_timeout, self.slots.clone().acquire_owned()).await;
        drop(in_queue);
        match waited {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => {
                self.metrics.refused(ErrorCode::Draining.as_str());
                Err(draining())
            }
            Err(_) => {
                self.metrics.refused(ErrorCode::QueueTimeout.as_str());
                Err(ApiError::new(
                    ErrorCode::QueueTimeout,
                    format!("no run slot came free within {} ms", b.queue_timeout.as_millis()),
                )
                .retry_after(1))
            }
        }
    }

    /// Runs an admitted request: a warm jail of its runtime when one waits and its limits allow,
    /// else one built for it. The run goes on (holding its permit) if the caller goes away.
    pub(crate) async fn execute(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        req: RunRequest,
        streams: Streams,
    ) -> Result<RunResult, ApiError> {
        self.execute_then(permit, req, streams, |report, files| Ok(RunResult::new(report, files.as_ref()))).await
    }

    /// [`Engine::execute`], the answer made by `then` from the run's report and the files taken
    /// back. `then` runs when the run is over, whether or not the caller is still there (a
    /// session keeps its workspace so), on a thread that may block (it may write to disk); it
    /// is dropped, not run, when the run did not happen.
    async fn execute_then<F>(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        req: RunRequest,
        streams: Streams,
        then: F,
    ) -> Result<RunResult, ApiError>
    where
        F: FnOnce(stockade::Report, Option<Taken>) -> Result<RunResult, ApiError> + Send + 'static,
    {
        let t0 = Instant::now();
        let req = Arc::new(req);
        let warm_pool = match &req.target {
            // A run with host calls has them served here (a helper of the spawner lends this
            // process its jail's channel).
            Target::Runtime(name) if !req.needs_own_jail && req.policy_name == self.runtime_policy(name) => {
                self.pools.get(name).cloned()
            }
            _ => None,
        };
        let engine = self.clone();
        let task = tokio::spawn(async move {
            let _permit = permit;
            let running = Running::new(&engine);
            let result = engine.run_once(&req, warm_pool, streams).await;
            drop(running);
            let (status, warm) = match &result {
                Ok(((report, _), warm)) => {
                    engine.metrics.egress(report);
                    (report.status.as_str(), *warm)
                }
                Err(_) => ("refused", false),
            };
            if status == stockade::Status::SetupFailed.as_str() {
                engine.metrics.setup_failed(&req.runtime_name);
            }
            engine.metrics.run_done(&req.runtime_name, status, warm, t0.elapsed().as_secs_f64());
            let ((report, files), _) = result?;
            tokio::task::spawn_blocking(move || then(report, files))
                .await
                .unwrap_or_else(|_| Err(internal("the run's answer ended abnormally")))
        });
        task.await.unwrap_or_else(|_| Err(internal("the run's task ended abnormally")))
    }

    fn runtime_policy(&self, runtime: &str) -> &str {
        self.runtimes.get(runtime).map_or("", |r| r.policy.as_str())
    }

    /// One run: a warm slot (a second, cold, try when it died just before its start), or a cold
    /// one. Returns whether a warm jail served it.
    async fn run_once(
        &self,
        req: &Arc<RunRequest>,
        pool: Option<Arc<Pool>>,
        streams: Streams,
    ) -> Result<(Ran, bool), ApiError> {
        let warm = match &pool {
            Some(pool) => pool.take_soon().await,
            None => None,
        };
        if let (Some(pool), Some(slot)) = (&pool, warm) {
            let ran = slot.run(start_of(req, dup(&streams)?, false)).await;
            pool.refill();
            match ran {
                // Counted and said by the pool; the run is tried once more, in a jail of its own.
                Ok(Gated::NotStarted(why)) => pool.died(&why),
                other => {
                    if let Ok(Gated::Ran(f)) = &other {
                        pool.ran(&f.report);
                    }
                    return finished(other).map(|r| (r, true));
                }
            }
        }
        let slot = match pool {
            // The runtime's own recipe, in a helper of the spawner: no recipe to make, no copy
            // of this process.
            Some(pool) if pool.spawned() => tokio::task::spawn_blocking(move || pool.one_run_slot())
                .await
                .map_err(|_| internal("the jail's builder ended abnormally"))?
                .map_err(|e| self.cold_refusal(req, e))?,
            _ => self.cold_slot(req).await?,
        };
        let ran = slot.run(start_of(req, streams, true)).await;
        if let Target::Runtime(name) = &req.target
            && let Some(pool) = self.pools.get(name)
        {
            match &ran {
                Ok(Gated::Ran(f)) => pool.ran(&f.report),
                Ok(Gated::NotStarted(why)) => pool.run_failed(why),
                _ => {}
            }
        }
        finished(ran).map(|r| (r, false))
    }

    /// A jail built for one request (its own limits, its own module).
    async fn cold_slot(&self, req: &Arc<RunRequest>) -> Result<Slot, ApiError> {
        let runner = self.runner.clone();
        let rt = match &req.target {
            Target::Runtime(name) => self.runtimes.get(name).cloned(),
            Target::Wasm(_) => None,
        };
        let policy = req.policy(&self.catalog);
        let (request, jails) = (req.clone(), self.jails.clone());
        let built = tokio::task::spawn_blocking(move || {
            let req = request;
            let code = match (&req.target, &rt) {
                (Target::Wasm(bytes), _) => Code::Module { bytes: bytes.clone(), args: &req.argv },
                (Target::Runtime(_), Some(rt)) => rt.code(),
                (Target::Runtime(name), None) => {
                    return Err(SlotError::Thread(format!("runtime {name} is gone")));
                }
            };
            let Some(policy) = policy else {
                return Err(SlotError::Thread(format!("policy {} is gone", req.policy_name)));
            };
            let recipe = Recipe::build(code, &policy, &runner).map_err(SlotError::Jail)?;
            Slot::start(Arc::new(recipe), true, &jails)
        })
        .await
        .map_err(|_| internal("the jail's builder ended abnormally"))?;
        built.map_err(|e| self.cold_refusal(req, e))
    }

    /// Why a jail built for `req` is not there: the request's own limit when it was too small to
    /// build the jail (400, naming it), else the host's failure (500, counted, and for a runtime
    /// one of its runs that failed as they started).
    fn cold_refusal(&self, req: &RunRequest, e: SlotError) -> ApiError {
        if let SlotError::Jail(stockade::Error::JailDied { limit: Some(limit), why }) = &e {
            let named = self.catalog.policies.get(&req.policy_name).map(Limits::of).unwrap_or_default();
            let l = &req.limits;
            let (field, asked, theirs) = match limit {
                JailLimit::Pids => ("limits.pids-max", l.pids_max, named.pids_max),
                JailLimit::Memory => ("limits.memory-max-bytes", l.memory_max_bytes, named.memory_max_bytes),
            };
            if asked != theirs {
                return ApiError::field(
                    field,
                    format!("{} is too small for a jail of runtime {}: {why}", asked.unwrap_or(0), req.runtime_name),
                );
            }
        }
        let why = e.to_string();
        // The runtime's jail, built for this run, failed: a run of the runtime failed as its jail
        // started it, as readiness counts one (only a run that starts clears it).
        match &req.target {
            Target::Runtime(name) if let Some(pool) = self.pools.get(name) => pool.run_failed(&why),
            _ => self.metrics.setup_failed("cold"),
        }
        incident(ErrorCode::JailSetupFailed, "the server could not build a jail for this run", &why)
    }
}

/// One request in the queue: counted in when made, out when dropped.
struct InQueue<'a>(&'a Engine);

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.0.queued.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.queued(-1);
    }
}

/// One run in progress: counted in when made, out when dropped, however the run's task ends
/// (a draining engine waits for none to be left).
struct Running<'a> {
    metrics: &'a Metrics,
    _tracked: Tracked,
}

impl Running<'_> {
    fn new(engine: &Engine) -> Running<'_> {
        engine.metrics.running(1);
        Running { metrics: &engine.metrics, _tracked: engine.running.track() }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.metrics.running(-1);
    }
}

fn internal(message: &str) -> ApiError {
    incident(ErrorCode::Internal, "internal error", message)
}

fn dup(streams: &Streams) -> Result<Streams, ApiError> {
    let Some((o, e)) = streams else { return Ok(None) };
    let d = |fd: &OwnedFd| fd.try_clone().map_err(|e| internal(&format!("cannot duplicate an output pipe: {e}")));
    Ok(Some((d(o)?, d(e)?)))
}

/// What the run brings to its jail: for an interpreter, its code framed on stdin (with its
/// arguments, then its stdin); for a program reading its code, the code; for a module, the
/// module's stdin. `cold`: the jail was built for this run.
fn start_of(req: &RunRequest, streams: Streams, cold: bool) -> Start {
    let stdin = match &req.target {
        Target::Wasm(_) => req.stdin.clone(),
        Target::Runtime(_) if !req.framed => req.code.clone().into_bytes(),
        Target::Runtime(_) => {
            let mut b = handover::frame(&req.code, &req.argv);
            b.extend_from_slice(&req.stdin);
            b
        }
    };
    let (stdout_to, stderr_to) = match streams {
        Some((o, e)) => (Some(o), Some(e)),
        None => (None, None),
    };
    Start {
        stdin,
        files: Some(Exchange { dir: WORK_DIR.into(), put: req.files.clone(), take: req.return_files.clone() }),
        limits: req.limits,
        stdout_to,
        stderr_to,
        live: None,
        host: req.host.clone().map(Into::into),
        argv_display: Some(shown_argv(req)),
        from_release: cold,
    }
}

/// The argument vector a report shows: the run's code, not the bootstrap.
fn shown_argv(req: &RunRequest) -> Vec<String> {
    let mut v = match &req.target {
        Target::Wasm(_) => vec!["module.wasm".to_string()],
        Target::Runtime(name) => vec![name.clone(), req.code.clone()],
    };
    v.extend(req.argv.iter().cloned());
    v
}

/// A run's report and the files taken back from it.
type Ran = (stockade::Report, Option<Taken>);

fn finished(gated: Result<Gated, SlotError>) -> Result<Ran, ApiError> {
    match gated {
        Ok(Gated::Ran(f)) => {
            let f = *f;
            Ok((f.report, f.files))
        }
        Ok(Gated::NotStarted(why)) => Err(incident(
            ErrorCode::JailSetupFailed,
            "the run's jail ended before the run started",
            &format!("the jail ended before the run: {why}"),
        )),
        Err(SlotError::Jail(stockade::Error::Filesystem(e))) => Err(ApiError::field("files", e.to_string())),
        Err(SlotError::Files(why)) => Err(ApiError::field("files", why)),
        Err(e @ (SlotError::Jail(_) | SlotError::Thread(_) | SlotError::Helper(_))) => {
            Err(incident(ErrorCode::JailSetupFailed, "the server could not run this run's jail", &e.to_string()))
        }
        Err(e @ SlotError::Panicked(_)) => Err(incident(
            ErrorCode::Internal,
            "internal error: the run's supervisor panicked; the run was taken down, the server goes on",
            &e.to_string(),
        )),
    }
}

/// A failure of the server's own (never of the request): the client gets `summary` and an
/// incident number, and the server's log gets `detail` under that number. The details (host
/// paths, the server's pid in cgroup names, errnos) are the operator's, not every client's.
pub fn incident(code: ErrorCode, summary: &str, detail: &str) -> ApiError {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static SINCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let since = *SINCE
        .get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let id = format!("{since}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    eprintln!("stockade serve: incident {id} ({code}): {detail}");
    ApiError::new(code, format!("{summary} (incident {id} in the server's log)"))
}
