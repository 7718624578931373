//! A run's leaves: made (and limited) per run, read when it ends, killed as one, removed; and
//! the leaves a killed supervisor left, reaped. cgroup v2 and v1 side by side: the v2 leaf (born
//! in with `clone3`, `cgroup.kill`, `cpu.stat`) and one v1 leaf per limited hierarchy (joined by
//! the child through its `tasks` file).

use super::{CgroupError, CgroupPlan, CgroupStats};
use std::ffi::CStr;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Kills and removes the leaves in `parent` whose supervisor is gone.
pub(super) fn reap_stale(parent: &Path) {
    for dir in crate::leftovers::of_gone_owners(parent, "stockade") {
        kill_all(&dir);
        let _ = remove_dir(&dir, Duration::from_millis(200));
    }
}

/// Kills every process in a cgroup directory: `cgroup.kill` (v2), else each pid in
/// `cgroup.procs` until none is left (v1).
fn kill_all(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for _ in 0..100 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs.lines().filter_map(|l| l.trim().parse().ok()).collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            crate::sys::kill(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `rmdir`, retried while the kernel still counts exiting tasks in the cgroup.
fn remove_dir(dir: &Path, patience: Duration) -> std::io::Result<()> {
    let end = Instant::now() + patience;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < end => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes a limit through the leaf's directory fd (no path walk per file).
fn write_limit(dir: &Path, fd: &File, file: &CStr, value: &str) -> Result<(), CgroupError> {
    crate::sys::write_at(fd.as_fd(), file, value.as_bytes()).map_err(|e| CgroupError::Write {
        path: dir.join(file.to_string_lossy().as_ref()),
        value: value.into(),
        source: e.io(),
    })
}

fn open_dir(dir: &Path) -> Result<File, CgroupError> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).open(dir).map_err(|source| CgroupError::Io {
        what: "open",
        path: dir.to_path_buf(),
        source,
    })
}

/// A run's leaves. Removed (after killing what is left) when dropped.
#[derive(Debug)]
pub struct Leaf {
    v2: Option<(PathBuf, File)>,
    v1: Vec<V1Leaf>,
    /// A reader's copy ([`Leaf::reader`]): it reads the figures, never kills or removes.
    reader: bool,
}

#[derive(Debug)]
struct V1Leaf {
    controller: &'static str,
    dir: PathBuf,
    fd: File,
}

impl CgroupPlan {
    /// Creates this run's leaves and writes the limits. `None` when cgroups are off.
    pub fn create_leaf(&self) -> Result<Option<Leaf>, CgroupError> {
        if !self.enabled || (self.v2_parent.is_none() && self.v1.is_empty()) {
            return Ok(None);
        }
        let name = format!("{}-{}", crate::leftovers::owner_tag("stockade"), SEQ.fetch_add(1, Ordering::Relaxed));
        // Each directory joins `leaf` as soon as it exists, so a failed write still removes it.
        let mut leaf = Leaf { v2: None, v1: Vec::new(), reader: false };
        if let Some(parent) = &self.v2_parent {
            let dir = parent.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let fd = open_dir(&dir)?;
                    let (dir, fd) = leaf.v2.insert((dir, fd));
                    for (f, v) in &self.v2_writes {
                        match write_limit(dir, fd, f, v) {
                            // No swap accounting on this host: there is no swap to forbid.
                            Err(CgroupError::Write { source, .. })
                                if *f == c"memory.swap.max" && source.kind() == std::io::ErrorKind::NotFound => {}
                            other => other?,
                        }
                    }
                }
                Err(source) if self.v2_required => {
                    return Err(CgroupError::Io { what: "create", path: dir, source });
                }
                // A hybrid host's empty cgroup2 is a convenience (kill, CPU time): go without it.
                Err(_) => {}
            }
        }
        for part in &self.v1 {
            let dir = part.parent.join(&name);
            std::fs::create_dir(&dir).map_err(|source| CgroupError::Io {
                what: "create",
                path: dir.clone(),
                source,
            })?;
            let fd = match open_dir(&dir) {
                Ok(fd) => fd,
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(e);
                }
            };
            leaf.v1.push(V1Leaf { controller: part.controller, dir, fd });
            let Some(l) = leaf.v1.last() else { continue };
            for (f, v) in &part.writes {
                match write_limit(&l.dir, &l.fd, f, v) {
                    Err(CgroupError::Write { source, .. })
                        if *f == c"memory.memsw.limit_in_bytes" && source.kind() == std::io::ErrorKind::NotFound => {}
                    other => other?,
                }
            }
        }
        Ok(Some(leaf))
    }
}

fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok()).flatten()
    })
}

impl Leaf {
    /// The cgroup2 leaf's fd for `clone3(CLONE_INTO_CGROUP)`.
    pub fn clone_fd(&self) -> Option<RawFd> {
        self.v2.as_ref().map(|(_, f)| f.as_raw_fd())
    }

    /// The v1 leaves' `tasks` files, write-only and close-on-exec, for the child's [`apply`].
    pub fn open_tasks(&self) -> Result<Vec<OwnedFd>, CgroupError> {
        self.v1
            .iter()
            .map(|l| {
                crate::sys::openat_write(l.fd.as_fd(), c"tasks").map_err(|errno| CgroupError::Io {
                    what: "open",
                    path: l.dir.join("tasks"),
                    source: std::io::Error::from_raw_os_error(errno.0),
                })
            })
            .collect()
    }

    /// Kills every process in the run's cgroups.
    pub fn kill(&self) {
        if self.reader {
            return;
        }
        if let Some((dir, _)) = &self.v2 {
            kill_all(dir);
        } else {
            for l in &self.v1 {
                kill_all(&l.dir);
            }
        }
    }

    /// The CPU time the leaves recorded so far (user, system), and nothing else: what a run had
    /// used when its jail was handed its run.
    pub fn cpu_used(&self) -> CgroupStats {
        let read = |fd: &File, name: &CStr| crate::sys::read_at(fd.as_fd(), name).unwrap_or_default();
        let num = |fd: &File, name: &CStr| read(fd, name).trim().parse::<u64>().ok();
        let mut s = CgroupStats::default();
        if let Some((_, fd)) = &self.v2 {
            let cpu = read(fd, c"cpu.stat");
            s.cpu_user_us = field(&cpu, "user_usec");
            s.cpu_sys_us = field(&cpu, "system_usec");
            return s;
        }
        // cpuacct, alone or co-mounted with cpu.
        for l in &self.v1 {
            if let Some(user) = num(&l.fd, c"cpuacct.usage_user") {
                s.cpu_user_us = Some(user / 1000);
                s.cpu_sys_us = num(&l.fd, c"cpuacct.usage_sys").map(|ns| ns / 1000);
                break;
            }
        }
        s
    }

    /// Reads what the leaves recorded.
    pub fn stats(&self) -> CgroupStats {
        let read = |fd: &File, name: &CStr| crate::sys::read_at(fd.as_fd(), name).unwrap_or_default();
        let num = |fd: &File, name: &CStr| read(fd, name).trim().parse::<u64>().ok();
        let mut s = self.cpu_used();
        // A controller is read where it is: on a hybrid host the v2 leaf has none of them (its
        // files would only be four failed opens per run).
        let in_v1 = |controller: &str| self.v1.iter().any(|l| l.controller == controller);
        if let Some((_, fd)) = &self.v2 {
            if !in_v1("memory") {
                s.memory_peak_bytes = num(fd, c"memory.peak");
                s.oom_kills = field(&read(fd, c"memory.events"), "oom_kill").unwrap_or(0);
            }
            if !in_v1("pids") {
                s.pids_peak = num(fd, c"pids.peak");
                s.pids_limit_hit = field(&read(fd, c"pids.events"), "max").unwrap_or(0) > 0;
            }
        }
        for l in &self.v1 {
            match l.controller {
                "memory" => {
                    s.memory_peak_bytes = num(&l.fd, c"memory.max_usage_in_bytes");
                    s.oom_kills = field(&read(&l.fd, c"memory.oom_control"), "oom_kill").unwrap_or(0);
                }
                "pids" => {
                    s.pids_peak = num(&l.fd, c"pids.peak");
                    s.pids_limit_hit = field(&read(&l.fd, c"pids.events"), "max").unwrap_or(0) > 0;
                }
                _ => {}
            }
        }
        s
    }

    /// The run's memory limit and use now (bytes; no limit: `None`), and how many processes it
    /// has: the figures its `sysinfo` is answered with.
    pub fn counters(&self) -> (Option<u64>, Option<u64>, Option<u64>) {
        let read = |fd: &File, name: &CStr| crate::sys::read_at(fd.as_fd(), name).unwrap_or_default();
        let num = |fd: &File, name: &CStr| read(fd, name).trim().parse::<u64>().ok();
        let (mut max, mut used, mut procs) = (None, None, None);
        if let Some((_, fd)) = &self.v2 {
            max = num(fd, c"memory.max");
            used = num(fd, c"memory.current");
            procs = num(fd, c"pids.current");
        }
        for l in &self.v1 {
            match l.controller {
                "memory" => {
                    // v1 says "no limit" with a page-rounded i64::MAX.
                    max = max.or(num(&l.fd, c"memory.limit_in_bytes").filter(|m| *m < 1 << 62));
                    used = used.or(num(&l.fd, c"memory.usage_in_bytes"));
                }
                "pids" => procs = procs.or(num(&l.fd, c"pids.current")),
                _ => {}
            }
        }
        (max, used, procs)
    }

    /// Kills what is left and removes every leaf; the first error is returned, every leaf is tried.
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.remove_all()
    }

    /// A copy of this leaf that only reads its figures ([`Leaf::stats`]), for another holder:
    /// its directories' fds duplicated. It never kills the run or removes the cgroup.
    pub fn reader(&self) -> Option<Leaf> {
        let v2 = match &self.v2 {
            Some((dir, fd)) => Some((dir.clone(), fd.try_clone().ok()?)),
            None => None,
        };
        let v1 = self
            .v1
            .iter()
            .map(|l| Some(V1Leaf { controller: l.controller, dir: l.dir.clone(), fd: l.fd.try_clone().ok()? }))
            .collect::<Option<Vec<_>>>()?;
        Some(Leaf { v2, v1, reader: true })
    }

    fn remove_all(&mut self) -> Result<(), CgroupError> {
        if self.reader {
            return Ok(());
        }
        self.kill();
        let mut first = Ok(());
        let dirs: Vec<PathBuf> = self.v1.drain(..).map(|l| l.dir).chain(self.v2.take().map(|(d, _)| d)).collect();
        for dir in dirs {
            if let Err(source) = remove_dir(&dir, Duration::from_secs(2))
                && first.is_ok()
            {
                first = Err(CgroupError::Io { what: "remove", path: dir, source });
            }
        }
        first
    }
}

impl Drop for Leaf {
    fn drop(&mut self) {
        let _ = self.remove_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_read_from_v2_and_v1_files() {
        let d = tempfile::tempdir().expect("tempdir");
        let v2 = d.path().join("v2");
        let mem = d.path().join("mem");
        std::fs::create_dir_all(&v2).expect("mkdir");
        std::fs::create_dir_all(&mem).expect("mkdir");
        std::fs::write(v2.join("cpu.stat"), "usage_usec 300\nuser_usec 200\nsystem_usec 100\n").expect("w");
        std::fs::write(v2.join("pids.events"), "max 3\n").expect("w");
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "4096\n").expect("w");
        std::fs::write(mem.join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").expect("w");
        let leaf = Leaf {
            reader: false,
            v2: Some((v2.clone(), File::open(&v2).expect("open"))),
            v1: vec![V1Leaf { controller: "memory", fd: File::open(&mem).expect("open"), dir: mem }],
        };
        let s = leaf.stats();
        std::mem::forget(leaf); // the fixture is not a cgroup: do not try to kill or rmdir it
        assert_eq!(
            s,
            CgroupStats {
                memory_peak_bytes: Some(4096),
                oom_kills: 2,
                pids_peak: None,
                pids_limit_hit: true,
                cpu_user_us: Some(200),
                cpu_sys_us: Some(100),
            }
        );
    }
}
