//! A live session's interpreter: one jail of the library's that serves turns
//! ([`stockade::Prepared::run_turns`]), held by a thread of its own for as long as its session
//! keeps it (the jail's parent-death signal follows that thread). The library decides each turn
//! as it does a run: its deadline, its output caps, its verdict, its share of the cgroup's
//! figures, the end of the turn on a channel the code cannot reach, and nothing of the
//! interpreter running between turns. What is left here is the session's glue: the interpreter
//! started with the session's limits and files, each run's code handed over as a turn, the
//! session's files brought to the interpreter's directory between turns and taken back.
//!
//! Imports (layers): `config`, `ending`, `slot`, `state`.

use super::ending::{AFTER_ANSWER, panic_words};
use super::slot::{SlotError, Tracker};
use super::{Engine, Streams, internal};
use crate::config::Kind;
use crate::state::ImageFile;
use sha2::Digest;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;
use stockade::api::{ApiError, RunRequest, Target};
use stockade::layers::filesystem::exchange::{Pick, PutFile, Taken};
use stockade::policy::Limits;
use stockade::runtime::{Guest, Language, Recipe, WORK_DIR};
use stockade::wasm::LiveImages;
use stockade::wasm::turns::{Account, ResumedFrom, last_account};
use stockade::{Exchange, Gated, Host, LiveRun, Report, Start, Turn, TurnCalls, Turned};
use tokio::sync::oneshot;

/// One live interpreter, as its session holds it between runs.
#[derive(Debug)]
pub struct Interp {
    /// Its jail's thread, waiting for its next turn (closed: the jail is taken down).
    to_jail: mpsc::Sender<(Turn, oneshot::Sender<Answer>)>,
    run: Arc<LiveRun>,
    /// What the interpreter's directory held after the last turn, by path: its content's hash.
    mirror: BTreeMap<String, [u8; 32]>,
    /// The pipe its jail sends its images on, when it can be hibernated.
    pipe: Option<std::fs::File>,
}

/// What a live interpreter that can be hibernated is given: the image it resumes from, if it
/// does (and whether its `random` is drawn again: a fork's).
#[derive(Debug)]
pub struct Images {
    pub resume: Option<(std::fs::File, bool)>,
}

/// What an interpreter asked for its image did.
#[derive(Debug)]
pub enum Imaged {
    /// It sent it, now in `file` (`bytes` long, its BLAKE3 `hash`), and waits for its next turn
    /// as before.
    Written { file: ImageFile, hash: crate::state::Hash, bytes: u64, memory_bytes: u64 },
    /// It wrote none, and why; it waits as before.
    Refused(String),
    /// It ended (its jail is gone), and why.
    Lost(String),
}

/// How long an interpreter has to write its image.
const IMAGE_WALL_MS: u64 = 120_000;

/// What became of a turn.
#[derive(Debug)]
enum Answer {
    /// It returned (with the runner's account of it): the interpreter waits for the next.
    Kept(Box<Report>, Vec<u8>),
    /// The library refused it (a limit the jail holds for its life): the interpreter is as it was.
    Refused(stockade::Error),
    /// The interpreter ended in it (a limit, its own exit): the turn's report.
    Ended(Box<Report>),
    /// Its jail's thread failed.
    Lost(String),
}

/// How a live interpreter's start went.
#[derive(Debug)]
pub enum Started {
    /// Ready for its first turn; what it resumed from, if it did.
    Ready(Interp, Option<ResumedFrom>),
    /// It ended before it was ready (its start's report).
    Died(Box<Report>),
}

impl Engine {
    /// The language of runtime `name`'s live interpreter, when it can keep one: a Wasm guest's,
    /// or Python's for a program under stockade's Python bootstrap.
    pub(crate) fn live_language(&self, name: &str) -> Option<&'static Language> {
        match &self.runtimes.get(name)?.kind {
            Kind::Guest(guest) => Some(guest.language()),
            Kind::Program { framed: true, .. } => Some(Guest::Python.language()),
            Kind::Program { .. } => None,
        }
    }

    /// Starts a live interpreter of `req`'s runtime and policy under the session's `limits` for
    /// its whole life (its memory, processes, a guest's memory and fuel; its lifetime its wall),
    /// its directory given `files`; its start's clock is `req`'s wall limit. With `images`, a
    /// Python guest's interpreter that can be hibernated (and resumed from one).
    pub async fn live_start(
        &self,
        req: &RunRequest,
        session: &Limits,
        lifetime: Duration,
        files: Vec<PutFile>,
        images: Option<Images>,
    ) -> Result<Started, ApiError> {
        let Target::Runtime(name) = &req.target else { return Err(internal("a live session without a runtime")) };
        let rt = self.runtimes.get(name).cloned().ok_or_else(|| internal("the session's runtime is gone"))?;
        let mut life = *session;
        life.wall_timeout_ms = Some(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        let policy = self
            .catalog
            .policies
            .get(&req.policy_name)
            .map(|p| life.applied_to(p))
            .ok_or_else(|| internal("the session's policy is gone"))?;
        let run = Arc::new(LiveRun::default());
        let start = Start {
            files: Some(Exchange { dir: WORK_DIR.into(), put: files.clone(), take: None }),
            limits: Limits { wall_timeout_ms: req.limits.wall_timeout_ms, ..life },
            live: Some(run.clone()),
            host: Some(Host::Turns(Arc::new(TurnCalls::default()))),
            argv_display: Some(vec![name.clone(), "(live)".into()]),
            from_release: true,
            ..Start::default()
        };
        let (to_jail, turns) = mpsc::channel();
        let (ready_tx, ready) = oneshot::channel();
        let (runner, jails) = (self.runner.clone(), self.jails.clone());
        let mut fds = Vec::new();
        let mut pipe = None;
        let wanted = images
            .as_ref()
            .map(|i| LiveImages { resume: i.resume.is_some(), reseed: i.resume.as_ref().is_some_and(|r| r.1) });
        if let Some(Images { resume }) = images {
            let (from_jail, to_jail) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| internal(&format!("a live interpreter's image pipe: {e}")))?;
            // Fewer turns of the two processes per MiB (best effort: the default works too).
            let _ = rustix::pipe::fcntl_setpipe_size(&from_jail, 1 << 20);
            pipe = Some(std::fs::File::from(from_jail));
            fds.push(to_jail);
            fds.extend(resume.map(|(f, _)| OwnedFd::from(f)));
        }
        let built = tokio::task::spawn_blocking(move || {
            let recipe = Recipe::build_live_imaged(rt.code(), &policy, &runner, wanted).map_err(SlotError::Jail)?;
            spawn_jail(recipe, start, fds, turns, ready_tx, &jails)
        })
        .await
        .map_err(|_| internal("the jail's builder ended abnormally"))?;
        built.map_err(|e| self.cold_refusal(req, e))?;
        let resumed = match ready.await {
            Ok(Ok(account)) => match last_account(&account) {
                Some(Account::Ready { resumed, .. }) => resumed,
                _ => None,
            },
            Ok(Err(Some(report))) => return Ok(Started::Died(report)),
            Ok(Err(None)) | Err(_) => return Err(internal("a live interpreter's jail ended before it was ready")),
        };
        let mirror = files.iter().map(|f| (f.path.to_string_lossy().into_owned(), hash(&f.bytes))).collect();
        Ok(Started::Ready(Interp { to_jail, run, mirror, pipe }, resumed))
    }
}

/// What a live jail's thread says once its interpreter is ready (the runner's account of its
/// start), or why it is not: the report of a start it died in, or nothing (it could not be
/// built).
type Ready = oneshot::Sender<Result<Vec<u8>, Option<Box<Report>>>>;

/// Builds the jail of `recipe` on a thread of its own (counted by `jails`) and serves its turns
/// as they come on `turns`, until the channel closes (the session let go of it) or the
/// interpreter ends. `Err` when the thread cannot start; a jail that cannot be built says why on
/// `ready` (and is the first run's 500).
fn spawn_jail(
    recipe: Recipe,
    start: Start,
    fds: Vec<OwnedFd>,
    turns: mpsc::Receiver<(Turn, oneshot::Sender<Answer>)>,
    ready: Ready,
    jails: &Tracker,
) -> Result<(), SlotError> {
    let live = jails.track();
    let (built_tx, built) = mpsc::sync_channel::<Result<(), SlotError>>(1);
    let spawned = std::thread::Builder::new().name("stockade-live".into()).spawn(move || {
        // Counted out when this thread ends, however it ends (a draining server waits).
        let _live = live;
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            serve_turns(&recipe, start, fds, &turns, ready, &built_tx)
        }));
        if let Err(payload) = served {
            let why = panic_words(payload.as_ref());
            eprintln!("stockade serve: internal error: a live interpreter's thread panicked ({why})");
            let _ = built_tx.try_send(Err(SlotError::Panicked(why)));
        }
    });
    spawned.map_err(|e| SlotError::Thread(e.to_string()))?;
    built.recv().unwrap_or_else(|_| Err(SlotError::Thread("it ended before the jail was built".into())))
}

/// A live jail's thread: builds the jail (passed `fds`, its image files), serves its turns,
/// answers the turn it ended in, and cleans up after the answer.
fn serve_turns(
    recipe: &Recipe,
    start: Start,
    fds: Vec<OwnedFd>,
    turns: &mpsc::Receiver<(Turn, oneshot::Sender<Answer>)>,
    ready: Ready,
    built: &mpsc::SyncSender<Result<(), SlotError>>,
) {
    let passed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
    let prestarted = if passed.is_empty() { recipe.prestart() } else { recipe.prestart_passing(&passed) };
    drop(passed);
    // The jail has its own copies.
    drop(fds);
    let waiting = match prestarted {
        Ok(w) => w,
        Err(e) => {
            let _ = built.send(Err(SlotError::Jail(e)));
            return;
        }
    };
    let _ = built.send(Ok(()));
    let mut ready = Some(ready);
    let mut asking: Option<oneshot::Sender<Answer>> = None;
    let mut next = |turned: Turned| {
        match turned {
            Turned::Ready { account } => {
                ready.take().map(|r| r.send(Ok(account)));
            }
            Turned::Returned { report, account } => {
                asking.take().map(|a| a.send(Answer::Kept(report, account)));
            }
            Turned::Refused(e) => {
                asking.take().map(|a| a.send(Answer::Refused(e)));
            }
        }
        let (turn, answer) = turns.recv().ok()?;
        asking = Some(answer);
        Some(turn)
    };
    let ended = waiting.run_turns(start, &mut next);
    let (report, cleanup) = match ended {
        Ok(Gated::Ran(mut f)) => (Some(Box::new(f.report)), f.cleanup.take()),
        Ok(Gated::NotStarted(why)) => {
            eprintln!("stockade serve: a live interpreter ended before it started: {why}");
            (None, None)
        }
        Err(e) => {
            eprintln!("stockade serve: a live interpreter's jail failed: {e}");
            (None, None)
        }
    };
    match (asking.take(), ready.take(), report) {
        (Some(a), _, Some(report)) => drop(a.send(Answer::Ended(report))),
        (Some(a), _, None) => drop(a.send(Answer::Lost("the session's interpreter was lost".into()))),
        (None, Some(r), report) => drop(r.send(Err(report))),
        (None, None, _) => {}
    }
    if cleanup.is_some() {
        std::thread::sleep(AFTER_ANSWER);
    }
    if let Some(note) = cleanup.and_then(stockade::Cleanup::done) {
        eprintln!("stockade serve: {note}");
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

    /// Runs one turn: `req`'s code (its stdin too, for Python) under `req`'s wall limit, output
    /// caps and fuel, its output into `streams` as it comes when there are some. Returns the
    /// turn's report, and whether the interpreter is still alive.
    pub async fn turn(&mut self, req: &RunRequest, streams: Streams) -> Result<(Report, bool), ApiError> {
        let mut turn = stockade::runtime::live_turn(&req.code, &req.stdin, req.limits);
        if let Some((out, err)) = streams {
            (turn.stdout_to, turn.stderr_to) = (Some(out), Some(err));
        }
        turn.host = req.host.clone();
        turn.argv_display = Some(vec![req.runtime_name.clone(), req.code.clone()]);
        let (tx, rx) = oneshot::channel();
        if self.to_jail.send((turn, tx)).is_err() {
            return Ok((lost(req, "the session's interpreter was gone"), false));
        }
        match rx.await {
            Ok(Answer::Kept(report, _)) => Ok((*report, true)),
            Ok(Answer::Ended(mut report)) => {
                report.add_note(format!(
                    "the session's interpreter ended in this run ({}): the next run starts a new one",
                    report.status.as_str()
                ));
                Ok((*report, false))
            }
            Ok(Answer::Refused(stockade::Error::Policy(stockade::PolicyError::Override { flag, message }))) => {
                Err(ApiError::field(flag, message))
            }
            Ok(Answer::Refused(e)) => Err(internal(&e.to_string())),
            Ok(Answer::Lost(why)) => Ok((lost(req, &why), false)),
            Err(_) => Ok((lost(req, "the session's interpreter's thread ended"), false)),
        }
    }
}

impl Interp {
    /// Whether it can be hibernated (it has an image pipe).
    pub fn imaged(&self) -> bool {
        self.pipe.is_some()
    }

    /// Asks it for its image, received into `into` (at most `max` bytes): between two turns, the
    /// interpreter as it is (it goes on after, as it was).
    pub async fn image(&mut self, mut into: ImageFile, max: u64) -> Imaged {
        let Some(pipe) = self.pipe.as_ref().and_then(|p| p.try_clone().ok()) else {
            return Imaged::Refused("its interpreter cannot be hibernated".into());
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let receiving = tokio::task::spawn_blocking(move || {
            let got = crate::state::receive(&pipe, &mut into.file, max, &stopped);
            (into, got)
        });
        let turn = Turn {
            stdin: stockade::handover::HIBERNATE_FRAME.to_vec(),
            limits: Limits { wall_timeout_ms: Some(IMAGE_WALL_MS), ..Limits::default() },
            stdout_to: None,
            stderr_to: None,
            host: None,
            argv_display: Some(vec!["(hibernate)".into()]),
        };
        let (tx, rx) = oneshot::channel();
        let answer = if self.to_jail.send((turn, tx)).is_err() { None } else { rx.await.ok() };
        let said = match &answer {
            Some(Answer::Kept(_, account)) => last_account(account),
            _ => None,
        };
        // All of an image was sent before the runner said so; else nothing more comes.
        if !matches!(said, Some(Account::Hibernated { .. } | Account::NotHibernated { .. })) {
            stop.store(true, Ordering::SeqCst);
        }
        let received = receiving.await;
        match (said, received) {
            (Some(Account::Hibernated { memory_bytes, .. }), Ok((file, Ok(Some((hash, bytes)))))) => {
                return Imaged::Written { file, hash, bytes, memory_bytes: memory_bytes as u64 };
            }
            (Some(Account::NotHibernated { why }), Ok((_, Ok(None)))) => return Imaged::Refused(why),
            (Some(_), Ok((_, Err(e)))) => return Imaged::Lost(format!("its image did not come whole: {e}")),
            (Some(_), _) => return Imaged::Lost("its image and its runner's account disagree".into()),
            (None, _) => {}
        }
        match answer {
            None => Imaged::Lost("its interpreter was gone".into()),
            Some(Answer::Kept(_, account)) => {
                Imaged::Lost(format!("its runner answered {:?} to a hibernation", last_account(&account)))
            }
            Some(Answer::Ended(report)) => {
                Imaged::Lost(format!("its interpreter ended as it was written ({})", report.status.as_str()))
            }
            Some(Answer::Refused(e)) => Imaged::Lost(e.to_string()),
            Some(Answer::Lost(why)) => Imaged::Lost(why),
        }
    }
}

/// The report of a turn whose interpreter was lost (its jail's thread ended without its report).
fn lost(req: &RunRequest, why: &str) -> Report {
    let argv = [req.runtime_name.clone(), req.code.clone()];
    let wall = req.limits.wall_timeout().unwrap_or_default();
    let mut r = Report::new(&req.policy_name, &req.runtime_name, &argv, wall);
    r.status = stockade::Status::SetupFailed;
    r.stockade_exit_code = stockade::report::EXIT_SETUP_FAILED;
    r.add_note(why);
    r
}

fn hash(b: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(b).into()
}

impl Engine {
    /// 400 for a live session's run that asks what a live run cannot give, naming the field:
    /// arguments, JavaScript's stdin, a limit the interpreter holds for its life other than the
    /// session's (`session`: its limits), fuel for an interpreter that is not fuel-metered.
    pub(super) fn refuse_for_live(&self, req: &RunRequest, session: &Limits) -> Result<(), ApiError> {
        if !req.argv.is_empty() {
            return Err(ApiError::field(
                "argv",
                "a live session's run has no arguments (its interpreter is already running)",
            ));
        }
        // Python's interpreter gives a run its stdin; QuickJS's cannot.
        if let Some(l) = self.live_language(&req.runtime_name)
            && !l.turn_stdin
            && !req.stdin.is_empty()
        {
            return Err(ApiError::field("stdin", format!("a live {} session's run reads no stdin", l.name)));
        }
        let (asked, held) = (&req.limits, session);
        let life = [
            ("memory-max-bytes", asked.memory_max_bytes, held.memory_max_bytes),
            ("pids-max", asked.pids_max, held.pids_max),
            ("wasm-memory-max-bytes", asked.wasm_memory_max_bytes, held.wasm_memory_max_bytes),
        ];
        let shown = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
        if let Some((key, a, h)) = life.into_iter().find(|(_, a, h)| a != h) {
            return Err(ApiError::field(
                format!("limits.{key}"),
                format!(
                    "{} asked of a live session whose interpreter holds {} for its whole life: set it when the session \
                     is made",
                    shown(a),
                    shown(h)
                ),
            ));
        }
        let wasm = matches!(self.runtimes.get(&req.runtime_name).map(|r| &r.kind), Some(Kind::Guest(_)));
        match (asked.fuel, held.fuel) {
            (Some(_), _) if !wasm => Err(ApiError::field(
                "limits.fuel",
                "fuel meters a Wasm guest: this session's interpreter runs on the host",
            )),
            (Some(_), None) => Err(ApiError::field(
                "limits.fuel",
                "this live session's interpreter is not fuel-metered: make the session with limits.fuel",
            )),
            _ => Ok(()),
        }
    }
}
