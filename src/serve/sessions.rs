//! `/v1/sessions`: sessions over HTTP, each route one command through the engine's door
//! ([`stockade_engine::door`]). A session is its maker's: the auth layer says who calls
//! ([`Caller`]), and every command is asked with it.

use super::request::{
    App, Claimed, ask, check_content_type, claim, decode, decode_fingerprinted, keyed_run, read_body_within, refuse,
    stream_param,
};
use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use stockade::api::session::{SessionBody, SessionRunBody};
use stockade::api::{ApiError, ErrorCode};
use stockade_engine::sessions::Owner;
use stockade_engine::{Command, Held, Reply, Run};

/// Who calls: the owner a session made now gets, and the one a session must have to be reached.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub Owner);

/// Answers a reply as JSON with `status` ([`Reply::Done`]: 204), a refusal as itself (a 4xx
/// counted by its code).
fn answer(app: &App, status: StatusCode, r: Result<Reply, ApiError>) -> Response {
    match r {
        Ok(Reply::Done) => StatusCode::NO_CONTENT.into_response(),
        Ok(Reply::Session(s)) => (status, axum::Json(s)).into_response(),
        Ok(Reply::Sessions(s)) => (status, axum::Json(serde_json::json!({ "sessions": s }))).into_response(),
        Ok(Reply::Files(f)) => (status, axum::Json(f)).into_response(),
        Ok(Reply::Put(f)) => (status, axum::Json(f)).into_response(),
        Ok(other) => refuse(app, other.unexpected()),
        Err(e) => refuse(app, e),
    }
}

/// A path's parts, or the refusal of a path that does not decode (bad percent-encoding, not
/// UTF-8).
fn parts<T>(p: Result<Path<T>, PathRejection>) -> Result<T, ApiError> {
    p.map(|Path(v)| v).map_err(|e| ApiError::field("path", format!("the URL's path: {e}")))
}

/// `POST /v1/sessions`: 201, the session, and its URL in `Location` (a balancer may learn from
/// it where the session lives: docs/deploy.md).
pub async fn create(State(app): State<App>, Extension(caller): Extension<Caller>, req: Request) -> Response {
    let made = async {
        check_content_type(req.headers())?;
        let (body, _) = decode::<SessionBody>(&app, req).await?;
        ask(&app, caller.0, Command::OpenSession(body)).await
    }
    .await;
    created(&app, made)
}

/// `POST /v1/sessions/{id}/fork`: 201, the new session, at its `Location`.
pub async fn fork(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let forked = async { ask(&app, caller.0, Command::ForkSession(parts(id)?)).await }.await;
    created(&app, forked)
}

/// `POST /v1/sessions/{id}/hibernate`: 200, the session, hibernated.
pub async fn hibernate(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = async { ask(&app, caller.0, Command::HibernateSession(parts(id)?)).await }.await;
    answer(&app, StatusCode::OK, r)
}

/// A session made (201), at its `Location`.
fn created(app: &App, made: Result<Reply, ApiError>) -> Response {
    let location = match &made {
        Ok(Reply::Session(s)) => HeaderValue::from_str(&format!("/v1/sessions/{}", s.id)).ok(),
        _ => None,
    };
    let mut r = answer(app, StatusCode::CREATED, made);
    if let Some(l) = location {
        r.headers_mut().insert(header::LOCATION, l);
    }
    r
}

/// `GET /v1/sessions`: the caller's.
pub async fn list(State(app): State<App>, Extension(caller): Extension<Caller>) -> Response {
    answer(&app, StatusCode::OK, ask(&app, caller.0, Command::ListSessions).await)
}

pub async fn show(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = async { ask(&app, caller.0, Command::Session(parts(id)?)).await }.await;
    answer(&app, StatusCode::OK, r)
}

/// `DELETE /v1/sessions/{id}`: 204.
pub async fn delete(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = async { ask(&app, caller.0, Command::CloseSession(parts(id)?)).await }.await;
    answer(&app, StatusCode::NO_CONTENT, r)
}

/// `POST /v1/sessions/{id}/runs[?stream=ndjson]`: a run in the session's workspace.
pub async fn run(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
    req: Request,
) -> Response {
    match accept_run(&app, caller, id, req).await {
        Ok(r) => r,
        Err(e) => refuse(&app, e),
    }
}

async fn accept_run(
    app: &App,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    mut req: Request,
) -> Result<Response, ApiError> {
    let id = parts(id)?;
    let stream = stream_param(req.uri().query())?;
    let up = super::duplex::asked(app, caller.0, &mut req, stream)?;
    check_content_type(req.headers())?;
    let key = keyed_run(req.headers(), stream)?;
    // Looked up before the body is read: a stranger's request ends here.
    ask(app, caller.0, Command::Session(id.clone())).await?;
    let (body, _budget, fingerprint) = decode_fingerprinted::<SessionRunBody>(app, req).await?;
    // A run asked again with its key is answered as it was: the session is not taken again.
    let guard = match claim(app, caller.0, key, fingerprint).await? {
        Claimed::Run(guard) => guard,
        Claimed::Answered(r) => return Ok(r),
    };
    super::request::run(app, caller.0, Run::InSession { session: id, body }, stream, up, guard).await
}

/// `POST /v1/runs/{run}/calls/{call}`: a host call's answer, `{"ok": VALUE}` or `{"error":
/// "why"}`; 204.
pub async fn answer_call(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String)>, PathRejection>,
    req: Request,
) -> Response {
    let r = async {
        let (run, call) = parts(p)?;
        answered(&app, caller, None, run, call, req).await
    }
    .await;
    answer(&app, StatusCode::NO_CONTENT, r)
}

/// `POST /v1/sessions/{id}/runs/{run}/calls/{call}`: the same for a run of a session (the
/// session must be the caller's).
pub async fn answer_session_call(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String, String)>, PathRejection>,
    req: Request,
) -> Response {
    let r = async {
        let (id, run, call) = parts(p)?;
        answered(&app, caller, Some(id), run, call, req).await
    }
    .await;
    answer(&app, StatusCode::NO_CONTENT, r)
}

/// A call's answer, as sent: its value kept as the JSON text it came as (checked, not parsed
/// into a tree), or why it failed.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallAnswer<'a> {
    #[serde(default, borrow, deserialize_with = "super::request::sent_value")]
    ok: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<String>,
}

/// The bytes an answer's frame adds to its value (`{"ok": }`, `{"error": ""}`, escapes aside).
const ANSWER_FRAME_BYTES: u64 = 64;
/// The most bytes of a tool's error that are read (the program gets its first KiB).
const ERROR_MAX_BYTES: u64 = 64 << 10;

async fn answered(
    app: &App,
    caller: Caller,
    session: Option<String>,
    run: String,
    call: String,
    req: Request,
) -> Result<Reply, ApiError> {
    check_content_type(req.headers())?;
    // An answer to no call waiting is refused before its body is read; one to a call is read
    // within its tool's bound, and holds its room in the in-flight budget until it is handed on.
    let waiting = Command::CallWaiting { session: session.clone(), run: run.clone(), call: call.clone() };
    let most = match ask(app, caller.0, waiting).await? {
        Reply::Waiting(most) => u64::from(most),
        other => return Err(other.unexpected()),
    };
    let limit = most.max(ERROR_MAX_BYTES) + ANSWER_FRAME_BYTES;
    let refusal = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the answer is over {most} bytes, its tool's max-response-bytes"),
        )
    };
    let (body, _budget) = read_body_within(app, req, Some((limit, &refusal))).await?;
    let a: CallAnswer<'_> = serde_json::from_slice(&body).map_err(|e| ApiError::field("body", e.to_string()))?;
    let answer = match (a.ok, a.error) {
        (Some(v), None) => Ok(v.get().to_string()),
        (None, Some(why)) => Err(why),
        _ => return Err(ApiError::field("body", "exactly one of \"ok\" (the value) or \"error\" (why)")),
    };
    ask(app, caller.0, Command::Answer { session, run, call, answer }).await
}

/// `GET /v1/sessions/{id}/files`: the workspace's files, with sizes and modification times.
pub async fn files(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = async { ask(&app, caller.0, Command::Files(parts(id)?)).await }.await;
    answer(&app, StatusCode::OK, r)
}

/// `PUT /v1/sessions/{id}/files/{path}`: the body is the file's bytes (any content type).
pub async fn put_file(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String)>, PathRejection>,
    req: Request,
) -> Response {
    let r = async {
        let (session, path) = parts(p)?;
        ask(&app, caller.0, Command::Session(session.clone())).await?;
        // A body larger than any workspace is refused before it is read (its length declared),
        // or as soon as it goes past that (sent in chunks).
        let most = app.engine.workspace_max_bytes();
        let refusal = || {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the file is over {most} bytes, a workspace's most (sessions.workspace-max-bytes)"),
            )
        };
        let (bytes, _budget) = read_body_within(&app, req, Some((most, &refusal))).await?;
        ask(&app, caller.0, Command::PutFile { session, path, bytes }).await
    }
    .await;
    answer(&app, StatusCode::OK, r)
}

/// `GET /v1/sessions/{id}/files/{path}`: the file's bytes.
pub async fn get_file(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let file = async {
        let (session, path) = parts(p)?;
        ask(&app, caller.0, Command::GetFile { session, path }).await
    }
    .await;
    // Held for its client within its room, as a run's answer is, until it is read.
    match file {
        Ok(Reply::File(Held { value, room })) => {
            let mut r = Response::new(Body::from_stream(crate::serve::answer::Held::new(value, room)));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            r
        }
        Ok(other) => refuse(&app, other.unexpected()),
        Err(e) => refuse(&app, e),
    }
}

/// `DELETE /v1/sessions/{id}/files/{path}`: 204.
pub async fn delete_file(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    let r = async {
        let (session, path) = parts(p)?;
        ask(&app, caller.0, Command::DeleteFile { session, path }).await
    }
    .await;
    answer(&app, StatusCode::NO_CONTENT, r)
}
