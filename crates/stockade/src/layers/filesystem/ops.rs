//! The steps the child runs to build the new root ([`MountOp`]), every path a C string built by
//! the parent, and what each bind's object is.

use super::STAGE;
use std::ffi::{CString, c_ulong};

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
    /// Attach a host object at `target` (see [`BindSource`]).
    Bind {
        source: BindSource,
        target: CString,
    },
    /// Hand the filesystem just mounted at `target` to the supervisor: its fd, over the release
    /// channel (a staged writable directory).
    Send {
        target: CString,
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

/// Where a bind's object comes from.
#[derive(Debug)]
pub enum BindSource {
    /// The N-th detached mount the supervisor cloned for this run (`open_tree`), attached with
    /// `move_mount`: exactly the object the parent opened and checked.
    Tree(usize),
    /// `mount(path, target, MS_BIND|MS_REC)` in the child's namespace, then the target's root
    /// must be `(dev, ino)` (a normal user's supervisor cannot clone mounts).
    Path { source: CString, dev: u64, ino: u64 },
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
            MountOp::Send { target } => format!("hand {} to the supervisor", inside(target)),
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
