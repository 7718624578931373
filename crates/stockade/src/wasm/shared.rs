//! What the supervisor's side (`mod.rs`, `snapshot.rs`) and the runner's files share: the
//! runner's configuration ([`RunnerConfig`], one JSON argument), its account on fd 3
//! ([`Summary`]), that channel's fds and markers, the configuration cut into arguments
//! ([`pieces`]), and [`one_line`] for wasmtime's errors. The lowest of the runner's files;
//! `runner.rs` re-exports its public items at the paths they had (`mod.rs` [`RUNNER_ARG_MAX`]).
//!
//! Imports: no file of `crates/stockade/src/wasm/`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The fd the runner reports on (the supervisor's pipe, kept open across the exec).
pub const SUMMARY_FD: i32 = 3;
/// The fd a module compiled here goes back to the supervisor on (serialized, for its cache).
pub const ARTIFACT_FD: i32 = 4;
/// What the runner writes on fd 3 before it starts compiling.
pub const COMPILE_MARKER: &str = "{\"phase\":\"compile\"}";

/// A directory the guest sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preopen {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// Everything the runner needs, from the supervisor, as one JSON argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerConfig {
    /// The precompiled artifact to load; `None`: compile the module read from stdin.
    pub artifact: Option<PathBuf>,
    /// The artifact's device and inode when the supervisor checked it: the runner loads that
    /// file and no other.
    #[serde(default)]
    pub artifact_id: (u64, u64),
    /// With no artifact: the module's size in bytes, all of which stdin holds.
    pub module_bytes: Option<u64>,
    pub fuel: Option<u64>,
    pub timeout_ms: u64,
    pub memory_max_bytes: u64,
    pub table_elements_max: u64,
    pub instances_max: u32,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub preopens: Vec<Preopen>,
    /// The guest reads the runner's stdin (after the module's bytes, when it compiles one);
    /// `false`: its stdin is empty.
    #[serde(default)]
    pub guest_stdin: bool,
    /// The wall-clock limit counts from the first byte on stdin, not from the start: a guest
    /// started ahead of its run (a warm interpreter) waits for its code there.
    #[serde(default)]
    pub clock_from_stdin: bool,
    /// What of the guest runs.
    #[serde(default)]
    pub entry: Entry,
    /// The jail's host-call channel, as the runner's fds (requests, answers): the Python guest's
    /// `stockade_host` calls through it.
    #[serde(default)]
    pub host_calls: Option<(i32, i32)>,
    /// `stockade guest install` only, outside any jail: the Python guest's run writes to this file
    /// the list of the pages of its linear memory it wrote and those it only read (see `pages.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_pages: Option<PathBuf>,
    /// In a jail, as its init: once its summary is written and its fds closed, the runner does
    /// not exit but waits for its supervisor's word (see
    /// [`Job::announces_end`](crate::Job::announces_end)): its cgroup frozen, then a kill after
    /// the answer, so that the kernel's taking down of this process (a millisecond on a small
    /// machine) is not on the answer's way; or `SIGUSR1`, to exit. At most [`LINGER_MAX`]. Not
    /// for a runner run alone.
    #[serde(default)]
    pub linger: bool,
    /// The guest serves turns (a live session's interpreter, see `turns.rs`): their frames come
    /// on the runner's stdin, which the guest never reads itself, and the runner says each one's
    /// end on fd 3. Each turn's clock is its supervisor's: the runner keeps no deadline of its own.
    #[serde(default)]
    pub turns: bool,
    /// The guest runs a batch's runs (see `batch.rs`): each one's frame comes on the runner's
    /// stdin, runs in a fresh instance of its own (a process forked from this one, whose own
    /// instance never runs), and its end is said on fd 3.
    #[serde(default)]
    pub batch: bool,
    /// A live Python guest's image files: the fd it hibernates into, the one it resumes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<ImageFds>,
}

/// A live Python guest's image files, as fds the supervisor passed (see `image.rs`): the file it
/// hibernates into, the image it resumes from (`None`: a fresh interpreter), and whether the
/// resumed one is a fork's (its `random` drawn again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ImageFds {
    pub hibernate: i32,
    pub resume: Option<i32>,
    pub reseed: bool,
}

/// What of the guest the runner calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Entry {
    /// A WASI preview 1 command module's `_start`, with `argv`.
    #[default]
    Start,
    /// The pre-initialized Python guest (a component, see `component.rs`): a fresh instance of
    /// its snapshot, whose `run` export gets the code and `args` as `sys.argv[1:]` (no code: both
    /// come framed on stdin). `argv` is only shown.
    PythonRun { code: Option<String>, args: Vec<String> },
}

/// How the guest ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// `_start` returned or the guest called `proc_exit`.
    Exited,
    /// The guest ran out of fuel.
    FuelExhausted,
    /// Its deadline (the wall-clock limit) ended it.
    Interrupted,
    /// Any other trap (unreachable, stack exhausted, out-of-bounds...).
    Trap,
    /// The runner could not load or start the guest.
    LoadError,
}

/// What the runner reports on fd 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Summary {
    pub outcome: Outcome,
    pub guest_exit_code: Option<i32>,
    /// The trap or load error, one line.
    pub message: Option<String>,
    pub fuel_consumed: Option<u64>,
    /// Largest linear memory the guest had.
    pub memory_peak_bytes: u64,
    /// A memory growth was refused at `wasm.memory-max-bytes`.
    pub memory_limit_hit: bool,
    pub load_ms: f64,
    /// Compiling the module here (no precompiled artifact yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<f64>,
    pub instantiate_ms: f64,
    pub run_ms: f64,
    /// The runner's peak resident set (its own, as its reaping would have told).
    #[serde(default)]
    pub max_rss_bytes: u64,
    /// What the code gave back (its value), as its runtime wrote it (see [`crate::Report::give`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<String>,
}

/// The longest a runner waits for its supervisor's word after its account (see
/// [`RunnerConfig::linger`]): a backstop; the word comes as soon as the supervisor has read the
/// account.
pub const LINGER_MAX: Duration = Duration::from_secs(1);

/// The longest piece of the runner's configuration in one argument: the kernel refuses an
/// exec with an argument over 128 KiB (`MAX_ARG_STRLEN`), and a guest's arguments can be more.
pub const RUNNER_ARG_MAX: usize = 96 * 1024;

/// `text` in pieces of at most [`RUNNER_ARG_MAX`] bytes, each ending on a character boundary.
pub(crate) fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(RUNNER_ARG_MAX);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

/// An error chain in one line, without backtraces.
pub(super) fn one_line(e: &wasmtime::Error) -> String {
    // The chain's messages, without the guest's backtrace (a context of many lines).
    let skip = usize::from(e.downcast_ref::<wasmtime::WasmBacktrace>().is_some());
    let said: Vec<String> =
        e.chain().skip(skip).filter_map(|c| c.to_string().lines().next().map(str::to_string)).collect();
    said.join(": ")
}
