//! File descriptors: the program gets exactly fds 0, 1 and 2, and the job's extra output channels
//! as fds 3, 4... (stockade's own Wasm runner: its summary and its compiled module).
//!
//! The child dups its stdio into place, then closes every other fd except the few the jail still
//! needs (all close-on-exec): the caller's leftovers, an inherited cwd fd, other runs' pipes.

use crate::sys::{self, Errno};
use std::os::fd::RawFd;

/// What the child's fd table should become. All fds are >= 3 (the parent ensures it), and
/// `keep` is sorted.
#[derive(Debug)]
pub struct ChildFds<'a> {
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
    /// The job's extra output channels, which the program gets as fds 3, 4... (all of them at or
    /// above `sys::FIRST_FREE_FD`, so no dup clobbers another).
    pub extra: &'a [RawFd],
    pub keep: &'a [RawFd],
}

/// Child side.
pub fn apply(f: &ChildFds<'_>) -> Result<(), Errno> {
    sys::dup2(f.stdin, 0)?;
    sys::dup2(f.stdout, 1)?;
    sys::dup2(f.stderr, 2)?;
    let mut next: RawFd = 3;
    for &fd in f.keep {
        if fd > next {
            sys::close_range(next as u32, (fd - 1) as u32)?;
        }
        next = next.max(fd + 1);
    }
    sys::close_range(next as u32, u32::MAX)?;
    // The fds kept are close-on-exec already; make sure of it.
    sys::cloexec_from(3)?;
    // Last, the fds beyond stdio the program gets (dup2 clears close-on-exec).
    for (target, &fd) in (3..).zip(f.extra) {
        sys::dup2(fd, target)?;
    }
    Ok(())
}
