//! Host calls: a jailed program asks its caller to do something for it (an agent's tool) and
//! waits for the answer, through a channel the jail was built with (two pipes, set up before the
//! program started: it gains no fd, no syscall and no network for it). Requests and answers are
//! length-framed JSON:
//!
//! ```text
//! request (program -> caller):  <length, u32 big-endian> {"name": "search", "args": <any JSON>}
//! answer  (caller -> program):  <length, u32 big-endian> {"ok": <any JSON>} | {"error": "why"}
//! ```
//!
//! Every budget is the caller's side's, in this module: the tools the run may call (any other is
//! refused), each tool's count of calls, the bytes of each request (a longer one is refused and
//! the channel closed: nothing past the cap is read) and of each answer, and each call's time (past
//! it the program gets a timeout error; the late answer is dropped). The run's wall limit covers
//! the time spent waiting. Every call is reported ([`CallRecord`]).

use crate::report::CallRecord;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A tool a run may call, with its budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    pub name: String,
    /// Calls of it in one run; past it, refused.
    pub max_calls: u32,
    /// The most bytes of one request's frame (its JSON); past it, refused and the channel closed.
    pub max_request_bytes: u32,
    /// The most bytes of one answer's value; past it, the program gets an error instead.
    pub max_response_bytes: u32,
    /// Each call's time; past it, the program gets a timeout error.
    pub timeout: Duration,
}

impl Tool {
    /// `name` with the defaults: 50 calls, 64 KiB requests, 1 MiB answers, 5 s each.
    pub fn new(name: impl Into<String>) -> Tool {
        Tool {
            name: name.into(),
            max_calls: 50,
            max_request_bytes: 64 << 10,
            max_response_bytes: 1 << 20,
            timeout: Duration::from_secs(5),
        }
    }
}

/// Who answers: given a tool's name and its arguments (JSON text), the answer's value (JSON
/// text) or an error in words. Called on a thread of its own for each call; a call past its
/// tool's timeout is answered for it, and what this returns later is dropped.
pub type Answerer = Arc<dyn Fn(&str, &str) -> Result<String, String> + Send + Sync>;

/// A run's host calls: the tools it may call, and who answers them.
#[derive(Clone)]
pub struct HostCalls {
    pub tools: Vec<Tool>,
    pub answer: Answerer,
}

impl HostCalls {
    /// No tools: every call is refused (and reported).
    pub fn none() -> HostCalls {
        HostCalls { tools: Vec::new(), answer: Arc::new(|_, _| Err("this run has no host calls".into())) }
    }
}

impl std::fmt::Debug for HostCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostCalls").field("tools", &self.tools).finish_non_exhaustive()
    }
}

/// Who serves a run's host calls.
#[derive(Clone, Debug)]
pub enum Host {
    /// One set of tools, budgets and calls for the whole run.
    Run(HostCalls),
    /// A program that lives across turns (a live session's interpreter): each turn has its own
    /// tools, budgets and calls ([`TurnCalls`]).
    Turns(Arc<TurnCalls>),
    /// Another process of the caller's: the jail's channel is given to it when the run opens
    /// ([`Lend`]), and it serves the calls ([`Serving`]); this run's report lists none of them.
    Lent(Arc<Lend>),
}

/// Where a jail's host-call channel (its requests' read end, its answers' write end) goes when
/// its run opens with [`Host::Lent`]: given once.
pub struct Lend(Mutex<Option<LendTo>>);

type LendTo = Box<dyn FnOnce(OwnedFd, OwnedFd) + Send>;

impl Lend {
    pub fn new(to: impl FnOnce(OwnedFd, OwnedFd) + Send + 'static) -> Arc<Lend> {
        Arc::new(Lend(Mutex::new(Some(Box::new(to)))))
    }

    fn give(&self, requests: OwnedFd, answers: OwnedFd) {
        let to = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(to) = to {
            to(requests, answers);
        }
    }
}

impl std::fmt::Debug for Lend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lend")
    }
}

/// The host calls of a channel a jail lent ([`Host::Lent`]), served here on a thread of its own
/// with every budget, as its own supervisor would have: until the program closes its end or the
/// run is over ([`Serving::finish`]).
#[derive(Debug)]
pub struct Serving {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<CallRecord>>,
}

impl Serving {
    pub fn start(requests: OwnedFd, answers: OwnedFd, host: HostCalls) -> std::io::Result<Serving> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = serve(requests, answers, Host::Run(host), stop.clone())?;
        Ok(Serving { stop, thread })
    }

    /// The run is over: every call, in order (for its report's `host-calls`).
    pub fn finish(self) -> Vec<CallRecord> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// Serves the channel of a run whose jail was built with one, with `host` (its ends close with
/// none), or gives it away ([`Host::Lent`]): the calls' thread, when this process serves them.
pub(super) fn serve_or_lend(
    calls: Option<(OwnedFd, OwnedFd)>,
    host: Option<Host>,
    stop: &Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<Vec<CallRecord>>> {
    match (calls, host) {
        (Some((requests, answers)), Some(Host::Lent(lend))) => {
            lend.give(requests, answers);
            None
        }
        (Some((requests, answers)), Some(host)) => serve(requests, answers, host, stop.clone()).ok(),
        _ => None,
    }
}

impl From<HostCalls> for Host {
    fn from(h: HostCalls) -> Host {
        Host::Run(h)
    }
}

/// The host calls of a program that lives across turns: the caller opens each turn with its
/// tools ([`TurnCalls::begin`], every budget counted from zero) and takes its calls after it
/// ([`TurnCalls::end`]). Between turns a call is refused ("this run has no host calls"), and so
/// are the calls of a turn opened without tools.
#[derive(Default)]
pub struct TurnCalls {
    turn: Mutex<Option<Turn>>,
}

struct Turn {
    host: HostCalls,
    counts: Vec<u32>,
    calls: Vec<CallRecord>,
}

impl TurnCalls {
    /// Opens a turn with `host`'s tools (the last turn's calls, if it was not ended, are dropped).
    pub fn begin(&self, host: HostCalls) {
        let counts = vec![0; host.tools.len()];
        *self.lock() = Some(Turn { host, counts, calls: Vec::new() });
    }

    /// Ends the turn: its calls, in order (none when no turn was open).
    pub fn end(&self) -> Vec<CallRecord> {
        self.lock().take().map(|t| t.calls).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Turn>> {
        self.turn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for TurnCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnCalls").field("open", &self.lock().is_some()).finish()
    }
}

/// The most bytes of a request frame whatever the tools say (a name and its arguments).
pub const REQUEST_MAX_BYTES: u32 = 16 << 20;

/// Serves a run's host calls on a thread of its own until the program closes its end, `stop` is
/// set, or the program breaks the protocol. Returns every call, in order (a run's; a program of
/// turns has its calls taken by turn).
pub(super) fn serve(
    requests: OwnedFd,
    answers: OwnedFd,
    host: Host,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<Vec<CallRecord>>> {
    std::thread::Builder::new().name("stockade-calls".into()).spawn(move || {
        let source = match host {
            Host::Run(host) => Source::Run { counts: vec![0; host.tools.len()], host },
            Host::Turns(turns) => Source::Turns(turns),
            // Given away before (`serve_or_lend`): nothing is served here.
            Host::Lent(_) => Source::Run { host: HostCalls::none(), counts: Vec::new() },
        };
        let mut s = Server {
            requests: std::fs::File::from(requests),
            answers: std::fs::File::from(answers),
            source,
            stop,
            calls: Vec::new(),
            worker: None,
        };
        s.run();
        s.calls
    })
}

struct Server {
    requests: std::fs::File,
    answers: std::fs::File,
    source: Source,
    stop: Arc<AtomicBool>,
    /// A run's calls (a program of turns keeps them in its turn).
    calls: Vec<CallRecord>,
    /// The thread that asked the last call's answerer, free again (one that answered late is
    /// left to its call).
    worker: Option<Worker>,
}

/// A thread asking answerers, one call at a time.
struct Worker {
    calls: mpsc::Sender<(Answerer, String, String)>,
    answers: mpsc::Receiver<Result<String, String>>,
}

impl Worker {
    fn start() -> std::io::Result<Worker> {
        let (calls, asked) = mpsc::channel::<(Answerer, String, String)>();
        let (answered, answers) = mpsc::channel();
        std::thread::Builder::new().name("stockade-call".into()).spawn(move || {
            for (answer, name, args) in asked {
                if answered.send(answer(&name, &args)).is_err() {
                    return;
                }
            }
        })?;
        Ok(Worker { calls, answers })
    }
}

/// The tools a request may call, and their counts so far.
enum Source {
    Run { host: HostCalls, counts: Vec<u32> },
    Turns(Arc<TurnCalls>),
}

impl Server {
    fn run(&mut self) {
        loop {
            if !self.next_request() {
                return;
            }
            let mut len = [0u8; 4];
            if self.requests.read_exact(&mut len).is_err() {
                return;
            }
            let n = u32::from_be_bytes(len);
            let most = self.most_request_bytes();
            if n > most && matches!(self.source, Source::Turns(_)) {
                // A program of turns keeps its channel for its next turns: the frame is read
                // through and dropped, a piece at a time (never held, never parsed).
                let why = match most {
                    0 => "this run has no host calls".to_string(),
                    _ => format!("the request is {n} bytes, more than any of this run's tools takes ({most})"),
                };
                self.record(CallRecord::refused("", n.into(), why.clone()));
                if !self.skip(u64::from(n)) || self.reply(&Err(why)).is_err() {
                    return;
                }
                continue;
            }
            if n > most {
                // Nothing past the cap is read: the channel closes, the program's call fails.
                self.record(CallRecord::refused(
                    "",
                    n.into(),
                    format!("a request of {n} bytes is over every tool's max-request-bytes ({most})"),
                ));
                let _ = self.reply(&Err(format!(
                    "the request is {n} bytes, more than any tool takes ({most}): host calls are closed for this run"
                )));
                return;
            }
            let mut body = vec![0u8; n as usize];
            if self.requests.read_exact(&mut body).is_err() {
                return;
            }
            let started = Instant::now();
            let (name, args) = match parse(&body) {
                Ok(p) => p,
                Err(why) => {
                    self.record(CallRecord::refused("", n.into(), why.clone()));
                    if self.reply(&Err(why)).is_err() {
                        return;
                    }
                    continue;
                }
            };
            let outcome = self.admit(&name, n).and_then(|(tool, answer)| self.call(&tool, answer, &args));
            let mut record = CallRecord {
                name,
                request_bytes: n.into(),
                response_bytes: 0,
                ms: 0.0,
                outcome: String::new(),
                reason: None,
            };
            let answer = match outcome {
                Ok(value) => {
                    record.response_bytes = value.len() as u64;
                    record.outcome = "ok".into();
                    Ok(value)
                }
                Err((outcome, why)) => {
                    record.outcome = outcome.into();
                    record.reason = Some(why.clone());
                    Err(why)
                }
            };
            record.ms = started.elapsed().as_secs_f64() * 1000.0;
            self.record(record);
            if self.reply(&answer).is_err() {
                return;
            }
        }
    }

    /// The largest request any tool takes: a run's, or its turn's (none between turns, or in a
    /// turn without tools).
    fn most_request_bytes(&self) -> u32 {
        let most = |tools: &[Tool]| tools.iter().map(|t| t.max_request_bytes).max().unwrap_or(0);
        match &self.source {
            Source::Run { host, .. } => most(&host.tools).min(REQUEST_MAX_BYTES),
            Source::Turns(turns) => turns.lock().as_ref().map_or(0, |t| most(&t.host.tools).min(REQUEST_MAX_BYTES)),
        }
    }

    /// Reads `n` bytes of requests and drops them (in pieces: nothing is held); `false` when the
    /// channel ended first.
    fn skip(&mut self, n: u64) -> bool {
        let mut left = n;
        let mut buf = [0u8; 16 << 10];
        while left > 0 {
            let want = usize::try_from(left).unwrap_or(buf.len()).min(buf.len());
            match self.requests.read(&mut buf[..want]) {
                Ok(0) | Err(_) => return false,
                Ok(k) => left -= k as u64,
            }
        }
        true
    }

    /// The tool `name` and who answers it, if a request of `n` bytes may call it now (its count
    /// taken), or the refusal.
    fn admit(&mut self, name: &str, n: u32) -> Result<(Tool, Answerer), (&'static str, String)> {
        let mut guard;
        let (host, counts) = match &mut self.source {
            Source::Run { host, counts } => (&*host, counts),
            Source::Turns(turns) => {
                guard = turns.lock();
                match guard.as_mut() {
                    Some(t) if !t.host.tools.is_empty() => (&t.host, &mut t.counts),
                    _ => return Err(("refused", "this run has no host calls".into())),
                }
            }
        };
        let Some(i) = host.tools.iter().position(|t| t.name == name) else {
            let known: Vec<&str> = host.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(("refused", format!("no tool {name:?} in this run (its tools: {})", known.join(", "))));
        };
        let tool = &host.tools[i];
        if n > tool.max_request_bytes {
            return Err((
                "refused",
                format!("the request is {n} bytes, over {name}'s max-request-bytes ({})", tool.max_request_bytes),
            ));
        }
        if counts[i] >= tool.max_calls {
            return Err(("refused", format!("{name} was called {} times, its max-calls", tool.max_calls)));
        }
        counts[i] += 1;
        Ok((tool.clone(), host.answer.clone()))
    }

    /// One call of `tool`, admitted, within its time and answer budgets: the answer's value
    /// (JSON text), or the outcome (`refused`, `error`, `timeout`) and why.
    fn call(&mut self, tool: &Tool, answer: Answerer, args: &str) -> Result<String, (&'static str, String)> {
        let name = tool.name.as_str();
        // The last call's thread when it is free, else a new one.
        let worker = match self.worker.take() {
            Some(w) => Ok(w),
            None => Worker::start(),
        };
        let worker = match worker {
            Ok(w) if w.calls.send((answer.clone(), name.to_string(), args.to_string())).is_ok() => w,
            Ok(_) => match Worker::start() {
                Ok(w) if w.calls.send((answer, name.to_string(), args.to_string())).is_ok() => w,
                _ => return Err(("error", "the host could not start the call".into())),
            },
            Err(e) => return Err(("error", format!("the host could not start the call: {e}"))),
        };
        let deadline = Instant::now() + tool.timeout;
        let got = loop {
            let step = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
            match worker.answers.recv_timeout(step) {
                Ok(got) => break got,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(("error", "the host's answer was lost".into()));
                }
                // The thread stays with its call (a late answer is dropped with it).
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline => {
                    return Err(("timeout", format!("{name} did not answer within {} ms", tool.timeout.as_millis())));
                }
                Err(mpsc::RecvTimeoutError::Timeout) if self.stop.load(Ordering::SeqCst) => {
                    return Err(("timeout", "the run ended while it waited".into()));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        };
        self.worker = Some(worker);
        match got {
            Ok(value) if value.len() as u64 > u64::from(tool.max_response_bytes) => Err((
                "refused",
                format!(
                    "the answer is {} bytes, over {name}'s max-response-bytes ({})",
                    value.len(),
                    tool.max_response_bytes
                ),
            )),
            Ok(value) if serde_json::from_str::<serde::de::IgnoredAny>(&value).is_err() => {
                Err(("error", format!("{name}'s answer is not JSON")))
            }
            Ok(value) => Ok(value),
            Err(why) => Err(("error", shortened(why))),
        }
    }

    /// Waits for the next request (or its channel's end), looking at `stop` meanwhile: `false`
    /// when the run is over.
    fn next_request(&self) -> bool {
        use std::os::fd::AsRawFd;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            let mut fds = [libc::pollfd { fd: self.requests.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            match crate::sys::ppoll(&mut fds, Some(Duration::from_millis(50))) {
                Ok(0) | Err(crate::sys::Errno(libc::EINTR)) => {}
                Ok(_) => return true,
                Err(_) => return false,
            }
        }
    }

    /// Keeps a call's record: the run's, or its turn's (dropped when the turn is over).
    fn record(&mut self, r: CallRecord) {
        match &self.source {
            Source::Run { .. } => self.calls.push(r),
            Source::Turns(turns) => {
                if let Some(t) = turns.lock().as_mut() {
                    t.calls.push(r);
                }
            }
        }
    }

    /// Writes an answer frame: `{"ok": value}` or `{"error": why}`.
    fn reply(&mut self, answer: &Result<String, String>) -> std::io::Result<()> {
        let body = match answer {
            Ok(value) => format!("{{\"ok\":{value}}}"),
            Err(why) => serde_json::json!({ "error": why }).to_string(),
        };
        // Within u32: an answer's value is at most its tool's max-response-bytes, an error's
        // words at most REASON_MAX_BYTES.
        let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
        let mut frame = len.to_be_bytes().to_vec();
        frame.extend_from_slice(body.as_bytes());
        self.answers.write_all(&frame)
    }
}

/// The most bytes of a tool's error the program and the report get (the rest is cut, said).
pub const REASON_MAX_BYTES: usize = 1024;

/// `why` within [`REASON_MAX_BYTES`], cut at a character's boundary.
fn shortened(mut why: String) -> String {
    if why.len() > REASON_MAX_BYTES {
        let mut end = REASON_MAX_BYTES;
        while !why.is_char_boundary(end) {
            end -= 1;
        }
        why.truncate(end);
        why.push_str("... (cut)");
    }
    why
}

/// A request's name and arguments (as JSON text), or why it is not one.
fn parse(body: &[u8]) -> Result<(String, String), String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        name: String,
        #[serde(default)]
        args: serde_json::Value,
    }
    let r: Request = serde_json::from_slice(body).map_err(|e| format!("not a host call request: {e}"))?;
    Ok((r.name, r.args.to_string()))
}
