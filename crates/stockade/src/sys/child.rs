//! The async-signal-safe wrappers: what the jail's child calls between `clone3` and `execveat`.
//! Only references to data built before fork, one raw system call each, an [`Errno`] back; no
//! allocation, panic or lock.
//!
//! This file holds the fd, process, signal and exec calls; two children hold the rest, and every
//! item of theirs is re-exported here (so `sys::X` names them all): `mount.rs` the filesystem
//! calls the child builds its root with, `confine.rs` the calls that take its privileges away
//! (ids, capabilities, `prctl` flags, Landlock, seccomp). They import from `sys` and `std` only
//! what they name (and `mount.rs` this file's `close`), never anything that allocates.

#![allow(clippy::cast_possible_truncation)]

mod confine;
mod mount;

pub use confine::*;
pub use mount::*;

use super::*;
use std::ffi::{CStr, CString, c_char, c_int, c_long, c_uint, c_ulong};
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr;

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

/// `read(2)` into a buffer nothing initialized (so none of its pages is touched before the
/// kernel writes into them), retried on EINTR: the bytes read, at its start.
pub fn read_into(fd: RawFd, buf: &mut [std::mem::MaybeUninit<u8>]) -> Result<&[u8], Errno> {
    loop {
        // SAFETY: buf is a valid writable region of buf.len() bytes; read(2) only writes to it.
        let rc = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match check(rc as c_long) {
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(e),
            Ok(n) => {
                let n = (n as usize).min(buf.len());
                // SAFETY: read(2) returned n: it wrote the first n bytes of buf.
                return Ok(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) });
            }
        }
    }
}

/// `read(2)`, retried on EINTR.
pub fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: the same bytes seen as maybe-uninitialized ones; `read_into` only writes bytes
    // into them (what the kernel read), so they stay initialized.
    let bytes = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [std::mem::MaybeUninit<u8>]) };
    read_into(fd, bytes).map(<[u8]>::len)
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

/// `prctl(PR_SET_PDEATHSIG, sig)`.
pub fn set_parent_death_signal(sig: c_int) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as c_ulong, 0, 0, 0) })?;
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

/// What this process's reaped children used (`getrusage(RUSAGE_CHILDREN)`), as
/// [`usage_figures`]. Zeros if the call fails.
pub fn children_usage() -> (u64, u64, u64) {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return (0, 0, 0);
    }
    usage_figures(&ru)
}

/// A `rusage`'s user and system CPU in microseconds and its largest resident set in bytes
/// (the kernel counts it in KiB). Plain arithmetic, no panic: the child may use it.
pub fn usage_figures(ru: &libc::rusage) -> (u64, u64, u64) {
    let micros = |t: libc::timeval| {
        u64::try_from(t.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1_000_000)
            .saturating_add(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    (micros(ru.ru_utime), micros(ru.ru_stime), u64::try_from(ru.ru_maxrss).unwrap_or(0).saturating_mul(1024))
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
/// process is suspended until then. `f` must only exec or `exit`; `stack` is its stack (left
/// uninitialized: only the pages the child uses are ever touched).
pub fn spawn_shared<T>(stack: &mut [std::mem::MaybeUninit<u8>], f: fn(&T) -> !, arg: &T) -> Result<i32, Errno> {
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

/// `sigaction(sig, SIG_IGN)`.
pub fn ignore_signal(sig: c_int) -> Result<(), Errno> {
    // SAFETY: sigaction is plain data; all-zero is a valid starting value.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = libc::SIG_IGN;
    // SAFETY: sa is a valid sigaction; the old-action pointer is NULL.
    check_int(unsafe { libc::sigaction(sig, &sa, ptr::null_mut()) })?;
    Ok(())
}

/// `kill(pid, sig)`; errors are ignored (the target may be gone).
pub fn kill(pid: i32, sig: c_int) {
    // SAFETY: integer arguments only.
    unsafe { libc::kill(pid, sig) };
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

/// Overwrites this process's argv and environ areas with zeros: the run's init, a fork of the
/// supervisor, scrubs what it inherited so `/proc/1/cmdline` shows nothing.
pub fn scrub_args(areas: &ArgsAreas) {
    for &(start, end) in &areas.0 {
        if start == 0 || end <= start {
            continue;
        }
        // [start, end) comes from `ArgsAreas::of_this_process` (its only constructor), in the
        // supervisor this process is a fork of; volatile writes are never dropped.
        // SAFETY: that area (argv or environ) is mapped and writable at the top of this private
        // copy of the stack, and no Rust reference points into it.
        unsafe {
            let mut p = start as *mut u8;
            while (p as usize) < end {
                ptr::write_volatile(p, 0);
                p = p.add(1);
            }
        }
    }
}

/// `prctl(PR_SET_NAME, name)`: the process's `comm`.
pub fn set_name(name: &CStr) {
    // SAFETY: name is NUL-terminated (the kernel copies at most 16 bytes).
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as c_ulong, 0, 0, 0) };
}

/// `clone(SIGCHLD)`: a plain fork, without libc's fork handlers. Returns 0 in the new process,
/// its pid in this one.
pub fn fork_plain() -> Result<i32, Errno> {
    // SAFETY: a fork with no shared memory and no new stack: the new process continues on a
    // copy of this one's, as with fork(2).
    let rc = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as c_ulong, 0usize, 0usize, 0usize, 0usize) };
    check(rc).map(|pid| pid as i32)
}

/// Closes every fd from `first` up but those in `keep` (sorted, ascending).
pub fn close_from_except(first: u32, keep: &[RawFd]) -> Result<(), Errno> {
    let mut from = first;
    for &k in keep {
        let Ok(k) = u32::try_from(k) else { continue };
        if k < from {
            continue;
        }
        if k > from {
            close_range(from, k - 1)?;
        }
        from = k + 1;
    }
    close_range(from, u32::MAX)
}

/// The signals a fault in generated code raises (a Wasm engine's traps: guard pages, `ud2`).
pub const FAULT_SIGNALS: [c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE];

/// This process's handlers of [`FAULT_SIGNALS`], taken before a fork and put back in a copy
/// that runs this process's code instead of exec'ing (the jail's child resets every handler).
#[derive(Clone, Copy)]
pub struct FaultHandlers([libc::sigaction; 4]);

impl std::fmt::Debug for FaultHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultHandlers")
    }
}

impl FaultHandlers {
    /// The handlers now (`Err`: one cannot be read).
    pub fn now() -> Result<FaultHandlers, Errno> {
        // SAFETY: sigaction is plain data; all-zero is a valid value to overwrite.
        let mut all: [libc::sigaction; 4] = unsafe { std::mem::zeroed() };
        for (sig, sa) in FAULT_SIGNALS.iter().zip(all.iter_mut()) {
            // SAFETY: a NULL new action only reads the current one into `sa`, a valid pointer.
            check_int(unsafe { libc::sigaction(*sig, ptr::null(), sa) })?;
        }
        Ok(FaultHandlers(all))
    }

    /// Installs them (async-signal-safe: `sigaction` only).
    pub fn restore(&self) -> Result<(), Errno> {
        for (sig, sa) in FAULT_SIGNALS.iter().zip(self.0.iter()) {
            // SAFETY: `sa` is an action read by `now` in the process this one is a copy of; its
            // handler's code is mapped at the same address here.
            check_int(unsafe { libc::sigaction(*sig, sa, ptr::null_mut()) })?;
        }
        Ok(())
    }
}

/// Brings the loopback interface of this process's network namespace up (`SIOCSIFFLAGS` on a
/// datagram socket made for it, closed after): needs `CAP_NET_ADMIN` over the namespace.
pub fn loopback_up() -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    let sock = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) } as c_long)?;
    let sock = sock as RawFd;
    // SAFETY: ifreq is plain data; all-zero is a valid starting value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo") {
        *dst = *src as c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the flags of the interface `req` names into `req`.
    let got = check_int(unsafe { libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) });
    let set = got.and_then(|_| {
        // SAFETY: the union's flags member is the one SIOCGIFFLAGS filled in.
        unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
        // SAFETY: SIOCSIFFLAGS reads `req`, a live ifreq naming the interface.
        check_int(unsafe { libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) })
    });
    close(sock);
    set.map(|_| ())
}

/// A TCP socket listening on `127.0.0.1:port` (close-on-exec, `backlog` pending connections).
pub fn listen_loopback(port: u16, backlog: c_int) -> Result<RawFd, Errno> {
    // SAFETY: integer arguments only.
    let sock = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) } as c_long)?;
    let sock = sock as RawFd;
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `addr` is a live sockaddr_in of `len` bytes.
    let bound = check_int(unsafe { libc::bind(sock, (&addr as *const libc::sockaddr_in).cast(), len) });
    // SAFETY: integer arguments only.
    match bound.and_then(|_| check_int(unsafe { libc::listen(sock, backlog) })) {
        Ok(_) => Ok(sock),
        Err(e) => {
            close(sock);
            Err(e)
        }
    }
}
