//! The jail's filesystem: a fresh read-only tmpfs root holding only what the policy grants.
//!
//! `prepare` (parent) resolves every grant on the host, opens it to check what it is, records its
//! device and inode, and turns the policy into a flat list of [`MountOp`]s on pre-built C strings.
//! `apply` (child) runs the list with one system call per op. A bind takes the canonical path in
//! the child's own mount namespace (a mount opened in the parent's namespace cannot be bound in
//! another), then checks that the mounted root is the device and inode the parent saw, so a path
//! swapped on the host in between is refused rather than shown.
//!
//! Every grant appears at its canonical host path; symlinks crossed on the way to a grant (merged
//! `/usr`: `/bin -> usr/bin`) are recreated inside, so the path as written resolves inside too.
//! Directories are only ever created on the jail's own tmpfs, never inside a bind of a host path.

use crate::layers::{Enforcement, LayerReport};
use crate::policy::{Policy, ProcMode};
use crate::sys::{self, Errno};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CString, c_ulong};
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
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

/// Filesystem magic numbers of kernel pseudo filesystems that are never bound into a jail.
const PSEUDO_FS: [(i64, &str); 9] = [
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpffs"),
    (0x1cd1, "devpts"),
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
        "working directory {} does not exist inside the jail (use /tmp, a granted directory, or one inside it)",
        path.display()
    )]
    Cwd { path: PathBuf },
    #[error("cannot open {}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Device {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One step of building the root, with everything pre-computed.
#[derive(Debug)]
pub enum MountOp {
    /// Stop every mount event from reaching the host: `mount(NULL, "/", MS_REC|MS_PRIVATE)`.
    PrivateRoot,
    Tmpfs {
        target: CString,
        flags: c_ulong,
        data: CString,
    },
    Proc {
        target: CString,
        data: Option<CString>,
    },
    Mkdir {
        path: CString,
    },
    Touch {
        path: CString,
    },
    Symlink {
        target: CString,
        link: CString,
    },
    /// `mount(source, target, MS_BIND|MS_REC)`, then the target's root must be `(dev, ino)`.
    Bind {
        source: CString,
        target: CString,
        dev: u64,
        ino: u64,
    },
    SetAttr {
        target: CString,
        set: u64,
        recursive: bool,
    },
    /// `chdir(new_root); pivot_root(".", "."); umount2(".", MNT_DETACH)`: the host root is gone.
    PivotRoot {
        new_root: CString,
    },
    Chdir {
        path: CString,
    },
}

impl MountOp {
    /// Words for a failure message: `bind /usr`, `mkdir /tmp/work`.
    pub fn describe(&self) -> String {
        let inside = |c: &CString| {
            let s = c.to_string_lossy();
            match s.strip_prefix(STAGE) {
                Some("") => "/".to_string(),
                Some(rest) => rest.to_string(),
                None => s.into_owned(),
            }
        };
        match self {
            MountOp::PrivateRoot => "make the mount tree private".into(),
            MountOp::Tmpfs { target, .. } => format!("mount tmpfs on {}", inside(target)),
            MountOp::Proc { target, .. } => format!("mount proc on {}", inside(target)),
            MountOp::Mkdir { path } => format!("mkdir {}", inside(path)),
            MountOp::Touch { path } => format!("create mount point {}", inside(path)),
            MountOp::Symlink { link, .. } => format!("symlink {}", inside(link)),
            MountOp::Bind { target, .. } => format!("bind {}", inside(target)),
            MountOp::SetAttr { target, .. } => format!("set mount flags on {}", inside(target)),
            MountOp::PivotRoot { .. } => "pivot_root".into(),
            MountOp::Chdir { path } => format!("chdir {}", path.to_string_lossy()),
        }
    }
}

/// What a bind source is, for the Landlock rules on its inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    ReadOnly,
    Writable,
    Device { writable: bool },
}

/// What the program will see, and how to build it.
#[derive(Debug)]
pub struct FsPlan {
    pub ops: Vec<MountOp>,
    /// Every bind source, opened `O_PATH` on the host (for Landlock rules on their inodes).
    sources: Vec<(File, SourceKind)>,
    /// Bind targets (canonical host paths) and whether they are writable.
    binds: Vec<(PathBuf, bool)>,
    /// Paths on the jail's tmpfs: directories created, and symlinks with their targets.
    tmpfs_dirs: BTreeSet<PathBuf>,
    tmpfs_links: BTreeMap<PathBuf, PathBuf>,
    /// Mount points of the jail's own filesystems (`/proc`, `/dev`, `/tmp`).
    special: Vec<PathBuf>,
    enabled: bool,
    summary: String,
}

/// A grant resolved on the host.
struct Resolved {
    canonical: PathBuf,
    file: File,
    is_dir: bool,
    writable: bool,
    links: Vec<(PathBuf, PathBuf)>,
}

/// Entries of the new tree, sorted by target so parents come before children.
enum Entry {
    Bind(Resolved),
    Tmp(u64),
    Proc(ProcMode),
    Dev,
}

fn cstring(p: &Path) -> CString {
    // Paths come from validated policy strings (no NUL) or from the kernel (readlink, no NUL).
    CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

fn staged(p: &Path) -> CString {
    let rel = p.strip_prefix("/").unwrap_or(p);
    cstring(&Path::new(STAGE).join(rel))
}

/// Builds the filesystem plan for a policy. With the mount namespace off, it is empty.
pub fn prepare(policy: &Policy) -> Result<FsPlan, FsError> {
    let fs = &policy.filesystem;
    let mut plan = FsPlan {
        ops: Vec::new(),
        sources: Vec::new(),
        binds: Vec::new(),
        tmpfs_dirs: BTreeSet::new(),
        tmpfs_links: BTreeMap::new(),
        special: Vec::new(),
        enabled: policy.namespaces.mount,
        summary: String::new(),
    };
    // Resolve every grant; merge duplicates (writable wins: `--rw` on a policy read-only path).
    let mut resolved: BTreeMap<PathBuf, Resolved> = BTreeMap::new();
    for grant in &fs.grants {
        let Some(r) = resolve_grant(&grant.path, grant.writable, grant.optional, &grant.origin)? else {
            continue;
        };
        match resolved.get_mut(&r.canonical) {
            Some(existing) => {
                existing.writable |= r.writable;
                existing.links.extend(r.links);
            }
            None => {
                resolved.insert(r.canonical.clone(), r);
            }
        }
    }
    if !policy.namespaces.mount {
        // No root of our own: the host tree is what the program sees. The grants still define
        // what it may touch, so they still become Landlock rules (with the devices).
        for (_, r) in resolved {
            let kind = if r.writable { SourceKind::Writable } else { SourceKind::ReadOnly };
            plan.sources.push((r.file, kind));
        }
        if fs.dev {
            for name in DEVICES {
                let host = Path::new("/dev").join(name);
                let file = open_path(&host).map_err(|source| FsError::Device { path: host.clone(), source })?;
                plan.sources.push((file, SourceKind::Device { writable: matches!(name, "null" | "zero" | "full") }));
            }
        }
        return Ok(plan);
    }

    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut entries: Vec<(PathBuf, Entry)> = Vec::new();
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (path, r) in resolved {
        links.extend(r.links.iter().cloned());
        // A grant inside another with the same access adds nothing.
        let redundant = kept.iter().rev().find(|(p, _)| path.starts_with(p)).is_some_and(|(_, w)| *w == r.writable);
        if !redundant {
            kept.push((path.clone(), r.writable));
            entries.push((path, Entry::Bind(r)));
        }
    }
    let tmp = Path::new("/tmp");
    if let Some(size) = fs.tmp_size_bytes
        && !entries.iter().any(|(p, _)| p == tmp)
    {
        entries.push((tmp.to_path_buf(), Entry::Tmp(size)));
    }
    if fs.proc != ProcMode::None {
        entries.push((PathBuf::from("/proc"), Entry::Proc(fs.proc)));
    }
    if fs.dev {
        entries.push((PathBuf::from("/dev"), Entry::Dev));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));

    plan.ops.push(MountOp::PrivateRoot);
    plan.ops.push(MountOp::Tmpfs {
        target: cstring(Path::new(STAGE)),
        flags: (libc::MS_NOSUID | libc::MS_NODEV) as c_ulong,
        data: c"mode=0755,size=1m,nr_inodes=16384".into(),
    });
    let noexec = if fs.writable_exec { 0 } else { sys::MOUNT_ATTR_NOEXEC };
    let mut dev_sealed = None;
    for (path, entry) in entries {
        plan.make_mount_point(&path, !matches!(&entry, Entry::Bind(r) if !r.is_dir));
        let target = staged(&path);
        match entry {
            Entry::Bind(r) => {
                let set = sys::MOUNT_ATTR_NOSUID
                    | sys::MOUNT_ATTR_NODEV
                    | if r.writable { noexec } else { sys::MOUNT_ATTR_RDONLY };
                let kind = if r.writable { SourceKind::Writable } else { SourceKind::ReadOnly };
                plan.bind(&path, r.file, kind, target, set)?;
                plan.binds.push((path, r.writable));
            }
            Entry::Tmp(size) => {
                let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
                if !fs.writable_exec {
                    flags |= libc::MS_NOEXEC;
                }
                let data = CString::new(format!("mode=1777,size={size}")).unwrap_or_default();
                plan.ops.push(MountOp::Tmpfs { target, flags: flags as c_ulong, data });
                plan.special.push(path);
            }
            Entry::Proc(mode) => {
                let data = (mode == ProcMode::PidOnly).then(|| c"subset=pid".to_owned());
                plan.ops.push(MountOp::Proc { target, data });
                plan.special.push(path);
            }
            Entry::Dev => {
                plan.ops.push(MountOp::Tmpfs {
                    target: target.clone(),
                    flags: (libc::MS_NOSUID | libc::MS_NOEXEC) as c_ulong,
                    data: c"mode=0755,size=64k,nr_inodes=64".into(),
                });
                for name in DEVICES {
                    let host = Path::new("/dev").join(name);
                    let file = open_path(&host).map_err(|source| FsError::Device { path: host.clone(), source })?;
                    let node = staged(&host);
                    plan.ops.push(MountOp::Touch { path: node.clone() });
                    // Writes to a device node pass a read-only mount; its inode's times cannot change.
                    let kind = SourceKind::Device { writable: matches!(name, "null" | "zero" | "full") };
                    let set = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC;
                    plan.bind(&host, file, kind, node, set)?;
                }
                for (name, to) in DEV_LINKS {
                    plan.ops.push(MountOp::Symlink {
                        target: cstring(Path::new(to)),
                        link: staged(&Path::new("/dev").join(name)),
                    });
                }
                dev_sealed = Some(target);
                plan.special.push(path);
            }
        }
    }
    for (link, to) in links {
        if plan.covered_by_bind(&link) || plan.tmpfs_links.contains_key(&link) || plan.tmpfs_dirs.contains(&link) {
            continue;
        }
        if let Some(parent) = link.parent() {
            plan.make_dirs(parent);
        }
        plan.ops.push(MountOp::Symlink { target: cstring(&to), link: staged(&link) });
        plan.tmpfs_links.insert(link, to);
    }
    if let Some(dev) = dev_sealed {
        plan.ops.push(MountOp::SetAttr { target: dev, set: sys::MOUNT_ATTR_RDONLY, recursive: false });
    }
    plan.ops.push(MountOp::SetAttr {
        target: cstring(Path::new(STAGE)),
        set: sys::MOUNT_ATTR_RDONLY,
        recursive: false,
    });
    plan.ops.push(MountOp::PivotRoot { new_root: cstring(Path::new(STAGE)) });
    plan.ops.push(MountOp::Chdir { path: cstring(&fs.cwd) });

    if plan.resolve_inside(&fs.cwd).is_none() {
        return Err(FsError::Cwd { path: fs.cwd.clone() });
    }
    let ro = plan.binds.iter().filter(|(_, w)| !w).count();
    let rw = plan.binds.len() - ro;
    plan.summary = format!(
        "new root: {ro} read-only and {rw} writable path(s){}; /proc {}; /dev {}; /tmp {}",
        if fs.writable_exec { ", writable paths executable" } else { ", writable paths noexec" },
        match fs.proc {
            ProcMode::PidOnly => "pid-only",
            ProcMode::Full => "full",
            ProcMode::None => "none",
        },
        if fs.dev { "minimal" } else { "none" },
        match fs.tmp_size_bytes {
            Some(n) => format!("{n} bytes"),
            None => "none".into(),
        },
    );
    Ok(plan)
}

impl FsPlan {
    fn bind(&mut self, source: &Path, file: File, kind: SourceKind, target: CString, set: u64) -> Result<(), FsError> {
        let meta = file.metadata().map_err(|e| FsError::Grant {
            origin: "bind".into(),
            path: source.to_path_buf(),
            source: e,
        })?;
        self.ops.push(MountOp::Bind {
            source: cstring(source),
            target: target.clone(),
            dev: meta.dev(),
            ino: meta.ino(),
        });
        self.ops.push(MountOp::SetAttr { target, set, recursive: true });
        self.sources.push((file, kind));
        Ok(())
    }

    /// The bind sources, opened on the host, with their kind.
    pub fn sources(&self) -> &[(File, SourceKind)] {
        &self.sources
    }

    /// Whether the jail has its own mount namespace and root.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether `/tmp` is the jail's own tmpfs (not a host grant, not absent).
    pub fn has_own_tmp(&self) -> bool {
        self.special.iter().any(|p| p == Path::new("/tmp"))
    }

    /// True when `p` is backed by a host file the parent can open (inside a bind), or when there
    /// is no mount namespace and the host tree is the jail's.
    pub fn host_backed(&self, p: &Path) -> bool {
        !self.enabled || self.covered_by_bind(p)
    }

    /// True when `p` lies in (or is) a bind of a host path: it exists there already.
    fn covered_by_bind(&self, p: &Path) -> bool {
        self.binds.iter().any(|(b, _)| p.starts_with(b))
    }

    /// Creates the directories leading to `dir` on the jail's tmpfs (never inside a bind).
    fn make_dirs(&mut self, dir: &Path) {
        let mut cur = PathBuf::from("/");
        for c in dir.components().skip(1) {
            cur.push(c);
            if self.covered_by_bind(&cur) {
                return;
            }
            if self.special.iter().any(|s| s == &cur) || self.tmpfs_dirs.contains(&cur) {
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
        if self.covered_by_bind(target) {
            return;
        }
        if dir {
            self.make_dirs(target);
        } else {
            self.ops.push(MountOp::Touch { path: staged(target) });
        }
    }

    /// Resolves a path as the jail will see it; returns its canonical form, or None if it does
    /// not exist inside. Host paths inside binds are looked up on the host (binds are identity
    /// mapped); paths on the jail's tmpfs are looked up in the plan.
    pub fn resolve_inside(&self, path: &Path) -> Option<PathBuf> {
        if !self.enabled {
            return std::fs::canonicalize(path).ok();
        }
        walk(
            path,
            |next| {
                if self.covered_by_bind(next) {
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
                "disabled by the policy: namespaces.mount = false (the grants are still Landlock rules)",
            );
        }
        LayerReport::new("filesystem", &self.summary, &self.summary)
    }
}

/// `O_PATH` open of a path without following a final symlink.
fn open_path(p: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_NOFOLLOW).open(p)
}

/// Resolves `path` from `/` one component at a time, like the kernel: `step(p)` says whether `p`
/// is a symlink (`Ok(Some(target))`, followed) or a real entry (`Ok(None)`). `.` and `..` are
/// handled lexically on the resolved prefix, as the kernel does after following links.
fn walk<E>(
    path: &Path,
    mut step: impl FnMut(&Path) -> Result<Option<PathBuf>, E>,
    too_many_links: impl Fn() -> E,
) -> Result<PathBuf, E> {
    let reversed = |p: &Path| -> Vec<PathBuf> { p.components().rev().map(|c| PathBuf::from(c.as_os_str())).collect() };
    let mut cur = PathBuf::from("/");
    let mut rest = reversed(path);
    let mut hops = 0;
    while let Some(c) = rest.pop() {
        match c.as_os_str().as_bytes() {
            b"/" => cur = PathBuf::from("/"),
            b"." => {}
            b".." => {
                cur.pop();
            }
            _ => {
                let next = cur.join(&c);
                match step(&next)? {
                    Some(to) => {
                        hops += 1;
                        if hops > 40 {
                            return Err(too_many_links());
                        }
                        rest.extend(reversed(&to));
                    }
                    None => cur = next,
                }
            }
        }
    }
    Ok(cur)
}

/// Resolves a grant on the host, recording every symlink crossed, then opens the canonical result.
/// Returns None for an optional grant that does not exist.
fn resolve_grant(path: &Path, writable: bool, optional: bool, origin: &str) -> Result<Option<Resolved>, FsError> {
    let io_err = |source: std::io::Error| FsError::Grant { origin: origin.into(), path: path.to_path_buf(), source };
    let refused = |reason: String| FsError::Refused { origin: origin.into(), path: path.to_path_buf(), reason };
    let caller = sys::geteuid();
    let mut links = Vec::new();
    let mut untrusted: Option<(PathBuf, u32)> = None;
    let walked = walk(
        path,
        |next| {
            let meta = std::fs::symlink_metadata(next)?;
            if !meta.file_type().is_symlink() {
                return Ok(None);
            }
            // A link owned by someone else (a jailed uid, say, in a directory an earlier run could
            // write) is not followed: the grant would show whatever that user chose.
            if meta.uid() != 0 && meta.uid() != caller {
                untrusted = Some((next.to_path_buf(), meta.uid()));
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            let to = std::fs::read_link(next)?;
            links.push((next.to_path_buf(), to.clone()));
            Ok(Some(to))
        },
        || std::io::Error::from_raw_os_error(libc::ELOOP),
    );
    let cur = match walked {
        Ok(p) => p,
        Err(_) if untrusted.is_some() => {
            let (link, uid) = untrusted.unwrap_or_default();
            return Err(refused(format!(
                "crosses the symlink {} owned by uid {uid}; only links owned by root or the caller are followed",
                link.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && optional => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    if cur == Path::new("/") {
        return Err(refused("resolves to \"/\", which would show the whole host".into()));
    }
    for reserved in ["/proc", "/sys", "/dev"] {
        if cur.starts_with(reserved) {
            return Err(refused(format!(
                "resolves to {}, inside {reserved}, which is never bound from the host",
                cur.display()
            )));
        }
    }
    let file = open_path(&cur).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    let ft = meta.file_type();
    if !(ft.is_dir() || ft.is_file()) {
        let kind = if ft.is_socket() {
            "a socket"
        } else if ft.is_fifo() {
            "a fifo"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else {
            "not a file or directory"
        };
        return Err(refused(format!("is {kind}; only files and directories can be granted")));
    }
    let magic = sys::fs_magic(file.as_fd()).map_err(|e| io_err(e.io()))?;
    if let Some((_, name)) = PSEUDO_FS.iter().find(|(m, _)| *m == magic) {
        return Err(refused(format!("is on {name}, a kernel filesystem that is never bound into a jail")));
    }
    Ok(Some(Resolved { canonical: cur, file, is_dir: ft.is_dir(), writable, links }))
}

/// Child side: runs the ops in order. On failure returns the index of the op and the errno.
pub fn apply(plan: &FsPlan) -> Result<(), (u32, Errno)> {
    for (i, op) in plan.ops.iter().enumerate() {
        apply_one(op).map_err(|e| (u32::try_from(i).unwrap_or(u32::MAX), e))?;
    }
    Ok(())
}

fn apply_one(op: &MountOp) -> Result<(), Errno> {
    match op {
        MountOp::PrivateRoot => sys::mount(None, c"/", None, (libc::MS_REC | libc::MS_PRIVATE) as c_ulong, None),
        MountOp::Tmpfs { target, flags, data } => {
            sys::mount(Some(c"tmpfs"), target, Some(c"tmpfs"), *flags, Some(data))
        }
        MountOp::Proc { target, data } => sys::mount(
            Some(c"proc"),
            target,
            Some(c"proc"),
            (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as c_ulong,
            data.as_deref(),
        ),
        MountOp::Mkdir { path } => sys::mkdir(path, 0o755),
        MountOp::Touch { path } => sys::create_file(path, 0o444),
        MountOp::Symlink { target, link } => sys::symlink(target, link),
        MountOp::Bind { source, target, dev, ino } => {
            sys::mount(Some(source), target, None, (libc::MS_BIND | libc::MS_REC) as c_ulong, None)?;
            if sys::stat_ids(target)? != (*dev, *ino) {
                return Err(Errno(libc::ESTALE));
            }
            Ok(())
        }
        MountOp::SetAttr { target, set, recursive } => sys::mount_setattr(target, *recursive, *set, 0),
        MountOp::PivotRoot { new_root } => {
            sys::chdir(new_root)?;
            sys::pivot_root(c".", c".")?;
            sys::umount2(c".", libc::MNT_DETACH)?;
            sys::chdir(c"/")
        }
        MountOp::Chdir { path } => sys::chdir(path),
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
        prepare(&p).expect("plan")
    }

    #[test]
    fn default_plan_shows_usr_and_replicates_merged_usr_links() {
        let plan = plan_for(&[], &[]);
        assert!(plan.binds.iter().any(|(p, w)| p == Path::new("/usr") && !w));
        let sh = plan.resolve_inside(Path::new("/bin/sh")).expect("/bin/sh visible");
        assert_eq!(std::fs::canonicalize("/bin/sh").expect("host sh"), sh);
        assert!(plan.resolve_inside(Path::new("/etc/passwd")).is_none(), "/etc/passwd must not be visible");
        assert!(plan.resolve_inside(Path::new("/root")).is_none());
        // Nothing is ever created inside a host bind.
        for op in &plan.ops {
            if let MountOp::Mkdir { path } | MountOp::Touch { path } = op {
                let inside = PathBuf::from(path.to_string_lossy().trim_start_matches(STAGE));
                assert!(
                    !plan.covered_by_bind(&inside) || plan.binds.iter().any(|(b, _)| b == &inside),
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
        let err = prepare(&p).expect_err("planted link").to_string();
        assert!(err.contains("owned by uid 65534; only links owned by root or the caller are followed"), "{err}");
    }

    #[test]
    fn missing_and_special_grants_are_refused_with_their_origin() {
        let mut p = Policy::builtin();
        p.add_read_only("/nonexistent/stockade-test", "--ro").expect("syntax ok");
        let err = prepare(&p).expect_err("missing path").to_string();
        assert_eq!(err, "--ro /nonexistent/stockade-test: no such file or directory");
        let mut p = Policy::builtin();
        p.add_read_write("/sys/../proc", "--rw").expect_err("lexically refused");
    }
}
