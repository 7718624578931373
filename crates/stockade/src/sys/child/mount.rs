//! The async-signal-safe filesystem calls the jail's child builds its root with, between `clone3`
//! and `execveat`: mounts (`mount`, `mount_setattr`, `move_mount`, `pivot_root`, `umount2`), the
//! mount points and links made for them, and the opens and stats that check what was mounted.
//! The same rules as the rest of `child`: only references to data built before fork, one raw
//! system call each, an [`Errno`] back; no allocation, panic or lock. It imports only the `sys`
//! errno helpers and constants, `child`'s own [`close`], and `std::ffi`/`std::os::fd`/`std::ptr`
//! types (nothing that allocates).

#![allow(clippy::cast_possible_truncation)]

use super::close;
use crate::sys::{AT_RECURSIVE, Errno, MountAttr, check, check_int};
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulong};
use std::os::fd::RawFd;
use std::ptr;

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

/// `stat(path)`: (device, inode), following symlinks.
pub fn stat_ids(path: &CStr) -> Result<(u64, u64), Errno> {
    // SAFETY: stat is plain data; all-zero is valid.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated; st is a valid out-pointer.
    check_int(unsafe { libc::stat(path.as_ptr(), &mut st) })?;
    Ok((st.st_dev, st.st_ino))
}
