//! What the engine says of itself: its health (readiness, for balancers and probes) and what it
//! serves (`GET /v1/info`: its version, runtimes, policies with their limits, request caps, and
//! what this host enforces of each runtime's jail, layer by layer).
//!
//! Imports (layers): `config`.

use super::Engine;
use crate::config::Kind;
use std::collections::BTreeMap;
pub use stockade::api::info::{Health, Readiness};
use stockade::api::info::{Info, PolicyInfo, PolicyLimits, RequestsInfo, RuntimeInfo, RuntimeRuns, SessionsInfo, Warm};
use stockade::policy::Limits;

impl Engine {
    /// Ok while every runtime can run (a jail of each was built, and its last ones did not fail);
    /// else starting (a runtime's first jail is not built yet) or unavailable (a runtime's last
    /// jails failed), naming each runtime and why; draining while draining.
    pub fn health(&self) -> Health {
        let mut unavailable = BTreeMap::new();
        let mut failing = false;
        let mut warm = BTreeMap::new();
        for (n, p) in &self.pools {
            if let Err(why) = p.ready() {
                failing |= p.available().is_err() || p.runs_failing();
                unavailable.insert(n.clone(), why);
            }
            warm.insert(n.clone(), Warm { ready: p.fill(), target: p.target });
        }
        let status = match (self.draining(), unavailable.is_empty(), failing) {
            (true, _, _) => Readiness::Draining,
            (false, true, _) => Readiness::Ok,
            (false, false, true) => Readiness::Unavailable,
            (false, false, false) => Readiness::Starting,
        };
        Health { status, running: self.running(), queued: self.queued(), warm, unavailable }
    }

    /// What this engine serves (`GET /v1/info`).
    pub fn info(&self) -> Info {
        let runtimes = self.runtimes.values().map(|rt| self.runtime_info(rt)).collect();
        let policies = self
            .catalog
            .policies
            .iter()
            .map(|(name, p)| PolicyInfo {
                name: name.clone(),
                source: p.origin.clone(),
                limits: PolicyLimits {
                    limits: Limits::of(p),
                    cpu_max_percent: p.cgroups.cpu_max_us.map(|(q, per)| q * 100 / per.max(1)),
                },
            })
            .collect();
        let r = &self.catalog.caps;
        let s = &self.bounds.sessions;
        Info {
            version: env!("CARGO_PKG_VERSION").into(),
            api: "v1".into(),
            runtimes,
            wasm_modules: self.catalog.wasm_modules,
            policies,
            concurrency: self.bounds.concurrency,
            queue: self.bounds.queue,
            jails_built_by: if self.spawned() { "spawner" } else { "threads" }.into(),
            requests: RequestsInfo {
                body_max_bytes: r.body_max_bytes,
                code_max_bytes: r.code_max_bytes,
                stdin_max_bytes: r.stdin_max_bytes,
                argv_max_count: r.argv_max_count,
                files_max_count: r.files_max_count,
                files_max_bytes: r.files_max_bytes,
                return_files_max_count: r.return_files_max_count,
                return_files_max_bytes: r.return_files_max_bytes,
                batch_max_runs: r.batch_max_runs,
            },
            sessions: SessionsInfo {
                max: s.max,
                open: self.sessions.open(),
                modes: if s.live_max > 0 { vec!["workspace".into(), "live".into()] } else { vec!["workspace".into()] },
                max_per_token: s.max_per_token,
                live_max: s.live_max,
                idle_timeout_ms: s.idle_timeout_ms,
                max_lifetime_ms: s.max_lifetime_ms,
                hibernate_after_ms: s.hibernate_after_ms,
                workspace_max_bytes: s.workspace_max_bytes,
                workspace_max_files: s.workspace_max_files,
            },
            uptime_s: self.uptime_s(),
        }
    }

    /// A runtime as `/v1/info` shows it.
    fn runtime_info(&self, rt: &crate::config::Runtime) -> RuntimeInfo {
        let (kind, runs) = match &rt.kind {
            Kind::Guest(guest) => ("wasm-guest", RuntimeRuns::Guest { guest: guest.name().into() }),
            Kind::Program { path, framed, python, .. } => (
                "program",
                RuntimeRuns::Program {
                    program: path.clone(),
                    bootstrap: if *framed { "python" } else { "stdin" }.into(),
                    preload: python.preload.clone(),
                    venv: python.venv.clone(),
                },
            ),
        };
        let pool = self.pools.get(&rt.name);
        let available = pool.map_or(Err("it has no policy".to_string()), |p| p.available());
        RuntimeInfo {
            name: rt.name.clone(),
            kind: kind.into(),
            runs,
            policy: rt.policy.clone(),
            available: available.is_ok(),
            unavailable_because: available.err(),
            warm: Warm { target: rt.warm, ready: pool.map_or(0, |p| p.fill()) },
            // As its warm jails report it: where the last one built got its network namespace
            // (a spawner shares or lends one made ahead).
            enforcement: pool.map(|p| p.recipe().plan().layers_in(p.net().unwrap_or(stockade::NetJoined::Own))),
        }
    }
}
