//! One jail released ahead of its run ([`Slot`]), on a thread of its own: the thread that made
//! the jail stays with it (the jail's parent-death signal follows it), waiting at its gate. A
//! slot serves exactly one run and is then gone: runs never share a jail. Every jail thread is
//! counted by its engine's [`Tracker`], which a draining engine waits on.
//!
//! Imports (layers): `ending`, `handoff`, `spawner`.

use super::ending::{AFTER_ANSWER, inject_panic, panic_words};
use super::handoff::{self, Msg};
use super::spawner::Spawner;
use std::os::fd::AsFd;
use std::sync::Arc;
use stockade::runtime::Recipe;
use stockade::{Error, Gate, Gated};
use tokio::sync::{oneshot, watch};

/// How many of something are alive (jail threads, runs), and a way to wait until none is: a
/// count in a watch channel, so that a waiter is woken by the last one's end (never polled).
#[derive(Debug, Clone)]
pub struct Tracker(Arc<watch::Sender<usize>>);

/// One counted thing: counted out when dropped.
#[derive(Debug)]
pub struct Tracked(Arc<watch::Sender<usize>>);

impl Tracker {
    pub fn new() -> Tracker {
        Tracker(Arc::new(watch::Sender::new(0)))
    }

    /// Counts one in, until the returned guard drops.
    pub fn track(&self) -> Tracked {
        self.0.send_modify(|n| *n += 1);
        Tracked(self.0.clone())
    }

    pub fn count(&self) -> usize {
        *self.0.borrow()
    }

    /// Returns when none is alive.
    pub async fn idle(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// One jail released ahead of its run, waiting at its gate; where its network namespace came
/// from.
#[derive(Debug)]
pub struct Slot(Held, stockade::NetJoined, std::time::Instant);

/// Who holds a slot's jail.
#[derive(Debug)]
enum Held {
    /// A thread of this process.
    Thread { gate: Arc<Gate>, done: Option<oneshot::Receiver<Result<Gated, SlotError>>> },
    /// A helper process of the spawner's ([`super::spawner`]), over its socket; `live` counts it
    /// until the helper closes the socket (its jail down, its clean-up done).
    Helper { sock: Option<std::os::unix::net::UnixStream>, live: Option<Tracked> },
}

/// Why a slot was not built, or its run did not end with a report.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// The library refused or failed (a jail that could not be built, files that could not be
    /// put, a supervisor resource).
    #[error(transparent)]
    Jail(Error),
    /// A helper's run: its files could not be put (the request's fault).
    #[error("{0}")]
    Files(String),
    /// A helper's jail could not be built or run (the host's fault), or the helper failed.
    #[error("{0}")]
    Helper(String),
    /// The jail's thread could not start, or ended before it said anything.
    #[error("supervisor: a jail's thread: {0}")]
    Thread(String),
    /// The jail's thread or helper panicked: a bug. That run is lost (its jail taken down as
    /// the thread unwound); the server goes on.
    #[error("internal error: a jail's supervisor panicked ({0})")]
    Panicked(String),
}

impl Slot {
    /// Builds a jail on a thread of its own and waits until it is released (blocking). `Err`
    /// says why in words. `one_run`: the jail is built for the run about to open it (a death
    /// before the opening is that run's).
    pub fn start(recipe: Arc<Recipe>, one_run: bool, jails: &Tracker) -> Result<Slot, SlotError> {
        let gate = if one_run { Gate::for_one_run() } else { Gate::new() };
        let gate = Arc::new(gate.map_err(SlotError::Jail)?);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<stockade::NetJoined, SlotError>>(1);
        let (done_tx, done) = oneshot::channel();
        let g = gate.clone();
        let live = jails.track();
        let spawned = std::thread::Builder::new().name("stockade-jail".into()).spawn(move || {
            // Counted out when this thread ends, however it ends (a draining server waits).
            let _live = live;
            // A panic here is a bug of ours: it ends this run (its jail is taken down as the
            // thread unwinds: `Prepared` and its cgroup leaf clean up when dropped), never the
            // server and the other runs in flight.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| jail_thread(&recipe, &g, &ready_tx)));
            let mut gated = match ran {
                Ok(Some(gated)) => gated.map_err(SlotError::Jail),
                Ok(None) => return,
                Err(payload) => {
                    let why = panic_words(payload.as_ref());
                    eprintln!("stockade serve: internal error: a jail's thread panicked ({why}); its run is lost");
                    let _ = ready_tx.try_send(Err(SlotError::Panicked(why.clone())));
                    Err(SlotError::Panicked(why))
                }
            };
            // The answer first; then the run's cgroup goes.
            let cleanup = match &mut gated {
                Ok(Gated::Ran(f)) => f.cleanup.take(),
                _ => None,
            };
            let _ = done_tx.send(gated);
            // The answer goes out first: this thread's clean-up waits a moment rather than take
            // the CPU the answer needs.
            if cleanup.is_some() {
                std::thread::sleep(AFTER_ANSWER);
            }
            if let Some(note) = cleanup.and_then(stockade::Cleanup::done) {
                eprintln!("stockade serve: {note}");
            }
        });
        if let Err(e) = spawned {
            return Err(SlotError::Thread(e.to_string()));
        }
        match ready_rx.recv() {
            Ok(Ok(net)) => Ok(Slot(Held::Thread { gate, done: Some(done) }, net, std::time::Instant::now())),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SlotError::Thread("it ended before the jail was built".into())),
        }
    }

    /// A jail of `runtime` built by a helper of `spawner` (blocking until it is released);
    /// `one_run` as for [`Slot::start`].
    pub fn of_helper(spawner: &Spawner, runtime: &str, one_run: bool, jails: &Tracker) -> Result<Slot, SlotError> {
        let live = jails.track();
        let (sock, net) = spawner.helper(runtime, one_run).map_err(SlotError::Helper)?;
        sock.set_nonblocking(true).map_err(|e| SlotError::Helper(format!("a helper's socket: {e}")))?;
        Ok(Slot(Held::Helper { sock: Some(sock), live: Some(live) }, net, std::time::Instant::now()))
    }

    /// Where its jail's network namespace came from (its run's report says the same).
    pub fn net(&self) -> stockade::NetJoined {
        self.1
    }

    /// How long the jail has waited since it was built.
    pub(super) fn waited(&self) -> std::time::Duration {
        self.2.elapsed()
    }

    /// Whether the jail is still waiting; `Err`: why it is not (it died, or was cancelled).
    pub(super) fn alive(&mut self) -> Result<(), String> {
        match &mut self.0 {
            Held::Thread { done, .. } => {
                let Some(done) = done.as_mut() else { return Err("it was used".into()) };
                match done.try_recv() {
                    Err(oneshot::error::TryRecvError::Empty) => Ok(()),
                    Ok(Ok(Gated::NotStarted(why))) => Err(why),
                    Ok(Err(e)) => Err(e.to_string()),
                    _ => Err("its thread ended".into()),
                }
            }
            Held::Helper { sock, .. } => {
                let Some(s) = sock.as_mut() else { return Err("it was used".into()) };
                helper_alive(s)
            }
        }
    }

    /// Starts the run and waits for its end.
    pub async fn run(mut self, start: stockade::Start) -> Result<Gated, SlotError> {
        match &mut self.0 {
            Held::Thread { gate, done } => {
                gate.open(start);
                let ended = || Ok(Gated::NotStarted("the jail's thread ended".into()));
                match done.take() {
                    Some(done) => done.await.unwrap_or_else(|_| ended()),
                    None => ended(),
                }
            }
            Held::Helper { sock, live } => {
                let lost = |e: std::io::Error| SlotError::Helper(format!("a helper's socket: {e}"));
                let (frame, pipes, host) = handoff::start_out(start).map_err(lost)?;
                let sock = sock.take().ok_or_else(|| SlotError::Helper("the slot was used".into()))?;
                // Sent before the socket joins the runtime: its buffer is empty, so a frame that
                // fits goes at once, where waiting for the runtime to say the socket is writable
                // would cost a wakeup of its I/O driver (often on another thread).
                let sent = send_now(&sock, &frame, &pipes);
                let mut sock = tokio::net::UnixStream::from_std(sock).map_err(lost)?;
                let answer = helper_run(&mut sock, &frame, sent, pipes, host).await;
                if let Some(live) = live.take() {
                    tokio::spawn(counted_until_closed(sock, live));
                }
                answer
            }
        }
    }
}

/// Holds a helper's count (`live`) until it closes its socket: its jail is down and its clean-up
/// done then (a draining engine waits for that).
async fn counted_until_closed(mut sock: tokio::net::UnixStream, live: Tracked) {
    let _live = live;
    let mut buf = [0; 256];
    while let Ok(n) = tokio::io::AsyncReadExt::read(&mut sock, &mut buf).await
        && n > 0
    {}
}

/// Whether a helper's jail still waits: nothing to read on its socket. A helper whose jail died
/// said why ([`Msg::NotStarted`]).
fn helper_alive(sock: &mut std::os::unix::net::UnixStream) -> Result<(), String> {
    use rustix::net::{RecvFlags, recv};
    match recv(&*sock, &mut [0u8; 1], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Err(rustix::io::Errno::AGAIN) => Ok(()),
        Ok((0, _)) => Err("its helper ended".into()),
        Err(e) => Err(format!("its helper's socket: {e}")),
        Ok(_) => {
            let _ = sock.set_nonblocking(false);
            match handoff::read_frame(sock) {
                Ok((Msg::NotStarted(why), _)) => Err(why),
                Ok((other, _)) => Err(format!("its helper said {other:?} while it waited")),
                Err(e) => Err(format!("its helper ended ({e})")),
            }
        }
    }
}

/// Sends what it can of a run's `frame` to a helper without waiting (its socket is
/// non-blocking): the bytes sent, 0 when not even the first one (with the output pipes) went.
fn send_now(sock: &std::os::unix::net::UnixStream, frame: &[u8], pipes: &[std::os::fd::OwnedFd]) -> usize {
    use rustix::net::{SendFlags, send};
    let fds: Vec<_> = pipes.iter().map(std::os::fd::AsFd::as_fd).collect();
    let Ok(mut sent) = handoff::send_with_fds(sock.as_fd(), &frame[..1], &fds) else { return 0 };
    while sent < frame.len() {
        match send(sock, &frame[sent..], SendFlags::NOSIGNAL) {
            Ok(n) if n > 0 => sent += n,
            // Full (the rest is written once the runtime says the socket is writable), or
            // failed (that write says why).
            _ => break,
        }
    }
    sent
}

/// Sends a helper the rest of its run's `frame` (`sent` bytes of it went already: see
/// [`send_now`]) and reads how the run ended; a run with host calls (`host`) has them served
/// here, on the jail's channel the helper lends as the run opens.
async fn helper_run(
    sock: &mut tokio::net::UnixStream,
    frame: &[u8],
    sent: usize,
    pipes: Vec<std::os::fd::OwnedFd>,
    host: Option<stockade::HostCalls>,
) -> Result<Gated, SlotError> {
    use tokio::io::AsyncWriteExt;
    let lost = |e: std::io::Error| SlotError::Helper(format!("a helper's socket: {e}"));
    // The first byte carries the output pipes (a streaming answer's); they are the helper's then.
    let fds: Vec<_> = pipes.iter().map(std::os::fd::AsFd::as_fd).collect();
    let first = match sent {
        0 => loop {
            sock.writable().await.map_err(lost)?;
            match sock.try_io(tokio::io::Interest::WRITABLE, || handoff::send_with_fds(sock.as_fd(), &frame[..1], &fds))
            {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                sent => break sent.map_err(lost)?,
            }
        },
        sent => sent,
    };
    drop(fds);
    drop(pipes);
    sock.write_all(&frame[first..]).await.map_err(lost)?;
    let mut serving = None;
    let mut ended = read_msg(sock, host.is_some()).await?;
    if let (handoff::Msg::Calls, [_, _], Some(host)) = (&ended.0, ended.2.as_slice(), host) {
        let mut fds = std::mem::take(&mut ended.2).into_iter();
        if let (Some(requests), Some(answers)) = (fds.next(), fds.next()) {
            serving = Some(stockade::Serving::start(requests, answers, host).map_err(lost)?);
        }
        ended = read_msg(sock, false).await?;
    }
    let calls = serving.map(stockade::Serving::finish);
    match (ended.0, ended.1) {
        (Msg::Ran(wire), bytes) => {
            let mut f = handoff::finished_in(*wire, &bytes).map_err(lost)?;
            if let Some(calls) = calls {
                f.report.host_calls = calls;
            }
            Ok(Gated::Ran(Box::new(f)))
        }
        (Msg::NotStarted(why), _) => Ok(Gated::NotStarted(why)),
        (Msg::Failed { files: true, why }, _) => Err(SlotError::Files(why)),
        (Msg::Failed { why, .. }, _) => Err(SlotError::Helper(why)),
        (Msg::Panicked(why), _) => Err(SlotError::Panicked(why)),
        (other, _) => Err(SlotError::Helper(format!("its helper answered {other:?}"))),
    }
}

/// Reads a helper's next frame; `fds`: the fds that may come with its first byte (the jail's
/// host-call channel, [`Msg::Calls`]) are taken too.
async fn read_msg(
    sock: &mut tokio::net::UnixStream,
    fds: bool,
) -> Result<(Msg, Vec<u8>, Vec<std::os::fd::OwnedFd>), SlotError> {
    use tokio::io::AsyncReadExt;
    let lost = |e: std::io::Error| SlotError::Helper(format!("a helper's socket: {e}"));
    let gone = |e: std::io::Error| SlotError::Helper(format!("its helper ended without an answer ({e})"));
    let mut lengths = [0u8; handoff::LENGTHS];
    let (mut got, mut came) = (0, Vec::new());
    if fds {
        (got, came) = loop {
            sock.readable().await.map_err(gone)?;
            match sock.try_io(tokio::io::Interest::READABLE, || handoff::recv_fds(sock.as_fd(), &mut lengths)) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Ok((0, _)) => return Err(gone(std::io::ErrorKind::UnexpectedEof.into())),
                got => break got.map_err(gone)?,
            }
        };
    }
    sock.read_exact(&mut lengths[got..]).await.map_err(gone)?;
    let (h, b) = handoff::rest_len(&lengths).map_err(lost)?;
    let mut rest = vec![0; h + b];
    sock.read_exact(&mut rest).await.map_err(lost)?;
    let (msg, bytes) = handoff::decode(rest, h).map_err(lost)?;
    Ok((msg, bytes, came))
}

impl Drop for Slot {
    fn drop(&mut self) {
        match &mut self.0 {
            // An unused slot: its jail is taken down (a used one's gate is already open).
            Held::Thread { gate, .. } => gate.cancel(),
            // An unused helper's jail is taken down when its socket closes; it is counted until
            // the helper is done.
            Held::Helper { sock, live } => {
                let (Some(sock), Some(live)) = (sock.take(), live.take()) else { return };
                let _ = sock.shutdown(std::net::Shutdown::Write);
                // Waited on by the runtime: it must not block a worker thread.
                if let Ok(handle) = tokio::runtime::Handle::try_current()
                    && sock.set_nonblocking(true).is_ok()
                    && let Ok(sock) = tokio::net::UnixStream::from_std(sock)
                {
                    handle.spawn(counted_until_closed(sock, live));
                }
            }
        }
    }
}

/// A jail's thread: builds the jail, says whether it is ready, and runs it through its gate.
/// `None`: it could not be built (said on `ready`).
fn jail_thread(
    recipe: &Recipe,
    gate: &Gate,
    ready: &std::sync::mpsc::SyncSender<Result<stockade::NetJoined, SlotError>>,
) -> Option<Result<Gated, Error>> {
    let gated = said(recipe.prestart(), ready)?.run_gated(gate);
    inject_panic(&gated);
    Some(gated)
}

/// Says on `ready` whether the jail was built (and where its network namespace came from).
fn said<'r>(
    built: Result<stockade::runtime::Waiting<'r>, Error>,
    ready: &std::sync::mpsc::SyncSender<Result<stockade::NetJoined, SlotError>>,
) -> Option<stockade::runtime::Waiting<'r>> {
    match built {
        Ok(t) => {
            let _ = ready.send(Ok(t.net()));
            Some(t)
        }
        Err(e) => {
            let _ = ready.send(Err(SlotError::Jail(e)));
            None
        }
    }
}
