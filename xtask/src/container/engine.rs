//! A private Docker engine for the container test: its own socket, data and exec roots, no bridge,
//! no iptables, its containers' cgroups below this process's; stopped, and checked to have left
//! nothing, at the end.

use super::*;

/// A private dockerd: nothing of it outside its directory but its containers' cgroups, below ours.
pub(super) struct Engine {
    pub(super) dir: PathBuf,
    pub(super) socket: PathBuf,
    pub(super) child: Child,
    /// `OWN/docker`: the cgroup (in every v1 hierarchy) under which its containers go.
    pub(super) cgroup: String,
    pub(super) made_run_docker: bool,
}

impl Engine {
    /// `name`: its directory's and cgroup's; `extra`: more dockerd options.
    pub(super) fn start(name: &str, extra: &[&str]) -> Result<Engine, String> {
        // A short path: the engine's sockets live below it (108-byte limit on socket paths). Made
        // afresh (never one that already exists: it could be anyone's), 0711: a remapped root
        // must be able to pass through it, nobody may list it.
        let dir = PathBuf::from(format!("/tmp/stockade-xtask-{name}-{}", std::process::id()));
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            std::fs::DirBuilder::new().mode(0o711).create(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            // The umask may have taken bits off.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).map_err(|e| e.to_string())?;
        }
        let own = own_cgroup();
        if own == "/" {
            return Err("this process is in the root cgroup: the engine's containers need a cgroup of their own \
                        below this process's, which it cannot make there"
                .into());
        }
        // A leaf of our own: nothing else is named like it.
        let cgroup = format!("{}/stockade-xtask-{}-{name}", own.trim_end_matches('/'), std::process::id());
        let socket = dir.join("docker.sock");
        let log = std::fs::File::create(dir.join("dockerd.log")).map_err(|e| e.to_string())?;
        // Not the host's /etc/docker/daemon.json, not the host containerd's namespace.
        std::fs::write(dir.join("daemon.json"), "{}\n").map_err(|e| e.to_string())?;
        let made_run_docker = !Path::new("/run/docker").exists();
        let child = Command::new("dockerd")
            .arg(format!("--config-file={}", dir.join("daemon.json").display()))
            .arg(format!("--containerd-namespace=stockade-xtask-{}", std::process::id()))
            .arg(format!("--containerd-plugins-namespace=stockade-xtask-plugins-{}", std::process::id()))
            .args(["--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"])
            .arg(format!("--data-root={}", dir.join("data").display()))
            .arg(format!("--exec-root={}", dir.join("exec").display()))
            .arg(format!("--pidfile={}", dir.join("dockerd.pid").display()))
            .arg(format!("--host=unix://{}", socket.display()))
            .arg(format!("--cgroup-parent={cgroup}"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("dockerd: {e}"))?;
        let engine = Engine { dir, socket, child, cgroup, made_run_docker };
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            if engine.docker(&["version", "--format", "{{.Server.Version}}"]).is_ok() {
                return Ok(engine);
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let log = std::fs::read_to_string(engine.dir.join("dockerd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let _ = engine.stop();
        Err(format!("dockerd did not answer within 60 s: {}", tail.join(" | ")))
    }

    pub(super) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("docker");
        c.env("DOCKER_HOST", format!("unix://{}", self.socket.display())).env("DOCKER_BUILDKIT", "0").args(args);
        c
    }

    /// Runs `docker ARGS`; its stdout, trimmed.
    pub(super) fn docker(&self, args: &[&str]) -> Result<String, String> {
        let out = self.command(args).stdin(Stdio::null()).output().map_err(|e| format!("docker: {e}"))?;
        if !out.status.success() {
            return Err(format!("docker {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Stops the engine and removes what it made: its cgroups, mounts and directories.
    pub(super) fn stop(mut self) -> Result<(), String> {
        let mut problems = Vec::new();
        match self.docker(&["ps", "-aq"]) {
            Ok(ids) if !ids.is_empty() => problems.push(format!("containers left: {}", ids.replace('\n', " "))),
            _ => {}
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let end = Instant::now() + Duration::from_secs(30);
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            if Instant::now() > end {
                problems.push("dockerd did not stop within 30 s (killed)".into());
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Processes of the engine's (containerd, shims: they name its directory) or of its
        // containers (in its cgroup leaf or below).
        let dir = format!("{}/", self.dir.display());
        let leaf = self.cgroup.clone();
        let in_leaf = |path: &str| path == leaf || path.starts_with(&format!("{leaf}/"));
        let mut stray = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            let ours = String::from_utf8_lossy(&cmdline).split('\0').any(|a| a.contains(&dir))
                || cgroup.lines().any(|l| l.splitn(3, ':').nth(2).is_some_and(in_leaf));
            if ours {
                stray.push(pid);
            }
        }
        for pid in &stray {
            problems.push(format!("process {pid} of the engine left (killed)"));
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
        }
        // Mounts below the engine's directory (overlays, shm): ours to undo.
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut mounts: Vec<&str> =
            mountinfo.lines().filter_map(|l| l.split(' ').nth(4)).filter(|m| m.starts_with(&dir)).collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            // dockerd keeps the host network's sandbox (`--network host`) bound there after it exits.
            if !m.ends_with("/exec/netns/default") {
                problems.push(format!("mount {m} left (unmounted)"));
            }
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        // dockerd makes its leaf in every v1 hierarchy (or the one cgroup2 tree).
        let mut cgroups_left = 0;
        let rel = self.cgroup.trim_start_matches('/');
        let hierarchies = std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten().map(|h| h.path());
        for p in hierarchies.chain([PathBuf::from("/sys/fs/cgroup")]).map(|h| h.join(rel)) {
            if p.is_dir() {
                cgroups_left += remove_cgroup(&p);
            }
        }
        if cgroups_left > 0 {
            problems.push(format!("{cgroups_left} cgroups of the engine's could not be removed"));
        }
        if self.made_run_docker {
            let _ = std::fs::remove_dir_all("/run/docker");
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            problems.push(format!("{}: {e}", self.dir.display()));
        }
        if problems.is_empty() {
            println!("engine stopped: no container, process, mount or cgroup of its left");
            Ok(())
        } else {
            Err(format!("the engine left: {}", problems.join("; ")))
        }
    }
}

/// This process's cgroup: its v1 memory cgroup on a hybrid host, its cgroup2 one on a pure host.
pub(super) fn own_cgroup() -> String {
    let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let field = |pred: &dyn Fn(&str) -> bool| {
        text.lines().find_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, ctrl, path) = (it.next()?, it.next()?, it.next()?);
            pred(ctrl).then(|| path.to_string())
        })
    };
    field(&|c| c.split(',').any(|x| x == "memory")).or_else(|| field(&|c| c.is_empty())).unwrap_or_else(|| "/".into())
}

/// Removes a cgroup directory and those below it; how many could not be removed.
pub(super) fn remove_cgroup(dir: &Path) -> usize {
    let mut left = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            left += remove_cgroup(&e.path());
        }
    }
    left + usize::from(std::fs::remove_dir(dir).is_err())
}
