//! Identity: who the program is on the host. Never host uid 0.
//!
//! With a user namespace, the parent writes the id maps while the child waits (it cannot map
//! arbitrary ids itself); the child then switches to the inside uid/gid. Run by root, the jail maps
//! to an unprivileged host id (default 65534) and drops root's supplementary groups, which would
//! otherwise keep granting host group 0's file access. Run by a normal user, it maps to that user;
//! the kernel forbids dropping groups then (`setgroups` = deny), and they are only the user's own.

use crate::layers::LayerReport;
use crate::policy::Policy;
use crate::sys::{self, Errno};
use std::path::PathBuf;

/// Why the identity could not be arranged.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "namespaces.user = false needs stockade to run as root (without a user namespace only root can create the \
         other namespaces and switch to an unprivileged uid); enable namespaces.user"
    )]
    NeedsRoot,
    #[error("cannot write {:?} to {}: {}", value.trim_end(), path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    WriteMap {
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },
}

/// Step numbers for failure messages.
pub const STEP_GROUPS: u32 = 0;
pub const STEP_GID: u32 = 1;
pub const STEP_UID: u32 = 2;

#[derive(Debug, Clone)]
pub struct IdPlan {
    userns: bool,
    deny_setgroups: bool,
    uid_map: String,
    gid_map: String,
    clear_groups: bool,
    /// The ids the child switches to (inside ids with a user namespace, host ids without).
    pub uid: u32,
    pub gid: u32,
    /// The host ids the program runs as.
    pub host_uid: u32,
    pub host_gid: u32,
}

pub fn prepare(policy: &Policy) -> Result<IdPlan, IdentityError> {
    let euid = sys::geteuid();
    let egid = sys::getegid();
    let id = &policy.identity;
    let root = euid == 0;
    if !policy.namespaces.user {
        if !root {
            return Err(IdentityError::NeedsRoot);
        }
        return Ok(IdPlan {
            userns: false,
            deny_setgroups: false,
            uid_map: String::new(),
            gid_map: String::new(),
            clear_groups: true,
            uid: id.host_uid,
            gid: id.host_gid,
            host_uid: id.host_uid,
            host_gid: id.host_gid,
        });
    }
    let (host_uid, host_gid) = if root { (id.host_uid, id.host_gid) } else { (euid, egid) };
    Ok(IdPlan {
        userns: true,
        deny_setgroups: !root,
        uid_map: format!("{} {} 1\n", id.uid, host_uid),
        gid_map: format!("{} {} 1\n", id.gid, host_gid),
        clear_groups: root,
        uid: id.uid,
        gid: id.gid,
        host_uid,
        host_gid,
    })
}

impl IdPlan {
    /// Parent side, after clone3 and before releasing the child.
    pub fn write_maps(&self, pid: i32) -> Result<(), IdentityError> {
        if !self.userns {
            return Ok(());
        }
        let write = |name: &str, value: &str| {
            let path = PathBuf::from(format!("/proc/{pid}/{name}"));
            std::fs::write(&path, value).map_err(|source| IdentityError::WriteMap {
                path,
                value: value.to_string(),
                source,
            })
        };
        if self.deny_setgroups {
            write("setgroups", "deny")?;
        }
        write("gid_map", &self.gid_map)?;
        write("uid_map", &self.uid_map)
    }

    pub fn report(&self) -> LayerReport {
        let groups = if self.clear_groups {
            "no supplementary groups"
        } else {
            "the caller's own supplementary groups (an unprivileged caller cannot drop them)"
        };
        let asked = format!("host uid {} gid {}, never 0", self.host_uid, self.host_gid);
        let applied = if self.userns {
            format!(
                "inside uid {} gid {} mapped to host uid {} gid {}; {groups}",
                self.uid, self.gid, self.host_uid, self.host_gid
            )
        } else {
            format!("host uid {} gid {} (no user namespace); {groups}", self.host_uid, self.host_gid)
        };
        LayerReport::new("identity", &asked, &applied)
    }
}

/// Child side: drop supplementary groups (when allowed), then gid, then uid.
///
/// Without a user namespace the child is host root until here and still needs its capabilities
/// for the mounts that follow: `SECBIT_NO_SETUID_FIXUP` keeps them across the uid change (exec as
/// a non-root uid then clears them).
pub fn apply(plan: &IdPlan) -> Result<(), (u32, Errno)> {
    if !plan.userns {
        let bits = (libc::SECBIT_KEEP_CAPS | libc::SECBIT_NO_SETUID_FIXUP) as libc::c_ulong;
        sys::set_securebits(bits).map_err(|e| (STEP_GROUPS, e))?;
    }
    if plan.clear_groups {
        sys::clear_groups().map_err(|e| (STEP_GROUPS, e))?;
    }
    sys::setresgid(plan.gid).map_err(|e| (STEP_GID, e))?;
    sys::setresuid(plan.uid).map_err(|e| (STEP_UID, e))?;
    Ok(())
}
