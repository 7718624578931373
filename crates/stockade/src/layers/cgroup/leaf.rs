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
    /// The files its figures are read from, opened with it ([`Leaf::open_figures`]).
    figures: Figures,
}

/// The files a run's figures are read from, opened while its jail is built: reading them when
/// the run is over is a positioned read each (the kernel makes their text anew), no path to
/// look up in the cgroup filesystem on the way to the run's answer.
#[derive(Debug, Default)]
struct Figures {
    cpu: Option<CpuFiles>,
    /// `memory.peak` (v2) or `memory.max_usage_in_bytes` (v1).
    memory_peak: Option<File>,
    /// `memory.events` (v2) or `memory.oom_control` (v1): their `oom_kill` line.
    memory_events: Option<File>,
    pids_peak: Option<File>,
    pids_events: Option<File>,
    /// The cgroup2 leaf's `cgroup.freeze`, open for writing.
    freeze: Option<File>,
    /// The cgroup2 leaf's `cgroup.events` (its `frozen` line).
    events: Option<File>,
}

impl Figures {
    fn try_clone(&self) -> Option<Figures> {
        let dup = |f: &Option<File>| f.as_ref().map(File::try_clone).transpose();
        Some(Figures {
            cpu: self.cpu.as_ref().map(CpuFiles::try_clone).transpose().ok()?,
            memory_peak: dup(&self.memory_peak).ok()?,
            memory_events: dup(&self.memory_events).ok()?,
            pids_peak: dup(&self.pids_peak).ok()?,
            pids_events: dup(&self.pids_events).ok()?,
            freeze: dup(&self.freeze).ok()?,
            events: dup(&self.events).ok()?,
        })
    }
}

/// A file's text, read from its start (at most 4 KiB).
fn text_of(f: &File) -> String {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 4096];
    let n = f.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
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
        let mut leaf = Leaf { v2: None, v1: Vec::new(), reader: false, figures: Figures::default() };
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
        leaf.open_figures();
        Ok(Some(leaf))
    }
}

/// A leaf's CPU-time files, open ([`Leaf::cpu_files`]).
#[derive(Debug)]
pub enum CpuFiles {
    /// cgroup2's `cpu.stat` (microseconds).
    V2(File),
    /// cpuacct's user and system times (nanoseconds).
    V1 { user: File, sys: Option<File> },
}

impl CpuFiles {
    /// Another holder of the same open files.
    fn try_clone(&self) -> std::io::Result<CpuFiles> {
        Ok(match self {
            CpuFiles::V2(f) => CpuFiles::V2(f.try_clone()?),
            CpuFiles::V1 { user, sys } => {
                CpuFiles::V1 { user: user.try_clone()?, sys: sys.as_ref().map(File::try_clone).transpose()? }
            }
        })
    }

    /// The CPU time so far (a positioned read of each file: the kernel makes its text anew).
    pub fn read(&self) -> CgroupStats {
        let mut s = CgroupStats::default();
        match self {
            CpuFiles::V2(f) => {
                let cpu = text_of(f);
                s.cpu_user_us = field(&cpu, "user_usec");
                s.cpu_sys_us = field(&cpu, "system_usec");
            }
            CpuFiles::V1 { user, sys } => {
                let ns = |f: &File| text_of(f).trim().parse::<u64>().ok();
                s.cpu_user_us = ns(user).map(|ns| ns / 1000);
                s.cpu_sys_us = sys.as_ref().and_then(ns).map(|ns| ns / 1000);
            }
        }
        s
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

    /// Freezes every process of the run (cgroup2's `cgroup.freeze`: no signal, nothing the
    /// processes' parents see; a frozen process still dies of `SIGKILL`). `false` without a
    /// cgroup2 leaf, or when it cannot be written.
    pub fn freeze(&self) -> bool {
        use std::os::unix::fs::FileExt;
        !self.reader && self.figures.freeze.as_ref().is_some_and(|f| f.write_at(b"1", 0).is_ok())
    }

    /// Whether the run can be frozen and thawed ([`Leaf::freeze_all`]): it has a cgroup2 leaf.
    pub fn can_freeze(&self) -> bool {
        !self.reader && self.figures.freeze.is_some() && self.figures.events.is_some()
    }

    /// Freezes every process of the run and waits, at most `patience`, until the kernel says
    /// they all are (`cgroup.events`: `frozen 1`; a process in an uninterruptible wait is frozen
    /// when it leaves it). `false` when the leaf cannot be frozen, or did not freeze in time.
    /// The file is read again every few microseconds: a poller of it is woken at most every 10
    /// ms (the kernel's rate of cgroup file notifications), where a freeze takes tens of µs.
    pub fn freeze_all(&self, patience: Duration) -> bool {
        if !self.freeze() {
            return false;
        }
        let Some(events) = &self.figures.events else { return false };
        let end = Instant::now() + patience;
        loop {
            if field(&text_of(events), "frozen") == Some(1) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Lets a frozen run go on (`cgroup.freeze` = 0). `false` when it cannot be written.
    pub fn thaw(&self) -> bool {
        use std::os::unix::fs::FileExt;
        !self.reader && self.figures.freeze.as_ref().is_some_and(|f| f.write_at(b"0", 0).is_ok())
    }

    /// The CPU time the leaves recorded so far (user, system), and nothing else: what a run had
    /// used when its jail was handed its run.
    pub fn cpu_used(&self) -> CgroupStats {
        self.figures.cpu.as_ref().map(CpuFiles::read).unwrap_or_default()
    }

    /// The files that say the run's CPU time, held open to be read again and again
    /// ([`CpuFiles::read`]: one read each, no path to look up): another holder of the leaf's
    /// own. `None`: no leaf says it.
    pub fn cpu_files(&self) -> Option<CpuFiles> {
        self.figures.cpu.as_ref().and_then(|f| f.try_clone().ok())
    }

    fn open_cpu_files(&self) -> Option<CpuFiles> {
        let open = |fd: &File, name: &CStr| crate::sys::openat_read(fd.as_fd(), name).ok().map(File::from);
        if let Some((_, fd)) = &self.v2 {
            return open(fd, c"cpu.stat").map(CpuFiles::V2);
        }
        // cpuacct, alone or co-mounted with cpu.
        self.v1.iter().find_map(|l| {
            let user = open(&l.fd, c"cpuacct.usage_user")?;
            Some(CpuFiles::V1 { user, sys: open(&l.fd, c"cpuacct.usage_sys") })
        })
    }

    /// Opens the files its figures are read from (see [`Figures`]). A controller is read where
    /// it is: on a hybrid host the v2 leaf has none of them.
    fn open_figures(&mut self) {
        let open = |fd: &File, name: &CStr| crate::sys::openat_read(fd.as_fd(), name).ok().map(File::from);
        let mut f = Figures { cpu: self.open_cpu_files(), ..Figures::default() };
        let in_v1 = |controller: &str| self.v1.iter().any(|l| l.controller == controller);
        if let Some((_, fd)) = &self.v2 {
            if !in_v1("memory") {
                f.memory_peak = open(fd, c"memory.peak");
                f.memory_events = open(fd, c"memory.events");
            }
            if !in_v1("pids") {
                f.pids_peak = open(fd, c"pids.peak");
                f.pids_events = open(fd, c"pids.events");
            }
            f.freeze = crate::sys::openat_write(fd.as_fd(), c"cgroup.freeze").ok().map(File::from);
            f.events = open(fd, c"cgroup.events");
        }
        for l in &self.v1 {
            match l.controller {
                "memory" => {
                    f.memory_peak = open(&l.fd, c"memory.max_usage_in_bytes");
                    f.memory_events = open(&l.fd, c"memory.oom_control");
                }
                "pids" => {
                    f.pids_peak = open(&l.fd, c"pids.peak");
                    f.pids_events = open(&l.fd, c"pids.events");
                }
                _ => {}
            }
        }
        self.figures = f;
    }

    /// Reads what the leaves recorded.
    pub fn stats(&self) -> CgroupStats {
        let f = &self.figures;
        let num = |f: &Option<File>| f.as_ref().and_then(|f| text_of(f).trim().parse::<u64>().ok());
        let count = |f: &Option<File>, key: &str| f.as_ref().and_then(|f| field(&text_of(f), key)).unwrap_or(0);
        let mut s = f.cpu.as_ref().map(CpuFiles::read).unwrap_or_default();
        s.memory_peak_bytes = num(&f.memory_peak);
        s.oom_kills = count(&f.memory_events, "oom_kill");
        s.pids_peak = num(&f.pids_peak);
        s.pids_max_events = count(&f.pids_events, "max");
        s.pids_limit_hit = s.pids_max_events > 0;
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
        Some(Leaf { v2, v1, reader: true, figures: self.figures.try_clone()? })
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
        std::fs::write(v2.join("pids.events"), "max 0\n").expect("w");
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "4096\n").expect("w");
        std::fs::write(mem.join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n").expect("w");
        let mut leaf = Leaf {
            reader: false,
            v2: Some((v2.clone(), File::open(&v2).expect("open"))),
            v1: vec![V1Leaf { controller: "memory", fd: File::open(&mem).expect("open"), dir: mem }],
            figures: Figures::default(),
        };
        leaf.open_figures();
        std::fs::write(v2.join("pids.events"), "max 3\n").expect("w"); // read when asked, not when opened
        let s = leaf.stats();
        std::mem::forget(leaf); // the fixture is not a cgroup: do not try to kill or rmdir it
        assert_eq!(
            s,
            CgroupStats {
                memory_peak_bytes: Some(4096),
                oom_kills: 2,
                pids_peak: None,
                pids_limit_hit: true,
                pids_max_events: 3,
                cpu_user_us: Some(200),
                cpu_sys_us: Some(100),
            }
        );
    }
}
