//! Files handed to a run and taken back from it, through the tmpfs of one of its writable
//! directories (the fd the child sent, see `staging.rs`): a service puts the request's files into
//! the run's empty work directory before its clock starts, and takes the files it asked for out
//! of it after the run, before the tmpfs is gone. Like the staging, everything goes through
//! directory fds, one name at a time, never following a symlink; what the program left is read
//! with bounds on count, bytes and depth, whatever it planted.

use super::FsError;
use super::staging::{CreateAs, StagedPlace, as_jail, names, open_dir, stage_error};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// How deep a put or taken file may be below the directory.
pub const MAX_DEPTH: usize = 32;
/// The most directory entries looked at when taking files (a program may leave millions).
pub const MAX_ENTRIES_SEEN: usize = 100_000;

/// A file for the run: a relative path below its directory, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutFile {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

/// Checks a relative file path for [`put`]: only plain names (no `..`, `.`, root or empty
/// part), at most [`MAX_DEPTH`] of them, each at most 255 bytes, no NUL. `Err` says why.
pub fn check_relative(path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Err("is empty".into());
    }
    if path.contains('\0') {
        return Err("contains a NUL byte".into());
    }
    if path.starts_with('/') {
        return Err("is absolute: give a path relative to the run's directory".into());
    }
    let p = Path::new(path);
    let mut depth = 0;
    for c in p.components() {
        match c {
            Component::Normal(n) if n.len() <= 255 => depth += 1,
            Component::Normal(_) => return Err("has a name longer than 255 bytes".into()),
            Component::ParentDir => return Err("contains '..'".into()),
            _ => return Err("contains '.' or an empty part".into()),
        }
    }
    if path.ends_with('/') || path.contains("//") || path.split('/').any(|s| s == ".") {
        return Err("contains '.' or an empty part".into());
    }
    if depth > MAX_DEPTH {
        return Err(format!("is nested deeper than {MAX_DEPTH} directories"));
    }
    Ok(p.to_path_buf())
}

/// Writes `files` into the staged tmpfs `root` of `place`: parent directories are made (0755),
/// each file is created new (0644; a path given twice, or below a file, is an error), as the
/// jail's ids. A file that does not fit is the quota error naming the policy keys.
pub fn put(place: &StagedPlace, root: &OwnedFd, files: &[PutFile], ids: CreateAs) -> Result<(), FsError> {
    let fail = |what: &'static str, e: rustix::io::Errno| stage_error(place, what, e);
    for f in files {
        let rel = check_relative(&f.path.to_string_lossy()).map_err(|reason| FsError::Refused {
            origin: place.origin.clone(),
            path: place.inside.join(&f.path),
            reason,
        })?;
        let mut dir = open_dir(root.as_fd(), c".").map_err(|e| fail("open the staging tmpfs of", e))?;
        let parts: Vec<_> = rel.components().collect();
        let Some((last, parents)) = parts.split_last() else { continue };
        for part in parents {
            let name = cname(part.as_os_str().as_bytes());
            match as_jail(ids, || rfs::mkdirat(&dir, &name, Mode::from_raw_mode(0o755))) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(fail("create a directory in", e)),
            }
            dir = open_dir(dir.as_fd(), &name).map_err(|e| fail("open a directory in", e))?;
        }
        let name = cname(last.as_os_str().as_bytes());
        let create = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = as_jail(ids, || rfs::openat(&dir, &name, create, Mode::from_raw_mode(0o644)))
            .map_err(|e| fail("create a file in", e))?;
        std::fs::File::from(fd).write_all(&f.bytes).map_err(|e| {
            fail("write into", rustix::io::Errno::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO)))
        })?;
    }
    Ok(())
}

fn cname(bytes: &[u8]) -> CString {
    // check_relative refused NUL bytes.
    CString::new(bytes).unwrap_or_default()
}

/// Which files to take back, and how many bytes at most.
#[derive(Debug, Clone)]
pub struct Pick {
    /// Shell-style patterns matched against the whole relative path (`*` stays within one
    /// directory, `**` crosses them).
    pub patterns: Vec<glob::Pattern>,
    pub max_files: usize,
    pub max_bytes: u64,
}

/// Files taken back from a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taken {
    /// Relative path and bytes, in path order.
    pub files: Vec<(String, Vec<u8>)>,
    /// Matching files left out because a cap (`max_files`, `max_bytes`) was reached, or because
    /// the directory held more than [`MAX_ENTRIES_SEEN`] entries: the caller says so.
    pub capped: bool,
    /// Matching entries that are not regular files (links, FIFOs...), never read.
    pub skipped: Vec<String>,
}

/// Reads the files matching `pick` out of a staged tmpfs after the run.
pub fn take(root: &OwnedFd, pick: &Pick) -> Taken {
    let mut found = Vec::new();
    let mut t = Taken::default();
    let mut seen = 0;
    if let Ok(dir) = open_dir(root.as_fd(), c".") {
        walk(dir.as_fd(), Path::new(""), 0, pick, &mut found, &mut t, &mut seen);
    }
    found.sort();
    let mut bytes = 0u64;
    for rel in found {
        if t.files.len() >= pick.max_files {
            t.capped = true;
            break;
        }
        match read_below(root.as_fd(), &rel, pick.max_bytes - bytes) {
            Some(Ok(data)) => {
                bytes += data.len() as u64;
                t.files.push((rel, data));
            }
            Some(Err(())) => {
                t.capped = true;
                break;
            }
            None => t.skipped.push(rel),
        }
    }
    t
}

fn walk(
    dir: BorrowedFd<'_>,
    rel: &Path,
    depth: usize,
    pick: &Pick,
    found: &mut Vec<String>,
    t: &mut Taken,
    seen: &mut usize,
) {
    let Ok(list) = names(dir) else { return };
    let options = glob::MatchOptions { case_sensitive: true, require_literal_separator: true, ..Default::default() };
    for name in list {
        *seen += 1;
        if *seen > MAX_ENTRIES_SEEN {
            t.capped = true;
            return;
        }
        let Ok(text) = name.to_str() else { continue };
        let relp = rel.join(text);
        let Some(path) = relp.to_str() else { continue };
        let Ok(st) = rfs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
        let matches = pick.patterns.iter().any(|p| p.matches_with(path, options));
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory if depth < MAX_DEPTH => {
                if let Ok(sub) = open_dir(dir, &name) {
                    walk(sub.as_fd(), &relp, depth + 1, pick, found, t, seen);
                }
            }
            FileType::RegularFile if matches => found.push(path.to_string()),
            FileType::Directory => {}
            _ if matches => t.skipped.push(path.to_string()),
            _ => {}
        }
    }
}

/// Reads a regular file below `root` by its relative path, one name at a time, never through a
/// symlink: `None` when it is not a regular file any more, `Err` when it is larger than `room`.
fn read_below(root: BorrowedFd<'_>, rel: &str, room: u64) -> Option<Result<Vec<u8>, ()>> {
    let parts: Vec<&str> = rel.split('/').collect();
    let (last, parents) = parts.split_last()?;
    let mut dir = open_dir(root, c".").ok()?;
    for p in parents {
        dir = open_dir(dir.as_fd(), &CString::new(*p).ok()?).ok()?;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rfs::openat(&dir, &CString::new(*last).ok()?, flags, Mode::empty()).ok()?;
    let st = rfs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut data = Vec::new();
    // One byte past the room tells a file that does not fit.
    std::fs::File::from(fd).take(room.saturating_add(1)).read_to_end(&mut data).ok()?;
    Some(if data.len() as u64 > room { Err(()) } else { Ok(data) })
}

/// Parses `return-files` patterns; `Err` names the bad one.
pub fn patterns(list: &[String]) -> Result<Vec<glob::Pattern>, (usize, String)> {
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            if p.starts_with('/') || p.split('/').any(|s| s == "..") {
                return Err((i, "must be relative to the run's directory, without '..'".into()));
            }
            glob::Pattern::new(p).map_err(|e| (i, e.to_string()))
        })
        .collect()
}

/// The staged place whose inside path is `dir`.
pub fn place_index(staged: &[StagedPlace], dir: &Path) -> Option<usize> {
    staged.iter().position(|p| p.inside == dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_plain_names_only() {
        assert_eq!(check_relative("data.csv"), Ok(PathBuf::from("data.csv")));
        assert_eq!(check_relative("in/a/b.txt"), Ok(PathBuf::from("in/a/b.txt")));
        for (bad, why) in [
            ("", "is empty"),
            ("/etc/passwd", "is absolute"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("a//b", "empty part"),
            ("./a", "'.'"),
            ("a/", "empty part"),
            ("a\0b", "NUL"),
        ] {
            let e = check_relative(bad).expect_err(bad);
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let deep = vec!["d"; MAX_DEPTH + 1].join("/");
        assert!(check_relative(&deep).is_err());
        assert!(check_relative(&"x".repeat(256)).is_err());
    }

    #[test]
    fn patterns_stay_inside() {
        assert!(patterns(&["*.png".into(), "out/**".into()]).is_ok());
        assert_eq!(patterns(&["ok".into(), "/etc/*".into()]).map(|_| ()).unwrap_err().0, 1);
        assert_eq!(patterns(&["../*".into()]).map(|_| ()).unwrap_err().0, 0);
        assert_eq!(patterns(&["[".into()]).map(|_| ()).unwrap_err().0, 0);
    }
}
