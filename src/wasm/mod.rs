//! The embedded Wasmtime runner: Python, JavaScript or any WASI command module, inside a Wasm
//! runtime *and* inside the OS jail, with one limit vocabulary and one report.
//!
//! The supervisor side ([`prepare`]) turns a [`WasmJob`] into an ordinary [`Plan`] whose program
//! is this very binary run as `stockade __runner CONFIG` (stage 2, see `runner.rs`), with the
//! artifact and the runner bound read-only, the workspace writable, and a report channel on fd 3.

pub mod engine;
pub mod guests;
pub mod runner;
pub mod stdlib;

use crate::error::Error;
use crate::plan::{Job, Plan};
use crate::policy::Policy;
use crate::report::{Report, Status, WasmTime};
use engine::EngineKind;
use guests::{Guest, GuestError};
use runner::{Outcome, Preopen, RunnerConfig, Summary};
use std::path::{Path, PathBuf};

/// What to run in the runner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestCode {
    /// Python source, run with `python -c`.
    Python(String),
    /// JavaScript source, run with QuickJS (`qjs --std -e`).
    Js(String),
    /// Any WASI preview 1 command module (compiled on first use, then cached by content hash).
    Module(PathBuf),
}

/// A Wasm job: the code, its arguments, and where its files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmJob {
    pub code: GuestCode,
    pub args: Vec<String>,
    /// Host directory seen as `/app`, kept between runs; `None`: a fresh one, removed afterwards.
    pub workspace: Option<PathBuf>,
    /// Host directories the guest reads at the same path.
    pub data: Vec<PathBuf>,
    /// Where guests and artifacts live; `None`: [`guests::default_dir`].
    pub guest_dir: Option<PathBuf>,
    /// The stockade binary that runs as stage 2.
    pub runner: PathBuf,
}

impl WasmJob {
    pub fn new(code: GuestCode, runner: impl Into<PathBuf>) -> WasmJob {
        WasmJob { code, args: Vec::new(), workspace: None, data: Vec::new(), guest_dir: None, runner: runner.into() }
    }
}

fn guest_for(code: &GuestCode) -> Option<Guest> {
    match code {
        GuestCode::Python(_) => Some(guests::PYTHON),
        GuestCode::Js(_) => Some(guests::QUICKJS),
        GuestCode::Module(_) => None,
    }
}

/// What a job's code runs on: the artifact (a managed guest's, verified and precompiled once, or
/// an arbitrary module's, compiled on first use and cached under its SHA-256), and for Python
/// the extracted standard library.
fn guest_files(code: &GuestCode, dir: &Path, kind: EngineKind) -> Result<(PathBuf, Option<PathBuf>), GuestError> {
    match guest_for(code) {
        Some(g) => {
            guests::check_owner(dir)?;
            let artifact = guests::artifact_path(dir, g.name, kind);
            let needs_stdlib = g.name == guests::PYTHON.name;
            let stdlib = stdlib::path(dir);
            if artifact.exists() && (!needs_stdlib || stdlib.exists()) {
                guests::check_owner(&artifact)?;
                if needs_stdlib {
                    guests::check_owner(&stdlib)?;
                }
                return Ok((artifact, needs_stdlib.then_some(stdlib)));
            }
            let module = guests::verify(&g, dir)?;
            let stdlib = if needs_stdlib { Some(stdlib::ensure(&module, dir)?) } else { None };
            Ok((guests::ensure_artifact(&module, &artifact, kind)?, stdlib))
        }
        None => {
            let GuestCode::Module(path) = code else { unreachable!("handled above") };
            let sha = guests::sha256_file(path)?;
            let cache = dir.join("cache");
            guests::prepare_dir(&cache)?;
            let artifact = guests::artifact_path(&cache, &format!("module-{sha}"), kind);
            Ok((guests::ensure_artifact(path, &artifact, kind)?, None))
        }
    }
}

/// Where a fresh workspace (no `--workspace`) is inside the jail: an empty directory of the
/// run's own, under the writable quota, that the guest sees as `/app`.
pub const FRESH_WORKSPACE: &str = "/app";

/// The runner's configuration for a job with `workspace` as `/app`: what the guest gets, and
/// nothing about the jail around it. [`prepare`] grants exactly these paths to the jail; the
/// runner alone (`stockade __runner JSON`, e.g. for comparison in the bench) runs the same guest.
pub fn runner_config(policy: &Policy, job: &WasmJob, workspace: &Path) -> Result<RunnerConfig, GuestError> {
    let w = &policy.wasm;
    let kind = if w.fuel.is_some() { EngineKind::EpochFuel } else { EngineKind::Epoch };
    let dir = job.guest_dir.clone().unwrap_or_else(guests::default_dir);
    let (artifact, stdlib) = guest_files(&job.code, &dir, kind)?;
    let mut preopens = vec![Preopen { host: workspace.to_path_buf(), guest: "/app".into(), writable: true }];
    let mut env = policy.env_set.clone();
    if let Some(lib) = stdlib {
        preopens.push(Preopen { host: lib, guest: stdlib::GUEST_LIB.into(), writable: false });
        env.retain(|(k, _)| k != "PYTHONHOME");
        env.push(("PYTHONHOME".into(), stdlib::GUEST_HOME.into()));
    }
    for d in &job.data {
        preopens.push(Preopen { host: d.clone(), guest: d.display().to_string(), writable: false });
    }
    let mut argv: Vec<String> = match &job.code {
        GuestCode::Python(code) => vec!["python".into(), "-c".into(), code.clone()],
        GuestCode::Js(code) => vec!["qjs".into(), "--std".into(), "-e".into(), code.clone()],
        GuestCode::Module(path) => {
            vec![path.file_name().map_or_else(|| "module".into(), |n| n.to_string_lossy().into_owned())]
        }
    };
    argv.extend(job.args.iter().cloned());
    Ok(RunnerConfig {
        artifact,
        fuel: w.fuel,
        timeout_ms: u64::try_from(policy.wall_timeout.as_millis()).unwrap_or(u64::MAX),
        memory_max_bytes: w.memory_max_bytes,
        table_elements_max: w.table_elements_max,
        instances_max: w.instances_max,
        argv,
        env,
        preopens,
    })
}

/// Prepares a Wasm job under a policy: the plan to run (any number of times).
///
/// `/app` is a writable directory of the jail under the writable quota: an empty one of the
/// run's own, or (`--workspace DIR`) a copy of `DIR`, created when missing, written back when
/// the run ends.
pub fn prepare(policy: &Policy, job: &WasmJob) -> Result<Plan, Error> {
    let mut policy = policy.clone();
    let text = |p: &Path| p.display().to_string();
    let workspace = match &job.workspace {
        Some(ws) => {
            create_workspace(ws).map_err(|source| GuestError::Io { path: ws.clone(), source })?;
            ws.clone()
        }
        None => PathBuf::from(FRESH_WORKSPACE),
    };
    let config = runner_config(&policy, job, &workspace)?;
    policy.add_read_only(&text(&config.artifact), "wasm artifact")?;
    policy.add_read_only(&text(&job.runner), "wasm runner")?;
    for p in &config.preopens {
        match (p.writable, p.guest.as_str()) {
            (true, _) if job.workspace.is_none() => policy.add_empty_dir(FRESH_WORKSPACE, "wasm workspace")?,
            (true, _) => policy.add_read_write(&text(&p.host), "--workspace")?,
            (false, stdlib::GUEST_LIB) => policy.add_read_only(&text(&p.host), "python standard library")?,
            (false, _) => policy.add_read_only(&text(&p.host), "--data")?,
        }
    }
    let json = serde_json::to_string(&config)
        .map_err(|e| GuestError::Io { path: job.runner.clone(), source: std::io::Error::other(e.to_string()) })?;
    let mut run = Job::new(text(&job.runner)).args(["__runner".to_string(), json]);
    run.stdin = None;
    let mut plan = Plan::prepare(&policy, &run)?;
    plan.runner_channel = true;
    plan.program.argv_display = std::iter::once(text(&job.runner)).chain(config.argv.iter().cloned()).collect();
    Ok(plan)
}

/// Creates a `--workspace` directory that does not exist yet (its parent must), private to the
/// caller: the jail works on a copy, so its uid needs no access to it.
fn create_workspace(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Folds the runner's summary into the report: the Wasm statuses and figures.
pub(crate) fn merge(report: &mut Report, bytes: &[u8]) {
    let Ok(s) = serde_json::from_slice::<Summary>(bytes) else { return };
    report.guest_exit_code = s.guest_exit_code;
    report.fuel_consumed = s.fuel_consumed;
    report.wasm_memory_peak_bytes = Some(s.memory_peak_bytes);
    report.wasm_time = Some(WasmTime { load_ms: s.load_ms, instantiate_ms: s.instantiate_ms, run_ms: s.run_ms });
    // The OS-level reasons (timeout, oom, seccomp, setup) stay: they are what ended the run.
    if !matches!(report.status, Status::Ok | Status::ExitedNonzero | Status::Signaled) {
        return;
    }
    match s.outcome {
        Outcome::Exited if s.memory_limit_hit => report.status = Status::WasmMemoryLimit,
        Outcome::Exited => {}
        Outcome::FuelExhausted => report.status = Status::FuelExhausted,
        Outcome::Interrupted => {
            report.status = Status::Timeout;
            report.stockade_exit_code = crate::report::EXIT_TIMEOUT;
        }
        Outcome::Trap => {
            report.status = Status::WasmTrap;
            report.error = s.message;
        }
        Outcome::LoadError => {
            report.status = Status::SetupFailed;
            report.error = s.message;
            report.stockade_exit_code = crate::report::EXIT_SETUP_FAILED;
        }
    }
}
