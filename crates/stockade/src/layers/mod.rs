//! One module per isolation layer. A layer with something to compute has a parent-side `prepare`
//! (may allocate, touches the host read-only); a layer the child applies has a child-side
//! `apply` (raw system calls on prepared data only). Most have both (cgroup, filesystem,
//! identity, landlock, network, privileges, rlimit, seccomp, uts); `namespaces` is prepared only (the
//! flags `clone3` takes: the kernel applies them); `fds` and `session` are applied only (nothing
//! to compute); `bpf` is neither, the seccomp programs' assembler that `seccomp::prepare` uses.
//! The order in which the child applies them is in `child::enter` and in ARCHITECTURE.md.
//!
//! Imports (layers): `leftovers`, `policy`, `report`, `sys`.

pub mod bpf;
pub mod cgroup;
pub mod exec;
pub mod fds;
pub mod filesystem;
pub mod identity;
pub mod landlock;
pub mod namespaces;
pub mod network;
pub mod privileges;
pub mod rlimit;
pub mod seccomp;
pub mod session;
pub mod uts;

pub use crate::report::{Enforcement, LayerReport};
