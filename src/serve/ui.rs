//! The playground (`server.ui`, `--ui`): one page for a person, served at `/` from the binary
//! (no CDN, nothing built at run time). It is a client of the API like any other: it reaches
//! `/v1/...` on the same origin with the bearer token it asks for, and the server trusts it no
//! more than any client. Its strict Content-Security-Policy lets it load only these three files
//! and talk only to its own origin: no inline script or style, no frame, no form, no other host.
//!
//! Imports (layers): none.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::io::Read;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Figures (`data:`) and downloads (`blob:`) are images and links the page makes itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                       connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The paths the page is made of: served without a token (they hold no secret), like the probes.
pub fn is_page(path: &str) -> bool {
    matches!(path, "/" | "/ui/app.js" | "/ui/app.css")
}

/// The page's routes, added to the API's when the playground is on.
pub fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .route("/", get(|| async { page(INDEX, "text/html; charset=utf-8") }))
        .route("/ui/app.js", get(|| async { page(SCRIPT, "text/javascript; charset=utf-8") }))
        .route("/ui/app.css", get(|| async { page(STYLE, "text/css; charset=utf-8") }))
}

fn page(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    r
}

/// A bearer token for this run only: 32 hex digits from the kernel's random source.
pub fn run_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Says where the page is: each TCP listener's address, with this run's token in the fragment
/// (which a browser never sends; the page keeps it for its tab and takes it out of the address).
pub fn announce(listeners: &[String], token: Option<&str>) {
    let fragment = token.map(|t| format!("#token={t}")).unwrap_or_default();
    let pages: Vec<String> =
        listeners.iter().filter_map(|l| l.strip_prefix("tcp:")).map(|a| format!("http://{a}/{fragment}")).collect();
    match pages.as_slice() {
        [] => eprintln!("stockade serve: the playground is on, at / of a TCP listener (none bound here)"),
        p => eprintln!("stockade serve: the playground: {}", p.join(" ")),
    }
}
