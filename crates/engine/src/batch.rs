//! A batch's runs (`POST /v1/batches`): many runs of one Wasm guest's runtime, each in a fresh
//! instance of its guest, sharing a few jails of the library's
//! ([`stockade::runtime::Recipe::build_batch`]). The batch takes one run slot (waiting in the
//! queue as a run does) and, without waiting, up to one more per [`RUNS_PER_JAIL`] runs of those
//! free: a jail each, on a thread of its own, every jail taking the next run not taken yet. A run
//! that ends its jail (its wall clock past its own deadline's grace, its output past its cap with
//! `over-cap = "end"`, a kill by the kernel) is that run's report, and its thread builds another
//! jail for the runs left. The results come back as they end ([`Batch::next`]), each a run result
//! as `/v1/runs` gives, its report saying it shared a jail (`"jail": "batch"`, the batch's id),
//! and a verdict when it has an `expect`. A caller that lets go of the batch ends it: each jail
//! takes no run after the one it runs.
//!
//! Imports (layers): `budget`, `config`, `door`, `ending`, `slot`.

use crate::Engine;
use crate::budget::Reserved;
use crate::config::Kind;
use crate::ending::panic_words;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Instant;
use stockade::api::batch::{BatchAnswer, BatchBody, BatchEvent, BatchRequest, BatchSummary, check_batch, judge};
use stockade::api::{ApiError, ErrorCode, RunResult};
use stockade::runtime::{BATCH_GRACE_MS, Recipe, batch_turn};
use stockade::{Gated, Report, Start, Turned};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

/// Runs a jail of a batch is worth: a batch of fewer has one jail, of more one per as many
/// (within the run slots free when it starts).
pub const RUNS_PER_JAIL: usize = 16;

/// Jails in a row that could not be built, or ended before their first run, before a batch's
/// thread gives up on the runs left (each then a `setup-failed` report).
const BUILD_TRIES: u32 = 2;

/// A batch under way: its results as they end, until the last.
#[derive(Debug)]
pub struct Batch {
    pub id: String,
    runtime: String,
    results: mpsc::UnboundedReceiver<(u32, RunResult)>,
    total: u32,
    seen: u32,
    summary: BatchSummary,
    started: Instant,
    jails: Arc<AtomicU32>,
    engine: Arc<Engine>,
    /// The answer's room so far (every result held for the caller counts).
    room: Reserved,
}

/// What the batch's threads share.
struct Shared {
    id: String,
    req: BatchRequest,
    recipe: Recipe,
    next: AtomicUsize,
    jails: Arc<AtomicU32>,
    /// The jails' wall clock, ms (each run's own is within it).
    wall_ms: u64,
}

impl Engine {
    /// Checks a batch and admits it (a run slot, waiting in the queue; more when free), builds
    /// its recipe and starts its jails.
    pub async fn batch(self: &Arc<Self>, body: BatchBody) -> Result<Batch, ApiError> {
        let guests: Vec<&str> =
            self.runtimes.values().filter(|r| matches!(r.kind, Kind::Guest(_))).map(|r| r.name.as_str()).collect();
        let req = check_batch(body, &self.catalog, &guests)?;
        let Some(Kind::Guest(guest)) = self.runtimes.get(&req.runtime).map(|r| r.kind.clone()) else {
            return Err(ApiError::field("runtime", "not a Wasm guest's runtime"));
        };
        let first = self.take_slot().await?;
        let wanted = req.runs.len().div_ceil(RUNS_PER_JAIL).clamp(1, self.bounds.concurrency);
        let mut permits = vec![first];
        while permits.len() < wanted {
            let Ok(p) = self.slots.clone().try_acquire_owned() else { break };
            permits.push(p);
        }
        let policy =
            self.catalog.policies.get(&req.policy_name).ok_or_else(|| super::internal("the batch's policy is gone"))?;
        // Within the policy's (checked), so always set; the policy's when it were not.
        let wall_ms = req
            .limits
            .wall_timeout_ms
            .unwrap_or_else(|| u64::try_from(policy.wall_timeout.as_millis()).unwrap_or(u64::MAX));
        // The jails' clock has the grace of each run's own (see `BATCH_GRACE_MS`).
        let jail =
            stockade::policy::Limits { wall_timeout_ms: Some(wall_ms.saturating_add(BATCH_GRACE_MS)), ..req.limits };
        let policy = jail.applied_to(policy);
        let runner = self.runner.clone();
        let recipe = tokio::task::spawn_blocking(move || Recipe::build_batch(guest, &policy, &runner))
            .await
            .map_err(|_| super::internal("the batch's recipe builder ended abnormally"))?
            .map_err(|e| {
                super::incident(ErrorCode::JailSetupFailed, "the server cannot build a batch's jail", &e.to_string())
            })?;
        let id = format!("b-{}", crate::sessions::random_hex(8)?);
        let total = u32::try_from(req.runs.len()).unwrap_or(u32::MAX);
        let jails = Arc::new(AtomicU32::new(0));
        let shared =
            Arc::new(Shared { id: id.clone(), req, recipe, next: AtomicUsize::new(0), jails: jails.clone(), wall_ms });
        let (tx, results) = mpsc::unbounded_channel();
        for permit in permits {
            self.batch_thread(shared.clone(), tx.clone(), permit)?;
        }
        let summary = BatchSummary::default();
        let engine = self.clone();
        let runtime = shared.req.runtime.clone();
        Ok(Batch {
            id,
            runtime,
            results,
            total,
            seen: 0,
            summary,
            started: Instant::now(),
            jails,
            engine,
            room: Reserved::elsewhere(),
        })
    }

    /// Starts one of a batch's threads (counted by the engine's jails and runs), holding `permit`.
    fn batch_thread(
        self: &Arc<Self>,
        shared: Arc<Shared>,
        tx: mpsc::UnboundedSender<(u32, RunResult)>,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), ApiError> {
        let (jail, running) = (self.jails.track(), self.running.track());
        let spawned = std::thread::Builder::new().name("stockade-batch".into()).spawn(move || {
            let _held = (jail, running, permit);
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(&shared, &tx)));
            if let Err(payload) = served {
                eprintln!(
                    "stockade serve: internal error: a batch's thread panicked ({})",
                    panic_words(payload.as_ref())
                );
            }
        });
        spawned.map(drop).map_err(|e| super::internal(&format!("cannot start a batch's thread: {e}")))
    }
}

/// One thread of a batch: a jail at a time, each serving the runs it takes, until none is left
/// or the batch's caller is gone.
fn serve(shared: &Shared, tx: &mpsc::UnboundedSender<(u32, RunResult)>) {
    let mut failed = 0;
    while failed < BUILD_TRIES && shared.next.load(Ordering::SeqCst) < shared.req.runs.len() && !tx.is_closed() {
        let served = one_jail(shared, tx);
        failed = if served { 0 } else { failed + 1 };
    }
    // The runs left, when the jails could not be built: each says so.
    while !tx.is_closed() {
        let Some(i) = take(shared) else { break };
        let mut r = Report::new(&shared.req.policy_name, &shared.req.runtime, &[], std::time::Duration::ZERO);
        r.error = Some("the batch's jail could not be built (twice in a row); the server's log says why".into());
        send(shared, tx, i, r);
    }
}

/// The next run not taken yet.
fn take(shared: &Shared) -> Option<usize> {
    let i = shared.next.fetch_add(1, Ordering::SeqCst);
    (i < shared.req.runs.len()).then_some(i)
}

/// One jail serving runs until none is left, the caller is gone, or a run ends it: whether it
/// served a run.
fn one_jail(shared: &Shared, tx: &mpsc::UnboundedSender<(u32, RunResult)>) -> bool {
    let waiting = match shared.recipe.prestart() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("stockade serve: a batch's jail could not be built: {e}");
            return false;
        }
    };
    shared.jails.fetch_add(1, Ordering::SeqCst);
    let start = Start {
        limits: shared.req.limits,
        argv_display: Some(vec![shared.req.runtime.clone(), "(batch)".into()]),
        from_release: true,
        ..Start::default()
    };
    let mut current: Option<usize> = None;
    let mut served = false;
    let mut next = |turned: Turned| {
        match turned {
            Turned::Ready { .. } => {}
            Turned::Returned { report, .. } => {
                if let Some(i) = current.take() {
                    send(shared, tx, i, *report);
                    served = true;
                }
            }
            Turned::Refused(e) => {
                if let Some(i) = current.take() {
                    let mut r =
                        Report::new(&shared.req.policy_name, &shared.req.runtime, &[], std::time::Duration::ZERO);
                    r.error = Some(e.to_string());
                    send(shared, tx, i, r);
                }
            }
        }
        if tx.is_closed() {
            return None;
        }
        let i = take(shared)?;
        current = Some(i);
        let run = &shared.req.runs[i];
        let mut turn = batch_turn(&run.code, &run.argv, &run.stdin, run.limits, shared.wall_ms);
        turn.argv_display = Some(shown(&shared.req.runtime, run));
        Some(turn)
    };
    let ended = waiting.run_turns(start, &mut next);
    match (ended, current) {
        // The run under way ended the jail: its report is the jail's last.
        (Ok(Gated::Ran(f)), Some(i)) => {
            send(shared, tx, i, f.report);
            true
        }
        (Ok(Gated::Ran(f)), None) if !served => {
            // Ended before its first run: why, for the log (the runs left say to look there).
            let r = &f.report;
            let said = r.stderr.text.as_deref().unwrap_or("").trim();
            eprintln!(
                "stockade serve: a batch's jail ended before its first run: {} {} {said}",
                r.status.as_str(),
                r.error.as_deref().unwrap_or("")
            );
            false
        }
        (Ok(_), None) => served,
        (Ok(Gated::NotStarted(why)), Some(i)) => {
            failed_run(shared, tx, i, &why.to_string());
            served
        }
        (Err(e), Some(i)) => {
            failed_run(shared, tx, i, &e.to_string());
            served
        }
        (Err(e), None) => {
            eprintln!("stockade serve: a batch's jail failed: {e}");
            served
        }
    }
}

/// A run whose jail failed under it.
fn failed_run(shared: &Shared, tx: &mpsc::UnboundedSender<(u32, RunResult)>, i: usize, why: &str) {
    let mut r = Report::new(&shared.req.policy_name, &shared.req.runtime, &[], std::time::Duration::ZERO);
    r.error = Some(format!("the run's jail failed: {why}"));
    send(shared, tx, i, r);
}

/// The argument vector a run's report shows.
fn shown(runtime: &str, run: &stockade::api::batch::BatchRun) -> Vec<String> {
    let mut v = vec![runtime.to_string(), run.code.to_string()];
    v.extend(run.argv.iter().cloned());
    v
}

/// Sends run `i`'s result: its report marked as a batch's, its wall clock its own, its verdict.
fn send(shared: &Shared, tx: &mpsc::UnboundedSender<(u32, RunResult)>, i: usize, mut report: Report) {
    let run = &shared.req.runs[i];
    report.jail = Some("batch".into());
    report.batch_id = Some(shared.id.clone());
    if report.status != stockade::Status::SetupFailed {
        report.wall_timeout_ms = run.limits.wall_timeout_ms.unwrap_or(shared.wall_ms).min(shared.wall_ms);
    }
    let mut result = RunResult::new(report, None);
    result.verdict = run.expect.as_deref().map(|e| judge(&result.report, e, shared.req.compare));
    let _ = tx.send((u32::try_from(i).unwrap_or(u32::MAX), result));
}

impl Batch {
    /// The next event: a run's result as it ends (its room in the answers' budget held until
    /// the batch is dropped), then the summary, then `None`. A budget that has no room for a
    /// result ends the batch with an error event (503).
    pub async fn next(&mut self) -> Option<BatchEvent> {
        if self.seen > self.total {
            return None;
        }
        if self.seen == self.total {
            self.seen += 1;
            return Some(self.summary_event());
        }
        let Some((index, result)) = self.results.recv().await else {
            self.seen = self.total + 1;
            let error = super::internal("a batch's threads ended before its runs did");
            return Some(BatchEvent::Error { error });
        };
        let bytes = serde_json::to_vec(&result).map_or(0, |b| b.len());
        match self.engine.answers.reserve_bytes(bytes) {
            Ok(room) => self.room.join(room),
            Err(error) => {
                self.seen = self.total + 1;
                return Some(BatchEvent::Error { error });
            }
        }
        self.seen += 1;
        self.summary.count(&result);
        self.engine.metrics.batch_run(&self.runtime, result.report.status.as_str());
        Some(BatchEvent::Result { index, result: Box::new(result) })
    }

    fn summary_event(&mut self) -> BatchEvent {
        let mut summary = std::mem::take(&mut self.summary);
        summary.jails = self.jails.load(Ordering::SeqCst);
        summary.wall_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        BatchEvent::Summary { batch_id: self.id.clone(), summary }
    }

    /// Every result, in the runs' order, and the summary, with the answer's room.
    pub async fn answer(mut self) -> Result<crate::Held<BatchAnswer>, ApiError> {
        let mut results: Vec<Option<RunResult>> = (0..self.total).map(|_| None).collect();
        while let Some(event) = self.next().await {
            match event {
                BatchEvent::Result { index, result } => {
                    if let Some(slot) = results.get_mut(index as usize) {
                        *slot = Some(*result);
                    }
                }
                BatchEvent::Summary { batch_id, summary } => {
                    let results = results.into_iter().flatten().collect();
                    let room = std::mem::replace(&mut self.room, Reserved::elsewhere());
                    return Ok(crate::Held { value: BatchAnswer { batch_id, results, summary }, room });
                }
                BatchEvent::Error { error } => return Err(error),
            }
        }
        Err(super::internal("a batch ended without its summary"))
    }

    /// Lets go of the answer's room (a stream's lines, once written).
    pub fn release(&mut self) {
        self.room = Reserved::elsewhere();
    }
}
