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
//!
//! Imports (layers): `leftovers`, `sys`.

use crate::sys;
use std::convert::Infallible;
use std::os::fd::{AsFd, OwnedFd};

fn errno(e: sys::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.0)
}

/// The calling thread's network namespace now.
fn this_net() -> std::io::Result<OwnedFd> {
    std::fs::File::open("/proc/thread-self/ns/net").map(OwnedFd::from)
}

/// Puts the calling thread back in its own network namespace; a thread that cannot go back
/// would build the next jails where it is: the process ends rather than go on so.
fn back_to_host_net(host: std::os::fd::BorrowedFd<'_>) {
    if let Err(e) = sys::setns_net(host) {
        eprintln!("stockade: cannot take a thread back to its network namespace ({e}): aborting");
        std::process::abort();
    }
}

/// Makes an empty network namespace (no interface but `lo`, down; owned by this process's user
/// namespace, so no jail can configure it) and returns it; this thread stays in its own. Needs
/// `CAP_SYS_ADMIN` (root's service). The jails a process builds join one made so only when it
/// says so, as a value ([`crate::JoinNet`]): the namespace shared by the jails of code that makes
/// no socket, or one a jail takes in turn.
pub fn make_net() -> std::io::Result<OwnedFd> {
    let host = this_net()?;
    sys::unshare(libc::CLONE_NEWNET).map_err(errno)?;
    let made = this_net();
    back_to_host_net(host.as_fd());
    made
}

/// Runs `f` with the calling thread in the network namespace `ns`; the thread is back in its own
/// after.
pub(crate) fn in_net<T>(ns: std::os::fd::BorrowedFd<'_>, f: impl FnOnce() -> T) -> std::io::Result<T> {
    /// Takes the thread back when dropped: after `f`, or as a panic in it unwinds.
    struct Back(OwnedFd);
    impl Drop for Back {
        fn drop(&mut self) {
            back_to_host_net(self.0.as_fd());
        }
    }
    let host = this_net()?;
    sys::setns_net(ns).map_err(errno)?;
    let _back = Back(host);
    Ok(f())
}

/// Whether the network namespace `ns` holds no socket (its `/proc/net/unix` lists none: the only
/// kind a jail that may take a namespace in turn can make). A jail's socket outlives its
/// processes only while it is in flight (passed over a socket nobody reads) until the kernel's
/// collector frees it; a namespace holding one is not lent again.
pub fn net_holds_no_socket(ns: std::os::fd::BorrowedFd<'_>) -> std::io::Result<bool> {
    let table = in_net(ns, || std::fs::read_to_string("/proc/thread-self/net/unix"))??;
    Ok(table.lines().count() <= 1)
}

/// Whether this process has no child left, running or exited (a helper whose jail's init is
/// reaped: every process of the jail's PID namespace is gone with it).
pub fn no_child_left() -> bool {
    matches!(sys::has_children(), Ok(false))
}

/// How many threads this process has now (`num_threads` of `/proc/self/stat`: one read, where
/// [`threads`] reads a file per thread; asked before each jail a helper builds).
pub fn thread_count() -> std::io::Result<usize> {
    sys::thread_count()
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

/// Moves this process's code into anonymous transparent huge pages, before it forks the many
/// copies of itself that build jails (`stockade serve`'s spawner, once its guests are loaded):
/// the code of stockade and of the guests, and stockade's read-only data. A fork copies no entry
/// of a file mapping's page table that no process wrote, so each helper and each runner faulted
/// that code in again as it ran; a huge page's one entry is copied at the fork instead. The
/// whole huge pages inside each never-written mapping move, and the huge page at each end of an
/// executable mapping that holds nothing but its code and a guest's headers (those become
/// executable in the copy); the bytes and the addresses stay, and the protection but for those
/// headers.
///
/// Returns the bytes moved: 0 when the kernel gives no transparent huge page of 2 MiB to memory
/// that asks for one (`/sys/kernel/mm/transparent_hugepage/enabled` is `never` or absent; the
/// kernel has no `MADV_COLLAPSE`, before 6.1; none is free). `Err` when this process has more
/// than one thread, or its mappings cannot be read; a mapping that cannot be moved stays where
/// it is.
pub fn code_in_huge_pages() -> std::io::Result<usize> {
    sys::move_code_to_huge_pages()
}

/// Puts the code [`code_in_huge_pages`] moved back in its files' mappings, in this copy of the
/// process that moved it: a helper whose jail runs a program. Such a jail's init is a copy of its
/// helper, whose program shares the init's memory until it execs (`vfork`), and the kernel keeps
/// the largest resident set of that memory as the program's own: with the code mapped whole, a
/// static `true` would report the 30 MB of it. Back in its files, the init has only the code it
/// runs, as before. Needs this process to have one thread (`Err` otherwise).
pub fn code_back_in_files() -> std::io::Result<()> {
    sys::map_code_back()
}

/// Forks this process, which must have a single thread, into a helper that runs `child` (which
/// never returns: it ends with `exit`) and is killed with SIGKILL when the thread that forked it
/// ends (the kernel clears that signal when the helper's credentials change, as they do while a
/// jail is built: a helper that builds jails ties its life to its maker some other way). Returns the helper's pid and a pidfd for it; the caller reaps it through the pidfd (no
/// SIGCHLD is sent). A panic in the helper ends it, never unwinds into the caller's frames.
/// What the helper leaves on the host (a run's cgroup, should it die) is named as this process's
/// leftovers, and reaped as theirs once this process is gone.
pub fn fork_helper(child: impl FnOnce() -> Infallible) -> std::io::Result<(i32, OwnedFd)> {
    if thread_count()? != 1 {
        let names = threads()?;
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
/// readable). Its exit code, when it exited (`None`: killed by a signal).
pub fn reap(pidfd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<Option<i32>> {
    let reaped = sys::waitid_pidfd(pidfd).map_err(errno)?;
    Ok((reaped.code == libc::CLD_EXITED).then_some(reaped.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace made ahead is seen to hold a socket while one is bound in it, and none after.
    #[test]
    fn a_namespace_with_a_socket_in_it_is_seen() {
        if sys::geteuid() != 0 {
            eprintln!("skip: making a network namespace needs root (CAP_SYS_ADMIN)");
            return;
        }
        use std::os::linux::net::SocketAddrExt;
        let bind = || {
            let name = format!("stockade-helper-test-{}", std::process::id());
            let name = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
            std::os::unix::net::UnixListener::bind_addr(&name)
        };
        let ns = make_net().expect("a namespace");
        assert!(net_holds_no_socket(ns.as_fd()).expect("its table"));
        let there = in_net(ns.as_fd(), bind).expect("in it").expect("bind there");
        assert!(!net_holds_no_socket(ns.as_fd()).expect("its table"), "a bound socket is not seen");
        // This thread is back in its own namespace, where the name is free.
        let here = bind().expect("bind here");
        drop((there, here));
        assert!(net_holds_no_socket(ns.as_fd()).expect("its table"));
    }

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
