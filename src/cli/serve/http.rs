//! API v1 over HTTP/1.1 (axum on hyper): the routes, bearer-token checks, bounded body reading,
//! JSON and NDJSON answers. Every input is untrusted: the body is capped in size and time before
//! it is parsed, and parsed into typed values whose errors name the field.

use super::engine::{Engine, Ran};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use http_body_util::BodyExt;
use std::sync::Arc;
use stockade::api::{self, ApiError, status};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// What the routes share.
#[derive(Debug, Clone)]
pub struct App {
    pub engine: Arc<Engine>,
    /// Bearer tokens this listener requires (`None`: the unix socket, guarded by its mode).
    pub tokens: Option<Arc<[String]>>,
    /// Bytes of request bodies in memory at once, in KiB (`requests.in-flight-max-bytes`).
    pub body_budget: Arc<Semaphore>,
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/v1/runs", post(runs))
        .route("/v1/health", get(health))
        .route("/v1/info", get(info))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

/// A refusal as an HTTP response: its status, `Retry-After` when it has one, the JSON body.
pub fn respond(e: ApiError) -> Response {
    let code = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (code, axum::Json(e.body())).into_response();
    if let Some(s) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    if code == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

async fn not_found() -> Response {
    respond(ApiError::new(status::NOT_FOUND, "not-found", "no such endpoint (see docs/api.md)"))
}

async fn method_not_allowed() -> Response {
    respond(ApiError::new(status::METHOD_NOT_ALLOWED, "method-not-allowed", "this endpoint does not take that method"))
}

/// Bearer tokens, compared in constant time; `/v1/health` is open (probes).
async fn auth(State(app): State<App>, req: Request, next: Next) -> Response {
    let Some(tokens) = &app.tokens else { return next.run(req).await };
    if req.uri().path() == "/v1/health" {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(given) = given else {
        app.engine.metrics.refused("unauthorized");
        return respond(ApiError::new(status::UNAUTHORIZED, "unauthorized", "send Authorization: Bearer <token>"));
    };
    use subtle::ConstantTimeEq;
    let mut ok = subtle::Choice::from(0u8);
    for t in tokens.iter() {
        ok |= t.as_bytes().ct_eq(given.as_bytes());
    }
    if bool::from(ok) {
        next.run(req).await
    } else {
        app.engine.metrics.refused("forbidden");
        respond(ApiError::new(status::FORBIDDEN, "forbidden", "this token is not accepted"))
    }
}

async fn health(State(app): State<App>) -> Response {
    let e = &app.engine;
    let warm: serde_json::Map<String, serde_json::Value> =
        e.pools.iter().map(|(n, p)| (n.clone(), serde_json::json!({"ready": p.fill(), "target": p.target}))).collect();
    let body = serde_json::json!({
        "status": if e.draining() { "draining" } else { "ok" },
        "running": e.running(),
        "queued": e.queued(),
        "warm": warm,
    });
    let status = if e.draining() { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::OK };
    (status, axum::Json(body)).into_response()
}

async fn info(State(app): State<App>) -> Response {
    axum::Json(super::info::info(&app.engine)).into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    let mut r = app.engine.metrics.encode().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

/// `POST /v1/runs[?stream=ndjson]`.
async fn runs(State(app): State<App>, req: Request) -> Response {
    match accept_run(&app, req).await {
        Ok(r) => r,
        Err(e) => {
            if (400..500).contains(&e.status) {
                app.engine.metrics.refused(e.code);
            }
            respond(e)
        }
    }
}

async fn accept_run(app: &App, req: Request) -> Result<Response, ApiError> {
    let stream = stream_param(req.uri().query())?;
    check_content_type(req.headers())?;
    let (body, _budget) = read_body(app, req).await?;
    let parsed = api::decode(&body)?;
    drop(body);
    let request = api::check(parsed, &app.engine.catalog)?;
    let permit = app.engine.admit().await?;
    if stream {
        return streamed(app.engine.clone(), permit, request);
    }
    let ran = app.engine.execute(permit, request, None).await?;
    Ok(json_response(answer(&ran)))
}

/// `stream=ndjson`, or nothing; any other query parameter is an error.
fn stream_param(query: Option<&str>) -> Result<bool, ApiError> {
    let mut stream = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("stream", "ndjson")) => stream = true,
            Some(("stream", other)) => {
                return Err(ApiError::field("stream", format!("{other:?}: the only stream format is ndjson")));
            }
            _ => {
                let name = pair.split('=').next().unwrap_or(pair);
                return Err(ApiError::field(name, "unknown query parameter (this endpoint takes stream=ndjson)"));
            }
        }
    }
    Ok(stream)
}

fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    Err(ApiError::new(
        status::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        format!("send Content-Type: application/json (got {:?})", ct),
    ))
}

/// The body, at most `requests.body-max-bytes`, within `server.body-timeout-ms`, its bytes
/// counted against the server's in-flight budget (held by the returned permit).
async fn read_body(app: &App, req: Request) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), ApiError> {
    let cfg = &app.engine.config;
    let max = cfg.requests.body_max_bytes;
    let too_large = || {
        ApiError::new(
            status::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            format!("the body is over {max} bytes (requests.body-max-bytes)"),
        )
    };
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut budget: Option<OwnedSemaphorePermit> = None;
    let mut held_kib = 0u32;
    let mut out = Vec::with_capacity(usize::try_from(declared.unwrap_or(0).min(max)).unwrap_or(0));
    let mut body = req.into_body();
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| ApiError::new(status::BAD_REQUEST, "bad-request", format!("reading the body: {e}")))?;
            let Some(data) = frame.data_ref() else { continue };
            if (out.len() + data.len()) as u64 > max {
                return Err(too_large());
            }
            out.extend_from_slice(data);
            let want = u32::try_from(out.len().div_ceil(1024)).unwrap_or(u32::MAX);
            if want > held_kib {
                let more = app.body_budget.clone().try_acquire_many_owned(want - held_kib).map_err(|_| {
                    ApiError::new(
                        status::UNAVAILABLE,
                        "busy",
                        "too many request bodies in memory at once (requests.in-flight-max-bytes): try again shortly",
                    )
                    .retry_after(1)
                })?;
                held_kib = want;
                match &mut budget {
                    Some(b) => b.merge(more),
                    None => budget = Some(more),
                }
            }
        }
        Ok(())
    };
    match tokio::time::timeout(cfg.body_timeout, read).await {
        Ok(Ok(())) => Ok((out, budget)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError::new(
            status::REQUEST_TIMEOUT,
            "body-timeout",
            format!("the body did not arrive within {} ms", cfg.body_timeout.as_millis()),
        )),
    }
}

/// The report as JSON (written straight from the type, in its order), with the files given
/// back when the request asked for some.
fn answer(ran: &Ran) -> Vec<u8> {
    let mut out = serde_json::to_vec(&ran.report).unwrap_or_default();
    if let Some(t) = &ran.files
        && out.last() == Some(&b'}')
    {
        out.pop();
        let files: Vec<serde_json::Value> = t
            .files
            .iter()
            .map(|(path, bytes)| {
                serde_json::json!({
                    "path": path,
                    "bytes": bytes.len(),
                    "content": base64::engine::general_purpose::STANDARD.encode(bytes),
                })
            })
            .collect();
        let mut more = serde_json::json!({ "files": files, "files-capped": t.capped });
        if !t.skipped.is_empty() {
            more["files-skipped"] = t.skipped.clone().into();
        }
        let more = serde_json::to_vec(&more).unwrap_or_default();
        // `{...report` + `,` + `"files": ...}`.
        out.push(b',');
        out.extend_from_slice(more.get(1..).unwrap_or_default());
    }
    out
}

fn json_response(body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The run as NDJSON events, as its output happens: `{"stdout": TEXT}` (or `"stdout-base64"`
/// for bytes that are not UTF-8), the same for stderr, then `{"report": ...}` (or `{"error":
/// ...}`).
fn streamed(engine: Arc<Engine>, permit: OwnedSemaphorePermit, request: api::RunRequest) -> Result<Response, ApiError> {
    let pipe =
        || std::io::pipe().map_err(|e| ApiError::new(status::INTERNAL, "internal", format!("cannot make a pipe: {e}")));
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (tx, rx) = mpsc::channel::<Result<Vec<u8>, std::io::Error>>(16);
    let reader = |r: std::io::PipeReader, name: &'static str, tx: mpsc::Sender<Result<Vec<u8>, std::io::Error>>| {
        let fd: std::os::fd::OwnedFd = r.into();
        async move {
            let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else { return };
            let mut buf = vec![0u8; 64 * 1024];
            let mut carry: Vec<u8> = Vec::new();
            loop {
                use tokio::io::AsyncReadExt;
                let n = match rx.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                carry.extend_from_slice(&buf[..n]);
                for line in events(name, &mut carry, false) {
                    if tx.send(Ok(line)).await.is_err() {
                        return;
                    }
                }
            }
            for line in events(name, &mut carry, true) {
                let _ = tx.send(Ok(line)).await;
            }
        }
    };
    let out_task = tokio::spawn(reader(out_r, "stdout", tx.clone()));
    let err_task = tokio::spawn(reader(err_r, "stderr", tx.clone()));
    tokio::spawn(async move {
        let result = engine.execute(permit, request, Some((out_w.into(), err_w.into()))).await;
        let _ = out_task.await;
        let _ = err_task.await;
        let mut line = match result {
            Ok(ran) => [&b"{\"report\":"[..], &answer(&ran), b"}"].concat(),
            Err(e) => serde_json::to_vec(&e.body()).unwrap_or_default(),
        };
        line.push(b'\n');
        let _ = tx.send(Ok(line)).await;
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(r)
}

/// NDJSON lines for what `carry` holds: its UTF-8 text as `{"NAME": TEXT}`, bytes that are not
/// UTF-8 as `{"NAME-base64": ...}`; an incomplete character at the end waits for more, unless
/// `last`.
fn events(name: &str, carry: &mut Vec<u8>, last: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut line = |key: String, value: String| {
        let mut l = serde_json::to_vec(&serde_json::json!({ key: value })).unwrap_or_default();
        l.push(b'\n');
        out.push(l);
    };
    let bytes = std::mem::take(carry);
    let mut rest: &[u8] = &bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                line(name.to_string(), text.to_string());
                rest = &[];
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                if !good.is_empty() {
                    line(name.to_string(), String::from_utf8_lossy(good).into_owned());
                }
                match e.error_len() {
                    None if !last => {
                        *carry = bad.to_vec();
                        rest = &[];
                    }
                    n => {
                        let k = n.unwrap_or(bad.len());
                        line(format!("{name}-base64"), base64::engine::general_purpose::STANDARD.encode(&bad[..k]));
                        rest = &bad[k..];
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_text_from_bytes_and_wait_for_whole_characters() {
        let mut c = b"a\xc3".to_vec();
        let lines = events("stdout", &mut c, false);
        assert_eq!(lines, [b"{\"stdout\":\"a\"}\n".to_vec()]);
        assert_eq!(c, b"\xc3");
        c.extend_from_slice(b"\xa9\xffz");
        let lines: Vec<String> =
            events("stdout", &mut c, false).into_iter().map(|l| String::from_utf8(l).unwrap()).collect();
        assert_eq!(lines, ["{\"stdout\":\"é\"}\n", "{\"stdout-base64\":\"/w==\"}\n", "{\"stdout\":\"z\"}\n"]);
        let mut c = b"\xc3".to_vec();
        assert_eq!(events("stderr", &mut c, true), [b"{\"stderr-base64\":\"ww==\"}\n".to_vec()]);
    }

    #[test]
    fn only_stream_ndjson_is_a_query() {
        assert_eq!(stream_param(None).ok(), Some(false));
        assert_eq!(stream_param(Some("stream=ndjson")).ok(), Some(true));
        assert_eq!(stream_param(Some("stream=sse")).unwrap_err().field.as_deref(), Some("stream"));
        assert_eq!(stream_param(Some("x=1")).unwrap_err().field.as_deref(), Some("x"));
    }
}
