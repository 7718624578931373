//! What every route does with a request, below the routes ([`super::http`], [`super::sessions`]):
//! what they share ([`App`]), a body read within its bounds and decoded, a run claimed for its
//! `Idempotency-Key` and taken through the engine's door, its answer held within its room or
//! streamed as NDJSON, a refusal as a response. Imports `answer.rs` and `idempotency.rs` of this directory,
//! never the routes.

use super::answer::{self, Piece, Which};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use stockade::api::{self, ApiError, ErrorCode, LastEvent};
use stockade_engine::budget::Reserved;
use stockade_engine::calls::Events;
use stockade_engine::config::Bounds;
use stockade_engine::sessions::Owner;
use stockade_engine::{Admitted, Command, Engine, Host, Output, Reply, Run};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// How a streamed run whose client asked for an upgrade is answered, given its events and the
/// sender of its stream's lines (`duplex.rs`, which the routes hand down).
pub(super) type Upgrade = Box<dyn FnOnce(answer::Ndjson, mpsc::UnboundedSender<Piece>) -> Response + Send>;

/// What the routes share.
#[derive(Debug, Clone)]
pub struct App {
    pub engine: Arc<Engine>,
    /// Bearer tokens this listener requires (`None`: the unix socket, guarded by its mode).
    pub tokens: Option<Arc<[String]>>,
    /// How request bodies are read, and the bytes of them in memory at once.
    pub bodies: Bodies,
    /// Runs' answers kept for their `Idempotency-Key`, the same for every listener.
    pub keys: Arc<super::idempotency::Keys>,
    /// Whether the playground's page is served at `/` ([`super::ui`]).
    pub ui: bool,
}

/// The bounds of a request body ([`Bounds`]): its size, its time, its rate, and the server-wide
/// budget of bodies in memory (in KiB), of which bodies over [`SMALL_BODY`] leave a quarter.
#[derive(Debug, Clone)]
pub struct Bodies {
    budget: Arc<Semaphore>,
    reserve_kib: usize,
    max_bytes: u64,
    timeout: Duration,
    min_rate: u64,
}

impl Bodies {
    /// Room for `bytes` in the budget of bodies in memory, when there is that much now besides
    /// the quarter kept for small bodies; held until dropped.
    pub(super) fn hold(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes.div_ceil(1024)).ok()?;
        if self.budget.available_permits() < kib as usize + self.reserve_kib {
            return None;
        }
        self.budget.clone().try_acquire_many_owned(kib).ok()
    }

    pub fn new(b: &Bounds) -> Bodies {
        let kib = usize::try_from(b.bodies_in_flight_max_bytes / 1024).unwrap_or(usize::MAX).max(1);
        Bodies {
            budget: Arc::new(Semaphore::new(kib.min(Semaphore::MAX_PERMITS))),
            reserve_kib: kib / 4,
            max_bytes: b.body_max_bytes,
            timeout: b.body_timeout,
            min_rate: b.body_min_rate,
        }
    }
}

/// A refusal as an HTTP response: its status, `Retry-After` when it has one, the JSON body.
/// A host call's `"ok"` value as the JSON text it came as, `null` too (a tool that returned
/// nothing): a field that is there is `Some`, whatever its value (`Option`'s own reading makes
/// `null` `None`, as if no value had been sent). For `#[serde(default, borrow, deserialize_with)]`.
pub(super) fn sent_value<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'de serde_json::value::RawValue>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

pub fn respond(e: ApiError) -> Response {
    let code = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
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

/// A refusal as a response, a 4xx counted by its code.
pub(super) fn refuse(app: &App, e: ApiError) -> Response {
    app.engine.refused(&e);
    respond(e)
}

/// Asks the engine's door, for `caller`.
pub(super) async fn ask(app: &App, caller: Owner, command: Command) -> Result<Reply, ApiError> {
    app.engine.call(caller, command).await
}

/// The key a run's request carries (a streamed run's answer is not kept: refused with one).
pub(super) fn keyed_run(headers: &HeaderMap, stream: bool) -> Result<Option<String>, ApiError> {
    let key = super::idempotency::key_of(headers)?;
    if key.is_some() && stream {
        return Err(ApiError::field(
            "Idempotency-Key",
            "a streamed run's answer is not kept for its key: send it without one, or without ?stream",
        ));
    }
    Ok(key)
}

/// What a run's request with a key is to do.
pub(super) enum Claimed {
    /// Run (keeping its answer for its key, when it has one).
    Run(Option<super::idempotency::Guard>),
    /// Its key's first answer, given again.
    Answered(Response),
}

/// Claims `key` for `caller`'s request of `fingerprint`: the first runs; a second gets the
/// first's answer (waiting for it while it runs).
pub(super) async fn claim(
    app: &App,
    caller: Owner,
    key: Option<String>,
    fingerprint: [u8; 32],
) -> Result<Claimed, ApiError> {
    use super::idempotency::{Claim, not_kept};
    let Some(key) = key else { return Ok(Claimed::Run(None)) };
    let kept = match app.keys.claim(caller, key, fingerprint)? {
        Claim::First(guard) => return Ok(Claimed::Run(Some(guard))),
        Claim::Replay(kept) => kept.ok_or_else(|| not_kept("had an answer too large to keep: it ran once"))?,
        Claim::Wait(mut rx) => {
            let _ = rx.changed().await;
            let kept = rx.borrow().clone();
            kept.ok_or_else(|| not_kept("ended without an answer: send it again"))?
        }
    };
    let mut r = Response::new(Body::from(kept.body.clone()));
    *r.status_mut() = kept.status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(super::idempotency::REPLAYED, HeaderValue::from_static("true"));
    Ok(Claimed::Answered(r))
}

/// A run through the engine's door: admitted (its session taken, a slot, its answer's room)
/// before anything is sent, then streamed as NDJSON (`stream`), or run and its answer held whole
/// within its room (kept for its key first, when it has one: `guard`).
pub(super) async fn run(
    app: &App,
    caller: Owner,
    run: Run,
    stream: bool,
    up: Option<Upgrade>,
    guard: Option<super::idempotency::Guard>,
) -> Result<Response, ApiError> {
    // A streamed run's host calls are its client's: events of its stream.
    let host = if stream { Host::Client } else { Host::Nobody };
    let (admitted, room) = app.engine.admit(caller, run, host).await?;
    if stream {
        return streamed(admitted, room, up);
    }
    let ran = admitted.run(Output::Report).await?;
    Ok(held(ran.to_json(), room, guard))
}

/// An answer's JSON, held within its room until it is sent; kept for its key first, when it
/// has one (`guard`).
pub(super) fn held(json: Vec<u8>, room: Reserved, guard: Option<super::idempotency::Guard>) -> Response {
    if let Some(g) = guard {
        g.keep(StatusCode::OK, &json);
    }
    let mut r = Response::new(Body::from_stream(answer::Held::new(json, room)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A JSON body read within its bounds and decoded into `T` (a large one off the async workers:
/// they answer health probes meanwhile), with the body's room in the in-flight budget.
pub(super) async fn decode<T: serde::de::DeserializeOwned + Send + 'static>(
    app: &App,
    req: Request,
) -> Result<(T, Option<OwnedSemaphorePermit>), ApiError> {
    let (body, budget) = read_body(app, req).await?;
    Ok((decoded(app, body).await?, budget))
}

/// [`decode`], with the SHA-256 of the request's path and body (an idempotency key's request).
pub(super) async fn decode_fingerprinted<T: serde::de::DeserializeOwned + Send + 'static>(
    app: &App,
    req: Request,
) -> Result<(T, Option<OwnedSemaphorePermit>, [u8; 32]), ApiError> {
    let path = req.uri().path().to_string();
    let (body, budget) = read_body(app, req).await?;
    let fingerprint = super::idempotency::fingerprint(&path, &body);
    Ok((decoded(app, body).await?, budget, fingerprint))
}

/// `body` decoded into `T` (a large one off the async workers).
async fn decoded<T: serde::de::DeserializeOwned + Send + 'static>(app: &App, body: Vec<u8>) -> Result<T, ApiError> {
    let caps = app.engine.catalog().caps.clone();
    if body.len() > DECODE_INLINE_MAX {
        tokio::task::spawn_blocking(move || api::session::decode_as::<T>(&body, &caps))
            .await
            .map_err(|_| ApiError::new(ErrorCode::Internal, "the request's decoder ended abnormally"))?
    } else {
        api::session::decode_as::<T>(&body, &caps)
    }
}

/// `stream=ndjson`, or nothing; any other query parameter is an error.
pub(super) fn stream_param(query: Option<&str>) -> Result<bool, ApiError> {
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

pub(super) fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    Err(ApiError::new(ErrorCode::UnsupportedMediaType, format!("send Content-Type: application/json (got {:?})", ct)))
}

/// Bodies larger than this are decoded on the blocking pool.
const DECODE_INLINE_MAX: usize = 64 * 1024;

/// Bodies up to this size may use the last quarter of the in-flight budget, which larger ones
/// leave to them: clients sending large bodies slowly never starve small requests.
const SMALL_BODY: usize = 1 << 20;

/// The body, at most `requests.body-max-bytes`, within `server.body-timeout-ms` and at least
/// `server.body-min-bytes-per-second` every second after the first, its bytes counted against
/// the server's in-flight budget (held by the returned permit).
pub(super) async fn read_body(app: &App, req: Request) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), ApiError> {
    read_body_within(app, req, None).await
}

/// [`read_body`] with a tighter bound of the route's own, `(bytes, the refusal)`: a body that
/// would go past it is refused as soon as it does, whether its length was declared or not.
pub(super) async fn read_body_within(
    app: &App,
    req: Request,
    within: Option<(u64, &(dyn Fn() -> ApiError + Sync))>,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), ApiError> {
    let b = &app.bodies;
    let max = within.map_or(b.max_bytes, |(n, _)| n.min(b.max_bytes));
    let too_large = || match within {
        Some((n, refusal)) if n < b.max_bytes => refusal(),
        _ => ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the body is over {} bytes (requests.body-max-bytes)", b.max_bytes),
        ),
    };
    let declared =
        req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let busy = || {
        ApiError::new(
            ErrorCode::Busy,
            "too many request bodies in memory at once (requests.in-flight-max-bytes): try again shortly",
        )
        .retry_after(1)
    };
    let too_slow = |got: u64| {
        ApiError::new(
            ErrorCode::BodyTimeout,
            format!(
                "the body came at {got} bytes in a second, less than {} (server.body-min-bytes-per-second)",
                b.min_rate
            ),
        )
    };
    let mut budget: Option<OwnedSemaphorePermit> = None;
    let mut held_kib = 0u32;
    let mut out = Vec::with_capacity(usize::try_from(declared.unwrap_or(0).min(max)).unwrap_or(0));
    let mut body = req.into_body();
    let read = async {
        let mut check_at = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        let mut at_check = 0usize;
        loop {
            let frame = match tokio::time::timeout_at(check_at, body.frame()).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => {
                    // A second went by: the body must have come at the minimum rate (or be
                    // nearly all here).
                    let got = (out.len() - at_check) as u64;
                    let left = declared.map_or(u64::MAX, |d| d.saturating_sub(out.len() as u64));
                    if got < b.min_rate.min(left) {
                        return Err(too_slow(got));
                    }
                    at_check = out.len();
                    check_at += std::time::Duration::from_secs(1);
                    continue;
                }
            };
            let frame = frame.map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("reading the body: {e}")))?;
            let Some(data) = frame.data_ref() else { continue };
            if (out.len() + data.len()) as u64 > max {
                return Err(too_large());
            }
            out.extend_from_slice(data);
            let want = u32::try_from(out.len().div_ceil(1024)).unwrap_or(u32::MAX);
            if want > held_kib {
                let more = want - held_kib;
                if out.len() > SMALL_BODY && b.budget.available_permits() < more as usize + b.reserve_kib {
                    return Err(busy());
                }
                let more = b.budget.clone().try_acquire_many_owned(more).map_err(|_| busy())?;
                held_kib = want;
                match &mut budget {
                    Some(b) => b.merge(more),
                    None => budget = Some(more),
                }
            }
        }
        Ok(())
    };
    match tokio::time::timeout(b.timeout, read).await {
        Ok(Ok(())) => Ok((out, budget)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError::new(
            ErrorCode::BodyTimeout,
            format!("the body did not arrive within {} ms", b.timeout.as_millis()),
        )),
    }
}

/// The run as NDJSON events, as its output happens: `{"stdout": TEXT}` (or `"stdout-base64"`
/// for bytes that are not UTF-8), the same for stderr, then `{"report": ...}` (or `{"error":
/// ...}`). The run's output is read from its pipes as it comes, whatever the client does (the
/// supervisor caps it): a client that stops reading never holds the run, its slot or its jail.
/// A run streamed as NDJSON: the answer's body, or (`up`: the client asked for it) its upgraded
/// connection, which takes the answers to its calls too.
fn streamed(admitted: Admitted, room: Reserved, up: Option<Upgrade>) -> Result<Response, ApiError> {
    let pipe = || std::io::pipe().map_err(|e| ApiError::new(ErrorCode::Internal, format!("cannot make a pipe: {e}")));
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (tx, rx) = mpsc::unbounded_channel::<Piece>();
    let reader = |r: std::io::PipeReader, which: Which, tx: mpsc::UnboundedSender<Piece>| {
        let fd: std::os::fd::OwnedFd = r.into();
        async move {
            let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else { return };
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                use tokio::io::AsyncReadExt;
                match rx.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let _ = tx.send(Piece::Output(which, buf[..n].to_vec()));
                    }
                }
            }
        }
    };
    let out_task = tokio::spawn(reader(out_r, Which::Stdout, tx.clone()));
    let err_task = tokio::spawn(reader(err_r, Which::Stderr, tx.clone()));
    let lines = tx.clone();
    let refusals = tx.clone();
    let events: Events = Arc::new(move |line| lines.send(Piece::Line(line)).is_ok());
    tokio::spawn(async move {
        let result = admitted.run(Output::Stream { stdout: out_w.into(), stderr: err_w.into(), events }).await;
        let _ = out_task.await;
        let _ = err_task.await;
        let last = match result {
            Ok(ran) => LastEvent::Report(Box::new(ran)),
            Err(e) => LastEvent::Error(e),
        };
        let mut line = serde_json::to_vec(&last).unwrap_or_default();
        line.push(b'\n');
        let _ = tx.send(Piece::Last(line));
    });
    if let Some(up) = up {
        return Ok(up(answer::Ndjson::new(rx, room), refusals));
    }
    drop(refusals);
    let mut r = Response::new(Body::from_stream(answer::Ndjson::new(rx, room)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_stream_ndjson_is_a_query() {
        assert_eq!(stream_param(None).ok(), Some(false));
        assert_eq!(stream_param(Some("stream=ndjson")).ok(), Some(true));
        assert_eq!(stream_param(Some("stream=sse")).unwrap_err().field.as_deref(), Some("stream"));
        assert_eq!(stream_param(Some("x=1")).unwrap_err().field.as_deref(), Some("x"));
    }
}
