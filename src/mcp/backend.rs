//! Where a tool call's run happens: here, through the engine `stockade serve` uses, or on a
//! running server over its unix socket (`--serve`); or nowhere, each call saying why. Imports
//! `host.rs` and the MCP front's own words (`super`), never the HTTP front.

use super::host;
use super::{said, unavailable};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use stockade::Report;
use stockade::api::session::{SessionBody, SessionRunBody};
use stockade::api::{self, ApiError, ErrorBody, ErrorCode, RunBody};
use stockade_engine::Engine;

/// Where the runs happen.
pub(super) enum Backend {
    /// In this process, through `stockade serve`'s engine.
    Here(Arc<Engine>),
    /// A running server's unix socket.
    Server(PathBuf),
    /// No jail can be built here: every call says why (the MCP client still gets its answers,
    /// not a server that vanished before `initialize`).
    Unavailable(String),
}

/// A run's report and, for a run of a session, the session's part of its answer.
pub(super) type SessionRan = (Report, Option<api::session::SessionRun>);

impl Backend {
    pub(super) async fn open(&self, body: SessionBody) -> Result<String, ApiError> {
        match self {
            Backend::Here(engine) => Ok(engine.open_session(None, body)?.id),
            Backend::Server(socket) => {
                let bytes = remote(socket, "POST", "/v1/sessions", Some(json_of(&body))).await?;
                let info: api::session::SessionInfo = parse(&bytes)?;
                Ok(info.id)
            }
            Backend::Unavailable(why) => Err(ApiError::new(ErrorCode::RuntimeUnavailable, unavailable(why))),
        }
    }

    pub(super) async fn run_in(
        &self,
        id: &str,
        body: SessionRunBody,
        host: Option<&host::HostTools>,
    ) -> Result<SessionRan, ApiError> {
        let ran = match self {
            Backend::Here(engine) => {
                let mut turn = engine.sessions().begin(id, None)?;
                let (mut request, workspace) = turn.request(body, engine.catalog())?;
                request.host = host.map(|h| h.host_calls(request.tools.clone()));
                engine.available(&request)?;
                let permit = engine.admit().await?;
                engine.run_turn(permit, turn, request, workspace, None).await?
            }
            Backend::Server(socket) => {
                let path = format!("/v1/sessions/{id}/runs");
                let bytes = remote(socket, "POST", &path, Some(json_of(&body))).await?;
                let mut v: serde_json::Value = parse(&bytes)?;
                let part = v.as_object_mut().and_then(|o| o.remove("session"));
                let report = serde_json::from_value(v).map_err(|e| garbled(&e))?;
                return Ok((report, part.and_then(|p| serde_json::from_value(p).ok())));
            }
            Backend::Unavailable(why) => return Err(ApiError::new(ErrorCode::RuntimeUnavailable, unavailable(why))),
        };
        Ok((ran.report, ran.session))
    }

    pub(super) async fn files(&self, id: &str) -> Result<Vec<api::session::FileInfo>, ApiError> {
        match self {
            Backend::Here(engine) => Ok(engine.sessions().files(id, None)?.files),
            Backend::Server(socket) => {
                let bytes = remote(socket, "GET", &format!("/v1/sessions/{id}/files"), None).await?;
                Ok(parse::<api::session::FileList>(&bytes)?.files)
            }
            Backend::Unavailable(why) => Err(ApiError::new(ErrorCode::RuntimeUnavailable, unavailable(why))),
        }
    }

    /// A file of a session: `GET` its bytes, or `PUT` them.
    pub(super) async fn file(
        &self,
        id: &str,
        method: &str,
        path: &str,
        put: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, ApiError> {
        match (self, put) {
            (Backend::Here(engine), None) => engine.sessions().get_file(id, None, path),
            (Backend::Here(engine), Some(bytes)) => {
                engine.sessions().put_file(id, None, path, bytes).map(|_| Vec::new())
            }
            (Backend::Server(socket), put) => {
                let at = format!("/v1/sessions/{id}/files/{}", percent_encoded(path));
                remote(socket, method, &at, put).await
            }
            (Backend::Unavailable(why), _) => Err(ApiError::new(ErrorCode::RuntimeUnavailable, unavailable(why))),
        }
    }

    pub(super) async fn end(&self, id: &str) -> Result<(), ApiError> {
        match self {
            Backend::Here(engine) => engine.sessions().delete(id, None),
            Backend::Server(socket) => remote(socket, "DELETE", &format!("/v1/sessions/{id}"), None).await.map(|_| ()),
            Backend::Unavailable(_) => Ok(()),
        }
    }
}

/// Every byte but an unreserved one as `%XX` (a `/` too: nothing on the way resolves a `..`).
pub(super) fn percent_encoded(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(super) fn json_of<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

pub(super) fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| garbled(&e))
}

pub(super) fn garbled(e: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Internal, format!("the server's answer did not read: {e}"))
}

/// One run through the engine in this process: the same checks as a request to the server.
pub(super) async fn here(
    engine: &Arc<Engine>,
    body: RunBody,
    host: Option<&host::HostTools>,
) -> Result<Report, ApiError> {
    let mut request = api::check(body, engine.catalog())?;
    request.host = host.map(|h| h.host_calls(request.tools.clone()));
    engine.available(&request)?;
    let permit = engine.admit().await?;
    Ok(engine.execute(permit, request, None).await?.report)
}

/// One run through a server's unix socket.
pub(super) async fn remote_run(socket: &std::path::Path, body: &RunBody) -> Result<Report, String> {
    let bytes = remote(socket, "POST", "/v1/runs", Some(json_of(body))).await.map_err(said)?;
    // No files were asked back: the answer is the report.
    parse::<Report>(&bytes).map_err(said)
}

/// One request to a server's unix socket (hyper's client): the answer's body when it is a
/// success, else the server's refusal (or why it could not be asked).
pub(super) async fn remote(
    socket: &std::path::Path,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
) -> Result<Vec<u8>, ApiError> {
    use http_body_util::{BodyExt, Full};
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
    if status.is_success() {
        return Ok(bytes.to_vec());
    }
    match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(refused) => Err(refused.error),
        Err(_) => Err(ApiError::new(ErrorCode::Internal, format!("the server refused the request ({status})"))),
    }
}
