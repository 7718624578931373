//! API v1 over HTTP/1.1 (axum on hyper): the routes, bearer-token checks, health, info, metrics
//! and one-off runs. Every input is untrusted: the body is capped in size and time before it is
//! parsed, and parsed into typed values whose errors name the field ([`super::request`]).

use super::request::{
    App, Claimed, ask, check_content_type, claim, decode_fingerprinted, keyed_run, refuse, respond, stream_param,
};
use super::sessions;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use stockade::api::{self, ApiError, ErrorCode};
use stockade_engine::{Command, Readiness, Reply, Run, sessions::owner_of};

pub fn router(app: App) -> Router {
    let api = Router::new()
        .route("/v1/runs", post(runs))
        .route("/v1/batches", post(super::batches::batches))
        .route("/v1/runs/{run}/calls/{call}", post(sessions::answer_call))
        .route("/v1/sessions", post(sessions::create).get(sessions::list))
        .route("/v1/sessions/{id}", get(sessions::show).delete(sessions::delete))
        .route("/v1/sessions/{id}/fork", post(sessions::fork))
        .route("/v1/sessions/{id}/hibernate", post(sessions::hibernate))
        .route("/v1/sessions/{id}/runs", post(sessions::run))
        .route("/v1/sessions/{id}/runs/{run}/calls/{call}", post(sessions::answer_session_call))
        .route("/v1/sessions/{id}/files", get(sessions::files))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            put(sessions::put_file).get(sessions::get_file).delete(sessions::delete_file),
        )
        .route("/v1/health", get(ready))
        .route("/v1/health/ready", get(ready))
        .route("/v1/health/live", get(live))
        .route("/v1/info", get(info))
        .route("/metrics", get(metrics));
    let routes = if app.ui { super::ui::routes(api) } else { api };
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app.clone(), auth))
        .with_state(app)
}

async fn not_found() -> Response {
    respond(ApiError::new(ErrorCode::NotFound, "no such endpoint (see docs/api.md)"))
}

async fn method_not_allowed() -> Response {
    respond(ApiError::new(ErrorCode::MethodNotAllowed, "this endpoint does not take that method"))
}

/// Bearer tokens, compared in constant time; the health endpoints are open (probes), and so is the
/// playground's page (it asks for a token, and sends it with every call it makes).
async fn auth(State(app): State<App>, mut req: Request, next: Next) -> Response {
    let Some(tokens) = &app.tokens else {
        req.extensions_mut().insert(sessions::Caller(None));
        return next.run(req).await;
    };
    let path = req.uri().path();
    if matches!(path, "/v1/health" | "/v1/health/ready" | "/v1/health/live") || (app.ui && super::ui::is_page(path)) {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(given) = given else {
        return refuse(&app, ApiError::new(ErrorCode::Unauthorized, "send Authorization: Bearer <token>"));
    };
    use subtle::ConstantTimeEq;
    let mut ok = subtle::Choice::from(0u8);
    for t in tokens.iter() {
        ok |= t.as_bytes().ct_eq(given.as_bytes());
    }
    if bool::from(ok) {
        let caller = sessions::Caller(owner_of(Some(given)));
        req.extensions_mut().insert(caller);
        next.run(req).await
    } else {
        refuse(&app, ApiError::new(ErrorCode::Forbidden, "this token is not accepted"))
    }
}

/// Readiness (`/v1/health`, `/v1/health/ready`): 200 "ok" while every runtime can run (a jail
/// of each was built, and its last ones did not fail); else 503, "starting" (a runtime's first
/// jail is not built yet) or "unavailable" (a runtime's last jails failed), naming each runtime
/// and why; 503 "draining" while draining. For balancers and readiness probes.
async fn ready(State(app): State<App>) -> Response {
    match ask(&app, None, Command::Health).await {
        Ok(Reply::Health(health)) => {
            let ok = health.status == Readiness::Ok;
            let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            (status, axum::Json(health)).into_response()
        }
        Ok(other) => respond(other.unexpected()),
        Err(e) => respond(e),
    }
}

/// Liveness (`/v1/health/live`): the server answers (also while draining, or while a runtime is
/// unavailable: restarting it would not help). For liveness probes.
async fn live(State(app): State<App>) -> Response {
    match ask(&app, None, Command::Live).await {
        Ok(Reply::Live(l)) => axum::Json(l).into_response(),
        Ok(other) => respond(other.unexpected()),
        Err(e) => respond(e),
    }
}

async fn info(State(app): State<App>) -> Response {
    match ask(&app, None, Command::Info).await {
        Ok(Reply::Info(i)) => axum::Json(i).into_response(),
        Ok(other) => respond(other.unexpected()),
        Err(e) => respond(e),
    }
}

async fn metrics(State(app): State<App>) -> Response {
    let text = match ask(&app, None, Command::Metrics).await {
        Ok(Reply::Metrics(text)) => text,
        Ok(other) => return respond(other.unexpected()),
        Err(e) => return respond(e),
    };
    let mut r = text.into_response();
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
        Err(e) => refuse(&app, e),
    }
}

async fn accept_run(app: &App, mut req: Request) -> Result<Response, ApiError> {
    let stream = stream_param(req.uri().query())?;
    check_content_type(req.headers())?;
    // The auth layer says who calls; without it, nobody could be told from anybody.
    let caller = req
        .extensions()
        .get::<sessions::Caller>()
        .map(|c| c.0)
        .ok_or_else(|| ApiError::new(ErrorCode::Internal, "the request's caller is unknown"))?;
    let key = keyed_run(req.headers(), stream)?;
    let up = super::duplex::asked(app, caller, &mut req, stream)?;
    // The body's room is held until the run is over: its decoded content is in the request.
    let (parsed, _budget, fingerprint) = decode_fingerprinted::<api::RunBody>(app, req).await?;
    let guard = match claim(app, caller, key, fingerprint).await? {
        Claimed::Run(guard) => guard,
        Claimed::Answered(r) => return Ok(r),
    };
    super::request::run(app, caller, Run::Fresh(parsed), stream, up, guard).await
}
