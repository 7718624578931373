//! stockade: a Linux process-level jail supervisor.
//!
//! Every run forks one child into fresh namespaces (user, pid, mount, net, ipc, uts, cgroup),
//! builds it a minimal read-only root holding only what the policy grants, applies rlimits,
//! switches it to an unprivileged identity, execs the program from an fd opened before fork,
//! kills the whole run at the wall-clock limit, and reports exactly what happened — including,
//! for each isolation layer, whether the kernel enforced it.
//!
//! ```no_run
//! use stockade::{Job, Output, Plan, Policy, Status};
//!
//! let mut policy = Policy::builtin();
//! policy.add_read_write("/srv/work", "api")?;
//! let job = Job::new("/bin/sh").args(["-c", "echo hi > /srv/work/out"]);
//! let report = Plan::prepare(&policy, &job)?.run(Output::Capture)?;
//! assert_eq!(report.status, Status::Ok);
//! println!("{}", report.to_json());
//! # Ok::<(), stockade::Error>(())
//! ```
//!
//! The pipeline is typed: [`PolicyFile`](policy::PolicyFile) (TOML) → [`Policy`] (validated) →
//! [`Plan`] (fds open, C strings built, every check done; reusable) → [`Report`].
//!
//! # Compatibility
//!
//! Linux ≥ 5.12 (`clone3`, `close_range`, `mount_setattr`, pidfd `waitid`); `/proc` as
//! `pid-only` needs ≥ 5.8 (`subset=pid`). Unprivileged callers need user namespaces. Layers are
//! not silently degraded: a namespace the kernel refuses stops the run before the program
//! starts, with the sysctl to check. Every layer appears in [`Report::enforcement`] as
//! `enforced`, `partial` or `not-enforced` with the reason (a layer the policy switched off is
//! `not-enforced`, saying so).
//!
//! # Threads
//!
//! [`Plan::run`] may be called from many threads at once, on one plan or many: each run has its
//! own pipes and pidfd, and no global state. The child between `clone3` and `execveat` makes raw
//! system calls only on data built before the fork — no allocation, no locks, no panics — so a
//! lock held by another thread at fork time cannot hang it. The child also closes every fd it
//! inherited except its own, so concurrent runs never hold each other's pipes. The child is
//! created without an exit signal, so a caller's `SIGCHLD` handling or `waitpid(-1)` cannot take
//! its status. The parent-death signal follows the *thread* that called [`Plan::run`], which
//! stays blocked in it until the run ends.
//!
//! # Test strategy
//!
//! Unit tests cover policy parsing and validation (exact messages), plan building and path
//! resolution against the real host tree, and the report format. Integration tests in `tests/`
//! run the built binary and observe from outside the jail: a file not written, a listener not
//! contacted, a background process gone, a timeout that returns on time. A test allocator proves
//! the child never allocates. Tests that need root say so when they skip.

#![deny(unsafe_code)]

pub mod api;
pub mod audit;
mod child;
pub mod doctor;
pub mod egress;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod handover;
pub mod helper;
pub mod host;
pub mod input;
pub mod layers;
mod leftovers;
pub mod plan;
pub mod policy;
pub mod program;
pub mod report;
#[cfg(feature = "wasm")]
pub mod runtime;
mod supervisor;
#[allow(unsafe_code)]
pub(crate) mod sys;
#[cfg(feature = "wasm")]
pub mod wasm;
mod wire;

pub use child::{Stage, in_forked_child};
pub use error::{Error, JailLimit};
pub use plan::{Job, Plan};
pub use policy::{Policy, PolicyError};
pub use report::{Enforcement, LayerReport, Layers, Report, Status};
pub use supervisor::{
    Answerer, Cleanup, Exchange, Finished, Gate, Gated, Host, HostCalls, InProcess, JoinNet, Lend, LiveRun, NetJoined,
    Output, Prepared, ReadAccount, Serving, Start, Tool, Turn, TurnCalls, TurnEnd, TurnTold, Turned,
};

/// Prepares and runs one job under a policy: `Plan::prepare(policy, job)?.run(output)`.
pub fn run(policy: &Policy, job: &Job, output: Output<'_>) -> Result<Report, Error> {
    Plan::prepare(policy, job)?.run(output)
}

/// A report for a run refused before it started (for callers that always want a report).
pub fn refused_report(policy: &str, job: &Job, error: &Error) -> Report {
    let argv: Vec<String> = std::iter::once(job.program.clone()).chain(job.args.iter().cloned()).collect();
    Report {
        error: Some(error.to_string()),
        stockade_exit_code: error.exit_code(),
        wall_timeout_ms: 0,
        ..Report::new(policy, &job.program, &argv, std::time::Duration::ZERO)
    }
}
