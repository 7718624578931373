//! The runner's end: its account of how the guest ended ([`summary`], [`ended`], or
//! [`load_error`] when it could not start it), written on the supervisor's channel (fd 3,
//! [`summary_out`]), its channels closed, and its exit ([`finish`]).
//!
//! Imports: shared.rs, limits.rs, stdin.rs; never deadline.rs, module.rs, component.rs or
//! runner.rs.

use super::limits::Times;
use super::shared::{ARTIFACT_FD, LINGER_MAX, Outcome, RunnerConfig, Summary, one_line};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

pub(super) fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// The supervisor's channel for the runner's account (fd 3), while it is open.
pub(super) fn summary_out() -> std::sync::MutexGuard<'static, Option<std::fs::File>> {
    static OUT: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);
    OUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Ends the runner: `summary` to the supervisor, its channels closed, then exit with `code`.
/// Called by whichever comes first of the run's end (`config`: the run's) and its deadline
/// (`None`, on the deadline's thread, the guest's code still running): the other waits for the
/// process to go.
pub(super) fn finish(summary: &Summary, code: i32, config: Option<&RunnerConfig>) -> ! {
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
        given: None,
    }
}

/// The runner's account of a guest that ended as `end` says (its outcome, exit code and
/// message), with `memory` (its peak and whether a growth was refused) and its times `t`.
pub(super) fn summary(
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
        given: None,
    }
}

/// How the guest's `_start` ended: returned or exited (with its code), out of fuel,
/// interrupted at its deadline, or trapped (the trap in one line).
pub(super) fn ended(result: wasmtime::Result<i32>) -> (Outcome, Option<i32>, Option<String>) {
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
