//! `stockade mcp`: a Model Context Protocol server on stdio (the `rmcp` crate speaks the
//! protocol) with two tools, `run_python` and `run_javascript`. Each call is a request of API v1
//! (`crates/stockade/src/api/`), checked the same way: the model may send code, stdin, files and *tighter*
//! limits (a looser one is refused, naming the field and the ceiling, as the HTTP API does); the
//! policy and the ceiling of every limit come from the operator's flags or configuration, never
//! from the model. The operator's ceiling is checked against the policy when the server starts.
//!
//! By default the runs happen in this process, through the same engine `stockade serve` uses
//! (its configuration file, warm pools included): no daemon needed. With `--serve SOCKET` the
//! tools are a front for a running server instead, over its unix socket.
//!
//! Imports (layers): `args`.

mod backend;
mod host;
mod remote;

use backend::Backend;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use stockade::Report;
use stockade::api::session::{SessionBody, SessionRunBody};
use stockade::api::{self, ApiError, ErrorCode, FileBody, RunBody};
use stockade::policy::Limits;
use stockade_engine::start;

pub use crate::args::{McpArgs, SessionMode};

/// A tool call: what the model may send.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The program's source code.
    pub code: String,
    /// Text given to the program on its standard input.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Text files written into the program's working directory (/app) before it starts: a
    /// relative path to its content.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Tighter limits than the operator's (a looser one is refused).
    #[serde(default)]
    pub limits: Option<ToolLimits>,
}

/// Limits a call may tighten.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolLimits {
    /// Wall-clock limit, milliseconds.
    pub wall_timeout_ms: Option<u64>,
    /// Memory limit, bytes.
    pub memory_max_bytes: Option<u64>,
    /// Most bytes of stdout (and of stderr) returned.
    pub output_max_bytes: Option<u64>,
}

/// What a run did, as the tool returns it (structured content; the same as JSON text).
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunOutput {
    /// How the run ended: ok, exited-nonzero, timeout, oom, signaled, wasm-trap, ...
    pub status: String,
    /// The program's exit code, when it exited.
    pub exit_code: Option<i64>,
    pub stdout: String,
    pub stderr: String,
    /// Output past the limit was cut off.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub wall_ms: f64,
    pub cpu_ms: f64,
    /// Most memory the run held at once, bytes.
    pub memory_peak_bytes: Option<u64>,
    /// What went wrong, in words, when the jail itself failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The files in /app after the run, kept for the next call (with sessions on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_files: Option<Vec<String>>,
    /// What the workspace did not keep, and why; or that an earlier workspace had ended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The value of the code's last expression (as a notebook cell's), when it is JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// That value's repr (Python) or String() (JavaScript), when it is not JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_repr: Option<String>,
    /// How many figures the code left open (run_python3 with matplotlib): each follows as an
    /// image content block (PNG).
    #[serde(skip_serializing_if = "is_zero")]
    pub figures: usize,
    /// The figures, as image content (not part of the structured content).
    #[serde(skip)]
    #[schemars(skip)]
    images: Vec<stockade::report::GivenOutput>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A run's answer as a tool result: its [`RunOutput`] as structured content (and as JSON text),
/// then each figure as an image.
impl rmcp::handler::server::tool::IntoCallToolResult for RunOutput {
    fn into_call_tool_result(mut self) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let images = std::mem::take(&mut self.images);
        let value = serde_json::to_value(&self).map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        let mut result = rmcp::model::CallToolResult::structured(value);
        result.content.extend(images.into_iter().map(|i| rmcp::model::ContentBlock::image(i.base64, i.kind)));
        Ok(result.into())
    }
}

impl RunOutput {
    fn from_report(r: Report) -> RunOutput {
        // Text as the program wrote it; bytes that are not UTF-8 (sent base64) as lossy text.
        let text = |s: stockade::report::StreamReport| match (s.text, s.base64) {
            (Some(t), _) => t,
            (None, Some(b)) => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            (None, None) => String::new(),
        };
        RunOutput {
            status: r.status.as_str().to_string(),
            exit_code: r.exit_code.map(i64::from),
            stdout_truncated: r.stdout.truncated,
            stderr_truncated: r.stderr.truncated,
            stdout: text(r.stdout),
            stderr: text(r.stderr),
            wall_ms: r.wall_ms,
            cpu_ms: r.cpu_user_ms + r.cpu_sys_ms,
            memory_peak_bytes: r.memory_peak_bytes,
            error: r.error,
            workspace_files: None,
            notes: Vec::new(),
            value: r.value,
            value_repr: r.value_repr,
            figures: r.outputs.len(),
            images: r.outputs,
        }
    }
}

impl ToolLimits {
    /// As a run's limits (the output cap is stdout's and stderr's).
    fn limits(&self) -> Limits {
        Limits {
            wall_timeout_ms: self.wall_timeout_ms,
            memory_max_bytes: self.memory_max_bytes,
            stdout_max_bytes: self.output_max_bytes,
            stderr_max_bytes: self.output_max_bytes,
            ..Limits::default()
        }
    }
}

/// A limit's name as a tool call writes it, and as the operator's flag.
fn tool_names(key: &str) -> (&'static str, &'static str) {
    match key {
        "wall-timeout-ms" => ("limits.wall_timeout_ms", "--wall-timeout-ms"),
        "memory-max-bytes" => ("limits.memory_max_bytes", "--memory-max-bytes"),
        _ => ("limits.output_max_bytes", "--output-max-bytes"),
    }
}

#[derive(Clone)]
struct Tools {
    backend: Arc<Backend>,
    policy: Option<String>,
    /// The operator's limits: every call runs with these, or tighter ones it asks for.
    ceiling: Limits,
    /// This connection's session of each runtime, made at its first call (`--session
    /// workspace`), and `None` without sessions.
    sessions: Option<Arc<tokio::sync::Mutex<BTreeMap<String, String>>>>,
    /// The sessions outlive the connection (an engine of this process's with a state directory
    /// of its own): the next `stockade mcp` on it takes them up again.
    keep: bool,
    /// The sessions keep an interpreter each (`--session live`).
    live: bool,
    /// The operator's tools the code may call (`--host-tools`).
    host: Option<host::HostTools>,
    tool_router: ToolRouter<Tools>,
}

/// A file tool's call: a path in /app, of the session of `runtime`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileArgs {
    /// Relative to /app.
    pub path: String,
    /// The session's runtime: python (the default) or javascript.
    #[serde(default)]
    pub runtime: Option<String>,
}

/// `write_file`'s call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// Relative to /app; its directories are made.
    pub path: String,
    /// The file's text.
    pub content: String,
    /// The session's runtime: python (the default) or javascript.
    #[serde(default)]
    pub runtime: Option<String>,
}

/// `list_files`'s call.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// The session's runtime: python (the default) or javascript.
    #[serde(default)]
    pub runtime: Option<String>,
}

/// A file's text, as `read_file` returns it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileText {
    pub path: String,
    pub bytes: u64,
    /// Its bytes as text (bytes that are not UTF-8 shown as U+FFFD).
    pub content: String,
}

/// `list_files`' answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Listing {
    pub files: Vec<api::session::FileInfo>,
}

#[tool_router(router = tool_router)]
impl Tools {
    fn new(
        backend: Backend,
        policy: Option<String>,
        ceiling: Limits,
        mode: SessionMode,
        host: Option<host::HostTools>,
        keep: bool,
        python3: bool,
    ) -> Tools {
        let mut tool_router = Self::tool_router();
        if !python3 {
            tool_router.remove_route("run_python3");
        }
        let sessions = match mode {
            SessionMode::Workspace | SessionMode::Live => Some(Arc::default()),
            SessionMode::None => {
                for name in ["list_files", "read_file", "write_file"] {
                    tool_router.remove_route(name);
                }
                None
            }
        };
        let live = mode == SessionMode::Live;
        Tools { backend: Arc::new(backend), policy, ceiling, sessions, keep, live, host, tool_router }
    }

    /// Runs Python 3.14 code (CPython for WASI) in a fresh stockade jail: no network, no host
    /// files, a private /app working directory, limits on time, memory and output. Returns its
    /// stdout, stderr, status and figures.
    #[tool(name = "run_python", output_schema = rmcp::handler::server::tool::schema_for_output::<RunOutput>())]
    async fn run_python(&self, Parameters(args): Parameters<RunArgs>) -> Result<RunOutput, String> {
        self.run("python", args).await
    }

    /// Runs Python 3 code with the host's interpreter and its packages (numpy, pandas,
    /// matplotlib where installed) in a fresh stockade jail: no network, the host's files
    /// read-only, a private /app working directory, limits on time, memory and output. Returns
    /// its stdout, stderr, status, the value of its last expression, and the matplotlib figures
    /// it left open as images.
    #[tool(name = "run_python3", output_schema = rmcp::handler::server::tool::schema_for_output::<RunOutput>())]
    async fn run_python3(&self, Parameters(args): Parameters<RunArgs>) -> Result<RunOutput, String> {
        self.run("python3", args).await
    }

    /// Runs JavaScript (QuickJS, with its std and os modules) in a fresh stockade jail: no
    /// network, no host files, a private /app working directory, limits on time, memory and
    /// output. Returns its stdout, stderr, status and figures.
    #[tool(name = "run_javascript", output_schema = rmcp::handler::server::tool::schema_for_output::<RunOutput>())]
    async fn run_javascript(&self, Parameters(args): Parameters<RunArgs>) -> Result<RunOutput, String> {
        self.run("javascript", args).await
    }

    /// Lists the files in /app of this conversation's session (kept between calls), with their
    /// sizes.
    #[tool(name = "list_files")]
    async fn list_files(&self, Parameters(args): Parameters<ListArgs>) -> Result<Json<Listing>, String> {
        let id = self.session(runtime_of(args.runtime.as_deref())).await?;
        Ok(Json(Listing { files: self.backend.files(&id).await.map_err(said)? }))
    }

    /// Reads a file of /app of this conversation's session, as text.
    #[tool(name = "read_file")]
    async fn read_file(&self, Parameters(args): Parameters<FileArgs>) -> Result<Json<FileText>, String> {
        let id = self.session(runtime_of(args.runtime.as_deref())).await?;
        let bytes = self.backend.get_file(&id, &args.path).await.map_err(said)?;
        let content = String::from_utf8_lossy(&bytes).into_owned();
        Ok(Json(FileText { path: args.path, bytes: bytes.len() as u64, content }))
    }

    /// Writes a text file into /app of this conversation's session (the next run sees it).
    #[tool(name = "write_file")]
    async fn write_file(&self, Parameters(args): Parameters<WriteArgs>) -> Result<Json<Listing>, String> {
        let id = self.session(runtime_of(args.runtime.as_deref())).await?;
        let content = args.content.into_bytes();
        self.backend.put_file(&id, &args.path, content).await.map_err(said)?;
        Ok(Json(Listing { files: self.backend.files(&id).await.map_err(said)? }))
    }
}

/// A file tool's runtime: python unless it names another.
fn runtime_of(asked: Option<&str>) -> &str {
    asked.unwrap_or("python")
}

impl Tools {
    /// The request of API v1 for a call: its limits within the operator's ceiling (a looser one
    /// is refused, naming the call's field and the ceiling).
    fn body(&self, runtime: &str, args: RunArgs) -> Result<RunBody, String> {
        use base64::Engine as _;
        let asked = args.limits.as_ref().map(ToolLimits::limits).unwrap_or_default();
        let limits = asked.within(&self.ceiling, "the operator's ceiling").map_err(|e| {
            let (field, flag) = tool_names(e.key);
            format!("{}: {} ({flag}) ({field})", api::ErrorCode::BadRequest, e.message)
        })?;
        let files = args
            .files
            .into_iter()
            .map(|(path, content)| FileBody {
                path,
                content: base64::engine::general_purpose::STANDARD.encode(content),
            })
            .collect();
        Ok(RunBody {
            runtime: runtime.to_string(),
            code: Some(args.code),
            module: None,
            argv: Vec::new(),
            stdin: args.stdin,
            stdin_base64: None,
            files,
            policy: self.policy.clone(),
            limits,
            return_files: Vec::new(),
            // The operator's tools, if any (the model declares none).
            tools: self.host.as_ref().map(|h| h.bodies.clone()).unwrap_or_default(),
            // The runtime's policy says what it may reach; a model does not widen or narrow it.
            egress_allow: None,
        })
    }

    async fn run(&self, runtime: &str, args: RunArgs) -> Result<RunOutput, String> {
        let body = self.body(runtime, args)?;
        if self.sessions.is_none() {
            let report = self.backend.run(body, self.host.as_ref()).await.map_err(said)?;
            return Ok(RunOutput::from_report(report));
        }
        let mut notes = Vec::new();
        let id = self.session(runtime).await?;
        let ran = match self.backend.run_in(&id, session_run(&body), self.host.as_ref()).await {
            // The session ended (its idle timeout, say): a new one, said.
            Err(e) if matches!(e.code, ErrorCode::SessionEnded | ErrorCode::SessionNotFound) => {
                self.forget(runtime).await;
                notes.push(format!("the earlier workspace is gone ({}): /app started empty", e.message));
                let id = self.session(runtime).await?;
                self.backend.run_in(&id, session_run(&body), self.host.as_ref()).await
            }
            other => other,
        }
        .map_err(said)?;
        let (report, part) = ran;
        let mut out = RunOutput::from_report(report);
        if let Some(part) = part {
            notes.extend(part.dropped.iter().map(|d| format!("not kept: {}: {}", d.path, d.reason)));
            if part.interpreter == Some(api::session::Interpreter::Restarted) {
                notes.push(
                    "the interpreter ended in this call and was restarted: its variables are gone, /app is kept".into(),
                );
            }
            let id = part.id;
            let files = self.backend.files(&id).await.map_err(said)?;
            out.workspace_files = Some(files.into_iter().map(|f| f.path).collect());
        }
        out.notes = notes;
        Ok(out)
    }

    /// This connection's session of `runtime`, made now when it has none.
    async fn session(&self, runtime: &str) -> Result<String, String> {
        let Some(sessions) = &self.sessions else {
            return Err("this server keeps no sessions (stockade mcp --session none)".into());
        };
        let mut open = sessions.lock().await;
        if let Some(id) = open.get(runtime) {
            return Ok(id.clone());
        }
        let mode = if self.live { api::session::Mode::Live } else { api::session::Mode::Workspace };
        if self.keep
            && let Ok(all) = self.backend.list().await
            && let Some(last) = all.into_iter().rev().find(|s| s.runtime == runtime && s.mode == mode)
        {
            // One a `stockade mcp` before this one left on the state directory: taken up again.
            open.insert(runtime.to_string(), last.id.clone());
            return Ok(last.id);
        }
        let body = SessionBody {
            runtime: runtime.to_string(),
            mode,
            policy: self.policy.clone(),
            limits: self.ceiling,
            idle_timeout_ms: None,
            max_lifetime_ms: None,
        };
        let id = self.backend.open(body).await.map_err(said)?;
        open.insert(runtime.to_string(), id.clone());
        Ok(id)
    }

    async fn forget(&self, runtime: &str) {
        if let Some(sessions) = &self.sessions {
            sessions.lock().await.remove(runtime);
        }
    }

    /// Ends this connection's sessions (when its client goes), unless they outlive it.
    async fn close(&self) {
        let Some(sessions) = self.sessions.as_ref().filter(|_| !self.keep) else { return };
        let open = std::mem::take(&mut *sessions.lock().await);
        for id in open.values() {
            let _ = self.backend.end(id).await;
        }
    }
}

/// A tool call's request, as a run of a session (its runtime and policy are the session's).
fn session_run(body: &RunBody) -> SessionRunBody {
    SessionRunBody {
        code: body.code.clone(),
        argv: body.argv.clone(),
        stdin: body.stdin.clone(),
        stdin_base64: None,
        files: body.files.iter().map(|f| FileBody { path: f.path.clone(), content: f.content.clone() }).collect(),
        return_files: Vec::new(),
        limits: body.limits,
        tools: body.tools.clone(),
    }
}

/// A refusal as a tool error: `unavailable: ...` said as itself (the client's cue that the
/// host, not the call, is the problem), the rest with their code.
pub(super) fn said(e: ApiError) -> String {
    if e.code == ErrorCode::RuntimeUnavailable { e.message } else { e.to_string() }
}

pub(super) fn unavailable(why: &str) -> String {
    format!("unavailable: this host cannot run jails: {why}")
}

/// The operator's ceiling against the policy every tool's runs get: a ceiling looser than its
/// policy would fail every call, so the server does not start.
fn check_ceiling(catalog: &api::Catalog, policy: Option<&str>, ceiling: &Limits) -> Result<(), String> {
    for runtime in ["python", "javascript"] {
        let Some(spec) = catalog.runtimes.get(runtime) else { continue };
        let Some(name) = policy.or(spec.policies.first().map(String::as_str)) else { continue };
        let Some(p) = catalog.policies.get(name) else { continue };
        ceiling.within(&Limits::of(p), &format!("policy {name:?}")).map_err(|e| {
            let (_, flag) = tool_names(e.key);
            format!("mcp: {flag}: {} (the policy of runtime {runtime})", e.message)
        })?;
    }
    Ok(())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        let host = self.host.as_ref().map(host::HostTools::instructions).unwrap_or_default();
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stockade", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "{}{host}",
                if self.live {
                    "Runs code in stockade jails: run_python (CPython 3.14) and run_javascript (QuickJS). \
                 Each language has one interpreter for this conversation, in a jail with no network and \
                 no host files, in the working directory /app: variables, imports and functions one call \
                 defines are there for the next call of the same language, and so are the files in /app \
                 (list_files, read_file and write_file reach them). A call past its time limit restarts \
                 the interpreter (its variables are lost, its files kept), and the call says so. Limits \
                 may only be tightened."
                } else {
                    "Runs code in stockade jails: run_python (CPython 3.14) and run_javascript (QuickJS). \
                 Each call gets a fresh jail and interpreter with no network and no host files, in the \
                 working directory /app; files you pass land there. Unless the operator turned sessions \
                 off, /app is kept between your calls of the same language (variables are not: save \
                 what the next call needs to a file), and list_files, read_file and write_file reach it. \
                 Limits may only be tightened."
                }
            ))
    }
}

pub fn command(args: McpArgs) -> ExitCode {
    let ceiling = ToolLimits {
        wall_timeout_ms: args.wall_timeout_ms,
        memory_max_bytes: args.memory_max_bytes,
        output_max_bytes: args.output_max_bytes,
    }
    .limits();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("stockade-mcp").build() {
        Ok(rt) => rt,
        Err(e) => return crate::fail(format!("mcp: cannot start the async runtime: {e}")),
    };
    // The operator's configuration and ceiling are checked first: a mistake there stops the
    // server, said. A host that cannot build jails does not: every call says why.
    let cfg = match &args.serve {
        Some(_) => None,
        None => match start::front_config(
            args.config.as_deref(),
            args.policy.as_deref(),
            args.state_dir.as_deref(),
            &args.cgroups.flags(),
        ) {
            Ok(c) => Some(c),
            Err(e) => return crate::fail(e),
        },
    };
    if let Some(c) = &cfg
        && let Err(e) = check_ceiling(&c.catalog, args.policy.as_deref(), &ceiling)
    {
        return crate::fail(e);
    }
    let host = match &args.host_tools {
        None => None,
        Some(path) => match host::load(path) {
            Ok(h) => Some(h),
            Err(e) => return crate::fail(format!("mcp: --host-tools: {e}")),
        },
    };
    if let (Some(c), Some(_)) = (&cfg, &host)
        && let Some(rt) =
            ["python", "javascript"].into_iter().find(|r| c.catalog.runtimes.get(*r).is_some_and(|s| !s.host_calls))
    {
        return crate::fail(format!(
            "mcp: --host-tools: runtime {rt:?} of this configuration has no host calls (a Wasm guest or a program under bootstrap = \"python\" has)"
        ));
    }
    // The host's python3 is a tool where the runs go has it (a server says so itself).
    let python3 = args.serve.is_some() || cfg.as_ref().is_some_and(|c| c.catalog.runtimes.contains_key("python3"));
    rt.block_on(async move {
        let backend = match (&args.serve, cfg) {
            (Some(socket), _) => Backend::Server(remote::Remote::new(socket.clone())),
            (None, None) => Backend::Unavailable("no configuration".into()),
            (None, Some(cfg)) => match start::start_engine(cfg).await {
                Ok(engine) => Backend::Here(engine),
                Err(e) => {
                    eprintln!("stockade: mcp: no jail can be built here, every call will say why: {e}");
                    Backend::Unavailable(e)
                }
            },
        };
        let engine = match &backend {
            Backend::Here(e) => Some(e.clone()),
            Backend::Server(_) | Backend::Unavailable(_) => None,
        };
        let keep = engine.is_some() && args.state_dir.is_some();
        let tools = Tools::new(backend, args.policy.clone(), ceiling, args.session, host, keep, python3);
        let served = match tools.clone().serve(rmcp::transport::stdio()).await {
            Ok(s) => s.waiting().await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        // The client has gone: so have its sessions (unless they outlive it; a live one's
        // interpreter is hibernated as the engine drains).
        tools.close().await;
        if let Some(engine) = engine {
            engine.drain().await;
        }
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => crate::fail(format!("mcp: {e}")),
        }
    })
}
