//! What a server says of itself, as types: its health (`GET /v1/health/ready`, for balancers and
//! probes) and what it serves (`GET /v1/info`). The engine fills them; the OpenAPI schema, and
//! so both SDKs' types, come from them.

use crate::policy::Limits;
use crate::report::LayerReport;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether the server can run every runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// A jail of every runtime was built, and none is failing.
    Ok,
    /// A runtime's first jail is not built yet.
    Starting,
    /// A runtime's last jails failed.
    Unavailable,
    /// The server is shutting down.
    Draining,
}

/// The server's health (`/v1/health/ready`'s body, 200 when `status` is `ok`, else 503).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    pub status: Readiness,
    /// Runs in progress.
    pub running: usize,
    /// Runs waiting for a slot.
    pub queued: usize,
    /// Warm jails waiting and wanted, by runtime.
    pub warm: BTreeMap<String, Warm>,
    /// Each runtime that cannot run (or not yet), and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

/// The server's liveness (`/v1/health/live`'s body, always 200 while it answers).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Liveness {
    /// `alive`.
    pub status: String,
    /// Seconds since the engine was built.
    pub uptime_s: u64,
}

/// A runtime's warm jails: waiting, and wanted.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
pub struct Warm {
    pub ready: usize,
    pub target: usize,
}

/// `GET /v1/info`: what this server serves.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct Info {
    /// stockade's version.
    pub version: String,
    /// The API's version (`v1`).
    pub api: String,
    pub runtimes: Vec<RuntimeInfo>,
    /// Whether requests may send their own Wasm modules (runtime `wasm`).
    pub wasm_modules: bool,
    /// Every named policy a request may ask for.
    pub policies: Vec<PolicyInfo>,
    /// Runs at once.
    pub concurrency: usize,
    /// Runs that may wait behind them.
    pub queue: usize,
    /// Where the warm jails are built: `spawner` (a process of their own) or `threads`.
    pub jails_built_by: String,
    pub requests: RequestsInfo,
    pub sessions: SessionsInfo,
    pub uptime_s: u64,
}

/// A runtime the server serves.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct RuntimeInfo {
    pub name: String,
    /// `wasm-guest` (stockade's embedded runner) or `program` (a program of the host's).
    pub kind: String,
    /// What runs: a guest's language, or a program's path and how it takes its code.
    pub runs: RuntimeRuns,
    /// Its own policy (a request may name another the runtime allows).
    pub policy: String,
    pub available: bool,
    /// Why not, when it is not.
    pub unavailable_because: Option<String>,
    pub warm: Warm,
    /// What this host enforces of its jail, layer by layer (as its last warm jail reported).
    pub enforcement: Option<Vec<LayerReport>>,
}

/// What a runtime runs.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RuntimeRuns {
    /// A Wasm guest: `python` or `javascript`.
    Guest { guest: String },
    /// A program of the host's, given its code on stdin: whole (`stdin`), or framed for
    /// stockade's Python bootstrap (`python`, which can keep an interpreter).
    Program {
        program: String,
        bootstrap: String,
        /// The modules its interpreters import before their code arrives.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        preload: Vec<String>,
        /// The virtual environment its packages come from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        venv: Option<String>,
    },
}

/// A named policy and the limits it gives a run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PolicyInfo {
    pub name: String,
    /// Where it came from: a file, or the built-in default.
    pub source: String,
    pub limits: PolicyLimits,
}

/// A policy's limits as a request names them, and its CPU share.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PolicyLimits {
    #[serde(flatten)]
    pub limits: Limits,
    /// The CPU a run may use, in percent of one CPU.
    #[serde(rename = "cpu-max-percent")]
    pub cpu_max_percent: Option<u64>,
}

/// The caps of every request.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct RequestsInfo {
    pub body_max_bytes: u64,
    pub code_max_bytes: u64,
    pub stdin_max_bytes: u64,
    pub argv_max_count: u32,
    pub files_max_count: u32,
    pub files_max_bytes: u64,
    pub return_files_max_count: u32,
    pub return_files_max_bytes: u64,
    /// The runs (or inputs) of one batch.
    pub batch_max_runs: u32,
}

/// The sessions the server keeps.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct SessionsInfo {
    /// Sessions at most, and open now.
    pub max: usize,
    pub open: usize,
    /// `workspace`, and `live` when live sessions are on.
    pub modes: Vec<String>,
    pub max_per_token: usize,
    pub live_max: usize,
    pub idle_timeout_ms: u64,
    pub max_lifetime_ms: u64,
    /// After how long idle a live session's interpreter is hibernated (none: only when asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernate_after_ms: Option<u64>,
    pub workspace_max_bytes: u64,
    pub workspace_max_files: u64,
}
