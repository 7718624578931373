//! The host's cgroup layout, read from `/proc/self/mountinfo` and `/proc/self/cgroup` (passed
//! in as text, so tests use fixtures): which hierarchies are mounted where, and the caller's
//! own cgroup in each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One mounted hierarchy and the caller's cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where it is mounted.
    pub mount: PathBuf,
    /// The cgroup path the mount shows at its root (not `/` inside a cgroup namespace).
    pub root: String,
    /// The caller's cgroup path, as in /proc/self/cgroup.
    pub own: String,
}

impl Hierarchy {
    /// The directory of a cgroup path in this hierarchy; None when the path is outside what the
    /// mount shows.
    pub fn dir(&self, cgroup: &str) -> Option<PathBuf> {
        let rel = if self.root == "/" {
            cgroup.trim_start_matches('/')
        } else {
            cgroup.strip_prefix(self.root.as_str())?.trim_start_matches('/')
        };
        if rel.split('/').any(|c| c == "..") {
            return None;
        }
        Some(if rel.is_empty() { self.mount.clone() } else { self.mount.join(rel) })
    }
}

/// The layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    /// The cgroup2 hierarchy, if mounted (on a hybrid host it has no controllers).
    pub v2: Option<Hierarchy>,
    /// v1 hierarchies by controller name (a co-mounted `cpu,cpuacct` appears under both).
    pub v1: BTreeMap<String, Hierarchy>,
}

/// The host's shape, for reports and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// cgroup2 only.
    V2,
    /// v1 controllers and a cgroup2 hierarchy.
    Hybrid,
    /// v1 only.
    V1,
    /// No cgroup filesystem mounted.
    None,
}

impl Host {
    /// Reads the current process's layout.
    pub fn current() -> Host {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Host::parse(&mountinfo, &own)
    }

    /// Parses mountinfo and /proc/self/cgroup text.
    pub fn parse(mountinfo: &str, proc_cgroup: &str) -> Host {
        let mut own_v2 = None;
        let mut own_v1: BTreeMap<String, String> = BTreeMap::new();
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            if id == "0" && ctrls.is_empty() {
                own_v2 = Some(path.to_string());
            } else {
                for c in ctrls.split(',').filter(|c| !c.is_empty()) {
                    own_v1.insert(c.to_string(), path.to_string());
                }
            }
        }
        let mut host = Host::default();
        for line in mountinfo.lines() {
            let Some((before, after)) = line.split_once(" - ") else { continue };
            let fields: Vec<&str> = before.split(' ').collect();
            let rest: Vec<&str> = after.split(' ').collect();
            let (Some(root), Some(mount), Some(fstype)) = (fields.get(3), fields.get(4), rest.first()) else {
                continue;
            };
            let (root, mount) = (unescape(root), PathBuf::from(unescape(mount)));
            match *fstype {
                "cgroup2" => {
                    if let Some(own) = &own_v2 {
                        host.v2.get_or_insert(Hierarchy { mount, root, own: own.clone() });
                    }
                }
                "cgroup" => {
                    let opts = rest.get(2).copied().unwrap_or("");
                    for c in opts.split(',') {
                        if let Some(own) = own_v1.get(c) {
                            host.v1.entry(c.to_string()).or_insert(Hierarchy {
                                mount: mount.clone(),
                                root: root.clone(),
                                own: own.clone(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        host
    }

    pub fn shape(&self) -> Shape {
        match (self.v2.is_some(), self.v1.is_empty()) {
            (true, true) => Shape::V2,
            (true, false) => Shape::Hybrid,
            (false, false) => Shape::V1,
            (false, true) => Shape::None,
        }
    }
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::V2 => "cgroup v2",
            Shape::Hybrid => "hybrid (v1 controllers, cgroup2 without them)",
            Shape::V1 => "cgroup v1",
            Shape::None => "no cgroup filesystem",
        }
    }
}

/// The controllers enabled for the children of a cgroup2 directory.
pub fn subtree_controllers(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("cgroup.subtree_control"))
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(char::from(v));
            i += 4;
        } else {
            out.push(char::from(b[i]));
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn hybrid_host_is_read_with_the_callers_cgroups() {
        let h = Host::parse(HYBRID_MOUNTINFO, HYBRID_CGROUP);
        assert_eq!(h.shape(), Shape::Hybrid);
        let mem = &h.v1["memory"];
        assert_eq!(mem.dir(&mem.own), Some(PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")));
        assert_eq!(h.v1["pids"].dir("/"), Some(PathBuf::from("/sys/fs/cgroup/pids")));
        assert_eq!(h.v2.as_ref().map(|v| v.mount.clone()), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert!(!h.v1.contains_key("name=systemd") || h.v1.contains_key("name=systemd"));
    }

    #[test]
    fn pure_v2_inside_a_cgroup_namespace() {
        let mi = "29 23 0:26 /container/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = Host::parse(mi, "0::/container/x/app\n");
        assert_eq!(h.shape(), Shape::V2);
        let v2 = h.v2.expect("v2");
        assert_eq!(v2.dir("/container/x/app"), Some(PathBuf::from("/sys/fs/cgroup/app")));
        assert_eq!(v2.dir("/elsewhere"), None);
        assert_eq!(v2.dir("/container/x/../y"), None);
    }

    #[test]
    fn escaped_mount_points() {
        assert_eq!(unescape("/a\\040b"), "/a b");
    }
}
