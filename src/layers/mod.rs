//! One module per isolation layer. Each has a parent-side `prepare` (may allocate, touches the host
//! read-only) and a child-side `apply` (raw system calls on prepared data only). The order in which
//! the child applies them is in `child::enter` and in ARCHITECTURE.md.

pub mod bpf;
pub mod cgroup;
pub mod fds;
pub mod filesystem;
pub mod identity;
pub mod landlock;
pub mod namespaces;
pub mod privileges;
pub mod rlimit;
pub mod seccomp;
pub mod session;
pub mod uts;

pub use crate::report::{Enforcement, LayerReport};
