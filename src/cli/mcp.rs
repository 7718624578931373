//! `stockade mcp`: a Model Context Protocol server on stdio (the `rmcp` crate speaks the
//! protocol) with two tools, `run_python` and `run_javascript`. Each call is a request of API v1
//! (`src/api/`), checked the same way: the model may send code, stdin, files and *tighter*
//! limits (a looser one is refused, naming the field and the ceiling, as the HTTP API does); the
//! policy and the ceiling of every limit come from the operator's flags or configuration, never
//! from the model. The operator's ceiling is checked against the policy when the server starts.
//!
//! By default the runs happen in this process, through the same engine `stockade serve` uses
//! (its configuration file, warm pools included): no daemon needed. With `--serve SOCKET` the
//! tools are a front for a running server instead, over its unix socket.

use crate::engine::Engine;
use crate::serve;
use clap::Args;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use stockade::Report;
use stockade::api::{self, ApiError, ErrorBody, FileBody, RunBody};
use stockade::policy::Limits;

/// `stockade mcp`'s arguments: what every tool call runs under.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// A server configuration (TOML, as for `stockade serve`): its policies, runtimes, warm pools
    /// and request caps apply (listeners are ignored). Without one: the built-in defaults.
    #[arg(long, value_name = "CONFIG", conflicts_with = "serve")]
    pub config: Option<PathBuf>,
    /// Send the runs to a running `stockade serve` on this unix socket (its warm pools, its
    /// policies) instead of running them here.
    #[arg(long, value_name = "SOCKET")]
    pub serve: Option<PathBuf>,
    /// The named policy every run uses (default: each runtime's own).
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
    /// The wall-clock limit of every run, milliseconds (at most the policy's); a call may ask
    /// for less.
    #[arg(long, value_name = "MS")]
    pub wall_timeout_ms: Option<u64>,
    /// The memory limit of every run, bytes (at most the policy's).
    #[arg(long, value_name = "BYTES")]
    pub memory_max_bytes: Option<u64>,
    /// How much of stdout (and of stderr) a call gets back, bytes (at most the policy's).
    #[arg(long, value_name = "BYTES")]
    pub output_max_bytes: Option<u64>,
    #[command(flatten)]
    pub cgroups: crate::args::CgroupArgs,
}

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

/// Where the runs happen.
enum Backend {
    /// In this process, through `stockade serve`'s engine.
    Here(Arc<Engine>),
    /// A running server's unix socket.
    Server(PathBuf),
    /// No jail can be built here: every call says why (the MCP client still gets its answers,
    /// not a server that vanished before `initialize`).
    Unavailable(String),
}

#[derive(Clone)]
struct Tools {
    backend: Arc<Backend>,
    policy: Option<String>,
    /// The operator's limits: every call runs with these, or tighter ones it asks for.
    ceiling: Limits,
    tool_router: ToolRouter<Tools>,
}

#[tool_router(router = tool_router)]
impl Tools {
    fn new(backend: Backend, policy: Option<String>, ceiling: Limits) -> Tools {
        Tools { backend: Arc::new(backend), policy, ceiling, tool_router: Self::tool_router() }
    }

    /// Runs Python 3.14 code (CPython for WASI) in a fresh stockade jail: no network, no host
    /// files, a private /app working directory, limits on time, memory and output. Returns its
    /// stdout, stderr, status and figures.
    #[tool(name = "run_python")]
    async fn run_python(&self, Parameters(args): Parameters<RunArgs>) -> Result<Json<RunOutput>, String> {
        self.run("python", args).await.map(Json)
    }

    /// Runs JavaScript (QuickJS, with its std and os modules) in a fresh stockade jail: no
    /// network, no host files, a private /app working directory, limits on time, memory and
    /// output. Returns its stdout, stderr, status and figures.
    #[tool(name = "run_javascript")]
    async fn run_javascript(&self, Parameters(args): Parameters<RunArgs>) -> Result<Json<RunOutput>, String> {
        self.run("javascript", args).await.map(Json)
    }
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
        })
    }

    async fn run(&self, runtime: &str, args: RunArgs) -> Result<RunOutput, String> {
        let body = self.body(runtime, args)?;
        let report = match &*self.backend {
            Backend::Here(engine) => here(engine, body).await.map_err(|e| e.to_string())?,
            Backend::Server(socket) => remote(socket, &body).await?,
            Backend::Unavailable(why) => return Err(format!("unavailable: this host cannot run jails: {why}")),
        };
        Ok(RunOutput::from_report(report))
    }
}

/// One run through the engine in this process: the same checks as a request to the server.
async fn here(engine: &Arc<Engine>, body: RunBody) -> Result<Report, ApiError> {
    let request = api::check(body, engine.catalog())?;
    engine.available(&request)?;
    let permit = engine.admit().await?;
    Ok(engine.execute(permit, request, None).await?.report)
}

/// One run through a server's unix socket (hyper's client).
async fn remote(socket: &std::path::Path, body: &RunBody) -> Result<Report, String> {
    use http_body_util::{BodyExt, Full};
    let unreachable = |e: &dyn std::fmt::Display| format!("unavailable: cannot reach {}: {e}", socket.display());
    let io = tokio::net::UnixStream::connect(socket).await.map_err(|e| unreachable(&e))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Full<hyper::body::Bytes>>(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| unreachable(&e))?;
    tokio::spawn(conn);
    let request = hyper::Request::post("/v1/runs")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(hyper::body::Bytes::from(serde_json::to_vec(body).unwrap_or_default())))
        .map_err(|e| unreachable(&e))?;
    let response = sender.send_request(request).await.map_err(|e| unreachable(&e))?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| unreachable(&e))?.to_bytes();
    if status.is_success() {
        // No files were asked back: the answer is the report.
        return serde_json::from_slice::<Report>(&bytes).map_err(|e| unreachable(&e));
    }
    match serde_json::from_slice::<ErrorBody>(&bytes) {
        Ok(refused) => Err(refused.error.to_string()),
        Err(_) => Err(format!("the server refused the run ({status})")),
    }
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stockade", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Runs code in stockade jails: run_python (CPython 3.14) and run_javascript (QuickJS). \
                 Each call gets a fresh jail with no network and no host files; files you pass land in \
                 its working directory /app. Limits may only be tightened.",
            )
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
        Err(e) => return serve::fail(format!("mcp: cannot start the async runtime: {e}")),
    };
    // The operator's configuration and ceiling are checked first: a mistake there stops the
    // server, said. A host that cannot build jails does not: every call says why.
    let cfg = match &args.serve {
        Some(_) => None,
        None => match serve::front_config(args.config.as_deref(), args.policy.as_deref(), &args.cgroups) {
            Ok(c) => Some(c),
            Err(e) => return serve::fail(e),
        },
    };
    if let Some(c) = &cfg
        && let Err(e) = check_ceiling(&c.catalog, args.policy.as_deref(), &ceiling)
    {
        return serve::fail(e);
    }
    rt.block_on(async move {
        let backend = match (&args.serve, cfg) {
            (Some(socket), _) => Backend::Server(socket.clone()),
            (None, None) => Backend::Unavailable("no configuration".into()),
            (None, Some(cfg)) => match serve::start_engine(cfg).await {
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
        let tools = Tools::new(backend, args.policy.clone(), ceiling);
        let served = match tools.serve(rmcp::transport::stdio()).await {
            Ok(s) => s.waiting().await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Some(engine) = engine {
            engine.drain().await;
        }
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => serve::fail(format!("mcp: {e}")),
        }
    })
}
