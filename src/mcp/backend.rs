//! Where a tool call's run happens: here, through the engine's door in this process, or on a
//! running server over its unix socket (`--serve`), the same commands either way
//! ([`stockade_engine::Command`]); or nowhere, each call saying why. Imports `host.rs`,
//! `remote.rs` and the MCP front's own words (`super`), never the HTTP front.

use super::host;
use super::remote::Remote;
use super::unavailable;
use std::sync::Arc;
use stockade::Report;
use stockade::api::session::{FileInfo, SessionBody, SessionRunBody};
use stockade::api::{self, ApiError, ErrorCode, RunBody};
use stockade_engine::{Command, Engine, Held, Host, Output, Reply, Run};

/// Where the runs happen.
pub(super) enum Backend {
    /// In this process, through `stockade serve`'s engine.
    Here(Arc<Engine>),
    /// A running server's unix socket.
    Server(Remote),
    /// No jail can be built here: every call says why (the MCP client still gets its answers,
    /// not a server that vanished before `initialize`).
    Unavailable(String),
}

/// A run's report and, for a run of a session, the session's part of its answer.
pub(super) type SessionRan = (Report, Option<api::session::SessionRun>);

impl Backend {
    /// One command through the door (an MCP connection is nobody's: its sessions are its own by
    /// their ids, which only it holds). A run with the operator's tools has them answered here.
    async fn call(&self, command: Command, host: Option<&host::HostTools>) -> Result<Reply, ApiError> {
        match (self, command, host) {
            (Backend::Here(engine), Command::Run(run), Some(h)) => {
                let (admitted, room) = engine.admit(None, run, Host::Here(h.answerer())).await?;
                Ok(Reply::Ran(Held { value: Box::new(admitted.run(Output::Report).await?), room }))
            }
            (Backend::Here(engine), command, _) => engine.call(None, command).await,
            (Backend::Server(remote), command, _) => remote.call(command).await,
            (Backend::Unavailable(why), ..) => Err(ApiError::new(ErrorCode::RuntimeUnavailable, unavailable(why))),
        }
    }

    /// A one-off run.
    pub(super) async fn run(&self, body: RunBody, host: Option<&host::HostTools>) -> Result<Report, ApiError> {
        match self.call(Command::Run(Run::Fresh(body)), host).await? {
            Reply::Ran(ran) => Ok(ran.value.report),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn open(&self, body: SessionBody) -> Result<String, ApiError> {
        match self.call(Command::OpenSession(body), None).await? {
            Reply::Session(info) => Ok(info.id),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn run_in(
        &self,
        id: &str,
        body: SessionRunBody,
        host: Option<&host::HostTools>,
    ) -> Result<SessionRan, ApiError> {
        let run = Run::InSession { session: id.to_string(), body };
        match self.call(Command::Run(run), host).await? {
            Reply::Ran(ran) => Ok((ran.value.report, ran.value.session)),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn files(&self, id: &str) -> Result<Vec<FileInfo>, ApiError> {
        match self.call(Command::Files(id.to_string()), None).await? {
            Reply::Files(list) => Ok(list.files),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn get_file(&self, id: &str, path: &str) -> Result<Vec<u8>, ApiError> {
        match self.call(Command::GetFile { session: id.to_string(), path: path.to_string() }, None).await? {
            Reply::File(file) => Ok(file.value),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn put_file(&self, id: &str, path: &str, bytes: Vec<u8>) -> Result<(), ApiError> {
        match self.call(Command::PutFile { session: id.to_string(), path: path.to_string(), bytes }, None).await? {
            Reply::Put(_) => Ok(()),
            other => Err(other.unexpected()),
        }
    }

    /// The sessions it holds (an MCP front's are all its own).
    pub(super) async fn list(&self) -> Result<Vec<stockade::api::session::SessionInfo>, ApiError> {
        match self.call(Command::ListSessions, None).await? {
            Reply::Sessions(all) => Ok(all),
            other => Err(other.unexpected()),
        }
    }

    pub(super) async fn end(&self, id: &str) -> Result<(), ApiError> {
        if let Backend::Unavailable(_) = self {
            return Ok(());
        }
        self.call(Command::CloseSession(id.to_string()), None).await.map(|_| ())
    }
}
