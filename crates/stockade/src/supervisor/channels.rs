//! The supervisor's side of a run's pipes: what the program writes (captured or passed on, under
//! the caps, read in batches), what it reads (the caller's bytes, fed without blocking), and the
//! fds the child hands over while it builds its root.

use crate::error::Error;
use crate::report::StreamReport;
use crate::sys::{self, Errno};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Where the program's stdout and stderr go.
#[derive(Debug, Clone, Copy)]
pub enum Output<'a> {
    /// Kept (up to the caps) and embedded in the report.
    Capture,
    /// Passed on (up to the caps) to these fds as it arrives.
    Forward { stdout: BorrowedFd<'a>, stderr: BorrowedFd<'a> },
}

pub(super) const CHUNK: usize = 64 * 1024;
/// How long a run's output may wait, after the run, for a reader of a forwarded stream to take it.
pub(super) const FLUSH_TIME_MAX: Duration = Duration::from_secs(2);
/// A write of at most this many bytes to a pipe that polled writable never blocks.
pub(super) const PIPE_BUF: usize = 4096;

enum Dest {
    Capture(Vec<u8>),
    /// `pending[sent..]` waits for the caller's fd.
    Forward {
        fd: RawFd,
        pending: Vec<u8>,
        sent: usize,
        broken: bool,
    },
}

/// One output stream: counts every byte, keeps or passes on up to the cap, drops the rest.
pub(super) struct Sink {
    cap: Option<u64>,
    total: u64,
    dest: Dest,
    /// The fd a forwarding sink writes to, when it is the sink's own (closed with it).
    owned: Option<OwnedFd>,
    unsent: u64,
}

impl Sink {
    pub(super) fn new(cap: Option<u64>, forward: Option<RawFd>) -> Sink {
        let dest = match forward {
            Some(fd) => Dest::Forward { fd, pending: Vec::new(), sent: 0, broken: false },
            None => Dest::Capture(Vec::new()),
        };
        Sink { cap, total: 0, dest, owned: None, unsent: 0 }
    }

    /// Lowers the cap to `cap` when that is tighter (before anything was pushed).
    pub(super) fn tighten(&mut self, cap: Option<u64>) {
        if let Some(c) = cap {
            self.cap = Some(self.cap.map_or(c, |old| old.min(c)));
        }
    }

    /// Passes what comes on to `fd`, closed when the sink is done (before anything was pushed).
    /// The fd is made non-blocking: a reader that stops reading never holds the run (what it
    /// has not taken waits here, up to the cap, and is given up [`FLUSH_TIME_MAX`] after the run).
    pub(super) fn forward_to(&mut self, fd: OwnedFd) {
        let broken = sys::set_nonblocking(fd.as_fd(), true).is_err();
        self.dest = Dest::Forward { fd: fd.as_raw_fd(), pending: Vec::new(), sent: 0, broken };
        self.owned = Some(fd);
    }

    /// Bytes that came, kept or not.
    pub(super) fn seen(&self) -> u64 {
        self.total
    }

    /// More came than the cap.
    pub(super) fn over_cap(&self) -> bool {
        self.cap.is_some_and(|c| self.total > c)
    }

    pub(super) fn push(&mut self, data: &[u8]) {
        let room = self.cap.map_or(u64::MAX, |c| c.saturating_sub(self.total));
        let take = data.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        self.total += data.len() as u64;
        match &mut self.dest {
            Dest::Capture(buf) => buf.extend_from_slice(&data[..take]),
            Dest::Forward { pending, broken: false, .. } => pending.extend_from_slice(&data[..take]),
            Dest::Forward { .. } => self.unsent += take as u64,
        }
    }

    /// The caller's fd to poll for POLLOUT, when data waits for it.
    pub(super) fn wants_write(&self) -> Option<RawFd> {
        match &self.dest {
            Dest::Forward { fd, pending, sent, broken: false } if *sent < pending.len() => Some(*fd),
            _ => None,
        }
    }

    pub(super) fn write_some(&mut self, limit: usize) {
        if let Dest::Forward { fd, pending, sent, broken } = &mut self.dest {
            let n = (pending.len() - *sent).min(limit);
            match sys::write(*fd, &pending[*sent..*sent + n]) {
                Ok(k) => {
                    *sent += k;
                    // What was sent goes when it is all of it, or the larger part of a large
                    // buffer: each byte is moved at most once more (never the rest per write).
                    if *sent == pending.len() {
                        pending.clear();
                        *sent = 0;
                    } else if *sent >= CHUNK && *sent * 2 >= pending.len() {
                        pending.drain(..*sent);
                        *sent = 0;
                    }
                }
                Err(Errno(libc::EAGAIN)) => {}
                Err(_) => {
                    *broken = true;
                    self.unsent += (pending.len() - *sent) as u64;
                    pending.clear();
                    *sent = 0;
                }
            }
        }
    }

    /// Passes on what waits. To the caller's own fds (`Output::Forward`), all of it; to a fd
    /// the sink owns (non-blocking), what its reader takes within [`FLUSH_TIME_MAX`]: the rest is
    /// dropped and counted ([`Sink::unsent`]).
    pub(super) fn flush(&mut self) {
        let deadline = Instant::now() + FLUSH_TIME_MAX;
        while let Some(fd) = self.wants_write() {
            if self.owned.is_some() {
                let left = deadline.saturating_duration_since(Instant::now());
                let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                if left.is_zero() || matches!(sys::ppoll(&mut p, Some(left)), Ok(0)) {
                    if let Dest::Forward { pending, sent, broken, .. } = &mut self.dest {
                        self.unsent += (pending.len() - *sent) as u64;
                        pending.clear();
                        *sent = 0;
                        *broken = true;
                    }
                    return;
                }
            }
            self.write_some(CHUNK);
        }
    }

    /// Bytes within the cap that were never passed on: the reader stopped reading.
    pub(super) fn unsent(&self) -> u64 {
        self.unsent
    }

    /// The bytes kept so far (capture mode).
    pub(super) fn captured_ref(&self) -> &[u8] {
        match &self.dest {
            Dest::Capture(buf) => buf,
            Dest::Forward { .. } => &[],
        }
    }

    /// Whether the bytes kept (capture mode) hold a whole line.
    pub(super) fn has_line(&self) -> bool {
        matches!(&self.dest, Dest::Capture(buf) if buf.contains(&b'\n'))
    }

    /// The bytes kept so far (capture mode), taken: the sink starts again from none, its cap
    /// whole (a program's account of one turn, then of the next).
    pub(super) fn take_captured(&mut self) -> Vec<u8> {
        self.total = 0;
        match &mut self.dest {
            Dest::Capture(buf) => std::mem::take(buf),
            Dest::Forward { .. } => Vec::new(),
        }
    }

    /// The bytes kept (capture mode).
    pub(super) fn captured(self) -> Vec<u8> {
        match self.dest {
            Dest::Capture(buf) => buf,
            Dest::Forward { .. } => Vec::new(),
        }
    }

    pub(super) fn report(self) -> StreamReport {
        let truncated = self.cap.is_some_and(|c| self.total > c);
        let mut r = StreamReport { bytes: self.total, truncated, text: None, base64: None };
        if let Dest::Capture(buf) = self.dest {
            match String::from_utf8(buf) {
                Ok(s) => r.text = Some(s),
                Err(e) => {
                    use base64::Engine;
                    r.base64 = Some(base64::engine::general_purpose::STANDARD.encode(e.into_bytes()));
                }
            }
        }
        r
    }
}

pub(super) struct Stream {
    pub(super) fd: Option<OwnedFd>,
    pub(super) sink: Sink,
    /// Not polled before this: the last read was small, let more accumulate (see `BATCH`).
    pub(super) quiet_until: Option<Instant>,
}

impl Stream {
    pub(super) fn new(fd: Option<OwnedFd>, sink: Sink) -> Stream {
        Stream { fd, sink, quiet_until: None }
    }
}

/// A run's output streams, by name: the program's stdout and stderr, then its extra channels
/// (fds 3.., each under its own cap; an announcing program's account is the first).
pub(super) struct Streams {
    pub(super) stdout: Stream,
    pub(super) stderr: Stream,
    pub(super) channels: Vec<Stream>,
}

/// Which of a run's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamId {
    Stdout,
    Stderr,
    Channel(usize),
}

impl Streams {
    /// None at all (a pump that only waits for the program's end).
    pub(super) fn none() -> Streams {
        Streams {
            stdout: Stream::new(None, Sink::new(None, None)),
            stderr: Stream::new(None, Sink::new(None, None)),
            channels: Vec::new(),
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (StreamId, &Stream)> {
        [(StreamId::Stdout, &self.stdout), (StreamId::Stderr, &self.stderr)]
            .into_iter()
            .chain(self.channels.iter().enumerate().map(|(i, s)| (StreamId::Channel(i), s)))
    }

    pub(super) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        match id {
            StreamId::Stdout => Some(&mut self.stdout),
            StreamId::Stderr => Some(&mut self.stderr),
            StreamId::Channel(i) => self.channels.get_mut(i),
        }
    }

    /// The channel an announcing program gives its account on.
    pub(super) fn account(&self) -> Option<&Stream> {
        self.channels.first()
    }
}

impl StreamId {
    /// The program's own output (past its cap, with `output.over-cap = "end"`, the run ends).
    pub(super) fn is_output(self) -> bool {
        matches!(self, StreamId::Stdout | StreamId::Stderr)
    }
}

/// After a read of less than `SMALL_READ` bytes, a stream is left alone for `BATCH` so that a
/// program writing a byte at a time costs the supervisor one wakeup per `BATCH` (at most 500 a
/// second per stream), not one per write: the supervisor is outside the run's cgroup and its
/// CPU is nobody's limit. A full pipe blocks the writer meanwhile; a full read is never delayed.
pub(super) const BATCH: Duration = Duration::from_millis(2);
pub(super) const SMALL_READ: usize = 16 * 1024;

/// The program's stdin pipe and the bytes still to write to it.
pub(super) struct Feed {
    pub(super) fd: OwnedFd,
    pub(super) data: std::sync::Arc<[u8]>,
    pub(super) at: usize,
}

impl Feed {
    pub(super) fn new(fd: OwnedFd, data: std::sync::Arc<[u8]>) -> Feed {
        Feed { fd, data, at: 0 }
    }

    /// The fd to poll for POLLOUT (written to, or closed: its end of file).
    pub(super) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Writes what fits now (the pipe is non-blocking); `true` when the feed is done: every
    /// byte written, or the program closed its end (POLLERR).
    pub(super) fn write_some(&mut self) -> bool {
        match sys::write(self.fd.as_raw_fd(), &self.data[self.at..]) {
            Ok(k) => {
                self.at += k;
                self.at >= self.data.len()
            }
            Err(Errno(libc::EAGAIN)) => false,
            Err(_) => true,
        }
    }
}

/// Receives the `n` staged tmpfs fds the child sends while it builds its root, waiting at most
/// `patience`; fewer when the child failed (or was killed) first: its report says why.
pub(super) fn receive_staged(
    sync: BorrowedFd<'_>,
    pidfd: BorrowedFd<'_>,
    n: usize,
    patience: Duration,
) -> Result<Vec<OwnedFd>, Errno> {
    let mut out = Vec::with_capacity(n);
    let end = Instant::now() + patience;
    while out.len() < n {
        let mut fds = [
            libc::pollfd { fd: sync.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        match sys::ppoll(&mut fds, Some(end.saturating_duration_since(Instant::now()))) {
            Ok(0) => break,
            Ok(_) if fds[0].revents & libc::POLLIN != 0 => match sys::recv_fd(sync)? {
                Some(fd) => out.push(fd),
                None => break,
            },
            Ok(_) => break,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The first failure a child that is gone reported on its report pipe (what is there now).
pub(super) fn read_failure(report: BorrowedFd<'_>) -> Option<crate::wire::Failure> {
    use crate::wire::{MSG_LEN, Msg};
    let mut msgs = Vec::new();
    let mut buf = [0u8; 4 * MSG_LEN];
    loop {
        let mut fds = [libc::pollfd { fd: report.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        match sys::ppoll(&mut fds, Some(Duration::ZERO)) {
            Ok(1) => {}
            Err(Errno(libc::EINTR)) => continue,
            _ => break,
        }
        match sys::read(report.as_raw_fd(), &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => msgs.extend_from_slice(&buf[..k]),
        }
    }
    msgs.chunks_exact(MSG_LEN).find_map(|m| match Msg::decode(m.try_into().ok()?) {
        Some(Msg::Failure(f)) => Some(f),
        _ => None,
    })
}

/// The supervisor's ends of the pipes and the socket it shares with one run's child.
pub(super) struct Pipes {
    /// The release channel (a seqpacket socket pair): release bytes down, fds (the staged
    /// directories, the seccomp listener) up.
    pub sync: OwnedFd,
    /// The report pipe: the child's stage failures and the program's wait status.
    pub report: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The extra output channels (the program's fds 3..).
    pub extra: Vec<OwnedFd>,
    /// The write end of the program's stdin, when the job feeds it bytes.
    pub stdin_feed: Option<OwnedFd>,
    /// The host-call channel: the requests' read end, the answers' write end.
    pub calls: Option<(OwnedFd, OwnedFd)>,
}

/// The child's ends, all at or above `sys::FIRST_FREE_FD`: handed over at the clone and dropped by
/// the supervisor right after, or its own ends would never see end of file.
pub(super) struct ChildEnds {
    pub sync: OwnedFd,
    pub report: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub extra: Vec<OwnedFd>,
    /// The program's stdin: the feed pipe's read end, or the caller's stdin; `None`: `/dev/null`.
    pub stdin: Option<OwnedFd>,
}

/// Opens both ends of every channel of a run.
pub(super) fn open(
    extra_outputs: usize,
    host_calls: bool,
    feed: bool,
    inherit_stdin: bool,
    passed: &[BorrowedFd<'_>],
) -> Result<(Pipes, ChildEnds), Error> {
    let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
    let child = |fd: OwnedFd| sys::above_stdio(fd).map_err(sv("renumber an fd"));
    let (sync, sync_child) = sys::socketpair().map_err(sv("create the release channel"))?;
    let (report, report_child) = sys::pipe().map_err(sv("create the report pipe"))?;
    let (stdout, stdout_child) = sys::pipe().map_err(sv("create the stdout pipe"))?;
    let (stderr, stderr_child) = sys::pipe().map_err(sv("create the stderr pipe"))?;
    let (mut extra, mut extra_child) = (Vec::new(), Vec::new());
    for _ in 0..extra_outputs {
        let (r, w) = sys::pipe().map_err(sv("create an output channel"))?;
        extra.push(r);
        extra_child.push(child(w)?);
    }
    // After the extra outputs: the program writes its host calls into one pipe, reads their
    // answers from another.
    let calls = if host_calls {
        let (req_r, req_w) = sys::pipe().map_err(sv("create the host-call channel"))?;
        let (ans_r, ans_w) = sys::pipe().map_err(sv("create the host-call channel"))?;
        extra_child.push(child(req_w)?);
        extra_child.push(child(ans_r)?);
        Some((req_r, ans_w))
    } else {
        None
    };
    // After the host-call channel: the files the caller passes, in its order.
    for fd in passed {
        extra_child.push(child(fd.try_clone_to_owned().map_err(|e| Error::Supervisor {
            what: "pass a file to the jail",
            errno: Errno(e.raw_os_error().unwrap_or(libc::EBADF)),
        })?)?);
    }
    // stdin: the caller's bytes through a pipe (fed while the program runs), the caller's own
    // stdin, or /dev/null.
    let (stdin_child, stdin_feed) = if feed {
        let (r, w) = sys::pipe().map_err(sv("create the stdin pipe"))?;
        sys::set_nonblocking(w.as_fd(), true).map_err(sv("make the stdin pipe non-blocking"))?;
        (Some(r), Some(w))
    } else if inherit_stdin {
        (std::io::stdin().as_fd().try_clone_to_owned().ok(), None)
    } else {
        (None, None)
    };
    let ends = ChildEnds {
        sync: child(sync_child)?,
        report: child(report_child)?,
        stdout: child(stdout_child)?,
        stderr: child(stderr_child)?,
        extra: extra_child,
        stdin: stdin_child.map(child).transpose()?,
    };
    Ok((Pipes { sync, report, stdout, stderr, extra, stdin_feed, calls }, ends))
}
