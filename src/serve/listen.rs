//! Listeners and their accept loops: hyper's HTTP/1.1 server for each connection, with a header
//! read timeout, a bound on connections at once, and a graceful stop (no new connection; those
//! open finish what they are doing).

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use stockade_engine::config::Listen;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Semaphore, watch};

/// A bound listener.
#[derive(Debug)]
pub enum Bound {
    /// A unix socket; `owned`: this server made its file (and removes it when it stops).
    Unix(UnixListener, PathBuf, bool),
    Tcp(TcpListener),
}

impl Bound {
    /// Where it listens (a TCP port as bound: `tcp:127.0.0.1:0` gets one).
    pub fn describe(&self) -> String {
        match self {
            Bound::Unix(_, p, true) => format!("unix:{}", p.display()),
            Bound::Unix(_, p, false) => format!("unix:{} (from systemd)", p.display()),
            Bound::Tcp(l) => l.local_addr().map_or_else(|_| "tcp:?".into(), |a| format!("tcp:{a}")),
        }
    }
}

/// Binds a listener (inside the runtime). A unix socket: its directory is made when missing
/// (0755); a stale socket left by a server that is gone is replaced, a live one refused; then the
/// socket gets `mode` and `gid`. `systemd`: the sockets `passed` in.
pub fn bind(l: &Listen, mode: u32, gid: Option<u32>, passed: &mut Vec<Passed>) -> Result<Vec<Bound>, String> {
    let tokio_err = |e: std::io::Error| format!("systemd: a socket passed in: {e}");
    match l {
        Listen::Systemd => passed
            .drain(..)
            .map(|p| match p {
                Passed::Unix(l, path) => Ok(Bound::Unix(UnixListener::from_std(l).map_err(tokio_err)?, path, false)),
                Passed::Tcp(l) => Ok(Bound::Tcp(TcpListener::from_std(l).map_err(tokio_err)?)),
            })
            .collect(),
        _ => bind_one(l, mode, gid).map(|b| vec![b]),
    }
}

/// A listening socket systemd passed in.
#[derive(Debug)]
pub enum Passed {
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Tcp(std::net::TcpListener),
}

/// The listening sockets systemd passed to this process (`LISTEN_PID` = this pid, `LISTEN_FDS`
/// sockets from fd 3), each checked to be a unix or TCP stream socket; a TCP one only with
/// `tokens`. Called before any thread starts (it unsets LISTEN_PID and LISTEN_FDS).
pub fn passed_in(tokens: bool) -> Result<Vec<Passed>, String> {
    let for_us = std::env::var("LISTEN_PID").ok().and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id());
    if !for_us || std::env::var_os("LISTEN_FDS").is_none() {
        return Err("systemd: no socket was passed in (LISTEN_FDS, and LISTEN_PID naming this process): start the \
                    service through its socket unit (contrib/systemd/stockade.socket)"
            .into());
    }
    let mut fds = listenfd::ListenFd::from_env();
    let mut out = Vec::new();
    for i in 0..fds.len() {
        let say = |e: std::io::Error| format!("systemd: socket {i} of LISTEN_FDS: {e}");
        let p = if let Ok(Some(l)) = fds.take_unix_listener(i) {
            let path = l.local_addr().map_err(say)?.as_pathname().map(Path::to_path_buf);
            let path =
                path.ok_or_else(|| format!("systemd: socket {i} of LISTEN_FDS is not a unix socket with a path"))?;
            Passed::Unix(l, path)
        } else if let Ok(Some(l)) = fds.take_tcp_listener(i) {
            Passed::Tcp(l)
        } else {
            return Err(format!("systemd: socket {i} of LISTEN_FDS is not a unix or TCP stream socket"));
        };
        let fd = match &p {
            Passed::Unix(l, _) => l.as_fd(),
            Passed::Tcp(l) => l.as_fd(),
        };
        // A connected socket (a unit with Accept=yes) is no listener: accept() would fail forever.
        if !rustix::net::sockopt::socket_acceptconn(fd).unwrap_or(false) {
            return Err(format!("systemd: socket {i} of LISTEN_FDS is not listening (Accept=yes?): use Accept=no"));
        }
        match &p {
            Passed::Tcp(l) if !tokens => {
                let addr = l.local_addr().map_err(say)?;
                return Err(format!(
                    "systemd: socket {i} is TCP ({addr}) and the configuration has no bearer tokens \
                     (server.tokens-file): refusing it"
                ));
            }
            Passed::Tcp(l) => l.set_nonblocking(true),
            Passed::Unix(l, _) => l.set_nonblocking(true),
        }
        .map_err(say)?;
        out.push(p);
    }
    if out.is_empty() {
        return Err("systemd: LISTEN_FDS names no socket".into());
    }
    Ok(out)
}

fn bind_one(l: &Listen, mode: u32, gid: Option<u32>) -> Result<Bound, String> {
    match l {
        Listen::Unix(path) => {
            let say = |what: &str, e: std::io::Error| format!("{l}: cannot {what}: {e}");
            if let Some(dir) = path.parent()
                && !dir.exists()
            {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .map_err(|e| say("create its directory", e))?;
            }
            clear_stale(path).map_err(|why| format!("{l}: {why}"))?;
            // Bound, listening, its mode and group set under a name of its own, then renamed
            // into place: the socket appears at its path only when it takes connections, with
            // the mode it is meant to have.
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let fresh = path.with_file_name(format!(".{name}.{}.new", std::process::id()));
            let _ = std::fs::remove_file(&fresh);
            let std_listener = std::os::unix::net::UnixListener::bind(&fresh).map_err(|e| say("bind", e))?;
            let placed = std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode))
                .map_err(|e| say("chmod", e))
                .and_then(|()| match gid {
                    Some(g) => std::os::unix::fs::chown(&fresh, None, Some(g)).map_err(|e| say("chown", e)),
                    None => Ok(()),
                })
                .and_then(|()| std::fs::rename(&fresh, path).map_err(|e| say("put the socket in place", e)));
            if let Err(e) = placed {
                let _ = std::fs::remove_file(&fresh);
                return Err(e);
            }
            std_listener.set_nonblocking(true).map_err(|e| say("set non-blocking", e))?;
            let listener = UnixListener::from_std(std_listener).map_err(|e| say("listen", e))?;
            Ok(Bound::Unix(listener, path.clone(), true))
        }
        Listen::Tcp(addr) => {
            let std_listener = std::net::TcpListener::bind(addr).map_err(|e| format!("{l}: cannot bind: {e}"))?;
            std_listener.set_nonblocking(true).map_err(|e| format!("{l}: {e}"))?;
            TcpListener::from_std(std_listener).map(Bound::Tcp).map_err(|e| format!("{l}: cannot listen: {e}"))
        }
        Listen::Systemd => Err("systemd: not a socket to bind".into()),
    }
}

/// Removes a socket no server answers on; refuses a live one, or a path that is not a socket.
fn clear_stale(path: &Path) -> Result<(), String> {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(()) };
    if !meta.file_type().is_socket() {
        return Err("the path exists and is not a socket: refusing to replace it".into());
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err("another server is listening there".into());
    }
    std::fs::remove_file(path).map_err(|e| format!("cannot remove the stale socket: {e}"))
}

/// How long a connection may stall.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// For a request's headers (`server.header-timeout-ms`), also while the connection is idle.
    pub header: Duration,
    /// For any write of an answer to make progress (`server.write-timeout-ms`): a client that
    /// takes nothing for this long is cut off, and its answer's memory freed.
    pub write: Duration,
}

/// Accepts connections until `stop`, each served by hyper with `router`; a unix socket's file
/// is removed when it stops.
pub async fn serve(
    bound: Bound,
    router: Router,
    conns: Arc<Semaphore>,
    timeouts: Timeouts,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let permit = tokio::select! {
            p = conns.clone().acquire_owned() => p,
            _ = stop.changed() => break,
        };
        let Ok(permit) = permit else { break };
        let accepted = tokio::select! {
            a = accept(&bound) => a,
            _ = stop.changed() => break,
        };
        let Some(io) = accepted else { continue };
        let io = TokioIo::new(WriteDeadline { io, limit: timeouts.write, stalled: None });
        let svc = TowerToHyperService::new(router.clone());
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(timeouts.header).keep_alive(true);
        let mut stopping = stop.clone();
        tokio::spawn(async move {
            // With upgrades: a streamed run's calls answered on its connection (`duplex.rs`).
            let conn = builder.serve_connection(io, svc).with_upgrades();
            tokio::pin!(conn);
            // A graceful stop: the request in flight is answered, the connection then closed.
            tokio::select! {
                _ = conn.as_mut() => {}
                () = async { drop(stopping.wait_for(|s| *s).await) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(permit);
        });
    }
    // systemd keeps its socket for the next start: only a socket this server made is removed.
    if let Bound::Unix(_, path, true) = &bound {
        let _ = std::fs::remove_file(path);
    }
}

/// One connection (a failed accept is skipped after a short pause).
async fn accept(bound: &Bound) -> Option<Box<dyn Io>> {
    let accepted: std::io::Result<Box<dyn Io>> = match bound {
        Bound::Unix(l, ..) => l.accept().await.map(|(s, _)| Box::new(s) as Box<dyn Io>),
        Bound::Tcp(l) => l.accept().await.map(|(s, _)| {
            let _ = s.set_nodelay(true);
            Box::new(s) as Box<dyn Io>
        }),
    };
    match accepted {
        Ok(s) => Some(s),
        Err(_) => {
            // Out of fds, say: let what is running finish before trying again.
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}

/// A connection's stream, whichever the listener.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A connection whose writes must make progress: a write or flush that cannot go on for
/// `limit` fails (`TimedOut`), and hyper closes the connection (the answer is dropped, its
/// memory freed). The clock runs only while a write waits for the client.
struct WriteDeadline {
    io: Box<dyn Io>,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteDeadline {
    /// After a write that could not go on: the error once it has waited `limit`.
    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client took nothing for {} ms (server.write-timeout-ms)", limit.as_millis()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn went<T>(&mut self, r: Poll<std::io::Result<T>>, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match r {
            Poll::Pending => self.waited(cx),
            done => {
                self.stalled = None;
                done
            }
        }
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.went(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.went(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.went(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_shutdown(cx);
        self.went(r, cx)
    }
}
