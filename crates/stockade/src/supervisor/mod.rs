//! The parent side of a run, in the order it happens: open the channels, build the child's
//! arguments, spawn it into its namespaces (as the run's owner uid), write its id maps, release
//! it, take its writable directories; then, when the run is released, copy them in, start the
//! program, pump until the run is over, decide how it ended, write back and report.
//!
//! `channels.rs` holds the pipes and what flows through them, `pump.rs` the event loop while the
//! program runs, `verdict.rs` the one decision of how a run ended, `words.rs` what went wrong in
//! words.
//!
//! Imports (layers): `child`, `egress`, `error`, `helper`, `host`, `layers`, `plan`, `policy`, `report`, `sys`,
//! `wire`.

mod calls;
mod channels;
mod gate;
mod pump;
mod run;
mod turns;
mod verdict;
mod words;

pub use calls::{Answerer, Host, HostCalls, Lend, Serving, Tool, TurnCalls};
pub use channels::Output;
pub use gate::{Cleanup, Exchange, Finished, Gate, Gated, LiveRun, Start};
pub use turns::{ReadAccount, Turn, TurnEnd, TurnTold, Turned};
pub use verdict::{Note, Verdict};

use crate::child::{self, ChildArgs};
use crate::error::{Error, JailLimit};
use crate::layers::cgroup::{CgroupStats, Leaf};
use crate::layers::fds::ChildFds;
use crate::layers::identity::{IdentityError, OwnerLease};
use crate::plan::Plan;
use crate::policy::{Limit, RlimitKey, StdinMode};
use crate::report::{GuestEnd, LayerReport, Report, StreamReport, signal_name};
use crate::sys::{self, CStrArray, Errno};
use channels::{ChildEnds, Pipes};
use pump::Outcome;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

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
    /// The egress proxy's listening socket in the jail's network namespace, handed over by the
    /// child after its writable directories (a policy with an egress list).
    egress: Option<OwnedFd>,
    /// The uid owning the run's user namespace, held until the run is over.
    _owner: Option<OwnerLease>,
    /// The network namespace it joined instead of creating its own, if any.
    net: NetJoined,
    /// Its init runs the code itself (see [`InProcess`]): no init of ours reports, empties or
    /// takes the deadline signal; its own exit is the program's.
    init_is_program: bool,
}

/// A network namespace made ahead ([`crate::helper::make_net`]) that the jail built now joins
/// instead of creating its own, when its plan allows: a value the builder passes down, never a
/// setting of the process.
#[derive(Debug, Clone, Copy, Default)]
pub enum JoinNet<'a> {
    /// Its own (or none, as its policy says).
    #[default]
    Own,
    /// Shared by the jails of code that makes no socket ([`InProcess::shared_net`]); any other
    /// jail creates its own.
    Shared(std::os::fd::BorrowedFd<'a>),
    /// This jail's alone while it runs, when its plan can take one in turn
    /// ([`Plan::takes_net_in_turn`]); any other jail creates its own.
    InTurn(std::os::fd::BorrowedFd<'a>),
}

/// Where a jail's network namespace came from (its report's `namespace.net` says so).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NetJoined {
    /// Created with the jail (or none asked for).
    Own,
    /// The shared empty one (see [`InProcess::shared_net`]).
    Shared,
    /// One made ahead that this jail alone uses now (see [`Plan::takes_net_in_turn`]).
    InTurn,
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

/// A jail that runs code of this process instead of exec'ing the plan's program: for a
/// process that has loaded what that program would load first (a Wasm engine and a guest:
/// `WasmPlan::preload`). The jail is the same: after every layer is applied, the jail's init
/// does what an exec would have (every fd closed but the program's and [`InProcess::keep`], the
/// fault-signal handlers of this process put back) and calls `entry` with the program's
/// argument vector. Its memory is a copy of this process's: nothing secret may be in it.
///
/// The code must start no process (with a pid namespace, one it starts anyway is reaped by the
/// kernel as it exits, SIGCHLD being ignored, and killed when the code ends). With a pid
/// namespace the code is that namespace's PID 1 (no init of ours, which would only have waited
/// for it, costing a copy of this process per run), and the run ends when it does. As PID 1 it
/// would not get the signals whose default action ends a process when it or the kernel sends
/// them (a write to a closed pipe, one past `rlimits.file-size-bytes`, an `abort`): it handles
/// each by reporting the wait status they would have given it, and ending; the run's report is
/// the same. Without a pid namespace it is PID 2, forked from init.
///
/// Only a process with a single thread may do this (the copy allocates, and no other thread can
/// have held a lock at the copy): [`Plan::prestart_in_process`] execs the program, as
/// [`Plan::prestart`] does, when this process has more threads, or a fd to keep is below the
/// numbers the jail's channels take.
#[derive(Debug, Clone)]
pub struct InProcess {
    /// What the jail runs, with the program's argument vector; returns its exit code.
    pub entry: fn(&[std::ffi::CString]) -> i32,
    /// Fds of this process the code needs (sorted), each at `sys::FIRST_FREE_FD` or above.
    pub keep: Vec<RawFd>,
    /// The code makes no socket of any kind (the Wasm runner's own filter refuses them before
    /// any guest code runs): when the policy asks for a network namespace and this process's
    /// builder gives it an empty one ([`JoinNet::Shared`]), the jail joins that one
    /// instead of creating its own (which costs a tenth of a small run's CPU, in its creation
    /// and its clean-up). Its runs share it, with nothing in it to see or to use: no interface
    /// up, no socket, and no capability over it (it belongs to this process's user namespace).
    /// The report says so.
    pub shared_net: bool,
}

impl InProcess {
    /// Whether a jail built now can run it: this process has one thread, the fds are high.
    fn usable(&self) -> bool {
        self.keep.iter().all(|&fd| fd >= sys::FIRST_FREE_FD) && crate::helper::thread_count().is_ok_and(|n| n == 1)
    }
}

impl NetJoined {
    /// The words a report's `namespace.net` entry gives a jail's namespace when it did not
    /// create it (`None`: it did, and the plan's words stand).
    fn words(self) -> Option<&'static str> {
        match self {
            NetJoined::Own => None,
            NetJoined::Shared => Some(SHARED_NET),
            NetJoined::InTurn => Some(NET_IN_TURN),
        }
    }
}

/// The report's words for a run in a network namespace taken in turn ([`Plan::takes_net_in_turn`]).
const NET_IN_TURN: &str = "new, made ahead: an empty one, no interface up, owned by the supervisor's user namespace (the run \
                           cannot configure it), no other run in it while this one is; lent to a later run only once \
                           every process of this one is gone and it holds no socket";

/// The report's words for a run in the shared empty network namespace.
const SHARED_NET: &str = "shared: an empty one, no interface up, owned by the supervisor's user namespace (the run \
                          cannot configure it), shared with the supervisor's other jails of code that makes no socket";

/// Gives the `namespace.net` entry of `layers` the words of a namespace from `net`.
fn set_net_words(layers: &mut [LayerReport], net: NetJoined) {
    if let Some(words) = net.words()
        && let Some(entry) = layers.iter_mut().find(|l| l.layer == "namespace.net")
    {
        entry.applied = words.into();
    }
}

fn raw(fds: &[OwnedFd]) -> Vec<RawFd> {
    fds.iter().map(AsRawFd::as_raw_fd).collect()
}

impl Plan {
    /// Whether its jails may join an empty network namespace made ahead that earlier jails used,
    /// one at a time ([`JoinNet::InTurn`]), instead of creating one each (whose creation
    /// and clean-up cost a static program's served run about a seventh of its CPU): the policy
    /// asks for a network namespace and a PID namespace (a reaped init is every process of the
    /// jail gone, none left in the namespace), and its filter refuses every socket but a unix one
    /// and io_uring (its sockets are the only thing a run could leave in the namespace, and the
    /// lender sees them: [`crate::helper::net_holds_no_socket`]). Nothing else of a run stays in
    /// it: the run has no capability over it (it belongs to the lender's user namespace).
    pub fn takes_net_in_turn(&self) -> bool {
        let flags = (libc::CLONE_NEWNET | libc::CLONE_NEWPID) as u64;
        self.ns.clone_flags & flags == flags
            && self.seccomp.refuses(crate::policy::SyscallGroup::Network)
            && self.seccomp.refuses(crate::policy::SyscallGroup::IoUring)
    }

    /// The namespace of `net` a jail of this plan running `code` (`None`: its program) joins
    /// instead of creating its own, and how its report says so; `None`: its own. Code that makes
    /// no socket may share the empty one its builder was given (`JoinNet::Shared`); a program
    /// whose jail can take one in turn joins the one given for it (`JoinNet::InTurn`).
    fn net_to_join<'n>(
        &self,
        code: Option<&InProcess>,
        net: JoinNet<'n>,
        clone_flags: u64,
    ) -> Option<(NetJoined, std::os::fd::BorrowedFd<'n>)> {
        if self.net.egress() {
            // Its proxy listens in a namespace of its own, with its loopback up.
            return None;
        }
        match net {
            JoinNet::Shared(ns)
                if code.is_some_and(|c| c.shared_net) && clone_flags & libc::CLONE_NEWNET as u64 != 0 =>
            {
                Some((NetJoined::Shared, ns))
            }
            JoinNet::InTurn(ns) if code.is_none() && self.takes_net_in_turn() => Some((NetJoined::InTurn, ns)),
            _ => None,
        }
    }

    /// The enforcement entries of [`Plan::layers`] as a jail of this plan whose network namespace
    /// came from `net` ([`Prepared::net`]) reports them: `GET /v1/info` says what a service's
    /// runs will.
    pub fn layers_in(&self, net: NetJoined) -> Vec<LayerReport> {
        let mut layers = self.layers();
        set_net_words(&mut layers, net);
        layers
    }

    /// Runs the plan once: starts the jail, waits for the program (at most the wall-clock
    /// limit), and reports. `Err` means nothing was started; a failure inside the jail comes back
    /// as a report with status `setup-failed`.
    pub fn run(&self, output: Output<'_>) -> Result<Report, Error> {
        self.prestart()?.run(output)
    }

    /// Builds the jail up to the exec and parks it there (see [`Prepared`]).
    pub fn prestart(&self) -> Result<Prepared<'_>, Error> {
        self.prestart_with(None, JoinNet::Own, &[])
    }

    /// [`Plan::prestart`], the jail joining `net` instead of creating its network namespace
    /// when its plan can take one in turn ([`Plan::takes_net_in_turn`], [`JoinNet::InTurn`]).
    pub fn prestart_joining(&self, net: JoinNet<'_>) -> Result<Prepared<'_>, Error> {
        self.prestart_with(None, net, &[])
    }

    /// [`Plan::prestart_joining`], with the jail running `code` of this process instead of
    /// exec'ing (see [`InProcess`]) when it can; `Ok(true)` with the jail when it does.
    pub fn prestart_in_process(&self, code: &InProcess, net: JoinNet<'_>) -> Result<(Prepared<'_>, bool), Error> {
        if !code.usable() {
            return Ok((self.prestart_with(None, net, &[])?, false));
        }
        let faults = sys::FaultHandlers::now()
            .map_err(|errno| Error::Supervisor { what: "read the fault signals' handlers", errno })?;
        Ok((self.prestart_with(Some((code, &faults)), net, &[])?, true))
    }

    /// [`Plan::prestart_joining`], the jail passed `fds` (as many as [`Job::passed_fds`] says:
    /// `Err` otherwise), as the fds after its host-call channel's.
    ///
    /// [`Job::passed_fds`]: crate::Job::passed_fds
    pub fn prestart_passing(&self, net: JoinNet<'_>, fds: &[BorrowedFd<'_>]) -> Result<Prepared<'_>, Error> {
        self.prestart_with(None, net, fds)
    }

    fn prestart_with(
        &self,
        code: Option<(&InProcess, &sys::FaultHandlers)>,
        net: JoinNet<'_>,
        passed: &[BorrowedFd<'_>],
    ) -> Result<Prepared<'_>, Error> {
        let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
        (passed.len() == self.passed_fds)
            .then_some(())
            .ok_or(Errno(libc::EINVAL))
            .map_err(sv("pass the jail its files"))?;
        let renumber = |fds: Vec<OwnedFd>| {
            fds.into_iter().map(sys::above_stdio).collect::<Result<Vec<_>, _>>().map_err(sv("renumber an fd"))
        };
        let renumber_one = |fd: Option<OwnedFd>| fd.map(sys::above_stdio).transpose().map_err(sv("renumber an fd"));
        let (pipes, ends) = channels::open(
            self.extra_outputs.len(),
            self.host_calls,
            self.stdin_data.is_some(),
            self.stdin == StdinMode::Inherit,
            passed,
        )?;
        // The run's cgroup leaves (removed when `leaf` drops, on every path out of here).
        let leaf = self.cgroup.create_leaf()?;
        let fds = RunFds {
            trees: renumber(self.fs.clone_trees()?)?,
            ruleset: renumber_one(self.landlock.build_ruleset(&self.fs, self.policy.filesystem.writable_exec)?)?,
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
        keep.extend(code.iter().flat_map(|(c, _)| &c.keep));
        keep.sort_unstable();
        keep.dedup();
        let (argv, envp) = (CStrArray::new(&self.program.argv), CStrArray::new(&self.envp));
        // Code that is its jail's init keeps the report pipe (see `child::InChild::keep`).
        let pid_namespace = self.policy.namespaces.pid;
        let code_keep: Vec<RawFd> = code.map_or_else(Vec::new, |(c, _)| {
            let mut k = c.keep.clone();
            k.extend(pid_namespace.then(|| ends.report.as_raw_fd()));
            k.sort_unstable();
            k
        });
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
            network: &self.net,
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
            pid_namespace,
            scrub: sys::ArgsAreas::of_this_process(),
            in_process: code.map(|(c, faults)| child::InChild {
                entry: c.entry,
                argv: &self.program.argv,
                keep: &code_keep,
                faults,
            }),
        };

        let owner = self.id.lease_owner()?;
        let spawn = |flags| self.spawn(&args, flags, leaf.as_ref(), owner.as_ref());
        let newnet = libc::CLONE_NEWNET as u64;
        let (net, spawned) = match self.net_to_join(code.map(|(c, _)| c), net, clone_flags) {
            Some((how, ns)) => match crate::helper::in_net(ns, || spawn(clone_flags & !newnet)) {
                Ok(spawned) => (how, spawned),
                Err(e) => {
                    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
                    return Err(Error::Supervisor { what: "enter a network namespace made ahead", errno });
                }
            },
            None => (NetJoined::Own, spawn(clone_flags)),
        };
        let (pid, pidfd) = spawned?;
        // The child has its copies; ours would keep the pipes from ever reaching end of file.
        drop::<(ChildEnds, RunFds)>((ends, fds));

        let (staged, egress) = self.receive_staged(&pipes, pid, &pidfd, leaf.as_ref())?;
        Ok(Prepared {
            plan: self,
            pid,
            pidfd,
            pipes: Some(PipesHeld(pipes)),
            stdin_data: self.stdin_data.clone(),
            leaf,
            staged,
            egress,
            _owner: owner,
            net,
            init_is_program: code.is_some() && pid_namespace,
        })
    }

    /// Releases the spawned child to build its root and takes its writable directories' tmpfs
    /// as it hands them over, then its egress proxy's listening socket (a policy with an egress
    /// list). A child that failed (none, or too few) is taken down and reaped, and the error
    /// says why: its own report, or how it ended.
    fn receive_staged(
        &self,
        pipes: &Pipes,
        pid: i32,
        pidfd: &OwnedFd,
        leaf: Option<&Leaf>,
    ) -> Result<(Vec<OwnedFd>, Option<OwnedFd>), Error> {
        // The child may already have failed and gone; its report says why.
        let _ = sys::send_nosignal(pipes.sync.as_fd(), &[1]);
        let wanted = self.fs.staged().len() + usize::from(self.net.egress());
        let staged = channels::receive_staged(pipes.sync.as_fd(), pidfd.as_fd(), wanted, self.policy.wall_timeout);
        match staged {
            Ok(mut staged) if staged.len() == wanted => {
                let egress = if self.net.egress() { staged.pop() } else { None };
                Ok((staged, egress))
            }
            other => {
                kill_run(pid, pidfd.as_fd(), leaf, self.policy.namespaces.pid);
                let reaped = sys::waitid_pidfd(pidfd.as_fd()).ok();
                Err(match other {
                    Err(errno) => Error::Supervisor { what: "receive the writable directories", errno },
                    Ok(_) => {
                        let (why, limit) = self.setup_death(pipes.report.as_fd(), reaped, leaf);
                        Error::JailDied { why, limit }
                    }
                })
            }
        }
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
        // Not zeroed: zeroing would write (and so copy from the process this one was forked
        // from, or fault in) all of its pages, where the program's process uses a few at its top.
        let mut spawn_stack = Box::<[u8]>::new_uninit_slice(child::SPAWN_STACK_BYTES);
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
        layers: crate::Layers,
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
            enforcement: layers,
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
    ) -> (String, Option<JailLimit>) {
        if let Some(f) = channels::read_failure(report) {
            return (self.describe_failure(f), None);
        }
        let stats = leaf.map(Leaf::stats).unwrap_or_default();
        if stats.oom_kills > 0 {
            let key = JailLimit::Memory.key();
            let why = format!("its memory limit ({key}) is too small to build the jail: the OOM killer ended it");
            return (why, Some(JailLimit::Memory));
        }
        if stats.pids_limit_hit {
            let key = JailLimit::Pids.key();
            return (format!("its process limit ({key}) is too small to build the jail"), Some(JailLimit::Pids));
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

    /// Where the jail's network namespace came from (its run's report says the same).
    pub fn net(&self) -> NetJoined {
        self.net
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

fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}
