//! The child: from `clone3` to `execveat`, straight-line, async-signal-safe.
//!
//! Nothing here allocates, panics or takes a lock: the supervisor may have had other threads at
//! fork time, and any of them could have held the allocator's lock. Every value used was built by
//! the parent (`plan.rs`); every call is a `sys` wrapper around one system call. Tests install a
//! global allocator that aborts when [`in_forked_child`] is true.
//!
//! Process layout inside the run's pid namespace:
//! - PID 1 is this child after setup: a tiny init that reaps orphans and, when the program exits,
//!   reports its wait status, kills and reaps everything left in the namespace, reports what it
//!   all used and that the namespace is empty, and exits. It holds no fd but the report pipe and
//!   is not dumpable, so the program cannot read its memory, environment or fds through `/proc/1`.
//! - PID 2 is the program, with normal signal semantics (not those of an init).
//! - Code of the supervisor's process run instead of a program ([`InChild`]) is PID 1 itself: it
//!   starts no process, so there is nothing for an init to reap or to empty, and a copy of this
//!   process (with its page tables, and their tear-down) is spared for each run. It keeps the
//!   report pipe only to say which signal ended it when PID 1 could not be ended by it
//!   ([`on_ending_signal`]); the supervisor believes no more of it than the code's exit shows.
//!
//! Imports (layers): `layers`, `report`, `sys`, `wire`.

use crate::layers::cgroup;
use crate::layers::fds::{self, ChildFds};
use crate::layers::filesystem::{self, FsPlan};
use crate::layers::identity::{self, IdPlan};
use crate::layers::landlock::{self, LandlockPlan};
use crate::layers::network::{self, NetPlan};
use crate::layers::privileges::{self, PrivPlan};
use crate::layers::rlimit::{self, RlimitPlan};
use crate::layers::seccomp::{self, SeccompPlan};
use crate::layers::session;
use crate::layers::uts::{self, UtsPlan};
use crate::report::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SETUP_FAILED};
use crate::sys::{self, CStrArray, Errno};
pub use crate::wire::{Failure, Stage};
use crate::wire::{Msg, Usage};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static IN_CHILD: AtomicBool = AtomicBool::new(false);

/// The signal the supervisor sends the run's init at the deadline (with a pid namespace): init
/// kills every process of the run and reaps the program, so its CPU time is accounted. SIGKILL
/// follows if init does not exit promptly.
pub const DEADLINE_SIGNAL: i32 = libc::SIGUSR1;

/// What init's deadline handler kills: -1 (everything in the pid namespace but init), set before
/// the handler is installed.
static KILL_TARGET: AtomicI32 = AtomicI32::new(0);

/// True in a forked jail child before exec. Test allocators use it to prove the child never
/// allocates.
pub fn in_forked_child() -> bool {
    IN_CHILD.load(Ordering::Relaxed)
}

/// Everything the child needs, borrowed from the parent's plan and per-run fds.
#[derive(Debug)]
pub struct ChildArgs<'a> {
    pub fds: ChildFds<'a>,
    /// Read end of the release channel; the parent keeps the other end for the whole run.
    pub sync: RawFd,
    /// Write end of the report pipe (close-on-exec).
    pub report: RawFd,
    pub fs: &'a FsPlan,
    /// This run's detached mounts of the bind sources (root's supervisor), close-on-exec.
    pub trees: &'a [RawFd],
    pub uts: &'a UtsPlan,
    pub network: &'a NetPlan,
    pub rlimits: &'a RlimitPlan,
    pub id: &'a IdPlan,
    pub privileges: &'a PrivPlan,
    pub landlock: &'a LandlockPlan,
    /// This run's Landlock ruleset, built by the parent.
    pub ruleset: Option<RawFd>,
    pub seccomp: &'a SeccompPlan,
    /// The prepared fd of the file to execute.
    pub exe: RawFd,
    pub argv: &'a CStrArray<'a>,
    pub envp: &'a CStrArray<'a>,
    /// The `tasks` files of the run's v1 cgroup leaves, opened by the parent (close-on-exec).
    pub cgroup_tasks: &'a [RawFd],
    /// Enter the cgroup namespace after the move into the v1 leaves (`clone3` left it out).
    pub cgroup_namespace_after_move: bool,
    /// The run has its own pid namespace (init is PID 1 of it).
    pub pid_namespace: bool,
    /// The supervisor's argv and environ areas ([start, end) each), which init inherited and
    /// scrubs: the program could read them through `/proc/1/cmdline`.
    pub scrub: sys::ArgsAreas,
    /// The jail runs code of this process instead of exec'ing the program (its init does, with a
    /// pid namespace; PID 2 otherwise).
    pub in_process: Option<InChild<'a>>,
}

/// What the jail runs when it runs code of the supervisor's process instead of exec'ing (see
/// [`crate::InProcess`]): the jail's every layer applied as for an exec, then what an exec
/// would have done by itself (fds closed, signal handlers set), then `entry(argv)`.
#[derive(Debug, Clone, Copy)]
pub struct InChild<'a> {
    pub entry: fn(&[std::ffi::CString]) -> i32,
    pub argv: &'a [std::ffi::CString],
    /// The fds above the program's (0-2 and the extra channels) it keeps (sorted): the code's
    /// own, opened in the supervisor's process before the build, and the report pipe when the
    /// code is the jail's init.
    pub keep: &'a [RawFd],
    /// The supervisor's handlers of the fault signals, which the code relies on.
    pub faults: &'a sys::FaultHandlers,
}

/// Bytes of stack for the program's process between its clone and its exec.
pub const SPAWN_STACK_BYTES: usize = 64 * 1024;

/// The jail, in order. Never returns. `spawn_stack` is this process's own (copy-on-write) buffer
/// for the program's stack until its exec.
pub fn enter(a: &ChildArgs<'_>, spawn_stack: &mut [std::mem::MaybeUninit<u8>]) -> ! {
    IN_CHILD.store(true, Ordering::Relaxed);
    if let Err(f) = setup(a) {
        send(a.report, Msg::Failure(f));
        sys::exit(EXIT_SETUP_FAILED);
    }
    if let Some(code) = &a.in_process {
        if a.pid_namespace {
            // It starts no process (see `crate::InProcess`): no orphan to reap, nothing to
            // empty. It is the namespace's init itself, one copy of this process fewer; the
            // supervisor reads its end from its own wait status.
            in_process(code, a.report, 3 + a.fds.extra.len(), true)
        }
        match sys::fork_plain() {
            Ok(0) => in_process(code, a.report, 3 + a.fds.extra.len(), false),
            Ok(pid) => init(a.report, pid, a.pid_namespace),
            Err(e) => {
                send(a.report, Msg::Failure(Failure { stage: Stage::Spawn, detail: 0, errno: e }));
                sys::exit(EXIT_SETUP_FAILED)
            }
        }
    }
    // The program shares init's memory until its exec (init waits meanwhile): no page tables
    // are copied, and nothing it touches before exec is seen by anyone but init.
    match sys::spawn_shared(spawn_stack, program, a) {
        Err(e) => {
            send(a.report, Msg::Failure(Failure { stage: Stage::Spawn, detail: 0, errno: e }));
            sys::exit(EXIT_SETUP_FAILED)
        }
        Ok(pid) => init(a.report, pid, a.pid_namespace),
    }
}

fn at(stage: Stage) -> impl Fn(Errno) -> Failure {
    move |errno| Failure { stage, detail: 0, errno }
}

fn at_step(stage: Stage) -> impl Fn((u32, Errno)) -> Failure {
    move |(detail, errno)| Failure { stage, detail, errno }
}

fn setup(a: &ChildArgs<'_>) -> Result<(), Failure> {
    // First: if the supervisor dies from here on, so do we (and with us, as PID 1, the run).
    sys::set_parent_death_signal(libc::SIGKILL).map_err(at(Stage::ParentDeath))?;
    // Into the v1 cgroups before anything else is charged; fds closes the files right after.
    cgroup::apply(a.cgroup_tasks, a.cgroup_namespace_after_move).map_err(at_step(Stage::Cgroup))?;
    fds::apply(&a.fds).map_err(at(Stage::Fds))?;
    // The supervisor writes the id maps meanwhile.
    wait_byte(a.sync, Stage::Release)?;
    // The id maps are written: become the inside uid/gid now. In a user namespace the child keeps
    // its namespace capabilities (its old uid was not the namespace's root) for the mounts below,
    // and files it creates on its tmpfs need a mapped owner. Exec as a non-root uid drops them.
    identity::apply(a.id).map_err(at_step(Stage::Identity))?;
    filesystem::apply(a.fs, a.trees, a.sync).map_err(at_step(Stage::Filesystem))?;
    uts::apply(a.uts).map_err(at(Stage::Hostname))?;
    // The proxy's socket, in this namespace, while there are capabilities to bring its loopback up.
    network::apply(a.network, a.sync).map_err(at_step(Stage::Network))?;
    session::apply().map_err(at_step(Stage::Session))?;
    rlimit::apply(a.rlimits).map_err(at_step(Stage::Rlimits))?;
    // Mounts and the hostname needed the namespace's capabilities; from here on there are none.
    privileges::apply(a.privileges).map_err(at_step(Stage::Privileges))?;
    // After the mounts (a restricted process cannot mount) and no_new_privs (which it needs).
    landlock::apply(a.landlock, a.ruleset).map_err(at_step(Stage::Landlock))?;
    // Last: from here until exec only calls the filters allow are made.
    seccomp::apply(a.seccomp, a.sync).map_err(at_step(Stage::Seccomp))?;
    watch_parent(a).map_err(at(Stage::Watch))?;
    sys::reset_signals().map_err(at(Stage::Signals))?;
    wait_byte(a.sync, Stage::Go)
}

/// Blocks for one byte from the supervisor; end of file (it died, or dropped a prestarted jail)
/// ends this process quietly.
fn wait_byte(sync: RawFd, stage: Stage) -> Result<(), Failure> {
    let mut byte = [0u8; 1];
    match sys::read(sync, &mut byte) {
        Ok(1) => Ok(()),
        Ok(_) => sys::exit(EXIT_SETUP_FAILED),
        Err(e) => Err(Failure { stage, detail: 0, errno: e }),
    }
}

/// Changing ids cleared the parent-death signal and reset dumpability: re-arm the signal, check
/// the parent did not die in between (its end of the sync channel would have hung up), make this
/// process non-dumpable and scrub the supervisor's command line before the program can exist to
/// look at them.
fn watch_parent(a: &ChildArgs<'_>) -> Result<(), Errno> {
    sys::set_parent_death_signal(libc::SIGKILL)?;
    if sys::peer_gone(a.sync) {
        sys::exit(EXIT_SETUP_FAILED);
    }
    sys::set_not_dumpable()?;
    // /proc/1/cmdline is readable by anyone in the namespace: no supervisor argv or environ in it.
    sys::scrub_args(&a.scrub);
    sys::set_name(c"stockade-init");
    Ok(())
}

/// PID 2: the program.
fn program(a: &ChildArgs<'_>) -> ! {
    let errno = sys::execveat(a.exe, a.argv, a.envp);
    send(a.report, Msg::Failure(Failure { stage: Stage::Exec, detail: 0, errno }));
    sys::exit(if errno.0 == libc::ENOENT { EXIT_NOT_FOUND } else { EXIT_NOT_EXECUTABLE })
}

/// PID 1 (with a pid namespace), else PID 2, running code of the supervisor's process: this
/// process, or a copy of it (not sharing its memory), so of the process that built the jail,
/// which had a single thread then (see [`crate::InProcess`]): it may allocate. First what an
/// exec would have done: every fd but the program's and the code's own closed (the supervisor's
/// channels, the mount trees: all close-on-exec), and the fault handlers the code relies on set
/// again (the setup reset all).
///
/// As init (`as_init`), it keeps the report pipe ([`InChild::keep`] holds it), and a signal that
/// would have ended it had it not been PID 1 ends it as if it had: its wait status is reported
/// on the pipe, which the supervisor takes for the program's ([`on_ending_signal`]).
fn in_process(code: &InChild<'_>, report: RawFd, first_free: usize, as_init: bool) -> ! {
    let handlers = code.faults.restore().and_then(|()| if as_init { ending_signals_reported(report) } else { Ok(()) });
    if let Err(errno) = handlers {
        send(report, Msg::Failure(Failure { stage: Stage::Signals, detail: 0, errno }));
        sys::exit(EXIT_SETUP_FAILED);
    }
    let first = u32::try_from(first_free).map_err(|_| Errno(libc::EINVAL));
    if let Err(errno) = first.and_then(|first| sys::close_from_except(first, code.keep)) {
        send(report, Msg::Failure(Failure { stage: Stage::Fds, detail: 0, errno }));
        sys::exit(EXIT_SETUP_FAILED);
    }
    sys::set_name(c"stockade-runner");
    IN_CHILD.store(false, Ordering::Relaxed);
    sys::exit((code.entry)(code.argv))
}

/// The signals whose default action ends a process, other than SIGKILL and the faults: PID 1 of
/// a namespace does not get them when it sends them itself or the kernel sends them for its own
/// acts (a write to a closed pipe, one past `rlimits.file-size-bytes`, an `abort`), only from a
/// handler. A program would have been ended by each.
const ENDING_SIGNALS: [libc::c_int; 16] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
];

/// Where [`on_ending_signal`] reports (the report pipe), set before the handlers are installed.
static REPORT: AtomicI32 = AtomicI32::new(-1);

/// Installs [`on_ending_signal`] for each of [`ENDING_SIGNALS`]; and, since no init of ours reaps
/// for the code, a process it should start anyway is reaped by the kernel as it exits (SIGCHLD
/// ignored) rather than left a zombie counted against `limits.pids-max`.
fn ending_signals_reported(report: RawFd) -> Result<(), Errno> {
    REPORT.store(report, Ordering::Relaxed);
    ENDING_SIGNALS.iter().try_for_each(|&sig| sys::set_handler(sig, on_ending_signal))?;
    sys::ignore_signal(libc::SIGCHLD)
}

/// A signal that would have ended the code had it not been its namespace's init: the wait
/// status of a process it killed (no core: the jail dumps none) is reported as init would have
/// reported its program's, and the code ends.
extern "C" fn on_ending_signal(sig: libc::c_int) {
    send(REPORT.load(Ordering::Relaxed), Msg::Exit(sig));
    sys::exit(128 + sig)
}

extern "C" fn on_deadline(_sig: libc::c_int) {
    let target = KILL_TARGET.load(Ordering::Relaxed);
    if target != 0 {
        sys::kill(target, libc::SIGKILL);
    }
}

/// PID 1: keep only the report pipe, reap everything, report the program's status when it
/// exits, then exit. In a pid namespace it first kills and reaps what is left of the run and
/// reports its usage ([`emptied`]): the supervisor can answer before the kernel has taken the
/// namespaces down.
fn init(report: RawFd, program: i32, pid_namespace: bool) -> ! {
    if pid_namespace {
        // kill(-1) from a namespace's init reaches every process in it but init. Without a pid
        // namespace -1 would mean every process of the uid on the host: never used then.
        KILL_TARGET.store(-1, Ordering::Relaxed);
        // If this fails, the supervisor's SIGKILL still ends the run (without CPU accounting).
        let _ = sys::set_handler(DEADLINE_SIGNAL, on_deadline);
    }
    if report > 0 {
        let _ = sys::close_range(0, (report - 1) as u32);
    }
    let _ = sys::close_range((report + 1) as u32, u32::MAX);
    loop {
        match sys::wait_any() {
            Ok((pid, status)) if pid == program => {
                send(report, Msg::Exit(status));
                if pid_namespace {
                    emptied(report);
                } else {
                    // No namespace to empty: take down our process group (the session init
                    // created), this process included. Only processes that left it with setsid
                    // survive; the report calls this layer partial.
                    sys::kill(0, libc::SIGKILL);
                }
                sys::exit(0);
            }
            Ok(_) => {}
            Err(_) => sys::exit(EXIT_SETUP_FAILED),
        }
    }
}

/// Kills every other process of the namespace and reaps them all; then sends what they used
/// and [`Msg::Emptied`], and closes the report pipe. The kill is repeated after each reaped
/// process (a fork that raced the first one is caught by the next). A process that cannot die
/// keeps this waiting: the supervisor's deadline then ends the run as before.
fn emptied(report: RawFd) {
    loop {
        sys::kill(-1, libc::SIGKILL);
        if sys::wait_any().is_err() {
            break;
        }
    }
    let (user, system, max_rss) = sys::children_usage();
    send(report, Msg::Usage(Usage::UserMicros, user));
    send(report, Msg::Usage(Usage::SystemMicros, system));
    send(report, Msg::Usage(Usage::MaxRssBytes, max_rss));
    send(report, Msg::Emptied);
    sys::close(report);
}

fn send(fd: RawFd, msg: Msg) {
    let _ = sys::write(fd, &msg.encode());
}
