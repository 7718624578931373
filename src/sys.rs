//! Every `unsafe` block in stockade lives here: thin wrappers, one system call each.
//!
//! Two kinds of wrappers:
//! - **child-safe** ones (the first half of the file) are called between fork and exec. They take only
//!   references to data built before fork (`&CStr`, slices, integers), make one raw system call, and
//!   return [`Errno`]. They never allocate, panic or take a lock, so they are async-signal-safe even when
//!   the supervisor was multithreaded at fork time.
//! - **parent-side** ones (the second half) may allocate and return owned values.
//!
//! Raw `syscall(2)` is used instead of glibc wrappers where glibc would do more than the call (its
//! `fork` runs atfork handlers that take locks) or has no wrapper (clone3, pivot_root, mount_setattr).

// Syscall results are bounded by the kernel (fd numbers, pids, byte counts no larger than the
// buffer passed in), so narrowing them cannot lose information on Linux x86_64.
#![allow(clippy::cast_possible_truncation)]

use std::ffi::{CStr, CString, c_char, c_int, c_long, c_uint, c_ulong};
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

/// An `errno` value from a failed system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    fn last() -> Self {
        // SAFETY: __errno_location returns a valid pointer to this thread's errno.
        Errno(unsafe { *libc::__errno_location() })
    }

    /// The `std::io::Error` for this errno (for messages; allocates).
    pub fn io(self) -> std::io::Error {
        std::io::Error::from_raw_os_error(self.0)
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", describe_errno(self.0))
    }
}

/// The lowercase description of an errno, without the "(os error N)" suffix std adds.
pub fn describe_errno(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    let text = match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().collect::<String>() + chars.as_str(),
        None => text,
    }
}

fn check(rc: c_long) -> Result<c_long, Errno> {
    if rc < 0 { Err(Errno::last()) } else { Ok(rc) }
}

fn check_int(rc: c_int) -> Result<c_int, Errno> {
    if rc < 0 { Err(Errno::last()) } else { Ok(rc) }
}

// Constants that are not (or not on every libc version) exported by the libc crate.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: c_uint = 0x8000;
const P_PIDFD: libc::idtype_t = 3;
const KEYCTL_JOIN_SESSION_KEYRING: c_long = 1;
const CLOSE_RANGE_CLOEXEC: c_uint = 1 << 2;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

// ---------------------------------------------------------------------------------------------
// Child-safe wrappers: no allocation, no panics, no locks.
// ---------------------------------------------------------------------------------------------

/// A NULL-terminated array of C string pointers for `execveat`, built in the parent.
///
/// It borrows the `CString`s it points into, so they outlive it.
#[derive(Debug)]
pub struct CStrArray<'a> {
    ptrs: Vec<*const c_char>,
    _strings: PhantomData<&'a CString>,
}

impl<'a> CStrArray<'a> {
    pub fn new(strings: &'a [CString]) -> Self {
        let mut ptrs: Vec<*const c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(ptr::null());
        CStrArray { ptrs, _strings: PhantomData }
    }
}

/// `dup2(old, new)`; when both are the same fd, clears its close-on-exec flag instead.
pub fn dup2(old: RawFd, new: RawFd) -> Result<(), Errno> {
    if old == new {
        // SAFETY: fcntl on an integer fd; no pointers.
        check_int(unsafe { libc::fcntl(old, libc::F_SETFD, 0) })?;
        return Ok(());
    }
    // SAFETY: dup3 on integer fds; no pointers.
    check_int(unsafe { libc::dup3(old, new, 0) })?;
    Ok(())
}

/// `close_range(first, last, 0)`: closes every fd in the range.
pub fn close_range(first: u32, last: u32) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as c_uint) })?;
    Ok(())
}

/// `close_range(first, ~0, CLOSE_RANGE_CLOEXEC)`: marks every fd from `first` up close-on-exec.
pub fn cloexec_from(first: u32) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) })?;
    Ok(())
}

/// `close(fd)`, ignoring errors (the fd is gone either way).
pub fn close(fd: RawFd) {
    // SAFETY: closing an integer fd the caller owns.
    unsafe { libc::close(fd) };
}

/// `read(2)`, retried on EINTR.
pub fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: buf is a valid writable slice of buf.len() bytes.
        let rc = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match check(rc as c_long) {
            Err(Errno(libc::EINTR)) => continue,
            other => return other.map(|n| n as usize),
        }
    }
}

/// `write(2)`, retried on EINTR.
pub fn write(fd: RawFd, buf: &[u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: buf is a valid readable slice of buf.len() bytes.
        let rc = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        match check(rc as c_long) {
            Err(Errno(libc::EINTR)) => continue,
            other => return other.map(|n| n as usize),
        }
    }
}

/// True when the read end `fd` reports hang-up right now (every writer is gone).
pub fn peer_gone(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    rc > 0 && p.revents & libc::POLLHUP != 0
}

fn opt_ptr(s: Option<&CStr>) -> *const c_char {
    s.map_or(ptr::null(), CStr::as_ptr)
}

/// `mount(2)`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: c_ulong,
    data: Option<&CStr>,
) -> Result<(), Errno> {
    // SAFETY: every pointer is NULL or a NUL-terminated string that outlives the call.
    check_int(unsafe { libc::mount(opt_ptr(source), target.as_ptr(), opt_ptr(fstype), flags, opt_ptr(data).cast()) })?;
    Ok(())
}

/// `mount_setattr(AT_FDCWD, target, recursive ? AT_RECURSIVE : 0, {set, clr})`.
pub fn mount_setattr(target: &CStr, recursive: bool, set: u64, clr: u64) -> Result<(), Errno> {
    let attr = MountAttr { attr_set: set, attr_clr: clr, propagation: 0, userns_fd: 0 };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: target is NUL-terminated; attr is a valid struct of the size passed.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            target.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    Ok(())
}

/// `mkdir(path, mode)`; an existing directory is not an error.
pub fn mkdir(path: &CStr, mode: u32) -> Result<(), Errno> {
    // SAFETY: path is NUL-terminated.
    match check_int(unsafe { libc::mkdir(path.as_ptr(), mode) }) {
        Ok(_) | Err(Errno(libc::EEXIST)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates an empty regular file (a mount point for a file bind).
pub fn create_file(path: &CStr, mode: u32) -> Result<(), Errno> {
    let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;
    // SAFETY: path is NUL-terminated.
    let fd = check_int(unsafe { libc::open(path.as_ptr(), flags, mode) })?;
    close(fd);
    Ok(())
}

/// `symlink(target, link)`.
pub fn symlink(target: &CStr, link: &CStr) -> Result<(), Errno> {
    // SAFETY: both are NUL-terminated.
    check_int(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })?;
    Ok(())
}

/// `pivot_root(new_root, put_old)`.
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<(), Errno> {
    // SAFETY: both are NUL-terminated.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })?;
    Ok(())
}

/// `umount2(target, flags)`.
pub fn umount2(target: &CStr, flags: c_int) -> Result<(), Errno> {
    // SAFETY: target is NUL-terminated.
    check_int(unsafe { libc::umount2(target.as_ptr(), flags) })?;
    Ok(())
}

/// `chdir(path)`.
pub fn chdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is NUL-terminated.
    check_int(unsafe { libc::chdir(path.as_ptr()) })?;
    Ok(())
}

/// `sethostname(name)`.
pub fn sethostname(name: &[u8]) -> Result<(), Errno> {
    // SAFETY: name is a valid slice; the kernel reads name.len() bytes.
    check_int(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) })?;
    Ok(())
}

/// `setdomainname(name)`.
pub fn setdomainname(name: &[u8]) -> Result<(), Errno> {
    // SAFETY: name is a valid slice; the kernel reads name.len() bytes.
    check_int(unsafe { libc::setdomainname(name.as_ptr().cast(), name.len()) })?;
    Ok(())
}

/// `setsid()`.
pub fn setsid() -> Result<(), Errno> {
    // SAFETY: no arguments.
    check_int(unsafe { libc::setsid() })?;
    Ok(())
}

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`: a fresh anonymous session keyring.
pub fn join_new_session_keyring() -> Result<(), Errno> {
    // SAFETY: a NULL name asks for a new anonymous keyring.
    check(unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, ptr::null::<c_char>()) })?;
    Ok(())
}

/// `prlimit64(0, resource, {value, value}, NULL)`: sets soft and hard limit.
pub fn setrlimit(resource: c_int, soft: u64, hard: u64) -> Result<(), Errno> {
    let lim = libc::rlimit64 { rlim_cur: soft, rlim_max: hard };
    // SAFETY: lim is a valid struct; old limit pointer is NULL.
    check(unsafe { libc::syscall(libc::SYS_prlimit64, 0, resource, &lim as *const _, ptr::null_mut::<u8>()) })?;
    Ok(())
}

/// `setgroups(0, NULL)`: drops every supplementary group.
pub fn clear_groups() -> Result<(), Errno> {
    // SAFETY: a zero-length list with a NULL pointer.
    check(unsafe { libc::syscall(libc::SYS_setgroups, 0, ptr::null::<libc::gid_t>()) })?;
    Ok(())
}

/// `setresgid(gid, gid, gid)` as a raw syscall (glibc's wrapper signals every thread).
pub fn setresgid(gid: u32) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) })?;
    Ok(())
}

/// `setresuid(uid, uid, uid)` as a raw syscall (glibc's wrapper signals every thread).
pub fn setresuid(uid: u32) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) })?;
    Ok(())
}

/// `prctl(PR_SET_PDEATHSIG, sig)`.
pub fn set_parent_death_signal(sig: c_int) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// `prctl(PR_SET_DUMPABLE, 0)`: /proc/PID of this process becomes unreadable to its peers.
pub fn set_not_dumpable() -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// Unblocks every signal and resets every handler to its default, so the program starts clean
/// (an ignored SIGPIPE, for one, would otherwise survive exec).
pub fn reset_signals() -> Result<(), Errno> {
    // SAFETY: sigset_t is plain data; an all-zero set is the empty set for the raw syscall.
    let empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: empty is a valid set; the old-set pointer is NULL; 8 is the kernel's sigset size.
    check(unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const libc::sigset_t,
            ptr::null_mut::<libc::sigset_t>(),
            8usize,
        )
    })?;
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: c_ulong,
        restorer: usize,
        mask: u64,
    }
    let dfl = KernelSigaction { handler: 0, flags: 0, restorer: 0, mask: 0 };
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: dfl is a valid kernel sigaction (SIG_DFL); the old-action pointer is NULL.
        let _ = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
    }
    Ok(())
}

/// `wait4(-1, &status, 0, NULL)`: returns (pid, raw wait status).
pub fn wait_any() -> Result<(i32, i32), Errno> {
    let mut status: c_int = 0;
    loop {
        // SAFETY: status is a valid int; rusage pointer is NULL.
        let rc = unsafe { libc::wait4(-1, &mut status, 0, ptr::null_mut()) };
        match check_int(rc) {
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(e),
            Ok(pid) => return Ok((pid, status)),
        }
    }
}

/// `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`. Returns only on failure.
pub fn execveat(fd: RawFd, argv: &CStrArray<'_>, envp: &CStrArray<'_>) -> Errno {
    const EMPTY: &CStr = c"";
    // SAFETY: argv and envp are NULL-terminated arrays of NUL-terminated strings kept alive by
    // the CStrArray borrows; the path is an empty C string.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            fd,
            EMPTY.as_ptr(),
            argv.ptrs.as_ptr(),
            envp.ptrs.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    Errno::last()
}

/// `move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`: attaches the detached mount
/// `fd` (a clone the supervisor made with `open_tree`) at `target`. (Child side.)
pub fn move_mount(fd: RawFd, target: &CStr) -> Result<(), Errno> {
    const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
    // SAFETY: "" and target are NUL-terminated; fd is an open mount fd.
    check(unsafe {
        libc::syscall(libc::SYS_move_mount, fd, c"".as_ptr(), libc::AT_FDCWD, target.as_ptr(), MOVE_MOUNT_F_EMPTY_PATH)
    })
    .map(drop)
}

/// `open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)`. (Child side.)
pub fn open_path_dir(path: &CStr) -> Result<RawFd, Errno> {
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: path is NUL-terminated.
    check_int(unsafe { libc::open(path.as_ptr(), flags) })
}

/// `unshare(flags)`: new namespaces for the calling process. (Child side.)
pub fn unshare(flags: c_int) -> Result<(), Errno> {
    // SAFETY: integer argument only.
    check_int(unsafe { libc::unshare(flags) }).map(drop)
}

/// `exit_group(code)`: leaves at once, without running atexit handlers or flushing stdio.
pub fn exit(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user-space state.
    unsafe { libc::_exit(code) }
}

// ---------------------------------------------------------------------------------------------
// Parent-side wrappers (may allocate).
// ---------------------------------------------------------------------------------------------

/// What `clone3` returned on this side of the fork.
#[derive(Debug)]
pub enum Forked {
    /// This is the new process.
    Child,
    /// This is the caller; the child's pid (as seen by the caller) and a pidfd for it.
    Parent { pid: i32, pidfd: OwnedFd },
}

/// `clone3` with `CLONE_PIDFD` and the given namespace flags, no exit signal (so a caller's
/// `waitpid(-1)` reaper or `SIGCHLD = SIG_IGN` cannot take the child's status from us).
///
/// The child continues on a copy of the caller's stack, as after `fork(2)`.
pub fn clone3(flags: u64, cgroup_fd: Option<RawFd>) -> Result<Forked, Errno> {
    let mut pidfd: c_int = -1;
    // SAFETY: clone_args is plain data; all-zero is a valid starting value.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = flags | libc::CLONE_PIDFD as u64;
    args.pidfd = &mut pidfd as *mut c_int as u64;
    args.exit_signal = 0;
    if let Some(fd) = cgroup_fd {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    // SAFETY: args is a valid clone_args of the size passed; stack is 0, so the child gets a
    // copy-on-write copy of this stack and returns here, as with fork(2).
    let rc = check(unsafe {
        libc::syscall(libc::SYS_clone3, &args as *const libc::clone_args, std::mem::size_of::<libc::clone_args>())
    })?;
    if rc == 0 {
        return Ok(Forked::Child);
    }
    // SAFETY: the kernel stored a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Forked::Parent { pid: rc as i32, pidfd })
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
pub fn pipe() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    check_int(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 returned two fresh fds that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets or clears O_NONBLOCK on an fd.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> Result<(), Errno> {
    // SAFETY: fcntl on a valid fd; no pointers.
    let flags = check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: as above.
    check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) })?;
    Ok(())
}

/// `ppoll` with an optional timeout (None waits forever). Returns the number of ready fds.
pub fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> Result<usize, Errno> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds is a valid slice of pollfd; ts_ptr is NULL or points to a live timespec.
    let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ts_ptr, ptr::null()) };
    check_int(rc).map(|n| n as usize)
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`.
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: c_int) -> Result<(), Errno> {
    // SAFETY: integer arguments and a NULL siginfo.
    check(unsafe {
        libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), sig, ptr::null::<u8>(), 0 as c_uint)
    })?;
    Ok(())
}

/// How a reaped process ended, with its (and its reaped descendants') resource usage.
#[derive(Clone, Copy, Debug)]
pub struct Reaped {
    /// `si_code`: CLD_EXITED, CLD_KILLED or CLD_DUMPED.
    pub code: i32,
    /// The exit code, or the signal number.
    pub status: i32,
    pub user: Duration,
    pub system: Duration,
    pub max_rss_bytes: u64,
}

/// `waitid(P_PIDFD, pidfd, WEXITED | __WALL, &rusage)`: reaps the child behind the pidfd.
pub fn waitid_pidfd(pidfd: BorrowedFd<'_>) -> Result<Reaped, Errno> {
    // SAFETY: siginfo_t and rusage are plain data; all-zero is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: info and ru are valid out-pointers; the raw syscall takes rusage as 5th arg.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_waitid,
                P_PIDFD,
                pidfd.as_raw_fd(),
                &mut info as *mut libc::siginfo_t,
                libc::WEXITED | libc::__WALL,
                &mut ru as *mut libc::rusage,
            )
        };
        match check(rc) {
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(e),
            Ok(_) => break,
        }
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Ok(Reaped {
        code: info.si_code,
        // SAFETY: for a CLD_* siginfo the kernel filled si_status.
        status: unsafe { info.si_status() },
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
        max_rss_bytes: (ru.ru_maxrss.max(0) as u64) * 1024,
    })
}

/// `prlimit64(0, resource, NULL, &old)`: (soft, hard).
pub fn getrlimit(resource: c_int) -> Result<(u64, u64), Errno> {
    let mut old = libc::rlimit64 { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: old is a valid out-pointer; the new-limit pointer is NULL.
    check(unsafe {
        libc::syscall(libc::SYS_prlimit64, 0, resource, ptr::null::<libc::rlimit64>(), &mut old as *mut _)
    })?;
    Ok((old.rlim_cur, old.rlim_max))
}

/// The caller's effective uid.
pub fn geteuid() -> u32 {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::geteuid() }
}

/// The caller's effective gid.
pub fn getegid() -> u32 {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::getegid() }
}

/// `fstatvfs(fd).f_flag`: the ST_* mount flags of the mount an fd lives on.
pub fn mount_flags(fd: BorrowedFd<'_>) -> Result<u64, Errno> {
    // SAFETY: statvfs is plain data; all-zero is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; fd is open.
    check_int(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st.f_flag)
}

/// `fstatfs(fd).f_type`: the filesystem magic number.
pub fn fs_magic(fd: BorrowedFd<'_>) -> Result<i64, Errno> {
    // SAFETY: statfs is plain data; all-zero is valid.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; fd is open.
    check_int(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) })?;
    Ok(st.f_type)
}

/// The lowest fd number the parent hands the child anything at: the child dups its stdio onto
/// 0-2 and a job's extra output channels onto 3.. (at most `FIRST_FREE_FD - 3` of them), which
/// must not clobber an fd it still needs.
pub const FIRST_FREE_FD: RawFd = 10;

/// Returns an fd numbered [`FIRST_FREE_FD`] or higher (close-on-exec) for the same file.
pub fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, Errno> {
    if fd.as_raw_fd() >= FIRST_FREE_FD {
        return Ok(fd);
    }
    // SAFETY: fcntl on a valid fd; no pointers.
    let new = check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FIRST_FREE_FD) })?;
    // SAFETY: F_DUPFD_CLOEXEC returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`.
pub fn socketpair() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    check_int(unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    })?;
    // SAFETY: socketpair returned two fresh fds that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `send(fd, buf, MSG_NOSIGNAL)`: a gone peer is EPIPE, never SIGPIPE to the caller's process.
pub fn send_nosignal(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    // SAFETY: buf is a valid readable slice of buf.len() bytes.
    let rc = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    check(rc as c_long).map(|n| n as usize)
}

/// `prctl(PR_SET_SECUREBITS, bits)`.
pub fn set_securebits(bits: c_ulong) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) })?;
    Ok(())
}

/// `stat(path)`: (device, inode), following symlinks.
pub fn stat_ids(path: &CStr) -> Result<(u64, u64), Errno> {
    // SAFETY: stat is plain data; all-zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid out-pointer.
    check_int(unsafe { libc::stat(path.as_ptr(), &mut st) })?;
    Ok((st.st_dev, st.st_ino))
}

struct SharedCall<'a, T> {
    f: fn(&T) -> !,
    arg: &'a T,
}

extern "C" fn shared_call_trampoline<T>(p: *mut std::ffi::c_void) -> c_int {
    // SAFETY: `p` is the `SharedCall<T>` that `spawn_shared` passed; the caller is suspended
    // (CLONE_VFORK) until this process execs or exits, so it is alive and unchanged.
    let call = unsafe { &*(p as *const SharedCall<'_, T>) };
    (call.f)(call.arg)
}

/// Starts `f(arg)` in a new process that shares this one's memory until it execs or exits
/// (`clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does): no page tables are copied. This
/// process is suspended until then. `f` must only exec or `exit`; `stack` is its stack.
pub fn spawn_shared<T>(stack: &mut [u8], f: fn(&T) -> !, arg: &T) -> Result<i32, Errno> {
    let call = SharedCall { f, arg };
    let end = stack.as_mut_ptr_range().end as usize;
    let top = (end & !15) as *mut std::ffi::c_void;
    // SAFETY: `top` is the 16-byte aligned end of a live, exclusively borrowed buffer used as
    // the child's stack; `call` outlives the child's use of it because CLONE_VFORK suspends us
    // until the child execs or exits; the trampoline never returns into this frame.
    let rc = unsafe {
        libc::clone(
            shared_call_trampoline::<T>,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &call as *const SharedCall<'_, T> as *mut std::ffi::c_void,
        )
    };
    check_int(rc)
}

/// Installs `handler` for `sig` with `libc::sigaction` (async-signal-safe), all signals blocked
/// while it runs.
pub fn set_handler(sig: c_int, handler: extern "C" fn(c_int)) -> Result<(), Errno> {
    // SAFETY: sigaction is plain data; all-zero is a valid starting value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: sa.sa_mask is a valid sigset_t to fill.
    unsafe { libc::sigfillset(&mut sa.sa_mask) };
    // SAFETY: sa is a valid sigaction; the old-action pointer is NULL.
    check_int(unsafe { libc::sigaction(sig, &sa, ptr::null_mut()) })?;
    Ok(())
}

/// `kill(pid, sig)`; errors are ignored (the target may be gone).
pub fn kill(pid: i32, sig: c_int) {
    // SAFETY: integer arguments only.
    unsafe { libc::kill(pid, sig) };
}

// ---------------------------------------------------------------------------------------------
// Privileges, Landlock, seccomp (child-safe unless marked).
// ---------------------------------------------------------------------------------------------

/// `prctl(PR_CAPBSET_DROP, cap)`.
pub fn drop_bounding_cap(cap: u32) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
pub fn clear_ambient_caps() -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// `capset`: empty effective, permitted and inheritable sets (version 3, 64 capabilities).
pub fn clear_caps() -> Result<(), Errno> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = Header { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let data =
        [Data { effective: 0, permitted: 0, inheritable: 0 }, Data { effective: 0, permitted: 0, inheritable: 0 }];
    // SAFETY: header and the two data words are valid for the v3 layout the version names.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) })?;
    Ok(())
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
pub fn set_no_new_privs() -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as c_ulong, 0, 0, 0) })?;
    Ok(())
}

const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;

/// The kernel's Landlock ABI version; 0 when Landlock is missing or disabled. (Parent side.)
pub fn landlock_abi() -> u32 {
    // SAFETY: a NULL attribute with size 0 and the VERSION flag only queries the ABI.
    let rc = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, ptr::null::<u8>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    u32::try_from(rc).unwrap_or(0)
}

/// `open(path, O_PATH | O_CLOEXEC)`.
pub fn open_path(path: &CStr) -> Result<RawFd, Errno> {
    // SAFETY: path is NUL-terminated.
    check_int(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })
}

/// `landlock_add_rule(ruleset, PATH_BENEATH, {access, parent_fd})`.
pub fn landlock_add_path_rule(ruleset: RawFd, parent: RawFd, access: u64) -> Result<(), Errno> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    let attr = PathBeneath { allowed_access: access, parent_fd: parent };
    // SAFETY: attr is a valid landlock_path_beneath_attr (packed, as the UAPI declares it).
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        )
    })?;
    Ok(())
}

/// `landlock_restrict_self(ruleset, 0)`.
pub fn landlock_restrict_self(ruleset: RawFd) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) })?;
    Ok(())
}

/// One classic-BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`: returns the listener fd when `listener`.
pub fn seccomp_install(prog: &[SockFilter], listener: bool) -> Result<Option<RawFd>, Errno> {
    #[repr(C)]
    struct SockFprog {
        len: u16,
        filter: *const SockFilter,
    }
    let fprog = SockFprog { len: u16::try_from(prog.len()).unwrap_or(u16::MAX), filter: prog.as_ptr() };
    let flags: c_ulong = if listener { libc::SECCOMP_FILTER_FLAG_NEW_LISTENER as c_ulong } else { 0 };
    // SAFETY: fprog points at `prog`, which outlives the call; the kernel copies it.
    let rc = check(unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, flags, &fprog as *const SockFprog)
    })?;
    Ok(listener.then_some(rc as RawFd))
}

/// Sends one fd over a unix socket (`SCM_RIGHTS`), with a one-byte payload.
pub fn send_fd(sock: RawFd, fd: RawFd) -> Result<(), Errno> {
    #[repr(C)]
    struct Cmsg {
        len: usize,
        level: c_int,
        kind: c_int,
        fd: c_int,
        _pad: c_int,
    }
    let mut byte = [b'F'];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut cmsg = Cmsg { len: 20, level: libc::SOL_SOCKET, kind: libc::SCM_RIGHTS, fd, _pad: 0 };
    // SAFETY: msghdr is plain data; all-zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&mut cmsg as *mut Cmsg).cast();
    msg.msg_controllen = std::mem::size_of::<Cmsg>();
    // SAFETY: msg points at live iov and control buffers laid out as CMSG_SPACE(sizeof(int)).
    check(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) } as c_long)?;
    Ok(())
}

/// Receives one fd sent with [`send_fd`]; `Ok(None)` at end of stream. (Parent side.)
pub fn recv_fd(sock: BorrowedFd<'_>) -> Result<Option<OwnedFd>, Errno> {
    let mut byte = [0u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; all-zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: msg points at live buffers of the sizes given.
    let n = check(unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) } as c_long)?;
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled `control`; CMSG_FIRSTHDR/CMSG_DATA walk within msg_controllen.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_level != libc::SOL_SOCKET || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(Errno(libc::EPROTO));
        }
        let fd = ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const c_int);
        Ok(Some(OwnedFd::from_raw_fd(fd)))
    }
}

/// A seccomp user notification (`struct seccomp_notif`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SeccompNotif {
    pub id: u64,
    pub pid: u32,
    pub flags: u32,
    pub nr: i32,
    pub arch: u32,
    pub instruction_pointer: u64,
    pub args: [u64; 6],
}

#[repr(C)]
struct SeccompNotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

const SECCOMP_IOCTL_NOTIF_RECV: c_ulong = 0xc050_2100;
const SECCOMP_IOCTL_NOTIF_SEND: c_ulong = 0xc018_2101;
const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;

/// Receives a pending seccomp notification. (Parent side.)
pub fn seccomp_notif_recv(listener: BorrowedFd<'_>) -> Result<SeccompNotif, Errno> {
    // SAFETY: SeccompNotif is plain data; the kernel requires it zeroed.
    let mut n: SeccompNotif = unsafe { std::mem::zeroed() };
    // SAFETY: n is a valid, zeroed seccomp_notif of the size the ioctl number encodes.
    check_int(unsafe { libc::ioctl(listener.as_raw_fd(), SECCOMP_IOCTL_NOTIF_RECV, &mut n as *mut SeccompNotif) })?;
    Ok(n)
}

/// Answers a notification: `Ok(())` lets the system call run, `Err(errno)` fails it. (Parent.)
pub fn seccomp_notif_send(listener: BorrowedFd<'_>, id: u64, answer: Result<(), i32>) -> Result<(), Errno> {
    let resp = match answer {
        Ok(()) => SeccompNotifResp { id, val: 0, error: 0, flags: SECCOMP_USER_NOTIF_FLAG_CONTINUE },
        Err(e) => SeccompNotifResp { id, val: 0, error: -e, flags: 0 },
    };
    // SAFETY: resp is a valid seccomp_notif_resp of the size the ioctl number encodes.
    check_int(unsafe {
        libc::ioctl(listener.as_raw_fd(), SECCOMP_IOCTL_NOTIF_SEND, &resp as *const SeccompNotifResp)
    })?;
    Ok(())
}

/// Whether this kernel has seccomp (`prctl(PR_GET_SECCOMP)` answers). (Parent side.)
pub fn seccomp_available() -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Overwrites `[start, end)` of this process's memory with zeros. Used by the run's init on the
/// argv/environ area it inherited from the supervisor, so `/proc/1/cmdline` shows nothing.
///
/// The range must be this process's own argument or environment area as the kernel reports it
/// (`/proc/self/stat` fields 48-51): mapped, writable, and not read by anything afterwards.
pub fn zero_own_args_area(start: usize, end: usize) {
    if start == 0 || end <= start {
        return;
    }
    // SAFETY: per the contract above, [start, end) is the writable argv/environ area at the top
    // of this (forked, private) process's stack; volatile writes keep the compiler from dropping
    // them; no Rust reference points into it.
    unsafe {
        let mut p = start as *mut u8;
        while (p as usize) < end {
            ptr::write_volatile(p, 0);
            p = p.add(1);
        }
    }
}

/// `prctl(PR_SET_NAME, name)`: the process's `comm`.
pub fn set_name(name: &CStr) {
    // SAFETY: name is NUL-terminated (the kernel copies at most 16 bytes).
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as c_ulong, 0, 0, 0) };
}

/// `access(path, W_OK)` with the caller's real ids: may this user create entries in `path`?
pub fn writable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: c is NUL-terminated.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Sets this thread's filesystem uid and gid (`setfsuid`/`setfsgid` act on the calling thread
/// only); returns the previous ones. Used around file creation in a tmpfs that belongs to a
/// jail's user namespace, where host root is not mapped. (Parent side.)
pub fn set_thread_fsids(uid: u32, gid: u32) -> (u32, u32) {
    // SAFETY: integer arguments; both calls return the previous id and cannot fail in a way that
    // matters here (an id the caller may not take leaves the old one, which the caller restores).
    let old_gid = unsafe { libc::syscall(libc::SYS_setfsgid, gid) };
    // SAFETY: as above.
    let old_uid = unsafe { libc::syscall(libc::SYS_setfsuid, uid) };
    (u32::try_from(old_uid).unwrap_or(0), u32::try_from(old_gid).unwrap_or(0))
}

/// The path an fd was opened with (`/proc/self/fd/N`), for messages.
pub fn fd_path(fd: BorrowedFd<'_>) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_else(|_| "?".into())
}

/// CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`). (Parent side.)
pub fn thread_cpu_time() -> Duration {
    // SAFETY: timespec is plain data; all-zero is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: ts is a valid out-pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// Takes an exclusive open-file-description lock on byte `offset` of the file (`F_OFD_SETLK`,
/// never waiting): `Ok(false)` when another open file description holds it. The lock goes with
/// the description: closed, or its process dead, it is free again. (Parent side.)
pub fn ofd_lock_byte(fd: BorrowedFd<'_>, offset: u64) -> Result<bool, Errno> {
    // SAFETY: flock is plain data; all-zero is a valid starting value (l_pid must be 0 for OFD).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = libc::off_t::try_from(offset).map_err(|_| Errno(libc::EOVERFLOW))?;
    fl.l_len = 1;
    // SAFETY: fd is open; fl is a valid struct flock.
    match check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &fl as *const libc::flock) }) {
        Ok(_) => Ok(true),
        Err(Errno(libc::EAGAIN | libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes this thread's effective uid `uid` (real and saved stay root) with its capabilities
/// kept (`SECBIT_NO_SETUID_FIXUP` on this thread), so that a `clone3` with `CLONE_NEWUSER` made
/// next creates a user namespace owned by `uid`. Credentials are per thread in the kernel and
/// these are raw calls (glibc's `setresuid` would change every thread). Returns the securebits
/// to give back to [`thread_restore_root`], which must follow on this thread. (Parent side.)
pub fn thread_become_owner(uid: u32) -> Result<c_ulong, Errno> {
    // SAFETY: integer arguments only.
    let old = check_int(unsafe { libc::prctl(libc::PR_GET_SECUREBITS, 0, 0, 0, 0) })? as c_ulong;
    let keep = old | libc::SECBIT_NO_SETUID_FIXUP as c_ulong;
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, keep, 0, 0, 0) })?;
    // SAFETY: integer arguments only; u32::MAX is -1, "unchanged".
    if let Err(e) = check(unsafe { libc::syscall(libc::SYS_setresuid, u32::MAX, uid, u32::MAX) }) {
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_SECUREBITS, old, 0, 0, 0) };
        return Err(e);
    }
    Ok(old)
}

/// Gives this thread back effective uid 0 and its securebits (after [`thread_become_owner`]).
pub fn thread_restore_root(securebits: c_ulong) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::syscall(libc::SYS_setresuid, u32::MAX, 0u32, u32::MAX) })?;
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, securebits, 0, 0, 0) }).map(drop)
}

/// Whether `path` is on a filesystem mounted read-only (`statvfs` `ST_RDONLY`). (Parent side.)
pub fn statvfs_read_only(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: statvfs is plain data, filled by the kernel.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated; st is a valid statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_flag & libc::ST_RDONLY != 0
}

/// Writes `value` to the file `name` in the directory `dir` (`openat` + `write`), as one write.
pub fn write_at(dir: BorrowedFd<'_>, name: &CStr, value: &[u8]) -> Result<(), Errno> {
    // SAFETY: name is NUL-terminated; dir is an open directory fd.
    let fd = check_int(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    let r = write(fd, value);
    close(fd);
    match r {
        Ok(n) if n == value.len() => Ok(()),
        Ok(_) => Err(Errno(libc::EIO)),
        Err(e) => Err(e),
    }
}

/// Opens the file `name` in the directory `dir` write-only, close-on-exec.
pub fn openat_write(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    // SAFETY: name is NUL-terminated; dir is an open directory fd.
    let fd = check_int(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads the file `name` in the directory `dir` (`openat` + `read`, up to 4 KiB).
pub fn read_at(dir: BorrowedFd<'_>, name: &CStr) -> Result<String, Errno> {
    // SAFETY: name is NUL-terminated; dir is an open directory fd.
    let fd = check_int(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    let mut buf = [0u8; 4096];
    let r = read(fd, &mut buf);
    close(fd);
    let n = r?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Takes ownership of `fd` if it is open in this process (the runner's report channel).
pub fn fd_if_open(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_GETFD only queries the descriptor.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the fd is open and, by the runner's contract, nothing else in this process owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Loads a precompiled Wasm artifact (`Module::deserialize_file`, which maps it as native code).
///
/// Only artifacts this binary produced with the same engine configuration (their name carries
/// the key) are passed here, from a guest directory that only the installing user can write
/// (`wasm::guests::check_owner`, checked by the supervisor before the run) and that the jail sees
/// read-only.
#[cfg(feature = "wasm")]
pub fn deserialize_module(engine: &wasmtime::Engine, path: &std::path::Path) -> wasmtime::Result<wasmtime::Module> {
    // SAFETY: per the contract above, the file is an artifact of this engine configuration that
    // nobody but its installer could have written; wasmtime checks the version and flags itself.
    unsafe { wasmtime::Module::deserialize_file(engine, path) }
}
