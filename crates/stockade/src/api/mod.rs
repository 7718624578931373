//! The run request of stockade's service API (v1), without the service: a request as sent
//! (JSON, `deny_unknown_fields`) and as checked ([`RunRequest`]: typed, bounded, its limits only
//! ever tighter than its policy's), and refusals as `{"error": {"code", "message", "field"}}`
//! with their HTTP status. Pure: no I/O, so `stockade serve` and `stockade mcp` check requests
//! the same way, and the fuzzer reaches the decoder from the library (`fuzzing::run_request`).
//!
//! Imports (layers): `handover`, `layers`, `policy`, `report`, `supervisor`.

use crate::Policy;
use crate::layers::filesystem::exchange::{self, Pick, PutFile};
use crate::policy::{EgressRule, Limits};
use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one request may bring and take away (a server's `[requests]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct RequestCaps {
    /// The whole JSON body.
    pub body_max_bytes: u64,
    pub code_max_bytes: u64,
    pub stdin_max_bytes: u64,
    /// Arguments: how many, and their bytes together.
    pub argv_max_count: u32,
    pub argv_max_bytes: u64,
    /// Input files: how many, and their decoded bytes together.
    pub files_max_count: u32,
    pub files_max_bytes: u64,
    /// Files given back: how many, and their bytes together (the rest is left out, and the
    /// response says so).
    pub return_files_max_count: u32,
    pub return_files_max_bytes: u64,
    /// How many `return-files` patterns.
    pub return_patterns_max: u32,
    /// Request bodies held in memory at once, all requests together (past it, 503).
    pub in_flight_max_bytes: u64,
    /// Answers held in memory at once, all requests together: each run reserves the most its
    /// answer can take before it starts (past it, 503), until its client has read it.
    pub answers_in_flight_max_bytes: u64,
    /// How long a run's answer is kept for its `Idempotency-Key` after it was given.
    pub idempotency_window_ms: u64,
    /// The answers kept for their keys, all together (past it, the oldest go).
    pub idempotency_max_bytes: u64,
    /// The runs (or inputs) of one batch (`POST /v1/batches`).
    pub batch_max_runs: u32,
}

impl Default for RequestCaps {
    fn default() -> Self {
        RequestCaps {
            body_max_bytes: 16 << 20,
            code_max_bytes: 1 << 20,
            stdin_max_bytes: 4 << 20,
            argv_max_count: 256,
            argv_max_bytes: 256 << 10,
            files_max_count: 100,
            files_max_bytes: 8 << 20,
            return_files_max_count: 100,
            return_files_max_bytes: 8 << 20,
            return_patterns_max: 32,
            in_flight_max_bytes: 256 << 20,
            answers_in_flight_max_bytes: 1 << 30,
            idempotency_window_ms: 600_000,
            idempotency_max_bytes: 64 << 20,
            batch_max_runs: 1000,
        }
    }
}

/// A runtime, as far as a request's checks care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSpec {
    /// Its code comes framed ([`crate::handover`]), so it takes argv and stdin; else the code is
    /// its whole stdin.
    pub framed: bool,
    /// Its jails have a host-call channel, so its runs may declare `tools`.
    pub host_calls: bool,
    /// The named policies its runs may have: the first unless the request names another.
    pub policies: Vec<String>,
}

/// What a server offers, against which requests are checked.
#[derive(Debug, Clone)]
pub struct Catalog {
    pub runtimes: BTreeMap<String, RuntimeSpec>,
    pub policies: BTreeMap<String, Policy>,
    pub caps: RequestCaps,
    /// Whether requests may send their own Wasm modules (runtime `wasm`).
    pub wasm_modules: bool,
}

/// `POST /v1/runs`, as sent.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunBody {
    /// `python`, `javascript`, a runtime this server configures (`GET /v1/info`), or `wasm`
    /// (with `module`).
    pub runtime: String,
    /// The code to run (every runtime but `wasm`).
    #[serde(default)]
    pub code: Option<String>,
    /// A WASI preview 1 command module, base64 (runtime `wasm`): compiled in a jail, cached by
    /// the SHA-256 of its bytes.
    #[serde(default)]
    pub module: Option<String>,
    /// Arguments after the code (`sys.argv[1:]`, `scriptArgs`).
    #[serde(default, deserialize_with = "bounded::argv")]
    pub argv: Vec<String>,
    /// The run's stdin, as text.
    #[serde(default)]
    pub stdin: Option<String>,
    /// The run's stdin, base64 (instead of `stdin`).
    #[serde(default)]
    pub stdin_base64: Option<String>,
    /// Files written into the run's work directory (`/app`) before it starts.
    #[serde(default, deserialize_with = "bounded::files")]
    pub files: Vec<FileBody>,
    /// A named policy (`GET /v1/info`); default: the runtime's.
    #[serde(default)]
    pub policy: Option<String>,
    /// Limits tighter than the policy's (a looser one is refused).
    #[serde(default)]
    pub limits: Limits,
    /// Patterns of files to give back from the work directory after the run (`*` within a
    /// directory, `**` across), e.g. `["*.png", "out/**"]`.
    #[serde(default, deserialize_with = "bounded::patterns")]
    pub return_files: Vec<String>,
    /// The host's tools the run may call back (host calls, answered by the client while the
    /// run streams), each with its budgets (at most 16: a longer list is refused as it is read).
    #[serde(default, deserialize_with = "bounded::tools")]
    pub tools: Vec<ToolBody>,
    /// Hosts the run may reach (`HOST:PORT` each, as in a policy's `network.egress-allow`): only
    /// ones its policy's list covers (a narrower list; a jail is built for it). Left out: the
    /// policy's list.
    #[serde(default, deserialize_with = "bounded::egress")]
    pub egress_allow: Option<Vec<String>>,
}

/// A tool a run may call, as sent; a budget left out is the default.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ToolBody {
    /// 1 to 64 of `A-Z a-z 0-9 _ . -`.
    pub name: String,
    /// Calls of it in one run (default 50, at most 1000).
    #[serde(default)]
    pub max_calls: Option<u32>,
    /// The most bytes of one request, its name and arguments as JSON (default 65536, at most
    /// 1048576).
    #[serde(default)]
    pub max_request_bytes: Option<u32>,
    /// The most bytes of one answer's value as JSON (default 1048576, at most 16777216).
    #[serde(default)]
    pub max_response_bytes: Option<u32>,
    /// Each call's time, milliseconds (default 5000, at most 60000); the run's wall limit holds
    /// whatever the calls wait.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The most tools one run declares.
pub const TOOLS_MAX: usize = 16;

mod answer;
pub mod batch;
mod bounded;
pub mod info;
mod openapi;
pub mod session;

pub use answer::{ApiError, ErrorBody, ErrorCode, LastEvent, ReturnedFile, RunResult, SkippedFile};
pub use openapi::openapi;

/// An input file: a path relative to the run's work directory, and its bytes in base64.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileBody {
    /// Relative to the work directory: plain names only (no `..`, `.`, or leading `/`).
    pub path: String,
    /// The file's bytes, base64.
    pub content: String,
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
    /// The runtime reads its code framed ([`stockade::handover`]); else the code is its stdin.
    pub framed: bool,
    pub argv: Vec<String>,
    pub stdin: Vec<u8>,
    pub files: Vec<PutFile>,
    /// The named policy the run gets ([`Catalog::policies`]).
    pub policy_name: String,
    /// The run's limits: the policy's, tightened by the request's (checked).
    pub limits: Limits,
    /// A limit only a jail built for this request can hold (memory, pids, Wasm memory, fuel, an
    /// egress list), or a module of the request's own.
    pub needs_own_jail: bool,
    /// The egress list the request narrowed its policy's to (checked: every entry covered).
    pub egress_allow: Option<Vec<crate::policy::EgressRule>>,
    pub return_files: Option<Pick>,
    /// The tools the run may call back (checked: names, budgets).
    pub tools: Vec<crate::Tool>,
    /// Who answers its host calls: the service's, set when the run streams (never from a body).
    pub host: Option<crate::HostCalls>,
}

impl RunRequest {
    /// The run's policy: the named one with the run's limits in it (for a jail built for it).
    pub fn policy(&self, catalog: &Catalog) -> Option<Policy> {
        catalog.policies.get(&self.policy_name).map(|p| {
            let mut p = self.limits.applied_to(p);
            if let Some(list) = &self.egress_allow {
                p.network.egress_allow.clone_from(list);
            }
            p
        })
    }
}

/// A request's egress list: each entry one its policy's list covers (the same host, or a name
/// or narrower domain below one of its `*.domain` entries; the same port), or 400 naming it.
fn egress_allow(asked: Option<&[String]>, policy: &Policy, name: &str) -> Result<Option<Vec<EgressRule>>, ApiError> {
    let Some(asked) = asked else { return Ok(None) };
    let list = &policy.network.egress_allow;
    let mut out: Vec<EgressRule> = Vec::with_capacity(asked.len());
    for (i, entry) in asked.iter().enumerate() {
        let field = format!("egress-allow[{i}]");
        let rule: EgressRule = entry.parse().map_err(|e| ApiError::field(&field, format!("{entry:?}: {e}")))?;
        if !list.iter().any(|p| p.covers(&rule)) {
            let message = if list.is_empty() {
                format!("{rule} is not in policy {name:?}'s network.egress-allow, which lists no host")
            } else {
                format!("{rule} is not in policy {name:?}'s network.egress-allow: a request may only narrow it")
            };
            return Err(ApiError::field(field, message));
        }
        if !out.contains(&rule) {
            out.push(rule);
        }
    }
    out.sort();
    Ok(Some(out))
}

fn b64(field: &str, text: &str) -> Result<Vec<u8>, ApiError> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| ApiError::field(field, format!("not standard base64: {e}")))
}

/// Decodes a request body: JSON, every field known and typed, lists no longer than `caps` allow
/// (stopped while parsing); an error names the field.
pub fn decode(body: &[u8], caps: &RequestCaps) -> Result<RunBody, ApiError> {
    decode_with(body, caps)
}

/// Decodes a batch's body as [`decode`] does a run's (its lists of runs within
/// `requests.batch-max-runs`).
pub fn decode_batch(body: &[u8], caps: &RequestCaps) -> Result<batch::BatchBody, ApiError> {
    decode_with(body, caps)
}

fn decode_with<T: serde::de::DeserializeOwned>(body: &[u8], caps: &RequestCaps) -> Result<T, ApiError> {
    let argv_max = (caps.argv_max_count as usize).min(crate::handover::MAX_ARGS);
    let (files, patterns) = (caps.files_max_count as usize, caps.return_patterns_max as usize);
    bounded::CAPS.with(|c| c.set([argv_max, files, patterns, caps.batch_max_runs as usize]));
    let decoded = decode_json(body);
    bounded::CAPS.with(|c| c.set([usize::MAX; 4]));
    decoded
}

fn decode_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { None } else { Some(path) };
        let message = e.inner().to_string().lines().next().unwrap_or("").to_string();
        ApiError { field, ..ApiError::new(ErrorCode::BadRequest, message) }
    })?;
    de.end().map_err(|e| ApiError::new(ErrorCode::BadRequest, e.to_string()))?;
    Ok(parsed)
}

/// Checks a request against what the server offers: every field typed and bounded, limits
/// only tighter. The errors name the field.
pub fn check(body: RunBody, cfg: &Catalog) -> Result<RunRequest, ApiError> {
    let r = &cfg.caps;
    let (target, framed, allowed) = target(&body, cfg)?;
    let code = code(&target, body.code, r)?;
    let stdin = stdin(&body.runtime, &body.argv, body.stdin, body.stdin_base64, framed, r)?;
    let files = files(&body.files, r)?;
    let (policy_name, named_policy) = named_policy(body.policy, &allowed, &body.runtime, cfg)?;
    let return_files = return_files(&body.return_files, r)?;
    let tools = tools(&body.tools, &body.runtime, cfg)?;
    let ceiling = Limits::of(named_policy);
    let limits = body
        .limits
        .within(&ceiling, &format!("policy {policy_name:?}"))
        .map_err(|e| ApiError::field(format!("limits.{}", e.key), e.message))?;
    let egress_allow = egress_allow(body.egress_allow.as_deref(), named_policy, &policy_name)?;
    let narrowed = egress_allow.as_ref().is_some_and(|l| {
        let mut whole = named_policy.network.egress_allow.clone();
        whole.sort();
        *l != whole
    });
    let needs_own_jail = limits.need_own_jail(&ceiling) || matches!(target, Target::Wasm(_)) || narrowed;
    let module_max = named_policy.wasm.module_max_bytes;
    if let Target::Wasm(m) = &target
        && m.len() as u64 > module_max
    {
        return Err(ApiError::field(
            "module",
            format!("{} bytes, more than policy {policy_name:?}'s wasm.module-max-bytes ({})", m.len(), module_max),
        ));
    }
    Ok(RunRequest {
        runtime_name: match &target {
            Target::Wasm(_) => "wasm".into(),
            Target::Runtime(n) => n.clone(),
        },
        target,
        code,
        framed,
        argv: body.argv,
        stdin,
        files,
        policy_name,
        limits,
        needs_own_jail,
        egress_allow: egress_allow.filter(|_| narrowed),
        return_files,
        tools,
        host: None,
    })
}

/// The tools a run declares: each named once, its budgets within their most; only for a runtime
/// whose jails have a host-call channel.
fn tools(list: &[ToolBody], runtime: &str, cfg: &Catalog) -> Result<Vec<crate::Tool>, ApiError> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    if !cfg.runtimes.get(runtime).is_some_and(|r| r.host_calls) {
        let with: Vec<&str> = cfg.runtimes.iter().filter(|(_, r)| r.host_calls).map(|(n, _)| n.as_str()).collect();
        return Err(ApiError::field(
            "tools",
            format!(
                "runtime {runtime:?} has no host calls in this server (runtimes with them: {})",
                if with.is_empty() { "none".to_string() } else { with.join(", ") }
            ),
        ));
    }
    tool_list(list)
}

/// A list of tools checked into the library's (names, each once, budgets within the server's
/// bounds), or the first problem, naming its field (`tools[i].key`).
pub fn tool_list(list: &[ToolBody]) -> Result<Vec<crate::Tool>, ApiError> {
    if list.len() > TOOLS_MAX {
        return Err(ApiError::field("tools", format!("{} tools, more than {TOOLS_MAX}", list.len())));
    }
    let mut out: Vec<crate::Tool> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = |key: &str| format!("tools[{i}].{key}");
        let name_ok = (1..=64).contains(&t.name.len())
            && t.name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !name_ok {
            return Err(ApiError::field(at("name"), "1 to 64 of A-Z a-z 0-9 _ . -"));
        }
        if out.iter().any(|o| o.name == t.name) {
            return Err(ApiError::field(at("name"), format!("{:?} is declared twice", t.name)));
        }
        let within = |key: &str, v: Option<u64>, default: u64, most: u64| match v {
            None => Ok(default),
            Some(0) => Err(ApiError::field(at(key), "must be more than 0")),
            Some(v) if v > most => Err(ApiError::field(at(key), format!("{v} is more than {most}"))),
            Some(v) => Ok(v),
        };
        let d = crate::Tool::new(t.name.clone());
        let small = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let calls = within("max-calls", t.max_calls.map(u64::from), d.max_calls.into(), 1000)?;
        let request =
            within("max-request-bytes", t.max_request_bytes.map(u64::from), d.max_request_bytes.into(), 1 << 20)?;
        let response =
            within("max-response-bytes", t.max_response_bytes.map(u64::from), d.max_response_bytes.into(), 16 << 20)?;
        let timeout = within("timeout-ms", t.timeout_ms, 5000, 60_000)?;
        out.push(crate::Tool {
            name: t.name.clone(),
            max_calls: small(calls),
            max_request_bytes: small(request),
            max_response_bytes: small(response),
            timeout: std::time::Duration::from_millis(timeout),
        });
    }
    Ok(out)
}

/// What the request runs on: a module (when the server takes them), or a runtime it serves;
/// whether that reads its code framed, and the policies it may run under.
fn target(body: &RunBody, cfg: &Catalog) -> Result<(Target, bool, Vec<String>), ApiError> {
    if body.runtime == "wasm" {
        if !cfg.wasm_modules {
            return Err(ApiError::field("runtime", "this server does not run modules sent with requests"));
        }
        let Some(m) = &body.module else {
            return Err(ApiError::field("module", "runtime \"wasm\" needs a module (base64)"));
        };
        if body.code.is_some() {
            return Err(ApiError::field("code", "runtime \"wasm\" runs \"module\", not code"));
        }
        return Ok((Target::Wasm(b64("module", m)?), true, vec!["default".to_string()]));
    }
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
    Ok((Target::Runtime(body.runtime.clone()), rt.framed, rt.policies.clone()))
}

/// The code to run (none for a module), at most `requests.code-max-bytes`.
fn code(target: &Target, code: Option<String>, r: &RequestCaps) -> Result<String, ApiError> {
    match (target, code) {
        (Target::Wasm(_), _) => Ok(String::new()),
        (_, None) => Err(ApiError::field("code", "missing: the code to run")),
        (_, Some(c)) if c.len() as u64 > r.code_max_bytes => Err(ApiError::field(
            "code",
            format!("{} bytes, more than {} (requests.code-max-bytes)", c.len(), r.code_max_bytes),
        )),
        (_, Some(c)) => Ok(c),
    }
}

/// The arguments within their caps, and the stdin (text or base64, not both) within its own;
/// neither for a runtime whose whole stdin is its code.
fn stdin(
    runtime: &str,
    argv: &[String],
    text: Option<String>,
    base64: Option<String>,
    framed: bool,
    r: &RequestCaps,
) -> Result<Vec<u8>, ApiError> {
    let max_args = (r.argv_max_count as usize).min(crate::handover::MAX_ARGS);
    if argv.len() > max_args {
        return Err(ApiError::field("argv", format!("more than {max_args} arguments")));
    }
    let argv_bytes: usize = argv.iter().map(String::len).sum();
    if argv_bytes as u64 > r.argv_max_bytes {
        return Err(ApiError::field("argv", format!("more than {} bytes of arguments", r.argv_max_bytes)));
    }
    let stdin = match (text, base64) {
        (Some(_), Some(_)) => return Err(ApiError::field("stdin-base64", "give stdin or stdin-base64, not both")),
        (Some(s), None) => s.into_bytes(),
        (None, Some(b)) => b64("stdin-base64", &b)?,
        (None, None) => Vec::new(),
    };
    if stdin.len() as u64 > r.stdin_max_bytes {
        return Err(ApiError::field(
            "stdin",
            format!("more than {} bytes (requests.stdin-max-bytes)", r.stdin_max_bytes),
        ));
    }
    if !framed && (!argv.is_empty() || !stdin.is_empty()) {
        let field = if argv.is_empty() { "stdin" } else { "argv" };
        return Err(ApiError::field(
            field,
            format!("runtime {runtime:?} reads its code on stdin: it takes no argv or stdin"),
        ));
    }
    Ok(stdin)
}

/// The input files: plain relative paths, none given twice or below another, their decoded
/// bytes within `requests.files-max-bytes`.
fn files(body: &[FileBody], r: &RequestCaps) -> Result<Vec<PutFile>, ApiError> {
    if body.len() > r.files_max_count as usize {
        return Err(ApiError::field(
            "files",
            format!("more than {} files (requests.files-max-count)", r.files_max_count),
        ));
    }
    let mut files = Vec::with_capacity(body.len());
    let mut total = 0u64;
    for (i, f) in body.iter().enumerate() {
        let path = exchange::check_relative(&f.path).map_err(|why| ApiError::field(format!("files[{i}].path"), why))?;
        if files.iter().any(|p: &PutFile| p.path == path || p.path.starts_with(&path) || path.starts_with(&p.path)) {
            return Err(ApiError::field(
                format!("files[{i}].path"),
                "given twice, or a file's path is another's directory",
            ));
        }
        let bytes = b64(&format!("files[{i}].content"), &f.content)?;
        total += bytes.len() as u64;
        if total > r.files_max_bytes {
            return Err(ApiError::field(
                "files",
                format!("more than {} bytes of files (requests.files-max-bytes)", r.files_max_bytes),
            ));
        }
        files.push(PutFile { path, bytes });
    }
    Ok(files)
}

/// The policy the run gets: the one asked for, when the runtime may run under it (404 when the
/// server offers no such policy), else the runtime's own.
fn named_policy<'c>(
    asked: Option<String>,
    allowed: &[String],
    runtime: &str,
    cfg: &'c Catalog,
) -> Result<(String, &'c Policy), ApiError> {
    let name = asked.or_else(|| allowed.first().cloned()).unwrap_or_default();
    if cfg.policies.contains_key(&name) && !allowed.contains(&name) {
        return Err(ApiError::field(
            "policy",
            format!(
                "runtime {runtime:?} runs only under {} (the server's runtimes.{runtime}.policies)",
                allowed.join(", ")
            ),
        ));
    }
    match cfg.policies.get(&name) {
        Some(p) => Ok((name, p)),
        None => {
            let known: Vec<&str> = cfg.policies.keys().map(String::as_str).collect();
            Err(ApiError {
                field: Some("policy".into()),
                ..ApiError::new(
                    ErrorCode::PolicyNotFound,
                    format!("no policy {name:?} (this server has: {})", known.join(", ")),
                )
            })
        }
    }
}

/// The `return-files` patterns, compiled, with the caps on what comes back.
fn return_files(patterns: &[String], r: &RequestCaps) -> Result<Option<Pick>, ApiError> {
    if patterns.len() > r.return_patterns_max as usize {
        return Err(ApiError::field("return-files", format!("more than {} patterns", r.return_patterns_max)));
    }
    if patterns.is_empty() {
        return Ok(None);
    }
    let set = exchange::patterns(patterns).map_err(|(i, why)| ApiError::field(format!("return-files[{i}]"), why))?;
    Ok(Some(Pick {
        patterns: set,
        sources: patterns.to_vec(),
        max_files: r.return_files_max_count as usize,
        max_bytes: r.return_files_max_bytes,
    }))
}
