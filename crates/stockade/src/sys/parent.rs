//! The supervisor's wrappers: they may allocate and return owned values.

#![allow(clippy::cast_possible_truncation)]

use super::*;
use std::ffi::{CStr, CString, c_int, c_long, c_uint, c_ulong};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

/// `clone3` with `CLONE_PIDFD` and the given namespace flags (and `CLONE_INTO_CGROUP` with
/// `cgroup_fd`), no exit signal (so a caller's `waitpid(-1)` reaper or `SIGCHLD = SIG_IGN` cannot
/// take the child's status from us). The new process runs `child`, which never returns: it
/// cannot fall back into the caller's code on a copy of its stack. The caller gets the child's
/// pid and a pidfd for it. (`Infallible` stands for `!`, which a closure's type cannot name on
/// stable Rust: a closure that ends in `exit` or `exec` has it.)
///
/// The child is a copy of a process that may have had other threads: `child` must keep to the
/// async-signal-safe wrappers of `sys/child.rs` (no allocation, no lock) until it execs or exits
/// — what `tests/no_alloc.rs` checks of the jail's child.
pub fn clone_into(
    flags: u64,
    cgroup_fd: Option<RawFd>,
    child: impl FnOnce() -> std::convert::Infallible,
) -> Result<(i32, OwnedFd), Errno> {
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
    // copy-on-write copy of this stack and returns here, as with fork(2), and goes straight into
    // `child`, which never returns.
    let rc = check(unsafe {
        libc::syscall(libc::SYS_clone3, &args as *const libc::clone_args, std::mem::size_of::<libc::clone_args>())
    })?;
    if rc == 0 {
        in_child(child);
    }
    // SAFETY: the kernel stored a fresh pidfd that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok((rc as i32, pidfd))
}

/// The cloned child's whole life. A panic in it must never unwind into its copy of the caller's
/// frames (it would go on as the supervisor, inside the jail): it ends the child.
#[allow(unreachable_code)] // the guard is only ever dropped by an unwinding panic
fn in_child(child: impl FnOnce() -> std::convert::Infallible) -> ! {
    let _exit_on_unwind = ExitOnUnwind;
    // `Infallible` has no value: `child` diverges (the callers' closures end in `-> !`).
    match child() {}
}

/// Ends a cloned child (with the setup-failure code) when a panic unwinds through it.
struct ExitOnUnwind;

impl Drop for ExitOnUnwind {
    fn drop(&mut self) {
        super::child::exit(super::EXIT_SETUP_FAILED);
    }
}

/// This process's argv and environ areas, as the kernel reports them (`/proc/self/stat` fields
/// 48-51), read once: what the run's init, a fork of this process, zeroes so that
/// `/proc/1/cmdline` shows none of the supervisor's arguments ([`scrub_args`]). Only this
/// constructor makes one, so only these areas are ever zeroed.
#[derive(Debug, Clone, Copy)]
pub struct ArgsAreas(pub(super) [(usize, usize); 2]);

impl ArgsAreas {
    pub fn of_this_process() -> ArgsAreas {
        use std::sync::OnceLock;
        static AREAS: OnceLock<ArgsAreas> = OnceLock::new();
        *AREAS.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            // Fields after the command name, which ends with ") ", start at field 3.
            let fields: Vec<usize> = stat
                .rsplit_once(") ")
                .map(|(_, rest)| rest.split_whitespace().map(|f| f.parse().unwrap_or(0)).collect())
                .unwrap_or_default();
            let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
            ArgsAreas([(field(48), field(49)), (field(50), field(51))])
        })
    }
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
#[derive(Clone, Copy, Debug, Default)]
pub struct Reaped {
    /// `si_code`: CLD_EXITED, CLD_KILLED or CLD_DUMPED.
    pub code: i32,
    /// The exit code, or the signal number.
    pub status: i32,
    pub user: Duration,
    pub system: Duration,
    pub max_rss_bytes: u64,
}

impl Reaped {
    /// The wait status `wait4` would have given (`WIFEXITED`, `WTERMSIG`... read it).
    pub fn wait_status(&self) -> i32 {
        match self.code {
            libc::CLD_EXITED => (self.status & 0xff) << 8,
            libc::CLD_DUMPED => (self.status & 0x7f) | 0x80,
            _ => self.status & 0x7f,
        }
    }
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
    let (user, system, max_rss_bytes) = super::usage_figures(&ru);
    Ok(Reaped {
        code: info.si_code,
        // SAFETY: for a CLD_* siginfo the kernel filled si_status.
        status: unsafe { info.si_status() },
        user: Duration::from_micros(user),
        system: Duration::from_micros(system),
        max_rss_bytes,
    })
}

/// `waitid(P_ALL, 0, WEXITED | WNOHANG | WNOWAIT | __WALL)`: whether this process has a child
/// at all, running or exited (none is reaped).
pub fn has_children() -> Result<bool, Errno> {
    // SAFETY: siginfo_t is plain data; all-zero is valid.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: info is a valid out-pointer; a NULL rusage.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_waitid,
                libc::P_ALL,
                0,
                &mut info as *mut libc::siginfo_t,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
                ptr::null::<libc::rusage>(),
            )
        };
        match check(rc) {
            Err(Errno(libc::EINTR)) => continue,
            Err(Errno(libc::ECHILD)) => return Ok(false),
            Err(e) => return Err(e),
            Ok(_) => return Ok(true),
        }
    }
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

/// The kernel's Landlock ABI version; 0 when Landlock is missing or disabled. (Parent side.)
pub fn landlock_abi() -> u32 {
    // SAFETY: a NULL attribute with size 0 and the VERSION flag only queries the ABI.
    let rc = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, ptr::null::<u8>(), 0usize, LANDLOCK_CREATE_RULESET_VERSION)
    };
    u32::try_from(rc).unwrap_or(0)
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

const SECCOMP_IOCTL_NOTIF_ID_VALID: c_ulong = 0x4008_2102;

/// Answers a notification with a return value: the system call is not run, and the caller
/// sees `val` as its result. (Parent side.)
pub fn seccomp_notif_return(listener: BorrowedFd<'_>, id: u64, val: i64) -> Result<(), Errno> {
    let resp = SeccompNotifResp { id, val, error: 0, flags: 0 };
    // SAFETY: resp is a valid seccomp_notif_resp of the size the ioctl number encodes.
    check_int(unsafe {
        libc::ioctl(listener.as_raw_fd(), SECCOMP_IOCTL_NOTIF_SEND, &resp as *const SeccompNotifResp)
    })?;
    Ok(())
}

/// Whether the notification `id` is still pending: its caller is still in that system call, so
/// the pid it came with still names that caller. (Parent side.)
pub fn seccomp_notif_id_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 through the pointer, which is valid for the call.
    unsafe { libc::ioctl(listener.as_raw_fd(), SECCOMP_IOCTL_NOTIF_ID_VALID, &id as *const u64) == 0 }
}

/// The bytes waiting in a pipe, asked through either of its ends (`FIONREAD`). (Parent side.)
pub fn pipe_queued(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer, which is valid for the call.
    check_int(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut n as *mut libc::c_int) })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The host's memory (`sysinfo`'s total RAM), bytes.
pub fn host_memory_bytes() -> u64 {
    // SAFETY: struct sysinfo is plain data; all-zero is a valid value to fill.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: info is a valid out-pointer for the call.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return 0;
    }
    info.totalram.saturating_mul(u64::from(info.mem_unit.max(1)))
}

/// A run's own figures, as `sysinfo(2)` gives the host's.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysinfoFigures {
    pub uptime_s: i64,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub procs: u16,
}

/// Writes `figures` as a `struct sysinfo` at `addr` in process `pid`'s memory
/// (`process_vm_writev`): the answer to its `sysinfo(addr)`. (Parent side.)
pub fn write_sysinfo(pid: i32, addr: u64, figures: SysinfoFigures) -> Result<(), Errno> {
    // SAFETY: struct sysinfo is plain data; all-zero is a valid value (no load, no swap).
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    info.uptime = figures.uptime_s;
    info.totalram = figures.total_bytes;
    info.freeram = figures.free_bytes;
    info.procs = figures.procs;
    info.mem_unit = 1;
    let len = std::mem::size_of::<libc::sysinfo>();
    let local = libc::iovec { iov_base: &mut info as *mut libc::sysinfo as *mut std::ffi::c_void, iov_len: len };
    let remote = libc::iovec { iov_base: addr as usize as *mut std::ffi::c_void, iov_len: len };
    // SAFETY: `local` points at `info`, alive and `len` bytes long; the remote range is only
    // written in the other process (the kernel checks it there, EFAULT if it is not mapped).
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    match n {
        -1 => Err(Errno::last()),
        n if n as usize == len => Ok(()),
        _ => Err(Errno(libc::EFAULT)),
    }
}

/// Reads a NUL-terminated string of at most `max` bytes at `addr` in process `pid`'s memory
/// (a path an exec the seccomp listener holds names), without the NUL. `EFAULT` when it is not
/// mapped there or has no NUL within `max`. (Parent side.)
pub fn read_remote_cstr(pid: i32, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        // One page at a time: a read across into an unmapped page would fail whole.
        let n = usize::try_from((PAGE - at % PAGE).min((max - out.len()) as u64)).unwrap_or(0);
        let mut buf = vec![0u8; n];
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: n };
        let remote = libc::iovec { iov_base: at as usize as *mut std::ffi::c_void, iov_len: n };
        // SAFETY: `local` points at `buf`, alive and `n` bytes long; the remote range is only read
        // in the other process (the kernel checks it there, EFAULT if it is not mapped).
        let got = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        let got = match got {
            -1 => return Err(Errno::last()),
            0 => return Err(Errno(libc::EFAULT)),
            g => g as usize,
        };
        if let Some(end) = buf[..got].iter().position(|b| *b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&buf[..got]);
        at += got as u64;
    }
    Err(Errno(libc::EFAULT))
}

/// Whether this kernel has seccomp (`prctl(PR_GET_SECCOMP)` answers). (Parent side.)
pub fn seccomp_available() -> bool {
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
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

/// Opens the file `name` in the directory `dir` read-only, close-on-exec.
pub fn openat_read(dir: BorrowedFd<'_>, name: &CStr) -> Result<OwnedFd, Errno> {
    // SAFETY: name is NUL-terminated; dir is an open directory fd.
    let fd = check_int(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: fd was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads the file `name` in the directory `dir` (`openat` + `read`, up to 4 KiB).
pub fn read_at(dir: BorrowedFd<'_>, name: &CStr) -> Result<String, Errno> {
    let fd = openat_read(dir, name)?;
    let mut buf = [0u8; 4096];
    let n = read(fd.as_raw_fd(), &mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// `setns(fd, CLONE_NEWNET)`: the calling thread joins the network namespace `fd` names.
pub fn setns_net(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: an fd and an integer flag; no pointers.
    check_int(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}
