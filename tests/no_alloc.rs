//! The child between clone3 and execveat never allocates: this test binary's global allocator
//! kills the process with a distinct exit code if it is called there. Other threads allocate
//! busily meanwhile, as in a real multithreaded caller.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use stockade::{Job, Output, Plan, Policy, Status};

/// Exit code the child uses if it ever allocates.
const ALLOCATED_IN_CHILD: i32 = 99;

struct Guard;

// SAFETY: forwards to the system allocator; the only addition is an exit when called in the
// forked jail child, which never returns to the caller.
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if stockade::in_forked_child() {
            // SAFETY: _exit is async-signal-safe and ends the process at once.
            unsafe { libc::_exit(ALLOCATED_IN_CHILD) };
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if stockade::in_forked_child() {
            // SAFETY: as above.
            unsafe { libc::_exit(ALLOCATED_IN_CHILD) };
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GUARD: Guard = Guard;

fn busy_threads() -> (Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let handles = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<u64> = (0..1000).collect();
                    std::hint::black_box(v);
                }
            })
        })
        .collect();
    (stop, handles)
}

#[test]
fn the_child_never_allocates_on_success_or_failure_paths() {
    let (stop, handles) = busy_threads();
    let work = tempfile::tempdir().expect("tempdir");
    let mut policy = Policy::builtin();
    policy.add_read_write(&work.path().display().to_string(), "test").expect("grant");
    for _ in 0..20 {
        let job = Job::new("/bin/sh").args(["-c", "echo ok"]);
        let report = Plan::prepare(&policy, &job).expect("plan").run(Output::Capture).expect("run");
        assert_eq!(report.status, Status::Ok, "{report:?}");
        assert_eq!(report.stdout.text.as_deref(), Some("ok\n"));
    }
    // With an egress list the child also brings its loopback up and hands over the proxy's socket.
    let mut egress = policy.clone();
    egress.add_egress("127.0.0.1:9", "test").expect("egress");
    for _ in 0..5 {
        let report = Plan::prepare(&egress, &Job::new("/bin/true")).expect("plan").run(Output::Capture).expect("run");
        assert_eq!(report.status, Status::Ok, "{report:?}");
        assert!(report.egress.is_some(), "{report:?}");
    }
    // A failure inside the jail takes the failure path, which must not allocate either: lower
    // this process's hard core-size limit after prepare, below the policy's value (a jailed
    // process cannot raise a hard limit, so the child's prlimit fails).
    let mut raising = policy.clone();
    raising.rlimits.retain(|(k, _)| *k != stockade::policy::RlimitKey::CoreBytes);
    raising.rlimits.push((stockade::policy::RlimitKey::CoreBytes, stockade::policy::Limit::Value(4096)));
    let plan = Plan::prepare(&raising, &Job::new("/bin/true")).expect("plan");
    let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: zero is a valid rlimit; lowering this test process's core-size limit is harmless.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) }, 0);
    let report = plan.run(Output::Capture).expect("run");
    assert_eq!(report.status, Status::SetupFailed);
    let error = report.error.clone().unwrap_or_default();
    assert!(error.starts_with("jail setup failed at rlimits (stage 10: rlimits.core-bytes)"), "{error}");
    assert!(error.ends_with(": operation not permitted"), "{error}");
    assert_eq!(report.stockade_exit_code, 125);
    // An exec failure (not a valid executable, in a read-only grant) goes through init's
    // reporting path too.
    let ro = tempfile::tempdir().expect("tempdir");
    let fake = ro.path().join("fake");
    std::fs::write(&fake, b"\x00\x01not an executable").expect("write");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let mut with_ro = policy.clone();
    with_ro.add_read_only(&ro.path().display().to_string(), "test").expect("grant");
    let report = stockade::run(&with_ro, &Job::new(fake.display().to_string()), Output::Capture).expect("run");
    assert_eq!(report.status, Status::SetupFailed, "{report:?}");
    assert!(report.error.as_deref().is_some_and(|e| e.contains("exec format error")), "{report:?}");
    assert_eq!(report.stockade_exit_code, 126);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("thread");
    }
}
