//! The async-signal-safe calls that take the jail's child's privileges away before `execveat`:
//! rlimits, groups and ids, `prctl` flags (securebits, no-new-privs, not dumpable), capability
//! sets, Landlock and seccomp. The same rules as the rest of `child`: only references to data
//! built before fork, one raw system call each, an [`Errno`] back; no allocation, panic or lock.
//! It imports only the `sys` errno helpers, constants and [`SockFilter`], and
//! `std::ffi`/`std::os::fd`/`std::ptr` types (nothing that allocates).

#![allow(clippy::cast_possible_truncation)]

use crate::sys::{Errno, LANDLOCK_RULE_PATH_BENEATH, SockFilter, check, check_int};
use std::ffi::{CStr, c_int, c_ulong};
use std::os::fd::RawFd;
use std::ptr;

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

/// `prctl(PR_SET_DUMPABLE, 0)`: /proc/PID of this process becomes unreadable to its peers.
pub fn set_not_dumpable() -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as c_ulong, 0, 0, 0) })?;
    Ok(())
}

/// `prctl(PR_SET_SECUREBITS, bits)`.
pub fn set_securebits(bits: c_ulong) -> Result<(), Errno> {
    // SAFETY: integer arguments only.
    check_int(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) })?;
    Ok(())
}

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
