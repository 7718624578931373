//! A service's jails, built ahead of the code they will run: a runtime's interpreter (a managed
//! Wasm guest, or a program on the host) released to wait for its code on stdin, or a jail for
//! one request's Wasm module. A [`Recipe`] is prepared once (blocking: it opens the policy's
//! grants) and builds any number of jails, each with one shape whatever runs in it:
//! [`Recipe::prestart`] then [`Waiting::run_gated`].
//!
//! Imports (layers): `error`, `handover`, `plan`, `policy`, `report`, `supervisor`, `sys`, `wasm`.

use crate::handover;
pub use crate::wasm::languages::{Guest, LANGUAGES, Language};
use crate::wasm::{self, GuestCode, WasmJob, WasmPlan, WasmPrepared};
use crate::{Error, Gate, Gated, Job, Plan, Policy, Prepared, Turn, Turned};
use std::path::Path;

/// Where a run's files go and come from, inside every jail a recipe builds (the work directory,
/// an empty one of the run's own).
pub const WORK_DIR: &str = "/app";

/// What runs in a recipe's jails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code<'a> {
    /// A managed guest (the Wasm runner's) waiting for its code framed on stdin ([`handover`]).
    Guest(Guest),
    /// A host program reading its code on stdin; `framed`: stockade's Python bootstrap
    /// (`-c` [`handover::PYTHON_BOOTSTRAP`]) reads the frame, in `python`'s environment.
    Program { path: &'a str, args: &'a [String], framed: bool, python: &'a PythonEnv },
    /// One request's Wasm module, with its arguments (compiled in its jail when not cached).
    Module { bytes: Vec<u8>, args: &'a [String] },
}

/// A program runtime's Python under stockade's bootstrap: a virtual environment whose packages
/// its interpreters import from (its directory granted read-only, its `site-packages` put on
/// the path), and the modules each interpreter imports before its code arrives (a warm one while
/// it waits; their failure to import ends it, said on its stderr).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PythonEnv {
    pub venv: Option<String>,
    pub preload: Vec<String>,
}

impl PythonEnv {
    /// The bootstrap's own arguments (before a run's): the venv (or nothing) and the modules.
    fn args(&self) -> Vec<String> {
        if self.venv.is_none() && self.preload.is_empty() {
            return Vec::new();
        }
        std::iter::once(self.venv.clone().unwrap_or_default()).chain(self.preload.iter().cloned()).collect()
    }

    /// Its venv granted read-only under `policy`.
    fn grant(&self, policy: &mut Policy) -> Result<(), Error> {
        if let Some(v) = &self.venv {
            policy.add_read_only(v, "the runtime's venv")?;
        }
        Ok(())
    }
}

/// How a runtime's jails are built: a prepared plan, reused for every jail.
#[derive(Debug)]
pub enum Recipe {
    Wasm(WasmPlan),
    Program(Plan),
}

/// A jail a recipe built, released and waiting at its gate's side (see [`Prepared::run_gated`]).
#[derive(Debug)]
pub enum Waiting<'r> {
    Wasm(WasmPrepared<'r>),
    Program(Prepared<'r>),
}

impl Recipe {
    /// Prepares the jails of `code` under `policy` (blocking: it opens the policy's grants);
    /// `runner`: stockade's own binary, the Wasm runner.
    pub fn build(code: Code<'_>, policy: &Policy, runner: &Path) -> Result<Recipe, Error> {
        let wasm_job = |code: GuestCode, args: &[String]| {
            let mut job = WasmJob::new(code, runner);
            // A service never compiles a guest in its own process (`stockade guest install` does).
            job.compile_guests = false;
            job.args = args.to_vec();
            // The guest reads the run's stdin (after a module's bytes, when it compiles one).
            job.stdin = Some(Vec::new());
            job
        };
        match code {
            Code::Guest(guest) => {
                let mut job = wasm_job((guest.language().from_stdin)(), &[]);
                // `import stockade_host` (the Python guest's) or `host` (the JavaScript bootstrap's),
                // for the runs that have host calls.
                job.host_calls = true;
                Ok(Recipe::Wasm(wasm::prepare(policy, &job)?))
            }
            Code::Program { path, args, framed, python } => {
                let mut policy = policy.clone();
                policy.add_empty_dir(WORK_DIR, "the run's work directory")?;
                policy.set_cwd(WORK_DIR, "the run's work directory")?;
                let mut job = Job::new(path).args(args.iter().cloned());
                if framed {
                    python.grant(&mut policy)?;
                    job = job.args(["-c".to_string(), handover::PYTHON_BOOTSTRAP.to_string()]);
                    job = job.args(python.args());
                    // `import stockade_host` (the bootstrap's), for the runs that have host calls.
                    job.host_calls = true;
                    // What the code gives back (its value, its figures), then its end, on fd 3;
                    // the run is over when it has said so and closed its fds (see
                    // [`program_end`]).
                    job.extra_outputs = vec![crate::report::GIVEN_MAX_BYTES];
                    job.announces_end = true;
                }
                Ok(Recipe::Program(Plan::prepare(&policy, &job.stdin_bytes(Vec::new()))?))
            }
            Code::Module { bytes, args } => {
                Ok(Recipe::Wasm(wasm::prepare(policy, &wasm_job(GuestCode::ModuleBytes(bytes), args))?))
            }
        }
    }

    /// Prepares the jail of a live session's interpreter (see [`crate::TurnEnd`]): `code` (a
    /// managed guest, or a program under stockade's Python bootstrap) started once and given
    /// its code turn after turn ([`Waiting::run_turns`], [`live_turn`]), under `policy` for its
    /// whole life. A program's jail needs seccomp and a cgroup2 leaf (it is frozen between its
    /// turns): refused, naming them, where the host has none. `Err` too for code that reads its
    /// code whole from stdin (it cannot keep an interpreter).
    pub fn build_live(code: Code<'_>, policy: &Policy, runner: &Path) -> Result<Recipe, Error> {
        Recipe::build_live_imaged(code, policy, runner, None)
    }

    /// [`Recipe::build_live`], a Python guest's interpreter with `images` (see
    /// [`wasm::LiveImages`]): its jails are built with [`Recipe::prestart_passing`], given the
    /// image files. Ignored for the other languages (their interpreters have no image).
    pub fn build_live_imaged(
        code: Code<'_>,
        policy: &Policy,
        runner: &Path,
        images: Option<wasm::LiveImages>,
    ) -> Result<Recipe, Error> {
        match code {
            Code::Guest(guest) => {
                let mut job = WasmJob::new((guest.language().turns)(), runner);
                job.compile_guests = false;
                job.host_calls = true;
                job.images = images;
                Ok(Recipe::Wasm(wasm::prepare(policy, &job)?))
            }
            Code::Program { path, args, framed: true, python } => {
                let mut policy = policy.clone();
                policy.add_empty_dir(WORK_DIR, "the run's work directory")?;
                policy.set_cwd(WORK_DIR, "the run's work directory")?;
                python.grant(&mut policy)?;
                let mut job = Job::new(path).args(args.iter().cloned());
                job = job.args(["-c".to_string(), handover::PYTHON_BOOTSTRAP.to_string()]);
                job = job.args(python.args());
                job.host_calls = true;
                // Its status of each turn, a line, after what the turn's code gave back.
                job.extra_outputs = vec![STATUS_MAX_BYTES + crate::report::GIVEN_MAX_BYTES];
                job.turns = Some(crate::TurnEnd::Read);
                Ok(Recipe::Program(Plan::prepare(&policy, &job.stdin_bytes(Vec::new()))?))
            }
            Code::Program { .. } | Code::Module { .. } => Err(Error::Supervisor {
                what: "keep an interpreter of code that reads its code whole",
                errno: crate::sys::Errno(libc::EINVAL),
            }),
        }
    }

    /// Prepares the jails of a batch of `guest`'s runs under `policy`: each jail serves runs as
    /// turns ([`Waiting::run_turns`], [`batch_turn`]), each run in a fresh instance of the guest
    /// of its own (a copy of the runner's process, see `wasm/batch.rs`) under its own wall clock,
    /// fuel and linear memory; the jail's memory, processes and `/app` quota are the batch's.
    pub fn build_batch(guest: Guest, policy: &Policy, runner: &Path) -> Result<Recipe, Error> {
        let mut job = WasmJob::new((guest.language().from_stdin)(), runner);
        job.compile_guests = false;
        job.stdin = Some(Vec::new());
        job.batch = true;
        Ok(Recipe::Wasm(wasm::prepare(policy, &job)?))
    }

    /// The plan of its jails (their layers, their policy).
    pub fn plan(&self) -> &Plan {
        match self {
            Recipe::Wasm(w) => w.plan(),
            Recipe::Program(p) => p,
        }
    }

    /// Loads its Wasm guest into this process, for the jails it builds from now on (see
    /// [`WasmPlan::preload`]); nothing for a program's recipe.
    pub fn preload(&self) -> Result<bool, String> {
        match self {
            Recipe::Wasm(w) => w.preload(),
            Recipe::Program(_) => Ok(false),
        }
    }

    /// Whether its jails' program runs in the process that builds them (a Wasm guest this
    /// process loaded: see [`WasmPlan::preload`]), instead of an exec.
    pub fn runs_in_process(&self) -> bool {
        match self {
            Recipe::Wasm(w) => w.is_preloaded(),
            Recipe::Program(_) => false,
        }
    }

    /// Builds one jail up to its program's exec (see [`Plan::prestart`]).
    pub fn prestart(&self) -> Result<Waiting<'_>, Error> {
        self.prestart_joining(crate::JoinNet::Own)
    }

    /// Whether its jails are passed image files ([`Recipe::build_live_imaged`]): how many.
    pub fn passed_fds(&self) -> usize {
        self.plan().passed_fds
    }

    /// [`Recipe::prestart`], the jail passed `fds` (its image files, in order).
    pub fn prestart_passing(&self, fds: &[std::os::fd::BorrowedFd<'_>]) -> Result<Waiting<'_>, Error> {
        Ok(match self {
            Recipe::Wasm(w) => Waiting::Wasm(w.prestart_passing(crate::JoinNet::Own, fds)?),
            Recipe::Program(p) => Waiting::Program(p.prestart_passing(crate::JoinNet::Own, fds)?),
        })
    }

    /// [`Recipe::prestart`], the jail joining `net` where its plan allows ([`crate::JoinNet`]).
    pub fn prestart_joining(&self, net: crate::JoinNet<'_>) -> Result<Waiting<'_>, Error> {
        Ok(match self {
            Recipe::Wasm(w) => Waiting::Wasm(w.prestart_joining(net)?),
            Recipe::Program(p) => Waiting::Program(p.prestart_joining(net)?),
        })
    }
}

impl Waiting<'_> {
    /// Where the waiting jail's network namespace came from.
    pub fn net(&self) -> crate::NetJoined {
        match self {
            Waiting::Wasm(w) => w.net(),
            Waiting::Program(p) => p.net(),
        }
    }

    /// Releases a live interpreter's jail ([`Recipe::build_live`]) and serves its turns (see
    /// [`Prepared::run_turns`]): its start brings its files, its host calls for its life
    /// ([`crate::Host::Turns`]) and its clock until it is ready; `next` gives each turn
    /// ([`live_turn`]).
    pub fn run_turns(
        self,
        mut start: crate::Start,
        next: &mut dyn FnMut(Turned) -> Option<Turn>,
    ) -> Result<Gated, Error> {
        match self {
            Waiting::Wasm(w) => w.run_turns(start, next),
            Waiting::Program(p) => {
                // The bootstrap's code: the live loop.
                start.stdin = handover::frame(handover::PYTHON_LIVE, &[]);
                p.run_turns(start, &status_line, next, |_| None)
            }
        }
    }

    /// Releases the jail ahead of its run, which starts when `gate` opens (see
    /// [`Prepared::run_gated`]); a Wasm runner's summary is folded into the report.
    pub fn run_gated(self, gate: &Gate) -> Result<Gated, Error> {
        match self {
            Waiting::Wasm(w) => w.run_gated(gate),
            Waiting::Program(p) => {
                let mut gated = p.run_gated(gate, program_end)?;
                if let Gated::Ran(f) = &mut gated
                    && let Some(channel) = f.channels.first()
                {
                    if let Some(given) = lines(channel).find(|l| l.starts_with(b"{")) {
                        f.report.give(given);
                    }
                    let rss = lines(channel).rev().find_map(said_end).and_then(|(_, rss)| rss);
                    if let (0, Some(rss)) = (f.report.max_rss_bytes, rss) {
                        // An end it announced: the program was not reaped before the report.
                        f.report.max_rss_bytes = rss;
                    }
                }
                Ok(gated)
            }
        }
    }
}

/// The lines of a channel's bytes, trimmed.
fn lines(bytes: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    bytes.split(|b| *b == b'\n').map(<[u8]>::trim_ascii).filter(|l| !l.is_empty())
}

/// A bootstrap's word of its end (`exit STATUS PEAK-RSS-BYTES`): its status, and its peak RSS.
fn said_end(line: &[u8]) -> Option<(i32, Option<u64>)> {
    let text = std::str::from_utf8(line.strip_prefix(b"exit ")?).ok()?;
    let mut it = text.split(' ');
    let status = it.next()?.parse().ok()?;
    Some((status, it.next().and_then(|r| r.parse().ok())))
}

/// How a program under the Python bootstrap ended, as it said on fd 3 (read when it announced
/// its end, see [`crate::Job::announces_end`]): its status; a program that said something there
/// but no end (its code wrote fd 3 and closed its fds) is status 1. `None`: it said nothing.
fn program_end(channels: &[Vec<u8>]) -> Option<crate::report::GuestEnd> {
    let channel = channels.first().filter(|c| !c.is_empty())?;
    let code = lines(channel).rev().find_map(said_end).map_or(1, |(status, _)| status);
    Some(crate::report::GuestEnd::Exited { code, memory_limit_hit: false })
}

/// The most a live program writes of its turns' status (one line each).
const STATUS_MAX_BYTES: u64 = 4096;

/// A live program's status of its turn (see [`handover::PYTHON_LIVE`]): the last line it wrote
/// on fd 3, after the line of what its code gave back (a JSON object) when it gave something.
/// The turn's end is the kernel's word; its status is the program's, and a turn that said none
/// (its code closed fd 3) is status 1.
fn status_line(bytes: &[u8]) -> Option<crate::TurnTold> {
    let status = lines(bytes).rev().find_map(|l| std::str::from_utf8(l).ok()?.parse::<i32>().ok()).unwrap_or(1);
    let given = lines(bytes).rev().find(|l| l.starts_with(b"{")).map(<[u8]>::to_vec);
    Some(crate::TurnTold { status, guest: None, given })
}

/// One turn of a live interpreter: `code` (with `stdin`, for Python's `sys.stdin`) under
/// `limits` (its wall clock and output caps; a Wasm guest's fuel when its session has some).
pub fn live_turn(code: &str, stdin: &[u8], limits: crate::policy::Limits) -> Turn {
    Turn { stdin: handover::turn_frame(code, stdin, limits.fuel), limits, ..Turn::default() }
}

/// How much longer than its own wall clock a batch's run has from its jail's supervisor: its
/// process's deadline ends it first (the run alone); past this, the jail is ended with it.
pub const BATCH_GRACE_MS: u64 = 250;

/// One run of a batch's jail ([`Recipe::build_batch`]): `code` with `args` and `stdin`, under
/// `limits` (its wall clock, output caps, fuel and linear memory; its memory and processes are
/// the jail's).
pub fn batch_turn(code: &str, args: &[String], stdin: &[u8], limits: crate::policy::Limits, jail_wall_ms: u64) -> Turn {
    let wall_ms = limits.wall_timeout_ms.unwrap_or(jail_wall_ms).min(jail_wall_ms);
    let own = handover::BatchLimits { wall_ms, fuel: limits.fuel, wasm_memory_max_bytes: limits.wasm_memory_max_bytes };
    let held = crate::policy::Limits {
        wall_timeout_ms: Some(wall_ms.saturating_add(BATCH_GRACE_MS)),
        fuel: None,
        wasm_memory_max_bytes: None,
        memory_max_bytes: None,
        pids_max: None,
        ..limits
    };
    Turn { stdin: handover::batch_frame(code, args, stdin, own), limits: held, ..Turn::default() }
}
