//! A Rust program embedding the engine (`stockade-engine`): an engine from a configuration
//! string, one run of Python through its door, the run's output printed (`42`).
//!
//! cargo run --example embed_engine
//!
//! The guests must be installed (`stockade guest install`). The jails' Wasm runner is this very
//! program, exec'd inside each jail: `main` hands it over first.

use std::process::ExitCode;
use stockade::api::RunBody;
use stockade_engine::{Command, Reply, Run, config, start};

/// One runtime, no warm jails: the first run builds its own.
const CONFIG: &str = r#"
version = 1

[runtimes.python]
guest = "python"
warm = 0
"#;

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    if let Some(runner) = stockade::wasm::runner::enter() {
        return Ok(runner);
    }
    let config = config::parse(CONFIG, "embed_engine.rs")?;
    let body: RunBody = serde_json::from_value(serde_json::json!({"runtime": "python", "code": "print(6 * 7)"}))?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let engine = start::start_engine(config).await?;
        let ran = engine.call(None, Command::Run(Run::Fresh(body))).await;
        engine.drain().await;
        let Reply::Ran(ran) = ran? else { return Err("the engine answered a run with something else".into()) };
        let report = &ran.value.report;
        print!("{}", report.stdout.text.as_deref().unwrap_or_default());
        match report.status {
            stockade::Status::Ok => Ok(ExitCode::SUCCESS),
            other => Err(format!("the run ended {}: {}", other.as_str(), report.to_json()).into()),
        }
    })
}
