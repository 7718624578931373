//! Every `unsafe` block in stockade lives here, crate-private: thin wrappers, most of them one
//! system call each, in four files by who may call them.
//!
//! - `child.rs`: the **async-signal-safe** wrappers, called between fork and exec. They take only
//!   references to data built before fork (`&CStr`, slices, integers), make one raw system call,
//!   and return [`Errno`]. They never allocate, panic or take a lock, so they are safe to call even
//!   when the supervisor was multithreaded at fork time.
//! - `parent.rs`: the supervisor's; they may allocate and return owned values.
//! - `runner.rs`: the Wasm runner's, after its exec (a new, single-threaded process).
//! - `code.rs`: a process's own code moved into anonymous huge pages and back (a spawner before
//!   it forks, a program's helper after), each step checking that the process has one thread.
//!
//! A wrapper whose safety depends on how it is called says so as a type where it can: the
//! argument areas init may zero come only from [`ArgsAreas::of_this_process`]; a forked child
//! runs a closure that never returns ([`clone_into`]); an inherited fd is adopted at most once
//! ([`take_inherited_fd`]); an artifact is loaded only when it is the very file the supervisor
//! checked ([`load_artifact`]).
//!
//! Raw `syscall(2)` is used instead of glibc wrappers where glibc would do more than the call (its
//! `fork` runs atfork handlers that take locks) or has no wrapper (clone3, pivot_root, mount_setattr).
//!
//! Imports (layers): none.

// Syscall results are bounded by the kernel (fd numbers, pids, byte counts no larger than the
// buffer passed in), so narrowing them cannot lose information on Linux x86_64.
#![allow(clippy::cast_possible_truncation)]

mod child;
mod code;
mod parent;
#[cfg(feature = "wasm")]
mod runner;

pub use child::*;
#[cfg(feature = "wasm")]
pub use code::Mapping;
pub use code::{map_code_back, move_code_to_huge_pages, thread_count};
pub use parent::*;
#[cfg(feature = "wasm")]
pub use runner::*;

use std::ffi::{c_int, c_long, c_uint};

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

/// The exit code of a jail's child that could not build its jail (and of stockade itself when it
/// failed): the report's [`crate::report::EXIT_SETUP_FAILED`], defined here, at the bottom, where
/// the child that exits with it is.
pub const EXIT_SETUP_FAILED: i32 = 125;

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

const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;

const LANDLOCK_RULE_PATH_BENEATH: c_int = 1;

/// One classic-BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}
