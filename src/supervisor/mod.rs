//! The parent side of a run, in the order it happens: open the channels, build the child's
//! arguments, spawn it into its namespaces (as the run's owner uid), write its id maps, release
//! it, take its writable directories; then, when the run is released, copy them in, start the
//! program, pump until the run is over, decide how it ended, write back and report.
//!
//! `channels.rs` holds the pipes and what flows through them, `pump.rs` the event loop while the
//! program runs, `verdict.rs` the one decision of how a run ended, `words.rs` what went wrong in
//! words.

mod channels;
mod gate;
mod pump;
mod verdict;
mod words;

pub use channels::Output;
pub use gate::{Cleanup, Exchange, Finished, Gate, Gated, Start};
use gate::{Opening, Reaper};
pub use verdict::{Accounting, Ending, Note, Verdict, verdict};

use crate::child::{self, ChildArgs};
use crate::error::Error;
use crate::layers::cgroup::{CgroupStats, Leaf};
use crate::layers::fds::ChildFds;
use crate::layers::filesystem::{exchange, staging};
use crate::layers::identity::{IdentityError, OwnerLease};
use crate::plan::Plan;
use crate::policy::{Limit, RlimitKey, StdinMode};
use crate::report::{GuestEnd, Report, StreamReport, WarmStart, WritableDir, signal_name};
use crate::sys::{self, CStrArray, Errno};
use channels::{ChildEnds, Feed, Pipes, Sink, Stream};
use pump::{Outcome, Pump, Run, Stop};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// A jail built and waiting at its last barrier before exec: namespaces made, cgroup joined,
/// root built, privileges dropped, Landlock and seccomp on. [`Prepared::run`] releases it.
///
/// Creating it pays everything the jail costs up front (on a cgroup v1 host, the 8-11 ms the
/// kernel takes to move a process between cgroups after a quiet spell), so a long-lived caller
/// can keep one ready per expected run and start runs without that latency. Dropping an unused
/// one kills its child and removes its cgroup.
#[derive(Debug)]
pub struct Prepared<'p> {
    plan: &'p Plan,
    pid: i32,
    pidfd: OwnedFd,
    pipes: Option<PipesHeld>,
    stdin_data: Option<std::sync::Arc<[u8]>>,
    leaf: Option<Leaf>,
    /// The tmpfs of each writable directory (`FsPlan::staged` order), handed over by the child.
    staged: Vec<OwnedFd>,
    /// The uid owning the run's user namespace, held until the run is over.
    _owner: Option<OwnerLease>,
}

/// The supervisor's ends of a parked jail's channels (taken when it runs).
struct PipesHeld(Pipes);

impl std::fmt::Debug for PipesHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pipes")
    }
}

/// The per-run objects the child gets besides its pipes: fds the parent opened for it.
struct RunFds {
    /// This run's detached clones of the bind sources (root's supervisor).
    trees: Vec<OwnedFd>,
    /// This run's Landlock ruleset.
    ruleset: Option<OwnedFd>,
    /// The `tasks` files of the run's v1 cgroup leaves.
    tasks: Vec<OwnedFd>,
}

fn raw(fds: &[OwnedFd]) -> Vec<RawFd> {
    fds.iter().map(AsRawFd::as_raw_fd).collect()
}

impl Plan {
    /// Runs the plan once: starts the jail, waits for the program (at most the wall-clock
    /// limit), and reports. `Err` means nothing was started; a failure inside the jail comes back
    /// as a report with status `setup-failed`.
    pub fn run(&self, output: Output<'_>) -> Result<Report, Error> {
        self.prestart()?.run(output)
    }

    /// Builds the jail up to the exec and parks it there (see [`Prepared`]).
    pub fn prestart(&self) -> Result<Prepared<'_>, Error> {
        let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
        let renumber = |fds: Vec<OwnedFd>| {
            fds.into_iter().map(sys::above_stdio).collect::<Result<Vec<_>, _>>().map_err(sv("renumber an fd"))
        };
        let (pipes, ends) =
            channels::open(self.extra_outputs.len(), self.stdin_data.is_some(), self.stdin == StdinMode::Inherit)?;
        // The run's cgroup leaves (removed when `leaf` drops, on every path out of here).
        let leaf = self.cgroup.create_leaf()?;
        let fds = RunFds {
            trees: renumber(self.fs.clone_trees()?)?,
            ruleset: self
                .landlock
                .build_ruleset(&self.fs, self.policy.filesystem.writable_exec)?
                .map(sys::above_stdio)
                .transpose()
                .map_err(sv("renumber an fd"))?,
            tasks: renumber(leaf.as_ref().map(Leaf::open_tasks).transpose()?.unwrap_or_default())?,
        };
        // With v1 leaves, the cgroup namespace comes after the child's move into them.
        let newcgroup = libc::CLONE_NEWCGROUP as u64;
        let late_cgroupns = !fds.tasks.is_empty() && self.ns.clone_flags & newcgroup != 0;
        let clone_flags = if late_cgroupns { self.ns.clone_flags & !newcgroup } else { self.ns.clone_flags };

        let (extra, trees, tasks) = (raw(&ends.extra), raw(&fds.trees), raw(&fds.tasks));
        let mut keep: Vec<RawFd> = vec![ends.sync.as_raw_fd(), ends.report.as_raw_fd(), self.program.exe.as_raw_fd()];
        keep.extend(fds.ruleset.as_ref().map(AsRawFd::as_raw_fd));
        keep.extend(&trees);
        keep.extend(&extra);
        keep.sort_unstable();
        keep.dedup();
        let (argv, envp) = (CStrArray::new(&self.program.argv), CStrArray::new(&self.envp));
        let args = ChildArgs {
            fds: ChildFds {
                stdin: ends.stdin.as_ref().map_or(self.dev_null.as_raw_fd(), AsRawFd::as_raw_fd),
                stdout: ends.stdout.as_raw_fd(),
                stderr: ends.stderr.as_raw_fd(),
                extra: &extra,
                keep: &keep,
            },
            sync: ends.sync.as_raw_fd(),
            report: ends.report.as_raw_fd(),
            fs: &self.fs,
            trees: &trees,
            uts: &self.uts,
            rlimits: &self.rlimits,
            id: &self.id,
            privileges: &self.privileges,
            landlock: &self.landlock,
            ruleset: fds.ruleset.as_ref().map(AsRawFd::as_raw_fd),
            seccomp: &self.seccomp,
            exe: self.program.exe.as_raw_fd(),
            argv: &argv,
            envp: &envp,
            cgroup_tasks: &tasks,
            cgroup_namespace_after_move: late_cgroupns,
            pid_namespace: self.policy.namespaces.pid,
            scrub: sys::ArgsAreas::of_this_process(),
        };

        let owner = self.id.lease_owner()?;
        let (pid, pidfd) = self.spawn(&args, clone_flags, leaf.as_ref(), owner.as_ref())?;
        // The child has its copies; ours would keep the pipes from ever reaching end of file.
        drop::<(ChildEnds, RunFds)>((ends, fds));

        // The child may already have failed and gone; its report says why.
        let _ = sys::send_nosignal(pipes.sync.as_fd(), &[1]);
        // Its writable directories' tmpfs, handed over as it builds its root (none: it failed).
        let wanted = self.fs.staged().len();
        let staged = channels::receive_staged(pipes.sync.as_fd(), pidfd.as_fd(), wanted, self.policy.wall_timeout);
        let staged = match staged {
            Ok(staged) if staged.len() == wanted => staged,
            other => {
                // Not a run: take the child down and reap it before saying why (its own report,
                // or how it ended).
                kill_run(pid, pidfd.as_fd(), leaf.as_ref(), self.policy.namespaces.pid);
                let reaped = sys::waitid_pidfd(pidfd.as_fd()).ok();
                return Err(match other {
                    Err(e) => sv("receive the writable directories")(e),
                    Ok(_) => {
                        let (why, limit) = self.setup_death(pipes.report.as_fd(), reaped, leaf.as_ref());
                        Error::JailDied { why, limit }
                    }
                });
            }
        };
        Ok(Prepared {
            plan: self,
            pid,
            pidfd,
            pipes: Some(PipesHeld(pipes)),
            stdin_data: self.stdin_data.clone(),
            leaf,
            staged,
            _owner: owner,
        })
    }

    /// `clone3` into the namespaces (and the cgroup2 leaf), then the child's id maps; the child
    /// never returns from here. Run by root, the calling thread takes the run's owner uid for the
    /// clone and the maps only, so the new user namespace is owned by it and the kernel charges
    /// the run's per-user counters to it.
    fn spawn(
        &self,
        args: &ChildArgs<'_>,
        flags: u64,
        leaf: Option<&Leaf>,
        owner: Option<&OwnerLease>,
    ) -> Result<(i32, OwnedFd), Error> {
        let mut spawn_stack = vec![0u8; child::SPAWN_STACK_BYTES];
        let securebits = owner
            .map(|o| sys::thread_become_owner(o.uid).map_err(|errno| IdentityError::BecomeOwner { uid: o.uid, errno }))
            .transpose()?;
        // A thread that cannot take root's uid back would go on with another's credentials: that
        // cannot be undone, so the process ends (fail closed) rather than carry on.
        let restore = || {
            if let Some(bits) = securebits
                && let Err(errno) = sys::thread_restore_root(bits)
            {
                eprintln!("stockade: cannot take back root's uid after a clone ({errno}): aborting");
                std::process::abort();
            }
        };
        let (pid, pidfd) =
            match sys::clone_into(flags, leaf.and_then(Leaf::clone_fd), || child::enter(args, &mut spawn_stack)) {
                Ok(child) => child,
                Err(errno) => {
                    restore();
                    return Err(self.clone_error(errno));
                }
            };
        // While the child waits at the barrier (having moved itself into its v1 cgroups; a
        // cgroup2 leaf it was born in): its id maps, written as the namespace's owner. Without
        // CAP_SYS_ADMIN (a container's root) only the owner may write them.
        let maps = self.id.write_maps(pid, owner).map_err(Error::from);
        restore();
        if let Err(e) = maps {
            kill_run(pid, pidfd.as_fd(), leaf, self.policy.namespaces.pid);
            let _ = sys::waitid_pidfd(pidfd.as_fd());
            return Err(e);
        }
        Ok((pid, pidfd))
    }

    /// The report of a run that ended: the verdict, the figures, every layer.
    fn build_report(
        &self,
        o: &Outcome,
        wall: Duration,
        out: (StreamReport, StreamReport),
        cg: CgroupStats,
        v: Verdict,
        leaf_made: bool,
    ) -> Report {
        let error = v.note.map(|note| match note {
            Note::Failure(f) => self.describe_failure(f),
            Note::InitKilled(s) => {
                format!("the run's init process was killed by {} from outside the run", signal_name(s))
            }
            Note::InitExited(code) => format!("the run's init process exited with {code} without reporting"),
            Note::Guest(message) => message,
        });
        Report {
            status: v.status,
            exit_code: v.exit_code,
            signal: v.signal,
            signal_name: v.signal.map(signal_name),
            error,
            seccomp_violation: o.violation.clone(),
            stockade_exit_code: v.stockade_exit_code,
            wall_ms: ms(wall),
            // The cgroup counts every process that ran in it; rusage only what was reaped.
            cpu_user_ms: cg.cpu_user_us.map_or(ms(o.reaped.user), |us| us as f64 / 1000.0),
            cpu_sys_ms: cg.cpu_sys_us.map_or(ms(o.reaped.system), |us| us as f64 / 1000.0),
            max_rss_bytes: o.reaped.max_rss_bytes,
            memory_peak_bytes: cg.memory_peak_bytes,
            oom_kills: cg.oom_kills,
            pids_peak: cg.pids_peak,
            pids_limit_hit: cg.pids_limit_hit,
            stdout: out.0,
            stderr: out.1,
            enforcement: self.layers_with(leaf_made),
            ..Report::new(&self.policy.origin, &self.program.name, &self.program.argv_display, self.policy.wall_timeout)
        }
    }

    /// Why a child that was building its jail ended (it is reaped): the failure it reported,
    /// else how it ended, naming the limit that killed it when one did.
    fn setup_death(
        &self,
        report: BorrowedFd<'_>,
        reaped: Option<sys::Reaped>,
        leaf: Option<&Leaf>,
    ) -> (String, Option<&'static str>) {
        if let Some(f) = channels::read_failure(report) {
            return (self.describe_failure(f), None);
        }
        let stats = leaf.map(Leaf::stats).unwrap_or_default();
        if stats.oom_kills > 0 {
            let key = "cgroups.memory-max-bytes";
            return (
                format!("its memory limit ({key}) is too small to build the jail: the OOM killer ended it"),
                Some(key),
            );
        }
        if stats.pids_limit_hit {
            let key = "cgroups.pids-max";
            return (format!("its process limit ({key}) is too small to build the jail"), Some(key));
        }
        let why = match reaped {
            Some(r) if r.code == libc::CLD_EXITED => format!("it exited with {} without saying why", r.status),
            Some(r) => format!("it was killed by {} from outside the jail", signal_name(r.status)),
            None => "it stopped answering".into(),
        };
        (why, None)
    }

    /// `rlimits.cpu-seconds`, when the policy sets it.
    fn cpu_limit_s(&self) -> Option<u64> {
        self.policy.rlimits.iter().find_map(|(k, v)| match (k, v) {
            (RlimitKey::CpuSeconds, Limit::Value(s)) => Some(*s),
            _ => None,
        })
    }
}

/// Takes a run down: its pid namespace (SIGKILL to its init, PID 1 there), its process group when
/// it has no pid namespace, and its cgroup tree.
fn kill_run(pid: i32, pidfd: BorrowedFd<'_>, leaf: Option<&Leaf>, pid_namespace: bool) {
    if !pid_namespace {
        sys::kill(-pid, libc::SIGKILL);
    }
    let _ = sys::pidfd_send_signal(pidfd, libc::SIGKILL);
    if let Some(l) = leaf {
        l.kill();
    }
}

impl Prepared<'_> {
    /// The host pid of the jail's init (parked, or running the program).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Releases the jail: the program is started and waited for (at most the wall-clock limit,
    /// counted from here), and the run is reported.
    pub fn run(self, output: Output<'_>) -> Result<Report, Error> {
        // Nobody reads a runner's account here: its run ends when init is reaped.
        match self.finish(output, None, None::<fn(&[Vec<u8>]) -> Option<GuestEnd>>)? {
            Gated::Ran(f) => Ok(f.report),
            Gated::NotStarted(_) => Err(Error::Supervisor { what: "start the run", errno: Errno(libc::EINVAL) }),
        }
    }

    /// Gives the program these bytes on stdin instead of the plan's ([`Job::stdin_data`]: the
    /// plan must have had some, an empty one will do, for the jail to have a stdin pipe).
    ///
    /// [`Job::stdin_data`]: crate::Job::stdin_data
    pub fn set_stdin(&mut self, data: impl Into<Vec<u8>>) -> Result<(), Error> {
        if self.pipes.as_ref().is_none_or(|p| p.0.stdin_feed.is_none()) {
            return Err(Error::Supervisor {
                what: "feed a jail prepared without a stdin pipe",
                errno: Errno(libc::EBADF),
            });
        }
        self.stdin_data = Some(std::sync::Arc::from(data.into()));
        Ok(())
    }

    /// [`Prepared::run`], also giving back what the program wrote on its extra output channels
    /// ([`Job::extra_outputs`], each up to its cap). `guest` reads them, when the program is a
    /// runner that gives its own account of how its guest ended: the verdict weighs it.
    ///
    /// [`Job::extra_outputs`]: crate::Job::extra_outputs
    pub fn run_with_channels(
        self,
        output: Output<'_>,
        guest: impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>,
    ) -> Result<(Report, Vec<Vec<u8>>), Error> {
        match self.finish(output, None, Some(guest))? {
            Gated::Ran(f) => Ok((f.report, f.channels)),
            Gated::NotStarted(_) => Err(Error::Supervisor { what: "start the run", errno: Errno(libc::EINVAL) }),
        }
    }

    /// Releases the jail now — the program starts and may get itself ready (an interpreter loads
    /// and blocks reading its stdin) — but starts its *run* only when `gate` opens: then the
    /// run's files go in, its stdin is fed, and its clock starts (the report's wall time, CPU
    /// time and deadline count from there; `warm-start` says what came before). Blocks until the
    /// run is over, or the program died or the gate was cancelled before it started.
    pub fn run_gated(self, gate: &Gate, guest: impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>) -> Result<Gated, Error> {
        self.finish(Output::Capture, Some(gate), Some(guest))
    }

    fn finish(
        mut self,
        output: Output<'_>,
        gate: Option<&Gate>,
        guest: Option<impl FnOnce(&[Vec<u8>]) -> Option<GuestEnd>>,
    ) -> Result<Gated, Error> {
        let plan = self.plan;
        let cpu_at_start = sys::thread_cpu_time();
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
        let released = Instant::now();
        // The last barrier: the child execs the program. If it already failed, the report says why.
        let _ = sys::send_nosignal(pipes.sync.as_fd(), &[2]);
        let forward = |fd: BorrowedFd<'_>| Some(fd.as_raw_fd());
        let (fwd_out, fwd_err) = match output {
            Output::Capture => (None, None),
            Output::Forward { stdout, stderr } => (forward(stdout), forward(stderr)),
        };
        let mut streams = vec![
            Stream::new(Some(pipes.stdout), Sink::new(plan.policy.stdout_max_bytes, fwd_out)),
            Stream::new(Some(pipes.stderr), Sink::new(plan.policy.stderr_max_bytes, fwd_err)),
        ];
        for (fd, cap) in pipes.extra.into_iter().zip(&plan.extra_outputs) {
            streams.push(Stream::new(Some(fd), Sink::new(Some(*cap), None)));
        }
        let run = Run {
            pid: self.pid,
            pidfd: &self.pidfd,
            sync: &pipes.sync,
            seccomp: &plan.seccomp,
            pid_namespace: plan.policy.namespaces.pid,
            leaf: self.leaf.as_ref(),
            // An announced end needs the account read: the exit status is the one it implies.
            announces_end: plan.announces_end && guest.is_some(),
            end_over_cap: plan.policy.over_cap == crate::policy::OverCap::End,
        };
        let mut pump = Pump::new(run, pipes.report);
        let mut stdin_data = self.stdin_data.take();
        let mut wall_timeout = plan.policy.wall_timeout;
        let mut start = released;
        let mut exchange = None;
        let mut argv_display = None;
        let mut warm = None;
        let mut cpu_before = CgroupStats::default();
        if let Some(gate) = gate {
            // With nothing of its own to feed first, the opening can write the run's stdin.
            if stdin_data.as_ref().is_none_or(|d| d.is_empty())
                && let Some(fd) = pipes.stdin_feed.as_ref().and_then(|f| f.try_clone().ok())
            {
                gate.arm(fd);
            }
            // Waiting: the program gets ready; nothing of the run is counted yet.
            let stop = pump.go(&mut [], None, None, Some(gate.fd()))?;
            // A jail whose setup failed never ran anything. A program that ended after an
            // opening fed it its code ran, and so did one built for the run it died waiting for:
            // those runs are reported.
            let setup_failed = pump.failure().is_some();
            let died_in_its_run = matches!(stop, Stop::Died) && gate.one_run() && !setup_failed;
            if died_in_its_run {
                gate.wait();
            }
            let opening =
                gate.take().filter(|o| !setup_failed && (matches!(stop, Stop::Gate) || o.fed > 0 || died_in_its_run));
            let Some(Opening { start: s, at: opened_at, fed }) = opening else {
                if matches!(stop, Stop::Gate) {
                    pump.kill();
                }
                let ended = pump.go(&mut [], None, None, None)?;
                self.pid = 0;
                return Ok(Gated::NotStarted(match ended {
                    Stop::Ended(o) if matches!(stop, Stop::Died) || o.failure.is_some() => self.died_waiting(&o),
                    _ => "cancelled".into(),
                }));
            };
            if !s.from_release {
                start = opened_at;
                cpu_before = self.leaf.as_ref().map(Leaf::cpu_used).unwrap_or_default();
            }
            if let Some(x) = &s.files
                && let Err(e) = self.put_files(x, create_as)
            {
                pump.kill();
                let _ = pump.go(&mut [], None, None, None)?;
                self.pid = 0;
                return Err(e);
            }
            // The start's bytes follow the plan's own (a module the runner compiles, say).
            let mut bytes = stdin_data.map(|d| d.to_vec()).unwrap_or_default();
            bytes.extend_from_slice(s.stdin.get(fed..).unwrap_or_default());
            stdin_data = Some(std::sync::Arc::from(bytes));
            wall_timeout = s.wall_timeout.map_or(wall_timeout, |w| w.min(wall_timeout));
            streams[0].sink.tighten(s.stdout_max_bytes);
            streams[1].sink.tighten(s.stderr_max_bytes);
            if let Some(fd) = s.stdout_to {
                streams[0].sink.forward_to(fd);
            }
            if let Some(fd) = s.stderr_to {
                streams[1].sink.forward_to(fd);
            }
            exchange = s.files;
            argv_display = s.argv_display;
            warm = (!s.from_release).then_some(WarmStart {
                waited_ms: ms(start.duration_since(released)),
                cpu_ms: cpu_before.cpu_user_us.zip(cpu_before.cpu_sys_us).map(|(u, s)| (u + s) as f64 / 1000.0),
            });
        }
        let feed = pipes.stdin_feed.map(|fd| Feed { fd, data: stdin_data.unwrap_or_default(), at: 0 });
        let Stop::Ended(outcome) = pump.go(&mut streams, feed, Some(start + wall_timeout), None)? else {
            return Err(Error::Supervisor { what: "pump the run", errno: Errno(libc::EINVAL) });
        };
        // Reaped, or taken down and reaped with the cleanup: nothing for Drop to kill.
        self.pid = 0;
        let reap = outcome.announced.then(|| Reaper(self.pidfd.try_clone().ok()));
        let wall = outcome.reaped_at.duration_since(start);
        for s in &mut streams {
            s.sink.flush();
        }
        let unsent = [streams[0].sink.unsent(), streams[1].sink.unsent()];
        let mut streams = streams.into_iter();
        let (Some(out), Some(err)) = (streams.next(), streams.next()) else {
            return Err(Error::Supervisor { what: "collect output", errno: Errno(libc::EINVAL) });
        };
        let channels: Vec<Vec<u8>> = streams.map(|s| s.sink.captured()).collect();
        let leaf = self.leaf.take();
        let mut stats = leaf.as_ref().map(Leaf::stats).unwrap_or_default();
        // What the program spent getting ready is not the run's (`warm-start` says it).
        let minus = |now: Option<u64>, before: Option<u64>| now.map(|n| n.saturating_sub(before.unwrap_or(0)));
        stats.cpu_user_us = minus(stats.cpu_user_us, cpu_before.cpu_user_us);
        stats.cpu_sys_us = minus(stats.cpu_sys_us, cpu_before.cpu_sys_us);
        let leaf_made = leaf.is_some();
        // The files the caller asked back, before the tmpfs goes.
        let files = exchange.as_ref().and_then(|x| {
            let pick = x.take.as_ref()?;
            let root = self.staged.get(exchange::place_index(plan.fs.staged(), &x.dir)?)?;
            Some(exchange::take(root, pick))
        });
        // What the program left in its writable directories goes back to the host.
        let mut notes = Vec::new();
        let mut dirs = Vec::new();
        for ((place, root), (manifest, summary)) in plan.fs.staged().iter().zip(&self.staged).zip(copied) {
            let (dir, note) = write_back(place, root, &manifest, summary, host_owner);
            dirs.push(dir);
            notes.extend(note);
        }
        let ending = Ending {
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
            disk_full: dirs.iter().any(|d| d.full),
            cpu_limit_s: plan.cpu_limit_s(),
        };
        let guest = guest.and_then(|g| g(&channels));
        let mut ending = ending;
        if outcome.announced {
            // The program's status is the one its account implies (init has not reaped it yet).
            ending.exit_status = guest.as_ref().map(|g| (g.exit_code() & 0xff) << 8);
        }
        let v = verdict(&ending, &accounting, guest.as_ref());
        let mut report = plan.build_report(&outcome, wall, (out.sink.report(), err.sink.report()), stats, v, leaf_made);
        report.wall_timeout_ms = u64::try_from(wall_timeout.as_millis()).unwrap_or(u64::MAX);
        if let Some(argv) = argv_display {
            report.argv = argv;
        }
        report.warm_start = warm;
        report.writable_dirs = dirs;
        report.supervisor_cpu_ms = Some(ms(sys::thread_cpu_time().saturating_sub(cpu_at_start)));
        // The run itself is reported as it happened; what the program could not see (a refused
        // exec is only EPERM to it) and a failed write-back are said loudly.
        for note in words::run_notes(&outcome, unsent).into_iter().chain(notes) {
            report.add_note(note);
        }
        // The run's cgroup, its writable directories' tmpfs and its owner uid go after the
        // answer, when the caller can wait for them.
        let cleanup = Cleanup { reap, leaf, _staged: std::mem::take(&mut self.staged), _owner: self._owner.take() };
        let mut finished = Finished { report, channels, files, cleanup: Some(cleanup) };
        if gate.is_none() {
            // Its cgroup goes now, and a leftover is said in the report too.
            if let Some(note) = finished.cleanup.take().and_then(Cleanup::done) {
                finished.report.add_note(note);
            }
        }
        Ok(Gated::Ran(Box::new(finished)))
    }

    /// Writes a run's files into its writable directory (an empty one of the run's own).
    fn put_files(&self, x: &Exchange, create_as: staging::CreateAs) -> Result<(), Error> {
        let staged = self.plan.fs.staged();
        let place = exchange::place_index(staged, &x.dir).and_then(|i| Some((staged.get(i)?, self.staged.get(i)?)));
        let Some((place, root)) = place else {
            return Err(crate::layers::filesystem::FsError::Refused {
                origin: "files".into(),
                path: x.dir.clone(),
                reason: "is not a writable directory of this jail".into(),
            }
            .into());
        };
        Ok(exchange::put(place, root, &x.put, create_as)?)
    }

    /// Why a jail ended while it waited at its gate, in words.
    fn died_waiting(&self, o: &pump::Outcome) -> String {
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

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        if self.pid != 0 {
            // Never released: take the parked jail down and reap it (the leaf goes with `leaf`).
            kill_run(self.pid, self.pidfd.as_fd(), self.leaf.as_ref(), self.plan.policy.namespaces.pid);
            let _ = sys::waitid_pidfd(self.pidfd.as_fd());
        }
    }
}

/// One writable directory after the run: its report entry, and a note when writing back failed.
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

fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}
