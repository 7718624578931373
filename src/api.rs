//! The run request of stockade's service API (v1), without the service: a request as sent
//! (JSON, `deny_unknown_fields`) and as checked ([`RunRequest`]: typed, bounded, its limits only
//! ever tighter than its policy's), and refusals as `{"error": {"code", "message", "field"}}`
//! with their HTTP status. Pure: no I/O, so `stockade serve` and `stockade mcp` check requests
//! the same way, and the fuzzer reaches the decoder from the library (`fuzzing::run_request`).

use crate::Policy;
use crate::layers::filesystem::exchange::{self, Pick, PutFile};
use base64::Engine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// HTTP statuses of refusals.
pub mod status {
    pub const BAD_REQUEST: u16 = 400;
    pub const UNAUTHORIZED: u16 = 401;
    pub const FORBIDDEN: u16 = 403;
    pub const NOT_FOUND: u16 = 404;
    pub const METHOD_NOT_ALLOWED: u16 = 405;
    pub const REQUEST_TIMEOUT: u16 = 408;
    pub const PAYLOAD_TOO_LARGE: u16 = 413;
    pub const UNSUPPORTED_MEDIA_TYPE: u16 = 415;
    pub const TOO_MANY_REQUESTS: u16 = 429;
    pub const INTERNAL: u16 = 500;
    pub const UNAVAILABLE: u16 = 503;
}

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
        }
    }
}

/// A runtime, as far as a request's checks care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSpec {
    /// Its code comes framed ([`crate::handover`]), so it takes argv and stdin; else the code is
    /// its whole stdin.
    pub framed: bool,
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
#[derive(Debug, Deserialize, JsonSchema)]
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
    pub limits: LimitsBody,
    /// Patterns of files to give back from the work directory after the run (`*` within a
    /// directory, `**` across), e.g. `["*.png", "out/**"]`.
    #[serde(default, deserialize_with = "bounded::patterns")]
    pub return_files: Vec<String>,
}

/// Lists decoded no further than their caps: a body of a million empty arguments stops at the
/// cap's first one past it, before it costs memory (the caps of the [`decode`] under way).
mod bounded {
    use super::FileBody;
    use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
    use std::cell::Cell;

    thread_local! {
        /// `argv-max-count`, `files-max-count`, `return-patterns-max` of the decode under way.
        pub(super) static CAPS: Cell<[usize; 3]> = const { Cell::new([usize::MAX; 3]) };
    }

    struct Capped<T> {
        max: usize,
        what: &'static str,
        key: &'static str,
        _t: std::marker::PhantomData<T>,
    }

    impl<'de, T: Deserialize<'de>> Visitor<'de> for Capped<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a list of at most {} {}", self.max, self.what)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max).min(64));
            while let Some(item) = seq.next_element()? {
                if out.len() == self.max {
                    return Err(A::Error::custom(format!(
                        "more than {} {} (requests.{})",
                        self.max, self.what, self.key
                    )));
                }
                out.push(item);
            }
            Ok(out)
        }
    }

    fn capped<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
        which: usize,
        what: &'static str,
        key: &'static str,
    ) -> Result<Vec<T>, D::Error> {
        let max = CAPS.with(|c| c.get()[which]);
        d.deserialize_seq(Capped { max, what, key, _t: std::marker::PhantomData })
    }

    pub(super) fn argv<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        capped(d, 0, "arguments", "argv-max-count")
    }

    pub(super) fn files<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<FileBody>, D::Error> {
        capped(d, 1, "files", "files-max-count")
    }

    pub(super) fn patterns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        capped(d, 2, "patterns", "return-patterns-max")
    }
}

/// An input file: a path relative to the run's work directory, and its bytes in base64.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileBody {
    /// Relative to the work directory: plain names only (no `..`, `.`, or leading `/`).
    pub path: String,
    /// The file's bytes, base64.
    pub content: String,
}

/// Limits a request may set, each only tighter than its policy's.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitsBody {
    /// The wall-clock limit, from the hand-over.
    pub wall_timeout_ms: Option<u64>,
    /// The run's cgroup memory limit (needs a jail built for the request).
    pub memory_max_bytes: Option<u64>,
    /// The run's cgroup process and thread limit (needs a jail built for the request).
    pub pids_max: Option<u64>,
    /// Output kept (or streamed) per stream; the rest is counted and dropped.
    pub stdout_max_bytes: Option<u64>,
    pub stderr_max_bytes: Option<u64>,
    /// A Wasm guest's linear memory (needs a jail built for the request).
    pub wasm_memory_max_bytes: Option<u64>,
    /// A Wasm guest's fuel, about one unit per instruction (needs a jail built for the
    /// request).
    pub fuel: Option<u64>,
}

/// A refusal: HTTP status, a stable code, a message and the request field it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), field: None, retry_after: None }
    }

    /// A 400 about one field of the request.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError { field: Some(field.into()), ..ApiError::new(status::BAD_REQUEST, "bad-request", message) }
    }

    pub fn retry_after(mut self, seconds: u64) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// `{"error": {"code", "message", "field"}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut e = serde_json::json!({ "code": self.code, "message": self.message });
        if let Some(f) = &self.field {
            e["field"] = f.clone().into();
        }
        serde_json::json!({ "error": e })
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
    /// The runtime reads its code framed ([`stockade::handover`]); else the code is its stdin.
    pub framed: bool,
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

/// Decodes a request body: JSON, every field known and typed, lists no longer than `caps` allow
/// (stopped while parsing); an error names the field.
pub fn decode(body: &[u8], caps: &RequestCaps) -> Result<RunBody, ApiError> {
    let argv_max = (caps.argv_max_count as usize).min(crate::handover::MAX_ARGS);
    bounded::CAPS.with(|c| c.set([argv_max, caps.files_max_count as usize, caps.return_patterns_max as usize]));
    let decoded = decode_json(body);
    bounded::CAPS.with(|c| c.set([usize::MAX; 3]));
    decoded
}

fn decode_json(body: &[u8]) -> Result<RunBody, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: RunBody = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { None } else { Some(path) };
        let message = e.inner().to_string().lines().next().unwrap_or("").to_string();
        ApiError { field, ..ApiError::new(status::BAD_REQUEST, "bad-request", message) }
    })?;
    de.end().map_err(|e| ApiError::new(status::BAD_REQUEST, "bad-request", e.to_string()))?;
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
    let l = &body.limits;
    let policy = tightened(named_policy, &policy_name, l)?;
    let needs_own_jail = l.memory_max_bytes.is_some()
        || l.pids_max.is_some()
        || l.wasm_memory_max_bytes.is_some()
        || l.fuel.is_some()
        || matches!(target, Target::Wasm(_));
    if let Target::Wasm(m) = &target
        && m.len() as u64 > policy.wasm.module_max_bytes
    {
        return Err(ApiError::field(
            "module",
            format!(
                "{} bytes, more than policy {policy_name:?}'s wasm.module-max-bytes ({})",
                m.len(),
                policy.wasm.module_max_bytes
            ),
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
        policy,
        wall_timeout: l.wall_timeout_ms.map(Duration::from_millis),
        stdout_max_bytes: l.stdout_max_bytes,
        stderr_max_bytes: l.stderr_max_bytes,
        needs_own_jail,
        return_files,
    })
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
                    status::NOT_FOUND,
                    "policy-not-found",
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
    Ok(Some(Pick { patterns: set, max_files: r.return_files_max_count as usize, max_bytes: r.return_files_max_bytes }))
}

/// The named policy with a request's limits in it, each checked: no looser than the policy's,
/// no lower than a jail's floor. A jail built for the request holds them all; a warm one takes
/// the wall clock and the output caps at its start.
fn tightened(named: &Policy, name: &str, l: &LimitsBody) -> Result<Policy, ApiError> {
    use crate::policy::{MEMORY_MAX_FLOOR, PIDS_MAX_FLOOR, WASM_MEMORY_FLOOR};
    let mut policy = named.clone();
    let tight = Tighten { policy: name };
    let wall_ms = u64::try_from(policy.wall_timeout.as_millis()).unwrap_or(u64::MAX);
    let wall = tight.check("limits.wall-timeout-ms", l.wall_timeout_ms, Some(wall_ms), 1)?;
    policy.stdout_max_bytes = tight.check("limits.stdout-max-bytes", l.stdout_max_bytes, policy.stdout_max_bytes, 1)?;
    policy.stderr_max_bytes = tight.check("limits.stderr-max-bytes", l.stderr_max_bytes, policy.stderr_max_bytes, 1)?;
    let cg = &mut policy.cgroups;
    cg.memory_max_bytes =
        tight.check("limits.memory-max-bytes", l.memory_max_bytes, cg.memory_max_bytes, MEMORY_MAX_FLOOR)?;
    cg.pids_max = tight.check("limits.pids-max", l.pids_max, cg.pids_max, PIDS_MAX_FLOOR)?;
    let w = &mut policy.wasm;
    let wasm_memory = tight.check(
        "limits.wasm-memory-max-bytes",
        l.wasm_memory_max_bytes,
        Some(w.memory_max_bytes),
        WASM_MEMORY_FLOOR,
    )?;
    w.fuel = tight.check("limits.fuel", l.fuel, w.fuel, 1)?;
    if let Some(m) = wasm_memory {
        w.memory_max_bytes = m;
    }
    if let Some(ms) = wall {
        policy.wall_timeout = Duration::from_millis(ms);
    }
    Ok(policy)
}

/// Limits only tighten their policy.
struct Tighten<'a> {
    policy: &'a str,
}

impl Tighten<'_> {
    /// `asked`, when it is no looser than `policy` and at least `floor` (the least a jail is
    /// built or a run is held with).
    fn check(&self, field: &str, asked: Option<u64>, policy: Option<u64>, floor: u64) -> Result<Option<u64>, ApiError> {
        match (asked, policy) {
            (None, p) => Ok(p),
            (Some(0), _) if floor <= 1 => Err(ApiError::field(field, "must be more than 0")),
            (Some(a), _) if a < floor => {
                Err(ApiError::field(field, format!("{a} is below {floor}, the least a jail is built with")))
            }
            (Some(a), Some(p)) if a > p => Err(ApiError::field(
                field,
                format!("{a} is looser than policy {:?}'s {p}: limits may only tighten the policy", self.policy),
            )),
            (Some(a), _) => Ok(Some(a)),
        }
    }
}

/// The OpenAPI 3.1 description of API v1 (`docs/openapi.json` is this, checked by a test; `stockade
/// serve --openapi` prints it). The request and report schemas come from the types themselves.
pub fn openapi() -> serde_json::Value {
    use serde_json::json;
    let mut generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas/".into())
        .into_generator();
    let run = generator.subschema_for::<RunBody>();
    let report = generator.subschema_for::<crate::Report>();
    let mut schemas = serde_json::Map::new();
    for (name, schema) in generator.take_definitions(true) {
        schemas.insert(name, schema);
    }
    let error = json!({
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "stable: bad-request, unauthorized, forbidden, policy-not-found, not-found, method-not-allowed, body-timeout, payload-too-large, unsupported-media-type, queue-full, queue-timeout, busy, draining, runtime-unavailable, jail-setup-failed, internal"},
                "message": {"type": "string"},
                "field": {"type": "string", "description": "the request field the refusal is about (`files[0].path`, `limits.memory-max-bytes`)"}
            }
        }}
    });
    schemas.insert("Error".into(), error);
    schemas.insert(
        "Readiness".into(),
        json!({
            "type": "object",
            "required": ["status", "running", "queued", "warm"],
            "properties": {
                "status": {"type": "string", "enum": ["ok", "starting", "unavailable", "draining"]},
                "running": {"type": "integer"},
                "queued": {"type": "integer"},
                "warm": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "ready": {"type": "integer"}, "target": {"type": "integer"}
                }}},
                "unavailable": {"type": "object", "additionalProperties": {"type": "string"}, "description": "each runtime that cannot run (or not yet), and why"}
            }
        }),
    );
    schemas.insert(
        "RunResult".into(),
        json!({
            "description": "The report (the same schema as `stockade run --report -`), plus the files given back when `return-files` asked for some.",
            "allOf": [report, {
                "type": "object",
                "properties": {
                    "files": {"type": "array", "items": {
                        "type": "object",
                        "required": ["path", "bytes", "content"],
                        "properties": {
                            "path": {"type": "string"},
                            "bytes": {"type": "integer", "minimum": 0},
                            "content": {"type": "string", "description": "base64"}
                        }
                    }},
                    "files-capped": {"type": "boolean", "description": "matching files were left out at return-files-max-count or -bytes"},
                    "files-skipped": {"type": "array", "items": {
                        "type": "object",
                        "required": ["path", "reason"],
                        "properties": {
                            "path": {"type": "string", "description": "relative; a name that is not UTF-8 has U+FFFD in its place"},
                            "reason": {"type": "string"}
                        }
                    }, "description": "matching entries not given back, each with the reason (the first 100)"},
                    "files-skipped-count": {"type": "integer", "minimum": 0, "description": "how many matching entries were not given back in all"}
                }
            }]
        }),
    );
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
    let busy = |d: &str| {
        let mut e = err(d);
        e["headers"] = json!({"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}});
        e
    };
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "stockade service API",
            "version": "1",
            "description": "Runs code in stockade jails: `stockade serve`. See docs/api.md."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "paths": {
            "/v1/runs": {"post": {
                "summary": "Run code (or a Wasm module) in a jail and report what happened",
                "parameters": [{
                    "name": "stream", "in": "query", "required": false,
                    "schema": {"type": "string", "enum": ["ndjson"]},
                    "description": "answer as NDJSON events as output happens: {\"stdout\": TEXT}, {\"stderr\": TEXT} (or stdout-base64/stderr-base64), then {\"report\": ...} or {\"error\": ...}"
                }],
                "requestBody": {"required": true, "content": {"application/json": {"schema": run}}},
                "responses": {
                    "200": {"description": "the run happened (whatever its status)", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/RunResult"}},
                        "application/x-ndjson": {"schema": {"type": "string"}}
                    }},
                    "400": err("a bad request: the field is named"),
                    "401": err("TCP without a bearer token"),
                    "403": err("a token that is not accepted"),
                    "404": err("no such policy"),
                    "408": err("the body did not arrive in time"),
                    "413": err("the body is over requests.body-max-bytes"),
                    "415": err("not application/json"),
                    "429": busy("the queue is full"),
                    "500": err("the jail could not be built, or a bug of the server's: never bad input; the message has an incident number for the server's log"),
                    "503": busy("the server is draining, the queue wait timed out, too many bodies or answers are in memory, or the runtime is unavailable")
                }
            }},
            "/v1/health": {"get": {
                "summary": "Readiness, as /v1/health/ready (no token needed)",
                "responses": {
                    "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}},
                    "503": {"description": "starting, a runtime unavailable, or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}}
                }
            }},
            "/v1/health/ready": {"get": {
                "summary": "Readiness: a jail of every runtime was built and none is failing (no token needed; for balancers and readiness probes)",
                "responses": {
                    "200": {"description": "every runtime can run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}},
                    "503": {"description": "starting, a runtime unavailable (named, with the reason), or draining", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}}
                }
            }},
            "/v1/health/live": {"get": {
                "summary": "Liveness: the server answers (no token needed; for liveness probes)",
                "responses": {
                    "200": {"description": "alive", "content": {"application/json": {"schema": {"type": "object", "properties": {
                        "status": {"type": "string", "enum": ["alive"]},
                        "uptime-s": {"type": "integer"}
                    }}}}}
                }
            }},
            "/v1/info": {"get": {
                "summary": "Version, runtimes, policies with their limits, request caps, and what this host enforces of each runtime's jail",
                "responses": {"200": {"description": "what this server serves", "content": {"application/json": {"schema": {"type": "object"}}}}}
            }},
            "/metrics": {"get": {
                "summary": "Prometheus metrics (OpenMetrics text)",
                "responses": {"200": {"description": "metrics", "content": {"application/openmetrics-text": {"schema": {"type": "string"}}}}}
            }}
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "TCP listeners: a token from server.tokens-file; the unix socket is guarded by its mode and group"}}
        }
    })
}
