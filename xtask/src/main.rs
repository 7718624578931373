//! `cargo xtask <command>`: project chores that need more than cargo.
//!
//! - `bench [--rounds N] [--spaced-ms MS]`: builds a static `true` from C, a release (static)
//!   stockade and the bench harness, then runs every configuration interleaved in one process.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let status = cmd.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown}: {status}")) }
}

/// Builds the release CLI statically linked (no dynamic loader at start: ~0.3 ms less per run).
pub fn build_static_cli(root: &Path) -> Result<PathBuf, String> {
    run(Command::new("cargo").current_dir(root).args([
        "rustc",
        "--quiet",
        "--release",
        "--package",
        "stockade",
        "--bin",
        "stockade",
        "--",
        "-C",
        "target-feature=+crt-static",
    ]))?;
    Ok(root.join("target/release/stockade"))
}

fn bench(args: &[String]) -> Result<(), String> {
    let root = root();
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("true.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").map_err(|e| e.to_string())?;
    let truth = dir.join("true");
    run(Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&truth).arg(&src))
        .map_err(|e| format!("{e}\n(needs gcc and the static C library: apt-get install gcc libc6-dev)"))?;
    let stockade = build_static_cli(&root)?;
    run(Command::new("cargo").current_dir(&root).args(["build", "--quiet", "--release", "--example", "bench"]))?;
    println!("machine: {} cores, kernel {}", cores(), kernel());
    run(Command::new(root.join("target/release/examples/bench"))
        .arg("--true")
        .arg(&truth)
        .arg("--stockade")
        .arg(&stockade)
        .args(args))
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "?".into(), |s| s.trim().to_string())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench") => bench(&args[1..]),
        Some("build-static") => build_static_cli(&root()).map(|p| println!("{}", p.display())),
        _ => Err("usage: cargo xtask bench [--rounds N] [--spaced-ms MS] | build-static".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
