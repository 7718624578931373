//! The engine's one door: a typed command in ([`Command`]), a typed reply out ([`Reply`]), the
//! same for every front (`stockade serve`'s HTTP, `stockade mcp`, a Rust program embedding the
//! engine). [`Engine::call`] answers every command. A run whose output is streamed, or whose host
//! calls a front answers, goes in two steps: [`Engine::admit`] says whether it may run — its
//! session taken, its runtime available, a run slot, its answer's room — before the front sends
//! anything, then [`Admitted::run`] runs it. Admission, the answers' budget, the host calls'
//! opening and a session's begin and finish happen here, once, whatever the front.
//!
//! Imports (layers): `budget`, `calls`, `hibernate`, `replicas`, `sessions`.

use crate::Engine;
use crate::budget::Reserved;
use crate::calls::Events;
use crate::sessions::{Owner, Turn, run_id};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use stockade::api::info::{Health, Info, Liveness};
use stockade::api::session::{FileInfo, FileList, SessionBody, SessionInfo, SessionRunBody};
use stockade::api::{self, ApiError, ErrorCode, RunBody, RunRequest, RunResult};
use stockade::layers::filesystem::exchange::Pick;
use tokio::sync::OwnedSemaphorePermit;

/// What a front asks of the engine, for a caller ([`Owner`]): every session is its maker's, and
/// a command on another's is answered as one on a session that does not exist.
#[derive(Debug)]
pub enum Command {
    /// A run, one-off or of a session, its answer held whole ([`Reply::Ran`]); one declaring
    /// tools needs [`Engine::admit`] (its calls need a host).
    Run(Run),
    OpenSession(SessionBody),
    ListSessions,
    Session(String),
    CloseSession(String),
    /// A new session of the caller's, a copy of this one's workspace and interpreter
    /// ([`Reply::Session`]).
    ForkSession(String),
    /// A live session's interpreter written to the state directory, its jail ended; its next
    /// run resumes it ([`Reply::Session`]).
    HibernateSession(String),
    /// A session's workspace: its files, with sizes and modification times.
    Files(String),
    GetFile {
        session: String,
        path: String,
    },
    PutFile {
        session: String,
        path: String,
        bytes: Vec<u8>,
    },
    DeleteFile {
        session: String,
        path: String,
    },
    /// Whether call `call` of run `run` (of `session`, when given) waits for the caller's answer:
    /// the most bytes its answer may take ([`Reply::Waiting`]), asked before the answer is read.
    CallWaiting {
        session: Option<String>,
        run: String,
        call: String,
    },
    /// A host call's answer: its value (JSON text) or the tool's error.
    Answer {
        session: Option<String>,
        run: String,
        call: String,
        answer: Result<String, String>,
    },
    /// A batch of runs, its answer held whole ([`Reply::Batch`]); [`Engine::batch`] gives its
    /// results as they end.
    Batch(stockade::api::batch::BatchBody),
    Health,
    Live,
    Info,
    /// The counters, in OpenMetrics text.
    Metrics,
}

/// A run: one-off (checked against the catalog here), or in a session's workspace.
#[derive(Debug)]
pub enum Run {
    Fresh(RunBody),
    InSession { session: String, body: SessionRunBody },
}

/// Who answers a run's host calls.
pub enum Host {
    /// Nobody: a run declaring tools is refused (400 naming `tools`).
    Nobody,
    /// The run's client: each call an event of the run's stream ([`Output::Stream`]), answered
    /// with [`Command::Answer`] (without a stream, every call is answered as failed).
    Client,
    /// This process: `answer` answers each call (its tools' budgets held by the library).
    Here(stockade::Answerer),
}

/// Where an admitted run's output goes.
pub enum Output {
    /// Into its report.
    Report,
    /// To the front's pipes as it comes, and the run's own lines (its host calls) to `events`.
    Stream { stdout: OwnedFd, stderr: OwnedFd, events: Events },
}

/// What the engine answers.
#[derive(Debug)]
pub enum Reply {
    Ran(Held<Box<RunResult>>),
    Batch(Held<Box<stockade::api::batch::BatchAnswer>>),
    Session(SessionInfo),
    Sessions(Vec<SessionInfo>),
    Files(FileList),
    File(Held<Vec<u8>>),
    Put(FileInfo),
    /// The command was done; it has nothing to say.
    Done,
    /// The most bytes the waiting call's answer may take.
    Waiting(u32),
    Health(Health),
    Live(Liveness),
    Info(Info),
    Metrics(String),
}

/// An answer and its room in the engine's budget of answers: the front keeps `room` until its
/// client has the answer (or is gone), then drops it.
#[derive(Debug)]
pub struct Held<T> {
    pub value: T,
    pub room: Reserved,
}

/// A run admitted: its slot held (and its session, for a run of one), until it is run or
/// dropped (a dropped one gives both back and never runs).
pub struct Admitted {
    engine: Arc<Engine>,
    permit: OwnedSemaphorePermit,
    owner: Owner,
    job: Job,
    host: Host,
    /// The run's id, when it has host calls (a session's run has its own).
    calls: Option<String>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Host::Nobody => "Nobody",
            Host::Client => "Client",
            Host::Here(_) => "Here",
        })
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Output::Report => "Report",
            Output::Stream { .. } => "Stream",
        })
    }
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admitted").field("host", &self.host).field("calls", &self.calls).finish_non_exhaustive()
    }
}

enum Job {
    Fresh(Box<RunRequest>),
    Turn(Box<(Turn, RunRequest, Pick)>),
}

impl Job {
    fn request(&mut self) -> &mut RunRequest {
        match self {
            Job::Fresh(r) => r,
            Job::Turn(t) => &mut t.1,
        }
    }
}

impl Engine {
    /// Answers `command` for `owner`.
    pub async fn call(self: &Arc<Self>, owner: Owner, command: Command) -> Result<Reply, ApiError> {
        let s = &self.sessions;
        let reply = match command {
            Command::Run(run) => {
                let (admitted, room) = self.admit(owner, run, Host::Nobody).await?;
                Reply::Ran(Held { value: Box::new(admitted.run(Output::Report).await?), room })
            }
            Command::Batch(body) => {
                let held = self.batch(body).await?.answer().await?;
                Reply::Batch(Held { value: Box::new(held.value), room: held.room })
            }
            Command::OpenSession(body) => Reply::Session(self.open_session(owner, body)?),
            Command::ListSessions => Reply::Sessions(s.list(owner)),
            Command::Session(id) => {
                s.refresh(&id);
                Reply::Session(s.info(&id, owner)?)
            }
            Command::CloseSession(id) => {
                self.claim(&id, owner).await?;
                s.delete(&id, owner).map(|()| Reply::Done)?
            }
            Command::ForkSession(id) => {
                self.claim(&id, owner).await?;
                Reply::Session(self.fork_session(&id, owner).await?)
            }
            Command::HibernateSession(id) => {
                self.claim(&id, owner).await?;
                Reply::Session(self.hibernate_session(&id, Some(owner), crate::hibernate::Why::Asked).await?)
            }
            Command::Files(id) => {
                self.claim(&id, owner).await?;
                Reply::Files(s.files(&id, owner)?)
            }
            Command::GetFile { session, path } => {
                self.claim(&session, owner).await?;
                let bytes = s.get_file(&session, owner, &path)?;
                // Held for its client within the answers' budget, as a run's answer is.
                let room = self.answers.reserve_bytes(bytes.len()).inspect_err(|_| self.busy())?;
                Reply::File(Held { value: bytes, room })
            }
            Command::PutFile { session, path, bytes } => {
                self.claim(&session, owner).await?;
                Reply::Put(s.put_file(&session, owner, &path, bytes)?)
            }
            Command::DeleteFile { session, path } => {
                self.claim(&session, owner).await?;
                s.delete_file(&session, owner, &path).map(|()| Reply::Done)?
            }
            Command::CallWaiting { session, run, call } => {
                if let Some(id) = session {
                    s.info(&id, owner)?;
                }
                Reply::Waiting(self.calls.waiting(&run, &call, owner)?)
            }
            Command::Answer { session, run, call, answer } => {
                if let Some(id) = session {
                    s.info(&id, owner)?;
                }
                self.calls.answer(&run, &call, owner, answer).map(|()| Reply::Done)?
            }
            Command::Health => Reply::Health(self.health()),
            Command::Live => Reply::Live(Liveness { status: "alive".into(), uptime_s: self.uptime_s() }),
            Command::Info => Reply::Info(self.info()),
            Command::Metrics => Reply::Metrics(self.metrics.encode()),
        };
        Ok(reply)
    }

    /// Admits `run` for `owner`, its host calls answered by `host`: a session's run takes the
    /// session (409 while another runs), the request is checked, its runtime must be available,
    /// it waits for a run slot (in the bounded queue), and its answer's room is reserved. Returns
    /// the run, ready to start, and that room (held by the front until its answer is sent).
    pub async fn admit(self: &Arc<Self>, owner: Owner, run: Run, host: Host) -> Result<(Admitted, Reserved), ApiError> {
        let (mut job, calls) = match run {
            Run::Fresh(body) => {
                let request = api::check(body, &self.catalog)?;
                let calls = if request.tools.is_empty() { None } else { Some(run_id()?) };
                (Job::Fresh(Box::new(request)), calls)
            }
            Run::InSession { session, body } => {
                self.claim(&session, owner).await?;
                self.make_room(&session, owner).await;
                // The session is this run's from here until the run is over (or refused).
                let mut turn = self.sessions.begin(&session, owner)?;
                let (request, workspace) = turn.request(body, &self.catalog)?;
                let calls = (!request.tools.is_empty()).then(|| turn.run.clone());
                (Job::Turn(Box::new((turn, request, workspace))), calls)
            }
        };
        let request = job.request();
        if calls.is_some() && matches!(host, Host::Nobody) {
            return Err(ApiError::field(
                "tools",
                "a run with host calls streams (?stream=ndjson): its calls come to the client as events",
            ));
        }
        self.available(request)?;
        let permit = self.take_slot().await?;
        let room = self.answers.reserve(request).inspect_err(|_| self.busy())?;
        Ok((Admitted { engine: self.clone(), permit, owner, job, host, calls }, room))
    }

    /// Counts a front's 4xx refusal by its code: the door's own, and those a front makes before
    /// a command reaches it (a token refused, a body that does not decode). The door counts its
    /// 503s itself.
    pub fn refused(&self, e: &ApiError) {
        if (400..500).contains(&e.status()) {
            self.metrics.refused(e.code.as_str());
        }
    }

    fn busy(&self) {
        self.metrics.refused(ErrorCode::Busy.as_str());
    }
}

impl Reply {
    /// The refusal of this reply given to a command whose reply is of another kind: the engine's
    /// failure (a front's bug), never the client's.
    pub fn unexpected(&self) -> ApiError {
        ApiError::new(ErrorCode::Internal, format!("the engine answered {self:?}: not this command's reply"))
    }
}

impl Admitted {
    /// Runs it, to its end (whether or not the caller is still there: a session keeps its
    /// workspace so).
    pub async fn run(self, output: Output) -> Result<RunResult, ApiError> {
        let Admitted { engine, permit, owner, mut job, host, calls } = self;
        let (streams, events) = match output {
            Output::Report => (None, None),
            Output::Stream { stdout, stderr, events } => (Some((stdout, stderr)), Some(events)),
        };
        let request = job.request();
        let _open = match (host, calls) {
            (Host::Here(answer), _) => {
                request.host = Some(stockade::HostCalls { tools: request.tools.clone(), answer });
                None
            }
            (Host::Client, Some(run)) => {
                let events = events.unwrap_or_else(|| Arc::new(|_| false));
                let (host, open) = engine.calls.open(&run, owner, request.tools.clone(), events);
                request.host = Some(host);
                Some(open)
            }
            (Host::Client | Host::Nobody, _) => None,
        };
        match job {
            Job::Fresh(request) => engine.execute(permit, *request, streams).await,
            Job::Turn(t) => {
                let (turn, request, workspace) = *t;
                engine.run_turn(permit, turn, request, workspace, streams).await
            }
        }
    }
}
