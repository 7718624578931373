//! How a front starts the engine (`stockade serve`, `stockade mcp`): the configuration with the
//! command line's cgroup flags and the delegated cgroup taken, the fd limit raised, the engine
//! built off the async workers and its warm pools filling. Imports the engine and the
//! configuration, never a front.
//!
//! Imports (layers): `config`, `metrics`.

use super::Engine;
use super::metrics::Metrics;
use crate::config;
use std::sync::Arc;
use stockade::layers::cgroup::host::Host;
use stockade::layers::cgroup::service::{self, Delegation};

/// On cgroup v2, takes the delegated cgroup this process was started in (when it is one): the
/// runs' cgroups go below it.
pub fn delegate(cfg: &mut config::Config) -> Result<(), String> {
    match service::take_delegated(&Host::current()).map_err(|e| e.to_string())? {
        Delegation::Taken { runs, controllers } => {
            eprintln!("stockade: cgroup v2: runs go below {runs} ({})", controllers.join(", "));
            for policy in cfg.catalog.policies.values_mut() {
                if policy.cgroups.parent.is_none() {
                    policy.cgroups.parent = Some(runs.clone());
                }
            }
        }
        Delegation::NotDelegated { cgroup } => eprintln!(
            "stockade: cgroup v2: {cgroup} is not delegated to this process (not writable, or other processes in it): runs get their cgroups as `stockade run` does"
        ),
        Delegation::NotV2 => {}
    }
    Ok(())
}

/// The configuration of `stockade serve` for another front (`stockade mcp`): a file or the
/// built-in one (its listeners unused), with the command line's cgroup flags, and the delegated
/// cgroup taken. `policy`: the one every run of this front uses (each runtime may run under it).
pub fn front_config(
    config: Option<&std::path::Path>,
    policy: Option<&str>,
    state_dir: Option<&std::path::Path>,
    cgroups: &config::CgroupFlags,
) -> Result<config::Config, String> {
    let over = config::Overrides { also: policy, state_dir, ..config::Overrides::default() };
    let mut cfg = config::load(config, &over).map_err(|e| e.to_string())?;
    cfg.apply_cgroups(cgroups).map_err(|e| e.to_string())?;
    raise_fd_limit();
    delegate(&mut cfg)?;
    Ok(cfg)
}

/// The engine for another front, its warm pools filling. `Err`: no jail can be built here.
pub async fn start_engine(cfg: config::Config) -> Result<Arc<Engine>, String> {
    let engine = build_engine(cfg).await?;
    engine.fill_pools();
    Ok(engine)
}

/// The engine, built off the async workers (it opens every runtime's grants).
pub async fn build_engine(cfg: config::Config) -> Result<Arc<Engine>, String> {
    let metrics = Arc::new(Metrics::new());
    let engine = tokio::task::spawn_blocking(move || Engine::new(&cfg, metrics))
        .await
        .map_err(|_| "the engine's builder ended abnormally".to_string())??;
    Ok(Arc::new(engine))
}

/// A server holds many pipes and connections: its soft fd limit goes up to the hard one (the
/// jails set their own, from their policy).
pub fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut l = getrlimit(Resource::Nofile);
    if let Some(max) = l.maximum {
        l.current = Some(max.min(1 << 20));
        let _ = setrlimit(Resource::Nofile, l);
    }
}
