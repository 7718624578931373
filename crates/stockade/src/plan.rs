//! `Policy` + `Job` -> `Plan`: every layer's `prepare`, in one place. This is the last place
//! that allocates for a run's child; a `Plan` can be run many times.
//!
//! Imports (layers): `error`, `layers`, `policy`, `program`, `report`, `sys`.

use crate::error::Error;
use crate::layers::cgroup::{self, CgroupPlan};
use crate::layers::filesystem::{self, FsPlan};
use crate::layers::identity::{self, IdPlan};
use crate::layers::landlock::{self, LandlockPlan};
use crate::layers::namespaces::{self, NsPlan};
use crate::layers::network::{self, NetPlan};
use crate::layers::privileges::{self, PrivPlan};
use crate::layers::rlimit::{self, RlimitPlan};
use crate::layers::seccomp::{self, SeccompPlan};
use crate::layers::uts::{self, UtsPlan};
use crate::layers::{LayerReport, session};
use crate::policy::{Policy, StdinMode};
use crate::program::{self, ProgramPlan};
use crate::sys;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::OwnedFd;

/// The PATH used to find the program when the policy's environment sets none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The most extra output channels a job may have (fds 3 up to 9 in the program).
/// The variable naming a program's host-call fds ([`Job::host_calls`]).
pub const HOST_CALLS_VAR: &str = "STOCKADE_HOST_CALLS";

pub const MAX_EXTRA_OUTPUTS: usize = (crate::sys::FIRST_FREE_FD - 3) as usize;

/// How a program that serves turns says that one returned ([`Job::turns`](crate::Job::turns)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// Its account of each turn, a line on its first extra channel, written where its code
    /// cannot write: the Wasm runner's, on the host side of its guest (the guest's turn
    /// returned, or it is back in its read of stdin with the turn's bytes all read). The
    /// program's code has no thread of its own: between turns it waits in its runner.
    Account,
    /// A thread of it is back in `read(2)` of its stdin with the turn's bytes all fed and read:
    /// the supervisor sees the call through its seccomp listener (the filter sends it every
    /// `read` of fd 0). Its jail is frozen then, every thread of it, until the next turn. Its
    /// first extra channel carries the turn's status, which is the program's own word.
    Read,
}

/// What to run: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub program: String,
    pub args: Vec<String>,
    /// Overrides the policy's `process.stdin`.
    pub stdin: Option<StdinMode>,
    /// The program's stdin is a pipe fed with these bytes (then closed), instead of `/dev/null`
    /// or the caller's. A prestarted run may be given other bytes ([`Prepared::set_stdin`]).
    ///
    /// [`Prepared::set_stdin`]: crate::Prepared::set_stdin
    pub stdin_data: Option<Vec<u8>>,
    /// Output channels besides stdout and stderr: the program gets one pipe per entry as fds 3,
    /// 4..., each captured up to its cap (bytes) and given back by
    /// [`Prepared::run_with_channels`](crate::Prepared::run_with_channels).
    pub extra_outputs: Vec<u64>,
    /// The argument vector the report shows, when it is not the one exec'd (a runner's).
    pub argv_display: Option<Vec<String>>,
    /// The program ends by writing its account on its first extra output and then closing
    /// every fd it holds, and nothing else in the jail outlives it (a runner that starts no
    /// process: the Wasm runner). Once all its outputs are at end of file with an account
    /// given, the run is over: the supervisor freezes the jail's cgroup (cgroup2; else it kills
    /// init) and answers; init is killed and reaped with the run's cleanup, so the kernel's
    /// tearing down of the program's memory (a millisecond for a Python guest) comes after the
    /// answer. Needs a pid namespace and a cgroup (to take the jail down whole and count its
    /// CPU); without them, or without an account read, the run ends as any other does. Such a
    /// program blocks `SIGUSR1` and, when it is init, may wait after its account for the
    /// supervisor's word: frozen, killed, or (when its account is not the run's end) `SIGUSR1`,
    /// to exit.
    pub announces_end: bool,
    /// The program gets a host-call channel (see [`HostCalls`](crate::HostCalls)): a pipe to
    /// write requests into and one to read answers from, as the fds after the extra outputs,
    /// named in `$STOCKADE_HOST_CALLS` (`REQUESTS,ANSWERS`). A run with no host calls closes
    /// their other ends at its start: a call then fails at once.
    pub host_calls: bool,
    /// Files the caller passes the jail at its prestart ([`Plan::prestart_passing`]), as the fds
    /// after the host-call channel's (after the extra outputs when it has none), in order.
    pub passed_fds: usize,
    /// The program serves turns ([`Prepared::run_turns`](crate::Prepared::run_turns)), and says
    /// each one's end so. It needs a stdin pipe ([`Job::stdin_data`]) and a first extra output
    /// (its account, or its status); [`TurnEnd::Read`](TurnEnd::Read) needs seccomp and
    /// a cgroup2 leaf, or the plan is refused.
    pub turns: Option<TurnEnd>,
}

impl Job {
    /// A job running `program` (a path, or a name looked up in the jail's PATH).
    pub fn new(program: impl Into<String>) -> Job {
        Job {
            program: program.into(),
            args: Vec::new(),
            stdin: None,
            stdin_data: None,
            extra_outputs: Vec::new(),
            argv_display: None,
            announces_end: false,
            host_calls: false,
            passed_fds: 0,
            turns: None,
        }
    }

    /// Feeds `data` to the program's stdin (see [`Job::stdin_data`]).
    pub fn stdin_bytes(mut self, data: impl Into<Vec<u8>>) -> Job {
        self.stdin_data = Some(data.into());
        self
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Job {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Job
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

/// A prepared run: fds open, C strings built, every check done. Reusable: each
/// [`Plan::run`](crate::Plan::run) is an independent run.
#[derive(Debug)]
pub struct Plan {
    pub(crate) policy: Policy,
    pub(crate) ns: NsPlan,
    pub(crate) id: IdPlan,
    pub(crate) fs: FsPlan,
    pub(crate) uts: UtsPlan,
    pub(crate) net: NetPlan,
    pub(crate) rlimits: RlimitPlan,
    pub(crate) privileges: PrivPlan,
    pub(crate) landlock: LandlockPlan,
    pub(crate) seccomp: SeccompPlan,
    pub(crate) cgroup: CgroupPlan,
    pub(crate) program: ProgramPlan,
    pub(crate) envp: Vec<CString>,
    pub(crate) stdin: StdinMode,
    /// Bytes for the program's stdin pipe (see [`Job::stdin_data`]).
    pub(crate) stdin_data: Option<std::sync::Arc<[u8]>>,
    /// Caps of the extra output channels (fds 3, 4...).
    pub(crate) extra_outputs: Vec<u64>,
    /// See [`Job::announces_end`].
    pub(crate) announces_end: bool,
    /// See [`Job::host_calls`].
    pub(crate) host_calls: bool,
    /// See [`Job::passed_fds`].
    pub(crate) passed_fds: usize,
    /// See [`Job::turns`].
    pub(crate) turns: Option<TurnEnd>,
    pub(crate) dev_null: OwnedFd,
}

/// `process.exec-allow` on the jail's two layers that hold it (see `layers/exec.rs`): Landlock's
/// execute right on the listed files (their interpreters and the program's own) alone, and the
/// seccomp listener's check of each exec. Refused, naming the key, where either layer is not there.
fn exec_only(
    landlock: &mut landlock::LandlockPlan,
    seccomp: &mut seccomp::SeccompPlan,
    allow: crate::layers::exec::ExecAllow,
    program: &program::ProgramPlan,
) -> Result<(), Error> {
    use std::os::fd::AsRawFd;
    let refuse = |layer: &str| crate::policy::PolicyError::Override {
        flag: "process.exec-allow".into(),
        message: format!(
            "needs {layer}, which this host or policy does not give: the list is kept by it, so without it the \
             run is refused (remove the list, or run where {layer} is)"
        ),
    };
    if !landlock.active() {
        return Err(refuse("Landlock (the kernel's check of what a run executes)").into());
    }
    if seccomp.exec != seccomp::ExecGuard::Supervised {
        return Err(refuse("the seccomp filter's exec guard").into());
    }
    let exe = std::fs::read_link(format!("/proc/self/fd/{}", program.exe.as_raw_fd())).ok();
    landlock.exec_only(allow.executable(exe.as_deref()));
    seccomp.exec_allow = Some(allow);
    Ok(())
}

impl Plan {
    /// Prepares every layer for `job` under `policy`. Touches the host read-only: resolves and
    /// opens grants and the program, reads the caller's limits.
    pub fn prepare(policy: &Policy, job: &Job) -> Result<Plan, Error> {
        // Only the Wasm Python guest can be held to a module list (its runner prepares its jail
        // without the key, having taken it); for a program on the host the OS layers are the
        // boundary, and a policy that says otherwise is refused rather than not kept.
        if policy.wasm.python_modules.is_some() {
            return Err(crate::policy::PolicyError::Override {
                flag: "wasm.python-modules".into(),
                message: format!(
                    "only the Wasm Python guest (--python, the python runtime) can be held to a module list; {} runs on \
                     the host, where the jail's OS layers are the boundary: remove the key from its policy",
                    job.program
                ),
            }
            .into());
        }
        let ns = namespaces::prepare(&policy.namespaces);
        let mut id = identity::prepare(policy)?;
        let fs = filesystem::prepare(policy, &id)?;
        id.per_run_uid(fs.writes_host_in_place());
        let uts = uts::prepare(policy);
        let net = network::prepare(policy);
        let rlimits = rlimit::prepare(policy)?;
        let privileges = privileges::prepare();
        let mut landlock = landlock::prepare(policy, &fs)?;
        let reads = job.turns == Some(TurnEnd::Read);
        let mut seccomp = seccomp::prepare(policy, reads)?;
        let exec_allow = crate::layers::exec::prepare(policy)?;
        let cgroup = cgroup::prepare(&policy.cgroups, &cgroup::host::Host::current())?;
        if reads {
            cgroup.freezer()?;
        }
        if job.turns.is_some() && (job.stdin_data.is_none() || job.extra_outputs.is_empty()) {
            return Err(Error::Supervisor {
                what: "serve turns without a stdin pipe and an account channel",
                errno: sys::Errno(libc::EINVAL),
            });
        }
        let mut env = environment(policy);
        if net.egress() {
            env.retain(|(k, _)| {
                !network::PROXY_VARS.contains(&k.as_str()) && !network::NO_PROXY_VARS.contains(&k.as_str())
            });
            env.extend(network::PROXY_VARS.map(|k| (k.to_string(), network::PROXY_URL.to_string())));
            env.extend(network::NO_PROXY_VARS.map(|k| (k.to_string(), String::new())));
        }
        if job.host_calls {
            let first = 3 + job.extra_outputs.len();
            env.push((HOST_CALLS_VAR.into(), format!("{},{}", first, first + 1)));
        }
        let path_var = env.iter().rev().find(|(k, _)| k == "PATH").map_or(DEFAULT_PATH, |(_, v)| v.as_str());
        let mut program = program::prepare(&job.program, &job.args, path_var, &fs)?;
        program.exe = renumber(program.exe, "renumber the program fd")?;
        if let Some(allow) = exec_allow {
            exec_only(&mut landlock, &mut seccomp, allow, &program)?;
        }
        if let Some(shown) = &job.argv_display {
            program.argv_display.clone_from(shown);
        }
        if job.extra_outputs.len() + 2 * usize::from(job.host_calls) + job.passed_fds > MAX_EXTRA_OUTPUTS {
            return Err(Error::Supervisor {
                what: "give the program more than 7 extra outputs",
                errno: sys::Errno(libc::EMFILE),
            });
        }
        // Names and values were checked for NUL at validation; caller values may hold one: skip those.
        let envp = env.iter().filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok()).collect();
        let dev_null = File::open("/dev/null").map_err(|e| Error::Supervisor {
            what: "open /dev/null",
            errno: sys::Errno(e.raw_os_error().unwrap_or(0)),
        })?;
        Ok(Plan {
            policy: policy.clone(),
            ns,
            id,
            fs,
            uts,
            net,
            rlimits,
            privileges,
            landlock,
            seccomp,
            cgroup,
            program,
            envp,
            stdin: job.stdin.unwrap_or(policy.stdin),
            stdin_data: job.stdin_data.as_deref().map(std::sync::Arc::from),
            extra_outputs: job.extra_outputs.clone(),
            announces_end: job.announces_end && !job.extra_outputs.is_empty(),
            host_calls: job.host_calls,
            passed_fds: job.passed_fds,
            turns: job.turns,
            dev_null: renumber(dev_null.into(), "renumber /dev/null")?,
        })
    }

    /// The policy this plan was built from.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A file or directory the jail shows from the host that the host has since unlinked or
    /// replaced (`ldconfig` renaming a new `/etc/ld.so.cache` over the old, a guest installed
    /// again): jails built from this plan would hold the old one, so it should be prepared
    /// again. `quick`: only what one `fstat` per object tells (unlinked, as a rename over it
    /// does); otherwise also whether each path still names the same object. (The program's own
    /// file is not looked at: it runs from the fd opened here, as any running program does.)
    pub fn changed_on_host(&self, quick: bool) -> Option<&std::path::Path> {
        self.fs.changed_on_host(quick)
    }

    /// `Ok` when a jail of this plan's policy could serve turns that end as `end` says (see
    /// [`Job::turns`]): for [`TurnEnd::Read`], seccomp's listener and a cgroup2 leaf to
    /// freeze; else why not, naming the layer.
    pub fn can_serve_turns(&self, end: TurnEnd) -> Result<(), Error> {
        if end == crate::TurnEnd::Read {
            if !self.seccomp.has_filters() {
                return Err(seccomp::SeccompError::TurnsUnavailable.into());
            }
            self.cgroup.freezer()?;
        }
        Ok(())
    }

    /// The argument vector the program will get.
    pub fn argv(&self) -> &[String] {
        &self.program.argv_display
    }

    /// The enforcement entries every successful start of this plan gets, in jail order.
    pub fn layers(&self) -> Vec<LayerReport> {
        self.layers_with(true)
    }

    pub(crate) fn layers_with(&self, cgroup_leaf: bool) -> Vec<LayerReport> {
        let mut out = self.ns.report();
        out.push(self.cgroup.report(cgroup_leaf));
        out.push(self.id.report());
        out.push(self.fs.report());
        out.push(self.uts.report());
        out.extend(self.net.report());
        out.push(session::report());
        out.push(self.rlimits.report());
        out.push(self.privileges.report());
        out.push(self.landlock.report());
        out.push(self.seccomp.report());
        let env_names: Vec<&str> = self.envp.iter().filter_map(|e| e.to_str().ok()?.split('=').next()).collect();
        let env = format!("cleared; set: {}", if env_names.is_empty() { "none".into() } else { env_names.join(", ") });
        out.push(LayerReport::new("environment", &env, &env));
        let passed = match self.passed_fds {
            0 => String::new(),
            n => format!(
                ", {n} file(s) its caller passed (from fd {})",
                3 + self.extra_outputs.len() + 2 * usize::from(self.host_calls)
            ),
        };
        let fds = format!(
            "fds 0-2{}{}{passed}; stdin {}",
            match (self.extra_outputs.len(), self.host_calls) {
                (0, false) => " only".to_string(),
                (0, true) => String::new(),
                (n, _) => format!(" and {n} output channel(s) from fd 3"),
            },
            if self.host_calls {
                let first = 3 + self.extra_outputs.len();
                format!(", a host-call channel (fds {first} and {})", first + 1)
            } else {
                String::new()
            },
            match (self.stdin_data.is_some(), self.stdin) {
                (true, _) => "a pipe of the caller's bytes",
                (false, StdinMode::Null) => "/dev/null",
                (false, StdinMode::Inherit) => "inherited",
            }
        );
        out.push(LayerReport::new("fds", &fds, &fds));
        out.push(self.lifecycle_report());
        out
    }

    fn lifecycle_report(&self) -> LayerReport {
        let asked = format!(
            "kill every process of the run at {} ms or when the supervisor dies",
            self.policy.wall_timeout.as_millis()
        );
        if self.policy.namespaces.pid {
            LayerReport::new(
                "lifecycle",
                &asked,
                "pid namespace: when the program exits, the rest is killed (by its init; by the kernel when the program is its namespace's init)",
            )
        } else {
            LayerReport::new("lifecycle", &asked, "the program's init only").with_status(
                crate::report::Enforcement::Partial,
                "namespaces.pid = false: the run's process group is killed at the end, but processes that \
                 started their own session (setsid) can outlive it",
            )
        }
    }
}

fn renumber(fd: OwnedFd, what: &'static str) -> Result<OwnedFd, Error> {
    sys::above_stdio(fd).map_err(|errno| Error::Supervisor { what, errno })
}

/// The program's environment: the policy's pass-list from the caller, then its fixed values.
fn environment(policy: &Policy) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| {
        env.retain(|(name, _)| name != k);
        env.push((k.to_string(), v));
    };
    for name in &policy.env_pass {
        if let Some(v) = std::env::var_os(name) {
            put(name, v.to_string_lossy().into_owned());
        }
    }
    for (k, v) in &policy.env_set {
        put(k, v.clone());
    }
    env
}
