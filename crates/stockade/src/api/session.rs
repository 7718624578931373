//! Sessions of the service API (v1), as sent and as answered: a session keeps a runtime, a
//! policy, limits and a workspace (the `/app` of each of its runs) between runs, under three
//! clocks. Pure, like the rest of `api`: the service holds the sessions, these are their shapes
//! and checks.

pub use super::answer::{Interpreter, SessionRun, WorkspaceUse};
use super::bounded;
use super::{ApiError, ErrorCode, FileBody, RunBody};
use crate::policy::Limits;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a session's runs share their state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each run is a fresh jail and interpreter; the session's `/app` persists between runs.
    #[default]
    Workspace,
    /// One jailed interpreter keeps its state (variables, imports, definitions) between runs,
    /// within the session's limits for its whole life; each run has its own wall limit and
    /// output caps. `/app` persists as in a workspace session.
    Live,
}

/// `POST /v1/sessions`, as sent.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionBody {
    /// A runtime this server serves (`GET /v1/info`); not `wasm`.
    pub runtime: String,
    #[serde(default)]
    pub mode: Mode,
    /// A named policy the runtime may run under; default: the runtime's.
    #[serde(default)]
    pub policy: Option<String>,
    /// Limits for every run of the session, tighter than the policy's; a run may tighten them
    /// further, never loosen them.
    #[serde(default)]
    pub limits: Limits,
    /// The session ends after this long without a run or a file operation (the clock slides);
    /// default and most: the server's `sessions.idle-timeout-ms`.
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// The session ends this long after it was made, whatever it does; default and most: the
    /// server's `sessions.max-lifetime-ms`.
    #[serde(default)]
    pub max_lifetime_ms: Option<u64>,
}

/// `POST /v1/sessions/{id}/runs`, as sent: a run request without its runtime and policy (the
/// session's).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionRunBody {
    /// The code to run.
    pub code: Option<String>,
    /// Arguments after the code.
    #[serde(default, deserialize_with = "bounded::argv")]
    pub argv: Vec<String>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub stdin_base64: Option<String>,
    /// Files written into the workspace before the run (they stay in it, as the run leaves them).
    #[serde(default, deserialize_with = "bounded::files")]
    pub files: Vec<FileBody>,
    /// Files of the workspace given back with the result, by pattern, after the run.
    #[serde(default, deserialize_with = "bounded::patterns")]
    pub return_files: Vec<String>,
    /// Limits tighter than the session's.
    #[serde(default)]
    pub limits: Limits,
    /// The host's tools the run may call back (as for `/v1/runs`).
    #[serde(default, deserialize_with = "super::bounded::tools")]
    pub tools: Vec<super::ToolBody>,
}

impl SessionRunBody {
    /// The run request it makes in a session of `runtime` under `policy`, with `limits`.
    pub fn into_run(self, runtime: &str, policy: &str, limits: Limits) -> RunBody {
        RunBody {
            runtime: runtime.to_string(),
            code: self.code,
            module: None,
            argv: self.argv,
            stdin: self.stdin,
            stdin_base64: self.stdin_base64,
            files: self.files,
            policy: Some(policy.to_string()),
            limits,
            return_files: self.return_files,
            tools: self.tools,
            // A session's runs reach what its policy lists.
            egress_allow: None,
        }
    }
}

/// A session, as answered (`POST /v1/sessions`, `GET /v1/sessions[/{id}]`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct SessionInfo {
    /// Its id (`s-` and 32 hex digits): a balancer may route by it.
    pub id: String,
    pub runtime: String,
    pub mode: Mode,
    pub policy: String,
    /// Every run's limits (the policy's, tightened by the session's).
    pub limits: Limits,
    pub idle_timeout_ms: u64,
    pub max_lifetime_ms: u64,
    /// When it was made, and when it ends if nothing else happens (the sooner of its two
    /// clocks), in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    pub expires_unix_ms: u64,
    /// Its runs so far.
    pub runs: u64,
    /// The run in progress, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    pub workspace: WorkspaceUse,
    /// The session it was forked from (`POST /v1/sessions/{id}/fork`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// Where a live session's interpreter is (a workspace session's is `none`).
    pub state: SessionState,
    /// The last hibernation's time, in milliseconds, while the session is hibernated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernate_ms: Option<f64>,
    /// The size of its hibernated image on disk, while it is hibernated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
}

/// Where a session's interpreter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SessionState {
    /// Running in a jail of its own, waiting for the session's next run.
    Live,
    /// Written to the state directory, its jail ended: the next run resumes it.
    Hibernated,
    /// None: a workspace session, or a live one whose interpreter starts with its next run.
    None,
}

/// A file of a session's workspace (`GET /v1/sessions/{id}/files`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct FileInfo {
    /// Relative to the workspace.
    pub path: String,
    pub bytes: u64,
    /// When its content last changed (an upload, or a run that wrote it), in milliseconds since
    /// the Unix epoch, by the server's clock.
    pub modified_unix_ms: u64,
}

/// `GET /v1/sessions/{id}/files`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct FileList {
    pub files: Vec<FileInfo>,
    pub workspace: WorkspaceUse,
}

/// Checks a session's id as a client wrote it: `s-` and 32 lowercase hex digits.
pub fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = id.len() == 34 && id.starts_with("s-") && id[2..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok { Ok(()) } else { Err(ApiError::new(ErrorCode::SessionNotFound, "a session id is s- and 32 hex digits")) }
}

/// Decodes a JSON body of type `T`: every field known and typed, lists within the request caps
/// of [`super::decode`]; an error names the field.
pub fn decode_as<T: serde::de::DeserializeOwned>(body: &[u8], caps: &super::RequestCaps) -> Result<T, ApiError> {
    super::decode_with(body, caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked_before_they_are_looked_up() {
        assert!(check_id(&format!("s-{}", "0a".repeat(16))).is_ok());
        for bad in ["", "s-", "s-0A0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a", "x-00000000000000000000000000000000", "s-../.."] {
            assert_eq!(check_id(bad).unwrap_err().code, ErrorCode::SessionNotFound, "{bad}");
        }
    }

    #[test]
    fn a_session_body_names_a_bad_field() {
        let caps = super::super::RequestCaps::default();
        let e = decode_as::<SessionBody>(br#"{"runtime": "python", "mode": "kernel"}"#, &caps).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("mode"), "{e}");
        let e = decode_as::<SessionRunBody>(br#"{"code": "1", "limits": {"wall": 1}}"#, &caps).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("limits.wall"), "{e}");
    }
}
