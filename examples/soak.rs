//! The soak behind `cargo xtask soak`: many runs of every kind from a long-lived supervisor (this
//! process, through the library) and from CLI supervisors it starts, some of which it kills with
//! SIGKILL mid-run; then it counts what was left behind and how its own memory and fds moved.
//!
//! Usage: soak --job PATH --stockade PATH [--runs N] [--workers W] [--seed S] [--guest-dir DIR]
//!        [--plant]
//!
//! `--plant` checks the counters themselves: before the final count it leaves one of each kind
//! of leak behind (a process running the job outside any jail, a `stockade-*` cgroup, a temp
//! dir, an fd), and the soak passes only if every one of them is reported (then removes them).
//!
//! Leaks are looked for from the outside, host-wide: processes running the job, the stockade
//! binary or this harness (a jail's init is a fork of its supervisor) other than this process;
//! `stockade-*` directories in this process's cgroups (every hierarchy); mounts in the host's
//! mount namespace; `stockade-*` entries in the temp directory; this process's open fds. Exits 1 on
//! any leak, and on any run whose report is not what its kind must give.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use stockade::layers::cgroup::host::Host;
use stockade::wasm::{self, GuestCode, WasmJob};
use stockade::{Job, Output, Plan, Policy, Report, Status};

/// The run kinds and their weights (out of the sum): most runs are ordinary, every fault is
/// frequent enough to happen hundreds of times in 10,000 runs.
const KINDS: &[(Kind, u32)] = &[
    (Kind::Ok, 30),
    (Kind::Exit, 6),
    (Kind::Crash, 6),
    (Kind::Abort, 3),
    (Kind::Timeout, 5),
    (Kind::Oom, 6),
    (Kind::ForkBomb, 5),
    (Kind::Flood, 6),
    (Kind::Daemon, 6),
    (Kind::PrestartDropped, 5),
    (Kind::CliOk, 6),
    (Kind::CliKilled, 8),
    (Kind::WasmJs, 4),
    (Kind::CliWasmKilled, 4),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Ok,
    Exit,
    Crash,
    Abort,
    Timeout,
    Oom,
    ForkBomb,
    Flood,
    Daemon,
    PrestartDropped,
    CliOk,
    CliKilled,
    WasmJs,
    CliWasmKilled,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Ok => "normal (prints, exits 0)",
            Kind::Exit => "exits 3",
            Kind::Crash => "SIGSEGV",
            Kind::Abort => "abort (SIGABRT)",
            Kind::Timeout => "spinner ignoring SIGTERM: timeout",
            Kind::Oom => "memory bomb: OOM",
            Kind::ForkBomb => "fork bomb: pids limit, timeout",
            Kind::Flood => "8 MiB output flood (64 KiB cap): output-limit",
            Kind::Daemon => "double-fork daemon, parent exits",
            Kind::PrestartDropped => "prestarted, then dropped unrun",
            Kind::CliOk => "CLI supervisor, normal",
            Kind::CliKilled => "CLI supervisor SIGKILLed mid-run",
            Kind::WasmJs => "Wasm JS (fresh workspace)",
            Kind::CliWasmKilled => "CLI Wasm supervisor SIGKILLed mid-run",
        }
    }
    fn wasm(self) -> bool {
        matches!(self, Kind::WasmJs | Kind::CliWasmKilled)
    }
}

struct Ctx {
    job: String,
    job_dir: String,
    stockade: String,
    policy: Policy,
    /// The same with a 2 s wall timeout: the memory bomb must end by the OOM killer, not the
    /// clock, even on a loaded machine.
    oom_policy: Policy,
    policy_file: PathBuf,
    guest_dir: Option<PathBuf>,
    seed: u64,
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

/// splitmix64: a different, reproducible stream per run.
fn random(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn pick(r: u64, wasm: bool) -> Kind {
    let kinds: Vec<(Kind, u32)> = KINDS.iter().copied().filter(|(k, _)| wasm || !k.wasm()).collect();
    let total: u32 = kinds.iter().map(|(_, w)| w).sum();
    let mut x = u32::try_from(r % u64::from(total)).unwrap_or(0);
    for (k, w) in kinds {
        if x < w {
            return k;
        }
        x -= w;
    }
    Kind::Ok
}

/// Runs one job of `kind`; `Err` says how its outcome differed from what the kind must give.
fn run_one(ctx: &Ctx, kind: Kind, r: u64) -> Result<(), String> {
    let lib = |mode: &str| -> Result<Report, String> {
        let policy = if mode == "oom" { &ctx.oom_policy } else { &ctx.policy };
        let plan = Plan::prepare(policy, &Job::new(ctx.job.clone()).arg(mode)).map_err(|e| e.to_string())?;
        plan.run(Output::Capture).map_err(|e| e.to_string())
    };
    let expect = |r: &Report, ok: bool| if ok { Ok(()) } else { Err(format!("{:?} {:?}", r.status, r.exit_code)) };
    match kind {
        Kind::Ok => {
            let r = lib("ok")?;
            expect(&r, r.status == Status::Ok && r.stdout.text.as_deref() == Some("ok\n"))
        }
        Kind::Exit => {
            let r = lib("exit")?;
            expect(&r, r.status == Status::ExitedNonzero && r.exit_code == Some(3))
        }
        Kind::Crash => {
            let r = lib("crash")?;
            expect(&r, r.status == Status::Signaled && r.signal == Some(libc::SIGSEGV))
        }
        Kind::Abort => {
            let r = lib("abort")?;
            expect(&r, r.status == Status::Signaled && r.signal == Some(libc::SIGABRT))
        }
        Kind::Timeout => {
            let r = lib("spin")?;
            expect(&r, r.status == Status::Timeout)
        }
        Kind::Oom => {
            let r = lib("oom")?;
            expect(&r, r.status == Status::Oom && r.oom_kills > 0)
        }
        Kind::ForkBomb => {
            let r = lib("forkbomb")?;
            // The pids limit refuses a fork after its task (and what is made with it) is
            // allocated, and the kernel frees that after an RCU grace period (`delayed_free_task`
            // in kernel/fork.c), charged to the run's cgroup until then. 32 processes forking in a loop keep tens of MiB of it
            // pending: peaks of 55-65 MB of the soak's 64 MiB, with 0.7 MB of user memory, were
            // measured on this machine kind. So the memory limit, not the clock, may end the
            // run: the kernel's OOM kill is what happened, and the report says so.
            let ended =
                matches!(r.status, Status::Timeout | Status::PidsLimit) || (r.status == Status::Oom && r.oom_kills > 0);
            let held = r.pids_limit_hit && r.pids_peak.is_none_or(|p| p <= 32);
            expect(&r, ended && held)
                .map_err(|e| format!("{e}, pids peak {:?}, memory peak {:?}", r.pids_peak, r.memory_peak_bytes))
        }
        Kind::Flood => {
            // Past its cap the run ends at once (output.over-cap = "end").
            let r = lib("flood")?;
            expect(&r, r.status == Status::OutputLimit && r.stdout.truncated && r.stdout.bytes > 64 << 10)
        }
        Kind::Daemon => {
            let r = lib("daemon")?;
            expect(&r, r.status == Status::Ok)
        }
        Kind::PrestartDropped => {
            let plan = Plan::prepare(&ctx.policy, &Job::new(ctx.job.clone()).arg("ok")).map_err(|e| e.to_string())?;
            let prepared = plan.prestart().map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_micros(r % 3000));
            drop(prepared);
            Ok(())
        }
        Kind::CliOk => {
            let out = cli(ctx).arg("--").arg(&ctx.job).arg("ok").output().map_err(|e| e.to_string())?;
            if out.status.success() && out.stdout == b"ok\n" {
                Ok(())
            } else {
                Err(format!("CLI: {} {:?}", out.status, String::from_utf8_lossy(&out.stderr)))
            }
        }
        Kind::CliKilled => {
            let child = cli(ctx).arg("--").arg(&ctx.job).arg("sleep").spawn().map_err(|e| e.to_string())?;
            // From before the jail exists to well inside the program's run.
            kill_after(child, Duration::from_micros(r % 40_000))
        }
        Kind::WasmJs => {
            let mut job = WasmJob::new(GuestCode::Js("console.log(1)".into()), &ctx.stockade);
            job.guest_dir.clone_from(&ctx.guest_dir);
            let plan = wasm::prepare(&ctx.policy, &job).map_err(|e| e.to_string())?;
            let r = plan.run(Output::Capture).map_err(|e| e.to_string())?;
            expect(&r, r.status == Status::Ok && r.stdout.text.as_deref() == Some("1\n"))
        }
        Kind::CliWasmKilled => {
            let g = ctx.guest_dir.as_ref().map(|d| d.display().to_string()).unwrap_or_default();
            let child = Command::new(&ctx.stockade)
                .args(["run", "--policy"])
                .arg(&ctx.policy_file)
                .args(["--guest-dir", &g, "--js", "for(;;){}"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            kill_after(child, Duration::from_micros(r % 60_000))
        }
    }
}

fn cli(ctx: &Ctx) -> Command {
    let mut c = Command::new(&ctx.stockade);
    c.args(["run", "--policy"]).arg(&ctx.policy_file).args(["--ro", &ctx.job_dir]);
    c.stdin(Stdio::null()).stderr(Stdio::piped()).stdout(Stdio::piped());
    c
}

fn kill_after(mut child: std::process::Child, after: Duration) -> Result<(), String> {
    std::thread::sleep(after);
    let _ = child.kill(); // SIGKILL
    let status = child.wait().map_err(|e| e.to_string())?;
    // Killed, or (when the kill came too late) ended by the policy's timeout: 124.
    if status.signal() == Some(libc::SIGKILL) || status.code() == Some(124) {
        Ok(())
    } else {
        Err(format!("CLI ended {status}"))
    }
}

/// What could be left behind, counted host-wide from the outside.
#[derive(Default, Debug, Clone, PartialEq)]
struct Traces {
    processes: BTreeSet<String>,
    cgroups: BTreeSet<String>,
    mounts: usize,
    temp: BTreeSet<String>,
    fds: usize,
}

fn traces(exes: &[&Path]) -> Traces {
    let me = std::process::id().to_string();
    let mut t = Traces::default();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = e.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(exe) = std::fs::read_link(e.path().join("exe")) else { continue };
        if exes.iter().any(|x| *x == exe) {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            t.processes.insert(format!("{pid}: {}", String::from_utf8_lossy(&cmd).replace('\0', " ").trim()));
        }
    }
    for dir in own_cgroups() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with("stockade-") {
                t.cgroups.insert(e.path().display().to_string());
            }
        }
    }
    t.mounts = std::fs::read_to_string("/proc/self/mountinfo").map_or(0, |m| m.lines().count());
    for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("stockade-") {
            t.temp.insert(name);
        }
    }
    t.fds = std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    t
}

/// This process's cgroup directory in every mounted hierarchy (v1 controllers and v2), as the
/// cgroup layer itself finds them.
fn own_cgroups() -> BTreeSet<PathBuf> {
    let host = Host::current();
    host.v2.iter().chain(host.v1.values()).filter_map(|h| h.dir(&h.own)).filter(|d| d.is_dir()).collect()
}

/// One leak of each kind, left on purpose to show the counters see them.
struct Planted {
    process: std::process::Child,
    cgroup: Option<PathBuf>,
    temp: PathBuf,
    fd: std::fs::File,
}

impl Planted {
    fn new(ctx: &Ctx, now: &Traces) -> Planted {
        let process = Command::new(&ctx.job).arg("sleep").spawn().expect("plant a process");
        let cgroup = own_cgroups().into_iter().next().map(|d| d.join("stockade-planted-by-soak"));
        if let Some(c) = &cgroup {
            std::fs::create_dir(c).expect("plant a cgroup");
        }
        let temp = std::env::temp_dir().join("stockade-planted-by-soak");
        std::fs::create_dir(&temp).expect("plant a temp dir");
        let fd = std::fs::File::open("/dev/null").expect("plant an fd");
        assert!(now.processes.is_empty(), "the soak left processes before planting");
        Planted { process, cgroup, temp, fd }
    }

    /// Whether every planted leak shows in `after`; removes them and takes them out of `after`.
    fn check(mut self, after: &mut Traces, warm: &Traces) -> String {
        let pid = format!("{}: ", self.process.id());
        let mut missed = Vec::new();
        if !after.processes.iter().any(|p| p.starts_with(&pid)) {
            missed.push("process");
        }
        let cg = self.cgroup.as_ref().map(|c| c.display().to_string());
        if cg.as_ref().is_some_and(|c| !after.cgroups.contains(c)) {
            missed.push("cgroup");
        }
        if !after.temp.contains("stockade-planted-by-soak") {
            missed.push("temp dir");
        }
        if after.fds != warm.fds + 1 {
            missed.push("fd");
        }
        let _ = self.process.kill();
        let _ = self.process.wait();
        after.processes.retain(|p| !p.starts_with(&pid));
        if let Some(c) = cg {
            let _ = std::fs::remove_dir(&c);
            after.cgroups.remove(&c);
        }
        let _ = std::fs::remove_dir(&self.temp);
        after.temp.remove("stockade-planted-by-soak");
        drop(self.fd);
        after.fds -= 1;
        if missed.is_empty() {
            "plant: the counters saw the planted process, cgroup, temp dir and fd".into()
        } else {
            println!("plant: the counters MISSED: {}", missed.join(", "));
            std::process::exit(1);
        }
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let job = arg(&args, "--job").expect("--job PATH");
    let stockade = arg(&args, "--stockade").expect("--stockade PATH");
    let runs: usize = arg(&args, "--runs").map_or(10_000, |r| r.parse().expect("--runs N"));
    let workers: usize = arg(&args, "--workers").map_or(2, |w| w.parse().expect("--workers W"));
    let seed: u64 = arg(&args, "--seed").map_or(1, |s| s.parse().expect("--seed S"));
    let guest_dir = arg(&args, "--guest-dir").map(PathBuf::from);
    let plant = args.iter().any(|a| a == "--plant");
    let job_dir = Path::new(&job).parent().expect("job dir").display().to_string();

    // The default policy with limits a soak reaches quickly.
    let text = "version = 1\n[limits]\nwall-timeout-ms = 200\n[output]\nstdout-max-bytes = 65536\nstderr-max-bytes = 65536\n[cgroups]\nmemory-max-bytes = 67108864\npids-max = 32\n";
    let policy_file = Path::new(&job_dir).join("soak.toml");
    std::fs::write(&policy_file, text).expect("write the soak policy");
    let mut policy = Policy::from_toml(text, &policy_file.display().to_string()).expect("soak policy");
    policy.add_read_only(&job_dir, "soak").expect("grant");
    let mut oom_policy = policy.clone();
    oom_policy.set_wall_timeout(Duration::from_secs(2), "soak").expect("timeout");
    let ctx =
        Ctx { job: job.clone(), job_dir, stockade: stockade.clone(), policy, oom_policy, policy_file, guest_dir, seed };
    let me = std::env::current_exe().expect("own path");
    let canonical = |p: &Path| std::fs::canonicalize(p).expect("canonical path");
    let exes = [canonical(Path::new(&job)), canonical(Path::new(&stockade)), canonical(&me)];
    let exes: Vec<&Path> = exes.iter().map(PathBuf::as_path).collect();

    let before = traces(&exes);
    // One run of each kind first: lazily made state (thread pools, caches) is not a leak.
    let wasm = ctx.guest_dir.is_some();
    for (i, (k, _)) in KINDS.iter().enumerate().filter(|(_, (k, _))| wasm || !k.wasm()) {
        if let Err(e) = run_one(&ctx, *k, random(seed, i as u64)) {
            eprintln!("warm-up {}: {e}", k.label());
        }
    }
    let warm = traces(&exes);
    let rss_warm = rss_kib();

    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let counts: Mutex<BTreeMap<Kind, (usize, usize)>> = Mutex::new(BTreeMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let rss: Mutex<Vec<(usize, u64)>> = Mutex::new(vec![(0, rss_warm)]);
    let every = (runs / 40).max(1);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= runs {
                        break;
                    }
                    let r = random(ctx.seed, (i + KINDS.len()) as u64);
                    let kind = pick(r, wasm);
                    let result = run_one(&ctx, kind, r >> 8);
                    let mut c = counts.lock().expect("counts");
                    let e = c.entry(kind).or_default();
                    e.0 += 1;
                    if let Err(why) = result {
                        e.1 += 1;
                        failures.lock().expect("failures").push(format!("run {i} ({}): {why}", kind.label()));
                    }
                    drop(c);
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_multiple_of(every) {
                        rss.lock().expect("rss").push((n, rss_kib()));
                    }
                }
            });
        }
    });
    let elapsed = started.elapsed();

    // Processes of killed supervisors die by PDEATHSIG and namespace teardown, asynchronously.
    let settle = Instant::now();
    let mut end = traces(&exes);
    while !end.processes.is_empty() && settle.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
        end = traces(&exes);
    }
    // What killed supervisors left is reaped by the next supervisor that prepares in the same
    // place: one more run of each reaping kind, then count again.
    let left_by_killed = (end.cgroups.difference(&warm.cgroups).count(), end.temp.difference(&warm.temp).count());
    let _ = run_one(&ctx, Kind::Ok, 0);
    if wasm {
        let _ = run_one(&ctx, Kind::WasmJs, 0);
    }
    let planted = plant.then(|| Planted::new(&ctx, &end));
    let mut after = traces(&exes);
    if let Some(p) = planted {
        println!("{}", p.check(&mut after, &warm));
    }

    let rss = rss.into_inner().expect("rss");
    let counts = counts.into_inner().expect("counts");
    let failures = failures.into_inner().expect("failures");
    println!(
        "soak: {runs} runs, {workers} workers, seed {seed}, {:.1} s, {:.0} runs/s",
        elapsed.as_secs_f64(),
        runs as f64 / elapsed.as_secs_f64()
    );
    println!("\n| kind | runs | report not as expected |\n|---|---:|---:|");
    for (k, (n, bad)) in &counts {
        println!("| {} | {n} | {bad} |", k.label());
    }
    let new = |a: &BTreeSet<String>, b: &BTreeSet<String>| -> Vec<String> { a.difference(b).cloned().collect() };
    let leaked_procs = new(&after.processes, &before.processes);
    let leaked_cgroups = new(&after.cgroups, &before.cgroups);
    let leaked_temp = new(&after.temp, &before.temp);
    let mounts = after.mounts as i64 - before.mounts as i64;
    let fds = after.fds as i64 - warm.fds as i64;
    let first = rss.iter().skip(1).take(4).map(|s| s.1).min().unwrap_or(rss_warm);
    let last = rss.iter().rev().take(4).map(|s| s.1).max().unwrap_or(rss_warm);
    let peak = rss.iter().map(|s| s.1).max().unwrap_or(0);
    println!("\n| left behind | count |\n|---|---:|");
    println!("| processes (job, stockade, jail inits) | {} |", leaked_procs.len());
    println!("| cgroup leaves, after the next prepare reaped | {} |", leaked_cgroups.len());
    println!("| cgroup leaves of killed supervisors, before that | {} |", left_by_killed.0);
    println!("| temp dirs, after the next Wasm prepare reaped | {} |", leaked_temp.len());
    println!("| temp dirs of killed supervisors, before that | {} |", left_by_killed.1);
    println!("| host mounts (difference) | {mounts} |");
    println!("| supervisor fds (difference after warm-up) | {fds} |");
    println!(
        "\nsupervisor RSS: {rss_warm} KiB after warm-up, {first} KiB early in the soak, {last} KiB at the end ({:+} KiB), peak {peak} KiB",
        last as i64 - first as i64
    );
    println!("samples (runs done: KiB): {}", rss.iter().map(|(n, k)| format!("{n}:{k}")).collect::<Vec<_>>().join(" "));
    let mut bad = Vec::new();
    for (what, list) in [("process", &leaked_procs), ("cgroup", &leaked_cgroups), ("temp dir", &leaked_temp)] {
        for l in list {
            bad.push(format!("leaked {what}: {l}"));
        }
    }
    if mounts != 0 {
        bad.push(format!("host mounts changed by {mounts}"));
    }
    if fds != 0 {
        bad.push(format!("supervisor fds changed by {fds}"));
    }
    // Flat: the allocator settles within the first runs; growth past 1 MiB after that is a leak.
    if last > first + 1024 {
        bad.push(format!("supervisor RSS grew {} KiB during the soak", last - first));
    }
    bad.extend(failures.iter().take(20).cloned());
    if failures.len() > 20 {
        bad.push(format!("... {} more runs not as expected", failures.len() - 20));
    }
    if bad.is_empty() {
        println!("\nsoak: no leaks, every report as expected");
    } else {
        println!("\nsoak FAILED:\n{}", bad.join("\n"));
        std::process::exit(1);
    }
}
