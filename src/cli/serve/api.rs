//! API v1's request and error types: a run request as sent (JSON, `deny_unknown_fields`) and as
//! checked ([`RunRequest`]: typed, bounded, its limits only ever tighter than its policy's);
//! errors as `{"error": {"code", "message", "field"}}` with the right HTTP status.

use super::config::{Config, Kind};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use stockade::Policy;
use stockade::layers::filesystem::exchange::{self, Pick, PutFile};

/// `POST /v1/runs`, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunBody {
    pub runtime: String,
    #[serde(default)]
    pub code: Option<String>,
    /// A WASI command module, base64 (runtime `wasm`).
    #[serde(default)]
    pub module: Option<String>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub stdin_base64: Option<String>,
    #[serde(default)]
    pub files: Vec<FileBody>,
    #[serde(default)]
    pub policy: Option<String>,
    #[serde(default)]
    pub limits: LimitsBody,
    #[serde(default)]
    pub return_files: Vec<String>,
}

/// An input file: a path relative to the run's work directory, and its bytes in base64.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileBody {
    pub path: String,
    pub content: String,
}

/// Limits a request may set, each only tighter than its policy's.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitsBody {
    pub wall_timeout_ms: Option<u64>,
    pub memory_max_bytes: Option<u64>,
    pub pids_max: Option<u64>,
    pub stdout_max_bytes: Option<u64>,
    pub stderr_max_bytes: Option<u64>,
    pub wasm_memory_max_bytes: Option<u64>,
    pub fuel: Option<u64>,
}

/// A refusal: status, a stable code, a message and the request field it is about.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), field: None, retry_after: None }
    }

    /// A 400 about one field of the request.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError { field: Some(field.into()), ..ApiError::new(StatusCode::BAD_REQUEST, "bad-request", message) }
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    pub fn body(&self) -> serde_json::Value {
        let mut e = serde_json::json!({ "code": self.code, "message": self.message });
        if let Some(f) = &self.field {
            e["field"] = f.clone().into();
        }
        serde_json::json!({ "error": e })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

/// What a request runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A configured runtime, by name.
    Runtime(String),
    /// The request's own Wasm module.
    Wasm(Vec<u8>),
}

/// A checked run request.
#[derive(Debug)]
pub struct RunRequest {
    pub target: Target,
    /// The name metrics and logs use (`wasm` for a module).
    pub runtime_name: String,
    pub code: String,
    pub argv: Vec<String>,
    pub stdin: Vec<u8>,
    pub files: Vec<PutFile>,
    pub policy_name: String,
    /// The named policy with the request's limits applied.
    pub policy: Policy,
    /// The limits a warm jail takes at its start (the rest need a jail of their own).
    pub wall_timeout: Option<Duration>,
    pub stdout_max_bytes: Option<u64>,
    pub stderr_max_bytes: Option<u64>,
    /// A limit only a jail built for this request can hold (memory, pids, Wasm memory, fuel).
    pub needs_own_jail: bool,
    pub return_files: Option<Pick>,
}

fn b64(field: &str, text: &str) -> Result<Vec<u8>, ApiError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| ApiError::field(field, format!("not standard base64: {e}")))
}

/// Checks a request against the configuration: every field typed and bounded, limits only
/// tighter. The errors name the field.
pub fn check(body: RunBody, cfg: &Config) -> Result<RunRequest, ApiError> {
    let r = &cfg.requests;
    let (target, framed, runtime_policy) = if body.runtime == "wasm" {
        if !cfg.wasm_modules {
            return Err(ApiError::field("runtime", "this server does not run modules sent with requests"));
        }
        let Some(m) = &body.module else {
            return Err(ApiError::field("module", "runtime \"wasm\" needs a module (base64)"));
        };
        if body.code.is_some() {
            return Err(ApiError::field("code", "runtime \"wasm\" runs \"module\", not code"));
        }
        (Target::Wasm(b64("module", m)?), true, "default".to_string())
    } else {
        let Some(rt) = cfg.runtimes.get(&body.runtime) else {
            let mut known: Vec<&str> = cfg.runtimes.keys().map(String::as_str).collect();
            if cfg.wasm_modules {
                known.push("wasm");
            }
            return Err(ApiError::field(
                "runtime",
                format!("unknown runtime {:?} (this server runs: {})", body.runtime, known.join(", ")),
            ));
        };
        if body.module.is_some() {
            return Err(ApiError::field("module", "a module goes with runtime \"wasm\""));
        }
        let framed = !matches!(rt.kind, Kind::Program { framed: false, .. });
        (Target::Runtime(rt.name.clone()), framed, rt.policy.clone())
    };
    let code = match (&target, body.code) {
        (Target::Wasm(_), _) => String::new(),
        (_, None) => return Err(ApiError::field("code", "missing: the code to run")),
        (_, Some(c)) if c.len() as u64 > r.code_max_bytes => {
            return Err(ApiError::field("code", format!("{} bytes, more than {} (requests.code-max-bytes)", c.len(), r.code_max_bytes)));
        }
        (_, Some(c)) => c,
    };
    if body.argv.len() > r.argv_max_count as usize {
        return Err(ApiError::field("argv", format!("more than {} arguments", r.argv_max_count)));
    }
    let argv_bytes: usize = body.argv.iter().map(String::len).sum();
    if argv_bytes as u64 > r.argv_max_bytes {
        return Err(ApiError::field("argv", format!("more than {} bytes of arguments", r.argv_max_bytes)));
    }
    let stdin = match (body.stdin, body.stdin_base64) {
        (Some(_), Some(_)) => return Err(ApiError::field("stdin-base64", "give stdin or stdin-base64, not both")),
        (Some(s), None) => s.into_bytes(),
        (None, Some(b)) => b64("stdin-base64", &b)?,
        (None, None) => Vec::new(),
    };
    if stdin.len() as u64 > r.stdin_max_bytes {
        return Err(ApiError::field("stdin", format!("more than {} bytes (requests.stdin-max-bytes)", r.stdin_max_bytes)));
    }
    if !framed && (!body.argv.is_empty() || !stdin.is_empty()) {
        let field = if body.argv.is_empty() { "stdin" } else { "argv" };
        return Err(ApiError::field(field, format!("runtime {:?} reads its code on stdin: it takes no argv or stdin", body.runtime)));
    }
    if body.files.len() > r.files_max_count as usize {
        return Err(ApiError::field("files", format!("more than {} files (requests.files-max-count)", r.files_max_count)));
    }
    let mut files = Vec::with_capacity(body.files.len());
    let mut total = 0u64;
    for (i, f) in body.files.iter().enumerate() {
        let path = exchange::check_relative(&f.path).map_err(|why| ApiError::field(format!("files[{i}].path"), why))?;
        if files.iter().any(|p: &PutFile| p.path == path || p.path.starts_with(&path) || path.starts_with(&p.path)) {
            return Err(ApiError::field(format!("files[{i}].path"), "given twice, or a file's path is another's directory"));
        }
        let bytes = b64(&format!("files[{i}].content"), &f.content)?;
        total += bytes.len() as u64;
        if total > r.files_max_bytes {
            return Err(ApiError::field("files", format!("more than {} bytes of files (requests.files-max-bytes)", r.files_max_bytes)));
        }
        files.push(PutFile { path, bytes });
    }
    let policy_name = body.policy.unwrap_or(runtime_policy);
    let Some(named) = cfg.policies.get(&policy_name) else {
        let known: Vec<&str> = cfg.policies.keys().map(String::as_str).collect();
        return Err(ApiError {
            field: Some("policy".into()),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                "policy-not-found",
                format!("no policy {policy_name:?} (this server has: {})", known.join(", ")),
            )
        });
    };
    if body.return_files.len() > r.return_patterns_max as usize {
        return Err(ApiError::field("return-files", format!("more than {} patterns", r.return_patterns_max)));
    }
    let return_files = if body.return_files.is_empty() {
        None
    } else {
        let patterns = exchange::patterns(&body.return_files)
            .map_err(|(i, why)| ApiError::field(format!("return-files[{i}]"), why))?;
        Some(Pick {
            patterns,
            max_files: r.return_files_max_count as usize,
            max_bytes: r.return_files_max_bytes,
        })
    };
    let mut policy = named.policy.clone();
    let l = &body.limits;
    let tight = Tighten { policy: &policy_name };
    let wall_ms = u64::try_from(policy.wall_timeout.as_millis()).unwrap_or(u64::MAX);
    let wall = tight.check("limits.wall-timeout-ms", l.wall_timeout_ms, Some(wall_ms))?;
    let stdout = tight.check("limits.stdout-max-bytes", l.stdout_max_bytes, policy.stdout_max_bytes)?;
    let stderr = tight.check("limits.stderr-max-bytes", l.stderr_max_bytes, policy.stderr_max_bytes)?;
    let memory = tight.check("limits.memory-max-bytes", l.memory_max_bytes, policy.cgroups.memory_max_bytes)?;
    let pids = tight.check("limits.pids-max", l.pids_max, policy.cgroups.pids_max)?;
    let wasm_memory =
        tight.check("limits.wasm-memory-max-bytes", l.wasm_memory_max_bytes, Some(policy.wasm.memory_max_bytes))?;
    let fuel = tight.check("limits.fuel", l.fuel, policy.wasm.fuel)?;
    let needs_own_jail = l.memory_max_bytes.is_some()
        || l.pids_max.is_some()
        || l.wasm_memory_max_bytes.is_some()
        || l.fuel.is_some()
        || matches!(target, Target::Wasm(_));
    // A jail built for this request holds them all; a warm one takes the wall and the caps at
    // its start.
    if let Some(ms) = wall {
        policy.wall_timeout = Duration::from_millis(ms);
    }
    policy.stdout_max_bytes = stdout;
    policy.stderr_max_bytes = stderr;
    policy.cgroups.memory_max_bytes = memory;
    policy.cgroups.pids_max = pids;
    if let Some(m) = wasm_memory {
        policy.wasm.memory_max_bytes = m;
    }
    policy.wasm.fuel = fuel;
    if let Target::Wasm(m) = &target
        && m.len() as u64 > policy.wasm.module_max_bytes
    {
        return Err(ApiError::field(
            "module",
            format!("{} bytes, more than policy {policy_name:?}'s wasm.module-max-bytes ({})", m.len(), policy.wasm.module_max_bytes),
        ));
    }
    Ok(RunRequest {
        runtime_name: match &target {
            Target::Wasm(_) => "wasm".into(),
            Target::Runtime(n) => n.clone(),
        },
        target,
        code,
        argv: body.argv,
        stdin,
        files,
        policy_name,
        policy,
        wall_timeout: l.wall_timeout_ms.map(Duration::from_millis),
        stdout_max_bytes: l.stdout_max_bytes,
        stderr_max_bytes: l.stderr_max_bytes,
        needs_own_jail,
        return_files,
    })
}

/// Limits only tighten their policy.
struct Tighten<'a> {
    policy: &'a str,
}

impl Tighten<'_> {
    fn check(&self, field: &str, asked: Option<u64>, policy: Option<u64>) -> Result<Option<u64>, ApiError> {
        match (asked, policy) {
            (None, p) => Ok(p),
            (Some(0), _) => Err(ApiError::field(field, "must be more than 0")),
            (Some(a), Some(p)) if a > p => Err(ApiError::field(
                field,
                format!("{a} is looser than policy {:?}'s {p}: limits may only tighten the policy", self.policy),
            )),
            (Some(a), _) => Ok(Some(a)),
        }
    }
}
