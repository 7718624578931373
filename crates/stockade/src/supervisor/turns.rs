//! A jail that serves turns ([`Prepared::run_turns`]): one program (a live session's
//! interpreter) started once, then given its code turn after turn, each turn supervised as a run
//! is — its own clock and deadline, its own output caps, its verdict, its share of the cgroup's
//! figures — and nothing of the program running between them.
//!
//! A turn ends on a channel the program's code cannot reach ([`TurnEnd`]): the Wasm runner's
//! account, written on the host side of its guest when the guest's turn returned, or the kernel's
//! word (through the seccomp listener) that a thread of the program is back in `read(2)` of its
//! stdin with the turn's bytes all read. Never bytes the program writes on its outputs. Between
//! turns the program is stopped: frozen with its cgroup (cgroup2 `cgroup.freeze`) when its code
//! could go on in a thread of its own, or waiting in its runner, whose guest has no thread; its
//! outputs are not read, so a write between turns waits in its own jail, at most a pipe's worth.

use super::calls::{self, Host, HostCalls, TurnCalls};
use super::channels::{Feed, Sink, Streams};
use super::gate::{Finished, Gated, Start};
use super::pump::{Outcome, Pump, Stop};
use super::run::{Begun, Over, Released};
use super::verdict::{Accounting, Ending, verdict};
use super::{Output, Prepared};
use crate::error::Error;
use crate::layers::cgroup::{CgroupStats, Leaf};
use crate::layers::filesystem::exchange;
use crate::policy::{Limits, PolicyError};
use crate::report::{GuestEnd, Layers, Report};
use crate::sys::{self, Errno};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use crate::plan::TurnEnd;

/// One turn of a jail that serves turns.
#[derive(Debug, Default)]
pub struct Turn {
    /// Its bytes on the program's stdin (the program's frame of the turn's code).
    pub stdin: Vec<u8>,
    /// Its limits. The wall clock (from the turn's start) and the output caps are the turn's,
    /// each the tighter of these and the jail's; the ones the jail holds for its whole life
    /// (memory, processes, a guest's memory) must be the jail's own, or the turn is refused
    /// ([`Turned::Refused`]): they can only be set when the jail is built.
    pub limits: Limits,
    /// Where its stdout and stderr go as they come (closed when the turn is over), instead of
    /// into its report.
    pub stdout_to: Option<OwnedFd>,
    pub stderr_to: Option<OwnedFd>,
    /// Its host calls, when the jail serves them by turn ([`Host::Turns`]): `None`, a call fails.
    pub host: Option<HostCalls>,
    /// The argument vector its report shows.
    pub argv_display: Option<Vec<String>>,
}

/// What a program's account of one turn says, as its caller reads it (see [`ReadAccount`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnTold {
    /// The turn's exit status.
    pub status: i32,
    /// A runner's account of its guest's turn, for the verdict.
    pub guest: Option<GuestEnd>,
    /// What the turn's code gave back, as it wrote it (see [`crate::Report::give`]).
    pub given: Option<Vec<u8>>,
}

/// Reads a program's account of a turn (the bytes it wrote on its first extra channel since the
/// turn began): `None` when they are not a turn's (a runner's last summary: the program ends).
pub type ReadAccount<'a> = &'a dyn Fn(&[u8]) -> Option<TurnTold>;

/// Where a jail that serves turns is, when it asks its caller for the next turn.
#[derive(Debug)]
pub enum Turned {
    /// Its start is done: the program waits for its first turn; its program's account of its
    /// start.
    Ready { account: Vec<u8> },
    /// A turn returned, its program alive: its report, and its program's account of it.
    Returned { report: Box<Report>, account: Vec<u8> },
    /// The turn asked what the jail cannot give (a limit it holds for its life): it did not run,
    /// and the program waits as it was.
    Refused(Error),
}

/// What the pump saw of a turn that returned: its time, its program's word, its refused execs
/// and its host calls.
struct Returned {
    wall: Duration,
    told: TurnTold,
    execs_refused: u32,
    calls: Vec<crate::report::CallRecord>,
}

/// How long a turn's end waits for its jail to be frozen whole (a thread in an uninterruptible
/// wait is frozen when it leaves it).
const FREEZE_PATIENCE: Duration = Duration::from_millis(200);

/// How one step of the pump went: a turn returned (when, its account and what it says), or
/// the run is over.
enum Step {
    Returned(Instant, Vec<u8>, TurnTold),
    Over(Outcome),
}

impl Prepared<'_> {
    /// Releases a jail whose program serves turns ([`Job::turns`](crate::Job::turns)): its start
    /// (`start`: its files, its bootstrap on stdin, its host calls for its life, its clock until
    /// it is ready), then each turn that `next` gives, until `next` gives none or the program
    /// ends. `next` is told each time where the jail is ([`Turned`]); `read` reads the program's
    /// account of a turn, and `guest` a runner's account of its end (as for
    /// [`Prepared::run_with_channels`]). Returns the end, [`Gated::Ran`]: the report of the turn
    /// that ended the program (a limit, its own exit), of its start when it died before it was
    /// ready, or of its end by the caller between turns.
    pub fn run_turns(
        mut self,
        start: Start,
        read: ReadAccount<'_>,
        next: &mut dyn FnMut(Turned) -> Option<Turn>,
        guest: impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>,
    ) -> Result<Gated, Error> {
        let plan = self.plan;
        if plan.turns.is_none() {
            return Err(Error::Supervisor { what: "serve turns from a plan of one run", errno: Errno(libc::EINVAL) });
        }
        let cpu_at_start = sys::thread_cpu_time();
        let Released { at, sync, report, mut streams, stdin_feed, calls, copied, create_as, host_owner } =
            self.release(Output::Capture)?;
        let Some(stdin) = stdin_feed else {
            return Err(Error::Supervisor { what: "serve turns without a stdin pipe", errno: Errno(libc::EBADF) });
        };
        let listener = self.egress.take();
        let mut pump = Pump::new(self.run_of(&sync, true), report);
        // A program whose code could go on in a thread is frozen between turns, or not served:
        // a cgroup that could not be made here (best effort) gives no freezer.
        let unfrozen = plan.turns == Some(TurnEnd::Read) && !self.leaf.as_ref().is_some_and(Leaf::can_freeze);
        let refused = unfrozen.then(|| {
            Error::from(plan.cgroup.freezer().err().unwrap_or(crate::layers::cgroup::CgroupError::NoFreezer {
                shape: "this run's cgroup",
                off: " (its cgroup2 leaf could not be made, and cgroups.best-effort let it go)",
            }))
        });
        let put = start.files.as_ref().filter(|x| !x.put.is_empty()).map(|x| self.put_files(x, create_as));
        if let Some(e) = refused.or_else(|| put.and_then(Result::err)) {
            pump.kill();
            let _ = pump.go(&mut Streams::none(), None, None, None)?;
            self.pid = 0;
            return Err(e);
        }
        self.lend(&start, create_as);
        let layers = Layers::encoded(self.layers(self.leaf.is_some()));
        // The host calls are served for the jail's life, each turn's with its own tools.
        let stop_calls = Arc::new(AtomicBool::new(false));
        let by_turn: Option<Arc<TurnCalls>> = match &start.host {
            Some(Host::Turns(t)) => Some(t.clone()),
            _ => None,
        };
        let served = calls::serve_or_lend(calls, start.host, &stop_calls);
        // The egress proxy serves the jail's life; each turn's report has what it did in it.
        let proxy = super::run::egress_proxy(listener, &plan.policy.network)?;
        let jail = Limits::of(&plan.policy);
        let wall = start.limits.tighter(&jail).wall_timeout().unwrap_or(plan.policy.wall_timeout);
        let mut begun = Begun {
            argv_display: start.argv_display,
            exchange: start.files,
            layers: Some(layers.clone()),
            ..Begun::at(at, wall)
        };
        let mut step = self.step(&mut pump, &mut streams, &stdin, start.stdin, at + wall, read)?;
        let mut first = true;
        // The cgroup's figures at the last turn's end: the next one's start (nothing of the
        // program runs between them but its wait for the next turn).
        let mut last: Option<CgroupStats> = None;
        let ended = loop {
            let (returned_at, account, told) = match step {
                Step::Over(outcome) => break Some(outcome),
                Step::Returned(at, account, told) => (at, account, told),
            };
            let egress = proxy.as_ref().map(crate::egress::Proxy::turn);
            let mut turned = if first {
                Turned::Ready { account }
            } else {
                let calls = by_turn.as_ref().map(|t| t.end()).unwrap_or_default();
                let wall = returned_at.duration_since(begun.start);
                let returned = Returned { wall, told, execs_refused: pump.execs_refused(), calls };
                let (mut report, after) = self.turn_report(&mut streams, &begun, returned);
                last = Some(after);
                report.egress = egress;
                Turned::Returned { report: Box::new(report), account }
            };
            first = false;
            let turn = loop {
                let Some(turn) = next(turned) else { break None };
                match refuse_held_for_life(&turn.limits.tighter(&jail), &jail) {
                    Some(e) => turned = Turned::Refused(e),
                    None => break Some(turn),
                }
            };
            let Some(turn) = turn else { break None };
            let bytes;
            (begun, bytes) = self.begin_turn(turn, (&layers, last.take()), &mut streams, by_turn.as_deref());
            let deadline = begun.start + begun.wall_timeout;
            step = self.step(&mut pump, &mut streams, &stdin, bytes, deadline, read)?;
        };
        let outcome = match ended {
            Some(outcome) => outcome,
            None => {
                // Its caller is done with it, between turns: taken down, reported as killed.
                pump.kill();
                match pump.go(&mut streams, None, None, None)? {
                    Stop::Ended(o) => o,
                    _ => return Err(Error::Supervisor { what: "end a jail of turns", errno: Errno(libc::EINVAL) }),
                }
            }
        };
        let mut fds: Vec<OwnedFd> = pump.into_fds().collect();
        fds.push(sync);
        fds.push(stdin);
        stop_calls.store(true, Ordering::SeqCst);
        let calls = by_turn.as_ref().map(|t| t.end()).unwrap_or_default();
        drop(served.map(std::thread::JoinHandle::join));
        let egress = proxy.map(crate::egress::Proxy::finish);
        let over = Over { outcome, streams, begun, copied, host_owner, cpu_at_start, fds };
        let mut finished: Finished = self.conclude(over, Some(guest))?;
        finished.report.host_calls = calls;
        finished.report.egress = egress;
        Ok(Gated::Ran(Box::new(finished)))
    }

    /// Lends the run's writable directory and its cgroup's figures to the start's [`LiveRun`].
    fn lend(&self, start: &Start, create_as: crate::layers::filesystem::staging::CreateAs) {
        let Some(live) = &start.live else { return };
        live.lend_leaf(self.leaf.as_ref());
        let staged = self.plan.fs.staged();
        if let Some(x) = &start.files
            && let Some(i) = exchange::place_index(staged, &x.dir)
            && let (Some(place), Some(root)) = (staged.get(i), self.staged.get(i))
        {
            live.dir.lend(place, root, create_as);
        }
    }

    /// A turn begins: its clock and its CPU time from now, its output's caps and where it goes,
    /// its tools (`by_turn`: the jail's calls by turn), and the jail thawed when it was frozen.
    /// Returns how it began and its bytes for stdin.
    fn begin_turn(
        &self,
        turn: Turn,
        (layers, before): (&Layers, Option<CgroupStats>),
        streams: &mut Streams,
        by_turn: Option<&TurnCalls>,
    ) -> (Begun, Vec<u8>) {
        let plan = self.plan;
        let limits = turn.limits.tighter(&Limits::of(&plan.policy));
        let begun = Begun {
            argv_display: turn.argv_display,
            layers: Some(layers.clone()),
            cpu_before: before.unwrap_or_else(|| self.leaf.as_ref().map(Leaf::stats).unwrap_or_default()),
            ..Begun::at(Instant::now(), limits.wall_timeout().unwrap_or(plan.policy.wall_timeout))
        };
        streams.stdout.sink = turn_sink(limits.stdout_max_bytes, turn.stdout_to);
        streams.stderr.sink = turn_sink(limits.stderr_max_bytes, turn.stderr_to);
        if let Some(t) = by_turn {
            // A turn without tools has its calls refused, and reported.
            t.begin(turn.host.unwrap_or_else(HostCalls::none));
        }
        if plan.turns == Some(TurnEnd::Read) {
            self.leaf.as_ref().map(Leaf::thaw);
        }
        (begun, turn.stdin)
    }

    /// Pumps one turn (the start is the first): `bytes` fed on stdin, its deadline at
    /// `deadline`, until its program says it returned (the jail is then frozen, for a program
    /// that could go on in a thread, and its outputs drained) or the run is over.
    fn step(
        &self,
        pump: &mut Pump<'_>,
        streams: &mut Streams,
        stdin: &OwnedFd,
        bytes: Vec<u8>,
        deadline: Instant,
        read: ReadAccount<'_>,
    ) -> Result<Step, Error> {
        let sv = |errno: std::io::Error| Error::Supervisor {
            what: "duplicate a stdin pipe",
            errno: Errno(errno.raw_os_error().unwrap_or(libc::EIO)),
        };
        pump.begin_turn(Some(stdin.try_clone().map_err(sv)?));
        let mut feed = Some(Feed::new(stdin.try_clone().map_err(sv)?, Arc::from(bytes)));
        loop {
            match pump.go(streams, feed.take(), Some(deadline), None)? {
                Stop::Ended(outcome) => return Ok(Step::Over(outcome)),
                Stop::Turned => {
                    let at = Instant::now();
                    if self.plan.turns == Some(TurnEnd::Read) {
                        // Nothing of it runs from here to the next turn.
                        self.leaf.as_ref().map(|l| l.freeze_all(FREEZE_PATIENCE));
                    }
                    pump.drain(streams);
                    let Some(account) = streams.channels.first_mut() else {
                        return Err(Error::Supervisor { what: "read a turn's account", errno: Errno(libc::EBADF) });
                    };
                    // Not a turn's: the program is ending (its summary stays for the verdict).
                    if let Some(told) = read(account.sink.captured_ref()) {
                        return Ok(Step::Returned(at, account.sink.take_captured(), told));
                    }
                }
                Stop::Gate | Stop::Died => {
                    return Err(Error::Supervisor { what: "pump a turn", errno: Errno(libc::EINVAL) });
                }
            }
        }
    }

    /// The report of a turn that returned, its program alive: its output (passed on, then its
    /// pipes closed), its time, the verdict of its status, its share of the cgroup's figures.
    fn turn_report(&self, streams: &mut Streams, begun: &Begun, returned: Returned) -> (Report, CgroupStats) {
        let Returned { wall, told, execs_refused, calls } = returned;
        let plan = self.plan;
        let take = |sink: &mut Sink| {
            sink.flush();
            let unsent = sink.unsent();
            (std::mem::replace(sink, Sink::new(None, None)).report(), unsent)
        };
        let (out, unsent_out) = take(&mut streams.stdout.sink);
        let (err, unsent_err) = take(&mut streams.stderr.sink);
        let after = self.leaf.as_ref().map(Leaf::stats).unwrap_or_default();
        let stats = turn_share(&begun.cpu_before, &after);
        let disk_full = plan
            .fs
            .staged()
            .iter()
            .zip(&self.staged)
            .any(|(_, root)| crate::layers::filesystem::staging::usage(root).full);
        let ending = Ending {
            exit_status: Some((told.status & 0xff) << 8),
            init_exited: true,
            cpu_used_us: stats.cpu_user_us.unwrap_or(0) + stats.cpu_sys_us.unwrap_or(0),
            ..Ending::default()
        };
        let accounting = Accounting {
            oom_kills: stats.oom_kills,
            pids_limit_hit: stats.pids_limit_hit,
            disk_full,
            cpu_limit_s: plan.cpu_limit_s(),
        };
        let v = verdict(&ending, &accounting, told.guest.as_ref());
        let outcome = Outcome::of_turn(told.status, execs_refused);
        let mut report =
            plan.build_report(&outcome, wall, (out, err), stats, v, begun.layers.clone().unwrap_or_default());
        report.wall_timeout_ms = u64::try_from(begun.wall_timeout.as_millis()).unwrap_or(u64::MAX);
        if let Some(argv) = &begun.argv_display {
            report.argv.clone_from(argv);
        }
        report.host_calls = calls;
        if let Some(given) = &told.given {
            report.give(given);
        }
        for note in super::words::run_notes(&outcome, [unsent_out, unsent_err]) {
            report.add_note(note);
        }
        (report, after)
    }
}

/// A turn's output sink: its cap, kept or passed on to `to` (closed when the turn is over).
fn turn_sink(cap: Option<u64>, to: Option<OwnedFd>) -> Sink {
    let mut sink = Sink::new(cap, None);
    if let Some(fd) = to {
        sink.forward_to(fd);
    }
    sink
}

/// A turn's share of the cgroup's figures: the CPU time and the OOM kills and refused forks
/// since it began; the peaks are the jail's so far (a cgroup's peak is not kept by turn).
fn turn_share(before: &CgroupStats, after: &CgroupStats) -> CgroupStats {
    let minus = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
    let refused = after.pids_max_events.saturating_sub(before.pids_max_events);
    CgroupStats {
        cpu_user_us: minus(after.cpu_user_us, before.cpu_user_us),
        cpu_sys_us: minus(after.cpu_sys_us, before.cpu_sys_us),
        oom_kills: after.oom_kills.saturating_sub(before.oom_kills),
        pids_max_events: refused,
        pids_limit_hit: refused > 0,
        ..*after
    }
}

/// A jail of turns holds some limits for its whole life: a turn asking others of it is refused
/// (they can only be set when the jail is built), never run under the jail's.
fn refuse_held_for_life(asked: &Limits, jail: &Limits) -> Option<Error> {
    let held = |l: &Limits| [l.memory_max_bytes, l.pids_max, l.wasm_memory_max_bytes];
    let keys = ["memory-max-bytes", "pids-max", "wasm-memory-max-bytes"];
    let (a, j) = (held(asked), held(jail));
    let i = (0..keys.len()).find(|&i| a[i] != j[i])?;
    let shown = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
    Some(Error::Policy(PolicyError::Override {
        flag: format!("limits.{}", keys[i]),
        message: format!(
            "{} asked of a jail that holds {} for its whole life: set it when the jail (the session) is made",
            shown(a[i]),
            shown(j[i])
        ),
    }))
}
