//! The supervisor's words for what went wrong before the program ran: a namespace the kernel
//! refused, a jail step that failed.

use super::pump::Outcome;
use crate::error::Error;
use crate::plan::Plan;
use crate::sys::Errno;
use crate::wire::{Failure, Stage};

impl Plan {
    pub(super) fn clone_error(&self, errno: Errno) -> Error {
        let culprit = crate::layers::namespaces::find_refused(self.ns.clone_flags);
        let user = culprit == Some("user");
        let hint = match errno.0 {
            libc::ENOSPC | libc::EUSERS => {
                "; the host's namespace limit is reached or zero (sysctl user.max_user_namespaces and the other \
                 user.max_*_namespaces)"
            }
            libc::EPERM | libc::EACCES | libc::EINVAL if user => {
                "; unprivileged user namespaces look disabled on this host (sysctl kernel.unprivileged_userns_clone, \
                 user.max_user_namespaces, AppArmor's kernel.apparmor_restrict_unprivileged_userns, or a container's \
                 seccomp profile)"
            }
            libc::ENOSYS if crate::host::under_seccomp_filter() => {
                "; clone3 is refused by a seccomp filter around stockade (the default profiles of Docker and \
                 containerd answer ENOSYS to it): run the container with contrib/container/seccomp.json \
                 (docker/podman: --security-opt seccomp=seccomp.json; Kubernetes: seccompProfile type Localhost)"
            }
            libc::ENOSYS => "; this kernel (or the sandbox stockade runs in, such as gVisor) has no clone3",
            libc::EPERM if self.ns.clone_flags & libc::CLONE_NEWUSER as u64 == 0 => {
                "; creating namespaces needs root or a user namespace (namespaces.user = true)"
            }
            _ => "",
        };
        let relax = match culprit {
            Some("user") => "; enable it, or run as root with namespaces.user = false".to_string(),
            Some(name) => format!("; to run without it, set namespaces.{name} = false"),
            None => String::new(),
        };
        Error::Namespaces { which: culprit.map_or("run's".into(), |n| n.to_string()), errno, hint, relax }
    }

    /// A child failure in words: `jail setup failed at filesystem (stage 6: bind /usr): ...`.
    pub(crate) fn describe_failure(&self, f: Failure) -> String {
        use crate::layers::{identity, session};
        let detail = match f.stage {
            Stage::Filesystem => self.fs.ops.get(f.detail as usize).map(|op| op.describe()),
            Stage::Rlimits => Some(format!("rlimits.{}", self.rlimits.key_at(f.detail))),
            Stage::Identity => Some(
                match f.detail {
                    identity::STEP_GROUPS => "setgroups",
                    identity::STEP_GID => "setresgid",
                    _ => "setresuid",
                }
                .into(),
            ),
            Stage::Session => {
                Some(if f.detail == session::STEP_SETSID { "setsid" } else { "new session keyring" }.into())
            }
            Stage::Privileges => Some(crate::layers::privileges::step_name(f.detail).into()),
            Stage::Landlock => Some(self.landlock.step_name(f.detail)),
            Stage::Seccomp => Some(format!("filter {}", f.detail + 1)),
            Stage::Network => Some(crate::layers::network::NetPlan::step_name(f.detail).into()),
            Stage::Cgroup if f.detail as usize >= self.cgroup.v1_leaves() => Some("enter the cgroup namespace".into()),
            Stage::Cgroup => Some(format!("move into the {} v1 leaf", self.cgroup.v1_controller(f.detail))),
            Stage::Exec => {
                return format!(
                    "cannot execute {}: {}",
                    self.program.argv_display.first().map_or("?", String::as_str),
                    f.errno
                );
            }
            _ => None,
        };
        let hint = self.host_hint(f).map_or(String::new(), |h| format!("; {h}"));
        match detail {
            Some(d) => {
                format!("jail setup failed at {} (stage {}: {d}): {}{hint}", f.stage.name(), f.stage as u32, f.errno)
            }
            None => format!("jail setup failed at {} (stage {}): {}{hint}", f.stage.name(), f.stage as u32, f.errno),
        }
    }

    /// What around stockade to change when the kernel refused a jail step that stockade, as it
    /// runs, may take: a masked /proc, or a seccomp filter it did not install (a container's).
    fn host_hint(&self, f: Failure) -> Option<&'static str> {
        use crate::layers::filesystem::MountOp;
        if !matches!(f.errno.0, libc::EPERM | libc::EACCES | libc::ENOSYS) {
            return None;
        }
        let proc =
            f.stage == Stage::Filesystem && matches!(self.fs.ops.get(f.detail as usize), Some(MountOp::Proc { .. }));
        if proc && !crate::host::proc_overmounts().is_empty() {
            return Some(crate::host::PROC_HINT);
        }
        // The steps a container's default profile refuses (with EPERM, its default errno): the
        // mounts, the names, the keyring, the cgroup namespace entered after the v1 moves.
        let refusable = f.errno.0 == libc::EPERM
            && match f.stage {
                Stage::Filesystem | Stage::Hostname => true,
                Stage::Session => f.detail == crate::layers::session::STEP_KEYRING,
                Stage::Cgroup => f.detail as usize >= self.cgroup.v1_leaves(),
                _ => false,
            };
        (refusable && crate::host::under_seccomp_filter()).then_some(crate::host::SECCOMP_HINT)
    }
}

/// What a run's report says besides its status: the execs it was refused (the program saw only
/// EPERM), a `sysinfo` the supervisor could not answer with the run's own figures, and output a
/// reader did not take (`unsent`: stdout's and stderr's bytes).
pub(super) fn run_notes(o: &Outcome, unsent: [u64; 2]) -> Vec<String> {
    let mut out = Vec::new();
    if !o.execs_refused_named.is_empty() {
        out.push(format!(
            "the program tried to start another program {} time(s) (exec) not in process.exec-allow ({}{}): each \
             was refused with EPERM",
            o.execs_refused,
            o.execs_refused_named.join(", "),
            if o.execs_refused as usize > o.execs_refused_named.len() { ", ..." } else { "" }
        ));
    } else if o.execs_refused > 0 {
        out.push(format!(
            "the program tried to start another program {} time(s) (exec): a jail runs only its own program, so \
             each was refused with EPERM (subprocess, and helpers such as the resource tracker of Python's \
             multiprocessing.shared_memory, start one)",
            o.execs_refused
        ));
    }
    if let Some(e) = o.sysinfo_unanswered {
        out.push(format!(
            "sysinfo got the host's figures, not the run's own: the supervisor cannot write into the run's memory \
             ({e}; in a container, CAP_SYS_PTRACE)"
        ));
    }
    for (n, name) in unsent.into_iter().zip(["stdout", "stderr"]).filter(|(n, _)| *n > 0) {
        out.push(format!("{n} bytes of {name} were not passed on: their reader stopped reading"));
    }
    out
}
