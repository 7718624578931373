//! `GET /v1/info`: what this server runs and under what — its version, runtimes, policies with
//! their limits, request caps, and what this host enforces of each runtime's jail, layer by
//! layer (the same entries every report carries).

use super::config::Kind;
use super::engine::Engine;
use serde_json::{Value, json};
use stockade::Policy;

/// A policy's limits, under the names a request's `limits` uses.
pub fn limits(p: &Policy) -> Value {
    json!({
        "wall-timeout-ms": u64::try_from(p.wall_timeout.as_millis()).unwrap_or(u64::MAX),
        "memory-max-bytes": p.cgroups.memory_max_bytes,
        "pids-max": p.cgroups.pids_max,
        "cpu-max-percent": p.cgroups.cpu_max_us.map(|(q, per)| q * 100 / per.max(1)),
        "stdout-max-bytes": p.stdout_max_bytes,
        "stderr-max-bytes": p.stderr_max_bytes,
        "wasm-memory-max-bytes": p.wasm.memory_max_bytes,
        "fuel": p.wasm.fuel,
    })
}

pub fn info(e: &Engine) -> Value {
    let c = &e.config;
    let runtimes: Vec<Value> = c
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
            let pool = e.pools.get(&rt.name);
            let available = pool.map_or(Err("it has no policy".to_string()), |p| p.available());
            json!({
                "name": rt.name,
                "kind": kind,
                "runs": what,
                "policy": rt.policy,
                "available": available.is_ok(),
                "unavailable-because": available.err(),
                "warm": { "target": rt.warm, "ready": pool.map_or(0, |p| p.fill()) },
                "enforcement": pool.map(|p| p.recipe().plan().layers()),
            })
        })
        .collect();
    let policies: Vec<Value> = c
        .policies
        .iter()
        .map(|(name, n)| json!({ "name": name, "source": n.source, "limits": limits(&n.policy) }))
        .collect();
    let r = &c.requests;
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "api": "v1",
        "runtimes": runtimes,
        "wasm-modules": c.wasm_modules,
        "policies": policies,
        "concurrency": c.concurrency,
        "queue": c.queue,
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
        "uptime-s": e.started.elapsed().as_secs(),
    })
}
