//! A live session's interpreter: one jailed run of the runtime's interpreter that lives as long
//! as its session, kept in this process (not the spawner's: its directory and its kill pipe
//! are this process's fds). Its code is the loop of [`handover::PYTHON_LIVE`] or
//! [`handover::JS_LIVE`]; each turn is a frame on its stdin, and its output runs until the turn's
//! nonce on stdout and on stderr.
//!
//! The jail holds the session's limits (memory, processes, a guest's memory) for its whole life,
//! its wall limit is the session's lifetime, and its output caps are the whole life's
//! ([`LIFE_OUTPUT_MAX`]). Each turn has its own wall limit and output caps, held here: past its
//! wall limit the jail is killed through its kill pipe (the library's `Start::kill_on`) and the
//! session gets a new interpreter at its next run; output past a turn's cap is read and dropped.
//! Between turns the session's files are reached on the host side through the run's lent
//! directory, and each turn's CPU time is the difference of the run's cgroup's figures
//! ([`LiveRun`]).

use super::slot::{Slot, SlotError};
use super::{Engine, Streams, internal};
use crate::config::Kind;
use sha2::Digest;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stockade::api::session::{Mode, SessionBody, SessionInfo};
use stockade::api::{ApiError, RunRequest, Target};
use stockade::layers::cgroup::CgroupStats;
use stockade::layers::filesystem::exchange::{Pick, PutFile, Taken};
use stockade::report::StreamReport;
use stockade::runtime::{Recipe, WORK_DIR};
use stockade::{Exchange, Gated, Host, Layers, LiveRun, Report, Start, Status, TurnCalls, handover};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

/// The most output an interpreter writes over its whole life, on each stream (each turn's own
/// cap is the run's): past it, the policy's `output.over-cap` applies to the interpreter.
pub const LIFE_OUTPUT_MAX: u64 = 1 << 30;

/// The most a run waits for its killed interpreter's jail to end.
const KILLED_WAIT: Duration = Duration::from_secs(5);

/// One live interpreter.
#[derive(Debug)]
pub struct Interp {
    frames: pipe::Sender,
    out: pipe::Receiver,
    err: pipe::Receiver,
    /// Its write end: written or closed, the run is killed.
    kill: Option<OwnedFd>,
    run: Arc<LiveRun>,
    /// Its host calls, opened for each turn with the turn's tools.
    calls: Arc<TurnCalls>,
    ended: Option<tokio::task::JoinHandle<Result<Gated, SlotError>>>,
    /// What the interpreter's directory held after the last turn, by path: its content's hash.
    mirror: BTreeMap<String, [u8; 32]>,
    /// Its jail's layers, their JSON made once: each turn's report carries a copy, written from it.
    layers: Layers,
    policy: String,
    program: String,
}

/// How a turn went, before its report.
struct Told {
    /// The turn's status from its nonce; `None`: the interpreter ended first (or was killed).
    status: Option<i32>,
    out: Captured,
    err: Captured,
    wall: Duration,
    /// Its host calls.
    calls: Vec<stockade::report::CallRecord>,
}

impl Engine {
    /// Whether runtime `name` can keep an interpreter, and whether it is Python's: `Some` for a
    /// Wasm guest or a program under stockade's Python bootstrap.
    pub fn live_python(&self, name: &str) -> Option<bool> {
        match &self.runtimes.get(name)?.kind {
            Kind::Guest { python } => Some(*python),
            Kind::Program { framed: true, .. } => Some(true),
            Kind::Program { .. } => None,
        }
    }

    /// Opens a session for `owner` (checked as [`Sessions::check`](super::sessions::Sessions::check)
    /// does; a live one only of a runtime that can keep an interpreter).
    pub fn open_session(&self, owner: super::sessions::Owner, body: SessionBody) -> Result<SessionInfo, ApiError> {
        let spec = self.sessions.check(body, &self.catalog)?;
        if spec.mode == Mode::Live && self.live_python(&spec.runtime).is_none() {
            return Err(ApiError::field(
                "mode",
                format!(
                    "runtime {} reads its code whole from stdin: it cannot keep an interpreter between runs",
                    spec.runtime
                ),
            ));
        }
        self.sessions.create(owner, spec)
    }

    /// Starts a live interpreter for `req` (its runtime, policy and limits, the session's), its
    /// directory given `files`.
    pub async fn live_start(
        &self,
        req: &RunRequest,
        lifetime: Duration,
        files: Vec<PutFile>,
    ) -> Result<Interp, ApiError> {
        let Target::Runtime(name) = &req.target else { return Err(internal("a live session without a runtime")) };
        let rt = self.runtimes.get(name).cloned().ok_or_else(|| internal("the session's runtime is gone"))?;
        let python = self.live_python(name).ok_or_else(|| internal("the session's runtime keeps no interpreter"))?;
        let mut limits = req.limits;
        limits.wall_timeout_ms = Some(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        limits.stdout_max_bytes = Some(LIFE_OUTPUT_MAX);
        limits.stderr_max_bytes = Some(LIFE_OUTPUT_MAX);
        let policy = self
            .catalog
            .policies
            .get(&req.policy_name)
            .map(|p| limits.applied_to(p))
            .ok_or_else(|| internal("the session's policy is gone"))?;
        let (runner, jails) = (self.runner.clone(), self.jails.clone());
        let built = tokio::task::spawn_blocking(move || {
            let recipe = Recipe::build(rt.code(), &policy, &runner).map_err(SlotError::Jail)?;
            let layers = Layers::encoded(recipe.plan().layers());
            Slot::start(Arc::new(recipe), true, &jails).map(|s| (s, layers))
        })
        .await
        .map_err(|_| internal("the jail's builder ended abnormally"))?;
        let (slot, layers) = built.map_err(|e| self.cold_refusal(req, e))?;
        let pipe = || std::io::pipe().map_err(|e| internal(&format!("cannot make a pipe: {e}")));
        let (frames_r, frames_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (kill_r, kill_w) = pipe()?;
        let run = Arc::new(LiveRun::default());
        let calls = Arc::new(TurnCalls::default());
        let code = if python { handover::PYTHON_LIVE } else { handover::JS_LIVE };
        let start = Start {
            stdin: handover::frame(code, &[]),
            files: Some(Exchange { dir: WORK_DIR.into(), put: files.clone(), take: None }),
            limits,
            stdout_to: Some(out_w.into()),
            stderr_to: Some(err_w.into()),
            stdin_from: Some(frames_r.into()),
            kill_on: Some(kill_r.into()),
            live: Some(run.clone()),
            host: Some(Host::Turns(calls.clone())),
            argv_display: Some(vec![name.clone(), "(live)".into()]),
            from_release: true,
        };
        let ended = tokio::spawn(slot.run(start));
        let io = |e: std::io::Error| internal(&format!("a live interpreter's pipe: {e}"));
        let mirror = files.iter().map(|f| (f.path.to_string_lossy().into_owned(), hash(&f.bytes))).collect();
        Ok(Interp {
            frames: pipe::Sender::from_owned_fd(OwnedFd::from(frames_w)).map_err(io)?,
            out: pipe::Receiver::from_owned_fd(OwnedFd::from(out_r)).map_err(io)?,
            err: pipe::Receiver::from_owned_fd(OwnedFd::from(err_r)).map_err(io)?,
            kill: Some(kill_w.into()),
            run,
            calls,
            ended: Some(ended),
            mirror,
            layers,
            policy: req.policy_name.clone(),
            program: name.clone(),
        })
    }
}

impl Interp {
    /// Brings the interpreter's directory to `files` (the session's workspace and the run's
    /// files): writes what differs from what it held after the last turn, removes what is gone.
    pub async fn sync(&mut self, files: Vec<PutFile>) -> Result<(), ApiError> {
        let mut want: BTreeMap<String, [u8; 32]> = BTreeMap::new();
        let mut put = Vec::new();
        for f in files {
            let path = f.path.to_string_lossy().into_owned();
            let h = hash(&f.bytes);
            if self.mirror.get(&path) != Some(&h) {
                put.push(f);
            }
            want.insert(path, h);
        }
        let gone: Vec<String> = self.mirror.keys().filter(|p| !want.contains_key(*p)).cloned().collect();
        if put.is_empty() && gone.is_empty() {
            return Ok(());
        }
        let run = self.run.clone();
        let done = tokio::task::spawn_blocking(move || {
            for p in &gone {
                run.dir.remove(std::path::Path::new(p))?;
            }
            run.dir.put(&put)
        })
        .await
        .map_err(|_| internal("a live session's file task ended abnormally"))?;
        done.map_err(|e| ApiError::field("files", e.to_string()))?;
        self.mirror = want;
        Ok(())
    }

    /// The files of the interpreter's directory matching `pick` (also after its death).
    pub async fn take(&mut self, pick: Pick) -> Option<Taken> {
        let run = self.run.clone();
        let taken = tokio::task::spawn_blocking(move || run.dir.take(&pick)).await.ok().flatten()?;
        self.mirror = taken.files.iter().map(|(p, b)| (p.clone(), hash(b))).collect();
        Some(taken)
    }

    /// Runs one turn: `req`'s code (its stdin too, for Python) within `req`'s wall limit and
    /// output caps, its output into `streams` as it comes when there are some. Returns the
    /// turn's report, and whether the interpreter is still alive.
    pub async fn turn(&mut self, req: &RunRequest, streams: Streams) -> Result<(Report, bool), ApiError> {
        let nonce = super::sessions::random_hex(handover::NONCE_LEN / 2)?;
        let frame = handover::turn_frame(&req.code, &req.stdin, &nonce);
        let wall = req.limits.wall_timeout_ms.map_or(Duration::from_secs(10), Duration::from_millis);
        let caps = (req.limits.stdout_max_bytes, req.limits.stderr_max_bytes);
        let (fwd_out, fwd_err) = match streams {
            Some((o, e)) => (forward(o), forward(e)),
            None => (None, None),
        };
        let before = self.run.figures();
        // The turn's host calls: its own tools and budgets (none: its calls are refused).
        if let Some(host) = &req.host {
            self.calls.begin(host.clone());
        }
        let t0 = Instant::now();
        let mut out = Captured::new(caps.0, nonce.as_bytes(), fwd_out);
        let mut err = Captured::new(caps.1, nonce.as_bytes(), fwd_err);
        let talked = tokio::time::timeout(wall, async {
            // The frame may be larger than the pipe: written while the output is read.
            let write = async {
                let _ = self.frames.write_all(&frame).await;
            };
            let read = read_both(&mut self.out, &mut self.err, &mut out, &mut err);
            tokio::join!(write, read).1
        })
        .await;
        let status = match talked {
            Ok(Some(status)) => Some(status),
            _ => None,
        };
        let timed_out = talked.is_err();
        let told = Told { status, out, err, wall: t0.elapsed(), calls: self.calls.end() };
        if let Some(status) = told.status {
            let mut report = self.report(req, told, status);
            figures(&mut report, before, self.run.figures());
            return Ok((report, true));
        }
        let last = self.run.figures();
        // Past its wall limit, or ended by itself: the interpreter is taken down and its own
        // report says how it ended (a memory limit, a signal, its own exit).
        self.kill.take();
        let ran = match self.ended.take() {
            // Its jail is killed at once; the wait is bounded all the same, so that no jail's
            // end can hold the answer (one that did not end is said, and left to its thread).
            Some(h) => match tokio::time::timeout(KILLED_WAIT, h).await {
                Ok(r) => r.ok(),
                Err(_) => {
                    eprintln!(
                        "stockade serve: a live interpreter's jail did not end within {KILLED_WAIT:?} of its kill"
                    );
                    None
                }
            },
            None => None,
        };
        let mut report = self.report(req, told, -1);
        figures(&mut report, before, last);
        let mut how = match ran {
            Some(Ok(Gated::Ran(f))) => Some(f.report),
            _ => None,
        };
        if timed_out {
            report.status = Status::Timeout;
            report.exit_code = None;
            report.stockade_exit_code = stockade::report::EXIT_TIMEOUT;
            report.add_note(format!(
                "the run passed its wall limit ({} ms): the session's interpreter was killed",
                wall.as_millis()
            ));
        } else if let Some(r) = how.take() {
            report.status = r.status;
            report.exit_code = r.exit_code;
            report.signal = r.signal;
            report.signal_name = r.signal_name;
            report.stockade_exit_code = r.stockade_exit_code;
            report.oom_kills = r.oom_kills;
            report.pids_limit_hit = r.pids_limit_hit;
            report.memory_peak_bytes = r.memory_peak_bytes;
            report.add_note(format!("the session's interpreter ended in this run ({})", r.status.as_str()));
        } else {
            report.status = Status::SetupFailed;
            report.stockade_exit_code = stockade::report::EXIT_SETUP_FAILED;
            report.add_note("the session's interpreter was lost");
        }
        Ok((report, false))
    }

    /// A turn's report: its status, output and time; the layers are the interpreter's jail's.
    fn report(&self, req: &RunRequest, told: Told, status: i32) -> Report {
        let wall_timeout = req.limits.wall_timeout_ms.map_or(Duration::from_secs(10), Duration::from_millis);
        let argv = [self.program.clone(), req.code.clone()];
        let mut r = Report::new(&self.policy, &self.program, &argv, wall_timeout);
        r.status = if status == 0 { Status::Ok } else { Status::ExitedNonzero };
        r.exit_code = Some(status);
        r.stockade_exit_code = status;
        r.wall_ms = told.wall.as_secs_f64() * 1000.0;
        r.stdout = told.out.report();
        r.stderr = told.err.report();
        r.host_calls = told.calls;
        r.enforcement = self.layers.clone();
        r
    }
}

impl Drop for Interp {
    /// The interpreter goes with its session: its kill pipe closes (the run is killed at once)
    /// and so does its stdin.
    fn drop(&mut self) {
        self.kill.take();
    }
}

/// A turn's figures from its interpreter's cgroup: the CPU time it used (the difference over the
/// turn), and the interpreter's peaks so far (a cgroup's peak cannot be read for a part of its
/// life).
fn figures(r: &mut Report, before: Option<CgroupStats>, after: Option<CgroupStats>) {
    let (Some(b), Some(a)) = (before, after) else { return };
    let minus = |x: Option<u64>, y: Option<u64>| x.zip(y).map(|(x, y)| x.saturating_sub(y) as f64 / 1000.0);
    r.cpu_user_ms = minus(a.cpu_user_us, b.cpu_user_us).unwrap_or(0.0);
    r.cpu_sys_ms = minus(a.cpu_sys_us, b.cpu_sys_us).unwrap_or(0.0);
    r.memory_peak_bytes = a.memory_peak_bytes;
    r.pids_peak = a.pids_peak;
    r.oom_kills = a.oom_kills.saturating_sub(b.oom_kills);
    r.pids_limit_hit = a.pids_limit_hit;
}

fn hash(b: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(b).into()
}

fn forward(fd: OwnedFd) -> Option<pipe::Sender> {
    pipe::Sender::from_owned_fd(fd).ok()
}

/// Reads both streams until each has its nonce (`Some(status)`), or one ends first (`None`).
async fn read_both(
    out_rx: &mut pipe::Receiver,
    err_rx: &mut pipe::Receiver,
    out: &mut Captured,
    err: &mut Captured,
) -> Option<i32> {
    let mut a = vec![0u8; 64 * 1024];
    let mut b = vec![0u8; 16 * 1024];
    while out.status.is_none() || err.status.is_none() {
        tokio::select! {
            n = out_rx.read(&mut a), if out.status.is_none() => match n {
                Ok(n) if n > 0 => out.feed(&a[..n]).await,
                _ => return None,
            },
            n = err_rx.read(&mut b), if err.status.is_none() => match n {
                Ok(n) if n > 0 => err.feed(&b[..n]).await,
                _ => return None,
            },
        }
    }
    out.status.as_deref().and_then(|s| s.trim().parse().ok())
}

/// One stream of a turn: its bytes up to the nonce, kept up to the cap (or passed on).
struct Captured {
    cap: u64,
    nonce: Vec<u8>,
    kept: Vec<u8>,
    total: u64,
    /// The last bytes seen (shorter than the nonce): the nonce may span two reads.
    carry: Vec<u8>,
    /// After the nonce: the rest of its line, and then the line whole.
    after: Option<Vec<u8>>,
    status: Option<String>,
    to: Option<pipe::Sender>,
}

impl Captured {
    fn new(cap: Option<u64>, nonce: &[u8], to: Option<pipe::Sender>) -> Captured {
        Captured {
            cap: cap.unwrap_or(u64::MAX),
            nonce: nonce.to_vec(),
            kept: Vec::new(),
            total: 0,
            carry: Vec::new(),
            after: None,
            status: None,
            to,
        }
    }

    async fn feed(&mut self, chunk: &[u8]) {
        if let Some(after) = &mut self.after {
            after.extend_from_slice(chunk);
        } else {
            let mut data = std::mem::take(&mut self.carry);
            data.extend_from_slice(chunk);
            match data.windows(self.nonce.len()).position(|w| w == self.nonce.as_slice()) {
                Some(i) => {
                    self.output(&data[..i]).await;
                    self.after = Some(data[i + self.nonce.len()..].to_vec());
                }
                None => {
                    let keep = data.len().saturating_sub(self.nonce.len() - 1);
                    self.output(&data[..keep]).await;
                    self.carry = data[keep..].to_vec();
                }
            }
        }
        if let Some(after) = &self.after
            && let Some(end) = after.iter().position(|&c| c == b'\n')
        {
            self.status = Some(String::from_utf8_lossy(&after[..end]).into_owned());
        }
    }

    async fn output(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let room = usize::try_from(self.cap.saturating_sub(self.total)).unwrap_or(usize::MAX);
        let kept = &bytes[..bytes.len().min(room)];
        self.total += bytes.len() as u64;
        match &mut self.to {
            Some(to) => {
                if to.write_all(kept).await.is_err() {
                    self.to = None;
                }
            }
            None => self.kept.extend_from_slice(kept),
        }
    }

    fn report(self) -> StreamReport {
        let mut total = self.total;
        let mut kept = self.kept;
        if self.status.is_none() {
            // The stream ended without its nonce: what was held back is output too.
            total += self.carry.len() as u64;
            let room = usize::try_from(self.cap.saturating_sub(kept.len() as u64)).unwrap_or(usize::MAX);
            kept.extend_from_slice(&self.carry[..self.carry.len().min(room)]);
        }
        let truncated = total > self.cap;
        let streamed = self.to.is_some();
        match (streamed, String::from_utf8(kept)) {
            (true, _) => StreamReport { bytes: total, truncated, text: None, base64: None },
            (false, Ok(text)) => StreamReport { bytes: total, truncated, text: Some(text), base64: None },
            (false, Err(e)) => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
                StreamReport { bytes: total, truncated, text: None, base64: Some(b64) }
            }
        }
    }
}

impl Engine {
    /// 400 for a live session's run that asks what a live run cannot give, naming the field.
    pub(super) fn refuse_for_live(&self, req: &RunRequest) -> Result<(), ApiError> {
        if !req.argv.is_empty() {
            return Err(ApiError::field(
                "argv",
                "a live session's run has no arguments (its interpreter is already running)",
            ));
        }
        // Python's interpreter gives a run its stdin; QuickJS's cannot.
        if self.live_python(&req.runtime_name) != Some(true) && !req.stdin.is_empty() {
            return Err(ApiError::field("stdin", "a live JavaScript session's run reads no stdin"));
        }
        Ok(())
    }
}
