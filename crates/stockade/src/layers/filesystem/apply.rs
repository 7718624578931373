//! The child's side: the mount ops, one system call each, on C strings built before fork.

use super::{BindSource, FsPlan, MountOp};
use crate::sys::{self, Errno};
use std::ffi::c_ulong;
use std::os::fd::RawFd;

/// Child side: runs the ops in order. `trees` are this run's detached mounts (`BindSource::Tree`),
/// `sync` the release channel the staged directories go to the supervisor over. On failure
/// returns the index of the op and the errno.
pub fn apply(plan: &FsPlan, trees: &[RawFd], sync: RawFd) -> Result<(), (u32, Errno)> {
    for (i, op) in plan.ops.iter().enumerate() {
        apply_one(op, trees, sync).map_err(|e| (u32::try_from(i).unwrap_or(u32::MAX), e))?;
    }
    Ok(())
}

fn apply_one(op: &MountOp, trees: &[RawFd], sync: RawFd) -> Result<(), Errno> {
    match op {
        MountOp::PrivateRoot => sys::mount(None, c"/", None, (libc::MS_REC | libc::MS_PRIVATE) as c_ulong, None),
        MountOp::Tmpfs { target, flags, data } => {
            sys::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data))
        }
        MountOp::Proc { target, data } => sys::mount(
            Some(c"proc"),
            target,
            Some(c"proc"),
            (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as c_ulong,
            data.as_deref(),
        ),
        MountOp::Mkdir { path } => sys::mkdir(path, 0o755),
        MountOp::Touch { path } => sys::create_file(path, 0o444),
        MountOp::Symlink { target, link } => sys::symlink(target, link),
        MountOp::Bind { source: BindSource::Tree(i), target } => {
            let fd = trees.get(*i).copied().ok_or(Errno(libc::EBADF))?;
            sys::move_mount(fd, target)
        }
        MountOp::Bind { source: BindSource::Path { source, dev, ino }, target } => {
            sys::mount(Some(source), target, None, (libc::MS_BIND | libc::MS_REC) as c_ulong, None)?;
            if sys::stat_ids(target)? != (*dev, *ino) {
                return Err(Errno(libc::ESTALE));
            }
            Ok(())
        }
        MountOp::Send { target } => {
            let fd = sys::open_path_dir(target)?;
            let sent = sys::send_fd(sync, fd);
            sys::close(fd);
            sent
        }
        MountOp::SetAttr { target, set, recursive } => sys::mount_setattr(target, *recursive, *set, 0),
        MountOp::PivotRoot { new_root } => {
            sys::chdir(new_root)?;
            sys::pivot_root(c".", c".")?;
            sys::umount2(c".", libc::MNT_DETACH)?;
            sys::chdir(c"/")
        }
        MountOp::Chdir { path } => sys::chdir(path),
    }
}
