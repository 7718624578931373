//! A service's jails, built ahead of the code they will run: a runtime's interpreter (a managed
//! Wasm guest, or a program on the host) released to wait for its code on stdin, or a jail for
//! one request's Wasm module. A [`Recipe`] is prepared once (blocking: it opens the policy's
//! grants) and builds any number of jails, each with one shape whatever runs in it:
//! [`Recipe::prestart`] then [`Waiting::run_gated`].

use crate::handover;
use crate::wasm::{self, GuestCode, WasmJob, WasmPlan, WasmPrepared};
use crate::{Error, Gate, Gated, Job, Plan, Policy, Prepared};
use std::path::Path;

/// Where a run's files go and come from, inside every jail a recipe builds (the work directory,
/// an empty one of the run's own).
pub const WORK_DIR: &str = "/app";

/// What runs in a recipe's jails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code<'a> {
    /// A managed guest (the Wasm runner's Python, or else JavaScript) waiting for its code on
    /// stdin: framed for Python ([`handover`]), the whole stdin for JavaScript.
    Guest { python: bool },
    /// A host program reading its code on stdin; `framed`: stockade's Python bootstrap
    /// (`-c` [`handover::PYTHON_BOOTSTRAP`]) reads the frame.
    Program { path: &'a str, args: &'a [String], framed: bool },
    /// One request's Wasm module, with its arguments (compiled in its jail when not cached).
    Module { bytes: Vec<u8>, args: &'a [String] },
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
            Code::Guest { python } => {
                let code = if python { GuestCode::PythonFromStdin } else { GuestCode::JsFromStdin };
                let mut job = wasm_job(code, &[]);
                // `import stockade_host` (the Python guest's) or `host` (the JavaScript bootstrap's),
                // for the runs that have host calls.
                job.host_calls = true;
                Ok(Recipe::Wasm(wasm::prepare(policy, &job)?))
            }
            Code::Program { path, args, framed } => {
                let mut policy = policy.clone();
                policy.add_empty_dir(WORK_DIR, "the run's work directory")?;
                policy.set_cwd(WORK_DIR, "the run's work directory")?;
                let mut job = Job::new(path).args(args.iter().cloned());
                if framed {
                    job = job.args(["-c".to_string(), handover::PYTHON_BOOTSTRAP.to_string()]);
                    // `import stockade_host` (the bootstrap's), for the runs that have host calls.
                    job.host_calls = true;
                }
                Ok(Recipe::Program(Plan::prepare(&policy, &job.stdin_bytes(Vec::new()))?))
            }
            Code::Module { bytes, args } => {
                Ok(Recipe::Wasm(wasm::prepare(policy, &wasm_job(GuestCode::ModuleBytes(bytes), args))?))
            }
        }
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
        Ok(match self {
            Recipe::Wasm(w) => Waiting::Wasm(w.prestart()?),
            Recipe::Program(p) => Waiting::Program(p.prestart()?),
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

    /// Releases the jail ahead of its run, which starts when `gate` opens (see
    /// [`Prepared::run_gated`]); a Wasm runner's summary is folded into the report.
    pub fn run_gated(self, gate: &Gate) -> Result<Gated, Error> {
        match self {
            Waiting::Wasm(w) => w.run_gated(gate),
            Waiting::Program(p) => p.run_gated(gate, |_| None),
        }
    }
}
