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
        "identity: namespaces.user = false needs stockade to run as root (without a user namespace only root can create the \
         other namespaces and switch to an unprivileged uid); enable namespaces.user"
    )]
    NeedsRoot,
    #[error("identity: cannot write {:?} to {}: {}", value.trim_end(), path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    WriteMap {
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "identity: the owner uids {first}-{last} are not all mapped in this process's user namespace (a \
         container's?), so no run's user namespace can be owned by one; map them, move them with \
         identity.owner-uid-first, or set identity.owner-uid-count = 0 (runs then share the caller's per-user \
         kernel counters)"
    )]
    OwnersUnmapped { first: u32, last: u32 },
    #[error(
        "identity: cannot use the owner-uid lock {}: {}; make it writable by root, or set \
         identity.owner-uid-count = 0 (runs then share the caller's per-user kernel counters)",
        path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0))
    )]
    OwnerLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "identity: all {count} owner uids are held by running jails; raise identity.owner-uid-count (it bounds \
         the runs at once)"
    )]
    OwnersBusy { count: u32 },
    #[error("identity: cannot take owner uid {uid} for the clone: {errno}{}", crate::host::missing_caps_hint())]
    BecomeOwner { uid: u32, errno: Errno },
}

/// The file whose bytes are the owner uids' locks, shared by every stockade on the host: byte N
/// locked (an open-file-description lock, released when its holder closes it or dies) means
/// uid `first + N` owns a live run's user namespace.
pub const OWNER_LOCK: &str = "/run/stockade/owner-uids.lock";

/// One owner uid, held for one run.
#[derive(Debug)]
pub struct OwnerLease {
    pub uid: u32,
    _lock: std::fs::File,
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
    /// The host uids that own the runs' user namespaces (root with a user namespace only).
    owners: Option<(u32, u32)>,
    /// Each run's program runs as the host uid that owns its user namespace, one of its own,
    /// rather than `host_uid` (which every run would share, and with it the kernel's per-user
    /// quotas: pipe buffers, `RLIMIT_NPROC`). Not when the jail writes a host file in place:
    /// that file is `host_uid`'s to write (see [`IdPlan::per_run_uid`]).
    per_run: bool,
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
            owners: None,
            per_run: false,
        });
    }
    let (host_uid, host_gid) = if root { (id.host_uid, id.host_gid) } else { (euid, egid) };
    let owners = id.owner_uids.filter(|_| root);
    if let Some((first, count)) = owners {
        let last = first.saturating_add(count - 1);
        let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
        if !mapped(&uid_map, first, last) {
            return Err(IdentityError::OwnersUnmapped { first, last });
        }
    }
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
        per_run: owners.is_some(),
        owners,
    })
}

/// Whether `first..=last` lies inside one line of a `uid_map` (`inside outside count`).
fn mapped(uid_map: &str, first: u32, last: u32) -> bool {
    uid_map.lines().any(|l| {
        let f: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        f.len() == 3 && f[0] <= u64::from(first) && u64::from(last) < f[0] + f[2]
    })
}

impl IdPlan {
    /// Whether each run gets a host uid of its own: only while no grant lets the jail write a
    /// host object in place (`writes_host_in_place`: a writable file, or the host tree itself
    /// without a mount namespace), which must stay writable by `identity.host-uid`.
    pub(crate) fn per_run_uid(&mut self, writes_host_in_place: bool) {
        self.per_run = self.owners.is_some() && !writes_host_in_place;
    }

    /// The host uid a run's program runs as: the uid owning its user namespace (one of its own),
    /// or `host_uid`.
    pub fn run_uid(&self, owner: Option<&OwnerLease>) -> u32 {
        match owner {
            Some(o) if self.per_run => o.uid,
            _ => self.host_uid,
        }
    }

    /// Parent side, after clone3 and before releasing the child.
    pub fn write_maps(&self, pid: i32, owner: Option<&OwnerLease>) -> Result<(), IdentityError> {
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
        match owner {
            Some(_) if self.per_run => write("uid_map", &format!("{} {} 1\n", self.uid, self.run_uid(owner))),
            _ => write("uid_map", &self.uid_map),
        }
    }

    /// Takes a free owner uid for one run (`None`: the caller owns the run's user namespace).
    pub fn lease_owner(&self) -> Result<Option<OwnerLease>, IdentityError> {
        let Some((first, count)) = self.owners else { return Ok(None) };
        let path = std::path::Path::new(OWNER_LOCK);
        let lock_err = |source: std::io::Error| IdentityError::OwnerLock { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new().mode(0o755).create(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(lock_err(e)),
                _ => {}
            }
        }
        // Its own open file description: locks of one description do not exclude each other.
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(path)
                .map_err(lock_err)?
        };
        // Start somewhere different for each run: concurrent supervisors rarely race for a byte.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let start = (std::process::id() ^ nanos) % count;
        for i in 0..count {
            let n = (start + i) % count;
            match sys::ofd_lock_byte(std::os::fd::AsFd::as_fd(&file), u64::from(n)) {
                Ok(true) => return Ok(Some(OwnerLease { uid: first + n, _lock: file })),
                Ok(false) => {}
                Err(e) => return Err(lock_err(e.io())),
            }
        }
        Err(IdentityError::OwnersBusy { count })
    }

    pub fn report(&self) -> LayerReport {
        let groups = if self.clear_groups {
            "no supplementary groups"
        } else {
            "the caller's own supplementary groups (an unprivileged caller cannot drop them)"
        };
        let asked = match (self.per_run, self.owners) {
            (true, Some((first, count))) => format!(
                "host uid of the run's own ({first}-{}), gid {}, never 0",
                u64::from(first) + u64::from(count) - 1,
                self.host_gid
            ),
            _ => format!("host uid {} gid {}, never 0", self.host_uid, self.host_gid),
        };
        let counters = match (self.userns, self.owners) {
            (true, Some((first, count))) => format!(
                "per-user kernel counters charged to a user namespace owner of the run's own (uid {first}-{})",
                u64::from(first) + u64::from(count) - 1
            ),
            (true, None) if sys::geteuid() == 0 => {
                "per-user kernel counters shared with root (identity.owner-uid-count = 0)".to_string()
            }
            (true, None) => format!("per-user kernel counters charged to the caller (uid {})", self.host_uid),
            (false, _) => format!("per-user kernel counters charged to host uid {}", self.host_uid),
        };
        let applied = if self.userns && self.per_run {
            format!(
                "inside uid {} mapped to the host uid owning the run's user namespace (no other run has it: no \
                 per-user quota is shared), gid {} to host gid {}; {groups}; {counters}; what it leaves in a \
                 host directory belongs to uid {}",
                self.uid, self.gid, self.host_gid, self.host_uid
            )
        } else if self.userns {
            format!(
                "inside uid {} gid {} mapped to host uid {} gid {}; {groups}; {counters}",
                self.uid, self.gid, self.host_uid, self.host_gid
            )
        } else {
            format!("host uid {} gid {} (no user namespace); {groups}; {counters}", self.host_uid, self.host_gid)
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
