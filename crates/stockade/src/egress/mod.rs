//! The egress proxy: the supervisor's side of a jail with an egress list (`network.egress-allow`).
//!
//! The jail's child listens on `127.0.0.1:3128` in its own network namespace and hands the socket
//! over (`layers::network`); the proxy accepts on it for the run's life, on threads of the
//! supervisor's process beside the pump, and connects from the host's network to what the list
//! names, nothing else. It speaks HTTP CONNECT (a tunnel: https, or anything over TCP) and
//! absolute-form HTTP (`GET http://host/path`, sent on as the origin form with `Connection:
//! close`). Names are resolved here (the jail has no resolver and no route); a listed name whose
//! addresses are loopback, private, link-local or otherwise not public is refused unless the
//! list names that address too. Connections and bytes are counted against the policy's caps;
//! every connection ends with the run ([`Proxy::finish`]), and each one is in the report.
//!
//! Hand-written rather than a crate's: the proxies on crates.io are async servers (hyper, tokio)
//! that would bring a runtime into the synchronous supervisor, and none checks the addresses a
//! name resolves to against a list. The request's head is read with `httparse` (hyper's parser).
//!
//! Imports (layers): `policy`, `report`.

mod conn;

use crate::policy::{EgressRule, NetworkPolicy};
use crate::report::{Cut, EgressConnection, EgressReport, MAX_LISTED, Refusal};
use rustix::event::{PollFd, PollFlags, poll};
use std::io::{PipeReader, PipeWriter};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most connections the proxy serves at once (each a thread of the supervisor); a request
/// past it is refused `busy`.
const MAX_AT_ONCE: usize = 128;
/// How long [`Proxy::finish`] waits for the connections' threads to see the run's end (one in
/// a name lookup or a connect ends when that call does, closing what it opened).
const FINISH_PATIENCE: Duration = Duration::from_millis(500);

/// A run's proxy, serving from its start to [`Proxy::finish`].
#[derive(Debug)]
pub struct Proxy {
    /// Closed at the run's end: every thread's poll sees it hang up.
    stop: Option<PipeWriter>,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// What the proxy's threads share.
#[derive(Debug)]
struct Shared {
    rules: Vec<EgressRule>,
    max_connections: u32,
    max_bytes: u64,
    stop: PipeReader,
    /// Connections opened so far (allowed), against `max_connections`.
    opened: AtomicU32,
    /// Bytes both ways so far, against `max_bytes`.
    bytes: AtomicU64,
    /// Connection threads alive.
    live: AtomicUsize,
    log: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    report: EgressReport,
    /// Which report this is: a jail that serves turns takes one per turn ([`Proxy::turn`]).
    generation: u64,
    threads: Vec<JoinHandle<()>>,
}

/// Where a connection is listed: its report's generation, and its index there (`None`: past the
/// list's cap, counted only).
pub(super) type Listed = (u64, Option<usize>);

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the run is over (the stop pipe hung up).
    fn stopped(&self) -> bool {
        let mut fds = [PollFd::new(&self.stop, PollFlags::IN)];
        poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })).is_ok_and(|n| n > 0)
    }

    /// Records a connection asked for, and where it is listed.
    fn record(&self, c: EgressConnection) -> Listed {
        let mut log = self.log();
        let generation = log.generation;
        let r = &mut log.report;
        if c.allowed {
            r.allowed += 1;
        } else {
            r.refused += 1;
        }
        if r.connections.len() >= MAX_LISTED {
            r.left_out += 1;
            return (generation, None);
        }
        r.connections.push(c);
        (generation, Some(r.connections.len() - 1))
    }

    /// A connection's end: its bytes, and why the proxy cut it (if it did). One opened in an
    /// earlier turn's report adds its bytes to this one's totals only.
    fn ended(&self, (generation, at): Listed, out: u64, back: u64, cut: Option<Cut>) {
        let mut log = self.log();
        log.report.bytes_out += out;
        log.report.bytes_in += back;
        let at = at.filter(|_| generation == log.generation);
        if let Some(c) = at.and_then(|i| log.report.connections.get_mut(i)) {
            c.bytes_out = out;
            c.bytes_in = back;
            c.cut = cut;
        }
    }

    /// Takes up to `n` bytes of the run's budget; fewer (maybe 0) once it is spent.
    fn take_bytes(&self, n: u64) -> u64 {
        let before = self.bytes.fetch_add(n, Ordering::Relaxed);
        n.min(self.max_bytes.saturating_sub(before))
    }
}

impl Proxy {
    /// Serves `listener` (the jail's, in its network namespace) under `policy`'s list and caps.
    pub fn start(listener: OwnedFd, policy: &NetworkPolicy) -> std::io::Result<Proxy> {
        let listener = TcpListener::from(listener);
        listener.set_nonblocking(true)?;
        let (stop_rd, stop_wr) = std::io::pipe()?;
        let shared = Arc::new(Shared {
            rules: policy.egress_allow.clone(),
            max_connections: policy.egress_max_connections,
            max_bytes: policy.egress_max_bytes,
            stop: stop_rd,
            opened: AtomicU32::new(0),
            bytes: AtomicU64::new(0),
            live: AtomicUsize::new(0),
            log: Mutex::new(Log::default()),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new().name("egress".into()).spawn(move || accept(&listener, &s))?;
        Ok(Proxy { stop: Some(stop_wr), shared, accept: Some(accept) })
    }

    /// What the proxy saw since the last turn of a jail that serves turns (or its start), its
    /// caps counted afresh from now: each turn is a run, with a run's caps.
    pub fn turn(&self) -> EgressReport {
        let mut log = self.shared.log();
        log.generation += 1;
        self.shared.opened.store(0, Ordering::Relaxed);
        self.shared.bytes.store(0, Ordering::Relaxed);
        std::mem::take(&mut log.report)
    }

    /// Ends the run's egress: no more connections (the listening socket closed), every open one
    /// ended, and what it saw. Connections still open are reported cut at the run's end.
    pub fn finish(mut self) -> EgressReport {
        self.stop.take();
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let threads = std::mem::take(&mut self.shared.log().threads);
        let until = Instant::now() + FINISH_PATIENCE;
        for t in threads {
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.shared.log().report.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // A run that never finished (its supervisor's error): its threads see the stop.
        self.stop.take();
    }
}

/// Accepts until the run is over; each connection on a thread of its own.
fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    loop {
        let mut fds = [PollFd::new(listener, PollFlags::IN), PollFd::new(&shared.stop, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) if !fds[1].revents().is_empty() => return,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => {
                // Out of fds, say: the next try may do.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if shared.live.load(Ordering::Relaxed) >= MAX_AT_ONCE {
            conn::refuse_now(&stream, Refusal::Busy);
            shared.record(conn::refusal("", 0, "", Refusal::Busy));
            continue;
        }
        shared.live.fetch_add(1, Ordering::Relaxed);
        let s = shared.clone();
        let spawned = std::thread::Builder::new().name("egress-conn".into()).spawn(move || {
            conn::serve(stream, &s);
            s.live.fetch_sub(1, Ordering::Relaxed);
        });
        match spawned {
            Ok(t) => {
                let mut log = shared.log();
                // A finished thread's handle is only its result: let it go.
                log.threads.retain(|t| !t.is_finished());
                log.threads.push(t);
            }
            Err(_) => {
                shared.live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
