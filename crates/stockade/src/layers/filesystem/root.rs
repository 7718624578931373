//! The jail's own root, planned in the parent: what each resolved grant becomes (a bind, a
//! staged writable directory), the jail's own filesystems (`/tmp`, `/proc`, `/dev`, `/dev/shm`),
//! in path order so that parents come before children; then the symlinks crossed on the way to
//! grants, the seal, the pivot and the working directory.

use super::grant::{self, Resolved};
use super::{
    Backing, DEV_LINKS, DEVICES, Entry, FsError, FsPlan, MountOp, STAGE, SourceKind, StagedPlace, cstring, staged,
};
use crate::layers::identity::IdPlan;
use crate::policy::{Filesystem, ProcMode};
use crate::sys;
use std::collections::BTreeMap;
use std::ffi::{CString, c_ulong};
use std::path::{Path, PathBuf};

impl FsPlan {
    /// The ops that build the new root from the resolved grants and the fresh directories.
    pub(super) fn new_root(
        &mut self,
        fs: &Filesystem,
        id: &IdPlan,
        resolved: BTreeMap<PathBuf, (Resolved, String)>,
        fresh: Vec<(PathBuf, String)>,
    ) -> Result<(), FsError> {
        let (entries, links) = entries(fs, id, resolved, fresh)?;
        let by_tree = super::can_clone_mounts();
        // Mounts of the jail below a staged directory: the copy and the write-back leave them alone.
        let mount_points: Vec<PathBuf> = entries.iter().map(|(p, _)| p.clone()).collect();
        self.ops.push(MountOp::PrivateRoot);
        self.ops.push(MountOp::Tmpfs {
            target: cstring(Path::new(STAGE)),
            flags: (libc::MS_NOSUID | libc::MS_NODEV) as c_ulong,
            data: c"mode=0755,size=1m,nr_inodes=16384".into(),
        });
        let mut dev_sealed = None;
        for (path, entry) in entries {
            self.make_mount_point(&path, !matches!(&entry, Entry::Bind(r) if !r.is_dir));
            let target = staged(&path);
            let noexec_flag = if fs.writable_exec { 0 } else { libc::MS_NOEXEC };
            match entry {
                Entry::Bind(r) => {
                    let noexec = if fs.writable_exec { 0 } else { sys::MOUNT_ATTR_NOEXEC };
                    let set = sys::MOUNT_ATTR_NOSUID
                        | sys::MOUNT_ATTR_NODEV
                        | if r.writable { noexec } else { sys::MOUNT_ATTR_RDONLY };
                    let kind = if r.writable { SourceKind::Writable } else { SourceKind::ReadOnly };
                    self.bind(&path, r.file, kind, target, set, by_tree)?;
                    self.binds.push((path, Backing::Host { writable: r.writable }));
                }
                Entry::Staged(host, origin) => {
                    let skip = mount_points
                        .iter()
                        .filter(|p| *p != &path && p.starts_with(&path))
                        .filter_map(|p| p.strip_prefix(&path).ok().map(Path::to_path_buf))
                        .collect();
                    self.staged_dir(
                        fs,
                        id,
                        target,
                        StagedPlace { inside: path, host: host.map(|r| r.file), skip, origin },
                    );
                }
                Entry::Tmp(size) | Entry::Shm(size) => {
                    let flags = libc::MS_NOSUID | libc::MS_NODEV | noexec_flag;
                    let data = CString::new(format!("mode=1777,size={size}")).unwrap_or_default();
                    self.ops.push(MountOp::Tmpfs { target, flags: flags as c_ulong, data });
                    self.own_writable.push(path.clone());
                    self.special.push(path);
                }
                Entry::Proc(mode) => {
                    let data = (mode == ProcMode::PidOnly).then(|| c"subset=pid".to_owned());
                    self.ops.push(MountOp::Proc { target, data });
                    self.special.push(path);
                }
                Entry::Dev => {
                    self.dev(&target, by_tree)?;
                    dev_sealed = Some(target);
                    self.special.push(path);
                }
            }
        }
        self.recreate_links(links);
        self.seal_and_pivot(fs, dev_sealed)?;
        self.summary = summary(fs, self, by_tree);
        Ok(())
    }

    /// A writable directory: a tmpfs of the policy's quota, handed to the supervisor.
    fn staged_dir(&mut self, fs: &Filesystem, id: &IdPlan, target: CString, place: StagedPlace) {
        let data = format!(
            "mode=0755,uid={},gid={},size={},nr_inodes={}",
            id.uid, id.gid, fs.writable_max_bytes, fs.writable_max_files
        );
        let noexec_flag = if fs.writable_exec { 0 } else { libc::MS_NOEXEC };
        let flags = libc::MS_NOSUID | libc::MS_NODEV | noexec_flag;
        self.ops.push(MountOp::Tmpfs {
            target: target.clone(),
            flags: flags as c_ulong,
            data: CString::new(data).unwrap_or_default(),
        });
        self.ops.push(MountOp::Send { target });
        self.binds.push((place.inside.clone(), Backing::Staged { fresh: place.host.is_none() }));
        self.own_writable.push(place.inside.clone());
        self.staged.push(place);
    }

    /// A minimal `/dev`: a small tmpfs with the few harmless device nodes bound from the host
    /// (read-only mounts: writes to a device pass one, its inode's times cannot change) and the
    /// usual links.
    fn dev(&mut self, target: &CString, by_tree: bool) -> Result<(), FsError> {
        self.ops.push(MountOp::Tmpfs {
            target: target.clone(),
            flags: (libc::MS_NOSUID | libc::MS_NOEXEC) as c_ulong,
            data: c"mode=0755,size=64k,nr_inodes=64".into(),
        });
        for name in DEVICES {
            let host = Path::new("/dev").join(name);
            let file = grant::open_path(&host).map_err(|source| FsError::Device { path: host.clone(), source })?;
            let node = staged(&host);
            self.ops.push(MountOp::Touch { path: node.clone() });
            let kind = SourceKind::Device { writable: matches!(name, "null" | "zero" | "full") };
            let set = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC;
            self.bind(&host, file, kind, node, set, by_tree)?;
        }
        for (name, to) in DEV_LINKS {
            self.ops
                .push(MountOp::Symlink { target: cstring(Path::new(to)), link: staged(&Path::new("/dev").join(name)) });
        }
        Ok(())
    }

    /// The symlinks crossed on the way to grants, recreated where no bind or directory is.
    fn recreate_links(&mut self, links: Vec<(PathBuf, PathBuf)>) {
        for (link, to) in links {
            if self.covered_by_bind(&link) || self.tmpfs_links.contains_key(&link) || self.tmpfs_dirs.contains(&link) {
                continue;
            }
            if let Some(parent) = link.parent() {
                self.make_dirs(parent);
            }
            self.ops.push(MountOp::Symlink { target: cstring(&to), link: staged(&link) });
            self.tmpfs_links.insert(link, to);
        }
    }

    /// `/dev` and the root made read-only, the pivot into the root, the working directory (which
    /// must be inside it).
    fn seal_and_pivot(&mut self, fs: &Filesystem, dev: Option<CString>) -> Result<(), FsError> {
        if let Some(dev) = dev {
            self.ops.push(MountOp::SetAttr { target: dev, set: sys::MOUNT_ATTR_RDONLY, recursive: false });
        }
        self.ops.push(MountOp::SetAttr {
            target: cstring(Path::new(STAGE)),
            set: sys::MOUNT_ATTR_RDONLY,
            recursive: false,
        });
        self.ops.push(MountOp::PivotRoot { new_root: cstring(Path::new(STAGE)) });
        self.ops.push(MountOp::Chdir { path: cstring(&fs.cwd) });
        if self.resolve_inside(&fs.cwd).is_none() {
            return Err(FsError::Cwd { path: fs.cwd.clone() });
        }
        Ok(())
    }
}

/// What the new root holds, in path order, and the symlinks crossed on the way to grants.
#[allow(clippy::type_complexity)]
fn entries(
    fs: &Filesystem,
    id: &IdPlan,
    resolved: BTreeMap<PathBuf, (Resolved, String)>,
    fresh: Vec<(PathBuf, String)>,
) -> Result<(Vec<(PathBuf, Entry)>, Vec<(PathBuf, PathBuf)>), FsError> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut entries: Vec<(PathBuf, Entry)> = Vec::new();
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (path, (r, origin)) in resolved {
        links.extend(r.links.iter().cloned());
        // A grant inside another with the same access adds nothing.
        let redundant = kept.iter().rev().find(|(p, _)| path.starts_with(p)).is_some_and(|(_, w)| *w == r.writable);
        if redundant {
            continue;
        }
        kept.push((path.clone(), r.writable));
        if r.writable && r.is_dir {
            entries.push((path, Entry::Staged(Some(r), origin)));
            continue;
        }
        if r.writable {
            grant::check_writable_by(&r, &origin, id.host_uid, id.host_gid)?;
        }
        let below = grant::kernel_submounts(&mountinfo, &path);
        if !below.is_empty() {
            let list = below.iter().map(|(p, t)| format!("{} ({t})", p.display())).collect();
            return Err(FsError::KernelSubmounts { origin, path, list });
        }
        entries.push((path, Entry::Bind(r)));
    }
    for (path, origin) in fresh {
        entries.push((path, Entry::Staged(None, origin)));
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
        if let Some(size) = fs.shm_size_bytes {
            entries.push((PathBuf::from("/dev/shm"), Entry::Shm(size)));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((entries, links))
}

/// The new root in words, for the report.
fn summary(fs: &Filesystem, plan: &FsPlan, by_tree: bool) -> String {
    let ro = plan.binds.iter().filter(|(_, b)| *b == Backing::Host { writable: false }).count();
    let rw_files = plan.binds.iter().filter(|(_, b)| *b == Backing::Host { writable: true }).count();
    let staged_dirs = plan.staged.len();
    format!(
        "new root: {ro} read-only path(s){}{}; {}{}; /proc {}; /dev {}; /tmp {}",
        if rw_files > 0 { format!(", {rw_files} writable file(s)") } else { String::new() },
        if by_tree { " (cloned mounts)" } else { " (bound by path as the caller)" },
        if staged_dirs > 0 {
            format!(
                "{staged_dirs} writable director{} staged on tmpfs ({} bytes, {} files each), written back at \
                 the end",
                if staged_dirs == 1 { "y" } else { "ies" },
                fs.writable_max_bytes,
                fs.writable_max_files
            )
        } else {
            "no writable directories".into()
        },
        if fs.writable_exec { ", writable places executable" } else { ", writable places noexec" },
        match fs.proc {
            ProcMode::PidOnly => "pid-only",
            ProcMode::Full => "full",
            ProcMode::None => "none",
        },
        match (fs.dev, fs.shm_size_bytes) {
            (false, _) => "none".to_string(),
            (true, Some(n)) => format!("minimal, /dev/shm {n} bytes"),
            (true, None) => "minimal".to_string(),
        },
        match fs.tmp_size_bytes {
            Some(n) => format!("{n} bytes"),
            None => "none".into(),
        },
    )
}
