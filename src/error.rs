//! The library's error: one variant per layer or stage that can refuse a run before it starts.
//! Failures inside the jail after fork are not errors: they come back as a report with status
//! `setup-failed`.

use crate::layers::cgroup::CgroupError;
use crate::layers::filesystem::FsError;
use crate::layers::identity::IdentityError;
use crate::layers::landlock::LandlockError;
use crate::layers::rlimit::RlimitError;
use crate::layers::seccomp::SeccompError;
use crate::policy::PolicyError;
use crate::program::ProgramError;
use crate::report::EXIT_SETUP_FAILED;
use crate::sys::Errno;

/// Why a run was refused before it started. Nothing was left behind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Filesystem(#[from] FsError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Rlimit(#[from] RlimitError),
    #[error(transparent)]
    Landlock(#[from] LandlockError),
    #[error(transparent)]
    Seccomp(#[from] SeccompError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[cfg(feature = "wasm")]
    #[error(transparent)]
    Guest(#[from] crate::wasm::guests::GuestError),
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// `clone3` refused the namespaces; `which` names the one refused when a probe found it.
    #[error("namespaces: cannot create the {which} namespace: {errno}{hint}{relax}")]
    Namespaces { which: String, errno: Errno, hint: &'static str, relax: String },
    /// The jail's child ended before its jail was built: why, in words (its own report, or the
    /// limit that killed it).
    #[error("the jail ended while it was being built: {why}")]
    JailDied {
        why: String,
        /// The policy limit that ended it, when one did.
        limit: Option<JailLimit>,
    },
    /// A supervisor resource (pipe, poll, wait) failed.
    #[error("supervisor: cannot {what}: {errno}")]
    Supervisor { what: &'static str, errno: Errno },
}

/// A limit of the run's cgroup too small to build its jail in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JailLimit {
    /// `cgroups.memory-max-bytes`: the OOM killer ended the jail's child.
    Memory,
    /// `cgroups.pids-max`: the child could not start the processes a jail needs.
    Pids,
}

impl JailLimit {
    /// The policy key.
    pub fn key(self) -> &'static str {
        match self {
            JailLimit::Memory => "cgroups.memory-max-bytes",
            JailLimit::Pids => "cgroups.pids-max",
        }
    }
}

impl Error {
    /// The exit code `stockade run` uses for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Program(e) => e.exit_code(),
            _ => EXIT_SETUP_FAILED,
        }
    }
}
