//! A prepared jail's run, in the order it happens: its writable directories copied in, the
//! release, the wait at its gate (a jail released ahead of its run), the pump until the run is
//! over, what it leaves collected (output, channels, the cgroup's figures, files taken back,
//! writable directories written back), the verdict and the report.

use super::channels::{Feed, Pipes, Sink, Stream, Streams};
use super::gate::{Cleanup, Exchange, Finished, Gate, Gated, Opening, Reaper};
use super::pump::{Outcome, Pump, Run, Stop};
use super::verdict::{Accounting, Ending, verdict};
use super::{Output, PipesHeld, Prepared, ms, words};
use crate::error::Error;
use crate::layers::cgroup::{CgroupStats, Leaf};
use crate::layers::filesystem::{FsError, exchange, staging};
use crate::policy::{Limits, PolicyError};
use crate::report::{GuestEnd, LayerReport, Layers, Report, StreamReport, WarmStart, WritableDir, signal_name};
use crate::sys::{self, Errno};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the run started: at the release (a jail built for it), or at its gate's opening, with
/// what the opening brought.
pub(super) struct Begun {
    /// When the jail was released.
    pub(super) released: Instant,
    /// Where the run's clock starts.
    pub(super) start: Instant,
    pub(super) wall_timeout: Duration,
    /// Bytes for the program's stdin.
    pub(super) stdin: Option<Arc<[u8]>>,
    pub(super) host: Option<super::Host>,
    pub(super) exchange: Option<Exchange>,
    pub(super) argv_display: Option<Vec<String>>,
    pub(super) warm: Option<WarmStart>,
    /// The CPU the program spent getting ready (not the run's).
    pub(super) cpu_before: CgroupStats,
    /// The report's layers, made (and encoded) while a gated jail waited: nothing of the run
    /// changes them.
    pub(super) layers: Option<Layers>,
}

impl Begun {
    /// A run begun at its release, `at`, under the plan's clock.
    pub(super) fn at(at: Instant, wall_timeout: Duration) -> Begun {
        Begun {
            released: at,
            start: at,
            wall_timeout,
            stdin: None,
            host: None,
            exchange: None,
            argv_display: None,
            warm: None,
            cpu_before: CgroupStats::default(),
            layers: None,
        }
    }
}

/// A run that the pump saw end, and what the supervisor holds of it.
pub(super) struct Over {
    pub(super) outcome: Outcome,
    pub(super) streams: Streams,
    pub(super) begun: Begun,
    pub(super) copied: Vec<(staging::Manifest, staging::Summary)>,
    pub(super) host_owner: staging::CreateAs,
    /// The supervising thread's CPU time when the run began (the report's `supervisor-cpu-ms`).
    pub(super) cpu_at_start: Duration,
    /// The ends of the jail's channels that nothing reads any more.
    pub(super) fds: Vec<OwnedFd>,
}

/// What a run left, collected after it: its output, its cgroup's figures (the run's own), the
/// files taken back, its writable directories written back.
struct Collected {
    out: StreamReport,
    err: StreamReport,
    channels: Vec<Vec<u8>>,
    unsent: [u64; 2],
    leaf: Option<Leaf>,
    stats: CgroupStats,
    files: Option<exchange::Taken>,
    dirs: Vec<WritableDir>,
    /// Write-backs that failed, in words.
    notes: Vec<String>,
}

/// A jail just released: the supervisor's ends of its channels, its output streams, what was
/// copied into its writable directories, and whose ids the files it makes and gives back take.
pub(super) struct Released {
    pub(super) at: Instant,
    pub(super) sync: OwnedFd,
    pub(super) report: OwnedFd,
    pub(super) streams: Streams,
    pub(super) stdin_feed: Option<OwnedFd>,
    pub(super) calls: Option<(OwnedFd, OwnedFd)>,
    pub(super) copied: Vec<(staging::Manifest, staging::Summary)>,
    pub(super) create_as: staging::CreateAs,
    pub(super) host_owner: staging::CreateAs,
}

impl Prepared<'_> {
    /// Copies the writable directories in and releases the jail: the child execs the program.
    pub(super) fn release(&mut self, output: Output<'_>) -> Result<Released, Error> {
        let plan = self.plan;
        let Some(PipesHeld(pipes)) = self.pipes.take() else {
            return Err(Error::Supervisor { what: "run a prepared jail twice", errno: Errno(libc::EINVAL) });
        };
        // The host directories' contents, as of now, into the writable directories' tmpfs (as
        // the run's host ids: the tmpfs is its user namespace's); what comes back belongs to
        // `identity.host-uid` on the host, whichever uid the run had.
        let as_root = sys::geteuid() == 0;
        let create_as = as_root.then(|| (plan.id.run_uid(self._owner.as_ref()), plan.id.host_gid));
        let host_owner = as_root.then_some((plan.id.host_uid, plan.id.host_gid));
        let mut copied = Vec::new();
        for (place, root) in plan.fs.staged().iter().zip(&self.staged) {
            copied.push(staging::copy_in(place, root, create_as)?);
        }
        let at = Instant::now();
        // The last barrier: the child execs the program. If it already failed, the report says why.
        let _ = sys::send_nosignal(pipes.sync.as_fd(), &[2]);
        let Pipes { sync, report, stdout, stderr, extra, stdin_feed, calls } = pipes;
        let streams = self.streams(output, stdout, stderr, extra);
        Ok(Released { at, sync, report, streams, stdin_feed, calls, copied, create_as, host_owner })
    }

    /// What the pump of this jail's run watches (`sync`: its release channel); `account`: the
    /// caller reads the program's account of its end.
    pub(super) fn run_of<'s>(&'s self, sync: &'s OwnedFd, account: bool) -> Run<'s> {
        let plan = self.plan;
        Run {
            pid: self.pid,
            pidfd: &self.pidfd,
            sync,
            seccomp: &plan.seccomp,
            pid_namespace: plan.policy.namespaces.pid,
            init_is_program: self.init_is_program,
            leaf: self.leaf.as_ref(),
            // An announced end needs the account read: the exit status is the one it implies.
            announces_end: plan.announces_end && account,
            waits_after_account: plan.announces_end,
            end_over_cap: plan.policy.over_cap == crate::policy::OverCap::End,
            turns: plan.turns,
        }
    }

    pub(super) fn finish(
        mut self,
        output: Output<'_>,
        gate: Option<&Gate>,
        guest: Option<impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>>,
    ) -> Result<Gated, Error> {
        let plan = self.plan;
        let cpu_at_start = sys::thread_cpu_time();
        let Released { at: released, sync, report, mut streams, stdin_feed, calls, copied, create_as, host_owner } =
            self.release(output)?;
        let mut begun = Begun { stdin: self.stdin_data.take(), ..Begun::at(released, plan.policy.wall_timeout) };
        let listener = self.egress.take();
        let run = self.run_of(&sync, guest.is_some());
        let mut pump = Pump::new(run, report);
        let mut calls = calls;
        if let Some(gate) = gate {
            gate.hold_calls(calls.take());
            let waited = self.wait_at_gate(gate, &mut pump, stdin_feed.as_ref(), &mut streams, &mut begun, create_as);
            match waited {
                Ok(None) => {}
                Ok(Some(not_started)) => {
                    self.pid = 0;
                    return Ok(not_started);
                }
                Err(e) => {
                    self.pid = 0;
                    return Err(e);
                }
            }
        }
        if let Some(gate) = gate {
            calls = gate.take_calls();
        }
        // The host calls are served beside the pump; with none, their ends close now.
        let stop_calls = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let calls = super::calls::serve_or_lend(calls, begun.host.take(), &stop_calls);
        // So is the egress proxy, from the run's start (its connections end with it).
        let proxy = egress_proxy(listener, &plan.policy.network)?;
        let feed = stdin_feed.map(|fd| Feed::new(fd, begun.stdin.take().unwrap_or_default()));
        let Stop::Ended(outcome) = pump.go(&mut streams, feed, Some(begun.start + begun.wall_timeout), None)? else {
            return Err(Error::Supervisor { what: "pump the run", errno: Errno(libc::EINVAL) });
        };
        let egress = proxy.map(crate::egress::Proxy::finish);
        let mut fds: Vec<OwnedFd> = pump.into_fds().collect();
        fds.push(sync);
        stop_calls.store(true, std::sync::atomic::Ordering::SeqCst);
        let host_calls = calls.and_then(|h| h.join().ok()).unwrap_or_default();
        let over = Over { outcome, streams, begun, copied, host_owner, cpu_at_start, fds };
        let mut finished = self.conclude(over, guest)?;
        finished.report.host_calls = host_calls;
        finished.report.egress = egress;
        if gate.is_none() {
            // Its cgroup goes now, and a leftover is said in the report too.
            if let Some(note) = finished.cleanup.take().and_then(Cleanup::done) {
                finished.report.add_note(note);
            }
        }
        Ok(Gated::Ran(Box::new(finished)))
    }

    /// A run the pump saw end: what it left collected, its verdict and report, and what is
    /// left of it to clean up after the answer.
    pub(super) fn conclude(
        &mut self,
        over: Over,
        guest: Option<impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>>,
    ) -> Result<Finished, Error> {
        let Over { outcome, streams, begun, copied, host_owner, cpu_at_start, fds } = over;
        // Reaped, or taken down and reaped with the cleanup: nothing for Drop to kill.
        self.pid = 0;
        let mut c = self.collect(streams, &begun, copied, host_owner)?;
        let report = self.report(&outcome, &mut c, begun, guest, cpu_at_start);
        // The run's cgroup, its writable directories' tmpfs and its owner uid go after the
        // answer, when the caller can wait for them.
        let reap = outcome.init_unreaped.then(|| Reaper(self.pidfd.try_clone().ok()));
        // So do the ends of the jail's channels nothing reads any more (closing a socket or a
        // seccomp listener is not free, and the answer need not wait for it).
        let cleanup = Cleanup {
            reap,
            leaf: c.leaf,
            _staged: std::mem::take(&mut self.staged),
            _owner: self._owner.take(),
            _fds: fds,
        };
        Ok(Finished { report, channels: c.channels, files: c.files, cleanup: Some(cleanup) })
    }

    /// The program's stdout and stderr (kept, or passed on to the caller's fds) under the
    /// policy's caps, then its extra output channels under theirs.
    fn streams(&self, output: Output<'_>, stdout: OwnedFd, stderr: OwnedFd, extra: Vec<OwnedFd>) -> Streams {
        let plan = self.plan;
        let forward = |fd: BorrowedFd<'_>| Some(fd.as_raw_fd());
        let (fwd_out, fwd_err) = match output {
            Output::Capture => (None, None),
            Output::Forward { stdout, stderr } => (forward(stdout), forward(stderr)),
        };
        Streams {
            stdout: Stream::new(Some(stdout), Sink::new(plan.policy.stdout_max_bytes, fwd_out)),
            stderr: Stream::new(Some(stderr), Sink::new(plan.policy.stderr_max_bytes, fwd_err)),
            channels: extra
                .into_iter()
                .zip(&plan.extra_outputs)
                .map(|(fd, cap)| Stream::new(Some(fd), Sink::new(Some(*cap), None)))
                .collect(),
        }
    }

    /// Waits at the gate while the program gets ready (nothing of the run is counted yet), then
    /// takes what the opening brings: files into the writable directory, the stdin, the tighter
    /// caps and deadline, where the output goes, and the clock. `Some`: the run never started
    /// (the jail's setup failed, its program died waiting, the gate was cancelled).
    fn wait_at_gate(
        &self,
        gate: &Gate,
        pump: &mut Pump<'_>,
        stdin_feed: Option<&OwnedFd>,
        streams: &mut Streams,
        begun: &mut Begun,
        create_as: staging::CreateAs,
    ) -> Result<Option<Gated>, Error> {
        // Before the feed is armed: an opening that feeds the program reads the CPU spent so far
        // first.
        gate.watch_cpu(self.leaf.as_ref().and_then(Leaf::cpu_files));
        // With nothing of its own to feed first, the opening can write the run's stdin.
        if begun.stdin.as_ref().is_none_or(|d| d.is_empty())
            && let Some(fd) = stdin_feed.and_then(|f| f.try_clone().ok())
        {
            gate.arm(fd);
        }
        begun.layers = Some(Layers::encoded(self.layers(self.leaf.is_some())));
        let stop = pump.go(&mut Streams::none(), None, None, Some(gate.fd()))?;
        // A jail whose setup failed never ran anything. A program that ended after an opening
        // fed it its code ran, and so did one built for the run it died waiting for: those runs
        // are reported.
        let setup_failed = pump.failure().is_some();
        let died_in_its_run = matches!(stop, Stop::Died) && gate.one_run() && !setup_failed;
        if died_in_its_run {
            gate.wait();
        }
        let opening =
            gate.take().filter(|o| !setup_failed && (matches!(stop, Stop::Gate) || o.fed > 0 || died_in_its_run));
        let Some(Opening { start: s, at: opened_at, fed, cpu_before }) = opening else {
            if matches!(stop, Stop::Gate) {
                pump.kill();
            }
            let ended = pump.go(&mut Streams::none(), None, None, None)?;
            return Ok(Some(Gated::NotStarted(match ended {
                Stop::Ended(o) if matches!(stop, Stop::Died) || o.failure.is_some() => self.died_waiting(&o),
                _ => "cancelled".into(),
            })));
        };
        if !s.from_release {
            begun.start = opened_at;
            // Read by the opening, before the program could have its code (the opening can feed
            // it before this thread wakes).
            begun.cpu_before = cpu_before.or_else(|| self.leaf.as_ref().map(Leaf::cpu_used)).unwrap_or_default();
        }
        let jail = Limits::of(&self.plan.policy);
        let limits = s.limits.tighter(&jail);
        let refused = refuse_built_with(&limits, &jail);
        if let Some(e) = refused.or_else(|| s.files.as_ref().and_then(|x| self.put_files(x, create_as).err())) {
            pump.kill();
            let _ = pump.go(&mut Streams::none(), None, None, None)?;
            return Err(e);
        }
        // The start's bytes follow the plan's own (a module the runner compiles, say).
        let mut bytes = begun.stdin.take().map(|d| d.to_vec()).unwrap_or_default();
        bytes.extend_from_slice(s.stdin.get(fed..).unwrap_or_default());
        begun.stdin = Some(Arc::from(bytes));
        begun.wall_timeout = limits.wall_timeout().unwrap_or(begun.wall_timeout);
        let (out, err) = (&mut streams.stdout, &mut streams.stderr);
        out.sink.tighten(limits.stdout_max_bytes);
        err.sink.tighten(limits.stderr_max_bytes);
        if let Some(fd) = s.stdout_to {
            out.sink.forward_to(fd);
        }
        if let Some(fd) = s.stderr_to {
            err.sink.forward_to(fd);
        }
        begun.exchange = s.files;
        begun.argv_display = s.argv_display;
        begun.host = s.host;
        if let Some(live) = &s.live {
            live.lend_leaf(self.leaf.as_ref());
            let staged = self.plan.fs.staged();
            if let Some(x) = &begun.exchange
                && let Some(i) = exchange::place_index(staged, &x.dir)
                && let (Some(place), Some(root)) = (staged.get(i), self.staged.get(i))
            {
                live.dir.lend(place, root, create_as);
            }
        }
        let before = &begun.cpu_before;
        begun.warm = (!s.from_release).then_some(WarmStart {
            waited_ms: ms(begun.start.duration_since(begun.released)),
            cpu_ms: before.cpu_user_us.zip(before.cpu_sys_us).map(|(u, s)| (u + s) as f64 / 1000.0),
        });
        Ok(None)
    }

    /// What the run left: its output flushed, its channels, its cgroup's figures less what the
    /// program spent getting ready, the files asked back (before the tmpfs goes), its writable
    /// directories written back to the host.
    fn collect(
        &mut self,
        streams: Streams,
        begun: &Begun,
        copied: Vec<(staging::Manifest, staging::Summary)>,
        host_owner: staging::CreateAs,
    ) -> Result<Collected, Error> {
        let plan = self.plan;
        let Streams { stdout: mut out, stderr: mut err, channels } = streams;
        out.sink.flush();
        err.sink.flush();
        let unsent = [out.sink.unsent(), err.sink.unsent()];
        let (out, err) = (out.sink.report(), err.sink.report());
        let channels: Vec<Vec<u8>> = channels.into_iter().map(|s| s.sink.captured()).collect();
        let leaf = self.leaf.take();
        let mut stats = leaf.as_ref().map(Leaf::stats).unwrap_or_default();
        let minus = |now: Option<u64>, before: Option<u64>| now.map(|n| n.saturating_sub(before.unwrap_or(0)));
        stats.cpu_user_us = minus(stats.cpu_user_us, begun.cpu_before.cpu_user_us);
        stats.cpu_sys_us = minus(stats.cpu_sys_us, begun.cpu_before.cpu_sys_us);
        let files = begun.exchange.as_ref().and_then(|x| {
            let pick = x.take.as_ref()?;
            let root = self.staged.get(exchange::place_index(plan.fs.staged(), &x.dir)?)?;
            Some(exchange::take(root, pick))
        });
        let mut notes = Vec::new();
        let mut dirs = Vec::new();
        for ((place, root), (manifest, summary)) in plan.fs.staged().iter().zip(&self.staged).zip(copied) {
            let (dir, note) = write_back(place, root, &manifest, summary, host_owner);
            dirs.push(dir);
            notes.extend(note);
        }
        Ok(Collected { out, err, channels, unsent, leaf, stats, files, dirs, notes })
    }

    /// How the run ended, decided once (the guest's own account weighed when it gave one), and
    /// the report of it.
    fn report(
        &self,
        outcome: &Outcome,
        c: &mut Collected,
        begun: Begun,
        guest: Option<impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>>,
        cpu_at_start: Duration,
    ) -> Report {
        let plan = self.plan;
        let stats = c.stats;
        let mut ending = Ending {
            failure: outcome.failure,
            violation: outcome.violation.is_some(),
            exit_status: outcome.exit_status,
            timed_out: outcome.timed_out,
            output_limit: outcome.output_limit,
            init_exited: outcome.reaped.code == libc::CLD_EXITED,
            init_status: outcome.reaped.status,
            cpu_used_us: stats.cpu_user_us.zip(stats.cpu_sys_us).map_or_else(
                || u64::try_from((outcome.reaped.user + outcome.reaped.system).as_micros()).unwrap_or(u64::MAX),
                |(u, s)| u + s,
            ),
        };
        let accounting = Accounting {
            oom_kills: stats.oom_kills,
            pids_limit_hit: stats.pids_limit_hit,
            disk_full: c.dirs.iter().any(|d| d.full),
            cpu_limit_s: plan.cpu_limit_s(),
        };
        let guest = guest.and_then(|g| g(&c.channels));
        if outcome.announced {
            // The program's status is the one its account implies (init has not reaped it yet).
            ending.exit_status = guest.as_ref().map(|g| (g.exit_code() & 0xff) << 8);
        }
        let v = verdict(&ending, &accounting, guest.as_ref());
        let wall = outcome.reaped_at.duration_since(begun.start);
        let streams = (std::mem::take(&mut c.out), std::mem::take(&mut c.err));
        let layers = begun.layers.unwrap_or_else(|| self.layers(c.leaf.is_some()).into());
        let mut report = plan.build_report(outcome, wall, streams, stats, v, layers);
        report.wall_timeout_ms = u64::try_from(begun.wall_timeout.as_millis()).unwrap_or(u64::MAX);
        if let Some(argv) = begun.argv_display {
            report.argv = argv;
        }
        report.warm_start = begun.warm;
        report.writable_dirs = std::mem::take(&mut c.dirs);
        report.supervisor_cpu_ms = Some(ms(sys::thread_cpu_time().saturating_sub(cpu_at_start)));
        // The run itself is reported as it happened; what the program could not see (a refused
        // exec is only EPERM to it) and a failed write-back are said loudly.
        for note in words::run_notes(outcome, c.unsent).into_iter().chain(std::mem::take(&mut c.notes)) {
            report.add_note(note);
        }
        report
    }

    /// The report's layers: the plan's, with whether the run's cgroup leaf was made, and where
    /// its network namespace came from.
    pub(super) fn layers(&self, leaf_made: bool) -> Vec<LayerReport> {
        let mut layers = self.plan.layers_with(leaf_made);
        super::set_net_words(&mut layers, self.net);
        layers
    }

    /// Writes a run's files into its writable directory (an empty one of the run's own).
    pub(super) fn put_files(&self, x: &Exchange, create_as: staging::CreateAs) -> Result<(), Error> {
        let staged = self.plan.fs.staged();
        let place = exchange::place_index(staged, &x.dir).and_then(|i| Some((staged.get(i)?, self.staged.get(i)?)));
        let Some((place, root)) = place else {
            return Err(FsError::Refused {
                origin: "files".into(),
                path: x.dir.clone(),
                reason: "is not a writable directory of this jail".into(),
            }
            .into());
        };
        Ok(exchange::put(place, root, &x.put, create_as)?)
    }

    /// Why a jail ended while it waited at its gate, in words.
    fn died_waiting(&self, o: &Outcome) -> String {
        if let Some(f) = o.failure {
            return self.plan.describe_failure(f);
        }
        match (o.reaped.code, o.exit_status) {
            (_, Some(status)) if libc::WIFEXITED(status) => {
                format!("the program exited with {} before its run started", libc::WEXITSTATUS(status))
            }
            (_, Some(status)) if libc::WIFSIGNALED(status) => {
                format!("the program was killed by {} before its run started", signal_name(libc::WTERMSIG(status)))
            }
            _ => "the program ended before its run started".into(),
        }
    }
}

/// One writable directory after the run: its report entry, and a note when writing back failed.
/// The egress proxy on the jail's listening socket (a policy with an egress list), serving from
/// now on.
pub(super) fn egress_proxy(
    listener: Option<OwnedFd>,
    policy: &crate::policy::NetworkPolicy,
) -> Result<Option<crate::egress::Proxy>, Error> {
    let Some(listener) = listener else { return Ok(None) };
    crate::egress::Proxy::start(listener, policy).map(Some).map_err(|e| Error::Supervisor {
        what: "start the egress proxy",
        errno: Errno(e.raw_os_error().unwrap_or(libc::EIO)),
    })
}

fn write_back(
    place: &staging::StagedPlace,
    root: &OwnedFd,
    manifest: &staging::Manifest,
    copied: staging::Summary,
    owner: staging::CreateAs,
) -> (WritableDir, Option<String>) {
    let usage = staging::usage(root);
    let mut dir = WritableDir {
        path: place.inside.display().to_string(),
        bytes_used: usage.bytes_used,
        files_used: usage.files_used,
        full: usage.full,
        not_carried: copied.not_carried,
        ..WritableDir::default()
    };
    match staging::write_back(place, root, manifest, owner) {
        Ok(back) => {
            dir.written_back = back.written;
            dir.written_back_bytes = back.written_bytes;
            dir.removed = back.removed;
            (dir, None)
        }
        Err(e) => (dir, Some(e.to_string())),
    }
}

/// A jail built ahead holds the limits it was built with: a start asking tighter ones of it is
/// refused (they need a jail of their own), never run under looser ones.
fn refuse_built_with(asked: &Limits, jail: &Limits) -> Option<Error> {
    let keys = ["memory-max-bytes", "pids-max", "wasm-memory-max-bytes", "fuel"];
    let (a, j) = (asked.built_with(), jail.built_with());
    let i = (0..keys.len()).find(|&i| a[i] != j[i])?;
    let shown = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
    Some(Error::Policy(PolicyError::Override {
        flag: format!("limits.{}", keys[i]),
        message: format!(
            "{} asked of a jail built with {}: a jail built ahead holds the limits it was built with (build one for this run)",
            shown(a[i]),
            shown(j[i])
        ),
    }))
}
