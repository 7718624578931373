//! One connection of the proxy: its request read and decided, its host resolved and connected,
//! then its bytes relayed both ways until both sides are done, the run's byte budget is spent
//! or the run is over.

use super::Shared;
use crate::policy::egress::{self, EgressHost, Target};
use crate::report::{Cut, EgressConnection, Refusal};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The largest request head the proxy reads.
const HEAD_MAX: usize = 16 * 1024;
/// How long a connection may take to send its request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one address may take to accept the proxy's connection, and how many are tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_ADDRESSES: usize = 4;
/// Bytes held for each direction before the proxy stops reading that side.
const BUF: usize = 64 * 1024;
/// Request headers that are the proxy's, not the host's: not sent on.
const HOP_HEADERS: [&str; 4] = ["proxy-connection", "proxy-authorization", "connection", "keep-alive"];

/// A request the proxy can serve: where to, and the bytes to send there first.
struct Request {
    method: String,
    host: String,
    port: u16,
    connect: bool,
    first: Vec<u8>,
}

/// A refused request's record (the program's words cut to a host name's length: a report lists
/// 256 of them).
pub(super) fn refusal(host: &str, port: u16, method: &str, why: Refusal) -> EgressConnection {
    EgressConnection {
        host: host.chars().take(253).collect(),
        port,
        method: method.chars().take(16).collect(),
        allowed: false,
        refused: Some(why),
        address: None,
        bytes_out: 0,
        bytes_in: 0,
        cut: None,
    }
}

/// Answers a refused request with its reason (best effort: the socket is non-blocking, the
/// answer small).
pub(super) fn refuse_now(mut stream: &TcpStream, why: Refusal) {
    let status = match why {
        Refusal::BadRequest => "400 Bad Request",
        Refusal::CannotResolve | Refusal::CannotConnect => "502 Bad Gateway",
        Refusal::Busy => "503 Service Unavailable",
        _ => "403 Forbidden",
    };
    let body = format!("stockade egress proxy: refused ({})\n", why.name());
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(answer.as_bytes());
}

/// Serves one connection the program opened to the proxy.
pub(super) fn serve(client: TcpStream, shared: &Shared) {
    if client.set_nonblocking(true).is_err() {
        return;
    }
    let req = match read_head(&client, shared).map(|(buf, len)| parse(&buf, len)) {
        Ok(Ok(req)) => req,
        Ok(Err(())) | Err(Some(())) => {
            refuse_now(&client, Refusal::BadRequest);
            shared.record(refusal("", 0, "", Refusal::BadRequest));
            return;
        }
        // The run ended first, or the program hung up.
        Err(None) => return,
    };
    let upstream = match open(&req, shared) {
        Ok(up) => up,
        Err(why) => {
            refuse_now(&client, why);
            shared.record(refusal(&req.host, req.port, &req.method, why));
            return;
        }
    };
    let address = upstream.peer_addr().ok().map(|a| a.ip().to_string());
    let at = shared.record(EgressConnection {
        address,
        allowed: true,
        refused: None,
        ..refusal(&req.host, req.port, &req.method, Refusal::BadRequest)
    });
    let reply: &[u8] = if req.connect { b"HTTP/1.1 200 Connection established\r\n\r\n" } else { b"" };
    let (out, back, cut) = relay(&client, &upstream, shared, req.first, reply);
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = client.shutdown(Shutdown::Both);
    shared.ended(at, out, back, cut);
}

/// The request's head and where it ends in the bytes read. `Err(Some)`: not one (too long, no
/// head in time); `Err(None)`: the program hung up, or the run is over.
fn read_head(mut client: &TcpStream, shared: &Shared) -> Result<(Vec<u8>, usize), Option<()>> {
    let until = Instant::now() + HEAD_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Some(()));
        }
        let mut fds = [PollFd::new(&client, PollFlags::IN), PollFd::new(&shared.stop, PollFlags::IN)];
        let timeout = Timespec::try_from(left).unwrap_or(Timespec { tv_sec: 10, tv_nsec: 0 });
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) if !fds[1].revents().is_empty() => return Err(None),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Err(None),
        }
        match client.read(&mut chunk) {
            Ok(0) => return Err(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => continue,
            Err(_) => return Err(None),
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok((buf, end + 4));
        }
        if buf.len() >= HEAD_MAX {
            return Err(Some(()));
        }
    }
}

/// A CONNECT (`host:port`) or an absolute-form `http://` request; the bytes after its head go on
/// as they came (a tunnel's), and a plain request is sent on in origin form with the proxy's
/// own headers dropped and `Connection: close` (one request per connection).
fn parse(buf: &[u8], head_len: usize) -> Result<Request, ()> {
    let mut headers = [httparse::EMPTY_HEADER; 96];
    let mut r = httparse::Request::new(&mut headers);
    if !matches!(r.parse(&buf[..head_len]), Ok(httparse::Status::Complete(_))) {
        return Err(());
    }
    let (method, path, version) = (r.method.ok_or(())?, r.path.ok_or(())?, r.version.ok_or(())?);
    let rest = &buf[head_len..];
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = egress::split_host_port(path).map_err(|_| ())?;
        return Ok(Request { method: "CONNECT".into(), host: host.into(), port, connect: true, first: rest.to_vec() });
    }
    let after = path.get(..7).filter(|s| s.eq_ignore_ascii_case("http://")).map(|_| &path[7..]).ok_or(())?;
    let authority = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    if authority.contains('@') {
        return Err(());
    }
    let origin = match &after[authority.len()..] {
        "" => "/".to_string(),
        o if o.starts_with('/') => o.to_string(),
        o => format!("/{o}"),
    };
    let (host, port) = match egress::split_host_port(authority) {
        Ok((h, p)) => (h.to_string(), p),
        Err(_) if !authority.contains(':') || authority.ends_with(']') => {
            (authority.trim_start_matches('[').trim_end_matches(']').to_string(), 80)
        }
        Err(_) => return Err(()),
    };
    let mut first = format!("{method} {origin} HTTP/1.{version}\r\n").into_bytes();
    for h in r.headers.iter().filter(|h| !HOP_HEADERS.iter().any(|n| h.name.eq_ignore_ascii_case(n))) {
        first.extend_from_slice(h.name.as_bytes());
        first.extend_from_slice(b": ");
        first.extend_from_slice(h.value);
        first.extend_from_slice(b"\r\n");
    }
    first.extend_from_slice(b"Connection: close\r\n\r\n");
    first.extend_from_slice(rest);
    Ok(Request { method: method.to_string(), host, port, connect: false, first })
}

/// The list's word on the request, then its host resolved (a name's addresses kept when public
/// or listed) and connected.
fn open(req: &Request, shared: &Shared) -> Result<TcpStream, Refusal> {
    let target = egress::target(&req.host).map_err(|_| Refusal::NotListed)?;
    if !shared.rules.iter().any(|r| r.names(&target, req.port)) {
        return Err(Refusal::NotListed);
    }
    if shared.opened.load(Ordering::Relaxed) >= shared.max_connections {
        return Err(Refusal::MaxConnections);
    }
    let addresses: Vec<SocketAddr> = match &target {
        Target::Ip(ip) => vec![SocketAddr::new(*ip, req.port)],
        Target::Name(name) => {
            let found: Vec<SocketAddr> =
                (name.as_str(), req.port).to_socket_addrs().map_err(|_| Refusal::CannotResolve)?.collect();
            let listed = |ip| {
                let ip = egress::canonical(ip);
                shared.rules.iter().any(|r| r.port == req.port && r.host == EgressHost::Ip(ip))
            };
            let kept: Vec<SocketAddr> =
                found.iter().copied().filter(|a| egress::is_public(a.ip()) || listed(a.ip())).collect();
            if kept.is_empty() {
                return Err(if found.is_empty() { Refusal::CannotResolve } else { Refusal::PrivateAddress });
            }
            kept
        }
    };
    for a in addresses.iter().take(MAX_ADDRESSES) {
        if shared.stopped() {
            break;
        }
        if let Ok(up) = TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            if shared.stopped() {
                break;
            }
            if shared.opened.fetch_add(1, Ordering::Relaxed) >= shared.max_connections {
                return Err(Refusal::MaxConnections);
            }
            return Ok(up);
        }
    }
    Err(Refusal::CannotConnect)
}

/// One direction of a tunnel: bytes read from one side, waiting to be written to the other.
struct Flow {
    held: Vec<u8>,
    /// The reading side said end of file (or failed).
    done: bool,
    /// The writing side was told (its write half shut).
    told: bool,
    /// Bytes that went through.
    bytes: u64,
}

impl Flow {
    fn new(first: Vec<u8>) -> Flow {
        Flow { held: first, done: false, told: false, bytes: 0 }
    }

    fn finished(&self) -> bool {
        self.done && self.held.is_empty()
    }
}

/// Relays until both directions are done; (bytes out, bytes in, why the proxy cut it).
/// `first`: what goes to the host before the program's bytes; `reply`: to the program before the
/// host's (neither is in the program's budget but `first`, which the program sent).
fn relay(client: &TcpStream, up: &TcpStream, shared: &Shared, first: Vec<u8>, reply: &[u8]) -> (u64, u64, Option<Cut>) {
    let sent_first = first.len() as u64;
    if shared.take_bytes(sent_first) < sent_first || up.set_nonblocking(true).is_err() {
        return (0, 0, Some(Cut::MaxBytes));
    }
    let mut out = Flow::new(first);
    out.bytes = sent_first;
    let mut back = Flow::new(reply.to_vec());
    let mut chunk = vec![0u8; BUF];
    while !(out.finished() && back.finished()) {
        let wants = |from_done: bool, into: &Flow, to: &Flow| {
            let mut f = PollFlags::empty();
            if !from_done && into.held.len() < BUF {
                f |= PollFlags::IN;
            }
            if !to.held.is_empty() {
                f |= PollFlags::OUT;
            }
            f
        };
        let mut fds = [
            PollFd::new(client, wants(out.done, &out, &back)),
            PollFd::new(up, wants(back.done, &back, &out)),
            PollFd::new(&shared.stop, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return (out.bytes, back.bytes, None),
        }
        if !fds[2].revents().is_empty() {
            return (out.bytes, back.bytes, Some(Cut::RunOver));
        }
        let (c, u) = (fds[0].revents(), fds[1].revents());
        if (c | u).contains(PollFlags::ERR) {
            break;
        }
        // A side that hung up whole after its end of file takes nothing more.
        if c.contains(PollFlags::HUP) && out.done {
            back.held.clear();
            back.done = true;
        }
        if u.contains(PollFlags::HUP) && back.done {
            out.held.clear();
            out.done = true;
        }
        let mut end = None;
        for (ev, from, to, flow) in [(c, client, up, &mut out), (u, up, client, &mut back)] {
            if !flow.done && ev.intersects(PollFlags::IN | PollFlags::HUP) && !step_read(from, flow, &mut chunk, shared)
            {
                end = Some(Some(Cut::MaxBytes));
                break;
            }
            if !flow.held.is_empty() && !step_write(to, flow) {
                end = Some(None);
                break;
            }
            if flow.finished() && !flow.told {
                flow.told = true;
                let _ = to.shutdown(Shutdown::Write);
            }
        }
        if let Some(cut) = end {
            return (out.bytes, back.bytes, cut);
        }
    }
    (out.bytes, back.bytes, None)
}

/// Reads what one side has into its flow; `false` when the run's byte budget is spent.
fn step_read(mut from: &TcpStream, flow: &mut Flow, chunk: &mut [u8], shared: &Shared) -> bool {
    let room = BUF.saturating_sub(flow.held.len()).min(chunk.len());
    match from.read(&mut chunk[..room]) {
        Ok(0) => flow.done = true,
        Ok(n) => {
            let granted = usize::try_from(shared.take_bytes(n as u64)).unwrap_or(0).min(n);
            flow.held.extend_from_slice(&chunk[..granted]);
            flow.bytes += granted as u64;
            if granted < n {
                return false;
            }
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
        Err(_) => flow.done = true,
    }
    true
}

/// Writes what the flow holds to the other side; `false` when that side is gone.
fn step_write(mut to: &TcpStream, flow: &mut Flow) -> bool {
    match to.write(&flow.held) {
        Ok(n) => {
            flow.held.drain(..n);
            true
        }
        Err(e) => matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
    }
}
