//! Answers held for their clients, bounded: every answer's bytes are reserved from one
//! engine-wide budget (`requests.answers-in-flight-max-bytes`) as its run is admitted — the most
//! it can take, from the run's output caps and what the report echoes — shrunk to its real size
//! once it is made ([`Reserved::shrink_to`]), and given back when the front drops it (when its
//! client has read the answer, or is gone). Past the budget, new runs get 503 `busy`. A workspace's
//! file given to a client holds its room the same way.
//!
//! Imports (layers): none.

use std::sync::Arc;
use stockade::api::{ApiError, ErrorCode, RunRequest};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a report takes besides the output and the echoed code (its figures, layers, notes).
const REPORT_BYTES: u64 = 64 * 1024;

/// The engine-wide budget of answer bytes, in KiB.
#[derive(Debug, Clone)]
pub struct Budget {
    kib: Arc<Semaphore>,
    max_kib: usize,
}

fn kib(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(1024)).unwrap_or(usize::MAX)
}

impl Budget {
    pub fn new(max_bytes: u64) -> Budget {
        let max_kib = kib(max_bytes).clamp(1, Semaphore::MAX_PERMITS);
        Budget { kib: Arc::new(Semaphore::new(max_kib)), max_kib }
    }

    /// Reserves the most `request`'s answer can take, or says the server is busy.
    pub fn reserve(&self, request: &RunRequest) -> Result<Reserved, ApiError> {
        let want = kib(bound(request)).max(1);
        if want > self.max_kib {
            return Err(ApiError::new(
                ErrorCode::Busy,
                format!(
                    "this run's answer could take {want} KiB, more than the server holds for all answers \
                     (requests.answers-in-flight-max-bytes): ask for tighter output caps or fewer files back"
                ),
            )
            .retry_after(1));
        }
        self.take(want)
    }

    /// Reserves `bytes` for an answer made already (a workspace's file), or says the server is
    /// busy: every answer held for a client counts, whatever made it.
    pub fn reserve_bytes(&self, bytes: usize) -> Result<Reserved, ApiError> {
        self.take(kib(bytes as u64).max(1).min(self.max_kib))
    }

    fn take(&self, want: usize) -> Result<Reserved, ApiError> {
        let busy = |why: String| ApiError::new(ErrorCode::Busy, why).retry_after(1);
        let permit = u32::try_from(want)
            .ok()
            .and_then(|n| self.kib.clone().try_acquire_many_owned(n).ok())
            .ok_or_else(|| {
                busy(
                    "too many answers are waiting for their clients (requests.answers-in-flight-max-bytes): \
                      try again shortly"
                        .into(),
                )
            })?;
        Ok(Reserved(Some(permit)))
    }
}

/// The bytes an answer may take: its report's output, escaped (a control byte is six in JSON),
/// the code and arguments the report echoes (escaped too), the files given back (base64), and
/// the rest of the report. A stream keeps less (raw output), but no more.
pub fn bound(r: &RunRequest) -> u64 {
    let cap = |c: Option<u64>| c.unwrap_or(u64::MAX);
    let output = cap(r.limits.stdout_max_bytes).saturating_add(cap(r.limits.stderr_max_bytes));
    let echoed = (r.code.len() + r.argv.iter().map(|a| a.len() + 3).sum::<usize>()) as u64;
    let files = r.return_files.as_ref().map_or(0, |p| p.max_bytes.div_ceil(3) * 4 + p.max_files as u64 * 512);
    output.saturating_add(echoed).saturating_mul(6).saturating_add(files).saturating_add(REPORT_BYTES)
}

/// An answer's reservation, until it is dropped.
#[derive(Debug)]
pub struct Reserved(Option<OwnedSemaphorePermit>);

impl Reserved {
    /// The room of an answer another engine holds (a server's, asked over its socket): none here.
    pub fn elsewhere() -> Reserved {
        Reserved(None)
    }

    /// Holds `other`'s room too, until this is dropped.
    pub fn join(&mut self, other: Reserved) {
        match (&mut self.0, other.0) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// Gives back what `bytes` do not need.
    pub fn shrink_to(&mut self, bytes: usize) {
        let Some(permit) = &mut self.0 else { return };
        let keep = kib(bytes as u64).max(1);
        let extra = permit.num_permits().saturating_sub(keep);
        if extra > 0 {
            drop(permit.split(extra));
        }
    }
}
