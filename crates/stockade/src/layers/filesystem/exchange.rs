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

/// Removes the file at `rel` (checked by [`check_relative`]) below the staged tmpfs `root`, one
/// name at a time, never through a symlink: `Ok(false)` when there is none. A directory is not
/// removed (`EISDIR`).
pub fn remove(root: &OwnedFd, rel: &Path) -> rustix::io::Result<bool> {
    let parts: Vec<_> = rel.components().collect();
    let Some((last, parents)) = parts.split_last() else { return Ok(false) };
    let mut dir = open_dir(root.as_fd(), c".")?;
    for part in parents {
        match open_dir(dir.as_fd(), &cname(part.as_os_str().as_bytes())) {
            Ok(d) => dir = d,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    match rfs::unlinkat(&dir, cname(last.as_os_str().as_bytes()), AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::NOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// One run's writable directory, reached from outside while the run goes on (a live session's
/// files between its turns): the supervisor lends it a duplicate of the directory's tmpfs fd once
/// the run's files are in ([`Start::live_dir`](crate::Start::live_dir)). Every operation goes
/// through directory fds as [`put`] and [`take`] do, never through a symlink, whatever the
/// program planted; the tmpfs's own size and inode caps hold. The tmpfs stays readable after the
/// run (its jail gone) until this is dropped: what a killed run left can be taken.
#[derive(Debug, Default)]
pub struct LiveDir {
    lent: std::sync::Mutex<Option<Lent>>,
}

#[derive(Debug)]
struct Lent {
    place: StagedPlace,
    root: OwnedFd,
    ids: CreateAs,
}

impl LiveDir {
    /// Lends the directory (the supervisor's side).
    pub(crate) fn lend(&self, place: &StagedPlace, root: &OwnedFd, ids: CreateAs) {
        let Ok(root) = root.try_clone() else { return };
        let place =
            StagedPlace { inside: place.inside.clone(), host: None, skip: Vec::new(), origin: place.origin.clone() };
        *self.lock() = Some(Lent { place, root, ids });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Lent>> {
        self.lent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lent<T>(&self, f: impl FnOnce(&Lent) -> Result<T, FsError>) -> Result<T, FsError> {
        match &*self.lock() {
            Some(l) => f(l),
            None => Err(FsError::Refused {
                origin: "files".into(),
                path: PathBuf::new(),
                reason: "the run's directory is not reachable (its run has not started)".into(),
            }),
        }
    }

    /// Writes `files`, each replacing a file of its path.
    pub fn put(&self, files: &[PutFile]) -> Result<(), FsError> {
        self.lent(|l| {
            for f in files {
                remove(&l.root, &f.path).map_err(|e| stage_error(&l.place, "replace a file in", e))?;
            }
            put(&l.place, &l.root, files, l.ids)
        })
    }

    /// Removes the file at `rel`; `Ok(false)` when there is none.
    pub fn remove(&self, rel: &Path) -> Result<bool, FsError> {
        self.lent(|l| remove(&l.root, rel).map_err(|e| stage_error(&l.place, "remove a file from", e)))
    }

    /// The files matching `pick`, as [`take`] reads them.
    pub fn take(&self, pick: &Pick) -> Option<Taken> {
        self.lock().as_ref().map(|l| take(&l.root, pick))
    }
}

fn cname(bytes: &[u8]) -> CString {
    // check_relative refused NUL bytes.
    CString::new(bytes).unwrap_or_default()
}

/// Which files to take back, and how many bytes at most.
#[derive(Debug, Clone)]
pub struct Pick {
    /// Shell-style patterns matched against the whole relative path (`*` stays within one
    /// directory, `**` crosses them), compiled together ([`patterns`]): matching is linear in
    /// the path's length, whatever the patterns.
    pub patterns: globset::GlobSet,
    /// The patterns as written (what [`patterns`] compiled), to send them elsewhere.
    pub sources: Vec<String>,
    pub max_files: usize,
    pub max_bytes: u64,
}

/// The longest `return-files` pattern, bytes.
pub const PATTERN_MAX_BYTES: usize = 1024;
/// How long taking files back may take, walking and reading together; past it the rest is
/// left out (and `capped` says so).
pub const TAKE_TIME_MAX: std::time::Duration = std::time::Duration::from_secs(5);
/// Why a file was left out at [`Pick::max_files`] and at [`Pick::max_bytes`].
pub const OVER_COUNT: &str = "over the request's return-files-max-count";
pub const OVER_BYTES: &str = "over the request's return-files-max-bytes";

/// How many left-out files a [`Taken`] names (the rest are counted).
pub const SKIPPED_NAMED_MAX: usize = 100;

/// Files taken back from a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taken {
    /// Relative path and bytes, in path order.
    pub files: Vec<(String, Vec<u8>)>,
    /// Matching files left out because a cap (`max_files`, `max_bytes`) was reached, or because
    /// the directory held more than [`MAX_ENTRIES_SEEN`] entries or took longer than
    /// [`TAKE_TIME_MAX`] to go through: the caller says so.
    pub capped: bool,
    /// Matching entries left out, each with the reason (at most [`SKIPPED_NAMED_MAX`]).
    pub skipped: Vec<Skipped>,
    /// How many matching entries were left out in all (`skipped` names the first ones).
    pub skipped_count: usize,
}

/// A matching entry that was not given back, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its relative path (a name that is not UTF-8 shown with U+FFFD in its place).
    pub path: String,
    pub reason: String,
}

impl Taken {
    fn skip(&mut self, path: String, reason: &'static str) {
        self.skipped_count += 1;
        if self.skipped.len() < SKIPPED_NAMED_MAX {
            self.skipped.push(Skipped { path, reason: reason.to_string() });
        }
    }
}

/// Reads the files matching `pick` out of a staged tmpfs after the run: a walk of at most
/// [`MAX_ENTRIES_SEEN`] entries (kept on a list, not the stack: any depth), then the matching
/// regular files in path order up to the caps, all within [`TAKE_TIME_MAX`].
pub fn take(root: &OwnedFd, pick: &Pick) -> Taken {
    let deadline = std::time::Instant::now() + TAKE_TIME_MAX;
    let mut t = Taken::default();
    let mut found = walk(root.as_fd(), pick, deadline, &mut t);
    found.sort();
    let mut bytes = 0u64;
    let mut rest = found.into_iter();
    for rel in rest.by_ref() {
        if t.files.len() >= pick.max_files {
            t.capped = true;
            t.skip(rel, OVER_COUNT);
            break;
        }
        if std::time::Instant::now() >= deadline {
            t.capped = true;
            t.skip(rel, "taking files back ran out of time");
            break;
        }
        match read_below(root.as_fd(), &rel, pick.max_bytes - bytes) {
            Some(Ok(data)) => {
                bytes += data.len() as u64;
                t.files.push((rel, data));
            }
            Some(Err(())) => {
                t.capped = true;
                t.skip(rel, OVER_BYTES);
                break;
            }
            None => t.skip(rel, "not a regular file any more"),
        }
    }
    for rel in rest {
        t.skip(rel, "left out after a cap was reached");
    }
    t
}

/// What [`take`] would take with `pick` from a directory holding `files` (relative paths in path
/// order, and their bytes) and nothing else: a choice among files already taken.
pub fn select(files: &[(String, Vec<u8>)], pick: &Pick) -> Taken {
    let mut t = Taken::default();
    let mut bytes = 0u64;
    let mut matching = files.iter().filter(|(path, _)| pick.patterns.is_match(path));
    for (path, data) in matching.by_ref() {
        if t.files.len() >= pick.max_files {
            t.capped = true;
            t.skip(path.clone(), OVER_COUNT);
            break;
        }
        if bytes + data.len() as u64 > pick.max_bytes {
            t.capped = true;
            t.skip(path.clone(), OVER_BYTES);
            break;
        }
        bytes += data.len() as u64;
        t.files.push((path.clone(), data.clone()));
    }
    for (path, _) in matching {
        t.skip(path.clone(), "left out after a cap was reached");
    }
    t
}

/// The matching regular files below `root` (relative UTF-8 paths); what matches but cannot be
/// given back goes into `t.skipped`.
fn walk(root: BorrowedFd<'_>, pick: &Pick, deadline: std::time::Instant, t: &mut Taken) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut todo: Vec<(OwnedFd, PathBuf)> = Vec::new();
    if let Ok(dir) = open_dir(root, c".") {
        todo.push((dir, PathBuf::new()));
    }
    while let Some((dir, rel)) = todo.pop() {
        let Ok(list) = names(dir.as_fd()) else { continue };
        for name in list {
            seen += 1;
            if seen > MAX_ENTRIES_SEEN || (seen.is_multiple_of(256) && std::time::Instant::now() >= deadline) {
                t.capped = true;
                return found;
            }
            let relp = rel.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            let Ok(st) = rfs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) else { continue };
            let kind = FileType::from_raw_mode(st.st_mode);
            if kind == FileType::Directory {
                if let Ok(sub) = open_dir(dir.as_fd(), &name) {
                    todo.push((sub, relp));
                }
                continue;
            }
            if !pick.patterns.is_match(&relp) {
                continue;
            }
            match (kind, relp.to_str()) {
                (FileType::RegularFile, Some(path)) => found.push(path.to_string()),
                (FileType::RegularFile, None) => {
                    t.skip(relp.to_string_lossy().into_owned(), "its name is not UTF-8");
                }
                (FileType::Symlink, _) => t.skip(relp.to_string_lossy().into_owned(), "a symlink (never followed)"),
                _ => t.skip(relp.to_string_lossy().into_owned(), "not a regular file"),
            }
        }
    }
    found
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

/// Compiles `return-files` patterns into one set (`*` within a directory, `**` across, `?`,
/// `[...]`, `{a,b}`); `Err` names the bad one (index) and why.
pub fn patterns(list: &[String]) -> Result<globset::GlobSet, (usize, String)> {
    let mut set = globset::GlobSetBuilder::new();
    for (i, p) in list.iter().enumerate() {
        if p.is_empty() {
            return Err((i, "is empty".into()));
        }
        if p.len() > PATTERN_MAX_BYTES {
            return Err((i, format!("is longer than {PATTERN_MAX_BYTES} bytes")));
        }
        if p.starts_with('/') || p.split('/').any(|s| s == "..") {
            return Err((i, "must be relative to the run's directory, without '..'".into()));
        }
        let glob = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| (i, e.kind().to_string()))?;
        set.add(glob);
    }
    // One set's automaton can still be too large for the matcher's size limit.
    set.build().map_err(|e| (list.len().saturating_sub(1), format!("the patterns together are too complex: {e}")))
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
        assert_eq!(patterns(&["".into()]).map(|_| ()).unwrap_err().0, 0);
        assert_eq!(patterns(&["x".repeat(PATTERN_MAX_BYTES + 1)]).map(|_| ()).unwrap_err().0, 0);
    }

    #[test]
    fn patterns_keep_their_meaning() {
        let set = patterns(&["*.png".into(), "out/**".into(), "d?/x".into()]).expect("valid");
        for yes in ["a.png", "out/a", "out/a/b.txt", "d1/x"] {
            assert!(set.is_match(yes), "{yes}");
        }
        for no in ["sub/a.png", "out", "outx/a", "d12/x", "a.pngx"] {
            assert!(!set.is_match(no), "{no}");
        }
    }

    #[test]
    fn backtracking_patterns_match_in_linear_time() {
        // glob 0.3 backtracks on this one exponentially (it never answered).
        let p = format!("{}*b", "*a".repeat(25));
        let set = patterns(&[p]).expect("valid");
        let path = format!("{}/x", "a".repeat(60));
        let t = std::time::Instant::now();
        assert!(!set.is_match(&path));
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
    }

    #[test]
    fn a_selection_keeps_take_s_order_caps_and_reasons() {
        let files: Vec<(String, Vec<u8>)> =
            ["a.csv", "b.csv", "c.csv", "d.txt"].iter().map(|p| (p.to_string(), vec![b'x'; 10])).collect();
        let pick = |max_files, max_bytes| Pick {
            patterns: patterns(&["*.csv".into()]).expect("valid"),
            sources: vec!["*.csv".into()],
            max_files,
            max_bytes,
        };
        let t = select(&files, &pick(10, 100));
        assert_eq!(t.files.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["a.csv", "b.csv", "c.csv"]);
        assert!(!t.capped && t.skipped.is_empty());
        let t = select(&files, &pick(2, 100));
        assert_eq!((t.files.len(), t.capped, t.skipped_count), (2, true, 1));
        assert_eq!(t.skipped[0].reason, OVER_COUNT);
        let t = select(&files, &pick(10, 25));
        assert_eq!((t.files.len(), t.capped, t.skipped_count), (2, true, 1));
        assert_eq!((t.skipped[0].path.as_str(), t.skipped[0].reason.as_str()), ("c.csv", OVER_BYTES));
    }
}
