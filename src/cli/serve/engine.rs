//! Running requests: admission (a bounded number of runs at once, a bounded queue behind them),
//! a warm jail when one waits and the request's limits allow, else a jail built for the request,
//! the hand-over, and the result. The jail work is synchronous and stays on the jail's own
//! thread; only the waiting is async.

use super::config::Config;
use super::metrics::Metrics;
use super::pool::{self, Code, Pool, Recipe, Slot, SlotError, WORK_DIR};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;
use stockade::api::{ApiError, Catalog, RunRequest, Target, status};
use stockade::layers::filesystem::exchange::Taken;
use stockade::{Exchange, Gated, JailLimit, Report, Start, handover};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The server's state.
#[derive(Debug)]
pub struct Engine {
    pub config: Config,
    /// What requests are checked against (from `config`).
    pub catalog: Catalog,
    pub metrics: Arc<Metrics>,
    /// Warm jails, by runtime (for its own policy).
    pub pools: BTreeMap<String, Arc<Pool>>,
    /// One permit per run at once.
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    running: AtomicUsize,
    idle: Notify,
    draining: AtomicBool,
    /// This binary: the Wasm runner inside the jails.
    runner: PathBuf,
    pub started: Instant,
}

/// A run that ended, and what it gave back.
#[derive(Debug)]
pub struct Ran {
    pub report: Report,
    pub files: Option<Taken>,
}

/// Where a run's output goes: into its report, or to pipes a streaming response reads.
pub type Streams = Option<(OwnedFd, OwnedFd)>;

impl Engine {
    /// Builds every runtime's recipe (the same checks a run does: guests installed, programs
    /// present, cgroups available) and its pool; refuses with the first runtime that cannot run
    /// here.
    pub fn new(config: Config, metrics: Arc<Metrics>) -> Result<Engine, String> {
        let runner = pool::runner().map_err(|e| format!("cannot find stockade's own binary: {e}"))?;
        let mut pools = BTreeMap::new();
        for rt in config.runtimes.values() {
            let Some(named) = config.policies.get(&rt.policy) else { continue };
            let pool = Pool::new(rt, &named.policy, &runner, metrics.clone())
                .map_err(|e| format!("{}: runtimes.{}: {e}", config.origin, rt.name))?;
            metrics.warm_target(&rt.name, rt.warm);
            pools.insert(rt.name.clone(), Arc::new(pool));
        }
        Ok(Engine {
            slots: Arc::new(Semaphore::new(config.concurrency)),
            catalog: config.catalog(),
            config,
            metrics,
            pools,
            queued: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            idle: Notify::new(),
            draining: AtomicBool::new(false),
            runner,
            started: Instant::now(),
        })
    }

    /// Starts filling the warm pools, and proving the runtimes without any (in the background).
    pub fn fill_pools(&self) {
        for p in self.pools.values() {
            tokio::spawn(p.clone().keep_filled());
        }
    }

    /// `Err` (503, naming the runtime and why) while a request's runtime cannot run here.
    pub fn available(&self, req: &RunRequest) -> Result<(), ApiError> {
        let Target::Runtime(name) = &req.target else { return Ok(()) };
        let Some(pool) = self.pools.get(name) else { return Ok(()) };
        pool.available().map_err(|why| {
            self.metrics.refused("runtime-unavailable");
            ApiError::new(status::UNAVAILABLE, "runtime-unavailable", format!("runtime {name} is unavailable: {why}"))
                .retry_after(5)
        })
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Stops taking runs: queued requests get 503, warm jails are taken down. Returns when no
    /// run is left and every jail's thread has taken its jail down (its cgroup removed).
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.slots.close();
        for p in self.pools.values() {
            p.stop();
        }
        loop {
            let notified = self.idle.notified();
            if self.running() == 0 {
                break;
            }
            notified.await;
        }
        while pool::live_jails() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// A place to run: at once when one is free, else in the queue (bounded in length and time).
    pub async fn admit(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        let draining = || ApiError::new(status::UNAVAILABLE, "draining", "the server is shutting down");
        if self.draining() {
            self.metrics.refused("draining");
            return Err(draining());
        }
        if let Ok(p) = self.slots.clone().try_acquire_owned() {
            return Ok(p);
        }
        if self.queued.fetch_add(1, Ordering::SeqCst) >= self.config.queue {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.metrics.refused("queue-full");
            return Err(ApiError::new(
                status::TOO_MANY_REQUESTS,
                "queue-full",
                format!(
                    "{} runs are running and {} waiting: try again shortly",
                    self.config.concurrency, self.config.queue
                ),
            )
            .retry_after(1));
        }
        self.metrics.queued(1);
        // Counted out however the wait ends: a client that hangs up while queued drops this
        // future mid-wait, and only a guard's `Drop` runs then.
        let in_queue = InQueue(self);
        let waited = tokio::time::timeout(self.config.queue_timeout, self.slots.clone().acquire_owned()).await;
        drop(in_queue);
        match waited {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => {
                self.metrics.refused("draining");
                Err(draining())
            }
            Err(_) => {
                self.metrics.refused("queue-timeout");
                Err(ApiError::new(
                    status::UNAVAILABLE,
                    "queue-timeout",
                    format!("no run slot came free within {} ms", self.config.queue_timeout.as_millis()),
                )
                .retry_after(1))
            }
        }
    }

    /// Runs an admitted request: a warm jail of its runtime when one waits and its limits allow,
    /// else one built for it. The run goes on (holding its permit) if the caller goes away.
    pub async fn execute(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        req: RunRequest,
        streams: Streams,
    ) -> Result<Ran, ApiError> {
        let t0 = Instant::now();
        let req = Arc::new(req);
        let warm_pool = match &req.target {
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
                Ok((ran, warm)) => (serde_json::to_value(ran.report.status).ok(), *warm),
                Err(_) => (None, false),
            };
            let status = status.and_then(|v| v.as_str().map(String::from)).unwrap_or_else(|| "refused".into());
            if status == "setup-failed" {
                engine.metrics.setup_failed(&req.runtime_name);
            }
            engine.metrics.run_done(&req.runtime_name, &status, warm, t0.elapsed().as_secs_f64());
            result.map(|(ran, _)| ran)
        });
        task.await.unwrap_or_else(|_| Err(internal("the run's task ended abnormally")))
    }

    fn runtime_policy(&self, runtime: &str) -> &str {
        self.config.runtimes.get(runtime).map_or("", |r| r.policy.as_str())
    }

    /// One run: a warm slot (a second, cold, try when it died just before its start), or a cold
    /// one. Returns whether a warm jail served it.
    async fn run_once(
        &self,
        req: &Arc<RunRequest>,
        pool: Option<Arc<Pool>>,
        streams: Streams,
    ) -> Result<(Ran, bool), ApiError> {
        if let Some(pool) = &pool
            && let Some(slot) = pool.take()
        {
            let ran = slot.run(start_of(req, dup(&streams)?, false)).await;
            pool.refill();
            match ran {
                // Counted and said by the pool; the run is tried once more, in a jail of its own.
                Ok(Gated::NotStarted(why)) => pool.died(&why),
                other => {
                    if matches!(other, Ok(Gated::Ran(_))) {
                        pool.holds();
                    }
                    return finished(other).map(|r| (r, true));
                }
            }
        }
        let slot = self.cold_slot(req).await?;
        finished(slot.run(start_of(req, streams, true)).await).map(|r| (r, false))
    }

    /// A jail built for one request (its own limits, its own module).
    async fn cold_slot(&self, req: &Arc<RunRequest>) -> Result<Slot, ApiError> {
        let runner = self.runner.clone();
        let rt = match &req.target {
            Target::Runtime(name) => self.config.runtimes.get(name).cloned(),
            Target::Wasm(_) => None,
        };
        let request = req.clone();
        let built = tokio::task::spawn_blocking(move || {
            let req = request;
            let code = match (&req.target, &rt) {
                (Target::Wasm(bytes), _) => Code::Module { bytes: bytes.clone(), args: &req.argv },
                (Target::Runtime(_), Some(rt)) => Code::Runtime(rt),
                (Target::Runtime(name), None) => {
                    return Err(SlotError::Thread(format!("runtime {name} is gone")));
                }
            };
            let recipe = Recipe::build(code, &req.policy, &runner).map_err(SlotError::Jail)?;
            Slot::start(Arc::new(recipe), true)
        })
        .await
        .map_err(|_| internal("the jail's builder ended abnormally"))?;
        built.map_err(|e| self.cold_refusal(req, e))
    }

    /// Why a jail built for `req` is not there: the request's own limit when it was too small to
    /// build the jail (400, naming it), else the host's failure (500, counted).
    fn cold_refusal(&self, req: &RunRequest, e: SlotError) -> ApiError {
        if let SlotError::Jail(stockade::Error::JailDied { limit: Some(limit), why }) = &e {
            let named = self.catalog.policies.get(&req.policy_name);
            let (field, asked, theirs) = match limit {
                JailLimit::Pids => {
                    ("limits.pids-max", req.policy.cgroups.pids_max, named.and_then(|p| p.cgroups.pids_max))
                }
                JailLimit::Memory => (
                    "limits.memory-max-bytes",
                    req.policy.cgroups.memory_max_bytes,
                    named.and_then(|p| p.cgroups.memory_max_bytes),
                ),
            };
            if asked != theirs {
                return ApiError::field(
                    field,
                    format!("{} is too small for a jail of runtime {}: {why}", asked.unwrap_or(0), req.runtime_name),
                );
            }
        }
        self.metrics.setup_failed("cold");
        incident("jail-setup-failed", "the server could not build a jail for this run", &e.to_string())
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

/// One run in progress: counted in when made, out (and a draining server told) when dropped,
/// however the run's task ends.
struct Running<'a>(&'a Engine);

impl Running<'_> {
    fn new(engine: &Engine) -> Running<'_> {
        engine.running.fetch_add(1, Ordering::SeqCst);
        engine.metrics.running(1);
        Running(engine)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.metrics.running(-1);
        self.0.idle.notify_waiters();
    }
}

fn internal(message: &str) -> ApiError {
    incident("internal", "internal error", message)
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
        wall_timeout: req.wall_timeout,
        stdout_max_bytes: req.stdout_max_bytes,
        stderr_max_bytes: req.stderr_max_bytes,
        stdout_to,
        stderr_to,
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

fn finished(gated: Result<Gated, SlotError>) -> Result<Ran, ApiError> {
    match gated {
        Ok(Gated::Ran(f)) => Ok(Ran { report: f.report, files: f.files }),
        Ok(Gated::NotStarted(why)) => Err(incident(
            "jail-setup-failed",
            "the run's jail ended before the run started",
            &format!("the jail ended before the run: {why}"),
        )),
        Err(SlotError::Jail(stockade::Error::Filesystem(e))) => Err(ApiError::field("files", e.to_string())),
        Err(e @ (SlotError::Jail(_) | SlotError::Thread(_))) => {
            Err(incident("jail-setup-failed", "the server could not run this run's jail", &e.to_string()))
        }
        Err(e @ SlotError::Panicked(_)) => Err(incident(
            "internal",
            "internal error: the run's supervising thread panicked; the run was taken down, the server goes on",
            &e.to_string(),
        )),
    }
}

/// A failure of the server's own (never of the request): the client gets `summary` and an
/// incident number, and the server's log gets `detail` under that number. The details (host
/// paths, the server's pid in cgroup names, errnos) are the operator's, not every client's.
pub fn incident(code: &'static str, summary: &str, detail: &str) -> ApiError {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static SINCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let since = *SINCE
        .get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()));
    let id = format!("{since}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    eprintln!("stockade serve: incident {id} ({code}): {detail}");
    ApiError::new(status::INTERNAL, code, format!("{summary} (incident {id} in the server's log)"))
}
