//! `stockade serve`: the code-execution service, a layer on the library. Async (tokio, hyper,
//! axum) only here at the edge; every jail is built and supervised by the library, synchronously,
//! on a thread of its own.
//!
//! In order: read and check the configuration (and with `--check`, stop there after building
//! every runtime's jail plan once); on cgroup v2, take the delegated cgroup; build the engine
//! (one plan per runtime, its warm pool); bind the listeners; serve until SIGTERM or SIGINT; then
//! drain: stop accepting, refuse the queue, take the warm jails down, let running jobs finish
//! within the drain timeout, and exit.
//!
//! Imports (layers): `args`.

mod answer;
mod batches;
mod duplex;
mod http;
mod idempotency;
mod listen;
mod request;
mod sessions;
mod ui;

pub use crate::args::ServeArgs;
use stockade_engine::config;
use stockade_engine::start;
use stockade_engine::{Engine, metrics::Metrics};

use std::process::ExitCode;
use std::sync::Arc;

pub fn command(args: ServeArgs) -> ExitCode {
    if args.openapi {
        println!("{}", serde_json::to_string_pretty(&stockade::api::openapi()).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if args.print_config {
        print!("{}", config::default_file_text());
        return ExitCode::SUCCESS;
    }
    // `--ui` with no tokens file: a token for this run only, printed with the page's address.
    let mut ui_token = match args.ui && args.tokens_file.is_none() {
        true => match ui::run_token() {
            Ok(t) => Some(t),
            Err(e) => return crate::fail(format!("serve: --ui: cannot draw a token from /dev/urandom: {e}")),
        },
        false => None,
    };
    let over = config::Overrides {
        listen: &args.listen,
        tokens_file: args.tokens_file.as_deref(),
        also: None,
        state_dir: args.state_dir.as_deref(),
        default_state_dir: true,
        ui: args.ui,
        ui_token: ui_token.as_deref(),
    };
    let mut cfg = match config::load(args.config.as_deref(), &over) {
        Ok(c) => c,
        Err(e) => return crate::fail(e),
    };
    if let Err(e) = cfg.apply_cgroups(&args.cgroups.flags()) {
        return crate::fail(e);
    }
    start::raise_fd_limit();
    // Runs get their cgroups below the delegated subtree, when there is one.
    if !args.check
        && let Err(e) = start::delegate(&mut cfg)
    {
        return crate::fail(e);
    }
    // Sockets systemd passed in: taken before any thread starts.
    let passed = if !args.check && cfg.listeners.listen.contains(&config::Listen::Systemd) {
        match listen::passed_in(!cfg.listeners.tokens.is_empty()) {
            Ok(p) => p,
            Err(e) => return crate::fail(format!("serve: {e}")),
        }
    } else {
        Vec::new()
    };
    // A check opens no state directory (a server may be running on it): it checks that one
    // could be, and builds the engine on a directory of its own.
    if args.check
        && let Some(dir) = cfg.bounds.state_dir.take()
        && let Err(e) = stockade_engine::state::check(&dir)
    {
        return crate::fail(format!("{}: sessions.state-dir: {e}", cfg.origin));
    }
    // The engine is built before any other thread starts: the spawner that builds the warm
    // jails is a copy of this process, made while it has one thread.
    let engine = match Engine::new(&cfg, Arc::new(Metrics::new())) {
        Ok(e) => Arc::new(e),
        Err(e) => return crate::fail(e),
    };
    // Without it (a host without clone3, say), warm jails are built on the server's threads:
    // slower, as safe; the log says so.
    if !args.check
        && cfg.bounds.spawner
        && let Err(e) = engine.fork_spawner(|| {
            // The spawner's memory is copied into every warm Wasm jail's runner: no tokens there.
            for token in cfg.listeners.tokens.iter_mut().chain(ui_token.as_mut()) {
                zeroize::Zeroize::zeroize(token);
            }
        })
    {
        eprintln!("stockade serve: {e}: the warm jails are built on the server's threads");
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("stockade-serve").build() {
        Ok(rt) => rt,
        Err(e) => return crate::fail(format!("serve: cannot start the async runtime: {e}")),
    };
    rt.block_on(serve(cfg, engine, args.check, passed, ui_token))
}

async fn serve(
    cfg: config::Config,
    engine: Arc<Engine>,
    check: bool,
    mut passed: Vec<listen::Passed>,
    ui_token: Option<String>,
) -> ExitCode {
    let (origin, listening, bounds) = (cfg.origin.clone(), cfg.listeners.clone(), cfg.bounds.clone());
    let runtimes: Vec<String> =
        cfg.runtimes.values().map(|r| format!("{} ({} warm, policy {})", r.name, r.warm, r.policy)).collect();
    let policies: Vec<String> = cfg.catalog.policies.keys().cloned().collect();
    if check {
        let shown: Vec<String> = listening.listen.iter().map(ToString::to_string).collect();
        println!("{origin}: ok");
        println!("listen: {}", shown.join(", "));
        println!("runtimes: {}", runtimes.join(", "));
        println!("policies: {}", policies.join(", "));
        println!("concurrency {}, queue {}", bounds.concurrency, bounds.queue);
        if listening.ui {
            println!("playground: at / of the TCP listeners");
        }
        return ExitCode::SUCCESS;
    }
    let mut bound = Vec::new();
    let mut listeners = Vec::new();
    for l in &listening.listen {
        match listen::bind(l, listening.socket_mode, listening.socket_gid, &mut passed) {
            Ok(b) => {
                listeners.extend(b.iter().map(listen::Bound::describe));
                bound.extend(b);
            }
            Err(e) => return crate::fail(format!("serve: {e}")),
        }
    }
    engine.fill_pools();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let conns = Arc::new(tokio::sync::Semaphore::new(bounds.max_connections));
    let bodies = request::Bodies::new(&bounds);
    let caps = &engine.catalog().caps;
    let keys = Arc::new(idempotency::Keys::new(
        std::time::Duration::from_millis(caps.idempotency_window_ms),
        caps.idempotency_max_bytes,
    ));
    let mut loops = Vec::new();
    for b in bound {
        let tokens = match b {
            listen::Bound::Tcp(_) => Some(Arc::from(listening.tokens.clone())),
            listen::Bound::Unix(..) => None,
        };
        let app = request::App {
            engine: engine.clone(),
            tokens,
            bodies: bodies.clone(),
            keys: keys.clone(),
            ui: listening.ui,
        };
        let timeouts = listen::Timeouts { header: bounds.header_timeout, write: bounds.write_timeout };
        loops.push(tokio::spawn(listen::serve(b, http::router(app), conns.clone(), timeouts, stop_rx.clone())));
    }
    eprintln!("stockade serve: listening on {}; runtimes: {}", listeners.join(", "), runtimes.join(", "));
    if listening.ui {
        ui::announce(&listeners, ui_token.as_deref().filter(|t| listening.tokens.iter().any(|k| k == t)));
    }
    // Under systemd (Type=notify), the service is started now; elsewhere NOTIFY_SOCKET is unset and
    // this does nothing. A jail never sees the variable (its environment is the policy's).
    if let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready]) {
        eprintln!("stockade serve: cannot tell systemd it is ready (NOTIFY_SOCKET): {e}");
    }

    let signal = match wait_for_stop().await {
        Ok(s) => s,
        Err(e) => return crate::fail(format!("serve: cannot wait for signals: {e}")),
    };
    eprintln!("stockade serve: {signal}: draining (at most {} ms)", bounds.drain_timeout.as_millis());
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    let _ = stop_tx.send(true);
    for l in loops {
        let _ = l.await;
    }
    let drained = tokio::time::timeout(bounds.drain_timeout, async {
        engine.drain().await;
        // Every connection closed: each held one of these until then.
        let _ = conns.acquire_many(u32::try_from(bounds.max_connections).unwrap_or(u32::MAX)).await;
    })
    .await;
    match drained {
        Ok(()) => eprintln!("stockade serve: drained"),
        Err(_) => eprintln!(
            "stockade serve: drain timeout: {} run(s) still running are killed with the server",
            engine.running()
        ),
    }
    ExitCode::SUCCESS
}

/// SIGTERM or SIGINT (through signal-hook's self-pipe, on a thread of its own).
async fn wait_for_stop() -> std::io::Result<&'static str> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new().name("stockade-signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let _ = tx.send(if sig == SIGTERM { "SIGTERM" } else { "SIGINT" });
        }
    })?;
    Ok(rx.await.unwrap_or("signal thread ended"))
}
