//! Writable places, staged: the program never writes a host directory. Each writable directory
//! (a `read-write` grant, a Wasm `/app`) is a tmpfs of the policy's size and inode quota that the
//! child mounts at the directory's path and hands to the supervisor (its fd, over the release
//! channel). Before the program starts, the supervisor copies the host directory into it; when
//! the run has ended, it writes back what changed. So a full quota is `ENOSPC` inside and never
//! a full host disk, the pages are charged to the run's memory cgroup, and a directory the jail's
//! uid could not write (root's, `0755`) just works.
//!
//! Everything here goes through directory fds, one name at a time, never following a symlink:
//! a link the program (or anyone) planted is copied as a link, never through. Write-back
//! replaces a changed file by renaming a new one over it, so a hard link on the host (to
//! `/etc/shadow`, say) is broken, never written through; the modes keep no setuid/setgid bits.
//! Host entries that were not copied in (sockets, FIFOs, devices, other mounts below the
//! directory) are never touched, and the report names them as not carried.

use super::FsError;
use crate::sys;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How deep a staged tree may be (deeper entries are not carried, and said so).
const MAX_DEPTH: usize = 128;

/// One writable place of a plan.
#[derive(Debug)]
pub struct StagedPlace {
    /// Where the program sees it (and, for a host directory, its canonical host path).
    pub inside: PathBuf,
    /// The host directory copied in and written back; `None`: an empty directory of the run's.
    pub host: Option<File>,
    /// Paths below it (relative) where other mounts of the jail sit: never copied or written.
    pub skip: Vec<PathBuf>,
    /// The key or flag that asked for it, for messages.
    pub origin: String,
}

/// What a staged tmpfs held right after the copy-in, to tell afterwards what the program changed.
#[derive(Debug, Default)]
pub struct Manifest {
    /// Directory (relative) -> entry name -> what was copied.
    dirs: HashMap<PathBuf, HashMap<Vec<u8>, Seen>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    kind: Kind,
    ino: u64,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Link,
}

fn kind(st: &rfs::Stat) -> Option<Kind> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Some(Kind::Dir),
        FileType::RegularFile => Some(Kind::File),
        FileType::Symlink => Some(Kind::Link),
        _ => None,
    }
}

fn seen(st: &rfs::Stat) -> Option<Seen> {
    Some(Seen {
        kind: kind(st)?,
        ino: st.st_ino,
        size: st.st_size,
        mtime: (st.st_mtime, st.st_mtime_nsec),
        ctime: (st.st_ctime, st.st_ctime_nsec),
    })
}

fn what_kind(st: &rfs::Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Socket => "a socket",
        FileType::Fifo => "a fifo",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "not a file, directory or link",
    }
}

/// The ids tmpfs-side entries are created with when the supervisor is root: the jail's host ids
/// (the tmpfs belongs to the jail's user namespace, where host root is not mapped and could
/// not create anything). `None`: the caller's own ids, which are the jail's.
pub type CreateAs = Option<(u32, u32)>;

/// Runs `f` with this thread's filesystem ids switched to `ids` (see [`CreateAs`]).
pub(super) fn as_jail<T>(ids: CreateAs, f: impl FnOnce() -> T) -> T {
    let Some((uid, gid)) = ids else { return f() };
    let prev = sys::set_thread_fsids(uid, gid);
    let out = f();
    sys::set_thread_fsids(prev.0, prev.1);
    out
}

/// A directory opened for listing and for `*at` calls, never through a symlink.
pub(super) fn open_dir(at: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rfs::openat(at, name, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
}

pub(super) fn names(dir: BorrowedFd<'_>) -> rustix::io::Result<Vec<CString>> {
    let mut out = Vec::new();
    for entry in rfs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name != c"." && name != c".." {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

fn rel_join(rel: &Path, name: &CStr) -> PathBuf {
    rel.join(OsStr::from_bytes(name.to_bytes()))
}

/// What a copy or write-back did, for the report.
#[derive(Debug, Default)]
pub struct Summary {
    /// Entries not carried (`/srv/work/sock (a socket)`).
    pub not_carried: Vec<String>,
    /// Files and links written back, and their bytes.
    pub written: u64,
    pub written_bytes: u64,
    /// Entries removed from the host because the program removed them.
    pub removed: u64,
}

struct Copy<'a> {
    place: &'a StagedPlace,
    ids: CreateAs,
    host_dev: u64,
    manifest: Manifest,
    summary: Summary,
}

/// Copies the place's host directory into its tmpfs (`root`, the fd the child sent). Refuses
/// with the quota keys when it does not fit.
pub fn copy_in(place: &StagedPlace, root: &OwnedFd, ids: CreateAs) -> Result<(Manifest, Summary), FsError> {
    let Some(host) = &place.host else { return Ok((Manifest::default(), Summary::default())) };
    let fail = |what: &'static str, e: rustix::io::Errno| stage_error(place, what, e);
    let src = open_dir(host.as_fd(), c".").map_err(|e| fail("open", e))?;
    let dst = open_dir(root.as_fd(), c".").map_err(|e| fail("open the staging tmpfs of", e))?;
    let host_dev = rfs::fstat(&src).map_err(|e| fail("stat", e))?.st_dev;
    let mut c = Copy { place, ids, host_dev, manifest: Manifest::default(), summary: Summary::default() };
    c.dir(src.as_fd(), dst.as_fd(), Path::new(""), 0)?;
    Ok((c.manifest, c.summary))
}

pub(super) fn stage_error(place: &StagedPlace, what: &'static str, e: rustix::io::Errno) -> FsError {
    if e == rustix::io::Errno::NOSPC || e == rustix::io::Errno::DQUOT {
        return FsError::Quota { origin: place.origin.clone(), path: place.inside.clone() };
    }
    FsError::Stage { what, path: place.inside.clone(), source: std::io::Error::from_raw_os_error(e.raw_os_error()) }
}

impl Copy<'_> {
    fn fail(&self, what: &'static str, e: rustix::io::Errno) -> FsError {
        stage_error(self.place, what, e)
    }

    fn not_carried(&mut self, rel: &Path, why: &str) {
        self.summary.not_carried.push(format!("{} ({why})", self.place.inside.join(rel).display()));
    }

    fn dir(&mut self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, rel: &Path, depth: usize) -> Result<(), FsError> {
        let list = names(src).map_err(|e| self.fail("list", e))?;
        for name in list {
            let relp = rel_join(rel, &name);
            if self.place.skip.contains(&relp) {
                continue;
            }
            let st = match rfs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(self.fail("stat", e)),
            };
            let Some(k) = kind(&st) else {
                self.not_carried(&relp, what_kind(&st));
                continue;
            };
            if st.st_dev != self.host_dev {
                self.not_carried(&relp, "another filesystem mounted there");
                continue;
            }
            let mode = Mode::from_raw_mode(st.st_mode & 0o1777);
            match k {
                Kind::Dir if depth >= MAX_DEPTH => {
                    self.not_carried(&relp, "nested too deep");
                    continue;
                }
                Kind::Dir => {
                    as_jail(self.ids, || rfs::mkdirat(dst, &name, Mode::from_raw_mode(0o700)))
                        .map_err(|e| self.fail("create a directory in", e))?;
                    let s = open_dir(src, &name).map_err(|e| self.fail("open", e))?;
                    let d = open_dir(dst, &name).map_err(|e| self.fail("open", e))?;
                    self.dir(s.as_fd(), d.as_fd(), &relp, depth + 1)?;
                    rfs::fchmod(&d, mode).map_err(|e| self.fail("chmod", e))?;
                    let _ = rfs::futimens(&d, &times(&st));
                }
                Kind::File => {
                    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                    let s = match rfs::openat(src, &name, flags, Mode::empty()) {
                        Ok(fd) => fd,
                        Err(rustix::io::Errno::ACCESS) => {
                            self.not_carried(&relp, "unreadable");
                            continue;
                        }
                        Err(e) => return Err(self.fail("open", e)),
                    };
                    let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let d = as_jail(self.ids, || rfs::openat(dst, &name, create, Mode::from_raw_mode(0o600)))
                        .map_err(|e| self.fail("create a file in", e))?;
                    copy_data(&s, &d).map_err(|e| self.fail("copy into", e))?;
                    rfs::fchmod(&d, Mode::from_raw_mode(st.st_mode & 0o777)).map_err(|e| self.fail("chmod", e))?;
                    let _ = rfs::futimens(&d, &times(&st));
                }
                Kind::Link => {
                    let target = rfs::readlinkat(src, &name, Vec::new()).map_err(|e| self.fail("read a link in", e))?;
                    as_jail(self.ids, || rfs::symlinkat(&target, dst, &name))
                        .map_err(|e| self.fail("create a link in", e))?;
                }
            }
            let copied = rfs::statat(dst, &name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| self.fail("stat", e))?;
            if let Some(s) = seen(&copied) {
                self.manifest.dirs.entry(rel.to_path_buf()).or_default().insert(name.to_bytes().to_vec(), s);
            }
        }
        Ok(())
    }
}

fn times(st: &rfs::Stat) -> Timestamps {
    let ts = |s: i64, ns: u64| Timespec { tv_sec: s, tv_nsec: i64::try_from(ns).unwrap_or(0) };
    Timestamps { last_access: ts(st.st_atime, st.st_atime_nsec), last_modification: ts(st.st_mtime, st.st_mtime_nsec) }
}

/// Copies a file's bytes (in the kernel where it can).
fn copy_data(src: &OwnedFd, dst: &OwnedFd) -> rustix::io::Result<u64> {
    let mut from = File::from(src.try_clone().map_err(|_| rustix::io::Errno::BADF)?);
    let mut to = File::from(dst.try_clone().map_err(|_| rustix::io::Errno::BADF)?);
    std::io::copy(&mut from, &mut to)
        .map_err(|e| rustix::io::Errno::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// How full a staged tmpfs is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub bytes_used: u64,
    pub files_used: u64,
    /// Its byte or inode quota is reached (a write or a create failed, or would).
    pub full: bool,
}

/// How full a staged tmpfs is now.
pub fn usage(root: &OwnedFd) -> Usage {
    match rfs::fstatvfs(root) {
        Ok(v) => Usage {
            bytes_used: v.f_blocks.saturating_sub(v.f_bfree) * v.f_frsize,
            files_used: v.f_files.saturating_sub(v.f_ffree),
            full: v.f_bfree == 0 || v.f_ffree == 0,
        },
        Err(_) => Usage::default(),
    }
}

struct Back<'a> {
    place: &'a StagedPlace,
    manifest: &'a Manifest,
    /// Who what the program wrote belongs to on the host (see [`write_back`]).
    owner: CreateAs,
    summary: Summary,
    seq: u64,
}

/// Writes back what the program changed in a staged tmpfs to its host directory.
///
/// Whatever the program wrote belongs to the jail's host ids on the host (`owner`, when the
/// supervisor is root; a normal user's jail is that user), as if it had written it itself: a
/// file it changed in a root-owned directory does not become a root-owned file that a daemon
/// reading the directory (cron, say) would trust.
pub fn write_back(
    place: &StagedPlace,
    root: &OwnedFd,
    manifest: &Manifest,
    owner: CreateAs,
) -> Result<Summary, FsError> {
    let Some(host) = &place.host else { return Ok(Summary::default()) };
    let fail = |what: &'static str, e: rustix::io::Errno| stage_error(place, what, e);
    let src = open_dir(root.as_fd(), c".").map_err(|e| fail("open the staging tmpfs of", e))?;
    let dst = open_dir(host.as_fd(), c".").map_err(|e| fail("open", e))?;
    let mut b = Back { place, manifest, owner, summary: Summary::default(), seq: 0 };
    b.dir(src.as_fd(), dst.as_fd(), Path::new(""), 0)?;
    Ok(b.summary)
}

impl Back<'_> {
    fn fail(&self, what: &'static str, e: rustix::io::Errno) -> FsError {
        FsError::WriteBack {
            what,
            path: self.place.inside.clone(),
            source: std::io::Error::from_raw_os_error(e.raw_os_error()),
        }
    }

    fn temp_name(&mut self) -> CString {
        self.seq += 1;
        CString::new(format!(".stockade-{}-{}", std::process::id(), self.seq)).unwrap_or_default()
    }

    fn dir(&mut self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>, rel: &Path, depth: usize) -> Result<(), FsError> {
        let list = names(src).map_err(|e| self.fail("list", e))?;
        let before = self.manifest.dirs.get(rel);
        let mut present: HashSet<Vec<u8>> = HashSet::new();
        for name in list {
            present.insert(name.to_bytes().to_vec());
            let relp = rel_join(rel, &name);
            if self.place.skip.contains(&relp) {
                continue;
            }
            let Ok(st) = rfs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
            let Some(now) = seen(&st) else { continue };
            let was = before.and_then(|m| m.get(name.to_bytes())).copied();
            let host = rfs::statat(dst, &name, AtFlags::SYMLINK_NOFOLLOW).ok();
            match now.kind {
                Kind::Dir if depth >= MAX_DEPTH => {}
                Kind::Dir => {
                    let is_dir = host.as_ref().is_some_and(|h| kind(h) == Some(Kind::Dir));
                    if !is_dir {
                        if host.is_some() {
                            remove_tree(dst, &name).map_err(|e| self.fail("replace", e))?;
                        }
                        rfs::mkdirat(dst, &name, Mode::from_raw_mode(st.st_mode & 0o1777))
                            .map_err(|e| self.fail("create a directory in", e))?;
                        if let Some((u, g)) = self.owner {
                            let _ = rfs::chownat(
                                dst,
                                &name,
                                Some(rfs::Uid::from_raw(u)),
                                Some(rfs::Gid::from_raw(g)),
                                AtFlags::SYMLINK_NOFOLLOW,
                            );
                        }
                    }
                    let s = open_dir(src, &name).map_err(|e| self.fail("open", e))?;
                    let d = open_dir(dst, &name).map_err(|e| self.fail("open", e))?;
                    self.dir(s.as_fd(), d.as_fd(), &relp, depth + 1)?;
                }
                _ if was.is_some_and(|w| w == now) => {}
                Kind::File | Kind::Link => {
                    let temp = self.temp_name();
                    let bytes = self.new_entry(src, dst, &name, &temp, &st, now.kind, self.owner)?;
                    if host.as_ref().is_some_and(|h| kind(h) == Some(Kind::Dir)) {
                        remove_tree(dst, &name).map_err(|e| self.fail("replace", e))?;
                    }
                    if let Err(e) = rfs::renameat(dst, &temp, dst, &name) {
                        let _ = rfs::unlinkat(dst, &temp, AtFlags::empty());
                        return Err(self.fail("replace", e));
                    }
                    self.summary.written += 1;
                    self.summary.written_bytes += bytes;
                }
            }
        }
        // What was copied in and is gone now, the program removed.
        if let Some(before) = before {
            for name in before.keys().filter(|n| !present.contains(*n)) {
                let Ok(c) = CString::new(name.clone()) else { continue };
                if self.place.skip.contains(&rel_join(rel, &c)) {
                    continue;
                }
                match remove_tree(dst, &c) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => self.summary.removed += 1,
                    Err(e) => return Err(self.fail("remove", e)),
                }
            }
        }
        Ok(())
    }

    /// Creates the new version of a file or link under a temporary name in the host directory.
    #[allow(clippy::too_many_arguments)]
    fn new_entry(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        name: &CStr,
        temp: &CStr,
        st: &rfs::Stat,
        k: Kind,
        owner: Option<(u32, u32)>,
    ) -> Result<u64, FsError> {
        let chown = |uid: u32, gid: u32| (Some(rfs::Uid::from_raw(uid)), Some(rfs::Gid::from_raw(gid)));
        if k == Kind::Link {
            let target = rfs::readlinkat(src, name, Vec::new()).map_err(|e| self.fail("read a link in", e))?;
            rfs::symlinkat(&target, dst, temp).map_err(|e| self.fail("create a link in", e))?;
            if let Some((u, g)) = owner {
                let (u, g) = chown(u, g);
                let _ = rfs::chownat(dst, temp, u, g, AtFlags::SYMLINK_NOFOLLOW);
            }
            return Ok(0);
        }
        let s = rfs::openat(src, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| self.fail("open", e))?;
        let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let d =
            rfs::openat(dst, temp, create, Mode::from_raw_mode(0o600)).map_err(|e| self.fail("create a file in", e))?;
        let written = copy_data(&s, &d).and_then(|n| {
            if let Some((u, g)) = owner {
                let (u, g) = chown(u, g);
                rfs::fchown(&d, u, g)?;
            }
            rfs::fchmod(&d, Mode::from_raw_mode(st.st_mode & 0o777))?;
            let _ = rfs::futimens(&d, &times(st));
            Ok(n)
        });
        written.map_err(|e| {
            let _ = rfs::unlinkat(dst, temp, AtFlags::empty());
            self.fail("write", e)
        })
    }
}

/// Removes a directory entry and, for a directory, everything below it: through fds, never
/// following a symlink.
fn remove_tree(dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<()> {
    remove_below(dir, name, 0)
}

fn remove_below(dir: BorrowedFd<'_>, name: &CStr, depth: usize) -> rustix::io::Result<()> {
    let st = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return rfs::unlinkat(dir, name, AtFlags::empty());
    }
    if depth >= 4 * MAX_DEPTH {
        return Err(rustix::io::Errno::LOOP);
    }
    let sub = open_dir(dir, name)?;
    for child in names(sub.as_fd())? {
        remove_below(sub.as_fd(), &child, depth + 1)?;
    }
    rfs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}
