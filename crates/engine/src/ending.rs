//! How a jail's thread ends, the same wherever a jail runs (a slot's thread, a spawner's helper,
//! a live interpreter's thread): the moment given after the answer, a panic named, and the test
//! builds' panic injection. Imports nothing of the engine's.
//!
//! Imports (layers): none.

use std::time::Duration;
use stockade::{Error, Gated};

/// How long work that is not the answer (a run's clean-up, a refill) waits after the answer is
/// sent: on a small host, the CPU the answer's last steps need.
pub(super) const AFTER_ANSWER: Duration = Duration::from_millis(5);

/// Test builds only: a panic on the jail's thread after a run whose stdout holds
/// `$STOCKADE_TEST_PANIC` (how `tests/serve.rs` proves that a panic ends one run, not the server).
#[cfg(debug_assertions)]
pub(super) fn inject_panic(gated: &Result<Gated, Error>) {
    if let (Some(marker), Ok(Gated::Ran(f))) = (std::env::var_os("STOCKADE_TEST_PANIC"), gated)
        && let (Some(out), Some(marker)) = (f.report.stdout.text.as_deref(), marker.to_str())
        && !marker.is_empty()
        && out.contains(marker)
    {
        panic!("injected by STOCKADE_TEST_PANIC");
    }
}

#[cfg(not(debug_assertions))]
pub(super) fn inject_panic(_: &Result<Gated, Error>) {}

/// A panic's message, when it has one.
pub(super) fn panic_words(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}
