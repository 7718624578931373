//! The limits of a guest's store in the runner ([`Limits`], wasmtime's `ResourceLimiter`: what
//! the guest may take, and what it asked for), how long loading and instantiating took
//! ([`Times`]), and what a run has told so far ([`Told`]), which its deadline (`deadline.rs`)
//! reads from another thread.
//!
//! Imports: shared.rs; never turns.rs, store.rs or any file above them.

use super::shared::RunnerConfig;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;

/// Limits the guest's store and remembers what it asked for.
pub(super) struct Limits {
    memory_max: usize,
    table_elements_max: usize,
    instances_max: usize,
    pub(super) memory_peak: usize,
    pub(super) memory_limit_hit: bool,
    /// The largest table asked for.
    table_peak: usize,
    /// How many memories and tables were made.
    memories_made: usize,
    tables_made: usize,
    /// A run's: its memory figures are told as they change (see [`Told`]).
    told: bool,
}

impl Limits {
    /// A run's limits (`c`'s; `instances_max`: the policy's for a module, the guest's own for the
    /// Python component).
    pub(super) fn of(c: &RunnerConfig, instances_max: u32) -> Limits {
        Limits {
            memory_max: usize::try_from(c.memory_max_bytes).unwrap_or(usize::MAX),
            table_elements_max: usize::try_from(c.table_elements_max).unwrap_or(usize::MAX),
            instances_max: instances_max as usize,
            told: true,
            ..Limits::none()
        }
    }

    /// No limit: a preloaded guest's fresh instance is made under these, and what it took is
    /// recorded, to be checked against each run's own limits ([`Limits::admits`]).
    pub(super) fn none() -> Limits {
        Limits {
            memory_max: usize::MAX,
            table_elements_max: usize::MAX,
            instances_max: PRELOAD_INSTANCES_MAX,
            memory_peak: 0,
            memory_limit_hit: false,
            table_peak: 0,
            memories_made: 0,
            tables_made: 0,
            told: false,
        }
    }

    /// Tells the run's memory figures (see [`Told`]), when these are a run's limits.
    pub(super) fn tell(&self) {
        if self.told {
            TOLD.memory_peak.store(self.memory_peak, Ordering::Relaxed);
            TOLD.memory_limit_hit.store(self.memory_limit_hit, Ordering::Relaxed);
        }
    }

    /// The largest linear memory asked for so far, in bytes: right after instantiating, the
    /// size of the guest's memory as its image made it.
    pub(super) fn memory_peak(&self) -> usize {
        self.memory_peak
    }

    /// Whether a memory growth was refused (since [`Limits::turn_begins`]).
    pub(super) fn memory_limit_hit(&self) -> bool {
        self.memory_limit_hit
    }

    /// A turn of a guest that serves turns begins: a refused growth is counted from here.
    pub(super) fn turn_begins(&mut self) {
        self.memory_limit_hit = false;
    }

    /// Whether these limits would have let an instance be made that took `took` (one instance,
    /// or the Python component's fixed number): otherwise a run instantiates afresh, under its
    /// own limits, and fails as it always did.
    pub(super) fn admits(&self, took: &Limits) -> bool {
        took.memory_peak <= self.memory_max
            && took.table_peak <= self.table_elements_max
            && took.memories_made <= self.memories()
            && took.tables_made <= self.tables()
            && self.instances_max >= 1
    }
}

/// At most this many instances, memories and tables (×4) for a preloaded guest's instance.
const PRELOAD_INSTANCES_MAX: usize = 1024;

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        let admitted = desired <= self.memory_max;
        if admitted {
            self.memories_made += usize::from(current == 0);
            self.memory_peak = self.memory_peak.max(desired);
        } else {
            self.memory_limit_hit = true;
        }
        self.tell();
        Ok(admitted)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        self.tables_made += usize::from(current == 0);
        self.table_peak = self.table_peak.max(desired);
        Ok(desired <= self.table_elements_max)
    }

    fn instances(&self) -> usize {
        self.instances_max
    }

    fn tables(&self) -> usize {
        self.instances_max * 4
    }

    fn memories(&self) -> usize {
        self.instances_max
    }
}

/// How long loading and instantiating took, and when the guest started.
#[derive(Debug, Clone, Copy)]
pub(super) struct Times {
    pub(super) load: Duration,
    pub(super) compile: Option<Duration>,
    pub(super) instantiate: Duration,
    pub(super) started: Instant,
}

/// What a run has told so far, for its deadline to account for it from another thread (see
/// `deadline.rs`): its times once its guest's code starts, its memory figures as they change,
/// and whether its guest's call has returned.
pub(super) struct Told {
    pub(super) times: std::sync::OnceLock<Times>,
    pub(super) memory_peak: AtomicUsize,
    pub(super) memory_limit_hit: AtomicBool,
    pub(super) returned: AtomicBool,
}

pub(super) static TOLD: Told = Told {
    times: std::sync::OnceLock::new(),
    memory_peak: AtomicUsize::new(0),
    memory_limit_hit: AtomicBool::new(false),
    returned: AtomicBool::new(false),
};

/// Tells the run's times, as its guest's code starts (see [`Told`]).
pub(super) fn tell(times: Times) -> Times {
    let _ = TOLD.times.set(times);
    times
}

/// Tells that the guest's call returned (see [`Told`]): the run's own end accounts for it, not
/// its deadline.
pub(super) fn returned() {
    TOLD.returned.store(true, Ordering::SeqCst);
}
