//! `stockade mcp`: a Model Context Protocol server on stdio (the `rmcp` crate speaks the
//! protocol) with two tools, `run_python` and `run_javascript`. Each call is a request of API v1
//! (`src/api.rs`), checked the same way: the model may send code, stdin, files and *tighter*
//! limits; the policy and the ceiling of every limit come from the operator's flags or
//! configuration, never from the model.
//!
//! By default the runs happen in this process, through the same engine `stockade serve` uses
//! (its configuration file, warm pools included): no daemon needed. With `--serve SOCKET` the
//! tools are a front for a running server instead, over its unix socket.

use crate::serve;
use clap::Args;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use stockade::api::ApiError;

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
    fn from_report(r: &Value) -> RunOutput {
        // Text as the program wrote it; bytes that are not UTF-8 (sent base64) as lossy text.
        let text = |k: &str| match (r[k]["text"].as_str(), r[k]["base64"].as_str()) {
            (Some(t), _) => t.to_string(),
            (None, Some(b)) => {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            (None, None) => String::new(),
        };
        let ms = |k: &str| r[k].as_f64().unwrap_or(0.0);
        RunOutput {
            status: r["status"].as_str().unwrap_or("unknown").to_string(),
            exit_code: r["exit-code"].as_i64(),
            stdout: text("stdout"),
            stderr: text("stderr"),
            stdout_truncated: r["stdout"]["truncated"].as_bool().unwrap_or(false),
            stderr_truncated: r["stderr"]["truncated"].as_bool().unwrap_or(false),
            wall_ms: ms("wall-ms"),
            cpu_ms: ms("cpu-user-ms") + ms("cpu-sys-ms"),
            memory_peak_bytes: r["memory-peak-bytes"].as_u64(),
            error: r["error"].as_str().map(String::from),
        }
    }
}

/// Where the runs happen.
enum Backend {
    /// In this process, through `stockade serve`'s engine.
    Here(Arc<serve::engine::Engine>),
    /// A running server's unix socket.
    Server(PathBuf),
}

#[derive(Clone)]
struct Tools {
    backend: Arc<Backend>,
    policy: Option<String>,
    ceiling: ToolCeiling,
    tool_router: ToolRouter<Tools>,
}

/// The operator's limits: every call runs at most with these.
#[derive(Clone, Copy, Debug, Default)]
struct ToolCeiling {
    wall_timeout_ms: Option<u64>,
    memory_max_bytes: Option<u64>,
    output_max_bytes: Option<u64>,
}

fn tighter(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

#[tool_router(router = tool_router)]
impl Tools {
    fn new(backend: Backend, policy: Option<String>, ceiling: ToolCeiling) -> Tools {
        Tools { backend: Arc::new(backend), policy, ceiling, tool_router: Self::tool_router() }
    }

    /// Runs Python 3.12 code (CPython for WASI) in a fresh stockade jail: no network, no host
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
    /// The request of API v1 for a call, the operator's ceiling applied.
    fn body(&self, runtime: &str, args: RunArgs) -> Value {
        use base64::Engine as _;
        let asked = args.limits.unwrap_or_default();
        let c = self.ceiling;
        let output = tighter(asked.output_max_bytes, c.output_max_bytes);
        let mut limits = serde_json::Map::new();
        for (key, v) in [
            ("wall-timeout-ms", tighter(asked.wall_timeout_ms, c.wall_timeout_ms)),
            ("memory-max-bytes", tighter(asked.memory_max_bytes, c.memory_max_bytes)),
            ("stdout-max-bytes", output),
            ("stderr-max-bytes", output),
        ] {
            if let Some(v) = v {
                limits.insert(key.into(), v.into());
            }
        }
        let files: Vec<Value> = args
            .files
            .iter()
            .map(|(path, content)| {
                json!({"path": path, "content": base64::engine::general_purpose::STANDARD.encode(content)})
            })
            .collect();
        let mut body = json!({"runtime": runtime, "code": args.code, "files": files, "limits": limits});
        if let Some(s) = args.stdin {
            body["stdin"] = s.into();
        }
        if let Some(p) = &self.policy {
            body["policy"] = p.clone().into();
        }
        body
    }

    async fn run(&self, runtime: &str, args: RunArgs) -> Result<RunOutput, String> {
        let body = self.body(runtime, args);
        let report = match &*self.backend {
            Backend::Here(engine) => here(engine, &body).await.map_err(|e| refused(&e))?,
            Backend::Server(socket) => remote(socket, &body).await?,
        };
        Ok(RunOutput::from_report(&report))
    }
}

/// A refusal, as the tool's error: the code, the message, the field.
fn refused(e: &ApiError) -> String {
    match &e.field {
        Some(f) => format!("{}: {} ({f})", e.code, e.message),
        None => format!("{}: {}", e.code, e.message),
    }
}

/// One run through the engine in this process: the same checks as a request to the server.
async fn here(engine: &Arc<serve::engine::Engine>, body: &Value) -> Result<Value, ApiError> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let parsed = stockade::api::decode(&bytes, &engine.catalog.caps)?;
    let request = stockade::api::check(parsed, &engine.catalog)?;
    engine.available(&request)?;
    let permit = engine.admit().await?;
    let ran = engine.execute(permit, request, None).await?;
    Ok(serde_json::to_value(&ran.report).unwrap_or_default())
}

/// One run through a server's unix socket (hyper's client).
async fn remote(socket: &std::path::Path, body: &Value) -> Result<Value, String> {
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
    let answer: Value = serde_json::from_slice(&bytes).map_err(|e| unreachable(&e))?;
    if status.is_success() {
        return Ok(answer);
    }
    let e = &answer["error"];
    let code = e["code"].as_str().unwrap_or("error");
    let message = e["message"].as_str().unwrap_or("the server refused the run");
    Err(match e["field"].as_str() {
        Some(f) => format!("{code}: {message} ({f})"),
        None => format!("{code}: {message}"),
    })
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stockade", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Runs code in stockade jails: run_python (CPython 3.12) and run_javascript (QuickJS). \
                 Each call gets a fresh jail with no network and no host files; files you pass land in \
                 its working directory /app. Limits may only be tightened.",
            )
    }
}

pub fn command(args: McpArgs) -> ExitCode {
    let ceiling = ToolCeiling {
        wall_timeout_ms: args.wall_timeout_ms,
        memory_max_bytes: args.memory_max_bytes,
        output_max_bytes: args.output_max_bytes,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("stockade-mcp").build() {
        Ok(rt) => rt,
        Err(e) => return serve::fail(format!("mcp: cannot start the async runtime: {e}")),
    };
    rt.block_on(async move {
        let backend = match &args.serve {
            Some(socket) => Backend::Server(socket.clone()),
            None => match serve::start_engine(args.config.as_deref(), args.policy.as_deref()).await {
                // A policy the calls cannot get was said by the configuration's check.
                Ok(engine) => Backend::Here(engine),
                Err(e) => return serve::fail(e),
            },
        };
        let engine = match &backend {
            Backend::Here(e) => Some(e.clone()),
            Backend::Server(_) => None,
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
