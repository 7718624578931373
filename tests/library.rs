//! The library API: prestarted jails, reuse of a plan, and clean-up of what is not run.

mod common;

use common::*;
use std::time::{Duration, Instant};
use stockade::{Job, Output, Plan, Policy, Status};

#[test]
fn a_prestarted_jail_runs_later_and_an_unused_one_leaves_nothing() {
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
