//! `/v1/sessions`: sessions over HTTP (the store is the engine's, [`stockade_engine::sessions`]).
//! A session is its maker's: the auth layer says who calls ([`Caller`]), and every handler asks
//! the store with it.

use super::request::{
    App, Claimed, admitted, check_content_type, claim, decode, decode_fingerprinted, held, host_calls, keyed_run,
    read_body_within, respond, stream_param, streamed, with_tools,
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

/// Who calls: the owner a session made now gets, and the one a session must have to be reached.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub Owner);

/// Answers `Ok` as JSON with `status`, a refusal as itself (a 4xx counted by its code).
fn answer<T: serde::Serialize>(app: &App, status: StatusCode, r: Result<T, ApiError>) -> Response {
    match r {
        Ok(v) => (status, axum::Json(v)).into_response(),
        Err(e) => refuse(app, e),
    }
}

fn refuse(app: &App, e: ApiError) -> Response {
    if (400..500).contains(&e.status()) {
        app.engine.metrics().refused(e.code.as_str());
    }
    respond(e)
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
        app.engine.open_session(caller.0, body)
    }
    .await;
    let location = made.as_ref().ok().and_then(|s| HeaderValue::from_str(&format!("/v1/sessions/{}", s.id)).ok());
    let mut r = answer(&app, StatusCode::CREATED, made);
    if let Some(l) = location {
        r.headers_mut().insert(header::LOCATION, l);
    }
    r
}

/// `GET /v1/sessions`: the caller's.
pub async fn list(State(app): State<App>, Extension(caller): Extension<Caller>) -> Response {
    let sessions = app.engine.sessions().list(caller.0);
    axum::Json(serde_json::json!({ "sessions": sessions })).into_response()
}

pub async fn show(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = parts(id).and_then(|id| app.engine.sessions().info(&id, caller.0));
    answer(&app, StatusCode::OK, r)
}

/// `DELETE /v1/sessions/{id}`: 204.
pub async fn delete(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    no_content(&app, parts(id).and_then(|id| app.engine.sessions().delete(&id, caller.0)))
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
    req: Request,
) -> Result<Response, ApiError> {
    let id = parts(id)?;
    let stream = stream_param(req.uri().query())?;
    check_content_type(req.headers())?;
    let key = keyed_run(req.headers(), stream)?;
    // Looked up before the body is read: a stranger's request ends here.
    app.engine.sessions().info(&id, caller.0)?;
    let (body, _budget, fingerprint) = decode_fingerprinted::<SessionRunBody>(app, req).await?;
    // A run asked again with its key is answered as it was: the session is not taken again.
    let guard = match claim(app, caller.0, key, fingerprint).await? {
        Claimed::Run(guard) => guard,
        Claimed::Answered(r) => return Ok(r),
    };
    // The session is this run's from here until the run is over (or refused).
    let mut turn = app.engine.sessions().begin(&id, caller.0)?;
    let (mut request, workspace) = turn.request(body, app.engine.catalog())?;
    let calls = with_tools(&request, stream)?.map(|_| turn.run.clone());
    // The room of the answer the request asked for (its own return-files).
    let (permit, reserved) = admitted(app, &request).await?;
    let engine = app.engine.clone();
    if stream {
        return streamed(
            move |s, events| async move {
                let _open = calls.map(|run| host_calls(&engine, &mut request, &run, caller.0, events));
                engine.run_turn(permit, turn, request, workspace, s).await
            },
            reserved,
        );
    }
    let ran = engine.run_turn(permit, turn, request, workspace, None).await?;
    Ok(held(ran, reserved, guard))
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
        answered(&app, caller, &run, &call, req).await
    }
    .await;
    no_content(&app, r)
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
        app.engine.sessions().info(&id, caller.0)?;
        answered(&app, caller, &run, &call, req).await
    }
    .await;
    no_content(&app, r)
}

/// 204, or the refusal.
fn no_content(app: &App, r: Result<(), ApiError>) -> Response {
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => refuse(app, e),
    }
}

/// A call's answer, as sent: its value kept as the JSON text it came as (checked, not parsed
/// into a tree), or why it failed.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallAnswer<'a> {
    #[serde(default, borrow)]
    ok: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<String>,
}

/// The bytes an answer's frame adds to its value (`{"ok": }`, `{"error": ""}`, escapes aside).
const ANSWER_FRAME_BYTES: u64 = 64;
/// The most bytes of a tool's error that are read (the program gets its first KiB).
const ERROR_MAX_BYTES: u64 = 64 << 10;

async fn answered(app: &App, caller: Caller, run: &str, call: &str, req: Request) -> Result<(), ApiError> {
    check_content_type(req.headers())?;
    // An answer to no call waiting is refused before its body is read; one to a call is read
    // within its tool's bound, and holds its room in the in-flight budget until it is handed on.
    let most = u64::from(app.engine.calls().waiting(run, call, caller.0)?);
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
    app.engine.calls().answer(run, call, caller.0, answer)
}

/// `GET /v1/sessions/{id}/files`: the workspace's files, with sizes and modification times.
pub async fn files(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let r = parts(id).and_then(|id| app.engine.sessions().files(&id, caller.0));
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
        let (id, path) = parts(p)?;
        app.engine.sessions().info(&id, caller.0)?;
        // A body larger than any workspace is refused before it is read (its length declared),
        // or as soon as it goes past that (sent in chunks).
        let most = app.engine.sessions().workspace_max_bytes();
        let refusal = || {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the file is over {most} bytes, a workspace's most (sessions.workspace-max-bytes)"),
            )
        };
        let (bytes, _budget) = read_body_within(&app, req, Some((most, &refusal))).await?;
        app.engine.sessions().put_file(&id, caller.0, &path, bytes)
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
    let file = parts(p).and_then(|(id, path)| app.engine.sessions().get_file(&id, caller.0, &path));
    // Held for its client within the answers' budget, as a run's answer is, until it is read.
    let held = file.and_then(|bytes| Ok((app.answers.reserve_bytes(bytes.len())?, bytes)));
    match held {
        Ok((reserved, bytes)) => {
            let mut r = Response::new(Body::from_stream(crate::serve::answer::Held::new(bytes, reserved)));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            r
        }
        Err(e) => refuse(&app, e),
    }
}

/// `DELETE /v1/sessions/{id}/files/{path}`: 204.
pub async fn delete_file(
    State(app): State<App>,
    Extension(caller): Extension<Caller>,
    p: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    no_content(&app, parts(p).and_then(|(id, path)| app.engine.sessions().delete_file(&id, caller.0, &path)))
}
