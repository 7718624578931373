//! File descriptors: the program gets exactly fds 0, 1 and 2 (and stockade's own Wasm runner
//! its report channel as fd 3).
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
    /// The Wasm runner's report channel, which the program gets as fd 3.
    pub runner: Option<RawFd>,
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
    // Last, the one fd beyond stdio the program may get (dup2 clears close-on-exec).
    match f.runner {
        Some(fd) => sys::dup2(fd, 3),
        None => Ok(()),
    }
}
