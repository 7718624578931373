//! Helper processes: a copy of this process, made while it has a single thread, that goes on as
//! a process of its own (`stockade serve`'s spawner, and the helper that holds each of its jails).
//!
//! A jail's child is a copy of a process that may have had other threads when it was made, so
//! until it execs it keeps to raw system calls: a lock another thread held at the copy stays
//! held in it forever (malloc's, stdio's). A helper is made only while this process has one
//! thread ([`fork_helper`] counts them and refuses otherwise): no other thread can have held
//! anything, so the copy may allocate and run ordinary Rust. The rule of the whole crate is
//! therefore: **no allocation after a fork of a multithreaded process** (the jail's child, until
//! exec), ordinary code after a fork of a single-threaded one (a helper).

use crate::sys;
use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};

/// The network namespaces of [`make_empty_net`]: the one this process was in, and the empty one.
struct Nets {
    host: OwnedFd,
    empty: OwnedFd,
}

static EMPTY_NET: std::sync::OnceLock<Nets> = std::sync::OnceLock::new();

/// Makes an empty network namespace (no interface but `lo`, down; owned by this process's user
/// namespace, so no jail can configure it) that the jails this process and its helpers build for
/// code of their own that makes no socket may share instead of a new one each
/// ([`crate::InProcess::shared_net`]). This thread stays in its own. Needs `CAP_SYS_ADMIN`
/// (root's service); `Err` otherwise, and each jail gets its own as before.
pub fn make_empty_net() -> std::io::Result<()> {
    let open = |path: &str| std::fs::File::open(path).map(OwnedFd::from);
    let host = open("/proc/thread-self/ns/net")?;
    sys::unshare(libc::CLONE_NEWNET).map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
    let empty = open("/proc/thread-self/ns/net");
    sys::setns_net(host.as_fd()).map_err(|e| std::io::Error::from_raw_os_error(e.0))?;
    let _ = EMPTY_NET.set(Nets { host, empty: empty? });
    Ok(())
}

/// Runs `f` with the calling thread in the empty network namespace, when [`make_empty_net`] made
/// one (`None` otherwise); the thread is back in its own after.
pub(crate) fn in_empty_net<T>(f: impl FnOnce() -> T) -> Option<std::io::Result<T>> {
    let nets = EMPTY_NET.get()?;
    let errno = |e: sys::Errno| std::io::Error::from_raw_os_error(e.0);
    if let Err(e) = sys::setns_net(nets.empty.as_fd()) {
        return Some(Err(errno(e)));
    }
    let out = f();
    // A thread left in the empty namespace would build the next jails there: never go on so.
    if let Err(e) = sys::setns_net(nets.host.as_fd()) {
        eprintln!("stockade: cannot take a thread back to its network namespace ({e}): aborting");
        std::process::abort();
    }
    Some(Ok(out))
}

/// The names of this process's threads now (the entries of `/proc/self/task`).
pub fn threads() -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")? {
        let comm = std::fs::read_to_string(t?.path().join("comm")).unwrap_or_default();
        names.push(comm.trim_end().to_string());
    }
    Ok(names)
}

/// Forks this process, which must have a single thread, into a helper that runs `child` (which
/// never returns: it ends with `exit`) and is killed with SIGKILL when the thread that forked it
/// ends (the kernel clears that signal when the helper's credentials change, as they do while a
/// jail is built: a helper that builds jails ties its life to its maker some other way). Returns the helper's pid and a pidfd for it; the caller reaps it through the pidfd (no
/// SIGCHLD is sent). A panic in the helper ends it, never unwinds into the caller's frames.
/// What the helper leaves on the host (a run's cgroup, should it die) is named as this process's
/// leftovers, and reaped as theirs once this process is gone.
pub fn fork_helper(child: impl FnOnce() -> Infallible) -> std::io::Result<(i32, OwnedFd)> {
    let names = threads()?;
    if names.len() != 1 {
        return Err(std::io::Error::other(format!(
            "cannot fork a helper: this process has {} threads ({}; a helper is a copy of a single-threaded process)",
            names.len(),
            names.join(", ")
        )));
    }
    // What the helper leaves on the host is named as this process's (learned now, inherited).
    crate::leftovers::owner();
    let parent = std::process::id();
    sys::clone_into(0, None, move || {
        // Killed with its parent; a parent that ended before the signal was asked for is seen
        // by the parent pid having changed.
        if sys::set_parent_death_signal(libc::SIGKILL).is_err() || std::os::unix::process::parent_id() != parent {
            sys::exit(1);
        }
        child()
    })
    .map_err(|e| std::io::Error::from_raw_os_error(e.0))
}

/// Ends a helper at once (`_exit`): a copy of its maker flushes none of the maker's buffers and
/// runs none of its exit handlers.
pub fn exit(code: i32) -> ! {
    sys::exit(code)
}

/// Reaps the helper behind `pidfd`, waiting until it has exited (at once when its pidfd polls
/// readable).
pub fn reap(pidfd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    sys::waitid_pidfd(pidfd).map(drop).map_err(|e| std::io::Error::from_raw_os_error(e.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multithreaded_process_forks_no_helper() {
        // The test harness runs tests on threads of their own: this process has several.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let e = fork_helper(|| sys::exit(0)).expect_err("refused");
        assert!(e.to_string().contains("threads"), "{e}");
        drop(tx);
        let _ = other.join();
    }
}
