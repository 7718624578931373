//! Grants resolved on the host: every symlink crossed recorded, the result opened and checked
//! (what it is, what filesystem it lives on, what is mounted below it, who may write it).

use super::FsError;
use crate::sys;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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

/// Kernel filesystems (by their mountinfo type) that must not ride into a jail below a grant:
/// each shows the host (its processes, devices, kernel state, namespaces) rather than files.
const KERNEL_FS_TYPES: [&str; 22] = [
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "nsfs",
    "debugfs",
    "tracefs",
    "securityfs",
    "bpf",
    "devtmpfs",
    "devpts",
    "configfs",
    "mqueue",
    "pstore",
    "efivarfs",
    "fusectl",
    "binfmt_misc",
    "hugetlbfs",
    "rpc_pipefs",
    "nfsd",
    "selinuxfs",
    "autofs",
];

/// A grant resolved on the host.
#[derive(Debug)]
pub(super) struct Resolved {
    pub canonical: PathBuf,
    pub file: File,
    pub is_dir: bool,
    pub writable: bool,
    pub links: Vec<(PathBuf, PathBuf)>,
}

/// `O_PATH` open of a path without following a final symlink.
pub(super) fn open_path(p: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_NOFOLLOW).open(p)
}

/// Resolves `path` from `/` one component at a time, like the kernel: `step(p)` says whether `p`
/// is a symlink (`Ok(Some(target))`, followed) or a real entry (`Ok(None)`). `.` and `..` are
/// handled lexically on the resolved prefix, as the kernel does after following links.
pub(super) fn walk<E>(
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
pub(super) fn resolve(path: &Path, writable: bool, optional: bool, origin: &str) -> Result<Option<Resolved>, FsError> {
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
        return Err(refused(format!("is {}; only files and directories can be granted", crate::input::kind_of(&meta))));
    }
    let magic = sys::fs_magic(file.as_fd()).map_err(|e| io_err(e.io()))?;
    if let Some((_, name)) = PSEUDO_FS.iter().find(|(m, _)| *m == magic) {
        return Err(refused(format!("is on {name}, a kernel filesystem that is never bound into a jail")));
    }
    Ok(Some(Resolved { canonical: cur, file, is_dir: ft.is_dir(), writable, links }))
}

/// The kernel filesystems mounted below `dir` (strictly), from a mountinfo text: (mount point,
/// type). A bind of the grant would carry them into the jail (`/proc` below a granted directory
/// shows every host process and its command line).
pub(super) fn kernel_submounts(mountinfo: &str, dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        // id parent major:minor root mount-point options [optional fields...] - type source super
        let mut fields = line.split(' ');
        let Some(point) = fields.nth(4) else { continue };
        let Some(fstype) = line.split(" - ").nth(1).and_then(|rest| rest.split(' ').next()) else { continue };
        let point = PathBuf::from(std::ffi::OsStr::from_bytes(&unescape(point)));
        if point != dir && point.starts_with(dir) && KERNEL_FS_TYPES.contains(&fstype) {
            found.push((point, fstype.to_string()));
        }
    }
    found
}

/// mountinfo escapes space, tab, newline and backslash as `\NNN` (octal).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Refuses a writable grant the jail's host ids cannot write (the jail would fail inside with a
/// bare "Permission denied"): the path, its owner and mode, and the ways out.
pub(super) fn check_writable_by(r: &Resolved, origin: &str, host_uid: u32, host_gid: u32) -> Result<(), FsError> {
    let meta = r.file.metadata().map_err(|source| FsError::Grant {
        origin: origin.into(),
        path: r.canonical.clone(),
        source,
    })?;
    let mode = meta.mode();
    let bits = if meta.uid() == host_uid {
        mode >> 6
    } else if meta.gid() == host_gid {
        mode >> 3
    } else {
        mode
    };
    let needed = if r.is_dir { 0o3 } else { 0o2 };
    if bits & needed == needed {
        return Ok(());
    }
    Err(FsError::Refused {
        origin: origin.into(),
        path: r.canonical.clone(),
        reason: format!(
            "is owned by uid {} gid {} with mode {:04o}: the jail's host uid {host_uid} (gid {host_gid}) cannot \
             write it; hand it to that uid (chown {host_uid}:{host_gid} {}), or set identity.host-uid/host-gid to \
             ids that can",
            meta.uid(),
            meta.gid(),
            mode & 0o7777,
            r.canonical.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_submounts_are_found_strictly_below_a_grant() {
        let mountinfo = "\
22 1 0:21 / /srv rw - ext4 /dev/vda rw
40 22 0:5 / /srv/work/proc rw,nosuid - proc proc rw
41 22 0:6 / /srv/work/with\\040space/sys rw - sysfs sysfs rw
42 22 0:7 / /srv/work/data rw - tmpfs tmpfs rw
43 22 0:8 / /srv/workshop/proc rw - proc proc rw
44 1 0:4 net:[4026531840] /run/netns/a rw shared:5 - nsfs nsfs rw
";
        let got = kernel_submounts(mountinfo, Path::new("/srv/work"));
        assert_eq!(
            got,
            vec![
                (PathBuf::from("/srv/work/proc"), "proc".to_string()),
                (PathBuf::from("/srv/work/with space/sys"), "sysfs".to_string()),
            ]
        );
        assert_eq!(kernel_submounts(mountinfo, Path::new("/run")).len(), 1);
        assert!(kernel_submounts(mountinfo, Path::new("/srv/work/proc")).is_empty(), "the grant itself is not below");
    }
}
