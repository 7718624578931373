//! The library API: prestarted jails, reuse of a plan, and clean-up of what is not run.

mod common;

use common::*;
use std::time::{Duration, Instant};
use stockade::{Job, Output, Plan, Policy, Status};

/// Tests that look for this process's cgroups left behind run one at a time (another test's
/// live run would look like a leftover).
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_prestarted_jail_runs_later_and_an_unused_one_leaves_nothing() {
    let _alone = alone();
    let Some(helper) = attack_helper() else { return };
    let mut policy = Policy::builtin();
    policy.add_read_only(&helper.parent().expect("dir").display().to_string(), "test").expect("grant");
    let tag = marker_sleep();
    let h = helper.display().to_string();
    let plan = Plan::prepare(&policy, &Job::new(h.clone()).args(["sleep", "0"])).expect("plan");
    let prepared = plan.prestart().expect("prestart");
    std::thread::sleep(Duration::from_millis(300));
    let r = prepared.run(Output::Capture).expect("run");
    assert_eq!(r.status, Status::Ok, "{r:?}");
    // The wall clock starts at the run, not at the prestart 300 ms earlier.
    assert!(r.wall_ms < 250.0, "wall {} ms", r.wall_ms);

    // A prestarted jail that is dropped: its parked child is killed and reaped, its cgroup removed.
    let sleeper = Plan::prepare(&policy, &Job::new(h.clone()).args(["sleep", &tag])).expect("plan");
    let parked = sleeper.prestart().expect("prestart");
    let init = parked.pid();
    assert!(
        wait_for(Duration::from_secs(2), || std::fs::read_to_string(format!("/proc/{init}/comm"))
            .is_ok_and(|c| c.trim() == "stockade-init")),
        "the parked jail's init is not there"
    );
    let before = Instant::now();
    drop(parked);
    assert!(before.elapsed() < Duration::from_secs(2));
    assert!(!std::path::Path::new(&format!("/proc/{init}")).exists(), "the parked jail outlived its drop");
    assert!(none_left(&format!("{h} sleep {tag}")), "the program ran although never released");
    let me = std::process::id();
    let host = stockade::layers::cgroup::host::Host::current();
    let prefix = format!("stockade-{me}-");
    for h in host.v2.iter().chain(host.v1.values()) {
        let Some(dir) = h.dir(&h.own) else { continue };
        let left: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .collect();
        assert!(left.is_empty(), "cgroups left in {}: {left:?}", dir.display());
    }
}

#[test]
fn one_plan_runs_many_times_from_several_threads() {
    let _alone = alone();
    let policy = Policy::builtin();
    let plan = Plan::prepare(&policy, &Job::new("/bin/sh").args(["-c", "echo $$"])).expect("plan");
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..5)
                        .map(|_| plan.run(Output::Capture).expect("run"))
                        .map(|r| (r.status, r.stdout.text.unwrap_or_default()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (status, out) in h.join().expect("thread") {
                // The program is PID 2 of its own namespace every time.
                assert_eq!((status, out.as_str()), (Status::Ok, "2\n"));
            }
        }
    });
}

/// No cgroup of this process is left in any hierarchy.
fn no_cgroups_left() -> Result<(), String> {
    let prefix = format!("stockade-{}-", std::process::id());
    let host = stockade::layers::cgroup::host::Host::current();
    for h in host.v2.iter().chain(host.v1.values()) {
        let Some(dir) = h.dir(&h.own) else { continue };
        let left: Vec<_> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        if !left.is_empty() {
            return Err(format!("cgroups left in {}: {left:?}", dir.display()));
        }
    }
    Ok(())
}

/// The built-in policy with an empty writable `/app` as the working directory (a service's jail).
fn app_policy() -> Policy {
    let mut policy = Policy::builtin();
    policy.add_empty_dir("/app", "test").expect("dir");
    policy.set_cwd("/app", "test").expect("cwd");
    policy
}

/// A jail that serves turns ([`stockade::TurnEnd::Read`]): each turn is a line on the program's
/// stdin; a turn ends when the program is back in its read with the line read (the kernel's word,
/// through the seccomp listener), not by anything it writes; between turns the jail is frozen
/// (its cgroup's CPU time stands still though a process of it spins); a turn past its wall limit
/// ends the jail, on time; each turn's report is its own (its output, its status).
#[test]
fn a_jail_serves_turns_and_nothing_of_it_runs_between_them() {
    let _alone = alone();
    use stockade::{LiveRun, Start, Turn, TurnEnd, TurnTold, Turned};
    if !is_root() {
        eprintln!("skip: a jail of turns is frozen with its cgroup2 leaf (needs root or a delegated cgroup)");
        return;
    }
    // Shell builtins only: the default policy denies exec after the first. A spinner in the
    // background runs whenever the jail is not frozen.
    let script = "( while :; do :; done ) & i=0; while read line; do \
                  [ \"$line\" = spin ] && while :; do :; done; echo \"got $line\"; echo $i >&3; i=$((i+1)); done";
    let mut job = Job::new("/bin/sh").args(["-c", script]).stdin_bytes(Vec::new());
    job.extra_outputs = vec![4096];
    job.turns = Some(TurnEnd::Read);
    let plan = match Plan::prepare(&app_policy(), &job) {
        Ok(p) => p,
        Err(e) if e.to_string().contains("cgroup.freeze") => return eprintln!("skip: {e}"),
        Err(e) => panic!("plan: {e}"),
    };
    let live = std::sync::Arc::new(LiveRun::default());
    let start = Start { live: Some(live.clone()), from_release: true, ..Start::default() };
    let read = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(bytes);
        Some(TurnTold {
            status: text.lines().last().and_then(|l| l.trim().parse().ok()).unwrap_or(99),
            guest: None,
            given: None,
        })
    };
    let cpu = || live.figures().and_then(|f| Some(f.cpu_user_us? + f.cpu_sys_us?)).expect("the jail's CPU time");
    let mut reports = Vec::new();
    let mut still = Vec::new();
    let lines = ["a", "b", "spin"];
    let mut next = |turned: Turned| {
        if let Turned::Returned { report, .. } = turned {
            reports.push(report);
        }
        // Frozen: its CPU time stands still while it waits for its next turn.
        let before = cpu();
        std::thread::sleep(Duration::from_millis(300));
        still.push(cpu().saturating_sub(before));
        let line = lines.get(reports.len())?;
        let limits = stockade::policy::Limits { wall_timeout_ms: Some(500), ..Default::default() };
        Some(Turn { stdin: format!("{line}\n").into_bytes(), limits, ..Turn::default() })
    };
    let t0 = Instant::now();
    let ended = plan.prestart().expect("prestart").run_turns(start, &read, &mut next, |_| None).expect("turns");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let stockade::Gated::Ran(f) = ended else { panic!("it did not start") };
    let outs: Vec<(Option<&str>, Status, Option<i32>)> =
        reports.iter().map(|r| (r.stdout.text.as_deref(), r.status, r.exit_code)).collect();
    assert_eq!(
        outs,
        [(Some("got a\n"), Status::Ok, Some(0)), (Some("got b\n"), Status::ExitedNonzero, Some(1))],
        "{reports:?}"
    );
    // Each turn ran its spinner too: its own CPU time, not the jail's so far.
    assert!(reports.iter().all(|r| r.cpu_user_ms + r.cpu_sys_ms > 0.0), "{reports:?}");
    assert!(still.iter().all(|&us| us < 20_000), "CPU time went on between turns: {still:?} us");
    // The spinning turn: past its wall limit, the jail ends, on time.
    assert_eq!(f.report.status, Status::Timeout, "{:?}", f.report);
    assert!(f.report.wall_ms < 1500.0, "{}", f.report.wall_ms);
    drop(f);
    no_cgroups_left().expect("clean");
}

/// A jail released ahead of its run: the program starts and blocks on stdin; the gate's start
/// brings the stdin, files in, tighter caps and the clock; files come back out.
#[test]
fn a_gated_jail_starts_its_run_at_the_hand_over() {
    let _alone = alone();
    use stockade::layers::filesystem::exchange::{Pick, PutFile, patterns};
    use stockade::{Exchange, Gate, Gated, Start};
    let mut policy = app_policy();
    // Past the tighter cap the run goes on (what it writes after is checked below).
    policy.over_cap = stockade::policy::OverCap::Truncate;
    // Shell builtins only: the default policy denies exec after the first.
    let script = "read line; echo \"got $line\"; read x < in.txt; read y < sub/deep.txt; \
                  echo \"$x $y\" > out.txt; echo png > pic.png; echo long long long long; echo err >&2";
    let job = Job::new("/bin/sh").args(["-c", script]).stdin_bytes(Vec::new());
    let plan = Plan::prepare(&policy, &job).expect("plan");
    let gate = Gate::new().expect("gate");
    std::thread::scope(|s| {
        // The wait is counted from the release, which follows the jail's build: the sleep starts
        // once the jail is built (a loaded host builds it slower).
        let (built_tx, built) = std::sync::mpsc::channel();
        let (plan, g) = (&plan, &gate);
        let run = s.spawn(move || {
            let prepared = plan.prestart().expect("prestart");
            let _ = built_tx.send(());
            prepared.run_gated(g, |_| None).expect("run")
        });
        built.recv().expect("built");
        std::thread::sleep(Duration::from_millis(300));
        gate.open(Start {
            stdin: b"hello\n".to_vec(),
            files: Some(Exchange {
                dir: "/app".into(),
                put: vec![
                    PutFile { path: "in.txt".into(), bytes: b"one\n".to_vec() },
                    PutFile { path: "sub/deep.txt".into(), bytes: b"two\n".to_vec() },
                ],
                take: Some(Pick {
                    patterns: patterns(&["*.txt".into(), "*.png".into()]).expect("patterns"),
                    sources: vec!["*.txt".into(), "*.png".into()],
                    max_files: 10,
                    max_bytes: 1000,
                }),
            }),
            limits: stockade::policy::Limits { stdout_max_bytes: Some(10), ..Default::default() },
            argv_display: Some(vec!["shown".into()]),
            ..Start::default()
        });
        let Gated::Ran(f) = run.join().expect("thread") else { panic!("the run did not start") };
        let r = &f.report;
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.stdout.text.as_deref(), Some("got hello\n"), "{r:?}");
        assert!(r.stdout.truncated && r.stdout.bytes > 10, "the tighter cap holds: {:?}", r.stdout);
        assert_eq!(r.stderr.text.as_deref(), Some("err\n"));
        assert!(r.wall_ms < 250.0, "the clock starts at the hand-over: {} ms", r.wall_ms);
        let warm = r.warm_start.expect("warm-start reported");
        assert!(warm.waited_ms >= 290.0, "{warm:?}");
        assert_eq!(r.argv, ["shown"]);
        let files = f.files.as_ref().expect("files taken");
        let names: Vec<&str> = files.files.iter().map(|(p, _)| p.as_str()).collect();
        // `*` stays in one directory: sub/deep.txt is not taken.
        assert_eq!(names, ["in.txt", "out.txt", "pic.png"], "{files:?}");
        assert_eq!(files.files[1].1, b"one two\n");
        assert!(!files.capped);
    });
    no_cgroups_left().expect("clean");
}

#[test]
fn a_gated_jail_refuses_bad_files_caps_what_it_gives_back_and_can_be_cancelled() {
    let _alone = alone();
    use stockade::layers::filesystem::exchange::{Pick, PutFile, patterns};
    use stockade::{Exchange, Gate, Gated, Start};
    let policy = app_policy();
    let job = Job::new("/bin/sh")
        .args(["-c", "read x; for i in 1 2 3 4 5; do echo $i$i$i > f$i.txt; done"])
        .stdin_bytes(Vec::new());
    let plan = Plan::prepare(&policy, &job).expect("plan");

    // Taking back: three files of four bytes, six bytes of room: one file, and capped.
    let gate = Gate::new().expect("gate");
    let pick = Pick {
        patterns: patterns(&["f*.txt".into()]).expect("p"),
        sources: vec!["f*.txt".into()],
        max_files: 3,
        max_bytes: 6,
    };
    let take = Some(Exchange { dir: "/app".into(), put: Vec::new(), take: Some(pick) });
    std::thread::scope(|s| {
        let run = s.spawn(|| plan.prestart().expect("prestart").run_gated(&gate, |_| None).expect("run"));
        gate.open(Start { stdin: b"\n".to_vec(), files: take, ..Start::default() });
        let Gated::Ran(f) = run.join().expect("thread") else { panic!("did not start") };
        let t = f.files.expect("taken");
        assert_eq!(t.files.len(), 1, "{t:?}");
        assert!(t.capped);
    });

    // A path that climbs out: refused, and the waiting jail is taken down.
    let gate = Gate::new().expect("gate");
    let bad = Some(Exchange {
        dir: "/app".into(),
        put: vec![PutFile { path: "../etc/x".into(), bytes: b"x".to_vec() }],
        take: None,
    });
    std::thread::scope(|s| {
        let run = s.spawn(|| plan.prestart().expect("prestart").run_gated(&gate, |_| None));
        gate.open(Start { files: bad, ..Start::default() });
        let e = run.join().expect("thread").expect_err("refused");
        assert!(e.to_string().contains("contains '..'"), "{e}");
    });

    // Cancelled while waiting: nothing ran, nothing is left.
    let gate = Gate::new().expect("gate");
    std::thread::scope(|s| {
        let run = s.spawn(|| plan.prestart().expect("prestart").run_gated(&gate, |_| None).expect("ran"));
        std::thread::sleep(Duration::from_millis(100));
        gate.cancel();
        match run.join().expect("thread") {
            Gated::NotStarted(why) => assert_eq!(why, "cancelled"),
            Gated::Ran(f) => panic!("ran: {:?}", f.report),
        }
    });

    // A program that dies while it waits: not a run, and it says why.
    let dies =
        Plan::prepare(&policy, &Job::new("/bin/sh").args(["-c", "exit 3"]).stdin_bytes(Vec::new())).expect("plan");
    let gate = Gate::new().expect("gate");
    match dies.prestart().expect("prestart").run_gated(&gate, |_| None).expect("ended") {
        Gated::NotStarted(why) => assert_eq!(why, "the program exited with 3 before its run started"),
        Gated::Ran(f) => panic!("ran: {:?}", f.report),
    }
    no_cgroups_left().expect("clean");
}

/// A run is over when its init has killed and reaped everything else of it and said so: the
/// report does not wait for the kernel to take the jail's namespaces down (init is reaped with
/// the clean-up, after the answer). Nothing of the run is running when it is reported, and what
/// it used is init's account of its reaped processes (here without cgroups, so the CPU and the
/// resident set come from nowhere else).
#[test]
fn a_run_is_reported_once_its_init_emptied_the_jail() {
    let _alone = alone();
    use stockade::{Gate, Gated, Start};
    let text = "version = 1\n[cgroups]\nenabled = false\nmemory-max-bytes = \"unlimited\"\n\
                pids-max = \"unlimited\"\ncpu-max-percent = \"unlimited\"\n";
    let policy = Policy::from_toml(text, "no-cgroups").expect("policy");
    // Shell builtins only (exec after the first is refused): a forked subshell spins in the
    // background; the foreground burns CPU, then exits.
    let marker = format!("marker{}", std::process::id());
    let script =
        format!("read x; ( while :; do :; done ) & i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo {marker}");
    let job = Job::new("/bin/sh").args(["-c", &script]).stdin_bytes(Vec::new());
    let plan = Plan::prepare(&policy, &job).expect("plan");
    let gate = Gate::new().expect("gate");
    let (init, mut f) = std::thread::scope(|s| {
        let (pid_tx, pid) = std::sync::mpsc::channel();
        let (plan, gate) = (&plan, &gate);
        let run = s.spawn(move || {
            let prepared = plan.prestart().expect("prestart");
            let _ = pid_tx.send(prepared.pid());
            prepared.run_gated(gate, |_| None).expect("run")
        });
        let init = pid.recv().expect("init's pid");
        gate.open(Start { stdin: b"\n".to_vec(), ..Start::default() });
        let Gated::Ran(f) = run.join().expect("thread") else { panic!("the run did not start") };
        (init, f)
    });
    let proc_init = std::path::PathBuf::from(format!("/proc/{init}"));
    assert!(proc_init.exists(), "init was reaped before the report: the report waited for the jail's teardown");
    let r = &f.report;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.stdout.text.as_deref(), Some(format!("{marker}\n").as_str()));
    assert!(processes_with(&marker).is_empty(), "a process of the run was running when it was reported");
    assert!(r.cpu_user_ms + r.cpu_sys_ms > 5.0, "the run's CPU, from init's account: {r:?}");
    assert!(r.max_rss_bytes > 100 * 1024, "the largest resident set, from init's account: {r:?}");
    let cleanup = f.cleanup.take().expect("init, reaped with the clean-up");
    assert_eq!(cleanup.done(), None);
    assert!(!proc_init.exists(), "init is reaped with the clean-up");
    no_cgroups_left().expect("clean");
}
