//! The embedded Wasmtime runner: Python, JavaScript or any WASI command module, inside a Wasm
//! runtime *and* inside the OS jail, with one limit vocabulary and one report.
//!
//! The supervisor side ([`prepare`]) turns a [`WasmJob`] into an ordinary [`Plan`] whose program
//! is this very binary run as `stockade __runner CONFIG` (stage 2, see `runner.rs`), with the
//! artifact and the runner bound read-only, the workspace writable, and a report channel on fd 3.
//!
//! Imports: only the files of `crates/stockade/src/wasm/`, its children. Each of them imports only files of a
//! layer below its own (and this one), from the bottom: engine, stdin, shared; guests, limits;
//! pages, turns, exit; store, snapshot, deadline; p1calls, component; preload; module, python;
//! runner.
//!
//! Imports (layers): `error`, `handover`, `host`, `input`, `layers`, `plan`, `policy`, `report`, `supervisor`,
//! `sys`.

mod batch;
mod component;
mod deadline;
pub mod engine;
mod exit;
pub mod guests;
mod image;
mod job;
mod jsimage;
pub use job::{LiveImages, WasmJob};
pub mod languages;
pub use languages::check_installed;
mod limits;
mod module;
mod p1calls;
mod pages;
mod preload;
mod python;
pub mod runner;
mod shared;
pub mod snapshot;
mod stdin;
mod store;
pub mod turns;

pub use pages::Pages;
pub use shared::RUNNER_ARG_MAX;

use crate::error::Error;
use crate::plan::{Job, Plan};
use crate::policy::Policy;
use crate::report::{GuestEnd, Report, WasmTime};
use crate::supervisor::{Gate, Gated, Output, Prepared};
use engine::EngineKind;
use guests::GuestError;
use shared::{Entry, ImageFds, Outcome, Preopen, RunnerConfig, Summary, pieces};
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
    /// A module's bytes (as [`GuestCode::Module`], without a file).
    ModuleBytes(Vec<u8>),
    /// Python whose code comes later, framed on stdin ([`crate::handover`]): the interpreter
    /// starts and waits for it, and the wall-clock limit counts from its arrival.
    PythonFromStdin,
    /// JavaScript whose code comes later on stdin, as [`GuestCode::PythonFromStdin`].
    JsFromStdin,
    /// A live session's Python interpreter: it serves turns ([`crate::TurnEnd::Account`]), each
    /// one's code run in the main module all its turns share (see `turns.rs`).
    PythonTurns,
    /// A live session's JavaScript interpreter, as [`GuestCode::PythonTurns`].
    JsTurns,
}

impl GuestCode {
    /// Whether the interpreter waits for its code on stdin.
    fn waits_for_code(&self) -> bool {
        matches!(self, GuestCode::PythonFromStdin | GuestCode::JsFromStdin)
    }
}

/// What a job's code runs on.
#[derive(Debug)]
enum Code {
    /// A precompiled artifact the runner loads: a managed guest's (verified and precompiled
    /// once, outside any jail: its bytes are pinned), or a module's from the cache.
    Artifact(PathBuf),
    /// A module not compiled yet: its bytes (read once; the bytes hashed are the bytes compiled)
    /// go to the runner on stdin and are compiled inside the jail, under the run's limits; the
    /// artifact it hands back is cached at `cache_to` (named for the bytes' SHA-256).
    Compile { bytes: Vec<u8>, cache_to: PathBuf },
}

/// The most a cached artifact may take (a module compiles to a few times its size).
pub const ARTIFACT_MAX_BYTES: u64 = 512 << 20;
/// The most the module cache of a guest directory holds; past it the least recently used
/// artifacts go.
pub const CACHE_MAX_BYTES: u64 = 2 << 30;

/// The code a job runs, and for Python the extracted standard library.
fn guest_files(
    policy: &Policy,
    job: &WasmJob,
    dir: &Path,
    kind: EngineKind,
) -> Result<(Code, Option<PathBuf>), GuestError> {
    let code = &job.code;
    match code {
        GuestCode::Python(_) | GuestCode::PythonFromStdin | GuestCode::PythonTurns => {
            let (code, lib) = python_files(job, dir, kind)?;
            let lib = match (&policy.wasm.python_modules, lib) {
                (Some(modules), Some(_)) => Some(snapshot::view(dir, &guests::cache_dir(dir), modules)?),
                (_, lib) => lib,
            };
            Ok((code, lib))
        }
        GuestCode::Js(_) | GuestCode::JsFromStdin | GuestCode::JsTurns => {
            let g = guests::QUICKJS;
            guests::check_owner(dir)?;
            let artifact = guests::artifact_path(dir, g.name, kind);
            let artifact = managed_artifact(job, g.name, artifact, kind, || guests::verify(&g, dir))?;
            Ok((Code::Artifact(artifact), None))
        }
        GuestCode::Module(_) | GuestCode::ModuleBytes(_) => {
            let bytes = match code {
                // Once, from a regular file: a FIFO or a file rewritten between two reads cannot
                // put one module's code under another's hash.
                GuestCode::Module(path) => {
                    crate::input::read_regular(path, policy.wasm.module_max_bytes, "a Wasm module")?
                }
                GuestCode::ModuleBytes(b) if b.len() as u64 > policy.wasm.module_max_bytes => {
                    return Err(GuestError::ModuleTooLarge {
                        bytes: b.len() as u64,
                        max: policy.wasm.module_max_bytes,
                    });
                }
                GuestCode::ModuleBytes(b) => b.clone(),
                _ => Vec::new(),
            };
            let sha = guests::sha256_bytes(&bytes);
            let cache = guests::cache_dir(dir);
            guests::prepare_dir(&cache)?;
            let artifact = guests::artifact_path(&cache, &format!("module-{sha}"), kind);
            // One made by another engine is compiled again (in the jail) and replaced.
            if usable(&artifact, kind)?.is_ok() {
                // Least recently used goes first when the cache is full.
                if let Ok(f) = std::fs::File::open(&artifact) {
                    let _ = f.set_modified(std::time::SystemTime::now());
                }
                return Ok((Code::Artifact(artifact), None));
            }
            Ok((Code::Compile { bytes, cache_to: artifact }, None))
        }
    }
}

/// The pre-initialized Python guest's artifact and standard library: precompiled here when
/// missing and the job may (its component is built by `stockade guest install`).
fn python_files(job: &WasmJob, dir: &Path, kind: EngineKind) -> Result<(Code, Option<PathBuf>), GuestError> {
    guests::check_owner(dir)?;
    let stdlib = snapshot::stdlib_path(dir);
    if !stdlib.exists() || !snapshot::component_path(dir).exists() {
        return Err(GuestError::NotInstalled { name: "python".into(), dir: dir.into() });
    }
    guests::check_owner(&stdlib)?;
    let artifact = guests::artifact_path(dir, snapshot::artifact_stem(), kind);
    let artifact = managed_artifact(job, "python", artifact, kind, || snapshot::verify(dir))?;
    Ok((Code::Artifact(artifact), Some(stdlib)))
}

/// Whether the artifact at `path` may be loaded for `kind`: who may have written it first (it is
/// native code), then which engine made it. `Ok(Err(why))`: it may not (missing, or made by
/// another engine); `Err`: it is unsafe.
fn usable(path: &Path, kind: EngineKind) -> Result<Result<(), String>, GuestError> {
    match path.exists() {
        true => guests::check_owner(path).map(|()| engine::check_artifact(path, kind)),
        false => Ok(Err("it is not there".to_string())),
    }
}

/// A managed guest's `artifact`: as it is when usable; else compiled now from its verified
/// source (`source`) when the job may, or refused naming `stockade guest install`.
fn managed_artifact(
    job: &WasmJob,
    name: &str,
    artifact: PathBuf,
    kind: EngineKind,
    source: impl FnOnce() -> Result<PathBuf, GuestError>,
) -> Result<PathBuf, GuestError> {
    match usable(&artifact, kind)? {
        Ok(()) => Ok(artifact),
        Err(why) if !job.compile_guests => Err(GuestError::NotPrecompiled { name: name.into(), path: artifact, why }),
        Err(_) => guests::ensure_artifact(&source()?, &artifact, kind),
    }
}

/// Where a fresh workspace (no `--workspace`) is inside the jail: an empty directory of the
/// run's own, under the writable quota, that the guest sees as `/app`.
pub const FRESH_WORKSPACE: &str = "/app";

/// The runner's configuration for a job with `workspace` as `/app`: what the guest gets, and
/// nothing about the jail around it. [`prepare`] grants exactly these paths to the jail; the
/// runner alone (`stockade __runner JSON`, e.g. for comparison in the bench) runs the same guest
/// (a managed guest: a module not compiled yet needs its bytes on the runner's stdin).
pub fn runner_config(policy: &Policy, job: &WasmJob, workspace: &Path) -> Result<RunnerConfig, GuestError> {
    runner_setup(policy, job, workspace).map(|(config, _)| config)
}

fn runner_setup(policy: &Policy, job: &WasmJob, workspace: &Path) -> Result<(RunnerConfig, Code), GuestError> {
    let w = &policy.wasm;
    let kind = if w.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let dir = job.guest_dir.clone().unwrap_or_else(guests::default_dir);
    let (code, stdlib) = guest_files(policy, job, &dir, kind)?;
    let mut preopens = vec![Preopen { host: workspace.to_path_buf(), guest: "/app".into(), writable: true }];
    // A JavaScript bootstrap's sources come in the guest's environment, which it takes them out
    // of before the code runs; code run bare (`qjs -e CODE`) gets the policy's alone.
    let env = match &job.code {
        GuestCode::Js(_) if job.host_calls => crate::handover::js_environment(&policy.env_set),
        GuestCode::JsFromStdin | GuestCode::JsTurns => crate::handover::js_environment(&policy.env_set),
        _ => policy.env_set.clone(),
    };
    if let Some(lib) = stdlib {
        preopens.push(Preopen { host: lib, guest: snapshot::GUEST_LIB.into(), writable: false });
    }
    for d in &job.data {
        preopens.push(Preopen { host: d.clone(), guest: d.display().to_string(), writable: false });
    }
    let mut argv: Vec<String> = match &job.code {
        GuestCode::Python(code) => vec!["python".into(), "-c".into(), code.clone()],
        // With host calls the code comes after `host` (one line: its own lines keep their numbers).
        GuestCode::Js(code) if job.host_calls => {
            vec!["qjs".into(), "--std".into(), "-e".into(), format!("{}{code}", crate::handover::JS_HOST)]
        }
        GuestCode::Js(code) => vec!["qjs".into(), "--std".into(), "-e".into(), code.clone()],
        GuestCode::Module(path) => {
            vec![path.file_name().map_or_else(|| "module".into(), |n| n.to_string_lossy().into_owned())]
        }
        GuestCode::ModuleBytes(_) => vec!["module.wasm".into()],
        GuestCode::PythonFromStdin => vec!["python".into(), "-c".into(), "<code on stdin>".into()],
        GuestCode::JsFromStdin => {
            vec!["qjs".into(), "--std".into(), "-e".into(), crate::handover::JS_BOOTSTRAP.into()]
        }
        GuestCode::PythonTurns => vec!["python".into(), "-c".into(), "<live turns>".into()],
        GuestCode::JsTurns => {
            let live = format!("{}{}", crate::handover::JS_HOST, crate::handover::JS_LIVE);
            vec!["qjs".into(), "--std".into(), "-e".into(), live]
        }
    };
    argv.extend(job.args.iter().cloned());
    let (artifact, module_bytes) = match &code {
        Code::Artifact(a) => (Some(a.clone()), None),
        Code::Compile { bytes, .. } => (None, Some(bytes.len() as u64)),
    };
    let artifact_id = match &artifact {
        Some(a) => {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(a).map_err(|source| GuestError::Io { path: a.clone(), source })?;
            (m.dev(), m.ino())
        }
        None => (0, 0),
    };
    let config = RunnerConfig {
        artifact,
        artifact_id,
        module_bytes,
        fuel: w.fuel,
        timeout_ms: u64::try_from(policy.wall_timeout.as_millis()).unwrap_or(u64::MAX),
        memory_max_bytes: w.memory_max_bytes,
        table_elements_max: w.table_elements_max,
        instances_max: w.instances_max,
        argv,
        env,
        preopens,
        guest_stdin: job.stdin.is_some() || job.code.waits_for_code(),
        clock_from_stdin: job.code.waits_for_code(),
        entry: match &job.code {
            GuestCode::Python(code) => Entry::PythonRun { code: Some(code.clone()), args: job.args.clone() },
            GuestCode::PythonFromStdin | GuestCode::PythonTurns => Entry::PythonRun { code: None, args: Vec::new() },
            _ => Entry::Start,
        },
        host_calls: None,
        learned_pages: None,
        // A runner run alone (for comparison) has no supervisor to tell it to go.
        linger: false,
        turns: matches!(job.code, GuestCode::PythonTurns | GuestCode::JsTurns),
        batch: job.batch && job.code.waits_for_code(),
        images: None,
    };
    Ok((config, code))
}

/// A Wasm job prepared to run (any number of times): the plan of the jail whose program is the
/// runner, and what to do with what the runner hands back.
#[derive(Debug)]
pub struct WasmPlan {
    plan: Plan,
    /// Where an artifact the runner compiles goes (the module was not in the cache).
    cache_to: Option<PathBuf>,
    /// The precompiled guest its runner loads, which a process may load ahead ([`WasmPlan::preload`]).
    guest: Option<preload::Key>,
}

/// A Wasm job's jail built ahead, waiting for [`WasmPrepared::run`].
#[derive(Debug)]
pub struct WasmPrepared<'p> {
    prepared: Prepared<'p>,
    wasm: &'p WasmPlan,
}

/// What the runner may write on its summary channel.
const SUMMARY_MAX_BYTES: u64 = 64 * 1024 + 2 * store::GIVEN_MAX as u64;

/// Prepares a Wasm job under a policy.
///
/// `/app` is a writable directory of the jail under the writable quota: an empty one of the
/// run's own, or (`--workspace DIR`) a copy of `DIR`, created when missing, written back when
/// the run ends.
pub fn prepare(policy: &Policy, job: &WasmJob) -> Result<WasmPlan, Error> {
    if policy.network.egress() {
        return Err(crate::policy::PolicyError::Override {
            flag: "network.egress-allow".into(),
            message: "a Wasm guest keeps no sockets (WASI preview 1 has none, and its runner's filter refuses them): \
                      it reaches the network only through host calls; remove the list, or run a program runtime"
                .into(),
        }
        .into());
    }
    let mut policy = policy.clone();
    let workspace = match &job.workspace {
        Some(ws) => {
            create_workspace(ws).map_err(|source| GuestError::Io { path: ws.clone(), source })?;
            ws.clone()
        }
        None => PathBuf::from(FRESH_WORKSPACE),
    };
    let (mut config, code) = runner_setup(&policy, job, &workspace)?;
    // In the jail, once it has given its account, the runner waits for its supervisor's word
    // (see `Job::announces_end`).
    config.linger = true;
    // The module list is kept by the guest's view of its library (see `runner_setup`), not by
    // the jail: the jail's plan is made without it.
    policy.wasm.python_modules = None;
    let text = |p: &Path| p.display().to_string();

    if let Some(artifact) = &config.artifact {
        policy.add_read_only(&text(artifact), "wasm artifact")?;
    }
    for file in batch::grants(&config) {
        policy.add_read_only(&text(&file), "the Python guest's list of the pages a run touches")?;
    }
    policy.add_read_only(&text(&job.runner), "wasm runner")?;
    for p in &config.preopens {
        match (p.writable, p.guest.as_str()) {
            (true, _) if job.workspace.is_none() => policy.add_empty_dir(FRESH_WORKSPACE, "wasm workspace")?,
            (true, _) => policy.add_read_write(&text(&p.host), "--workspace")?,
            (false, snapshot::GUEST_LIB) => policy.add_read_only(&text(&p.host), "python standard library")?,
            (false, _) => policy.add_read_only(&text(&p.host), "--data")?,
        }
    }
    // The runner's extra outputs: its summary, and an artifact's bytes when it compiles one; the
    // host-call channel's fds come after them.
    let compiles = matches!(code, Code::Compile { .. });
    let host_calls = job.host_calls
        && (matches!(config.entry, Entry::PythonRun { .. })
            || matches!(job.code, GuestCode::Js(_) | GuestCode::JsFromStdin | GuestCode::JsTurns));
    if host_calls {
        let first = i32::try_from(3 + 1 + usize::from(compiles)).unwrap_or(i32::MAX);
        config.host_calls = Some((first, first + 1));
    }
    // The files a live guest's images go through come after the host-call channel.
    let images = job.images.filter(|_| matches!(job.code, GuestCode::PythonTurns | GuestCode::JsTurns));
    if let Some(i) = images {
        let first = i32::try_from(3 + 1 + usize::from(compiles) + 2 * usize::from(host_calls)).unwrap_or(i32::MAX);
        config.images = Some(ImageFds { hibernate: first, resume: i.resume.then_some(first + 1), reseed: i.reseed });
    }
    let json = serde_json::to_string(&config).map_err(GuestError::Config)?;
    let mut run = Job::new(text(&job.runner)).args(std::iter::once("__runner".to_string()).chain(pieces(&json)));
    run.extra_outputs = vec![SUMMARY_MAX_BYTES];
    run.host_calls = host_calls;
    run.passed_fds = images.map_or(0, |i| 1 + usize::from(i.resume));
    // The runner writes its summary, closes its fds and exits; the guest cannot start a process.
    run.announces_end = true;
    run.argv_display = Some(std::iter::once(text(&job.runner)).chain(config.argv.iter().cloned()).collect());
    // The runner's stdin: a module to compile, then the guest's own (a waiting interpreter's
    // code comes there later).
    if config.guest_stdin || config.turns {
        run.stdin_data = Some(Vec::new());
    }
    // Each turn's (or batch run's) frame comes on the runner's stdin; it says each one's end on
    // fd 3.
    run.turns = (config.turns || config.batch).then_some(crate::TurnEnd::Account);
    let cache_to = match code {
        Code::Artifact(_) => None,
        Code::Compile { bytes, cache_to } => {
            run.stdin_data = Some(bytes);
            // One byte past the most an artifact may take: a longer one is never cached.
            run.extra_outputs.push(ARTIFACT_MAX_BYTES + 1);
            Some(cache_to)
        }
    };
    if let Some(extra) = &job.stdin {
        run.stdin_data.get_or_insert_with(Vec::new).extend_from_slice(extra);
    }
    let kind = if config.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let guest = config.artifact.clone().map(|path| preload::Key {
        path,
        id: config.artifact_id,
        kind,
        component: matches!(config.entry, Entry::PythonRun { .. }),
    });
    Ok(WasmPlan { plan: Plan::prepare(&policy, &run)?, cache_to, guest })
}

impl WasmPlan {
    /// The jail's plan (the runner is its program).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Runs the job once.
    pub fn run(&self, output: Output<'_>) -> Result<Report, Error> {
        self.prestart()?.run(output)
    }

    /// Whether this process loaded its guest ([`WasmPlan::preload`]): the jails it builds while
    /// it has one thread run the runner as a copy of it, not an exec.
    pub fn is_preloaded(&self) -> bool {
        self.guest.as_ref().and_then(preload::find).is_some()
    }

    /// Builds the jail up to the runner's exec (see [`Plan::prestart`]).
    pub fn prestart(&self) -> Result<WasmPrepared<'_>, Error> {
        self.prestart_joining(crate::JoinNet::Own)
    }

    /// [`WasmPlan::prestart`], a runner that is a copy of this process joining `net` when it is
    /// a shared one ([`crate::JoinNet::Shared`]: the runner makes no socket).
    pub fn prestart_joining(&self, net: crate::JoinNet<'_>) -> Result<WasmPrepared<'_>, Error> {
        let loaded = self.guest.as_ref().and_then(preload::find);
        let prepared = match loaded {
            // Loaded ahead by this process: the runner is a copy of it (when it has one thread).
            Some(l) => {
                // The runner's own filter refuses every socket before any guest code runs.
                let code = crate::InProcess { entry: runner::main_in_process, keep: l.fds.clone(), shared_net: true };
                self.plan.prestart_in_process(&code, net)?.0
            }
            None => self.plan.prestart_joining(net)?,
        };
        Ok(WasmPrepared { prepared, wasm: self })
    }

    /// [`WasmPlan::prestart`], the jail passed `fds` (a live guest's image files: see
    /// [`LiveImages`]); its runner is exec'd.
    pub fn prestart_passing(
        &self,
        net: crate::JoinNet<'_>,
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<WasmPrepared<'_>, Error> {
        Ok(WasmPrepared { prepared: self.plan.prestart_passing(net, fds)?, wasm: self })
    }

    /// Loads this plan's guest into this process (its engine, its artifact, its memory images),
    /// so that the jails it builds from now on while it has a single thread run their runner as
    /// a copy of it instead of an exec (see [`crate::InProcess`]). For a process that builds many
    /// jails and holds nothing secret (a copy of its memory is the runner's). `Ok(false)`: the
    /// plan's guest is compiled in its jail (nothing to load).
    pub fn preload(&self) -> Result<bool, String> {
        match &self.guest {
            Some(key) => preload::load(key).map(|()| true),
            None => Ok(false),
        }
    }
}

impl WasmPrepared<'_> {
    /// Where the jail's network namespace came from (its run's report says the same).
    pub fn net(&self) -> crate::NetJoined {
        self.prepared.net()
    }

    /// Releases the jail and reports the run, the runner's summary folded in; a module the runner
    /// compiled goes into the cache.
    pub fn run(self, output: Output<'_>) -> Result<Report, Error> {
        let wasm = self.wasm;
        let (mut report, channels) = self.prepared.run_with_channels(output, guest_of)?;
        wasm.settle(&mut report, &channels);
        Ok(report)
    }

    /// Releases the jail ahead of its run, which starts when `gate` opens (see
    /// [`Prepared::run_gated`]): for a waiting interpreter ([`GuestCode::PythonFromStdin`]),
    /// the start brings its framed code.
    pub fn run_gated(self, gate: &Gate) -> Result<Gated, Error> {
        let wasm = self.wasm;
        Ok(wasm.settled(self.prepared.run_gated(gate, guest_of)?))
    }
}

/// The runner's summary, as the verdict reads it.
fn guest_of(channels: &[Vec<u8>]) -> Option<GuestEnd> {
    match said(channels.first().map_or(&[][..], Vec::as_slice)) {
        Said::Summary(s) => Some(guest_end(&s)),
        _ => None,
    }
}

impl WasmPlan {
    /// A gated run's end, its report with the runner's summary folded in.
    fn settled(&self, mut gated: Gated) -> Gated {
        if let Gated::Ran(f) = &mut gated {
            self.settle(&mut f.report, &f.channels);
        }
        gated
    }

    /// Folds the runner's summary into the report; caches a module it compiled.
    fn settle(&self, report: &mut Report, channels: &[Vec<u8>]) {
        let compiled = match said(channels.first().map_or(&[][..], Vec::as_slice)) {
            Said::Summary(s) => {
                figures(report, &s);
                s.compile_ms.is_some() && s.outcome != Outcome::LoadError
            }
            Said::Compiling => {
                report.add_note("the run ended while the runner was compiling the Wasm module");
                false
            }
            Said::Nothing => false,
        };
        if let (Some(cache_to), Some(artifact), true) = (&self.cache_to, channels.get(1), compiled)
            && !artifact.is_empty()
            && artifact.len() as u64 <= ARTIFACT_MAX_BYTES
            && let Err(e) = store_artifact(cache_to, artifact)
        {
            report.add_note(format!("the compiled module was not cached: {e}"));
        }
    }
}

/// Writes an artifact into the cache (whole, or not at all), then trims the cache to
/// [`CACHE_MAX_BYTES`], least recently used first.
fn store_artifact(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    guests::write_whole(path, bytes)?;
    trim_cache(path.parent().unwrap_or(Path::new(".")), CACHE_MAX_BYTES);
    Ok(())
}

/// Removes the least recently used module artifacts of a cache directory until it holds at
/// most `max` bytes.
fn trim_cache(dir: &Path, max: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("module-") && n.ends_with(".cwasm")
        })
        .filter_map(|e| {
            let m = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some((m.modified().ok()?, m.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= max {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
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

/// What the runner said on its summary channel: its summary (the last line), or that it was
/// still compiling the module when the run ended.
enum Said {
    Summary(Box<Summary>),
    Compiling,
    Nothing,
}

fn said(bytes: &[u8]) -> Said {
    let text = String::from_utf8_lossy(bytes);
    let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    if last == shared::COMPILE_MARKER {
        return Said::Compiling;
    }
    serde_json::from_str::<Summary>(last).map_or(Said::Nothing, |s| Said::Summary(Box::new(s)))
}

/// The runner's account of how the guest ended, for the verdict.
pub(crate) fn guest_end(s: &Summary) -> GuestEnd {
    let message = || s.message.clone().unwrap_or_default();
    match s.outcome {
        Outcome::Exited => {
            GuestEnd::Exited { code: s.guest_exit_code.unwrap_or(0), memory_limit_hit: s.memory_limit_hit }
        }
        Outcome::FuelExhausted => GuestEnd::FuelExhausted,
        Outcome::Interrupted => GuestEnd::Interrupted,
        Outcome::Trap => GuestEnd::Trap(message()),
        Outcome::LoadError => GuestEnd::LoadError(message()),
    }
}

/// The runner's figures in the report.
pub(crate) fn figures(report: &mut Report, s: &Summary) {
    report.guest_exit_code = s.guest_exit_code;
    if report.max_rss_bytes == 0 {
        // A run over at its announced end: the runner was not reaped before the report.
        report.max_rss_bytes = s.max_rss_bytes;
    }
    report.fuel_consumed = s.fuel_consumed;
    report.wasm_memory_peak_bytes = Some(s.memory_peak_bytes);
    report.wasm_time = Some(WasmTime {
        load_ms: s.load_ms,
        compile_ms: s.compile_ms,
        instantiate_ms: s.instantiate_ms,
        run_ms: s.run_ms,
    });
    if let Some(given) = &s.given {
        report.give(given.as_bytes());
    }
}
