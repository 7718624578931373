//! The seccomp listener's notifications, answered by the pump: the exec that starts the
//! program, the groups that end the run or are refused, `sysinfo` answered with the run's own
//! figures, and a turn's end seen in a `read(2)` of the program's stdin.

use super::Pump;
use crate::layers::cgroup::Leaf;
use crate::layers::seccomp::{self, ExecGuard};
use crate::policy::SyscallGroup;
use crate::report::Violation;
use crate::sys::{self, Errno};
use std::os::fd::{AsFd, BorrowedFd};

/// The most refused execs a report names.
const NAMED_MAX: usize = 8;

/// The file an exec held by the listener names: its path as the caller wrote it (for the
/// report), and its device and inode as the caller's view resolves it (its root, its working
/// directory, its fds; `None` when it cannot be read or found). `execve(path, ...)`;
/// `execveat(dirfd, path, ..., flags)`, an empty path with `AT_EMPTY_PATH` naming `dirfd`.
fn exec_target(n: &sys::SeccompNotif) -> (String, Option<(u64, u64)>) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let pid = i32::try_from(n.pid).unwrap_or(0);
    let at = i64::from(n.nr) == libc::SYS_execveat;
    let (dirfd, addr, flags) = if at {
        (i32::from_ne_bytes(u32::try_from(n.args[0] & 0xffff_ffff).unwrap_or(0).to_ne_bytes()), n.args[1], n.args[4])
    } else {
        (libc::AT_FDCWD, n.args[0], 0)
    };
    let Ok(path) = sys::read_remote_cstr(pid, addr, libc::PATH_MAX as usize) else {
        return ("(a path the supervisor could not read)".into(), None);
    };
    let text = String::from_utf8_lossy(&path).into_owned();
    let rel = std::ffi::OsStr::from_bytes(&path);
    let base = match dirfd {
        libc::AT_FDCWD => format!("/proc/{pid}/cwd"),
        fd => format!("/proc/{pid}/fd/{fd}"),
    };
    let host = if path.is_empty() && flags & libc::AT_EMPTY_PATH as u64 != 0 {
        std::path::PathBuf::from(base)
    } else if path.starts_with(b"/") {
        std::path::Path::new(&format!("/proc/{pid}/root"))
            .join(std::path::Path::new(rel).strip_prefix("/").unwrap_or(std::path::Path::new(rel)))
    } else {
        std::path::Path::new(&base).join(rel)
    };
    let shown = if text.is_empty() { format!("fd {dirfd}") } else { text };
    (shown, std::fs::metadata(&host).ok().map(|m| (m.dev(), m.ino())))
}

impl Pump<'_> {
    /// One seccomp notification: the exec that starts the program goes through; a `kill` group
    /// ends the run; anything else is refused.
    pub(super) fn answer(&mut self, revents: libc::c_short) {
        if revents & libc::POLLIN == 0 {
            // Every process the filter applied to is gone.
            self.listener = None;
            return;
        }
        let Some(l) = &self.listener else { return };
        let Ok(n) = sys::seccomp_notif_recv(l.as_fd()) else { return };
        if i64::from(n.nr) == libc::SYS_read && self.run.turns == Some(crate::TurnEnd::Read) {
            self.turn_read(&n);
            return;
        }
        let sc = self.run.seccomp;
        let (name, group) = seccomp::syscall_name(n.nr, &n.args).unwrap_or(("unknown", SyscallGroup::Admin));
        if group == SyscallGroup::HostCounters && !sc.kills(group) {
            let unanswered = self.answer_sysinfo(l.as_fd(), &n);
            self.sysinfo_unanswered = self.sysinfo_unanswered.or(unanswered);
            return;
        }
        let first_exec = group == SyscallGroup::Exec
            && sc.exec == ExecGuard::Supervised
            && !std::mem::replace(&mut self.exec_seen, true);
        if first_exec {
            // The exec that starts the program: it runs before any of its code.
            let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Ok(()));
        } else if sc.kills(group) {
            let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
            if self.violation.is_none() {
                self.violation =
                    Some(Violation { syscall: name.to_string(), number: n.nr, group: group.name().to_string() });
            }
            self.kill();
        } else if group == SyscallGroup::Exec
            && let Some(allow) = &sc.exec_allow
        {
            // `process.exec-allow`: through when it names a listed file (Landlock holds the
            // rest, see `layers/exec.rs`), else refused and named.
            let (named, id) = exec_target(&n);
            let valid = sys::seccomp_notif_id_valid(l.as_fd(), n.id);
            if valid && id.is_some_and(|id| allow.allows(id)) {
                let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Ok(()));
            } else {
                let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
                self.execs_refused = self.execs_refused.saturating_add(1);
                if self.execs_refused_named.len() < NAMED_MAX && !self.execs_refused_named.contains(&named) {
                    self.execs_refused_named.push(named);
                }
            }
        } else {
            let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
            if group == SyscallGroup::Exec {
                self.execs_refused = self.execs_refused.saturating_add(1);
            }
        }
    }

    /// A `read(2)` of the program's stdin ([`crate::TurnEnd::Read`]): with the turn's bytes all
    /// fed and read, its turn returned, and the call waits unanswered (the jail is frozen next;
    /// thawed, the call starts again and comes back here). Else it goes through.
    fn turn_read(&mut self, n: &sys::SeccompNotif) {
        let Some(l) = &self.listener else { return };
        let back = (n.args[0] & 0xffff_ffff) == 0
            && self
                .turn
                .as_ref()
                .is_some_and(|t| t.fed && t.stdin.as_ref().is_some_and(|fd| sys::pipe_queued(fd.as_fd()) == Ok(0)));
        match self.turn.as_mut() {
            Some(t) if back => t.returned = true,
            _ => {
                let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Ok(()));
            }
        }
    }

    /// `sysinfo(addr)`, answered with the run's own figures instead of the host's: its memory
    /// limit (else the host's memory) and what it uses, its processes, the time since it was
    /// released. Written into the caller's memory while it waits in the call (still the caller:
    /// its notification is checked to be pending first).
    /// `Some(why)` when the run's figures could not be written and the host's were given.
    fn answer_sysinfo(&self, listener: BorrowedFd<'_>, n: &sys::SeccompNotif) -> Option<Errno> {
        let (max, used, procs) = self.run.leaf.map(Leaf::counters).unwrap_or_default();
        let total = max.unwrap_or_else(sys::host_memory_bytes);
        let used = used.unwrap_or(0).min(total);
        let figures = sys::SysinfoFigures {
            uptime_s: i64::try_from(self.released.elapsed().as_secs()).unwrap_or(i64::MAX),
            total_bytes: total,
            free_bytes: total - used,
            procs: u16::try_from(procs.unwrap_or(1)).unwrap_or(u16::MAX),
        };
        let pid = i32::try_from(n.pid).unwrap_or(0);
        if !sys::seccomp_notif_id_valid(listener, n.id) {
            return None;
        }
        match sys::write_sysinfo(pid, n.args[0], figures) {
            Ok(()) => {
                let _ = sys::seccomp_notif_return(listener, n.id, 0);
                None
            }
            // Its own memory, not there: the answer a bad pointer gets.
            Err(Errno(libc::EFAULT)) => {
                let _ = sys::seccomp_notif_send(listener, n.id, Err(libc::EFAULT));
                None
            }
            // The supervisor may not write there (a container without CAP_SYS_PTRACE): the
            // call runs as the kernel has it (libc needs an answer), and the report says so.
            Err(e) => {
                let _ = sys::seccomp_notif_send(listener, n.id, Ok(()));
                Some(e)
            }
        }
    }
}
