//! Jails released ahead of their run ([`Prepared::run_gated`](super::Prepared::run_gated)): the
//! program has started (an interpreter has loaded itself and waits on its stdin) but its run has
//! not; the [`Gate`] starts it with what the run brings (its code and stdin, files, tighter
//! limits, where its output goes), or cancels it.

use crate::error::Error;
use crate::layers::cgroup::{CgroupStats, CpuFiles, Leaf};
use crate::layers::filesystem::exchange::{LiveDir, Pick, PutFile, Taken};
use crate::layers::identity::OwnerLease;
use crate::policy::Limits;
use crate::report::Report;
use crate::sys;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What a run brings to a jail waiting at its gate.
#[derive(Debug, Default)]
pub struct Start {
    /// The program's stdin (then end of file); the jail needs a stdin pipe (see
    /// [`Job::stdin_data`](crate::Job::stdin_data)).
    pub stdin: Vec<u8>,
    /// Files for the run's writable directory, and files to take back from it afterwards.
    pub files: Option<Exchange>,
    /// The run's limits. The wall clock and the output caps are taken, each the tighter of the
    /// jail's and these ([`Limits::tighter`]); the ones a jail holds from its build (memory,
    /// processes, a guest's memory and fuel) must be its own, or the run is refused: a jail
    /// built ahead cannot tighten them.
    pub limits: Limits,
    /// Where stdout and stderr go as they come (pipes the caller reads; closed when the run is
    /// over), instead of into the report.
    pub stdout_to: Option<OwnedFd>,
    pub stderr_to: Option<OwnedFd>,
    /// The run's host calls: its tools and who answers them, for the run or for each of its
    /// turns (the jail needs a host-call channel: [`Job::host_calls`](crate::Job::host_calls)).
    /// `None`: a call fails at once.
    pub host: Option<super::Host>,
    /// Lent the run's writable directory once its files are in, and its cgroup's figures
    /// ([`LiveRun`]): a jail that serves turns ([`Prepared::run_turns`](super::Prepared::run_turns)).
    pub live: Option<Arc<LiveRun>>,
    /// The argument vector the report shows (the run's, not the waiting program's).
    pub argv_display: Option<Vec<String>>,
    /// The jail was built for this run, not ahead of it: its clock and CPU time count from the
    /// release (the program's start-up is the run's), and there is no `warm-start`.
    pub from_release: bool,
}

/// A run reached from outside while it goes on (a live session's interpreter between its
/// turns): its writable directory ([`LiveDir`]) and its cgroup's figures so far.
#[derive(Debug, Default)]
pub struct LiveRun {
    pub dir: LiveDir,
    leaf: Mutex<Option<Leaf>>,
}

impl LiveRun {
    /// The run's cgroup's figures so far (CPU time, peaks), when it has a cgroup.
    pub fn figures(&self) -> Option<crate::layers::cgroup::CgroupStats> {
        self.leaf.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(Leaf::stats)
    }

    pub(super) fn lend_leaf(&self, leaf: Option<&Leaf>) {
        *self.leaf.lock().unwrap_or_else(PoisonError::into_inner) = leaf.and_then(Leaf::reader);
    }
}

/// Files in and out of one of the run's writable directories (an empty one of the run's own).
#[derive(Debug, Default)]
pub struct Exchange {
    /// The directory, as the program sees it (`/app`).
    pub dir: PathBuf,
    /// Written into it before the run's clock starts.
    pub put: Vec<PutFile>,
    /// Read out of it when the run is over.
    pub take: Option<Pick>,
}

/// Opens (or cancels) one jail's run from another thread. One gate serves one jail.
///
/// Opening does the first step of the hand-over on the caller's thread when it can: a run with
/// no files to put gets its stdin written into the jail's stdin pipe right there (what fits at
/// once), so the waiting program has its code without waiting for the supervisor's thread to
/// wake; that thread does the rest. The run's clock starts at the opening.
#[derive(Debug)]
pub struct Gate {
    rx: OwnedFd,
    tx: OwnedFd,
    /// The jail was built for the one run this gate will open: a program that dies before the
    /// opening died in that run (of its limits, say), and the run reports it.
    one_run: bool,
    start: Mutex<Option<Opening>>,
    /// A duplicate of the jail's stdin pipe (its write end), while the jail waits with nothing
    /// of its own to feed first.
    feed: Mutex<Option<OwnedFd>>,
    /// The jail's host-call channel (the supervisor's ends) while it waits: an opening without
    /// host calls closes it before the program can have its code, so that a call fails at once.
    calls: Mutex<Option<(OwnedFd, OwnedFd)>>,
    /// The jail's cgroup's CPU-time files: the opening reads the CPU time spent waiting before
    /// the program can have its code, so that none of the run's own is counted as the wait's.
    cpu: Mutex<Option<CpuFiles>>,
}

/// A start and when it came, with how much of its stdin is already in the pipe.
#[derive(Debug)]
pub(super) struct Opening {
    pub(super) start: Start,
    pub(super) at: Instant,
    pub(super) fed: usize,
    /// The CPU time the jail had spent when the opening came (before the program had its code).
    pub(super) cpu_before: Option<CgroupStats>,
}

impl Gate {
    /// A gate for a jail built ahead of a run not known yet: a program that dies before the
    /// opening is [`Gated::NotStarted`].
    pub fn new() -> Result<Gate, Error> {
        Gate::with(false)
    }

    /// A gate for a jail built for one run that is about to open it (always opened or
    /// cancelled): a program that dies before the opening (killed by its memory limit while it
    /// loads, say) is reported as that run, unless its jail's setup failed.
    pub fn for_one_run() -> Result<Gate, Error> {
        Gate::with(true)
    }

    fn with(one_run: bool) -> Result<Gate, Error> {
        let (rx, tx) = sys::pipe().map_err(|errno| Error::Supervisor { what: "create a gate", errno })?;
        sys::set_nonblocking(tx.as_fd(), true).map_err(|errno| Error::Supervisor { what: "create a gate", errno })?;
        Ok(Gate {
            rx,
            tx,
            one_run,
            start: Mutex::new(None),
            feed: Mutex::new(None),
            calls: Mutex::new(None),
            cpu: Mutex::new(None),
        })
    }

    /// Starts the run with `start` (never blocks).
    pub fn open(&self, start: Start) {
        let at = Instant::now();
        let mut fed = 0;
        // Held until the opening is stored: the supervisor's thread, seeing the program end,
        // takes the opening through this lock, so it knows whether the program had its code.
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        if start.host.is_none() {
            self.calls.lock().unwrap_or_else(PoisonError::into_inner).take();
        }
        let cpu_before = self.cpu.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(CpuFiles::read);
        let no_files = start.files.as_ref().is_none_or(|x| x.put.is_empty());
        if let (true, Some(fd)) = (no_files, feed.take()) {
            // Non-blocking: what does not fit now, the supervisor's thread feeds.
            fed = sys::write(fd.as_raw_fd(), &start.stdin).unwrap_or(0);
        }
        *self.start.lock().unwrap_or_else(PoisonError::into_inner) = Some(Opening { start, at, fed, cpu_before });
        drop(feed);
        let _ = sys::write(self.tx.as_raw_fd(), &[1]);
    }

    /// Takes the waiting jail down without a run (never blocks).
    pub fn cancel(&self) {
        let _ = sys::write(self.tx.as_raw_fd(), &[0]);
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }

    pub(super) fn one_run(&self) -> bool {
        self.one_run
    }

    /// Blocks until the gate is opened or cancelled (a one-run gate's holder does one of them).
    pub(super) fn wait(&self) {
        let mut fds = [libc::pollfd { fd: self.rx.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        while let Err(sys::Errno(libc::EINTR)) = sys::ppoll(&mut fds, None) {}
    }

    /// Lets [`Gate::open`] write the run's stdin itself (a duplicate of the pipe's write end).
    /// Holds the jail's host-call channel while it waits ([`Gate::open`] closes it for a run
    /// without host calls).
    pub(super) fn hold_calls(&self, calls: Option<(OwnedFd, OwnedFd)>) {
        *self.calls.lock().unwrap_or_else(PoisonError::into_inner) = calls;
    }

    /// The host-call channel, when the opening kept it.
    pub(super) fn take_calls(&self) -> Option<(OwnedFd, OwnedFd)> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Lets [`Gate::open`] read the jail's CPU time at the opening (its cgroup's files, open).
    pub(super) fn watch_cpu(&self, files: Option<CpuFiles>) {
        *self.cpu.lock().unwrap_or_else(PoisonError::into_inner) = files;
    }

    pub(super) fn arm(&self, feed: OwnedFd) {
        *self.feed.lock().unwrap_or_else(PoisonError::into_inner) = Some(feed);
    }

    /// The opening, if the gate was opened (waits for an opening under way); disarms the feed.
    pub(super) fn take(&self) -> Option<Opening> {
        let mut feed = self.feed.lock().unwrap_or_else(PoisonError::into_inner);
        feed.take();
        self.start.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// A run that went through its gate.
#[derive(Debug)]
pub struct Finished {
    pub report: Report,
    /// What the program wrote on its extra output channels.
    pub channels: Vec<Vec<u8>>,
    /// The files taken back ([`Exchange::take`]).
    pub files: Option<Taken>,
    /// The run's cgroup, still to be removed: a caller answering someone can do that after
    /// answering ([`Cleanup::done`]); dropping it removes it too. A run that announced its end
    /// still holds its frozen program's memory until then.
    pub cleanup: Option<Cleanup>,
}

/// What is left of a run once it is reported: its (empty) cgroup, its writable directories'
/// tmpfs, its owner uid's lease, the ends of its jail's channels.
#[derive(Debug)]
pub struct Cleanup {
    /// A jail frozen (or killed) when its program announced its end: its init, killed and reaped
    /// here.
    pub(super) reap: Option<Reaper>,
    pub(super) leaf: Option<Leaf>,
    pub(super) _staged: Vec<OwnedFd>,
    pub(super) _owner: Option<OwnerLease>,
    /// The jail's channels' ends: its sync socket, its seccomp listener, init's report.
    pub(super) _fds: Vec<OwnedFd>,
}

impl Cleanup {
    /// Removes the run's cgroup and lets the rest go; says so when the cgroup could not be
    /// removed (left behind, for the next start of a supervisor in that cgroup to reap).
    pub fn done(self) -> Option<String> {
        // The cgroup empties once init is reaped.
        drop(self.reap);
        self.leaf.and_then(|l| l.remove().err()).map(|e| e.to_string())
    }
}

/// Kills and reaps an init when dropped (waits for the kernel to finish taking the jail down):
/// one frozen after its program's account, one killed then, or one exiting.
#[derive(Debug)]
pub(super) struct Reaper(pub(super) Option<OwnedFd>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(fd) = &self.0 {
            let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
            let _ = sys::waitid_pidfd(fd.as_fd());
        }
    }
}

/// How a gated jail ended.
#[derive(Debug)]
pub enum Gated {
    /// Its run started and ended.
    Ran(Box<Finished>),
    /// It ended before its run started: the program died while waiting (why, in words), or the
    /// gate was cancelled. Nothing of it is left.
    NotStarted(String),
}
