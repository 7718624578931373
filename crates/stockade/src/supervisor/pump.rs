//! The event loop of a running jail: one thread, one `ppoll` over the run's init (its pidfd), the
//! output pipes, the report pipe, the seccomp listener, the stdin feed and the caller's output
//! fds; the deadline is its timeout. A jail released ahead of its run is pumped in two phases:
//! waiting at its gate (no output read, no stdin, no deadline), then running.

use super::channels::{BATCH, CHUNK, Feed, PIPE_BUF, SMALL_READ, StreamId, Streams};
use crate::child;
use crate::error::Error;
use crate::layers::cgroup::Leaf;
use crate::layers::seccomp::SeccompPlan;
use crate::report::Violation;
use crate::sys::{self, Errno};
use crate::wire::{Failure, MSG_LEN, Msg, Usage};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

mod listener;

/// What the loop saw.
pub(super) struct Outcome {
    pub(super) reaped: sys::Reaped,
    pub(super) reaped_at: Instant,
    pub(super) failure: Option<Failure>,
    pub(super) exit_status: Option<i32>,
    pub(super) timed_out: bool,
    /// The program wrote past an output cap, and the run was killed for it.
    pub(super) output_limit: bool,
    /// Execs after the first that were refused (the run went on).
    pub(super) execs_refused: u32,
    /// The files the first of them named, under `process.exec-allow` (the rest are counted).
    pub(super) execs_refused_named: Vec<String>,
    /// A `sysinfo` got the host's figures: the supervisor could not write the run's (why).
    pub(super) sysinfo_unanswered: Option<Errno>,
    pub(super) violation: Option<Violation>,
    /// The program announced its end ([`Job::announces_end`](crate::Job::announces_end)): the
    /// jail was frozen (or killed) then, and init is not killed and reaped yet (`reaped` is a
    /// stand-in: exited 0, no usage; the cgroup counts the CPU).
    pub(super) announced: bool,
    /// Init is not reaped yet: the program announced its end, or init emptied the namespace and
    /// said so ([`Msg::Emptied`]; `reaped` is then init's exit 0 with its children's usage; never
    /// when init is the program).
    /// Whoever answers reaps it afterwards.
    pub(super) init_unreaped: bool,
}

impl Outcome {
    /// A turn that returned with `status`, its program alive (nothing was reaped or killed).
    pub(super) fn of_turn(status: i32, execs_refused: u32) -> Outcome {
        Outcome {
            reaped: sys::Reaped { code: libc::CLD_EXITED, status, ..sys::Reaped::default() },
            reaped_at: Instant::now(),
            failure: None,
            exit_status: Some((status & 0xff) << 8),
            timed_out: false,
            output_limit: false,
            execs_refused,
            execs_refused_named: Vec::new(),
            sysinfo_unanswered: None,
            violation: None,
            announced: false,
            init_unreaped: false,
        }
    }
}

/// The wait status of a program that is its jail's init: its own, unless it ended as its handler
/// of a signal PID 1 does not get ends it (`child::in_process`: it reports the signal, then exits
/// with 128 and its number), a signal a process under an init would have been killed by. The
/// report pipe is the program's own then: what it `claimed` is believed only when its exit agrees,
/// so it can say no more than its exit code already could.
fn program_status(claimed: Option<i32>, reaped: &sys::Reaped) -> i32 {
    match claimed {
        Some(sig) if reaped.code == libc::CLD_EXITED && reaped.status == 128 + sig => sig,
        _ => reaped.wait_status(),
    }
}

/// How long init gets, after the deadline signal, to kill and reap the run before SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(50);

/// The run being supervised.
pub(super) struct Run<'a> {
    pub(super) pid: i32,
    pub(super) pidfd: &'a OwnedFd,
    /// The release channel; the child sends the seccomp listener over it.
    pub(super) sync: &'a OwnedFd,
    pub(super) seccomp: &'a SeccompPlan,
    pub(super) pid_namespace: bool,
    /// Init runs the program's code itself: its wait status is the program's.
    pub(super) init_is_program: bool,
    /// The run's cgroup leaves: `cgroup.kill` takes the whole tree.
    pub(super) leaf: Option<&'a Leaf>,
    /// The program announces its end on its first extra channel (`Streams::account`).
    pub(super) announces_end: bool,
    /// The program waits, once its account is given and its fds closed, to be told to go
    /// ([`Job::announces_end`](crate::Job::announces_end)), when it is init: frozen or killed
    /// when the account is taken as the run's end, else sent `SIGUSR1`.
    pub(super) waits_after_account: bool,
    /// Writing past the cap of stdout or stderr ends the run.
    pub(super) end_over_cap: bool,
    /// The program serves turns, and says each one's end so ([`Job::turns`](crate::Job::turns)).
    pub(super) turns: Option<super::TurnEnd>,
}

/// Why [`Pump::go`] returned.
pub(super) enum Stop {
    /// The gate it watched became readable (a hand-over, or a cancel).
    Gate,
    /// Init was reaped while the gate was watched (the loop keeps what it saw: pumping again
    /// without the gate drains and ends). An opening may have fed the program its code first.
    Died,
    /// Init is reaped and every input is at end of file.
    Ended(Outcome),
    /// The turn being pumped ([`Pump::begin_turn`]) returned, by its program's way of saying so
    /// ([`super::TurnEnd`]): what the program wrote before is in its pipes still (see
    /// [`Pump::drain`]).
    Turned,
}

/// The turn a pump runs: the stdin it was fed (a duplicate of the pipe's write end, to see
/// that the program read it all), whether the feed is done, and whether the turn returned.
pub(super) struct TurnWatch {
    stdin: Option<OwnedFd>,
    fed: bool,
    returned: bool,
}

/// The event loop's state, kept across its phases: a jail released ahead of its run is pumped
/// (its seccomp listener answered, its death seen) while it waits at its gate, then pumped again
/// with its output, stdin and deadline once its run starts.
pub(super) struct Pump<'a> {
    run: Run<'a>,
    want_listener: bool,
    listener: Option<OwnedFd>,
    exec_seen: bool,
    violation: Option<Violation>,
    report: Option<OwnedFd>,
    msgs: Vec<u8>,
    failure: Option<Failure>,
    exit_status: Option<i32>,
    /// The signal a program that is its jail's init said ended it (see [`program_status`]).
    claimed_signal: Option<i32>,
    reaped: Option<(sys::Reaped, Instant)>,
    /// Init's account of the emptied namespace: what its children used, once it said
    /// [`Msg::Emptied`].
    usage: sys::Reaped,
    emptied: bool,
    killed: bool,
    /// A program that waits after its account was told to go (`SIGUSR1`).
    told_to_go: bool,
    timed_out: bool,
    output_limit: bool,
    execs_refused: u32,
    execs_refused_named: Vec<String>,
    /// When the jail was released (the start of its `sysinfo` uptime).
    released: Instant,
    /// Why a `sysinfo` could not be answered with the run's own figures, when one could not.
    sysinfo_unanswered: Option<Errno>,
    /// The turn under way, for a program that serves turns.
    turn: Option<TurnWatch>,
    /// Not zeroed (see `sys::read_into`): each run's pump has its own, and a read of a few
    /// bytes touches only the page they land on.
    buf: Box<[std::mem::MaybeUninit<u8>]>,
}

impl<'a> Pump<'a> {
    pub(super) fn new(run: Run<'a>, report: OwnedFd) -> Pump<'a> {
        Pump {
            want_listener: run.seccomp.has_listener(),
            run,
            listener: None,
            exec_seen: false,
            violation: None,
            report: Some(report),
            msgs: Vec::new(),
            failure: None,
            exit_status: None,
            claimed_signal: None,
            reaped: None,
            usage: sys::Reaped { code: libc::CLD_EXITED, ..sys::Reaped::default() },
            emptied: false,
            killed: false,
            told_to_go: false,
            timed_out: false,
            output_limit: false,
            execs_refused: 0,
            execs_refused_named: Vec::new(),
            released: Instant::now(),
            sysinfo_unanswered: None,
            turn: None,
            buf: Box::<[u8]>::new_uninit_slice(CHUNK),
        }
    }

    /// The jail step that failed, as the child reported it so far.
    pub(super) fn failure(&self) -> Option<Failure> {
        self.failure
    }

    /// Starts watching a turn: `stdin` is the program's stdin pipe (another end of it), fed the
    /// turn's bytes by the next [`Pump::go`]. The turn's own execs, violations and refusals are
    /// counted from here.
    pub(super) fn begin_turn(&mut self, stdin: Option<OwnedFd>) {
        self.turn = Some(TurnWatch { stdin, fed: false, returned: false });
        self.execs_refused = 0;
        self.sysinfo_unanswered = None;
    }

    /// The execs refused since the turn began.
    pub(super) fn execs_refused(&self) -> u32 {
        self.execs_refused
    }

    /// Reads what every output holds now, at once (no quiet spell): what a program that says
    /// its turn returned wrote before it said so.
    pub(super) fn drain(&mut self, streams: &mut Streams) {
        loop {
            let mut fds: Vec<libc::pollfd> = Vec::new();
            let mut ids = Vec::new();
            for (id, s) in streams.iter() {
                if let Some(fd) = &s.fd {
                    fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                    ids.push(id);
                }
            }
            match sys::ppoll(&mut fds, Some(Duration::ZERO)) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            for (p, id) in fds.iter().zip(ids) {
                if p.revents != 0 {
                    self.read_stream(streams, id);
                    if let Some(s) = streams.get_mut(id) {
                        s.quiet_until = None;
                    }
                }
            }
        }
    }

    /// Takes the run down now (a cancelled gate, files that could not be handed over).
    pub(super) fn kill(&mut self) {
        if !self.killed && self.reaped.is_none() {
            let r = &self.run;
            super::kill_run(r.pid, r.pidfd.as_fd(), r.leaf, r.pid_namespace);
            self.killed = true;
        }
    }

    /// The fds it still holds (the seccomp listener, init's report), to be closed after the
    /// run is answered: nothing reads them once the run is over.
    pub(super) fn into_fds(self) -> impl Iterator<Item = OwnedFd> {
        self.listener.into_iter().chain(self.report)
    }

    /// Pumps until init is reaped and every input reached end of file, or until `gate` is
    /// readable. `deadline`: when the run is killed (`None`: not while waiting at a gate).
    pub(super) fn go(
        &mut self,
        streams: &mut Streams,
        mut feed: Option<Feed>,
        deadline: Option<Instant>,
        gate: Option<BorrowedFd<'_>>,
    ) -> Result<Stop, Error> {
        let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
        // With a pid namespace, init first gets the deadline signal (it kills and reaps the run,
        // so CPU time is accounted); SIGKILL to init at `kill_at` is the backstop. An init that is
        // the program itself is killed at once.
        let mut kill_at = deadline;
        // The program's account is in and its channel closed: what it wrote is drained at once.
        let mut announcing = false;
        loop {
            let running = self.reaped.is_none() && !self.killed && !self.emptied;
            if let Some(t) = self.turn.as_mut().filter(|t| t.returned && running) {
                t.returned = false;
                return Ok(Stop::Turned);
            }
            if gate.is_some() && self.reaped.is_some() {
                return Ok(Stop::Died);
            }
            if gate.is_none()
                && let Some(outcome) = self.after_account(streams)
            {
                return Ok(Stop::Ended(outcome));
            }
            announcing |= self.run.announces_end && streams.account().is_some_and(|s| s.fd.is_none());
            let inputs_open = self.report.is_some() || streams.iter().any(|(_, s)| s.fd.is_some());
            if gate.is_none() && self.emptied && self.reaped.is_none() && !inputs_open {
                // Init killed and reaped the rest, sent its usage and closed its report: it is
                // exiting, and the kernel's taking down of the namespaces need not be waited for.
                let mut outcome = self.outcome((self.usage, Instant::now()), false);
                outcome.init_unreaped = true;
                return Ok(Stop::Ended(outcome));
            }
            if self.reaped.is_some() && !inputs_open {
                break;
            }
            let now = Instant::now();
            if self.reaped.is_some() && deadline.is_some_and(|d| now >= d) {
                // Only without a pid namespace can a process outlive init and hold a pipe open.
                break;
            }
            if self.reaped.is_some() {
                // Nobody left to read it.
                feed = None;
            }
            let (mut fds, roles, wake) = self.poll_set(streams, feed.as_ref(), gate, kill_at, announcing, now);
            let n = match sys::ppoll(&mut fds, wake.map(|w| w.saturating_duration_since(now))) {
                Ok(n) => n,
                Err(Errno(libc::EINTR)) => continue,
                Err(e) => return Err(sv("poll")(e)),
            };
            if n == 0 {
                self.at_deadline(&mut kill_at);
                continue;
            }
            for (p, role) in fds.iter().zip(roles.iter()) {
                if p.revents == 0 {
                    continue;
                }
                match *role {
                    Role::Gate => {
                        if let Some(g) = gate {
                            let _ = sys::read_into(g.as_raw_fd(), &mut self.buf[..1]);
                        }
                        return Ok(Stop::Gate);
                    }
                    Role::Pidfd if self.leaves_init(gate.is_some()) => {}
                    Role::Pidfd => {
                        let r = sys::waitid_pidfd(self.run.pidfd.as_fd()).map_err(sv("reap the run"))?;
                        self.reaped = Some((r, Instant::now()));
                    }
                    Role::Report => self.read_report(),
                    Role::Read(id) => {
                        self.read_stream(streams, id);
                        // The account of a turn: a line on the first extra channel.
                        if id == StreamId::Channel(0)
                            && self.run.turns == Some(super::TurnEnd::Account)
                            && let Some(t) = self.turn.as_mut()
                        {
                            t.returned |= streams.account().is_some_and(|a| a.sink.has_line());
                        }
                    }
                    Role::Write(id) => {
                        if let Some(s) = streams.get_mut(id) {
                            s.sink.write_some(PIPE_BUF);
                        }
                    }
                    Role::Feed => {
                        if feed.as_mut().is_some_and(Feed::write_some) {
                            // Closing the pipe is the program's end of file (a turn's feed is
                            // another end of it: the pipe stays open for the next turn).
                            feed = None;
                            if let Some(t) = self.turn.as_mut() {
                                t.fed = true;
                            }
                        }
                    }
                    Role::Sync => {
                        self.want_listener = false;
                        if p.revents & libc::POLLIN != 0 {
                            self.listener = sys::recv_fd(self.run.sync.as_fd()).ok().flatten();
                        }
                    }
                    Role::Listener => self.answer(p.revents),
                }
            }
        }
        let Some(reaped) = self.reaped.take() else {
            return Err(Error::Supervisor { what: "reap the run", errno: Errno(libc::ECHILD) });
        };
        Ok(Stop::Ended(self.outcome(reaped, false)))
    }

    /// What the loop saw, once the run is over (`announced`: by the program's own account;
    /// `reaped` is then a stand-in).
    fn outcome(&mut self, (reaped, reaped_at): (sys::Reaped, Instant), announced: bool) -> Outcome {
        Outcome {
            reaped,
            reaped_at,
            failure: self.failure.take(),
            exit_status: match (announced, self.run.init_is_program) {
                (true, _) => None,
                (false, true) => Some(program_status(self.claimed_signal, &reaped)),
                (false, false) => self.exit_status,
            },
            timed_out: !announced && self.timed_out,
            output_limit: !announced && self.output_limit,
            execs_refused: self.execs_refused,
            execs_refused_named: std::mem::take(&mut self.execs_refused_named),
            sysinfo_unanswered: self.sysinfo_unanswered,
            violation: if announced { None } else { self.violation.take() },
            announced,
            init_unreaped: announced,
        }
    }

    /// What a program that announces its end is told once its account is in (a run past its
    /// gate): `Some(outcome)` when the account is the run's end, else `None` (a program that waits
    /// after its account is told, once, to exit, and the run ends when init is reaped).
    fn after_account(&mut self, streams: &Streams) -> Option<Outcome> {
        if self.announced(streams) {
            // Its last act was closing its fds; nothing else in the jail runs its code. Its cgroup
            // is frozen (cgroup2: every process of it, no signal to the parent), and init is
            // killed, and the kernel takes its memory down, with the cleanup, after the answer.
            // Without a cgroup2 leaf it is killed now: in a pid namespace, init's death takes
            // every process of the jail with it.
            let at = Instant::now();
            if !self.run.leaf.is_some_and(Leaf::freeze) {
                let _ = sys::pidfd_send_signal(self.run.pidfd.as_fd(), libc::SIGKILL);
            }
            self.killed = true;
            let stand_in = sys::Reaped { code: libc::CLD_EXITED, ..sys::Reaped::default() };
            return Some(self.outcome((stand_in, at), true));
        }
        if self.run.waits_after_account
            && self.run.init_is_program
            && !self.told_to_go
            && self.reaped.is_none()
            && streams.iter().all(|(_, s)| s.fd.is_none())
        {
            let _ = sys::pidfd_send_signal(self.run.pidfd.as_fd(), libc::SIGUSR1);
            self.told_to_go = true;
        }
        None
    }

    /// The fds to poll and what each is, and when to wake without them (the deadline, or the
    /// end of a stream's quiet spell).
    fn poll_set(
        &self,
        streams: &Streams,
        feed: Option<&Feed>,
        gate: Option<BorrowedFd<'_>>,
        kill_at: Option<Instant>,
        announcing: bool,
        now: Instant,
    ) -> (Vec<libc::pollfd>, Vec<Role>, Option<Instant>) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(8);
        let mut roles: Vec<Role> = Vec::with_capacity(8);
        let mut add = |fd: RawFd, events: libc::c_short, role: Role| {
            fds.push(libc::pollfd { fd, events, revents: 0 });
            roles.push(role);
        };
        if self.want_listener {
            add(self.run.sync.as_raw_fd(), libc::POLLIN, Role::Sync);
        }
        if let Some(l) = &self.listener {
            add(l.as_raw_fd(), libc::POLLIN, Role::Listener);
        }
        if let Some(r) = &self.report {
            add(r.as_raw_fd(), libc::POLLIN, Role::Report);
        }
        if let Some(g) = gate {
            add(g.as_raw_fd(), libc::POLLIN, Role::Gate);
        }
        let mut wake: Option<Instant> = kill_at.filter(|_| !self.killed);
        for (id, s) in streams.iter() {
            if let Some(fd) = &s.fd {
                // Once the run is reaped, its pid namespace emptied by init (every other process
                // of it killed and reaped), or the program said it is over: drain at once (the
                // end of file is the run's end, not to be kept waiting for a quiet spell).
                let over = self.reaped.is_some() || self.emptied || announcing;
                match s.quiet_until.filter(|t| *t > now && !over) {
                    Some(t) => wake = Some(wake.map_or(t, |w| w.min(t))),
                    None => add(fd.as_raw_fd(), libc::POLLIN, Role::Read(id)),
                }
            }
            if let Some(fd) = s.sink.wants_write() {
                add(fd, libc::POLLOUT, Role::Write(id));
            }
        }
        if let Some(f) = feed {
            add(f.fd(), libc::POLLOUT, Role::Feed);
        }
        // Last, so that a wake-up with both reads init's report (its `Emptied`) first.
        if self.reaped.is_none() && !self.leaves_init(gate.is_some()) {
            add(self.run.pidfd.as_raw_fd(), libc::POLLIN, Role::Pidfd);
        }
        (fds, roles, wake)
    }

    /// Whether init is left to the clean-up to reap: it said the run's namespace is empty, and
    /// the run has started (a jail that empties while it waits at its gate died, and is reaped
    /// here as before). Its exit is then not waited for, whichever the kernel is quicker with.
    fn leaves_init(&self, at_gate: bool) -> bool {
        self.emptied && !at_gate
    }

    /// Nothing came before the wake-up: at the deadline, init gets the deadline signal (with a
    /// pid namespace and an init of ours; SIGKILL after a grace), or the run is killed.
    fn at_deadline(&mut self, kill_at: &mut Option<Instant>) {
        let now = Instant::now();
        let Some(at) = *kill_at else { return };
        if self.killed || self.reaped.is_some() || now < at {
            return;
        }
        let r = &self.run;
        if r.pid_namespace && !r.init_is_program && !self.timed_out {
            self.timed_out = true;
            *kill_at = Some(now + KILL_GRACE);
            let _ = sys::pidfd_send_signal(r.pidfd.as_fd(), child::DEADLINE_SIGNAL);
        } else {
            super::kill_run(r.pid, r.pidfd.as_fd(), r.leaf, r.pid_namespace);
            self.killed = true;
            self.timed_out = true;
        }
    }

    /// What stream `id` has now, into its sink; past stdout's or stderr's cap (with
    /// `output.over-cap = "end"`) the run ends at once.
    fn read_stream(&mut self, streams: &mut Streams, id: StreamId) {
        let Some(s) = streams.get_mut(id) else { return };
        let fd = s.fd.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
        match sys::read_into(fd, &mut self.buf) {
            Ok([]) | Err(_) => s.fd = None,
            Ok(bytes) => {
                let k = bytes.len();
                s.sink.push(bytes);
                if id.is_output() && self.run.end_over_cap && s.sink.over_cap() && !self.output_limit {
                    // Past its cap: the run ends now, and nobody reads the rest.
                    self.output_limit = true;
                    self.kill();
                }
                // An announced end's account is watched for its end of file.
                let account = id == StreamId::Channel(0) && self.run.announces_end;
                s.quiet_until = (k < SMALL_READ && !account).then(|| Instant::now() + BATCH);
            }
        }
    }

    /// The program said its run is over: an account on its first extra channel, every output at
    /// end of file, before any deadline, kill or violation, in a pid namespace with a cgroup.
    fn announced(&self, streams: &Streams) -> bool {
        let r = &self.run;
        r.announces_end
            && r.pid_namespace
            && r.leaf.is_some()
            && self.reaped.is_none()
            && !self.killed
            && !self.timed_out
            && self.violation.is_none()
            && self.failure.is_none()
            && streams.iter().all(|(_, s)| s.fd.is_none())
            && streams.account().is_some_and(|a| a.sink.seen() > 0)
    }

    /// The child's stage failures and the program's wait status.
    fn read_report(&mut self) {
        let fd = self.report.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
        match sys::read_into(fd, &mut self.buf) {
            Ok([]) | Err(_) => self.report = None,
            Ok(bytes) => {
                self.msgs.extend_from_slice(bytes);
                while self.msgs.len() >= MSG_LEN {
                    let mut m = [0u8; MSG_LEN];
                    m.copy_from_slice(&self.msgs[..MSG_LEN]);
                    self.msgs.drain(..MSG_LEN);
                    let program = self.run.init_is_program;
                    match Msg::decode(&m) {
                        Some(Msg::Failure(f)) if self.failure.is_none() => self.failure = Some(f),
                        // A program that is its jail's init has no init of ours to report for
                        // it: only the signal it says ended it is taken (and checked).
                        Some(Msg::Exit(status)) if program => {
                            self.claimed_signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
                        }
                        Some(Msg::Usage(..) | Msg::Emptied) if program => {}
                        Some(Msg::Exit(status)) => self.exit_status = Some(status),
                        Some(Msg::Usage(u, v)) => match u {
                            Usage::UserMicros => self.usage.user = Duration::from_micros(v),
                            Usage::SystemMicros => self.usage.system = Duration::from_micros(v),
                            Usage::MaxRssBytes => self.usage.max_rss_bytes = v,
                        },
                        Some(Msg::Emptied) => self.emptied = true,
                        _ => {}
                    }
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Role {
    Sync,
    Listener,
    Pidfd,
    Report,
    Read(StreamId),
    Write(StreamId),
    Feed,
    Gate,
}

#[cfg(test)]
mod tests {
    use super::program_status;
    use crate::sys::Reaped;

    fn exited(code: i32) -> Reaped {
        Reaped { code: libc::CLD_EXITED, status: code, ..Reaped::default() }
    }

    #[test]
    fn a_program_that_is_init_is_believed_only_as_far_as_its_exit_goes() {
        let xfsz = libc::SIGXFSZ;
        // Its handler's report and its exit agree: killed by the signal.
        let ws = program_status(Some(xfsz), &exited(128 + xfsz));
        assert!(libc::WIFSIGNALED(ws) && libc::WTERMSIG(ws) == xfsz, "{ws:#x}");
        // The same exit without a report: an exit code, as the program chose it.
        let ws = program_status(None, &exited(128 + xfsz));
        assert!(libc::WIFEXITED(ws) && libc::WEXITSTATUS(ws) == 128 + xfsz, "{ws:#x}");
        // A report its exit does not bear out is not believed.
        let ws = program_status(Some(libc::SIGABRT), &exited(0));
        assert!(libc::WIFEXITED(ws) && libc::WEXITSTATUS(ws) == 0, "{ws:#x}");
        let killed = Reaped { code: libc::CLD_KILLED, status: libc::SIGKILL, ..Reaped::default() };
        let ws = program_status(Some(xfsz), &killed);
        assert!(libc::WIFSIGNALED(ws) && libc::WTERMSIG(ws) == libc::SIGKILL, "{ws:#x}");
        let dumped = Reaped { code: libc::CLD_DUMPED, status: libc::SIGSEGV, ..Reaped::default() };
        let ws = program_status(None, &dumped);
        assert!(libc::WIFSIGNALED(ws) && libc::WTERMSIG(ws) == libc::SIGSEGV && libc::WCOREDUMP(ws), "{ws:#x}");
    }
}
