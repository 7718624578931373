//! `cargo xtask container [--allow-skip] [--context]`: stockade serve in a container, tried with a
//! real engine. Builds the image of contrib/container/Containerfile from the static binary and the
//! guests alone, starts a private Docker engine of its own (its own socket, data and exec roots, no
//! bridge, no iptables, its containers' cgroups below this process's), runs the server with the line
//! docs/deploy.md documents, then:
//! 1. Python and JavaScript through its socket; every layer of their reports enforced (the cgroup
//!    layer says why not where the host cannot give the container a writable cgroup);
//! 2. the escape suite's network and filesystem attacks (tests/escape/net.c, read_files.c,
//!    write_files.c) as runtimes of the same server, the container on the host's network so that
//!    only the jail stands between a run and the host's listeners; each attack first run in the
//!    container outside a jail (`docker exec`), where it must work;
//! 3. `docker stop`: the server drains and exits 0, its socket gone;
//! 4. with a second engine that puts its containers in user namespaces (`--userns-remap`, what
//!    Kubernetes' `hostUsers: false` gives a pod; /etc/subuid and /etc/subgid get a range for the
//!    test and are put back as they were): the shipped owner uids refused there, naming the key;
//!    the Kubernetes manifest's serve.toml and policy, on a read-only root, serving Python and JS.
//!
//! Then it stops the engine and checks that nothing is left: no container, no process, no cgroup, no
//! mount of the engine's. With `--context`, only writes the build context and prints the
//! `docker build` line.

use serde_json::{Value, json};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod attacks;
mod engine;

use attacks::attacks;
use engine::Engine;

const IMAGE: &str = "stockade:0.1.0";
const ATTACK_IMAGE: &str = "stockade-escape:test";
const ATTACKS: [&str; 3] = ["net", "read_files", "write_files"];

/// The options of the documented line (README.md, docs/deploy.md): what `run_line` uses.
const DOCUMENTED: [&str; 4] = [
    "--security-opt seccomp=contrib/container/seccomp.json",
    "--security-opt systempaths=unconfined",
    "--cgroupns=private --security-opt writable-cgroups=true",
    "contrib/container/no-cgroups:/etc/stockade/policies:ro",
];

/// The README and docs/deploy.md show the line this test runs.
fn documented(root: &Path) -> Result<(), String> {
    for doc in ["README.md", "docs/deploy.md"] {
        let text = std::fs::read_to_string(root.join(doc)).map_err(|e| format!("{doc}: {e}"))?;
        if let Some(missing) = DOCUMENTED.iter().find(|o| !text.contains(*o)) {
            return Err(format!("{doc} does not show the container line's `{missing}`"));
        }
    }
    Ok(())
}

pub fn test(root: &Path, args: &[String]) -> Result<(), String> {
    let allow_skip = args.iter().any(|a| a == "--allow-skip");
    let skip = |why: String| -> Result<(), String> {
        if allow_skip {
            println!("container: SKIPPED: {why}");
            Ok(())
        } else {
            Err(why)
        }
    };
    documented(root)?;
    let ctx = context(root)?;
    if args.iter().any(|a| a == "--context") {
        println!("build context: {}", ctx.display());
        println!("docker build -t {IMAGE} -f contrib/container/Containerfile {}", ctx.display());
        return Ok(());
    }
    if !is_root() {
        return skip("a Docker engine needs root (run as root; CI does)".into());
    }
    if which("dockerd").is_none() || which("docker").is_none() {
        return skip("no Docker engine here (apt-get install docker.io)".into());
    }
    let engine = match Engine::start("docker", &[]) {
        Ok(e) => e,
        Err(e) => return skip(format!("the Docker engine does not start here: {e}")),
    };
    let result = scenario(root, &engine, &ctx);
    let left = engine.stop();
    result?;
    left?;
    // A user-namespaced container: what Kubernetes' `hostUsers: false` gives a pod. dockerd reads
    // the subordinate ids once, at start: they are taken out again as soon as it answers.
    let ids = SubIds::add()?;
    let engine = Engine::start("docker-userns", &["--userns-remap=nobody:nogroup"]);
    drop(ids);
    let engine = engine?;
    let result = kubernetes_like(root, &engine, &ctx);
    let left = engine.stop();
    result?;
    left
}

/// The subordinate ids Docker's `--userns-remap=nobody:nogroup` maps its containers' 0-65535 to:
/// one line added to /etc/subuid and /etc/subgid while the engine starts, then that line (and
/// any a killed earlier run left: the same line, with its unusual range) taken out again; nothing
/// else of the files is touched.
struct SubIds;

fn subids_line() -> String {
    format!("nobody:{SUBIDS_FIRST}:65536")
}

/// The host ids the user-namespaced containers get: far from any login's and from the owner uids.
const SUBIDS_FIRST: u32 = 0x6000_0000;

impl SubIds {
    fn add() -> Result<SubIds, String> {
        SubIds::remove();
        for file in ["/etc/subuid", "/etc/subgid"] {
            let mut text = std::fs::read_to_string(file).unwrap_or_default();
            if text.lines().any(|l| l.starts_with("nobody:")) {
                return Err(format!("{file} already gives nobody a range: the test's would not be the one used"));
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("{}\n", subids_line()));
            std::fs::write(file, text).map_err(|e| format!("{file}: {e}"))?;
        }
        Ok(SubIds)
    }

    /// Takes the test's lines out of both files.
    fn remove() {
        for file in ["/etc/subuid", "/etc/subgid"] {
            let Ok(text) = std::fs::read_to_string(file) else { continue };
            if text.lines().any(|l| l == subids_line()) {
                let kept: String = text.lines().filter(|l| *l != subids_line()).map(|l| format!("{l}\n")).collect();
                let _ = std::fs::write(file, kept);
            }
        }
    }
}

impl Drop for SubIds {
    fn drop(&mut self) {
        SubIds::remove();
    }
}

/// One entry of the Kubernetes manifest's ConfigMap (`  KEY: |` and its indented lines).
fn configmap_entry(yaml: &str, key: &str) -> Result<String, String> {
    let head = format!("  {key}: |");
    let mut lines = yaml.lines().skip_while(|l| *l != head);
    lines.next().ok_or(format!("contrib/kubernetes/stockade.yaml: no ConfigMap entry {key}"))?;
    let body: Vec<&str> = lines
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    Ok(body.join("\n") + "\n")
}

/// The Kubernetes manifest's configuration and policy in a user-namespaced container (Docker's
/// `--userns-remap`: root inside is an unprivileged host uid, as in a `hostUsers: false` pod):
/// runs through its server, every layer enforced but the cgroup; and the shipped owner uids
/// refused there, naming the key the manifest sets.
fn kubernetes_like(root: &Path, engine: &Engine, ctx: &Path) -> Result<(), String> {
    println!("user-namespaced container (dockerd --userns-remap: uid 0 inside is host uid {SUBIDS_FIRST}):");
    let containerfile = root.join("contrib/container/Containerfile").display().to_string();
    engine.docker(&["build", "-q", "-t", IMAGE, "-f", &containerfile, &ctx.display().to_string()])?;
    let yaml = std::fs::read_to_string(root.join("contrib/kubernetes/stockade.yaml")).map_err(|e| e.to_string())?;
    let k8s = engine.dir.join("k8s");
    for d in ["policies", "tokens", "run"] {
        std::fs::create_dir_all(k8s.join(d)).map_err(|e| e.to_string())?;
    }
    std::fs::write(k8s.join("serve.toml"), configmap_entry(&yaml, "serve.toml")?).map_err(|e| e.to_string())?;
    std::fs::write(k8s.join("policies/default.toml"), configmap_entry(&yaml, "policy-default.toml")?)
        .map_err(|e| e.to_string())?;
    // What the Secret's volume gives the pod: the tokens file, 0600, owned by root inside.
    std::fs::write(k8s.join("tokens/tokens"), "0123456789abcdef0123456789abcdef\n").map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(k8s.join("tokens/tokens"), std::fs::Permissions::from_mode(0o600))
        .map_err(|e| e.to_string())?;
    for p in ["tokens", "tokens/tokens", "run"] {
        std::os::unix::fs::chown(k8s.join(p), Some(SUBIDS_FIRST), Some(SUBIDS_FIRST)).map_err(|e| e.to_string())?;
    }
    let seccomp = format!("seccomp={}", root.join("contrib/container/seccomp.json").display());
    // The shipped owner uids are not mapped in such a container: refused, naming the key.
    let relaxed = format!("{}:/etc/stockade/policies:ro", root.join("contrib/container/no-cgroups").display());
    let opts = ["--security-opt", &seccomp, "--security-opt", "systempaths=unconfined", "-v", &relaxed];
    let out = stockade_in(engine, &opts, &RUN_UNDER_POLICY)?;
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !said.contains("identity.owner-uid-first") {
        return Err(format!("the shipped owner uids in a user-namespaced container should be refused: {said}"));
    }
    println!("  the shipped policy's owner uids: refused, naming identity.owner-uid-first");
    // The manifest's serve.toml and policy; a unix socket instead of TCP 8080 (no network here).
    let mut line: Vec<String> =
        ["run", "-d", "--name", "stockade-k8s", "--network", "none", "--security-opt", &seccomp]
            .iter()
            .map(|s| s.to_string())
            .collect();
    line.extend(["--security-opt".into(), "systempaths=unconfined".into(), "--read-only".into()]);
    line.extend(["--tmpfs".into(), "/tmp".into(), "--tmpfs".into(), "/var/lib/stockade/state".into()]);
    for (host, inside) in [
        ("serve.toml", "/etc/stockade/serve.toml:ro"),
        ("policies", "/etc/stockade/policies:ro"),
        ("tokens", "/etc/stockade/tokens:ro"),
        ("run", "/run/stockade"),
    ] {
        line.extend(["-v".into(), format!("{}:{inside}", k8s.join(host).display())]);
    }
    for a in ["--entrypoint", "/usr/bin/stockade", IMAGE, "serve", "/etc/stockade/serve.toml", "--listen"] {
        line.push(a.into());
    }
    line.push("unix:/run/stockade/api.sock".into());
    let server = Server::start(engine, &line, "stockade-k8s", &k8s.join("run"))?;
    for (runtime, code) in [("python", "print(6 * 7)"), ("javascript", "console.log(6 * 7)")] {
        let report = server.run(json!({"runtime": runtime, "code": code}))?;
        if report["status"] != "ok" || report["stdout"]["text"] != "42\n" {
            return Err(format!("{runtime}: {report}"));
        }
        check_layers(runtime, &report, true)?;
    }
    server.stop()?;
    engine.docker(&["rmi", IMAGE])?;
    Ok(())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines().any(|l| l.strip_prefix("Uid:").is_some_and(|v| v.split_whitespace().nth(1) == Some("0")))
    })
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// The image's build context: the static binary, the guests (without their cache), the config.
fn context(root: &Path) -> Result<PathBuf, String> {
    let bin = super::build_static_cli(root, false)?;
    let guests = super::guest_dir(&bin).ok_or("the image needs the Wasm guests (stockade guest install)")?;
    let ctx = root.join("target/container/ctx");
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(ctx.join("guests")).map_err(|e| format!("{}: {e}", ctx.display()))?;
    copy(&bin, &ctx.join("stockade"))?;
    copy(&root.join("contrib/container/serve.toml"), &ctx.join("serve.toml"))?;
    copy_tree(&guests, &ctx.join("guests"))?;
    Ok(ctx)
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to).map(drop).map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for e in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?.flatten() {
        let name = e.file_name();
        if name == "cache" {
            continue;
        }
        let kind = e.file_type().map_err(|e| e.to_string())?;
        if kind.is_dir() {
            copy_tree(&e.path(), &to.join(&name))?;
        } else if kind.is_file() {
            copy(&e.path(), &to.join(&name))?;
        }
    }
    Ok(())
}

/// The documented `docker run` line (docs/deploy.md), with what the host can give for cgroups.
fn run_line(root: &Path, engine: &Engine, name: &str, socket_dir: &Path, network: &str, image: &str) -> Vec<String> {
    let mut v: Vec<String> =
        ["run", "-d", "--name", name, "--network", network].iter().map(|s| s.to_string()).collect();
    v.push("--security-opt".into());
    v.push(format!("seccomp={}", root.join("contrib/container/seccomp.json").display()));
    v.extend(["--security-opt".into(), "systempaths=unconfined".into()]);
    v.extend(["-v".into(), format!("{}:/run/stockade", socket_dir.display())]);
    let version = engine.docker(&["version", "--format", "{{.Server.Version}}"]).unwrap_or_default();
    let major: u32 = version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() && major >= 28 {
        v.extend(["--cgroupns=private".into(), "--security-opt".into(), "writable-cgroups=true".into()]);
    } else {
        println!(
            "  this host cannot give a container a writable cgroup (Docker {version}: writable-cgroups needs 28; \
             cgroup v2 only: {}): contrib/container/no-cgroups/ relaxes cgroups.best-effort",
            if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() { "a v2 host" } else { "a v1 or hybrid host" }
        );
        v.extend([
            "-v".into(),
            format!("{}:/etc/stockade/policies:ro", root.join("contrib/container/no-cgroups").display()),
        ]);
    }
    v.push(image.into());
    v
}

/// A server container, stopped and removed on drop if the scenario failed half-way.
struct Server<'a> {
    engine: &'a Engine,
    name: String,
    socket: PathBuf,
    stopped: bool,
}

impl<'a> Server<'a> {
    fn start(engine: &'a Engine, line: &[String], name: &str, socket_dir: &Path) -> Result<Server<'a>, String> {
        println!("  docker {}", line.join(" "));
        let args: Vec<&str> = line.iter().map(String::as_str).collect();
        engine.docker(&args)?;
        let s = Server { engine, name: name.into(), socket: socket_dir.join("api.sock"), stopped: false };
        let end = Instant::now() + Duration::from_secs(90);
        loop {
            if s.socket.exists() && s.request("GET", "/v1/health", None).is_ok_and(|(code, _)| code == 200) {
                return Ok(s);
            }
            let running = engine.docker(&["inspect", "-f", "{{.State.Running}}", name]).unwrap_or_default();
            if running != "true" || Instant::now() > end {
                let logs =
                    engine.command(&["logs", name]).output().map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
                return Err(format!("the server container did not come up:\n{}", logs.unwrap_or_default()));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// One HTTP request on the socket (curl); the status and the body.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, String), String> {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "120", "-X", method, "--unix-socket"]).arg(&self.socket);
        cmd.args(["-w", "\n%{http_code}"]);
        if let Some(b) = body {
            cmd.args(["-H", "content-type: application/json", "--data-binary", &b.to_string()]);
        }
        let out = cmd.arg(format!("http://stockade{path}")).output().map_err(|e| format!("curl: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').ok_or("curl: no status")?;
        Ok((
            code.trim().parse().map_err(|_| format!("curl: {}", String::from_utf8_lossy(&out.stderr)))?,
            body.to_string(),
        ))
    }

    fn run(&self, body: Value) -> Result<Value, String> {
        let (code, text) = self.request("POST", "/v1/runs", Some(&body))?;
        if code != 200 {
            return Err(format!("POST /v1/runs {body}: {code} {text}"));
        }
        serde_json::from_str(&text).map_err(|e| format!("the report: {e}: {text}"))
    }

    /// `docker stop`: SIGTERM, the server drains; it must exit 0 and remove its socket.
    fn stop(mut self) -> Result<(), String> {
        self.stopped = true;
        self.engine.docker(&["stop", "-t", "45", &self.name])?;
        let code = self.engine.docker(&["inspect", "-f", "{{.State.ExitCode}}", &self.name])?;
        let logs = self
            .engine
            .command(&["logs", &self.name])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
        self.engine.docker(&["rm", "-v", &self.name])?;
        if code != "0" {
            return Err(format!("the server exited with {code} on SIGTERM:\n{}", logs.unwrap_or_default()));
        }
        if self.socket.exists() {
            return Err(format!("the server left its socket {}", self.socket.display()));
        }
        println!("  docker stop: the server drained and exited 0, its socket removed");
        Ok(())
    }
}

impl Drop for Server<'_> {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.engine.docker(&["rm", "-f", "-v", &self.name]);
        }
    }
}

fn scenario(root: &Path, engine: &Engine, ctx: &Path) -> Result<(), String> {
    let version = engine.docker(&["version", "--format", "{{.Server.Version}}"])?;
    println!("container engine: Docker {version} (private dockerd, containers below {})", engine.cgroup);
    let containerfile = root.join("contrib/container/Containerfile").display().to_string();
    engine.docker(&["build", "-q", "-t", IMAGE, "-f", &containerfile, &ctx.display().to_string()])?;
    let size = engine.docker(&["image", "inspect", "-f", "{{.Size}}", IMAGE])?;
    println!("image {IMAGE}: {} MB, FROM scratch", size.parse::<u64>().unwrap_or(0) / 1_000_000);

    refusals(root, engine)?;

    // 1. The documented line: Python and JS.
    let socket_dir = engine.dir.join("run1");
    std::fs::create_dir_all(&socket_dir).map_err(|e| e.to_string())?;
    let line = run_line(root, engine, "stockade-1", &socket_dir, "none", IMAGE);
    let server = Server::start(engine, &line, "stockade-1", &socket_dir)?;
    for (runtime, code) in [("python", "print(6 * 7)"), ("javascript", "console.log(6 * 7)")] {
        let report = server.run(json!({"runtime": runtime, "code": code}))?;
        let out = report["stdout"]["text"].as_str().unwrap_or("");
        if report["status"] != "ok" || out != "42\n" {
            return Err(format!("{runtime}: {report}"));
        }
        check_layers(runtime, &report, line.iter().any(|a| a.contains("no-cgroups")))?;
    }
    server.stop()?;

    // 1b. The compose file the host can run, in one command.
    compose(root, engine, line.iter().any(|a| a.contains("no-cgroups")))?;

    // 2. The escape suite's network and filesystem attacks, as runtimes of the same image.
    attacks(root, engine)?;
    engine.docker(&["rmi", ATTACK_IMAGE, IMAGE])?;
    Ok(())
}

/// `contrib/container/compose*.yaml`, the one this host can run (`compose.yaml` needs a writable
/// cgroup: Docker >= 28 on cgroup v2; else `compose.no-cgroups.yaml`), started in one command
/// from its directory as docs/deploy.md shows: Python and JS answer 42, `down` drains the server
/// (its socket removed). Both need Compose v2 (`docker compose`): skipped, and said, without it.
fn compose(root: &Path, engine: &Engine, no_cgroups: bool) -> Result<(), String> {
    let file = if no_cgroups { "compose.no-cgroups.yaml" } else { "compose.yaml" };
    // Compose v1 (Debian's docker-compose 1.29) hands `systempaths=unconfined` to the engine as
    // is, and the engine refuses it (the docker CLI and Compose v2 turn it into unmasked paths).
    let v2 = engine.command(&["compose", "version"]).stdin(Stdio::null()).output().is_ok_and(|o| o.status.success());
    if !v2 {
        println!(
            "  compose: SKIPPED: {file} needs Compose v2 (the docker compose plugin), not here: Compose v1 cannot unmask /proc"
        );
        return Ok(());
    }
    let tool = ["docker", "compose"];
    let socket_dir = engine.dir.join("compose");
    std::fs::create_dir_all(&socket_dir).map_err(|e| e.to_string())?;
    let compose = |args: &[&str]| -> Result<String, String> {
        let mut c = Command::new(tool[0]);
        c.args(&tool[1..])
            .args(["-p", "stockade-xtask", "-f", file])
            .args(args)
            .current_dir(root.join("contrib/container"))
            .env("DOCKER_HOST", format!("unix://{}", engine.socket.display()))
            .env("STOCKADE_SOCKET_DIR", &socket_dir)
            .stdin(Stdio::null());
        let out = c.output().map_err(|e| format!("{}: {e}", tool.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "{} {}: {}",
                tool.join(" "),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    println!("  cd contrib/container && {} -f {file} up -d", tool.join(" "));
    compose(&["up", "-d"])?;
    // Taken down however this ends.
    struct Down<'a>(&'a dyn Fn(&[&str]) -> Result<String, String>, bool);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            if !self.1 {
                let _ = (self.0)(&["down", "-t", "45"]);
            }
        }
    }
    let mut down = Down(&compose, false);
    let server = Server { engine, name: String::new(), socket: socket_dir.join("api.sock"), stopped: true };
    let end = Instant::now() + Duration::from_secs(90);
    while !(server.socket.exists() && server.request("GET", "/v1/health", None).is_ok_and(|(code, _)| code == 200)) {
        if Instant::now() > end {
            let logs = compose(&["logs"]).unwrap_or_default();
            return Err(format!("the compose service did not come up:\n{logs}"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    for (runtime, code) in [("python", "print(6 * 7)"), ("javascript", "console.log(6 * 7)")] {
        let report = server.run(json!({"runtime": runtime, "code": code}))?;
        if report["status"] != "ok" || report["stdout"]["text"] != "42\n" {
            return Err(format!("compose: {runtime}: {report}"));
        }
        check_layers(runtime, &report, no_cgroups)?;
    }
    down.1 = true;
    compose(&["down", "-t", "45"])?;
    if server.socket.exists() {
        return Err(format!("compose down: the server left its socket {}", server.socket.display()));
    }
    println!("  compose: {file}: Python and JS answered, `down` drained the server and its socket is gone");
    Ok(())
}

/// Without each setting the line documents, a run is refused with words naming that setting.
fn refusals(root: &Path, engine: &Engine) -> Result<(), String> {
    let seccomp = format!("seccomp={}", root.join("contrib/container/seccomp.json").display());
    let relaxed = format!("{}:/etc/stockade/policies:ro", root.join("contrib/container/no-cgroups").display());
    // The last one under the image's own default policy: no relaxed copy mounted.
    let cases: [(&str, Vec<&str>, &[&str], &str); 3] = [
        (
            "the runtime's default seccomp profile",
            vec!["-v", &relaxed],
            &RUN_UNDER_POLICY,
            "contrib/container/seccomp.json",
        ),
        ("/proc masked", vec!["--security-opt", &seccomp, "-v", &relaxed], &RUN_UNDER_POLICY, "systempaths=unconfined"),
        (
            "a read-only cgroup filesystem",
            vec!["--security-opt", &seccomp, "--security-opt", "systempaths=unconfined"],
            &RUN,
            "writable-cgroups=true",
        ),
    ];
    for (what, opts, run, named) in cases {
        let out = stockade_in(engine, &opts, run)?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let line = text.lines().last().unwrap_or("").to_string();
        if out.status.success() || !text.contains(named) {
            return Err(format!("with {what}, a run should be refused naming {named}; it said:\n{text}"));
        }
        let at = line.find(named).unwrap_or(0);
        println!("  refused with {what}: ...{}...", &line[at.saturating_sub(60)..(at + named.len()).min(line.len())]);
    }
    // `stockade doctor` in a container with the engine's defaults names both settings; with the
    // documented options its namespaces and proc checks pass.
    for (opts, want) in [
        (vec![], ["clone3 refused", "contrib/container/seccomp.json", "hide part of /proc", "systempaths=unconfined"]),
        (
            vec!["--security-opt", seccomp.as_str(), "--security-opt", "systempaths=unconfined"],
            ["ok    namespaces", "ok    proc", "ok    landlock", "ok    seccomp"],
        ),
    ] {
        let out = stockade_in(engine, &opts, &["doctor"])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(missing) = want.iter().find(|w| !text.contains(*w)) {
            return Err(format!("stockade doctor in a container ({}) should say `{missing}`:\n{text}", opts.join(" ")));
        }
        println!(
            "  stockade doctor, {}: {}",
            if opts.is_empty() { "the engine's defaults" } else { "the documented options" },
            if opts.is_empty() {
                "namespaces and proc fail, naming the profile and systempaths=unconfined"
            } else {
                "namespaces, proc, landlock, seccomp ok"
            }
        );
    }
    // Each call the profile adds to the default is needed: without it, a run is refused.
    let mut needed = Vec::new();
    for call in super::seccomp::added_calls() {
        let file = engine.dir.join(format!("seccomp-without-{call}.json"));
        std::fs::write(&file, super::seccomp::docker_without(root, &call)?).map_err(|e| e.to_string())?;
        let opt = format!("seccomp={}", file.display());
        let opts = ["--security-opt", &opt, "--security-opt", "systempaths=unconfined", "-v", &relaxed];
        let out = stockade_in(engine, &opts, &RUN_UNDER_POLICY)?;
        let refused = !out.status.success();
        // unshare(CLONE_NEWCGROUP) is taken only by a run in writable cgroup v1 leaves.
        if refused != (call != "unshare") {
            return Err(format!(
                "without {call} in the profile a run {}: {}",
                if refused { "is refused" } else { "still works" },
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        needed.push(format!("{call}: {}", if refused { "refused" } else { "runs (v1 cgroups only)" }));
    }
    println!("  the profile without each addition: {}", needed.join(", "));
    Ok(())
}

/// A jailed `print(1)`, under the built-in policy.
const RUN: [&str; 3] = ["run", "--python", "print(1)"];
/// The same, under the policy mounted at /etc/stockade/policies (the no-cgroups one).
const RUN_UNDER_POLICY: [&str; 5] = ["run", "--policy", "/etc/stockade/policies/default.toml", "--python", "print(1)"];

/// `stockade ARGS` in a one-off container of the image (no network), with the engine options
/// `opts`.
fn stockade_in(engine: &Engine, opts: &[&str], args: &[&str]) -> Result<std::process::Output, String> {
    let mut line =
        vec!["run", "--rm", "--network", "none", "--tmpfs", "/run/stockade", "--entrypoint", "/usr/bin/stockade"];
    line.extend(opts);
    line.push(IMAGE);
    line.extend(args);
    engine.command(&line).output().map_err(|e| format!("docker {}: {e}", line.join(" ")))
}

/// Every layer enforced, but the cgroup where the host cannot give one (then it says so).
fn check_layers(what: &str, report: &Value, no_cgroups: bool) -> Result<(), String> {
    let layers = report["enforcement"].as_array().ok_or(format!("{what}: no enforcement in the report"))?;
    let mut shown = Vec::new();
    for l in layers {
        let (name, status) = (l["layer"].as_str().unwrap_or("?"), l["status"].as_str().unwrap_or("?"));
        shown.push(format!("{name} {status}"));
        let expected = if name == "cgroup" && no_cgroups { "not-enforced" } else { "enforced" };
        if status != expected {
            return Err(format!("{what}: layer {name} is {status}, expected {expected}: {l}"));
        }
    }
    println!("  {what}: 42, layers: {}", shown.join(", "));
    Ok(())
}
