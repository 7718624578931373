//! How a run ended, decided once, from what the supervisor saw: a pure function of the child's
//! messages, the deadline, the cgroup's counts and (for a runner) the guest's own account.
//! Unit-tested without root or a jail.

use crate::report::{
    EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SECCOMP_VIOLATION, EXIT_SETUP_FAILED, EXIT_TIMEOUT, GuestEnd, Status,
};
use crate::wire::{Failure, Stage};

/// What the supervisor saw of a run's end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending {
    /// A step of the jail failed (the child said so).
    pub failure: Option<Failure>,
    /// A call of a `seccomp.kill` group ended the run.
    pub violation: bool,
    /// The program's wait status, as the run's init reported it.
    pub exit_status: Option<i32>,
    /// The deadline passed and the run was killed.
    pub timed_out: bool,
    /// The program wrote past an output cap and the run was killed (`output.over-cap = "end"`).
    pub output_limit: bool,
    /// How the run's init itself ended: exited (with this code) or killed (by this signal).
    pub init_exited: bool,
    pub init_status: i32,
    /// CPU time the run used, microseconds.
    pub cpu_used_us: u64,
}

/// What the run's limits and accounting say.
#[derive(Debug, Clone, Copy, Default)]
pub struct Accounting {
    pub oom_kills: u64,
    pub pids_limit_hit: bool,
    /// A writable directory was full at the end.
    pub disk_full: bool,
    /// `rlimits.cpu-seconds`, when set.
    pub cpu_limit_s: Option<u64>,
}

/// The decision: the report's status, exit code or signal, `stockade run`'s exit code, and why
/// in words where the numbers do not say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: Status,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stockade_exit_code: i32,
    pub note: Option<Note>,
}

/// Why, when the numbers do not say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A jail step failed: the caller words it (it knows the plan's ops).
    Failure(Failure),
    /// The run's init was killed from outside the run.
    InitKilled(i32),
    /// The run's init exited without reporting.
    InitExited(i32),
    /// The guest's own words (a trap, a load error).
    Guest(String),
}

const SIGKILL: i32 = libc::SIGKILL;

/// Decides how a run ended. The reasons that end a run from outside the program come first
/// (a jail step that failed, a seccomp kill); then the program's own end, named for the limit
/// that caused it when one did (OOM, the CPU rlimit, the process limit, a full writable
/// directory), or for the guest's account when a runner gave one; else the deadline.
pub fn verdict(e: &Ending, a: &Accounting, guest: Option<&GuestEnd>) -> Verdict {
    let v = |status, exit_code, signal, stockade_exit_code, note| Verdict {
        status,
        exit_code,
        signal,
        stockade_exit_code,
        note,
    };
    if let Some(f) = e.failure {
        let code = match f.stage {
            Stage::Exec if f.errno.0 == libc::ENOENT => EXIT_NOT_FOUND,
            Stage::Exec => EXIT_NOT_EXECUTABLE,
            _ => EXIT_SETUP_FAILED,
        };
        return v(Status::SetupFailed, None, None, code, Some(Note::Failure(f)));
    }
    if e.violation {
        return v(Status::SeccompViolation, None, Some(SIGKILL), EXIT_SECCOMP_VIOLATION, None);
    }
    if e.output_limit {
        return v(Status::OutputLimit, None, Some(SIGKILL), 128 + SIGKILL, None);
    }
    // The program's own end (also when it ended on its own just as the deadline passed).
    if let Some(ws) = e.exit_status.filter(|ws| !(e.timed_out && killed_by(*ws, SIGKILL))) {
        let mut out = if libc::WIFEXITED(ws) {
            let code = libc::WEXITSTATUS(ws);
            v(if code == 0 { Status::Ok } else { Status::ExitedNonzero }, Some(code), None, code, None)
        } else {
            let sig = libc::WTERMSIG(ws);
            let cpu_limit = a
                .cpu_limit_s
                .is_some_and(|s| sig == libc::SIGXCPU || (sig == SIGKILL && e.cpu_used_us + 50_000 >= s * 1_000_000));
            v(if cpu_limit { Status::CpuLimit } else { Status::Signaled }, None, Some(sig), 128 + sig, None)
        };
        let program_ended = matches!(out.status, Status::Ok | Status::ExitedNonzero | Status::Signaled);
        if a.oom_kills > 0 {
            out.status = Status::Oom;
        } else if program_ended && a.pids_limit_hit {
            out.status = Status::PidsLimit;
        } else if program_ended && a.disk_full {
            out.status = Status::DiskLimit;
        } else if program_ended && let Some(g) = guest {
            guest_verdict(&mut out, g);
        }
        return out;
    }
    if e.timed_out {
        return v(Status::Timeout, None, Some(SIGKILL), EXIT_TIMEOUT, None);
    }
    if a.oom_kills > 0 {
        // The OOM killer took the whole cgroup (memory.oom.group), init included.
        return v(Status::Oom, None, Some(SIGKILL), 128 + SIGKILL, None);
    }
    // init ended without reporting: killed from outside the run, or it failed itself.
    if e.init_exited {
        v(Status::SetupFailed, None, None, EXIT_SETUP_FAILED, Some(Note::InitExited(e.init_status)))
    } else {
        let sig = e.init_status;
        v(Status::Signaled, None, Some(sig), 128 + sig, Some(Note::InitKilled(sig)))
    }
}

/// A runner's program ended on its own: the guest's account names the reason.
fn guest_verdict(out: &mut Verdict, g: &GuestEnd) {
    match g {
        GuestEnd::Exited { memory_limit_hit: true, .. } => out.status = Status::WasmMemoryLimit,
        GuestEnd::Exited { memory_limit_hit: false, .. } => {}
        GuestEnd::FuelExhausted => out.status = Status::FuelExhausted,
        GuestEnd::Interrupted => {
            out.status = Status::Timeout;
            out.stockade_exit_code = EXIT_TIMEOUT;
        }
        GuestEnd::Trap(message) => {
            out.status = Status::WasmTrap;
            out.note = Some(Note::Guest(message.clone()));
        }
        GuestEnd::LoadError(message) => {
            out.status = Status::SetupFailed;
            out.stockade_exit_code = EXIT_SETUP_FAILED;
            out.note = Some(Note::Guest(message.clone()));
        }
    }
}

fn killed_by(ws: i32, sig: i32) -> bool {
    libc::WIFSIGNALED(ws) && libc::WTERMSIG(ws) == sig
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Errno;

    fn exited(code: i32) -> i32 {
        code << 8
    }

    fn ended(ws: i32) -> Ending {
        Ending { exit_status: Some(ws), init_exited: true, ..Ending::default() }
    }

    #[test]
    fn the_program_s_own_end() {
        let a = Accounting::default();
        assert_eq!(verdict(&ended(exited(0)), &a, None).status, Status::Ok);
        let v = verdict(&ended(exited(3)), &a, None);
        assert_eq!((v.status, v.exit_code, v.stockade_exit_code), (Status::ExitedNonzero, Some(3), 3));
        let v = verdict(&ended(libc::SIGSEGV), &a, None);
        assert_eq!((v.status, v.signal, v.stockade_exit_code), (Status::Signaled, Some(11), 139));
    }

    #[test]
    fn the_limit_that_caused_it_names_it() {
        let oom = Accounting { oom_kills: 1, ..Accounting::default() };
        assert_eq!(verdict(&ended(SIGKILL), &oom, None).status, Status::Oom);
        let pids = Accounting { pids_limit_hit: true, ..Accounting::default() };
        let v = verdict(&ended(exited(1)), &pids, None);
        assert_eq!((v.status, v.stockade_exit_code), (Status::PidsLimit, 1));
        let disk = Accounting { disk_full: true, ..Accounting::default() };
        assert_eq!(verdict(&ended(exited(1)), &disk, None).status, Status::DiskLimit);
        let cpu = Accounting { cpu_limit_s: Some(1), ..Accounting::default() };
        assert_eq!(verdict(&ended(libc::SIGXCPU), &cpu, None).status, Status::CpuLimit);
        let spent = Ending { cpu_used_us: 990_000, ..ended(SIGKILL) };
        assert_eq!(verdict(&spent, &cpu, None).status, Status::CpuLimit);
        let early = Ending { cpu_used_us: 100_000, ..ended(SIGKILL) };
        assert_eq!(verdict(&early, &cpu, None).status, Status::Signaled);
    }

    #[test]
    fn outside_reasons_come_first() {
        let f = Failure { stage: Stage::Exec, detail: 0, errno: Errno(libc::ENOENT) };
        let failed = Ending { failure: Some(f), ..ended(exited(0)) };
        let v = verdict(&failed, &Accounting::default(), None);
        assert_eq!((v.status, v.stockade_exit_code, v.note), (Status::SetupFailed, 127, Some(Note::Failure(f))));
        let killed = Ending { violation: true, ..ended(SIGKILL) };
        let v = verdict(&killed, &Accounting::default(), None);
        assert_eq!((v.status, v.stockade_exit_code), (Status::SeccompViolation, 159));
        // A flood killed at its cap, even when the OOM killer or the deadline came too.
        let flooded = Ending { output_limit: true, timed_out: true, ..ended(SIGKILL) };
        let oom = Accounting { oom_kills: 1, ..Accounting::default() };
        let v = verdict(&flooded, &oom, None);
        assert_eq!((v.status, v.signal, v.stockade_exit_code), (Status::OutputLimit, Some(SIGKILL), 137));
    }

    #[test]
    fn the_deadline_and_a_lost_init() {
        let late = Ending { timed_out: true, ..ended(SIGKILL) };
        let v = verdict(&late, &Accounting::default(), None);
        assert_eq!((v.status, v.stockade_exit_code), (Status::Timeout, 124));
        // It exited on its own just as the deadline passed: its own end counts.
        let just = Ending { timed_out: true, ..ended(exited(0)) };
        assert_eq!(verdict(&just, &Accounting::default(), None).status, Status::Ok);
        let lost = Ending { init_exited: false, init_status: libc::SIGTERM, ..Ending::default() };
        let v = verdict(&lost, &Accounting::default(), None);
        assert_eq!((v.status, v.note), (Status::Signaled, Some(Note::InitKilled(libc::SIGTERM))));
    }

    #[test]
    fn a_guest_s_account_names_the_end_when_the_program_ended_on_its_own() {
        let a = Accounting::default();
        let trap = GuestEnd::Trap("wasm trap: unreachable".into());
        let v = verdict(&ended(exited(134)), &a, Some(&trap));
        assert_eq!((v.status, v.note), (Status::WasmTrap, Some(Note::Guest("wasm trap: unreachable".into()))));
        let v = verdict(&ended(exited(124)), &a, Some(&GuestEnd::Interrupted));
        assert_eq!((v.status, v.stockade_exit_code), (Status::Timeout, 124));
        let v = verdict(&ended(exited(137)), &a, Some(&GuestEnd::FuelExhausted));
        assert_eq!(v.status, Status::FuelExhausted);
        let v = verdict(&ended(exited(1)), &a, Some(&GuestEnd::Exited { code: 1, memory_limit_hit: true }));
        assert_eq!(v.status, Status::WasmMemoryLimit);
        // An outside reason stays: the OOM killer ended it, whatever the guest says.
        let oom = Accounting { oom_kills: 1, ..Accounting::default() };
        assert_eq!(verdict(&ended(SIGKILL), &oom, Some(&GuestEnd::Interrupted)).status, Status::Oom);
    }
}
