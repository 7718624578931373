//! What the API answers, as types: a run's result (its report, and the files given back), the
//! events of a streamed run, and refusals (a stable code that knows its HTTP status, a message,
//! the field). The HTTP front, the stream, `stockade mcp` and the OpenAPI schema use these.

use crate::Report;
use crate::layers::filesystem::exchange::Taken;
use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A refusal's stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// A bad request: the field is named.
    BadRequest,
    /// TCP without a bearer token.
    Unauthorized,
    /// A token that is not accepted.
    Forbidden,
    /// No such policy.
    PolicyNotFound,
    /// No such endpoint.
    NotFound,
    /// No such session (for this token).
    SessionNotFound,
    /// No such host call waits for an answer (answered, past its time, or never made).
    CallNotFound,
    /// The session ended (the message says which clock, or who, ended it).
    SessionEnded,
    /// The session is running a run (the error's `run` names it).
    SessionBusy,
    /// The server holds as many sessions as it may (`sessions.max`).
    TooManySessions,
    /// A file operation the workspace cannot do (its quota, a path that is a directory).
    FileConflict,
    /// A live session's interpreter that cannot be written down now (the message says why:
    /// files it holds open, say); it goes on as it was.
    CannotHibernate,
    /// An `Idempotency-Key` whose first answer cannot be given (too large to keep, or its
    /// first request ended without one).
    IdempotencyConflict,
    /// An `Idempotency-Key` used before with another request.
    IdempotencyMismatch,
    MethodNotAllowed,
    /// The body did not arrive in time, or came too slowly.
    BodyTimeout,
    /// The body is over `requests.body-max-bytes`.
    PayloadTooLarge,
    /// Not `application/json`.
    UnsupportedMediaType,
    /// The queue is full.
    QueueFull,
    /// No run slot came free in time.
    QueueTimeout,
    /// Too many bodies or answers are in memory.
    Busy,
    /// The server is shutting down.
    Draining,
    /// The runtime cannot run now (its jails fail).
    RuntimeUnavailable,
    /// The jail could not be built (the server's failure, with an incident number).
    JailSetupFailed,
    /// A bug of the server's (with an incident number).
    Internal,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 25] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::PolicyNotFound,
        ErrorCode::NotFound,
        ErrorCode::SessionNotFound,
        ErrorCode::CallNotFound,
        ErrorCode::SessionEnded,
        ErrorCode::SessionBusy,
        ErrorCode::TooManySessions,
        ErrorCode::FileConflict,
        ErrorCode::CannotHibernate,
        ErrorCode::IdempotencyConflict,
        ErrorCode::IdempotencyMismatch,
        ErrorCode::MethodNotAllowed,
        ErrorCode::BodyTimeout,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::QueueFull,
        ErrorCode::QueueTimeout,
        ErrorCode::Busy,
        ErrorCode::Draining,
        ErrorCode::RuntimeUnavailable,
        ErrorCode::JailSetupFailed,
        ErrorCode::Internal,
    ];

    /// The HTTP status a refusal with this code has.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::PolicyNotFound | ErrorCode::NotFound | ErrorCode::SessionNotFound | ErrorCode::CallNotFound => {
                404
            }
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::BodyTimeout => 408,
            ErrorCode::SessionBusy
            | ErrorCode::FileConflict
            | ErrorCode::CannotHibernate
            | ErrorCode::IdempotencyConflict => 409,
            ErrorCode::SessionEnded => 410,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::IdempotencyMismatch => 422,
            ErrorCode::QueueFull | ErrorCode::TooManySessions => 429,
            ErrorCode::JailSetupFailed | ErrorCode::Internal => 500,
            ErrorCode::QueueTimeout | ErrorCode::Busy | ErrorCode::Draining | ErrorCode::RuntimeUnavailable => 503,
        }
    }

    /// The code as the answer writes it (`queue-full`), and the metrics' label.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad-request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::PolicyNotFound => "policy-not-found",
            ErrorCode::NotFound => "not-found",
            ErrorCode::SessionNotFound => "session-not-found",
            ErrorCode::CallNotFound => "call-not-found",
            ErrorCode::SessionEnded => "session-ended",
            ErrorCode::SessionBusy => "session-busy",
            ErrorCode::TooManySessions => "too-many-sessions",
            ErrorCode::FileConflict => "file-conflict",
            ErrorCode::CannotHibernate => "cannot-hibernate",
            ErrorCode::IdempotencyConflict => "idempotency-conflict",
            ErrorCode::IdempotencyMismatch => "idempotency-mismatch",
            ErrorCode::MethodNotAllowed => "method-not-allowed",
            ErrorCode::BodyTimeout => "body-timeout",
            ErrorCode::PayloadTooLarge => "payload-too-large",
            ErrorCode::UnsupportedMediaType => "unsupported-media-type",
            ErrorCode::QueueFull => "queue-full",
            ErrorCode::QueueTimeout => "queue-timeout",
            ErrorCode::Busy => "busy",
            ErrorCode::Draining => "draining",
            ErrorCode::RuntimeUnavailable => "runtime-unavailable",
            ErrorCode::JailSetupFailed => "jail-setup-failed",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a stable code (with its HTTP status), a message and the request field it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// The request field the refusal is about (`files[0].path`, `limits.memory-max-bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The run in progress a refusal is about (`session-busy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Seconds after which trying again may work (the `Retry-After` header).
    #[serde(skip)]
    pub retry_after: Option<u64>,
}

/// `{"error": {"code", "message", "field"}}`: a refusal's body.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename = "Error")]
pub struct ErrorBody {
    pub error: ApiError,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError { code, message: message.into(), field: None, run: None, retry_after: None }
    }

    /// A 400 about one field of the request.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError { field: Some(field.into()), ..ApiError::new(ErrorCode::BadRequest, message) }
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// Its HTTP status.
    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// `{"error": {"code", "message", "field"}}`.
    pub fn body(&self) -> ErrorBody {
        ErrorBody { error: self.clone() }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: {} ({field})", self.code, self.message),
            None => write!(f, "{}: {}", self.code, self.message),
        }
    }
}

impl std::error::Error for ApiError {}

/// What a run answers: its report (the same schema as `stockade run --report -`), plus the files
/// given back when `return-files` asked for some.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct RunResult {
    #[serde(flatten)]
    pub report: Report,
    /// The files given back, in path order (when `return-files` asked for some).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<ReturnedFile>>,
    /// Matching files were left out at `return-files-max-count` or `-bytes` (when `return-files`
    /// asked for some).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_capped: Option<bool>,
    /// Matching entries not given back, each with the reason (the first 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_skipped: Vec<SkippedFile>,
    /// How many matching entries were not given back in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_skipped_count: Option<u64>,
    /// A run of a session: the session, this run's id, and its workspace as kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionRun>,
    /// A batch's run with an `expect`: the judge's word on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

/// A judge's word on one run with an `expect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// It ended well (status `ok`) and printed what was expected.
    Accepted,
    /// It ended well and printed something else.
    WrongAnswer,
    /// Its wall clock or its fuel ran out.
    Timeout,
    /// Its linear memory (`wasm-memory-limit`) or its jail's memory (`oom`) ran out.
    MemoryLimit,
    /// It printed more than its output caps.
    OutputLimit,
    /// It raised, exited non-zero, trapped or was killed.
    RuntimeError,
    /// The jail failed it (setup, or a limit of the jail's other than these).
    InternalError,
}

/// A file given back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReturnedFile {
    /// Relative to the work directory.
    pub path: String,
    /// Its size.
    pub bytes: u64,
    /// Its bytes, base64.
    pub content: String,
}

/// A matching entry not given back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkippedFile {
    /// Relative; a name that is not UTF-8 has U+FFFD in its place.
    pub path: String,
    pub reason: String,
}

impl RunResult {
    /// A run's report and what it gave back (`None`: the request asked for no files).
    pub fn new(report: Report, taken: Option<&Taken>) -> RunResult {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let files = taken.map(|t| {
            t.files
                .iter()
                .map(|(path, bytes)| ReturnedFile {
                    path: path.clone(),
                    bytes: bytes.len() as u64,
                    content: b64(bytes),
                })
                .collect()
        });
        let skipped = taken.filter(|t| t.skipped_count > 0);
        RunResult {
            report,
            files,
            files_capped: taken.map(|t| t.capped),
            files_skipped: skipped.map_or_else(Vec::new, |t| {
                t.skipped.iter().map(|s| SkippedFile { path: s.path.clone(), reason: s.reason.to_string() }).collect()
            }),
            files_skipped_count: skipped.map(|t| t.skipped_count as u64),
            session: None,
            verdict: None,
        }
    }

    /// As JSON, in the types' order.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The last event of a streamed run (`?stream=ndjson`): its result, or why it did not run. The
/// events before it carry output: `{"stdout": TEXT}` (or `"stdout-base64"` for bytes that are not
/// UTF-8), the same for stderr.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LastEvent {
    Report(Box<RunResult>),
    Error(ApiError),
}

/// What became of a live session's interpreter in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Interpreter {
    /// A new one ran this run (the session's first run, or the first after one was lost): no
    /// state from before.
    Started,
    /// The same one as the run before: its state kept.
    Kept,
    /// Its state is gone, the workspace's files kept: it ended in this run (its wall limit, a
    /// memory limit, its own exit) and was taken down, and the next run starts a new one; or it
    /// was lost since the run before (`interpreter-reason` says how: its server stopped, say)
    /// and a new one ran this run.
    Restarted,
    /// Its state came back from the session's hibernated image (`resume-ms` says how long
    /// that took): the variables, modules, functions and classes of the runs before are there.
    Resumed,
}

/// What a session's workspace holds, against its quota.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct WorkspaceUse {
    pub files: u64,
    pub bytes: u64,
    pub files_max: u64,
    pub bytes_max: u64,
}

/// What a run of a session adds to its result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct SessionRun {
    /// The session's id.
    pub id: String,
    /// This run's id (`r-` and 16 hex digits).
    pub run: String,
    /// The workspace as the run left it, as kept for the next run.
    pub workspace: WorkspaceUse,
    /// What the run left in the workspace that was not kept, each with the reason (symlinks,
    /// special files, names that are not UTF-8, files past the quota): the first 100.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<SkippedFile>,
    /// How many entries were not kept in all.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_count: u64,
    /// A live session's run: what became of its interpreter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<Interpreter>,
    /// Why its interpreter was not kept, when it was lost before this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter_reason: Option<String>,
    /// A resumed interpreter's resume, in milliseconds: its jail built, its guest loaded and
    /// its image mapped back, before this run's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_ms: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_write_as_they_serialize_and_know_their_status() {
        for c in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(c).expect("serializes"), serde_json::Value::from(c.as_str()));
            assert!((400..600).contains(&c.status()), "{c}");
        }
        // docs/api.md's table of errors has every code, with its status.
        let doc = include_str!("../../../../docs/api.md");
        for c in ErrorCode::ALL {
            let row = doc.lines().find(|l| l.starts_with('|') && l.contains(&format!("`{c}`")));
            assert!(row.is_some_and(|r| r.starts_with(&format!("| {} |", c.status()))), "docs/api.md: {c}: {row:?}");
        }
        let e = ApiError::field("limits.fuel", "must be more than 0");
        let body = serde_json::to_value(e.body()).expect("serializes");
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "bad-request", "message": "must be more than 0", "field": "limits.fuel"}})
        );
    }
}
