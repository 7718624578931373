//! `cargo xtask load` and the service rows of `cargo xtask bench`: a real `stockade serve` started
//! on a socket of its own, driven by `examples/load.rs`, then stopped with SIGTERM and checked for
//! what it left: processes, cgroups, its socket, and its fds and memory before and after.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server started for a load or a bench.
pub struct Server {
    child: Child,
    pub socket: PathBuf,
    pub bin: PathBuf,
}

impl Server {
    /// Starts `bin serve CONFIG` with `runtimes` (TOML tables) on a socket in `dir`; waits until
    /// it listens and its warm pools are built.
    pub fn start(
        bin: &Path,
        dir: &Path,
        runtimes: &str,
        extra: &str,
        guest_dir: Option<&Path>,
    ) -> Result<Server, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let socket = dir.join("api.sock");
        let config = dir.join("serve.toml");
        let text = format!("version = 1\n[server]\nlisten = [\"unix:{}\"]\n{extra}\n{runtimes}", socket.display());
        std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve").arg(&config).arg("--state-dir").arg(dir.join("state"));
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        if let Some(g) = guest_dir {
            cmd.env("STOCKADE_GUEST_DIR", g);
        }
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
                eprintln!("  server: {line}");
            }
        });
        if rx.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = child.kill();
            return Err("the server did not start".into());
        }
        let s = Server { child, socket, bin: bin.to_path_buf() };
        // The warm pools fill in the background: give them a moment.
        std::thread::sleep(Duration::from_secs(3));
        Ok(s)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open fds and resident memory now.
    pub fn usage(&self) -> (usize, u64) {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count());
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        (fds, rss)
    }

    /// SIGTERM, then waits for the exit (drain); then counts what is left.
    pub fn stop(self) -> Result<Leftovers, String> {
        self.stop_beside(&[])
    }

    /// [`Server::stop`] while the servers `others` run on (their processes are theirs).
    pub fn stop_beside(mut self, others: &[u32]) -> Result<Leftovers, String> {
        let pid = self.pid();
        let cgroups_before_exit = Leftovers::cgroups_of(pid);
        let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        let end = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break s;
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                return Err("the server did not drain within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // Jails die with their supervisor: give the kernel a moment to reap them.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Leftovers {
            exit_ok: status.success(),
            socket_left: self.socket.exists(),
            processes: processes_of(&self.bin).into_iter().filter(|&p| !descends_from(p, others)).collect(),
            cgroups: Leftovers::cgroups_of(pid),
            cgroups_while_running: cgroups_before_exit.len(),
        })
    }
}

impl Drop for Server {
    /// A server a failed bench leaves is killed (one stopped already has exited).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a stopped server left.
pub struct Leftovers {
    pub exit_ok: bool,
    pub socket_left: bool,
    pub processes: Vec<u32>,
    pub cgroups: Vec<PathBuf>,
    pub cgroups_while_running: usize,
}

impl Leftovers {
    /// The server's cgroups (`stockade-PID-...`) anywhere under /sys/fs/cgroup.
    fn cgroups_of(pid: u32) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(Path::new("/sys/fs/cgroup"), &format!("stockade-{pid}-"), 0, &mut out);
        out
    }

    pub fn clean(&self) -> bool {
        self.exit_ok && !self.socket_left && self.processes.is_empty() && self.cgroups.is_empty()
    }

    pub fn print(&self) {
        println!(
            "left behind: processes {}, cgroups {} (while running: {}), socket {}, exit {}",
            self.processes.len(),
            self.cgroups.len(),
            self.cgroups_while_running,
            if self.socket_left { "left" } else { "removed" },
            if self.exit_ok { "0" } else { "failed" }
        );
        for p in &self.processes {
            println!("  process {p} left");
        }
        for c in &self.cgroups {
            println!("  cgroup {} left", c.display());
        }
    }
}

fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 10 {
        return;
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if e.file_name().to_string_lossy().starts_with(prefix) {
            out.push(e.path());
        } else {
            walk(&e.path(), prefix, depth + 1, out);
        }
    }
}

/// Processes running `bin` (the server, its runners), by their exe.
fn processes_of(bin: &Path) -> Vec<u32> {
    let want = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|x| x == want) {
            out.push(pid);
        }
    }
    out
}

/// Whether `pid` is one of `roots` or below one of them.
fn descends_from(pid: u32, roots: &[u32]) -> bool {
    let mut p = pid;
    for _ in 0..64 {
        if roots.contains(&p) {
            return true;
        }
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        match stat.rsplit_once(") ").and_then(|(_, r)| r.split(' ').nth(1)).and_then(|x| x.parse().ok()) {
            Some(parent) if parent > 1 => p = parent,
            _ => return false,
        }
    }
    false
}

/// The runtimes a load or bench serves: the Wasm guests, and the host's python3 when it is there.
pub fn runtimes(warm: u32, python3: bool) -> (String, Vec<&'static str>) {
    let mut text = format!(
        "[runtimes.python]\nguest = \"python\"\nwarm = {warm}\n[runtimes.javascript]\nguest = \"javascript\"\nwarm = {warm}\n"
    );
    let mut names = vec!["python", "javascript"];
    if python3 && Path::new("/usr/bin/python3").exists() {
        text.push_str(&format!(
            "[runtimes.python3]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = {warm}\n"
        ));
        names.push("python3");
    }
    (text, names)
}

/// The service rows of `cargo xtask bench`: through the unix socket with warm pools, each
/// runtime's `print(1)` (and a static native program) against the same through `stockade run`
/// in the same spaced rounds; then sustained runs per second against the rate one interpreter
/// start per run allows; then what the server left.
pub fn bench(root: &Path, stockade: &Path, dir: &Path, guests: &Path) -> Result<(), String> {
    super::run(Command::new("cargo").current_dir(root).args(["build", "--quiet", "--release", "--example", "load"]))?;
    let load = root.join("target/release/examples/load");
    // A static program that waits for its input: a native runtime whose jail can start ahead.
    let waiter_src = dir.join("waiter.c");
    std::fs::write(
        &waiter_src,
        "#include <unistd.h>\nint main(void) { char b[512]; while (read(0, b, sizeof b) > 0) {} return 0; }\n",
    )
    .map_err(|e| e.to_string())?;
    let waiter = dir.join("waiter");
    super::run(Command::new("gcc").args(["-static", "-O2", "-o"]).arg(&waiter).arg(&waiter_src))?;
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).map_err(|e| e.to_string())?;
    let default = std::fs::read_to_string(root.join("policies/default.toml")).map_err(|e| e.to_string())?;
    let bench_policy =
        default.replacen("read-only = [\"/usr\"]", &format!("read-only = [\"/usr\", \"{}\"]", dir.display()), 1);
    std::fs::write(policies.join("bench.toml"), bench_policy).map_err(|e| e.to_string())?;
    let cores = super::cores().max(1);
    let warm = 2 * cores;
    let (mut runtimes, mut names) = runtimes(u32::try_from(warm).unwrap_or(4), true);
    runtimes.push_str(&format!(
        "[runtimes.native]\nprogram = \"{}\"\nbootstrap = \"stdin\"\npolicy = \"bench\"\nwarm = {warm}\n",
        waiter.display()
    ));
    names.push("native");
    // The data stack preloaded, where the host's python3 has pandas.
    let pandas = Command::new("/usr/bin/python3").args(["-c", "import pandas"]).output();
    if pandas.is_ok_and(|o| o.status.success()) {
        runtimes.push_str(&format!(
            "[runtimes.pandas]\nprogram = \"/usr/bin/python3\"\nbootstrap = \"python\"\npolicy = \"wrap-python\"\nwarm = {warm}\npreload = [\"pandas\"]\n"
        ));
        names.push("pandas");
    }
    let extra = format!("concurrency = {cores}\nqueue = 256\n[policies]\ndir = \"{}\"", policies.display());
    let server = Server::start(stockade, &dir.join("serve"), &runtimes, &extra, Some(guests))?;
    let socket = server.socket.display().to_string();
    let names = names.join(",");
    let g = guests.display().to_string();
    let s = stockade.display().to_string();
    println!("\nmemory, the pools warm");
    super::memory::warm_jails(server.pid(), "with the spawner");
    super::memory::one_run(&server.socket);
    println!("\nthe service (stockade serve, unix socket, warm pools of {warm}), {cores} cores");
    println!(
        "latency: one request per runtime per round, 40 rounds, 150 ms apart (the pools refill), against `stockade run` in the same rounds"
    );
    let wrap = root.join("policies/examples/wrap-python.toml").display().to_string();
    super::run(Command::new(&load).args(["--socket", &socket, "--latency", "40", "--spaced-ms", "150"]).args([
        "--stockade",
        &s,
        "--guest-dir",
        &g,
        "--wrap-python",
        &wrap,
        "--native-dir",
        &dir.display().to_string(),
        "--native-true",
        &dir.join("true").display().to_string(),
        "--runtimes",
        &names,
    ]))?;
    println!(
        "\nsessions: a run of a workspace session (a 4 KiB file in it) against a one-off run, against a one-off run carrying that file in and back, and a live session's `x += 1`, in turn, 30 rounds, 150 ms apart"
    );
    super::run(
        Command::new(&load)
            .args(["--socket", &socket, "--sessions", "30", "--spaced-ms", "150"])
            .args(["--runtimes", "python,javascript"]),
    )?;
    let clients = 2 * cores;
    println!("\nthroughput: {clients} clients, 6 s per runtime");
    super::run(Command::new(&load).args(["--socket", &socket, "--throughput", "6"]).args([
        "--concurrency",
        &clients.to_string(),
        "--stockade",
        &s,
        "--guest-dir",
        &g,
        "--runtimes",
        &names,
    ]))?;
    println!(
        "peer, measured on this machine kind (snekbox: gunicorn + nsjail, v1 cgroups, host python3): POST /eval of print(1) \
         p50 49.6 ms, 45.7 runs/s with 2 clients"
    );
    // The same server with its warm jails built on its own threads (no spawner), in turn.
    let extra_threads = format!("spawner = false\n{extra}");
    let threads = Server::start(stockade, &dir.join("serve-threads"), &runtimes, &extra_threads, Some(guests))?;
    println!(
        "\nthe spawner: the same throughput, warm jails built by the spawner's helpers against on the server's threads"
    );
    super::memory::warm_jails(threads.pid(), "without it (jails built on the server's threads, runners exec'd)");
    let other = threads.socket.display().to_string();
    super::run(
        Command::new(&load).args(["--socket", &socket, "--against", &other, "--labels", "spawner,threads"]).args([
            "--throughput",
            "4",
            "--rounds",
            "3",
            "--concurrency",
            &clients.to_string(),
            "--runtimes",
            "native,python",
        ]),
    )?;
    let left = threads.stop_beside(&[server.pid()])?;
    left.print();
    if !left.clean() {
        return Err("the server without a spawner left something behind".into());
    }
    shipped_defaults(root, stockade, dir, guests, (&load, server.pid()))?;
    sdk_rows(root, dir, &socket)?;
    let left = server.stop()?;
    left.print();
    if left.clean() { Ok(()) } else { Err("the server left something behind".into()) }
}

/// The shipped configuration's runtimes (`contrib/serve.toml`: their warm pools, the server's
/// concurrency and queue), 4 clients for 6 s each: runs per second, and how many a warm jail
/// served (`/metrics`); then batches against one jail per run (`load --batches`).
fn shipped_defaults(
    root: &Path,
    stockade: &Path,
    dir: &Path,
    guests: &Path,
    (load, main): (&Path, u32),
) -> Result<(), String> {
    let shipped = std::fs::read_to_string(root.join("contrib/serve.toml")).map_err(|e| e.to_string())?;
    let runtimes = shipped.find("[runtimes.").map_or("", |at| &shipped[at..]);
    let server = Server::start(stockade, &dir.join("serve-shipped"), runtimes, "", Some(guests))?;
    println!("\nthe shipped configuration (contrib/serve.toml's runtimes and defaults), 4 clients, 6 s per runtime");
    super::run(
        Command::new(load).args(["--socket", &server.socket.display().to_string(), "--throughput", "6"]).args([
            "--concurrency",
            "4",
            "--runtimes",
            "python,javascript,python3",
        ]),
    )?;
    // Batches on the same server, against one jail per run in the same rounds.
    super::run(Command::new(load).args(["--socket", &server.socket.display().to_string(), "--batches", "3"]))?;
    let left = server.stop_beside(&[main])?;
    left.print();
    if left.clean() { Ok(()) } else { Err("the server of the shipped configuration left something behind".into()) }
}

/// The hibernation rows of `cargo xtask bench`: a server of its own (sessions enough for the
/// parked ones, none hibernated by itself, a `python-big` runtime whose policy lets a session
/// hold 1 GiB): sizes, cycles, parked sessions (`examples/load/hibernate.rs`), then what it left.
pub fn hibernation(root: &Path, stockade: &Path, dir: &Path, guests: &Path) -> Result<(), String> {
    super::run(Command::new("cargo").current_dir(root).args(["build", "--quiet", "--release", "--example", "load"]))?;
    let load = root.join("target/release/examples/load");
    let here = dir.join("hibernate");
    let policies = here.join("policies");
    std::fs::create_dir_all(&policies).map_err(|e| e.to_string())?;
    let default = std::fs::read_to_string(root.join("policies/default.toml")).map_err(|e| e.to_string())?;
    let big = default
        .replacen("memory-max-bytes = 536870912", "memory-max-bytes = 3221225472", 1)
        .replacen("memory-max-bytes = 268435456", "memory-max-bytes = 1610612736", 1)
        .replacen("wall-timeout-ms = 10000", "wall-timeout-ms = 60000", 1);
    std::fs::write(policies.join("big.toml"), big).map_err(|e| e.to_string())?;
    let runtimes = "[runtimes.python]\nguest = \"python\"\nwarm = 1\n\
                    [runtimes.python-big]\nguest = \"python\"\npolicy = \"big\"\nwarm = 0\n\
                    [runtimes.javascript]\nguest = \"javascript\"\nwarm = 1\n";
    let extra = format!(
        "[sessions]\nmax = 10100\nmax-per-token = 10100\nhibernate-after-ms = 0\n[policies]\ndir = \"{}\"",
        policies.display()
    );
    let server = Server::start(stockade, &here, runtimes, &extra, Some(guests))?;
    let (socket, pid) = (server.socket.display().to_string(), server.pid().to_string());
    let state = here.join("state").display().to_string();
    println!("\nhibernation (stockade serve, its state directory on {})", fs_of(&here));
    println!("live Python and JavaScript sessions by what they hold: 20 rounds (5 for 1 GiB), 100 ms apart");
    super::run(
        Command::new(&load)
            .args(["--socket", &socket, "--hibernate", "20", "--spaced-ms", "100"])
            .args(["--big", "python-big"]),
    )?;
    super::run(Command::new(&load).args(["--socket", &socket, "--cycles", "1000", "--pid", &pid, "--state", &state]))?;
    super::run(Command::new(&load).args(["--socket", &socket, "--parked", "10000", "--pid", &pid, "--state", &state]))?;
    let left = server.stop()?;
    left.print();
    if !left.clean() {
        return Err("the hibernation server left something behind".into());
    }
    println!("\nreplicas: a live turn on a server alone and on a replica (its image written before its answer)");
    for held in [None, Some("big")] {
        super::run(
            Command::new("python3")
                .env("STOCKADE_GUEST_DIR", guests)
                .arg(root.join("xtask/replica_turns.py"))
                .arg(stockade)
                .args(held),
        )?;
    }
    Ok(())
}

/// The filesystem type `dir` is on (from /proc/self/mounts: the longest mount point above it).
fn fs_of(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, at, kind) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then(|| (at.len(), kind.to_string()))
        })
        .max()
        .map_or_else(|| "an unknown filesystem".into(), |(_, k)| k)
}

/// The SDKs' rows of the service's bench: each SDK's cost over a bare request on `socket`.
fn sdk_rows(root: &Path, dir: &Path, socket: &str) -> Result<(), String> {
    println!("\nthe Python SDK (python/, in a virtual environment of its own)");
    match sdk_venv(root, dir) {
        Ok(python) => {
            super::run(Command::new(python).arg(root.join("xtask/sdk_bench.py")).args([socket, "40", "150"]))?
        }
        Err(e) => println!("skipped: {e}"),
    }
    println!("\nthe TypeScript SDK (typescript/, built with its own devDependencies)");
    match ts_sdk(root) {
        Ok(()) => super::run(
            Command::new("node").arg(root.join("typescript/bench/overhead.mjs")).args([socket, "40", "150"]),
        )?,
        Err(e) => println!("skipped: {e}"),
    }
    Ok(())
}

/// The TypeScript SDK built (`npm ci` when its dependencies are not there yet).
fn ts_sdk(root: &Path) -> Result<(), String> {
    let dir = root.join("typescript");
    if Command::new("node").arg("--version").output().is_err() {
        return Err("no node on the PATH".into());
    }
    if !dir.join("node_modules/typescript").exists() {
        super::run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir))?;
    }
    super::run(Command::new("npm").args(["run", "--silent", "build"]).current_dir(&dir))
}

/// A virtual environment with the SDK (from `python/`) installed: its python.
pub fn sdk_venv(root: &Path, dir: &Path) -> Result<PathBuf, String> {
    let venv = dir.join("sdk-venv");
    let python = venv.join("bin/python");
    // A venv left without its pip (an interrupted creation) is made again.
    if !venv.join("bin/pip").exists() {
        super::run(Command::new("python3").args(["-m", "venv", "--clear"]).arg(&venv))?;
    }
    super::run(Command::new(venv.join("bin/pip")).args(["install", "--quiet"]).arg(root.join("python")))?;
    Ok(python)
}
