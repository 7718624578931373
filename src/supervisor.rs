//! The parent side of a run: start the child in its namespaces, write its id maps, release it,
//! pump its output under the caps, enforce the deadline, reap, and write the report.
//!
//! One thread, one `ppoll` loop: the pidfd (the run's init exiting), the output pipes, the report
//! pipe, and the caller's output fds when forwarded data is waiting. The deadline is the `ppoll`
//! timeout (nanosecond resolution), so a stalled reader of the caller's stdout can never hold
//! the kill back: forwarding writes at most `PIPE_BUF` bytes when `POLLOUT` says they fit.

use crate::child::{self, ChildArgs, Failure, MSG_LEN, Stage, TAG_EXIT, TAG_FAILURE};
use crate::error::Error;
use crate::layers::cgroup::{CgroupStats, Leaf};
use crate::layers::fds::ChildFds;
use crate::layers::filesystem::staging;
use crate::layers::seccomp::{self, ExecGuard, SeccompPlan};
use crate::plan::Plan;
use crate::policy::StdinMode;
use crate::policy::SyscallGroup;
use crate::report::{
    EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SETUP_FAILED, EXIT_TIMEOUT, Report, SCHEMA_VERSION, Status, StreamReport,
    signal_name,
};
use crate::report::{EXIT_SECCOMP_VIOLATION, Violation, WritableDir};
use crate::sys::{self, CStrArray, Errno, Forked};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Where the program's stdout and stderr go.
#[derive(Debug, Clone, Copy)]
pub enum Output<'a> {
    /// Kept (up to the caps) and embedded in the report.
    Capture,
    /// Passed on (up to the caps) to these fds as it arrives.
    Forward { stdout: BorrowedFd<'a>, stderr: BorrowedFd<'a> },
}

const CHUNK: usize = 64 * 1024;
/// A write of at most this many bytes to a pipe that polled writable never blocks.
const PIPE_BUF: usize = 4096;

enum Dest {
    Capture(Vec<u8>),
    Forward { fd: RawFd, pending: Vec<u8>, broken: bool },
}

/// One output stream: counts every byte, keeps or passes on up to the cap, drops the rest.
struct Sink {
    cap: Option<u64>,
    total: u64,
    dest: Dest,
}

impl Sink {
    fn new(cap: Option<u64>, forward: Option<RawFd>) -> Sink {
        let dest = match forward {
            Some(fd) => Dest::Forward { fd, pending: Vec::new(), broken: false },
            None => Dest::Capture(Vec::new()),
        };
        Sink { cap, total: 0, dest }
    }

    fn push(&mut self, data: &[u8]) {
        let room = self.cap.map_or(u64::MAX, |c| c.saturating_sub(self.total));
        let take = data.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        self.total += data.len() as u64;
        match &mut self.dest {
            Dest::Capture(buf) => buf.extend_from_slice(&data[..take]),
            Dest::Forward { pending, broken: false, .. } => pending.extend_from_slice(&data[..take]),
            Dest::Forward { .. } => {}
        }
    }

    /// The caller's fd to poll for POLLOUT, when data waits for it.
    fn wants_write(&self) -> Option<RawFd> {
        match &self.dest {
            Dest::Forward { fd, pending, broken: false } if !pending.is_empty() => Some(*fd),
            _ => None,
        }
    }

    fn write_some(&mut self, limit: usize) {
        if let Dest::Forward { fd, pending, broken } = &mut self.dest {
            let n = pending.len().min(limit);
            match sys::write(*fd, &pending[..n]) {
                Ok(k) => {
                    pending.drain(..k);
                }
                Err(Errno(libc::EAGAIN)) => {}
                Err(_) => {
                    *broken = true;
                    pending.clear();
                }
            }
        }
    }

    fn flush(&mut self) {
        while self.wants_write().is_some() {
            self.write_some(CHUNK);
        }
    }

    /// The bytes kept (capture mode).
    fn captured(self) -> Vec<u8> {
        match self.dest {
            Dest::Capture(buf) => buf,
            Dest::Forward { .. } => Vec::new(),
        }
    }

    fn report(self) -> StreamReport {
        let truncated = self.cap.is_some_and(|c| self.total > c);
        let mut r = StreamReport { bytes: self.total, truncated, text: None, base64: None };
        if let Dest::Capture(buf) = self.dest {
            match String::from_utf8(buf) {
                Ok(s) => r.text = Some(s),
                Err(e) => {
                    use base64::Engine;
                    r.base64 = Some(base64::engine::general_purpose::STANDARD.encode(e.into_bytes()));
                }
            }
        }
        r
    }
}

struct Stream {
    fd: Option<OwnedFd>,
    sink: Sink,
    /// Not polled before this: the last read was small, let more accumulate (see `BATCH`).
    quiet_until: Option<Instant>,
}

impl Stream {
    fn new(fd: Option<OwnedFd>, sink: Sink) -> Stream {
        Stream { fd, sink, quiet_until: None }
    }
}

/// After a read of less than `SMALL_READ` bytes, a stream is left alone for `BATCH` so that a
/// program writing a byte at a time costs the supervisor one wakeup per `BATCH` (at most 500 a
/// second per stream), not one per write: the supervisor is outside the run's cgroup and its
/// CPU is nobody's limit. A full pipe blocks the writer meanwhile; a full read is never delayed.
const BATCH: Duration = Duration::from_millis(2);
const SMALL_READ: usize = 16 * 1024;

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
    sync: OwnedFd,
    report: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    /// The read ends of the job's extra output channels (fds 3, 4... in the program).
    extra: Vec<OwnedFd>,
    /// The write end of the program's stdin pipe, and what to feed it.
    stdin_feed: Option<OwnedFd>,
    stdin_data: Option<std::sync::Arc<[u8]>>,
    leaf: Option<Leaf>,
    /// The tmpfs of each writable directory (`FsPlan::staged` order), handed over by the child.
    staged: Vec<OwnedFd>,
    /// The uid owning the run's user namespace, held until the run is over.
    _owner: Option<crate::layers::identity::OwnerLease>,
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
        let (sync_parent, sync_child) = sys::socketpair().map_err(sv("create the release channel"))?;
        let (report_r, report_w) = sys::pipe().map_err(sv("create the report pipe"))?;
        let (out_r, out_w) = sys::pipe().map_err(sv("create the stdout pipe"))?;
        let (err_r, err_w) = sys::pipe().map_err(sv("create the stderr pipe"))?;
        let sync_child = sys::above_stdio(sync_child).map_err(sv("renumber an fd"))?;
        let report_w = sys::above_stdio(report_w).map_err(sv("renumber an fd"))?;
        let out_w = sys::above_stdio(out_w).map_err(sv("renumber an fd"))?;
        let err_w = sys::above_stdio(err_w).map_err(sv("renumber an fd"))?;
        let mut extra: Vec<(OwnedFd, OwnedFd)> = Vec::with_capacity(self.extra_outputs.len());
        for _ in &self.extra_outputs {
            let (r, w) = sys::pipe().map_err(sv("create an output channel"))?;
            extra.push((r, sys::above_stdio(w).map_err(sv("renumber an fd"))?));
        }
        let extra_w: Vec<RawFd> = extra.iter().map(|(_, w)| w.as_raw_fd()).collect();
        // stdin: the caller's bytes through a pipe (fed while the program runs), the caller's
        // own stdin, or /dev/null.
        let (stdin_dup, stdin_feed): (Option<OwnedFd>, Option<OwnedFd>) = if self.stdin_data.is_some() {
            let (r, w) = sys::pipe().map_err(sv("create the stdin pipe"))?;
            sys::set_nonblocking(w.as_fd(), true).map_err(sv("make the stdin pipe non-blocking"))?;
            (Some(r), Some(w))
        } else {
            match self.stdin {
                StdinMode::Null => (None, None),
                StdinMode::Inherit => (std::io::stdin().as_fd().try_clone_to_owned().ok(), None),
            }
        };
        let stdin_dup = stdin_dup.map(sys::above_stdio).transpose().map_err(sv("renumber an fd"))?;
        let stdin_fd = stdin_dup.as_ref().map_or(self.dev_null.as_raw_fd(), AsRawFd::as_raw_fd);

        // This run's clones of the bind sources (root), attached by the child.
        let trees = self.fs.clone_trees()?;
        let trees =
            trees.into_iter().map(sys::above_stdio).collect::<Result<Vec<_>, _>>().map_err(sv("renumber an fd"))?;
        let tree_fds: Vec<RawFd> = trees.iter().map(AsRawFd::as_raw_fd).collect();
        let ruleset = self.landlock.build_ruleset(&self.fs, self.policy.filesystem.writable_exec)?;
        let ruleset = ruleset.map(sys::above_stdio).transpose().map_err(sv("renumber an fd"))?;
        let exe = self.program.exe.as_raw_fd();

        // The run's cgroup leaves (removed when `leaf` drops, on every path out of here), and the
        // v1 leaves' `tasks` files the child moves itself through.
        let leaf = self.cgroup.create_leaf()?;
        let tasks = leaf.as_ref().map(Leaf::open_tasks).transpose()?.unwrap_or_default();
        let tasks =
            tasks.into_iter().map(sys::above_stdio).collect::<Result<Vec<_>, _>>().map_err(sv("renumber an fd"))?;
        let cgroup_tasks: Vec<RawFd> = tasks.iter().map(AsRawFd::as_raw_fd).collect();

        // With v1 leaves, the cgroup namespace comes after the child's move into them.
        let newcgroup = libc::CLONE_NEWCGROUP as u64;
        let late_cgroupns = !cgroup_tasks.is_empty() && self.ns.clone_flags & newcgroup != 0;
        let clone_flags = if late_cgroupns { self.ns.clone_flags & !newcgroup } else { self.ns.clone_flags };

        let mut keep: Vec<RawFd> = vec![sync_child.as_raw_fd(), report_w.as_raw_fd(), exe];
        keep.extend(ruleset.as_ref().map(AsRawFd::as_raw_fd));
        keep.extend(&tree_fds);
        keep.extend(&extra_w);
        keep.sort_unstable();
        keep.dedup();
        let argv = CStrArray::new(&self.program.argv);
        let envp = CStrArray::new(&self.envp);
        let args = ChildArgs {
            fds: ChildFds {
                stdin: stdin_fd,
                stdout: out_w.as_raw_fd(),
                stderr: err_w.as_raw_fd(),
                extra: &extra_w,
                keep: &keep,
            },
            sync: sync_child.as_raw_fd(),
            report: report_w.as_raw_fd(),
            fs: &self.fs,
            trees: &tree_fds,
            uts: &self.uts,
            rlimits: &self.rlimits,
            id: &self.id,
            privileges: &self.privileges,
            landlock: &self.landlock,
            ruleset: ruleset.as_ref().map(AsRawFd::as_raw_fd),
            seccomp: &self.seccomp,
            exe,
            argv: &argv,
            envp: &envp,
            cgroup_tasks: &cgroup_tasks,
            cgroup_namespace_after_move: late_cgroupns,
            pid_namespace: self.policy.namespaces.pid,
            scrub: args_areas(),
        };

        let mut spawn_stack = vec![0u8; child::SPAWN_STACK_BYTES];
        // The run's user namespace is owned by a uid of its own (root): the kernel charges the
        // run's per-user counters to its owner. Only this thread, only for the clone.
        let owner = self.id.lease_owner()?;
        let securebits = match &owner {
            Some(o) => Some(
                sys::thread_become_owner(o.uid)
                    .map_err(|errno| crate::layers::identity::IdentityError::BecomeOwner { uid: o.uid, errno })?,
            ),
            None => None,
        };
        let restore = || securebits.map_or(Ok(()), sys::thread_restore_root);
        let (pid, pidfd, restored) = match sys::clone3(clone_flags, leaf.as_ref().and_then(Leaf::clone_fd)) {
            Ok(Forked::Child) => child::enter(&args, &mut spawn_stack),
            Ok(Forked::Parent { pid, pidfd }) => (pid, pidfd, restore()),
            Err(errno) => {
                let _ = restore();
                return Err(self.clone_error(errno));
            }
        };
        if let Err(errno) = restored {
            let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            let _ = sys::waitid_pidfd(pidfd.as_fd());
            return Err(Error::Supervisor { what: "take back root's uid after the clone", errno });
        }
        // The child has its copies; ours would keep the pipes from ever reaching end of file.
        let extra: Vec<OwnedFd> = extra.into_iter().map(|(r, _)| r).collect();
        drop((sync_child, report_w, out_w, err_w, stdin_dup, ruleset, tasks, trees));

        // While the child waits at the barrier (having moved itself into its v1 cgroups; a
        // cgroup2 leaf it was born in): its id maps.
        if let Err(e) = self.id.write_maps(pid).map_err(Error::from) {
            let _ = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
            let _ = sys::waitid_pidfd(pidfd.as_fd());
            return Err(e);
        }
        // The child may already have failed and gone; its report says why.
        let _ = sys::send_nosignal(sync_parent.as_fd(), &[1]);
        // Its writable directories' tmpfs, handed over as it builds its root (none: it failed).
        let staged =
            receive_staged(sync_parent.as_fd(), pidfd.as_fd(), self.fs.staged().len(), self.policy.wall_timeout)
                .map_err(sv("receive the writable directories"))?;
        Ok(Prepared {
            plan: self,
            pid,
            pidfd,
            sync: sync_parent,
            report: Some(report_r),
            stdout: Some(out_r),
            stderr: Some(err_r),
            extra,
            stdin_feed,
            stdin_data: self.stdin_data.clone(),
            leaf,
            staged,
            _owner: owner,
        })
    }

    fn clone_error(&self, errno: Errno) -> Error {
        let culprit = crate::layers::namespaces::find_refused(self.ns.clone_flags);
        let user = culprit == Some("user");
        let hint = match errno.0 {
            libc::ENOSPC | libc::EUSERS => {
                "; the host's namespace limit is reached or zero (sysctl user.max_user_namespaces and the other \
                 user.max_*_namespaces)"
            }
            libc::EPERM | libc::EACCES | libc::EINVAL if user => {
                "; unprivileged user namespaces look disabled on this host (sysctl kernel.unprivileged_userns_clone, \
                 user.max_user_namespaces, AppArmor's kernel.apparmor_restrict_unprivileged_userns, or a container's \
                 seccomp profile)"
            }
            libc::EPERM if self.ns.clone_flags & libc::CLONE_NEWUSER as u64 == 0 => {
                "; creating namespaces needs root or a user namespace (namespaces.user = true)"
            }
            _ => "",
        };
        let relax = match culprit {
            Some("user") => "; enable it, or run as root with namespaces.user = false".to_string(),
            Some(name) => format!("; to run without it, set namespaces.{name} = false"),
            None => String::new(),
        };
        Error::Namespaces { which: culprit.map_or("run's".into(), |n| n.to_string()), errno, hint, relax }
    }

    fn build_report(
        &self,
        o: Outcome,
        wall: Duration,
        stdout: StreamReport,
        stderr: StreamReport,
        cg: CgroupStats,
        leaf_made: bool,
    ) -> Report {
        let status;
        let mut exit_code = None;
        let mut signal = None;
        let mut error = None;
        let stockade_exit_code;
        if let Some(f) = o.failure {
            status = Status::SetupFailed;
            error = Some(self.describe_failure(f));
            stockade_exit_code = match f.stage {
                Stage::Exec if f.errno.0 == libc::ENOENT => EXIT_NOT_FOUND,
                Stage::Exec => EXIT_NOT_EXECUTABLE,
                _ => EXIT_SETUP_FAILED,
            };
        } else if o.violation.is_some() {
            status = Status::SeccompViolation;
            signal = Some(libc::SIGKILL);
            stockade_exit_code = EXIT_SECCOMP_VIOLATION;
        } else if let Some(ws) = o.exit_status.filter(|ws| !(o.timed_out && killed_by_sigkill(*ws))) {
            // The program's own end (also when it ended on its own just as the deadline passed);
            // the cgroup and rlimits say why when they were the reason.
            let mut st;
            if libc::WIFEXITED(ws) {
                let code = libc::WEXITSTATUS(ws);
                exit_code = Some(code);
                st = if code == 0 { Status::Ok } else { Status::ExitedNonzero };
                stockade_exit_code = code;
            } else {
                let sig = libc::WTERMSIG(ws);
                signal = Some(sig);
                st = if self.cpu_limit_ended(sig, &o, &cg) { Status::CpuLimit } else { Status::Signaled };
                stockade_exit_code = 128 + sig;
            }
            if cg.oom_kills > 0 {
                st = Status::Oom;
            } else if cg.pids_limit_hit && matches!(st, Status::Ok | Status::ExitedNonzero | Status::Signaled) {
                st = Status::PidsLimit;
            }
            status = st;
        } else if o.timed_out {
            status = Status::Timeout;
            signal = Some(libc::SIGKILL);
            stockade_exit_code = EXIT_TIMEOUT;
        } else if cg.oom_kills > 0 {
            // The OOM killer took the whole cgroup (memory.oom.group), init included.
            status = Status::Oom;
            signal = Some(libc::SIGKILL);
            stockade_exit_code = 128 + libc::SIGKILL;
        } else {
            // init ended without reporting: killed from outside the run, or it failed itself.
            let sig = if o.reaped.code == libc::CLD_EXITED { None } else { Some(o.reaped.status) };
            status = if sig.is_some() { Status::Signaled } else { Status::SetupFailed };
            signal = sig;
            stockade_exit_code = sig.map_or(EXIT_SETUP_FAILED, |s| 128 + s);
            error = Some(match sig {
                Some(s) => format!("the run's init process was killed by {} from outside the run", signal_name(s)),
                None => format!("the run's init process exited with {} without reporting", o.reaped.status),
            });
        }
        Report {
            schema_version: SCHEMA_VERSION,
            status,
            exit_code,
            signal,
            signal_name: signal.map(signal_name),
            error,
            seccomp_violation: o.violation,
            stockade_exit_code,
            policy: self.policy.origin.clone(),
            program: self.program.name.clone(),
            argv: self.program.argv_display.clone(),
            wall_ms: ms(wall),
            wall_timeout_ms: u64::try_from(self.policy.wall_timeout.as_millis()).unwrap_or(u64::MAX),
            // The cgroup counts every process that ran in it; rusage only what was reaped.
            cpu_user_ms: cg.cpu_user_us.map_or(ms(o.reaped.user), |us| us as f64 / 1000.0),
            cpu_sys_ms: cg.cpu_sys_us.map_or(ms(o.reaped.system), |us| us as f64 / 1000.0),
            max_rss_bytes: o.reaped.max_rss_bytes,
            memory_peak_bytes: cg.memory_peak_bytes,
            oom_kills: cg.oom_kills,
            pids_peak: cg.pids_peak,
            pids_limit_hit: cg.pids_limit_hit,
            supervisor_cpu_ms: None,
            writable_dirs: Vec::new(),
            guest_exit_code: None,
            fuel_consumed: None,
            wasm_memory_peak_bytes: None,
            wasm_time: None,
            stdout,
            stderr,
            enforcement: self.layers_with(leaf_made),
        }
    }

    /// Whether a signal that ended the program was its CPU-time rlimit: SIGXCPU, or SIGKILL once
    /// the CPU time reached the limit (soft = hard, so the kernel sends SIGKILL at once).
    fn cpu_limit_ended(&self, sig: i32, o: &Outcome, cg: &CgroupStats) -> bool {
        let Some(limit_s) = self.policy.rlimits.iter().find_map(|(k, v)| match (k, v) {
            (crate::policy::RlimitKey::CpuSeconds, crate::policy::Limit::Value(s)) => Some(*s),
            _ => None,
        }) else {
            return false;
        };
        let used_us = cg.cpu_user_us.zip(cg.cpu_sys_us).map_or_else(
            || u64::try_from((o.reaped.user + o.reaped.system).as_micros()).unwrap_or(u64::MAX),
            |(u, s)| u + s,
        );
        sig == libc::SIGXCPU || (sig == libc::SIGKILL && used_us + 50_000 >= limit_s * 1_000_000)
    }

    /// A child failure in words: `jail setup failed at filesystem (stage 6: bind /usr): ...`.
    pub(crate) fn describe_failure(&self, f: Failure) -> String {
        use crate::layers::{identity, session};
        let detail = match f.stage {
            Stage::Filesystem => self.fs.ops.get(f.detail as usize).map(|op| op.describe()),
            Stage::Rlimits => Some(format!("rlimits.{}", self.rlimits.key_at(f.detail))),
            Stage::Identity => Some(
                match f.detail {
                    identity::STEP_GROUPS => "setgroups",
                    identity::STEP_GID => "setresgid",
                    _ => "setresuid",
                }
                .into(),
            ),
            Stage::Session => {
                Some(if f.detail == session::STEP_SETSID { "setsid" } else { "new session keyring" }.into())
            }
            Stage::Privileges => Some(crate::layers::privileges::step_name(f.detail).into()),
            Stage::Landlock => Some(self.landlock.step_name(f.detail)),
            Stage::Seccomp => Some(format!("filter {}", f.detail + 1)),
            Stage::Cgroup if f.detail as usize >= self.cgroup.v1_leaves() => Some("enter the cgroup namespace".into()),
            Stage::Cgroup => Some(format!("move into the {} v1 leaf", self.cgroup.v1_controller(f.detail))),
            Stage::Exec => {
                return format!(
                    "cannot execute {}: {}",
                    self.program.argv_display.first().map_or("?", String::as_str),
                    f.errno
                );
            }
            _ => None,
        };
        match detail {
            Some(d) => format!("jail setup failed at {} (stage {}: {d}): {}", f.stage.name(), f.stage as u32, f.errno),
            None => format!("jail setup failed at {} (stage {}): {}", f.stage.name(), f.stage as u32, f.errno),
        }
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
        self.run_with_channels(output).map(|(report, _)| report)
    }

    /// Gives the program these bytes on stdin instead of the plan's ([`Job::stdin_data`]: the
    /// plan must have had some, an empty one will do, for the jail to have a stdin pipe).
    ///
    /// [`Job::stdin_data`]: crate::Job::stdin_data
    pub fn set_stdin(&mut self, data: impl Into<Vec<u8>>) -> Result<(), Error> {
        if self.stdin_feed.is_none() {
            return Err(Error::Supervisor {
                what: "feed a jail prepared without a stdin pipe",
                errno: Errno(libc::EBADF),
            });
        }
        self.stdin_data = Some(std::sync::Arc::from(data.into()));
        Ok(())
    }

    /// [`Prepared::run`], also giving back what the program wrote on its extra output channels
    /// ([`Job::extra_outputs`], each up to its cap).
    ///
    /// [`Job::extra_outputs`]: crate::Job::extra_outputs
    pub fn run_with_channels(mut self, output: Output<'_>) -> Result<(Report, Vec<Vec<u8>>), Error> {
        let plan = self.plan;
        let cpu_at_start = sys::thread_cpu_time();
        // The host directories' contents, as of now, into the writable directories' tmpfs.
        let create_as = (sys::geteuid() == 0).then_some((plan.id.host_uid, plan.id.host_gid));
        let mut copied = Vec::new();
        for (place, root) in plan.fs.staged().iter().zip(&self.staged) {
            copied.push(staging::copy_in(place, root, create_as)?);
        }
        let start = Instant::now();
        // The last barrier: the child execs the program. If it already failed, the report says why.
        let _ = sys::send_nosignal(self.sync.as_fd(), &[2]);
        let forward = |fd: BorrowedFd<'_>| Some(fd.as_raw_fd());
        let (fwd_out, fwd_err) = match output {
            Output::Capture => (None, None),
            Output::Forward { stdout, stderr } => (forward(stdout), forward(stderr)),
        };
        let mut streams = vec![
            Stream::new(self.stdout.take(), Sink::new(plan.policy.stdout_max_bytes, fwd_out)),
            Stream::new(self.stderr.take(), Sink::new(plan.policy.stderr_max_bytes, fwd_err)),
        ];
        for (fd, cap) in std::mem::take(&mut self.extra).into_iter().zip(&plan.extra_outputs) {
            streams.push(Stream::new(Some(fd), Sink::new(Some(*cap), None)));
        }
        let feed =
            self.stdin_feed.take().map(|fd| Feed { fd, data: self.stdin_data.take().unwrap_or_default(), at: 0 });
        let deadline = start + plan.policy.wall_timeout;
        let report_r = self
            .report
            .take()
            .ok_or(Error::Supervisor { what: "run a prepared jail twice", errno: Errno(libc::EINVAL) })?;
        let outcome = pump(
            Run {
                pid: self.pid,
                pidfd: &self.pidfd,
                sync: &self.sync,
                seccomp: &plan.seccomp,
                pid_namespace: plan.policy.namespaces.pid,
                leaf: self.leaf.as_ref(),
            },
            report_r,
            &mut streams,
            feed,
            deadline,
        )?;
        // Reaped: nothing for Drop to kill.
        self.pid = 0;
        let wall = outcome.reaped_at.duration_since(start);
        for s in &mut streams {
            s.sink.flush();
        }
        let mut streams = streams.into_iter();
        let (Some(out), Some(err)) = (streams.next(), streams.next()) else {
            return Err(Error::Supervisor { what: "collect output", errno: Errno(libc::EINVAL) });
        };
        let channels: Vec<Vec<u8>> = streams.map(|s| s.sink.captured()).collect();
        let leaf = self.leaf.take();
        let stats = leaf.as_ref().map(Leaf::stats).unwrap_or_default();
        let leaf_made = leaf.is_some();
        let removed = leaf.map_or(Ok(()), Leaf::remove);
        // What the program left in its writable directories goes back to the host.
        let mut notes = Vec::new();
        let mut dirs = Vec::new();
        for ((place, root), (manifest, summary)) in plan.fs.staged().iter().zip(&self.staged).zip(copied) {
            let (dir, note) = write_back(place, root, &manifest, summary, create_as);
            dirs.push(dir);
            notes.extend(note);
        }
        let mut report = plan.build_report(outcome, wall, out.sink.report(), err.sink.report(), stats, leaf_made);
        if dirs.iter().any(|d| d.full) && matches!(report.status, Status::Ok | Status::ExitedNonzero | Status::Signaled)
        {
            report.status = Status::DiskLimit;
        }
        report.writable_dirs = dirs;
        report.supervisor_cpu_ms = Some(ms(sys::thread_cpu_time().saturating_sub(cpu_at_start)));
        notes.extend(removed.err().map(|e| e.to_string()));
        // The run itself is reported as it happened; a leftover or a failed write-back is said
        // loudly.
        for note in notes {
            report.error = Some(match report.error.take() {
                Some(prev) => format!("{prev}; {note}"),
                None => note,
            });
        }
        Ok((report, channels))
    }
}

/// The program's stdin pipe and the bytes still to write to it.
struct Feed {
    fd: OwnedFd,
    data: std::sync::Arc<[u8]>,
    at: usize,
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        if self.pid != 0 {
            // Never released: take the parked jail down and reap it (the leaf goes with `leaf`).
            let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
            if let Some(l) = &self.leaf {
                l.kill();
            }
            let _ = sys::waitid_pidfd(self.pidfd.as_fd());
        }
    }
}

/// Receives the `n` staged tmpfs fds the child sends while it builds its root, waiting at most
/// `patience`; fewer when the child failed (or was killed) first: its report says why.
fn receive_staged(
    sync: BorrowedFd<'_>,
    pidfd: BorrowedFd<'_>,
    n: usize,
    patience: Duration,
) -> Result<Vec<OwnedFd>, Errno> {
    let mut out = Vec::with_capacity(n);
    let end = Instant::now() + patience;
    while out.len() < n {
        let mut fds = [
            libc::pollfd { fd: sync.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        match sys::ppoll(&mut fds, Some(end.saturating_duration_since(Instant::now()))) {
            Ok(0) => break,
            Ok(_) if fds[0].revents & libc::POLLIN != 0 => match sys::recv_fd(sync)? {
                Some(fd) => out.push(fd),
                None => break,
            },
            Ok(_) => break,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
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

/// This process's argv and environ areas (`/proc/self/stat` fields 48-51), read once.
fn args_areas() -> [(usize, usize); 2] {
    use std::sync::OnceLock;
    static AREAS: OnceLock<[(usize, usize); 2]> = OnceLock::new();
    *AREAS.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // Fields after the command name, which ends with ") ", start at field 3.
        let fields: Vec<usize> = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect())
            .unwrap_or_default();
        let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
        [(field(48), field(49)), (field(50), field(51))]
    })
}

fn killed_by_sigkill(ws: i32) -> bool {
    libc::WIFSIGNALED(ws) && libc::WTERMSIG(ws) == libc::SIGKILL
}

fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// What the loop saw.
struct Outcome {
    reaped: sys::Reaped,
    reaped_at: Instant,
    failure: Option<Failure>,
    exit_status: Option<i32>,
    timed_out: bool,
    violation: Option<Violation>,
}

/// How long init gets, after the deadline signal, to kill and reap the run before SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(50);

/// The event loop: until init is reaped and every pipe reached end of file.
/// The run being supervised.
struct Run<'a> {
    pid: i32,
    pidfd: &'a OwnedFd,
    /// The release channel; the child sends the seccomp listener over it.
    sync: &'a OwnedFd,
    seccomp: &'a SeccompPlan,
    pid_namespace: bool,
    /// The run's cgroup leaves: `cgroup.kill` takes the whole tree.
    leaf: Option<&'a Leaf>,
}

fn pump(
    run: Run<'_>,
    report: OwnedFd,
    streams: &mut [Stream],
    mut feed: Option<Feed>,
    deadline: Instant,
) -> Result<Outcome, Error> {
    let Run { pid, pidfd, sync, seccomp: sc, pid_namespace, leaf } = run;
    let mut want_listener = sc.has_listener();
    let mut listener: Option<OwnedFd> = None;
    let mut exec_seen = false;
    let mut violation: Option<Violation> = None;
    let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
    let mut report = Some(report);
    let mut msgs: Vec<u8> = Vec::new();
    let mut failure = None;
    let mut exit_status = None;
    let mut reaped: Option<(sys::Reaped, Instant)> = None;
    let mut killed = false;
    let mut timed_out = false;
    // With a pid namespace, init first gets the deadline signal (it kills and reaps the run, so
    // CPU time is accounted); SIGKILL to init at `kill_at` is the backstop.
    let mut kill_at = deadline;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let inputs_open = report.is_some() || streams.iter().any(|s| s.fd.is_some());
        if reaped.is_some() && !inputs_open {
            break;
        }
        let now = Instant::now();
        if reaped.is_some() && now >= deadline {
            // Only without a pid namespace can a process outlive init and hold a pipe open.
            break;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(7);
        let mut roles: Vec<Role> = Vec::with_capacity(7);
        let mut add = |fd: RawFd, events: libc::c_short, role: Role| {
            fds.push(libc::pollfd { fd, events, revents: 0 });
            roles.push(role);
        };
        if reaped.is_none() {
            add(pidfd.as_raw_fd(), libc::POLLIN, Role::Pidfd);
        }
        if want_listener {
            add(sync.as_raw_fd(), libc::POLLIN, Role::Sync);
        }
        if let Some(l) = &listener {
            add(l.as_raw_fd(), libc::POLLIN, Role::Listener);
        }
        if let Some(r) = &report {
            add(r.as_raw_fd(), libc::POLLIN, Role::Report);
        }
        let mut wake: Option<Instant> = (!killed).then_some(kill_at);
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                // Once the run is reaped, drain at once.
                match s.quiet_until.filter(|t| *t > now && reaped.is_none()) {
                    Some(t) => wake = Some(wake.map_or(t, |w| w.min(t))),
                    None => add(fd.as_raw_fd(), libc::POLLIN, Role::Read(i)),
                }
            }
            if let Some(fd) = s.sink.wants_write() {
                add(fd, libc::POLLOUT, Role::Write(i));
            }
        }
        if reaped.is_some() {
            // Nobody left to read it.
            feed = None;
        }
        if let Some(f) = &feed {
            add(f.fd.as_raw_fd(), libc::POLLOUT, Role::Feed);
        }
        let timeout = wake.map(|w| w.saturating_duration_since(now));
        let n = match sys::ppoll(&mut fds, timeout) {
            Ok(n) => n,
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(sv("poll")(e)),
        };
        if n == 0 {
            let now = Instant::now();
            if !killed && reaped.is_none() && now >= kill_at {
                if pid_namespace && !timed_out {
                    timed_out = true;
                    kill_at = now + KILL_GRACE;
                    let _ = sys::pidfd_send_signal(pidfd.as_fd(), child::DEADLINE_SIGNAL);
                } else {
                    // With a pid namespace, init is its PID 1: killing it kills every process in
                    // it. Without one, kill init's process group (its session) first.
                    if !pid_namespace {
                        sys::kill(-pid, libc::SIGKILL);
                    }
                    sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL).map_err(sv("kill the run"))?;
                    if let Some(l) = leaf {
                        l.kill();
                    }
                    killed = true;
                    timed_out = true;
                }
            }
            continue;
        }
        for (p, role) in fds.iter().zip(roles.iter()) {
            if p.revents == 0 {
                continue;
            }
            match *role {
                Role::Pidfd => {
                    let r = sys::waitid_pidfd(pidfd.as_fd()).map_err(sv("reap the run"))?;
                    reaped = Some((r, Instant::now()));
                }
                Role::Report => {
                    let fd = report.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
                    match sys::read(fd, &mut buf) {
                        Ok(0) | Err(_) => report = None,
                        Ok(k) => {
                            msgs.extend_from_slice(&buf[..k]);
                            while msgs.len() >= MSG_LEN {
                                let m: Vec<u8> = msgs.drain(..MSG_LEN).collect();
                                let word = |i: usize| u32::from_ne_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
                                match word(0) {
                                    TAG_FAILURE if failure.is_none() => {
                                        if let Some(stage) = Stage::from_u32(word(4)) {
                                            failure =
                                                Some(Failure { stage, detail: word(8), errno: Errno(word(12) as i32) });
                                        }
                                    }
                                    TAG_EXIT => exit_status = Some(word(12) as i32),
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                Role::Read(i) => {
                    let s = &mut streams[i];
                    let fd = s.fd.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
                    match sys::read(fd, &mut buf) {
                        Ok(0) | Err(_) => s.fd = None,
                        Ok(k) => {
                            s.sink.push(&buf[..k]);
                            s.quiet_until = (k < SMALL_READ).then(|| Instant::now() + BATCH);
                        }
                    }
                }
                Role::Write(i) => streams[i].sink.write_some(PIPE_BUF),
                Role::Feed => {
                    let Some(f) = &mut feed else { continue };
                    // POLLERR: the program closed its end; anything else: write what fits.
                    let done = match sys::write(f.fd.as_raw_fd(), &f.data[f.at..]) {
                        Ok(k) => {
                            f.at += k;
                            f.at >= f.data.len()
                        }
                        Err(Errno(libc::EAGAIN)) => false,
                        Err(_) => true,
                    };
                    if done {
                        // Closing the pipe is the program's end of file.
                        feed = None;
                    }
                }
                Role::Sync => {
                    want_listener = false;
                    if p.revents & libc::POLLIN != 0 {
                        listener = sys::recv_fd(sync.as_fd()).ok().flatten();
                    }
                }
                Role::Listener => {
                    if p.revents & libc::POLLIN == 0 {
                        // Every process the filter applied to is gone.
                        listener = None;
                        continue;
                    }
                    let Some(l) = &listener else { continue };
                    let Ok(n) = sys::seccomp_notif_recv(l.as_fd()) else { continue };
                    let (name, group) =
                        seccomp::syscall_name(n.nr, &n.args).unwrap_or(("unknown", SyscallGroup::Admin));
                    let first_exec = group == SyscallGroup::Exec
                        && sc.exec == ExecGuard::Supervised
                        && !std::mem::replace(&mut exec_seen, true);
                    if first_exec {
                        // The exec that starts the program: it runs before any of its code.
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Ok(()));
                    } else if sc.kills(group) {
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
                        if violation.is_none() {
                            violation = Some(Violation {
                                syscall: name.to_string(),
                                number: n.nr,
                                group: group.name().to_string(),
                            });
                        }
                        if !killed && reaped.is_none() {
                            if !pid_namespace {
                                sys::kill(-pid, libc::SIGKILL);
                            }
                            sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL).map_err(sv("kill the run"))?;
                            if let Some(l) = leaf {
                                l.kill();
                            }
                            killed = true;
                        }
                    } else {
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
                    }
                }
            }
        }
    }
    let (reaped, reaped_at) = match reaped {
        Some(r) => r,
        None => return Err(Error::Supervisor { what: "reap the run", errno: Errno(libc::ECHILD) }),
    };
    Ok(Outcome { reaped, reaped_at, failure, exit_status, timed_out, violation })
}

#[derive(Clone, Copy)]
enum Role {
    Sync,
    Listener,
    Pidfd,
    Report,
    Read(usize),
    Write(usize),
    Feed,
}
