//! The jail's filesystem: a fresh read-only tmpfs root holding only what the policy grants.
//!
//! `prepare` (parent) resolves every grant on the host, opens it to check what it is, and turns
//! the policy into a flat list of [`MountOp`]s on pre-built C strings. `apply` (child) runs the
//! list with one system call per op.
//!
//! **Read-only grants** (and writable single files, and the device nodes) are the host objects
//! the parent opened. A root supervisor clones each one per run as a detached mount
//! (`open_tree(OPEN_TREE_CLONE)`, which root can make of any path, also below a `0700`
//! directory the jail's uid could never walk) and the child attaches exactly that object
//! (`move_mount`): what was checked is what is mounted. A normal user cannot clone mounts; its
//! jail runs as that same user, so the child binds the canonical path in its own mount
//! namespace and checks the mounted root is the device and inode the parent saw (a path swapped
//! in between is refused). Kernel filesystems mounted below a grant (`/proc`, `/sys`, `nsfs`...)
//! refuse the grant, with their paths: a recursive bind would carry them in.
//!
//! **Writable directories** are staged (see `staging.rs`): a tmpfs with the policy's quota,
//! mounted by the child and filled and written back by the supervisor through fds.
//!
//! Every grant appears at its canonical host path; symlinks crossed on the way to a grant (merged
//! `/usr`: `/bin -> usr/bin`) are recreated inside, so the path as written resolves inside too.
//! Directories are only ever created on the jail's own tmpfs filesystems, never inside a bind of
//! a host path.

mod apply;
pub mod exchange;
mod grant;
mod ops;
mod root;
pub mod staging;

pub use apply::apply;
pub use ops::{BindSource, MountOp, SourceKind};

use crate::layers::identity::IdPlan;
use crate::layers::{Enforcement, LayerReport};
use crate::policy::{Policy, ProcMode};
use crate::sys;
use grant::Resolved;
pub use staging::StagedPlace;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the new root is assembled before `pivot_root`. It is a mount point only inside the run's
/// private mount namespace; the host's `/proc` is never touched. No grant can come from under
/// `/proc` (validation refuses it), so covering it hides no bind source.
const STAGE: &str = "/proc";

/// Devices bound into the jail's `/dev`.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Symlinks in the jail's `/dev`.
const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Why the filesystem plan could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{origin} {}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Grant {
        origin: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin} {}: {reason}", path.display())]
    Refused { origin: String, path: PathBuf, reason: String },
    #[error(
        "filesystem.cwd: {} does not exist inside the jail (use /tmp, a granted directory, or one inside it)",
        path.display()
    )]
    Cwd { path: PathBuf },
    #[error("filesystem: cannot open {}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Device {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{origin} {}: kernel filesystems are mounted below it, which a bind would carry into the jail: {}; grant \
         a directory without them",
        path.display(),
        list.join(", ")
    )]
    KernelSubmounts { origin: String, path: PathBuf, list: Vec<String> },
    #[error("filesystem: cannot clone the mount of {} for the jail: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Clone {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{origin} {}: does not fit its quota (filesystem.writable-max-bytes, filesystem.writable-max-files): \
         raise them, or grant a smaller directory",
        path.display()
    )]
    Quota { origin: String, path: PathBuf },
    #[error("filesystem: cannot {what} {}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Stage {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("filesystem: writing back {}: cannot {what}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    WriteBack {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What backs a path the jail shows from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    /// A bind of the host object (read-only, or a writable single file).
    Host { writable: bool },
    /// A staged tmpfs holding a copy of the host directory (or, `fresh`, an empty one).
    Staged { fresh: bool },
}

/// What the program will see, and how to build it.
#[derive(Debug)]
pub struct FsPlan {
    pub ops: Vec<MountOp>,
    /// Every bind source, opened `O_PATH` on the host (for Landlock rules on their inodes).
    sources: Vec<(File, SourceKind)>,
    /// Where each source was on the host, and what it was there (device, inode).
    origins: Vec<(PathBuf, u64, u64)>,
    /// For `BindSource::Tree(i)`: the index in `sources` of the object to clone per run.
    trees: Vec<usize>,
    /// What each shown path is backed by.
    binds: Vec<(PathBuf, Backing)>,
    /// Paths on the jail's tmpfs: directories created, and symlinks with their targets.
    tmpfs_dirs: BTreeSet<PathBuf>,
    tmpfs_links: BTreeMap<PathBuf, PathBuf>,
    /// Mount points of the jail's own filesystems (`/proc`, `/dev`, `/tmp`, `/dev/shm`).
    special: Vec<PathBuf>,
    /// Writable directories, in the order the child hands their tmpfs over.
    staged: Vec<StagedPlace>,
    /// Writable mounts of the jail's own (`/tmp`, `/dev/shm`, the staged directories): the child
    /// adds their Landlock rules.
    own_writable: Vec<PathBuf>,
    enabled: bool,
    summary: String,
}

/// Entries of the new tree, sorted by target so parents come before children.
enum Entry {
    Bind(Resolved),
    /// A writable directory: the host one to copy (or `None`: a fresh one), and who asked.
    Staged(Option<Resolved>, String),
    Tmp(u64),
    Proc(ProcMode),
    Dev,
    Shm(u64),
}

fn cstring(p: &Path) -> CString {
    // Paths come from validated policy strings (no NUL) or from the kernel (readlink, no NUL).
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

fn staged(p: &Path) -> CString {
    let rel = p.strip_prefix("/").unwrap_or(p);
    cstring(&Path::new(STAGE).join(rel))
}

/// Builds the filesystem plan for a policy: the grants resolved on the host, then, with a mount
/// namespace, the new root's mounts in path order (`root.rs`); without one, the host tree with
/// the grants as Landlock sources.
pub fn prepare(policy: &Policy, id: &IdPlan) -> Result<FsPlan, FsError> {
    let fs = &policy.filesystem;
    let mut plan = FsPlan {
        ops: Vec::new(),
        sources: Vec::new(),
        origins: Vec::new(),
        trees: Vec::new(),
        binds: Vec::new(),
        tmpfs_dirs: BTreeSet::new(),
        tmpfs_links: BTreeMap::new(),
        special: Vec::new(),
        staged: Vec::new(),
        own_writable: Vec::new(),
        enabled: policy.namespaces.mount,
        summary: String::new(),
    };
    let (resolved, fresh) = resolve_grants(fs)?;
    if policy.namespaces.mount {
        plan.new_root(fs, id, resolved, fresh)?;
    } else {
        plan.host_tree(fs, id, resolved)?;
    }
    Ok(plan)
}

/// The grants as resolved on the host, by canonical path, duplicates merged (writable wins:
/// `--rw` on a policy's read-only path), with who asked; and the fresh directories asked for.
#[allow(clippy::type_complexity)]
fn resolve_grants(
    fs: &crate::policy::Filesystem,
) -> Result<(BTreeMap<PathBuf, (Resolved, String)>, Vec<(PathBuf, String)>), FsError> {
    let mut resolved: BTreeMap<PathBuf, (Resolved, String)> = BTreeMap::new();
    let mut fresh: Vec<(PathBuf, String)> = Vec::new();
    for grant in &fs.grants {
        if grant.empty {
            fresh.push((grant.path.clone(), grant.origin.clone()));
            continue;
        }
        let Some(r) = grant::resolve(&grant.path, grant.writable, grant.optional, &grant.origin)? else {
            continue;
        };
        match resolved.get_mut(&r.canonical) {
            Some((existing, origin)) => {
                if r.writable && !existing.writable {
                    origin.clone_from(&grant.origin);
                }
                existing.writable |= r.writable;
                existing.links.extend(r.links);
            }
            None => {
                resolved.insert(r.canonical.clone(), (r, grant.origin.clone()));
            }
        }
    }
    Ok((resolved, fresh))
}

impl FsPlan {
    /// No root of our own: the host tree is what the program sees. The grants still define what
    /// it may touch, so they still become Landlock rules (with the devices); writable ones are
    /// the host's own and must be writable by the jail's uid.
    fn host_tree(
        &mut self,
        fs: &crate::policy::Filesystem,
        id: &IdPlan,
        resolved: BTreeMap<PathBuf, (Resolved, String)>,
    ) -> Result<(), FsError> {
        for (r, origin) in resolved.into_values() {
            if r.writable {
                grant::check_writable_by(&r, &origin, id.host_uid, id.host_gid)?;
            }
            let kind = if r.writable { SourceKind::Writable } else { SourceKind::ReadOnly };
            self.push_source(&r.canonical, r.file, kind);
        }
        if fs.dev {
            for name in DEVICES {
                let host = Path::new("/dev").join(name);
                let file = grant::open_path(&host).map_err(|source| FsError::Device { path: host.clone(), source })?;
                self.push_source(
                    &host,
                    file,
                    SourceKind::Device { writable: matches!(name, "null" | "zero" | "full") },
                );
            }
        }
        self.summary = "host filesystem (namespaces.mount = false); writable grants are the host's, unbounded".into();
        Ok(())
    }
}

/// Whether this process may clone mounts (`open_tree(OPEN_TREE_CLONE)` needs `CAP_SYS_ADMIN` over
/// its mount namespace: root on the host, not a "root" in a user namespace of its own). Asked
/// once, of `/` (a clone of one mount, dropped at once).
fn can_clone_mounts() -> bool {
    use rustix::mount::{OpenTreeFlags, open_tree};
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| {
        sys::geteuid() == 0
            && open_tree(rustix::fs::CWD, c"/", OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC)
                .is_ok()
    })
}

impl FsPlan {
    fn bind(
        &mut self,
        source: &Path,
        file: File,
        kind: SourceKind,
        target: CString,
        set: u64,
        by_tree: bool,
    ) -> Result<(), FsError> {
        let bind = if by_tree {
            self.trees.push(self.sources.len());
            BindSource::Tree(self.trees.len() - 1)
        } else {
            let meta = file.metadata().map_err(|e| FsError::Grant {
                origin: "bind".into(),
                path: source.to_path_buf(),
                source: e,
            })?;
            BindSource::Path { source: cstring(source), dev: meta.dev(), ino: meta.ino() }
        };
        self.ops.push(MountOp::Bind { source: bind, target: target.clone() });
        self.ops.push(MountOp::SetAttr { target, set, recursive: true });
        self.push_source(source, file, kind);
        Ok(())
    }

    fn push_source(&mut self, path: &Path, file: File, kind: SourceKind) {
        let (dev, ino) = file.metadata().map_or((0, 0), |m| (m.dev(), m.ino()));
        self.origins.push((path.to_path_buf(), dev, ino));
        self.sources.push((file, kind));
    }

    /// A source that is no longer what the host has at its path: unlinked or replaced (a
    /// package upgrade renaming a new file over it), or another object there now. Jails built
    /// from this plan would show the old object (or fail to attach it): the plan should be
    /// prepared again. `quick`: only whether a source was unlinked (one `fstat` each, no path
    /// walked), which catches a rename over it.
    pub fn changed_on_host(&self, quick: bool) -> Option<&Path> {
        for ((file, _), (path, dev, ino)) in self.sources.iter().zip(&self.origins) {
            let held = match file.metadata() {
                Ok(m) if m.nlink() > 0 => m,
                _ => return Some(path),
            };
            if quick {
                continue;
            }
            match std::fs::metadata(path) {
                Ok(now) if (now.dev(), now.ino()) == (*dev, *ino) && (held.dev(), held.ino()) == (*dev, *ino) => {}
                _ => return Some(path),
            }
        }
        None
    }

    /// This run's detached clones of the bind sources (root only), in `BindSource::Tree` order.
    /// Each is attached by one run's child, so every run needs its own.
    pub fn clone_trees(&self) -> Result<Vec<OwnedFd>, FsError> {
        use rustix::mount::{OpenTreeFlags, open_tree};
        let flags = OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::OPEN_TREE_CLOEXEC;
        self.trees
            .iter()
            .map(|&i| {
                let (file, _) = &self.sources[i];
                open_tree(file.as_fd(), c"", flags).map_err(|e| FsError::Clone {
                    path: sys::fd_path(file.as_fd()),
                    source: std::io::Error::from_raw_os_error(e.raw_os_error()),
                })
            })
            .collect()
    }

    /// Whether the jail writes a host object in place (a writable file bound, or a writable
    /// grant without a mount namespace) rather than a staged copy.
    pub fn writes_host_in_place(&self) -> bool {
        self.sources.iter().any(|(_, k)| *k == SourceKind::Writable)
    }

    /// The bind sources, opened on the host, with their kind.
    pub fn sources(&self) -> &[(File, SourceKind)] {
        &self.sources
    }

    /// The writable directories, in the order the child hands their tmpfs over.
    pub fn staged(&self) -> &[StagedPlace] {
        &self.staged
    }

    /// Writable mounts of the jail's own (inside paths): `/tmp`, `/dev/shm`, staged directories.
    pub fn own_writable(&self) -> &[PathBuf] {
        &self.own_writable
    }

    /// Whether the jail has its own mount namespace and root.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// True when `p` is backed by a host file the parent can open (inside a bind or a copy of a
    /// host directory), or when there is no mount namespace and the host tree is the jail's.
    pub fn host_backed(&self, p: &Path) -> bool {
        !self.enabled || self.backing(p).is_some_and(|b| b != Backing::Staged { fresh: true })
    }

    /// What backs `p`: the innermost bind or staged directory holding it.
    fn backing(&self, p: &Path) -> Option<Backing> {
        self.binds.iter().filter(|(b, _)| p.starts_with(b)).max_by_key(|(b, _)| b.as_os_str().len()).map(|(_, k)| *k)
    }

    /// True when `p` lies in (or is) a bind of a host path or a staged directory: what exists
    /// there comes from the host (or from the run), never from the plan's own ops.
    fn covered_by_bind(&self, p: &Path) -> bool {
        self.backing(p).is_some()
    }

    /// True when `p` lies in a bind of a host path, where nothing may be created.
    fn covered_by_host_bind(&self, p: &Path) -> bool {
        matches!(self.backing(p), Some(Backing::Host { .. }))
    }

    /// Creates the directories leading to `dir` on the jail's tmpfs filesystems (never inside a
    /// host bind).
    fn make_dirs(&mut self, dir: &Path) {
        let mut cur = PathBuf::from("/");
        for c in dir.components().skip(1) {
            cur.push(c);
            if self.covered_by_host_bind(&cur) {
                return;
            }
            if self.special.iter().any(|s| s == &cur)
                || self.tmpfs_dirs.contains(&cur)
                || self.binds.iter().any(|(b, _)| b == &cur)
            {
                continue;
            }
            self.ops.push(MountOp::Mkdir { path: staged(&cur) });
            self.tmpfs_dirs.insert(cur.clone());
        }
    }

    /// Makes sure a mount point exists: a directory or an empty file, unless a host bind has it.
    fn make_mount_point(&mut self, target: &Path, dir: bool) {
        if let Some(parent) = target.parent() {
            self.make_dirs(parent);
        }
        if self.covered_by_host_bind(target) {
            return;
        }
        if dir {
            self.make_dirs(target);
        } else {
            self.ops.push(MountOp::Touch { path: staged(target) });
        }
    }

    /// Resolves a path as the jail will see it; returns its canonical form, or None if it does
    /// not exist inside. Host paths inside binds (and copies of host directories) are looked up on
    /// the host (binds are identity mapped); paths on the jail's tmpfs are looked up in the plan.
    pub fn resolve_inside(&self, path: &Path) -> Option<PathBuf> {
        if !self.enabled {
            return std::fs::canonicalize(path).ok();
        }
        grant::walk(
            path,
            |next| {
                if self.binds.iter().any(|(b, _)| b == next) {
                    Ok(None)
                } else if self.covered_by_bind(next) && self.host_backed(next) {
                    let meta = std::fs::symlink_metadata(next).map_err(|_| ())?;
                    if meta.file_type().is_symlink() {
                        std::fs::read_link(next).map(Some).map_err(|_| ())
                    } else {
                        Ok(None)
                    }
                } else if let Some(to) = self.tmpfs_links.get(next) {
                    Ok(Some(to.clone()))
                } else if self.tmpfs_dirs.contains(next) || self.special.iter().any(|s| next.starts_with(s)) {
                    Ok(None)
                } else {
                    Err(())
                }
            },
            || (),
        )
        .ok()
    }

    /// The report entry for this layer.
    pub fn report(&self) -> LayerReport {
        if !self.enabled {
            return LayerReport::new("filesystem", "host filesystem (namespaces.mount = false)", "none").with_status(
                Enforcement::NotEnforced,
                "disabled by the policy: namespaces.mount = false (the grants are still Landlock rules; writable \
                 grants are the host's own, not bounded)",
            );
        }
        LayerReport::new("filesystem", &self.summary, &self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_for(extra_ro: &[&str], extra_rw: &[&str]) -> FsPlan {
        let mut p = Policy::builtin();
        for r in extra_ro {
            p.add_read_only(r, "--ro").expect("valid");
        }
        for r in extra_rw {
            p.add_read_write(r, "--rw").expect("valid");
        }
        let id = crate::layers::identity::prepare(&p).expect("ids");
        prepare(&p, &id).expect("plan")
    }

    #[test]
    fn default_plan_shows_usr_and_replicates_merged_usr_links() {
        let plan = plan_for(&[], &[]);
        assert!(plan.binds.iter().any(|(p, b)| p == Path::new("/usr") && *b == Backing::Host { writable: false }));
        let sh = plan.resolve_inside(Path::new("/bin/sh")).expect("/bin/sh visible");
        assert_eq!(std::fs::canonicalize("/bin/sh").expect("host sh"), sh);
        assert!(plan.resolve_inside(Path::new("/etc/passwd")).is_none(), "/etc/passwd must not be visible");
        assert!(plan.resolve_inside(Path::new("/root")).is_none());
        // Nothing is ever created inside a host bind.
        for op in &plan.ops {
            if let MountOp::Mkdir { path } | MountOp::Touch { path } = op {
                let inside = PathBuf::from(path.to_string_lossy().trim_start_matches(STAGE));
                assert!(
                    !plan.covered_by_host_bind(&inside) || plan.binds.iter().any(|(b, _)| b == &inside),
                    "{} is inside a host bind",
                    inside.display()
                );
            }
        }
    }

    #[test]
    fn nested_writable_grant_gets_its_own_bind_and_redundant_ones_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        let d = dir.path().to_str().expect("utf8");
        let s = sub.to_str().expect("utf8");
        let plan = plan_for(&[d, s], &[]);
        let canon = std::fs::canonicalize(dir.path()).expect("canon");
        assert_eq!(plan.binds.iter().filter(|(p, _)| p.starts_with(&canon)).count(), 1);
        let plan = plan_for(&[d], &[s]);
        assert_eq!(plan.binds.iter().filter(|(p, _)| p.starts_with(&canon)).count(), 2);
    }

    #[test]
    fn symlinks_planted_by_another_user_are_not_followed() {
        if sys::geteuid() != 0 {
            eprintln!("skip: needs root to create a symlink owned by another uid");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("data");
        std::os::unix::fs::symlink("/etc", &link).expect("symlink");
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).expect("lchown");
        let mut p = Policy::builtin();
        p.add_read_only(link.to_str().expect("utf8"), "--ro").expect("syntax ok");
        let id = crate::layers::identity::prepare(&p).expect("ids");
        let err = prepare(&p, &id).expect_err("planted link").to_string();
        assert!(err.contains("owned by uid 65534; only links owned by root or the caller are followed"), "{err}");
    }

    #[test]
    fn missing_and_special_grants_are_refused_with_their_origin() {
        let mut p = Policy::builtin();
        p.add_read_only("/nonexistent/stockade-test", "--ro").expect("syntax ok");
        let id = crate::layers::identity::prepare(&p).expect("ids");
        let err = prepare(&p, &id).expect_err("missing path").to_string();
        assert_eq!(err, "--ro /nonexistent/stockade-test: no such file or directory");
        let mut p = Policy::builtin();
        p.add_read_write("/sys/../proc", "--rw").expect_err("lexically refused");
    }
}
