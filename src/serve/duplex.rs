//! A streamed run's host calls answered on its own connection, no request per answer: a run
//! asked with `Upgrade: stockade-calls` (and `?stream=ndjson`) is answered `101 Switching
//! Protocols` once admitted; the connection then carries the run's NDJSON events to the client,
//! exactly as a streamed answer's body would, and the client's answers to its calls, one JSON
//! line each:
//!
//! ```text
//! {"run": RUN, "call": ID, "ok": VALUE}     or     {"run": RUN, "call": ID, "error": "why"}
//! ```
//!
//! An answer the engine refuses (no such call waiting, another caller's run) comes back as the
//! event `{"answer-refused": {"run", "call", "error": {"code", "message"}}}` and the connection
//! goes on; a line that is not such an answer, or longer than any answer may be, is refused the
//! same way and ends the connection (the run goes on, as for a client that went away). A line
//! over 64 KiB holds room in the server's budget of bodies in memory while it is read.
//!
//! Imports `answer.rs` and `request.rs` of this directory.

use super::answer::{Ndjson, Piece};
use super::request::{App, Upgrade, ask};
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use stockade::api::{ApiError, ErrorCode};
use stockade_engine::Command;
use stockade_engine::sessions::Owner;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc::UnboundedSender;
use tokio_stream::StreamExt;

/// The protocol's name, in `Upgrade`.
pub const PROTOCOL: &str = "stockade-calls";
/// A line past this much held no room of the budget of bodies in memory.
const SMALL_LINE: u64 = 64 << 10;
/// The longest answer line: the largest `max-response-bytes` a tool may have (16 MiB), an
/// error's 64 KiB, and the line's own keys.
const LINE_MAX: u64 = (16 << 20) + (64 << 10) + 1024;

/// How a run's request asks to be answered: upgraded, its calls answered on its connection by
/// `caller` (`None`: a plain request); 400 naming `stream` when it asks for an upgrade without
/// `?stream=ndjson`, or `Upgrade` when it asks for another protocol.
pub(super) fn asked(
    app: &App,
    caller: Owner,
    req: &mut axum::extract::Request,
    stream: bool,
) -> Result<Option<Upgrade>, ApiError> {
    let Some(v) = req.headers().get(header::UPGRADE) else { return Ok(None) };
    if !v.to_str().is_ok_and(|v| v.trim().eq_ignore_ascii_case(PROTOCOL)) {
        return Err(ApiError::field("Upgrade", format!("the only protocol a run upgrades to is {PROTOCOL}")));
    }
    if !stream {
        return Err(ApiError::field(
            "stream",
            format!("an upgrade to {PROTOCOL} carries a streamed run: add ?stream=ndjson"),
        ));
    }
    let (app, up) = (app.clone(), hyper::upgrade::on(req));
    Ok(Some(Box::new(move |events, refusals| answer(&app, caller, up, events, refusals))))
}

/// The 101 answer of an admitted run whose events are `events` and whose refusals of answers go
/// on `refusals` (its stream's own channel); the connection is served once it is upgraded.
fn answer(app: &App, caller: Owner, up: OnUpgrade, events: Ndjson, refusals: UnboundedSender<Piece>) -> Response {
    tokio::spawn(serve(app.clone(), caller, up, events, refusals));
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    r.headers_mut().insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    r
}

async fn serve(app: App, caller: Owner, up: OnUpgrade, mut events: Ndjson, refusals: UnboundedSender<Piece>) {
    let Ok(io) = up.await else { return };
    let (r, mut w) = tokio::io::split(TokioIo::new(io));
    let (broke, mut broken) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn(async move { read_answers(&app, caller, r, &refusals, broke).await });
    // The connection ends with the run's last event, or when the client goes (the run goes on
    // then, unanswered, as for a streamed answer's client gone), or breaks the protocol (told
    // why first).
    loop {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(bytes)) if w.write_all(&bytes).await.is_ok() => {}
                _ => break,
            },
            why = &mut broken => {
                if let Ok(line) = why {
                    let _ = w.write_all(&line).await;
                }
                break;
            }
        }
    }
    let _ = w.shutdown().await;
    reader.abort();
}

/// Reads answer lines until the client closes its end, or sends a line that is not an answer
/// (its refusal then goes on `broke`, for the connection's last line).
async fn read_answers(
    app: &App,
    caller: Owner,
    r: impl AsyncRead + Unpin,
    refusals: &UnboundedSender<Piece>,
    broke: tokio::sync::oneshot::Sender<Vec<u8>>,
) {
    let mut r = BufReader::new(r);
    let mut line = Vec::new();
    let fail = |e: &ApiError| {
        let _ = broke.send(refusal("", "", e));
    };
    loop {
        line.clear();
        let Ok(n) = (&mut r).take(SMALL_LINE + 1).read_until(b'\n', &mut line).await else { return };
        if n == 0 {
            return;
        }
        let mut _room = None;
        if line.last() != Some(&b'\n') {
            // A long line: it holds room in the budget of bodies in memory while it is read.
            let Some(room) = app.bodies.hold(LINE_MAX) else { return fail(&busy()) };
            _room = Some(room);
            let left = LINE_MAX + 1 - line.len() as u64;
            if (&mut r).take(left).read_until(b'\n', &mut line).await.is_err() {
                return;
            }
            if line.last() != Some(&b'\n') {
                let e = ApiError::new(ErrorCode::PayloadTooLarge, format!("an answer line is over {LINE_MAX} bytes"));
                return fail(&e);
            }
        }
        let (run, call, answer) = match parse(&line[..line.len() - 1]) {
            Ok(p) => p,
            Err(e) => return fail(&e),
        };
        let command = Command::Answer { session: None, run: run.clone(), call: call.clone(), answer };
        if let Err(e) = ask(app, caller, command).await {
            let _ = refusals.send(Piece::Line(refusal(&run, &call, &e)));
        }
    }
}

fn busy() -> ApiError {
    ApiError::new(
        ErrorCode::Busy,
        "too many request bodies in memory at once (requests.in-flight-max-bytes): the connection ends",
    )
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerLine<'a> {
    run: String,
    call: String,
    #[serde(default, borrow, deserialize_with = "super::request::sent_value")]
    ok: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Option<String>,
}

/// An answer line: its run, its call and the answer (a value as the JSON text it came as, or
/// the tool's error); 400 naming `line` otherwise.
fn parse(line: &[u8]) -> Result<(String, String, Result<String, String>), ApiError> {
    let a: AnswerLine<'_> = serde_json::from_slice(line).map_err(|e| ApiError::field("line", e.to_string()))?;
    let answer = match (a.ok, a.error) {
        (Some(v), None) => Ok(v.get().to_string()),
        (None, Some(why)) => Err(why),
        _ => return Err(ApiError::field("line", "exactly one of \"ok\" (the value) or \"error\" (why)")),
    };
    Ok((a.run, a.call, answer))
}

/// The event saying that an answer was refused, and why.
fn refusal(run: &str, call: &str, e: &ApiError) -> Vec<u8> {
    let event = serde_json::json!({"answer-refused": {"run": run, "call": call, "error": e}});
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_line_is_one_answer_and_nothing_else() {
        let (run, call, a) = parse(br#"{"run": "r-1", "call": "c-2", "ok": {"a": [1, 2]}}"#).unwrap();
        assert_eq!((run.as_str(), call.as_str(), a), ("r-1", "c-2", Ok(r#"{"a": [1, 2]}"#.to_string())));
        // A tool that returned nothing answered `null`: a value like any other.
        let (_, _, a) = parse(br#"{"run": "r", "call": "c", "ok": null}"#).unwrap();
        assert_eq!(a, Ok("null".to_string()));
        let (_, _, a) = parse(br#"{"run": "r", "call": "c", "error": "down"}"#).unwrap();
        assert_eq!(a, Err("down".to_string()));
        for bad in
            [&br#"{"run": "r", "call": "c"}"#[..], br#"{"run": "r", "call": "c", "ok": 1, "error": "x"}"#, b"[1]"]
        {
            assert_eq!(parse(bad).unwrap_err().field.as_deref(), Some("line"));
        }
    }
}
