//! A server's engine over its unix socket (`stockade mcp --serve`): the door's commands
//! ([`stockade_engine::Command`]) as API v1's requests, and its answers read back into the same
//! replies ([`stockade_engine::Reply`]), with hyper's client. Imports nothing of this front.

use serde::Serialize;
use std::path::{Path, PathBuf};
use stockade::api::{ApiError, ErrorBody, ErrorCode};
use stockade_engine::budget::Reserved;
use stockade_engine::{Command, Held, Reply, Run};

/// A running server, at its socket.
#[derive(Debug)]
pub(super) struct Remote {
    socket: PathBuf,
}

impl Remote {
    pub(super) fn new(socket: PathBuf) -> Remote {
        Remote { socket }
    }

    /// `command`, asked of the server (as nobody: its socket is guarded by its mode, not tokens).
    pub(super) async fn call(&self, command: Command) -> Result<Reply, ApiError> {
        let held = |value| Held { value, room: Reserved::elsewhere() };
        let file = |id: &str, path: &str| format!("/v1/sessions/{id}/files/{}", percent_encoded(path));
        Ok(match command {
            Command::Run(Run::Fresh(body)) => {
                Reply::Ran(held(Box::new(parse(&self.ok("POST", "/v1/runs", Some(json_of(&body))).await?)?)))
            }
            Command::Run(Run::InSession { session, body }) => {
                let at = format!("/v1/sessions/{session}/runs");
                Reply::Ran(held(Box::new(parse(&self.ok("POST", &at, Some(json_of(&body))).await?)?)))
            }
            Command::Batch(body) => {
                let answer = parse(&self.ok("POST", "/v1/batches", Some(json_of(&body))).await?)?;
                Reply::Batch(Held { value: Box::new(answer), room: Reserved::elsewhere() })
            }
            Command::OpenSession(body) => {
                Reply::Session(parse(&self.ok("POST", "/v1/sessions", Some(json_of(&body))).await?)?)
            }
            Command::ListSessions => {
                #[derive(serde::Deserialize)]
                struct Listed {
                    sessions: Vec<stockade::api::session::SessionInfo>,
                }
                Reply::Sessions(parse::<Listed>(&self.ok("GET", "/v1/sessions", None).await?)?.sessions)
            }
            Command::Session(id) => Reply::Session(parse(&self.ok("GET", &format!("/v1/sessions/{id}"), None).await?)?),
            Command::CloseSession(id) => {
                self.ok("DELETE", &format!("/v1/sessions/{id}"), None).await.map(|_| Reply::Done)?
            }
            Command::ForkSession(id) => {
                Reply::Session(parse(&self.ok("POST", &format!("/v1/sessions/{id}/fork"), None).await?)?)
            }
            Command::HibernateSession(id) => {
                Reply::Session(parse(&self.ok("POST", &format!("/v1/sessions/{id}/hibernate"), None).await?)?)
            }
            Command::Files(id) => {
                Reply::Files(parse(&self.ok("GET", &format!("/v1/sessions/{id}/files"), None).await?)?)
            }
            Command::GetFile { session, path } => Reply::File(Held {
                value: self.ok("GET", &file(&session, &path), None).await?,
                room: Reserved::elsewhere(),
            }),
            Command::PutFile { session, path, bytes } => {
                Reply::Put(parse(&self.ok("PUT", &file(&session, &path), Some(bytes)).await?)?)
            }
            Command::DeleteFile { session, path } => {
                self.ok("DELETE", &file(&session, &path), None).await.map(|_| Reply::Done)?
            }
            Command::CallWaiting { .. } => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "whether a call waits is asked of the engine that runs it: send the answer to the server",
                ));
            }
            Command::Answer { session, run, call, answer } => {
                let at = match session {
                    Some(id) => format!("/v1/sessions/{id}/runs/{run}/calls/{call}"),
                    None => format!("/v1/runs/{run}/calls/{call}"),
                };
                let body = match answer {
                    Ok(value) => format!("{{\"ok\": {value}}}").into_bytes(),
                    Err(why) => json_of(&serde_json::json!({ "error": why })),
                };
                self.ok("POST", &at, Some(body)).await.map(|_| Reply::Done)?
            }
            // Readiness answers 503 with the health itself while a runtime cannot run.
            Command::Health => Reply::Health(parse(&self.ask("GET", "/v1/health/ready", None).await?.1)?),
            Command::Live => Reply::Live(parse(&self.ok("GET", "/v1/health/live", None).await?)?),
            Command::Info => Reply::Info(parse(&self.ok("GET", "/v1/info", None).await?)?),
            Command::Metrics => {
                let text = self.ok("GET", "/metrics", None).await?;
                Reply::Metrics(String::from_utf8(text).map_err(|e| garbled(&e))?)
            }
        })
    }

    /// The answer's body when it is a success, else the server's refusal.
    async fn ok(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Result<Vec<u8>, ApiError> {
        let (status, bytes) = self.ask(method, path, body).await?;
        if status.is_success() {
            return Ok(bytes);
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(refused) => Err(refused.error),
            Err(_) => Err(ApiError::new(ErrorCode::Internal, format!("the server refused the request ({status})"))),
        }
    }

    /// One request to the server's socket: its status and body (or why it could not be asked).
    async fn ask(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(hyper::StatusCode, Vec<u8>), ApiError> {
        use http_body_util::{BodyExt, Full};
        let socket: &Path = &self.socket;
        let unreachable = |e: &dyn std::fmt::Display| {
            ApiError::new(ErrorCode::RuntimeUnavailable, format!("unavailable: cannot reach {}: {e}", socket.display()))
        };
        let io = tokio::net::UnixStream::connect(socket).await.map_err(|e| unreachable(&e))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake::<_, Full<hyper::body::Bytes>>(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| unreachable(&e))?;
        tokio::spawn(conn);
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(hyper::body::Bytes::from(body.unwrap_or_default())))
            .map_err(|e| unreachable(&e))?;
        let response = sender.send_request(request).await.map_err(|e| unreachable(&e))?;
        let status = response.status();
        let bytes = response.into_body().collect().await.map_err(|e| unreachable(&e))?.to_bytes();
        Ok((status, bytes.to_vec()))
    }
}

/// Every byte but an unreserved one as `%XX` (a `/` too: nothing on the way resolves a `..`).
fn percent_encoded(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn json_of<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| garbled(&e))
}

fn garbled(e: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("the server's answer did not read: {e}"))
}
