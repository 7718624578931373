//! The supervisor's words for what went wrong before the program ran: a namespace the kernel
//! refused, a jail step that failed.

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
        match detail {
            Some(d) => format!("jail setup failed at {} (stage {}: {d}): {}", f.stage.name(), f.stage as u32, f.errno),
            None => format!("jail setup failed at {} (stage {}): {}", f.stage.name(), f.stage as u32, f.errno),
        }
    }
}
