//! What the engine says of itself: its health (readiness, for balancers and probes) and what it
//! serves (`GET /v1/info`: its version, runtimes, policies with their limits, request caps, and
//! what this host enforces of each runtime's jail, layer by layer).

use super::Engine;
use crate::config::Kind;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use stockade::policy::Limits;

/// Whether the engine can run every runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// A jail of every runtime was built, and none is failing.
    Ok,
    /// A runtime's first jail is not built yet.
    Starting,
    /// A runtime's last jails failed.
    Unavailable,
    /// The engine is shutting down.
    Draining,
}

/// The engine's health (`/v1/health/ready`'s body).
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    pub status: Readiness,
    pub running: usize,
    pub queued: usize,
    /// Warm jails waiting and wanted, by runtime.
    pub warm: BTreeMap<String, Warm>,
    /// Each runtime that cannot run (or not yet), and why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Warm {
    pub ready: usize,
    pub target: usize,
}

/// A policy's limits as `/v1/info` shows them: the request's keys, and its CPU share.
#[derive(Debug, Serialize)]
struct InfoLimits {
    #[serde(flatten)]
    limits: Limits,
    #[serde(rename = "cpu-max-percent")]
    cpu_max_percent: Option<u64>,
}

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
    pub fn info(&self) -> Value {
        let runtimes: Vec<Value> = self
            .runtimes
            .values()
            .map(|rt| {
                let (kind, what) = match &rt.kind {
                    Kind::Guest { python: true } => ("wasm-guest", json!({"guest": "python"})),
                    Kind::Guest { python: false } => ("wasm-guest", json!({"guest": "javascript"})),
                    Kind::Program { path, framed, .. } => {
                        ("program", json!({"program": path, "bootstrap": if *framed { "python" } else { "stdin" }}))
                    }
                };
                let pool = self.pools.get(&rt.name);
                let available = pool.map_or(Err("it has no policy".to_string()), |p| p.available());
                json!({
                    "name": rt.name,
                    "kind": kind,
                    "runs": what,
                    "policy": rt.policy,
                    "available": available.is_ok(),
                    "unavailable-because": available.err(),
                    "warm": { "target": rt.warm, "ready": pool.map_or(0, |p| p.fill()) },
                    // As its warm jails report it: where the last one built got its network
                    // namespace (a spawner shares or lends one made ahead).
                    "enforcement": pool.map(|p| p.recipe().plan().layers_in(p.net().unwrap_or(stockade::NetJoined::Own))),
                })
            })
            .collect();
        let policies: Vec<Value> = self
            .catalog
            .policies
            .iter()
            .map(|(name, p)| {
                let limits = InfoLimits {
                    limits: Limits::of(p),
                    cpu_max_percent: p.cgroups.cpu_max_us.map(|(q, per)| q * 100 / per.max(1)),
                };
                json!({ "name": name, "source": p.origin, "limits": limits })
            })
            .collect();
        let r = &self.catalog.caps;
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "api": "v1",
            "runtimes": runtimes,
            "wasm-modules": self.catalog.wasm_modules,
            "policies": policies,
            "concurrency": self.bounds.concurrency,
            "queue": self.bounds.queue,
            "jails-built-by": if self.spawned() { "spawner" } else { "threads" },
            "requests": {
                "body-max-bytes": r.body_max_bytes,
                "code-max-bytes": r.code_max_bytes,
                "stdin-max-bytes": r.stdin_max_bytes,
                "argv-max-count": r.argv_max_count,
                "files-max-count": r.files_max_count,
                "files-max-bytes": r.files_max_bytes,
                "return-files-max-count": r.return_files_max_count,
                "return-files-max-bytes": r.return_files_max_bytes,
            },
            "sessions": {
                "max": self.bounds.sessions.max,
                "open": self.sessions.open(),
                "modes": if self.bounds.sessions.live_max > 0 { vec!["workspace", "live"] } else { vec!["workspace"] },
                "max-per-token": self.bounds.sessions.max_per_token,
                "live-max": self.bounds.sessions.live_max,
                "idle-timeout-ms": self.bounds.sessions.idle_timeout_ms,
                "max-lifetime-ms": self.bounds.sessions.max_lifetime_ms,
                "workspace-max-bytes": self.bounds.sessions.workspace_max_bytes,
                "workspace-max-files": self.bounds.sessions.workspace_max_files,
            },
            "uptime-s": self.uptime_s(),
        })
    }
}
