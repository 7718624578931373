//! The checks of a configuration file: every problem said with its key (and its line), then a
//! [`Config`] made of what was checked.

use super::file::{ConfigFile, PoliciesFile, RuntimeFile, ServerFile, SessionsFile};
use super::{Bounds, Config, Kind, Listen, Listeners, Runtime, SessionBounds};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stockade::api::{Catalog, RequestCaps, RuntimeSpec};
use stockade::policy::{self, LocatedProblem, Policy, PolicyError};

/// Names a runtime or policy may have.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(format!("{name:?}: a name is 1 to 64 of a-z, 0-9, '-', '_'")) }
}

/// Which settings came from the command line (their problems are said as the flag's).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Flags {
    pub(super) listen: bool,
    pub(super) tokens_file: bool,
}

pub(super) fn check(
    file: ConfigFile,
    text: &str,
    origin: &str,
    builtin: bool,
    flags: Flags,
    also: Option<&str>,
) -> Result<Config, PolicyError> {
    let mut problems: Vec<LocatedProblem> = Vec::new();
    let mut bad = |key: &str, message: String| {
        // What --listen or --tokens-file gave is said as the flag's.
        let (file, key) = match key {
            k if k.starts_with("server.listen") && flags.listen => ("stockade".to_string(), "--listen".to_string()),
            "server.tokens-file" if flags.tokens_file => ("stockade".to_string(), "--tokens-file".to_string()),
            k if k.starts_with("--") => ("stockade".to_string(), key.to_string()),
            _ => (origin.to_string(), key.to_string()),
        };
        problems.push(LocatedProblem { position: policy::locate_key(text, &key), file, key, message });
    };
    if file.version != 1 {
        bad("version", format!("unsupported version {} (this stockade reads version 1)", file.version));
    }
    let s = &file.server;
    let (listen, socket_gid, tokens) = check_listeners(s, &mut bad);
    check_bounds(s, &file.requests, &mut bad);
    check_sessions(&file.sessions, &mut bad);
    let mut policies = named_policies(&file.policies, &mut bad);
    if let Some(p) = also
        && !policies.contains_key(p)
    {
        bad("--policy", format!("{p:?}: no such policy ({})", names(&policies)));
    }
    let mut runtimes = BTreeMap::new();
    for (name, rt) in &file.runtimes {
        if let Some(r) = check_runtime(name, rt, &policies, also, builtin, &mut bad) {
            runtimes.insert(name.clone(), r);
        }
    }
    // Only the policies the configuration names are offered (a request's module runs under
    // "default"): a shipped example nobody named is not there to be asked for.
    let named: std::collections::BTreeSet<&String> = runtimes.values().flat_map(|r| &r.policies).collect();
    policies.retain(|name, _| named.contains(name) || (s.wasm_modules && name == "default"));
    if !problems.is_empty() {
        problems.sort_by_key(|p| p.position.unwrap_or((usize::MAX, 0)));
        return Err(PolicyError::Invalid { problems });
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let r = &file.requests;
    let bounds = Bounds {
        concurrency: if s.concurrency == 0 { cpus } else { s.concurrency as usize },
        queue: s.queue as usize,
        queue_timeout: Duration::from_millis(s.queue_timeout_ms),
        max_connections: s.max_connections as usize,
        header_timeout: Duration::from_millis(s.header_timeout_ms),
        write_timeout: Duration::from_millis(s.write_timeout_ms),
        body_max_bytes: r.body_max_bytes,
        body_timeout: Duration::from_millis(s.body_timeout_ms),
        body_min_rate: s.body_min_bytes_per_second,
        bodies_in_flight_max_bytes: r.in_flight_max_bytes,
        answers_in_flight_max_bytes: r.answers_in_flight_max_bytes,
        drain_timeout: Duration::from_millis(s.drain_timeout_ms),
        spawner: s.spawner,
        sessions: SessionBounds {
            max: file.sessions.max as usize,
            max_per_token: file.sessions.max_per_token() as usize,
            live_max: file.sessions.live_max as usize,
            live_max_per_token: file.sessions.live_max_per_token() as usize,
            idle_timeout_ms: file.sessions.idle_timeout_ms,
            max_lifetime_ms: file.sessions.max_lifetime_ms,
            hibernate_after_ms: Some(file.sessions.hibernate_after_ms).filter(|&ms| ms > 0),
            sync_images: file.sessions.sync_images,
            replica_lease_ms: Some(file.sessions.replica_lease_ms).filter(|&ms| ms > 0),
            workspace_max_bytes: file.sessions.workspace_max_bytes,
            workspace_max_files: u64::from(file.sessions.workspace_max_files),
        },
        state_dir: Some(&file.sessions.state_dir).filter(|d| !d.is_empty()).map(PathBuf::from),
    };
    let catalog = Catalog {
        runtimes: runtimes
            .values()
            .map(|r: &Runtime| {
                let framed = !matches!(r.kind, Kind::Program { framed: false, .. });
                // Stockade's bootstraps give their runs `stockade_host` or `host` (runtime.rs).
                let host_calls = matches!(r.kind, Kind::Program { framed: true, .. } | Kind::Guest(_));
                (r.name.clone(), RuntimeSpec { framed, host_calls, policies: r.policies.clone() })
            })
            .collect(),
        policies,
        caps: file.requests.clone(),
        wasm_modules: s.wasm_modules,
    };
    Ok(Config {
        origin: origin.to_string(),
        listeners: Listeners { listen, socket_mode: s.socket_mode, socket_gid, tokens, ui: s.ui },
        bounds,
        catalog,
        runtimes,
    })
}

/// `[server]`'s listeners, socket group and tokens (a TCP listener only with tokens).
fn check_listeners(s: &ServerFile, bad: &mut dyn FnMut(&str, String)) -> (Vec<Listen>, Option<u32>, Vec<String>) {
    let mut listen = Vec::new();
    for (i, l) in s.listen.iter().enumerate() {
        match Listen::parse(l) {
            Ok(x) => listen.push(x),
            Err(e) => bad(&format!("server.listen[{i}]"), e),
        }
    }
    if s.listen.is_empty() {
        bad("server.listen", "no listener: give at least one".into());
    }
    if s.socket_mode & !0o777 != 0 || s.socket_mode & 0o600 != 0o600 {
        bad(
            "server.socket-mode",
            format!("{:#o}: give permission bits with 0o600 for the server (0o660)", s.socket_mode),
        );
    }
    let socket_gid = match s.socket_group.as_str() {
        "" => None,
        g => match group_id(g) {
            Some(gid) => Some(gid),
            None => {
                bad("server.socket-group", format!("{g:?}: no such group"));
                None
            }
        },
    };
    let tokens = match s.tokens_file.as_str() {
        "" => s.run_tokens.iter().map(|t| t.to_string()).collect(),
        f => match read_tokens(Path::new(f)) {
            Ok(t) => t,
            Err(e) => {
                bad("server.tokens-file", e);
                Vec::new()
            }
        },
    };
    for (i, l) in listen.iter().enumerate() {
        if let Listen::Tcp(a) = l
            && tokens.is_empty()
            && s.tokens_file.is_empty()
        {
            let why = if a.ip().is_loopback() {
                "a TCP listener needs bearer tokens (server.tokens-file): any local user can reach it"
            } else {
                "refusing a non-loopback TCP listener without bearer tokens (server.tokens-file)"
            };
            bad(&format!("server.listen[{i}]"), format!("{l}: {why}"));
        }
    }
    if s.ui && !listen.iter().any(|l| matches!(l, Listen::Tcp(_) | Listen::Systemd)) {
        bad(
            "server.ui",
            "the playground needs a tcp: listener in server.listen (or systemd's sockets): a browser cannot \
             reach a unix socket"
                .into(),
        );
    }
    (listen, socket_gid, tokens)
}

/// The bounds that must be more than 0, and the body's most.
fn check_bounds(s: &ServerFile, r: &RequestCaps, bad: &mut dyn FnMut(&str, String)) {
    let positive = |key: &str, v: u64, bad: &mut dyn FnMut(&str, String)| {
        if v == 0 {
            bad(key, "must be more than 0".into());
        }
    };
    positive("server.queue-timeout-ms", s.queue_timeout_ms, bad);
    positive("server.max-connections", u64::from(s.max_connections), bad);
    positive("server.header-timeout-ms", s.header_timeout_ms, bad);
    positive("server.body-timeout-ms", s.body_timeout_ms, bad);
    positive("server.write-timeout-ms", s.write_timeout_ms, bad);
    positive("requests.answers-in-flight-max-bytes", r.answers_in_flight_max_bytes, bad);
    positive("requests.body-max-bytes", r.body_max_bytes, bad);
    positive("requests.code-max-bytes", r.code_max_bytes, bad);
    if r.body_max_bytes > 1 << 30 {
        bad("requests.body-max-bytes", "at most 1 GiB".into());
    }
}

/// `[sessions]`: clocks and quotas more than 0 (when sessions are kept), a workspace that fits
/// the server's memory, a state directory named absolutely.
fn check_sessions(s: &SessionsFile, bad: &mut dyn FnMut(&str, String)) {
    if !s.state_dir.is_empty() && !Path::new(&s.state_dir).is_absolute() {
        bad("sessions.state-dir", format!("{:?} must be an absolute path", s.state_dir));
    }
    if s.replica_lease_ms != 0 {
        if !(1000..=600_000).contains(&s.replica_lease_ms) {
            bad(
                "sessions.replica-lease-ms",
                format!("{} must be 0 (a server alone) or 1000 to 600000", s.replica_lease_ms),
            );
        } else if s.state_dir.is_empty() {
            bad(
                "sessions.replica-lease-ms",
                "replicas share a state directory: set sessions.state-dir (or --state-dir)".into(),
            );
        }
    }
    if s.max == 0 {
        return;
    }
    for (key, v) in [
        ("sessions.max-per-token", u64::from(s.max_per_token())),
        ("sessions.idle-timeout-ms", s.idle_timeout_ms),
        ("sessions.max-lifetime-ms", s.max_lifetime_ms),
        ("sessions.workspace-max-bytes", s.workspace_max_bytes),
        ("sessions.workspace-max-files", u64::from(s.workspace_max_files)),
    ] {
        if v == 0 {
            bad(key, "must be more than 0 (or sessions.max = 0: no sessions)".into());
        }
    }
    let (mine, live_mine) = (s.max_per_token(), s.live_max_per_token());
    if mine > s.max {
        bad("sessions.max-per-token", format!("{mine} is more than sessions.max ({})", s.max));
    }
    if s.live_max > 0 && live_mine > s.live_max.min(mine) {
        bad(
            "sessions.live-max-per-token",
            format!("{live_mine} is more than sessions.live-max ({}) or sessions.max-per-token ({mine})", s.live_max),
        );
    }
    if s.live_max > 0 && live_mine == 0 {
        bad("sessions.live-max-per-token", "must be more than 0 (or sessions.live-max = 0: no live sessions)".into());
    }
    if s.workspace_max_bytes > 1 << 30 {
        bad("sessions.workspace-max-bytes", "at most 1 GiB (a run's workspace is in the server's memory)".into());
    }
    if s.workspace_max_files > 100_000 {
        bad("sessions.workspace-max-files", "at most 100000".into());
    }
}

/// The named policies: the shipped ones, then the directory's (a name of a shipped one
/// replaces it).
fn named_policies(dir: &PoliciesFile, bad: &mut dyn FnMut(&str, String)) -> BTreeMap<String, Policy> {
    let mut policies = BTreeMap::new();
    for (name, text) in policy::SHIPPED {
        match Policy::from_toml(text, &format!("builtin:{name}")) {
            Ok(p) => {
                policies.insert(name.to_string(), p);
            }
            Err(e) => bad("policies", e.to_string()),
        }
    }
    if !dir.dir.is_empty() {
        match read_policy_dir(Path::new(&dir.dir)) {
            Ok(found) => {
                for (name, named) in found {
                    policies.insert(name, named);
                }
            }
            Err(e) => bad("policies.dir", e),
        }
    }
    policies
}

/// One `[runtimes.NAME]`, checked; `None` when it is not served (its problems said through
/// `bad`, or the built-in `python3` without a python3 here).
fn check_runtime(
    name: &str,
    rt: &RuntimeFile,
    policies: &BTreeMap<String, Policy>,
    also: Option<&str>,
    builtin: bool,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Runtime> {
    let key = format!("runtimes.{name}");
    if let Err(e) = check_name(name) {
        bad(&key, e);
        return None;
    }
    if name == "wasm" {
        bad(&key, "\"wasm\" is the runtime of requests that send a module: name this one otherwise".into());
        return None;
    }
    if !policies.contains_key(&rt.policy) {
        bad(&format!("{key}.policy"), format!("{:?}: no such policy ({})", rt.policy, names(policies)));
    }
    for (i, p) in rt.policies.iter().enumerate() {
        if !policies.contains_key(p) {
            bad(&format!("{key}.policies[{i}]"), format!("{p:?}: no such policy ({})", names(policies)));
        }
    }
    let kind = match (&rt.guest, &rt.program) {
        (Some(g), None) => {
            if !rt.args.is_empty() || rt.bootstrap.is_some() || !rt.preload.is_empty() || rt.venv.is_some() {
                bad(&key, "args, bootstrap, preload and venv are for programs, not guests".into());
            }
            match stockade::runtime::Guest::named(g) {
                Some(guest) => Kind::Guest(guest),
                None => {
                    let known: Vec<String> =
                        stockade::runtime::LANGUAGES.iter().map(|l| format!("{:?}", l.name)).collect();
                    bad(&format!("{key}.guest"), format!("{g:?}: the guests are {}", known.join(" and ")));
                    return None;
                }
            }
        }
        (None, Some(p)) => {
            if !p.starts_with('/') {
                bad(&format!("{key}.program"), format!("{p:?}: give an absolute path"));
                return None;
            }
            if builtin && !Path::new(p).exists() {
                // The built-in python3 runtime is there only where python3 is.
                return None;
            }
            let framed = match rt.bootstrap.as_deref() {
                Some("python") => true,
                Some("stdin") | None => false,
                Some(other) => {
                    bad(&format!("{key}.bootstrap"), format!("{other:?}: say \"python\" or \"stdin\""));
                    return None;
                }
            };
            let python = python_env(&key, rt, framed, bad)?;
            Kind::Program { path: p.clone(), args: rt.args.clone(), framed, python }
        }
        _ => {
            bad(&key, "give either guest = \"python\" | \"javascript\" or program = \"/PATH\"".into());
            return None;
        }
    };
    let mut allowed = vec![rt.policy.clone()];
    for p in rt.policies.iter().map(String::as_str).chain(also) {
        if !allowed.iter().any(|a| a == p) {
            allowed.push(p.to_string());
        }
    }
    Some(Runtime { name: name.to_string(), kind, policy: rt.policy.clone(), policies: allowed, warm: rt.warm as usize })
}

/// The most modules a runtime preloads, and the longest name of one.
const PRELOAD_MAX: usize = 64;
const MODULE_NAME_MAX: usize = 128;

/// A program runtime's `preload` and `venv`, checked: only under stockade's Python bootstrap;
/// modules named as `import` names them (dotted identifiers); the venv an absolute directory
/// holding `pyvenv.cfg`. `None` (said through `bad`) when one is wrong.
fn python_env(
    key: &str,
    rt: &RuntimeFile,
    framed: bool,
    bad: &mut dyn FnMut(&str, String),
) -> Option<stockade::runtime::PythonEnv> {
    if !framed && (!rt.preload.is_empty() || rt.venv.is_some()) {
        bad(key, "preload and venv need bootstrap = \"python\" (stockade's bootstrap imports them)".into());
        return None;
    }
    if rt.preload.len() > PRELOAD_MAX {
        bad(&format!("{key}.preload"), format!("{} modules: at most {PRELOAD_MAX}", rt.preload.len()));
        return None;
    }
    let word = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    for (i, m) in rt.preload.iter().enumerate() {
        if m.len() > MODULE_NAME_MAX || !m.split('.').all(word) {
            bad(&format!("{key}.preload[{i}]"), format!("{m:?}: a module's name as `import` takes it (a.b_c)"));
            return None;
        }
    }
    if let Some(v) = &rt.venv {
        let dir = Path::new(v);
        if !dir.is_absolute() || !dir.join("pyvenv.cfg").is_file() {
            bad(
                &format!("{key}.venv"),
                format!("{v:?}: give a virtual environment's absolute directory (it holds pyvenv.cfg)"),
            );
            return None;
        }
    }
    Some(stockade::runtime::PythonEnv { venv: rt.venv.clone(), preload: rt.preload.clone() })
}

fn names(policies: &BTreeMap<String, Policy>) -> String {
    let list: Vec<&str> = policies.keys().map(String::as_str).collect();
    format!("known: {}", list.join(", "))
}

/// `NAME.toml` files of a directory, each a valid policy.
fn read_policy_dir(dir: &Path) -> Result<Vec<(String, Policy)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".toml")) else {
            continue;
        };
        if let Err(why) = check_name(name) {
            errors.push(format!("{}: {why}", path.display()));
            continue;
        }
        match Policy::load(&path) {
            Ok(p) => out.push((name.to_string(), p)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if errors.is_empty() {
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    } else {
        Err(errors.join("; "))
    }
}

/// Bearer tokens: one per line, `#` comments; the file readable by its owner only.
fn read_tokens(path: &Path) -> Result<Vec<String>, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{}: mode {:o} lets others read the tokens: chmod 600 it",
            path.display(),
            meta.mode() & 0o777
        ));
    }
    // Read into one buffer of the file's size, wiped after.
    let text = zeroize::Zeroizing::new(
        stockade::input::read_regular(path, 1 << 20, "a tokens file").map_err(|e| e.to_string())?,
    );
    let text = std::str::from_utf8(&text).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.len() < 16 || t.len() > 512 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "{}:{}: a token is 16 to 512 printable characters without spaces",
                path.display(),
                i + 1
            ));
        }
        out.push(t.to_string());
    }
    if out.is_empty() {
        return Err(format!("{}: no token in it", path.display()));
    }
    Ok(out)
}

/// A group's id, by name or number (from /etc/group).
fn group_id(group: &str) -> Option<u32> {
    if let Ok(n) = group.parse::<u32>() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == group).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}
