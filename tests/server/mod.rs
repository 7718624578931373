//! A `stockade serve` started for a test, and a real HTTP client for it (hyper's, over the unix
//! socket or loopback TCP).
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether the Wasm guests are installed (a test that needs them says why it skips).
pub fn guests() -> bool {
    let d = stockade::wasm::guests::default_dir();
    let ok = d.join("python314.wasm").exists() && d.join("quickjs.wasm").exists();
    if !ok {
        eprintln!("skip: guests not installed in {} (stockade guest install)", d.display());
    }
    ok
}

/// A server of this test: its process, its socket and TCP port, its stderr lines.
pub struct Server {
    pub child: Child,
    pub dir: tempfile::TempDir,
    /// Its configuration file, and the environment it was started with.
    pub config: PathBuf,
    pub env: Vec<(String, String)>,
    pub socket: PathBuf,
    pub tcp: Option<std::net::SocketAddr>,
    pub token: String,
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Its state directory (its own, or another server's it shares as a replica).
    pub state: PathBuf,
}

/// A test's token (a file of it is written mode 0600), and a second one the server accepts too.
pub const TOKEN: &str = "test-token-0123456789abcdef";
pub const OTHER_TOKEN: &str = "test-token-other-fedcba9876543210";

impl Server {
    /// Starts `stockade serve` with a configuration of `server` (lines of its `[server]` table
    /// besides the listeners and tokens, which this sets) and `rest` (other tables), and waits
    /// until it listens.
    pub fn start(server: &str, rest: &str, tcp: bool) -> Server {
        Server::start_env(server, rest, tcp, &[])
    }

    /// [`Server::start`] with these environment variables set for the server.
    pub fn start_env(server: &str, rest: &str, tcp: bool, env: &[(&str, &str)]) -> Server {
        let (dir, config, socket) = prepare(server, rest, tcp);
        let state = dir.path().join("state");
        Server::start_with(dir, config, socket, env, state)
    }

    /// A replica beside this server: [`Server::start`] of its own (socket, configuration), on
    /// this one's state directory.
    pub fn beside(&self, server: &str, rest: &str) -> Server {
        let (dir, config, socket) = prepare(server, rest, self.tcp.is_some());
        Server::start_with(dir, config, socket, &[], self.state.clone())
    }

    fn start_with(
        dir: tempfile::TempDir,
        config: PathBuf,
        socket: PathBuf,
        env: &[(&str, &str)],
        state: PathBuf,
    ) -> Server {
        // Each server its own state directory (sessions one test leaves are no other's), unless
        // it is a replica of another's.
        let mut child = Command::new(crate::common::stockade_bin())
            .arg("serve")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stockade serve");
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("stderr");
        let l = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(line.clone());
                }
                l.lock().expect("log").push(line);
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start: {:?}", log.lock().expect("log"));
            }
        };
        let tcp = line.split([' ', ',', ';']).find_map(|w| w.strip_prefix("tcp:")).and_then(|a| a.parse().ok());
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Server { child, dir, config, env, socket, tcp, token: TOKEN.into(), log, state }
    }

    /// The state directory it keeps its sessions in.
    pub fn state_dir(&self) -> PathBuf {
        self.state.clone()
    }

    /// Stops it with `signal` and starts it again: the same configuration, socket and state
    /// directory.
    pub fn restart(self, signal: i32) -> Server {
        self.restart_after(signal, |_| {})
    }

    /// [`Server::restart`], `between` done while it is down (given its state directory).
    pub fn restart_after(mut self, signal: i32, between: impl FnOnce(&Path)) -> Server {
        self.stop(signal, Duration::from_secs(40)).expect("the server did not stop");
        between(&self.state_dir());
        let placeholder = tempfile::tempdir().expect("temp dir");
        let dir = std::mem::replace(&mut self.dir, placeholder);
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Server::start_with(dir, self.config.clone(), self.socket.clone(), &env, self.state.clone())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// Sends a signal and waits (at most `limit`) for the server to exit; its exit status.
    pub fn stop(&mut self, signal: i32, limit: Duration) -> Option<std::process::ExitStatus> {
        // SAFETY-free: the pid is this test's own child.
        let _ = Command::new("kill").arg(format!("-{signal}")).arg(self.pid().to_string()).status();
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Waits until `/v1/health` says every warm pool is full.
    pub fn wait_warm(&self) {
        let ok = crate::common::wait_for(Duration::from_secs(60), || {
            let (s, body) = get(&self.socket, "/v1/health");
            s == 200
                && body["warm"]
                    .as_object()
                    .is_some_and(|w| w.values().all(|p| p["ready"].as_u64() >= p["target"].as_u64()))
        });
        assert!(ok, "the warm pools did not fill: {}", self.log());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory for a server: its configuration (of `server`, lines of its `[server]` table
/// besides the listeners and tokens, which this sets, and `rest`, other tables), its tokens'
/// file, where its socket goes.
fn prepare(server: &str, rest: &str, tcp: bool) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::Builder::new().prefix("stockade-serve-test").tempdir().expect("temp dir");
    let socket = dir.path().join("api.sock");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("# test\n{TOKEN}\n{OTHER_TOKEN}\n")).expect("tokens");
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let mut listen = vec![format!("\"unix:{}\"", socket.display())];
    if tcp {
        listen.push("\"tcp:127.0.0.1:0\"".into());
    }
    let config = format!(
        "version = 1\n[server]\nlisten = [{}]\ntokens-file = \"{}\"\n{server}\n{rest}\n",
        listen.join(", "),
        tokens.display()
    );
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, &config).expect("config");
    (dir, path, socket)
}

/// Where a request goes.
pub enum To<'a> {
    Unix(&'a Path),
    Tcp(std::net::SocketAddr),
}

/// One response: status, headers, body.
pub struct Response {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// Sends one request with hyper's HTTP/1.1 client and reads the whole answer.
pub fn request(to: To<'_>, method: &str, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Response {
    runtime().block_on(async {
        let io: Box<dyn Io> = match to {
            To::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await.expect("connect to the socket")),
            To::Tcp(a) => Box::new(tokio::net::TcpStream::connect(a).await.expect("connect to the port")),
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.expect("handshake");
        tokio::spawn(conn);
        let mut req = Request::builder().method(method).uri(path).header("host", "localhost");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = sender.send_request(req.body(Full::new(Bytes::from(body))).expect("request")).await.expect("send");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        Response { status, headers, body }
    })
}

pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A JSON request's content type.
pub const JSON: (&str, &str) = ("content-type", "application/json");

/// A request to `s` on its unix socket, with a JSON content type.
pub fn call(s: &Server, method: &str, path: &str, body: Vec<u8>) -> Response {
    request(To::Unix(&s.socket), method, path, &[JSON], body)
}

/// [`call`] with a JSON body, and the answer's status and JSON (`Null` when it is not JSON).
pub fn json_call(s: &Server, method: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let r = call(s, method, path, body.to_string().into_bytes());
    let v = serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null);
    (r.status, v)
}

/// `GET path` on the socket, as JSON.
pub fn get(socket: &Path, path: &str) -> (u16, serde_json::Value) {
    let r = request(To::Unix(socket), "GET", path, &[], Vec::new());
    let v = serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null);
    (r.status, v)
}

/// `POST /v1/runs` with a JSON body on the socket.
pub fn post_run(socket: &Path, body: &serde_json::Value) -> Response {
    request(
        To::Unix(socket),
        "POST",
        "/v1/runs",
        &[("content-type", "application/json")],
        body.to_string().into_bytes(),
    )
}

/// `POST /v1/runs?stream=ndjson`: each line as it arrives, with when it arrived.
pub fn post_stream(socket: &Path, body: &serde_json::Value) -> (u16, Vec<(Duration, serde_json::Value)>) {
    post_stream_to(socket, "/v1/runs", body)
}

/// `POST path?stream=ndjson`: each line as it arrives, with when it arrived.
pub fn post_stream_to(
    socket: &Path,
    path: &str,
    body: &serde_json::Value,
) -> (u16, Vec<(Duration, serde_json::Value)>) {
    let (status, events, _) = post_stream_answering(socket, path, body, |_| None);
    (status, events)
}

/// `POST path?stream=ndjson`, answering events as they come: for each line, `answer` may give a
/// path and a JSON body to `POST` (a host call's answer, on a connection of its own) at once.
/// Returns the status, every line with when it arrived, and each answer's status.
pub fn post_stream_answering(
    socket: &Path,
    path: &str,
    body: &serde_json::Value,
    mut answer: impl FnMut(&serde_json::Value) -> Option<(String, serde_json::Value)>,
) -> (u16, Vec<(Duration, serde_json::Value)>, Vec<u16>) {
    runtime().block_on(async {
        let send = |path: String, body: String| async move {
            let io = tokio::net::UnixStream::connect(socket).await.expect("connect");
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.expect("handshake");
            tokio::spawn(conn);
            let req = Request::builder()
                .method("POST")
                .uri(path)
                .header("host", "localhost")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .expect("request");
            sender.send_request(req).await.expect("send")
        };
        let t0 = Instant::now();
        let resp = send(format!("{path}?stream=ndjson"), body.to_string()).await;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let (mut pending, mut events, mut answers) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(frame) = body.frame().await {
            let frame = frame.expect("frame");
            let Some(data) = frame.data_ref() else { continue };
            pending.extend_from_slice(data);
            while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                let v: serde_json::Value = serde_json::from_slice(&line).expect("an NDJSON line");
                let at = t0.elapsed();
                if let Some((path, body)) = answer(&v) {
                    answers.push(send(path, body.to_string()).await.status().as_u16());
                }
                events.push((at, v));
            }
        }
        (status, events, answers)
    })
}

/// Stockade cgroups of `pid` left anywhere.
pub fn cgroups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("stockade-{pid}-");
    let host = stockade::layers::cgroup::host::Host::current();
    let mut out = Vec::new();
    for h in host.v2.iter().chain(host.v1.values()) {
        let Some(dir) = h.dir(&h.own) else { continue };
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                out.push(e.path());
            }
        }
    }
    out
}

/// Host processes below `pid`, at any depth (the server's spawner, its helpers, their jails).
pub fn descendants_of(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        let kids = children_of(p);
        next.extend(kids.iter().map(|&k| k as u32));
        out.extend(kids);
    }
    out
}

/// Host processes whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        let ppid = stat.rsplit_once(") ").and_then(|(_, r)| r.split(' ').nth(1)).and_then(|x| x.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Writes `head` and `body` on a new connection to `socket` (a thread writes, so that a server
/// that answers before it reads the body is heard), and returns the answer's status.
pub fn raw_status(socket: &Path, head: &str, body: Vec<u8>) -> u16 {
    use std::io::{Read, Write};
    let mut conn = std::os::unix::net::UnixStream::connect(socket).expect("connect to the socket");
    let mut writer = conn.try_clone().expect("clone");
    let head = head.to_string();
    let sent = std::thread::spawn(move || {
        let _ = writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(&body));
    });
    conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    drop(conn);
    let _ = sent.join();
    let line = String::from_utf8_lossy(&got).lines().next().unwrap_or("").to_string();
    line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A process's peak resident memory so far (`VmHWM`), KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A GET's status and text.
pub fn get_text(s: &Server, path: &str) -> (u16, String) {
    let r = call(s, "GET", path, Vec::new());
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}
