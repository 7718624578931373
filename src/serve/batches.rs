//! `POST /v1/batches[?stream=ndjson]`: many runs of one runtime, each a fresh instance sharing a
//! jail (the engine's `batch`). Answered whole (`{"batch-id", "results", "summary"}`), or as NDJSON
//! lines as the runs end (`{"index", "result"}` each, then `{"batch-id", "summary"}`; an
//! `{"error"}` line when the batch cannot go on). A client that hangs up ends its batch: its
//! jails take no further run.

use super::request::{App, ask, check_content_type, decode, held, refuse, stream_param};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use stockade::api::batch::BatchBody;
use stockade::api::{ApiError, ErrorCode};
use stockade_engine::{Command, Reply};
use tokio::sync::mpsc;

pub async fn batches(State(app): State<App>, req: Request) -> Response {
    match accept(&app, req).await {
        Ok(r) => r,
        Err(e) => refuse(&app, e),
    }
}

async fn accept(app: &App, req: Request) -> Result<Response, ApiError> {
    let stream = stream_param(req.uri().query())?;
    check_content_type(req.headers())?;
    let caller = req
        .extensions()
        .get::<super::sessions::Caller>()
        .map(|c| c.0)
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "the request's caller is unknown"))?;
    let (body, _budget) = decode::<BatchBody>(app, req).await?;
    if !stream {
        return match ask(app, caller, Command::Batch(body)).await? {
            Reply::Batch(h) => Ok(held(serde_json::to_vec(&h.value).unwrap_or_default(), h.room, None)),
            other => Err(other.unexpected()),
        };
    }
    let mut batch = app.engine.batch(body).await?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::convert::Infallible>>(16);
    tokio::spawn(async move {
        while let Some(event) = batch.next().await {
            let mut line = serde_json::to_vec(&event).unwrap_or_default();
            line.push(b'\n');
            // The client is gone: the batch is dropped, and its jails take no further run.
            if tx.send(Ok(Bytes::from(line))).await.is_err() {
                break;
            }
            batch.release();
        }
    });
    let mut r = Response::new(Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-ndjson"));
    Ok(r)
}
