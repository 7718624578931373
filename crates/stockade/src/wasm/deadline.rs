//! The runner's deadline (the wall-clock limit): a task of its tokio runtime
//! ([`wasi_runtime`], which wasmtime-wasi's host calls also run on) that ends the runner's
//! process at the limit, with the account of an interrupted guest.
//!
//! Imports: engine.rs, shared.rs, limits.rs, stdin.rs, exit.rs, mod.rs; never module.rs,
//! python.rs or runner.rs.

use super::exit::{finish, summary};
use super::limits::{TOLD, Times};
use super::shared::{Outcome, RunnerConfig};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use wasmtime::Trap;

/// How long a fuel-metered guest has, after the epoch tick, to reach its next check and trap
/// before its deadline ends the runner all the same: a guest waiting in a host call has no check
/// to reach.
const EPOCH_GRACE: Duration = Duration::from_millis(100);

/// The wall-clock limit, set as instantiation begins (`load` and `compile`: what it took before).
/// It counts from now, or from the guest's first read of its stdin (a waiting guest's code came,
/// see `stdin.rs`). The limit is a task of the runner's tokio runtime (see [`wasi_runtime`]),
/// whose one worker sleeps until it: no thread of its own. Then it ends the runner's process, and
/// with it the guest, whatever the guest is doing: running its code (which has no check of its
/// own, see [`EngineKind::Plain`](super::engine::EngineKind::Plain)) or waiting in a host call.
/// Its account is the runner's, as interrupted. A fuel-metered guest's code has epoch checks: it
/// traps at its next one, so the fuel it consumed is accounted for ([`EPOCH_GRACE`] later, it is
/// ended as the others are).
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
/// the account of an interrupted guest, from what the run told (see [`Told`](super::limits::Told)), and the process's
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
pub(super) fn wasi_runtime() -> Option<&'static tokio::runtime::Runtime> {
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
