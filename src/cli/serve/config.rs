//! The server's configuration: a TOML file (typed, `deny_unknown_fields`, version 1) turned into
//! a checked [`Config`], every problem as `FILE:LINE:COL: KEY: message` like a policy's. Without
//! a file, the built-in defaults (`stockade serve --print-config` shows them as a file).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stockade::api::{Catalog, RequestCaps, RuntimeSpec};
use stockade::policy::{self, LocatedProblem, Policy, PolicyError};

/// The configuration file, as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    /// The format's version: 1.
    pub version: u32,
    #[serde(default)]
    pub server: ServerFile,
    #[serde(default)]
    pub requests: RequestCaps,
    #[serde(default)]
    pub policies: PoliciesFile,
    /// Runtimes by name. A file that lists any lists all of them.
    #[serde(default = "default_runtimes")]
    pub runtimes: BTreeMap<String, RuntimeFile>,
}

/// `[server]`: where it listens, who may call it, how much it runs at once.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ServerFile {
    /// `unix:/PATH`, `tcp:ADDRESS:PORT` (an IP address; IPv6 in brackets), or `systemd`: the
    /// sockets a systemd socket unit passes in (their mode and group are the unit's).
    pub listen: Vec<String>,
    /// The unix socket's mode (TOML octal: `0o660`).
    pub socket_mode: u32,
    /// The unix socket's group (a name or a number); `""`: the server's own.
    pub socket_group: String,
    /// A file of bearer tokens, one per line (`#` comments), readable by its owner only. TCP
    /// listeners require one of them; the unix socket is guarded by its mode and group.
    pub tokens_file: String,
    /// How many runs at once; 0: one per CPU.
    pub concurrency: u32,
    /// How many requests may wait for a free slot; past it, 429 with `Retry-After`.
    pub queue: u32,
    /// How long a request may wait in the queue before a 503.
    pub queue_timeout_ms: u64,
    /// How many connections at once (each beyond waits to be accepted).
    pub max_connections: u32,
    /// A client has this long to send a request's headers, and this long for its body.
    pub header_timeout_ms: u64,
    pub body_timeout_ms: u64,
    /// A body must come at least this fast, every second after the first (bytes per second).
    pub body_min_bytes_per_second: u64,
    /// A client that takes no byte of its answer for this long is cut off (its answer dropped).
    pub write_timeout_ms: u64,
    /// On SIGTERM: how long running jobs may take to finish before the server exits.
    pub drain_timeout_ms: u64,
    /// Whether requests may send their own Wasm modules (runtime `wasm`).
    pub wasm_modules: bool,
}

impl Default for ServerFile {
    fn default() -> Self {
        ServerFile {
            listen: vec![format!("unix:{DEFAULT_SOCKET}")],
            socket_mode: 0o660,
            socket_group: String::new(),
            tokens_file: String::new(),
            concurrency: 0,
            queue: 64,
            queue_timeout_ms: 30_000,
            max_connections: 512,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            body_min_bytes_per_second: 16 * 1024,
            write_timeout_ms: 30_000,
            drain_timeout_ms: 30_000,
            wasm_modules: true,
        }
    }
}

/// Where the server listens when nothing else is said.
pub const DEFAULT_SOCKET: &str = "/run/stockade/api.sock";

/// `[policies]`: named policies besides the shipped ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct PoliciesFile {
    /// A directory of `NAME.toml` policy files (a name of a shipped one replaces it); `""`: none.
    pub dir: String,
}

/// `[runtimes.NAME]`: a Wasm guest, or a program that gets its code on stdin.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuntimeFile {
    /// `python` or `javascript`: the embedded Wasm runner's guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<String>,
    /// A host program (absolute path) instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Its arguments, before the bootstrap's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// How a program gets its code: `python` (stockade's bootstrap with `-c`: the code, its
    /// arguments and the request's stdin come framed on stdin, and the interpreter can start
    /// ahead of the request) or `stdin` (the code is the program's whole stdin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
    /// The named policy its runs get unless the request names another.
    #[serde(default = "default_policy_name")]
    pub policy: String,
    /// Other named policies a request may ask for its runs (`"policy"`); none by default: a
    /// runtime runs only under the policies its configuration names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<String>,
    /// How many jails to keep started ahead, waiting for a request (0: none).
    #[serde(default = "default_warm")]
    pub warm: u32,
}

fn default_policy_name() -> String {
    "default".into()
}

fn default_warm() -> u32 {
    2
}

/// The runtimes of a server without a configuration file.
pub fn default_runtimes() -> BTreeMap<String, RuntimeFile> {
    let guest = |g: &str| RuntimeFile {
        guest: Some(g.into()),
        program: None,
        args: Vec::new(),
        bootstrap: None,
        policy: default_policy_name(),
        policies: Vec::new(),
        warm: 2,
    };
    let mut out = BTreeMap::new();
    out.insert("python".into(), guest("python"));
    out.insert("javascript".into(), guest("javascript"));
    out.insert(
        "python3".into(),
        RuntimeFile {
            guest: None,
            program: Some("/usr/bin/python3".into()),
            args: Vec::new(),
            bootstrap: Some("python".into()),
            policy: "wrap-python".into(),
            policies: Vec::new(),
            warm: 1,
        },
    );
    out
}

/// A listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// The sockets systemd passes in (socket activation).
    Systemd,
}

impl Listen {
    pub fn parse(s: &str) -> Result<Listen, String> {
        if s == "systemd" {
            return Ok(Listen::Systemd);
        }
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!("{s:?}: the socket path must be absolute"));
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(addr) = s.strip_prefix("tcp:") {
            return addr
                .parse::<SocketAddr>()
                .map(Listen::Tcp)
                .map_err(|_| format!("{s:?}: not an IP address and port (tcp:127.0.0.1:8787, tcp:[::1]:8787)"));
        }
        Err(format!("{s:?}: say unix:/PATH, tcp:ADDRESS:PORT or systemd (the sockets of a socket unit)"))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
            Listen::Systemd => write!(f, "systemd"),
        }
    }
}

/// What a runtime runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// The Wasm runner's Python or JavaScript guest, waiting for framed code on stdin.
    Guest { python: bool },
    /// A host program; `framed`: stockade's Python bootstrap reads the frame.
    Program { path: String, args: Vec<String>, framed: bool },
}

/// A checked runtime.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub name: String,
    pub kind: Kind,
    pub policy: String,
    /// Every policy its runs may have: its own first, then those it names besides.
    pub policies: Vec<String>,
    pub warm: usize,
}

/// A named policy and where it came from.
#[derive(Debug, Clone)]
pub struct Named {
    pub policy: Policy,
    pub source: String,
}

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (a path, or `builtin`), for messages.
    pub origin: String,
    pub listen: Vec<Listen>,
    pub socket_mode: u32,
    pub socket_gid: Option<u32>,
    pub tokens: Vec<String>,
    pub concurrency: usize,
    pub queue: usize,
    pub queue_timeout: Duration,
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub body_min_rate: u64,
    pub write_timeout: Duration,
    pub drain_timeout: Duration,
    pub wasm_modules: bool,
    pub requests: RequestCaps,
    pub policies: BTreeMap<String, Named>,
    pub runtimes: BTreeMap<String, Runtime>,
}

impl Config {
    /// What requests are checked against.
    pub fn catalog(&self) -> Catalog {
        Catalog {
            runtimes: self
                .runtimes
                .values()
                .map(|r| {
                    let framed = !matches!(r.kind, Kind::Program { framed: false, .. });
                    (r.name.clone(), RuntimeSpec { framed, policies: r.policies.clone() })
                })
                .collect(),
            policies: self.policies.iter().map(|(n, p)| (n.clone(), p.policy.clone())).collect(),
            caps: self.requests.clone(),
            wasm_modules: self.wasm_modules,
        }
    }
}

/// Names a runtime or policy may have.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(format!("{name:?}: a name is 1 to 64 of a-z, 0-9, '-', '_'")) }
}

/// Reads and checks a configuration file (`None`: the built-in defaults); `listen`, when not
/// empty, replaces its listeners (`--listen`) and is checked the same way; every runtime may
/// also run under the policy `also` names (`stockade mcp --policy`: the operator's choice).
pub fn load(path: Option<&Path>, listen: &[String], also: Option<&str>) -> Result<Config, PolicyError> {
    let (text, origin) = match path {
        Some(p) => (stockade::input::read_text(p, 1 << 20, "a server configuration")?, p.display().to_string()),
        None => (String::new(), "builtin".to_string()),
    };
    let file = match path {
        None => ConfigFile {
            version: 1,
            server: ServerFile::default(),
            requests: RequestCaps::default(),
            policies: PoliciesFile::default(),
            runtimes: default_runtimes(),
        },
        Some(_) => match policy::parse_toml::<ConfigFile>(&text, &origin) {
            (problems, Some(f)) if problems.is_empty() => f,
            (problems, _) => return Err(PolicyError::Invalid { problems }),
        },
    };
    let mut file = file;
    if !listen.is_empty() {
        file.server.listen = listen.to_vec();
    }
    check(file, &text, &origin, path.is_none(), !listen.is_empty(), also)
}

fn check(
    file: ConfigFile,
    text: &str,
    origin: &str,
    builtin: bool,
    flags: bool,
    also: Option<&str>,
) -> Result<Config, PolicyError> {
    let mut problems: Vec<LocatedProblem> = Vec::new();
    let mut bad = |key: &str, message: String| {
        // What --listen gave is said as the flag's.
        let (file, key) = match key.strip_prefix("server.listen") {
            Some(_) if flags => ("stockade".to_string(), "--listen".to_string()),
            _ if key.starts_with("--") => ("stockade".to_string(), key.to_string()),
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
    Ok(Config {
        origin: origin.to_string(),
        listen,
        socket_mode: s.socket_mode,
        socket_gid,
        tokens,
        concurrency: if s.concurrency == 0 { cpus } else { s.concurrency as usize },
        queue: s.queue as usize,
        queue_timeout: Duration::from_millis(s.queue_timeout_ms),
        max_connections: s.max_connections as usize,
        header_timeout: Duration::from_millis(s.header_timeout_ms),
        body_timeout: Duration::from_millis(s.body_timeout_ms),
        body_min_rate: s.body_min_bytes_per_second,
        write_timeout: Duration::from_millis(s.write_timeout_ms),
        drain_timeout: Duration::from_millis(s.drain_timeout_ms),
        wasm_modules: s.wasm_modules,
        requests: file.requests.clone(),
        policies,
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
        "" => Vec::new(),
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

/// The named policies: the shipped ones, then the directory's (a name of a shipped one
/// replaces it).
fn named_policies(dir: &PoliciesFile, bad: &mut dyn FnMut(&str, String)) -> BTreeMap<String, Named> {
    let mut policies = BTreeMap::new();
    for (name, text) in policy::SHIPPED {
        match Policy::from_toml(text, &format!("builtin:{name}")) {
            Ok(p) => {
                policies.insert(name.to_string(), Named { policy: p, source: format!("builtin:{name}") });
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
    policies: &BTreeMap<String, Named>,
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
            if !rt.args.is_empty() || rt.bootstrap.is_some() {
                bad(&key, "args and bootstrap are for programs, not guests".into());
            }
            match g.as_str() {
                "python" => Kind::Guest { python: true },
                "javascript" => Kind::Guest { python: false },
                other => {
                    bad(&format!("{key}.guest"), format!("{other:?}: the guests are \"python\" and \"javascript\""));
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
            Kind::Program { path: p.clone(), args: rt.args.clone(), framed }
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

fn names(policies: &BTreeMap<String, Named>) -> String {
    let list: Vec<&str> = policies.keys().map(String::as_str).collect();
    format!("known: {}", list.join(", "))
}

/// `NAME.toml` files of a directory, each a valid policy.
fn read_policy_dir(dir: &Path) -> Result<Vec<(String, Named)>, String> {
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
            Ok(p) => out.push((name.to_string(), Named { policy: p, source: path.display().to_string() })),
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
    let text = stockade::input::read_text(path, 1 << 20, "a tokens file").map_err(|e| e.to_string())?;
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

/// The defaults as a configuration file, for `stockade serve --print-config`.
pub fn default_file_text() -> String {
    let file = ConfigFile {
        version: 1,
        server: ServerFile::default(),
        requests: RequestCaps::default(),
        policies: PoliciesFile::default(),
        runtimes: default_runtimes(),
    };
    toml::to_string_pretty(&file).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(text: &str) -> Result<Config, String> {
        let file = match policy::parse_toml::<ConfigFile>(text, "t.toml") {
            (p, Some(f)) if p.is_empty() => f,
            (p, _) => return Err(PolicyError::Invalid { problems: p }.to_string()),
        };
        check(file, text, "t.toml", false, false, None).map_err(|e| e.to_string())
    }

    #[test]
    fn unknown_keys_and_bad_values_name_file_line_and_key() {
        let e = from("version = 1\n[server]\nlisten = [\"unix:/tmp/s\"]\nconcurency = 2\n").unwrap_err();
        assert!(e.starts_with("t.toml:4:1: server.concurency: unknown field"), "{e}");
        let e = from("version = 1\n[server]\nlisten = [\"tcp:0.0.0.0:80\"]\n").unwrap_err();
        assert!(e.contains("t.toml:3:11: server.listen[0]: tcp:0.0.0.0:80: refusing a non-loopback"), "{e}");
        let e = from("version = 1\n[runtimes.py]\nguest = \"ruby\"\n").unwrap_err();
        assert!(e.contains("t.toml:3:9: runtimes.py.guest: \"ruby\""), "{e}");
        let e = from("version = 1\n[runtimes.py]\nguest = \"python\"\npolicy = \"nope\"\n").unwrap_err();
        assert!(
            e.contains("runtimes.py.policy: \"nope\": no such policy (known: default, wrap-node, wrap-python)"),
            "{e}"
        );
        let e = from("version = 2\n").unwrap_err();
        assert!(e.contains("t.toml:1:11: version: unsupported version 2"), "{e}");
    }

    #[test]
    fn a_file_with_runtimes_lists_them_all() {
        let c = from(
            "version = 1\n[server]\nlisten = [\"unix:/tmp/s\"]\n[runtimes.js]\nguest = \"javascript\"\nwarm = 0\n",
        )
        .expect("valid");
        assert_eq!(c.runtimes.keys().collect::<Vec<_>>(), ["js"]);
        assert_eq!(c.runtimes["js"].warm, 0);
        assert_eq!(c.listen, [Listen::Unix("/tmp/s".into())]);
    }

    #[test]
    fn the_printed_defaults_read_back() {
        let text = default_file_text();
        let c = from(&text).expect("the defaults are valid");
        assert!(c.runtimes.contains_key("python") && c.runtimes.contains_key("javascript"));
        assert_eq!(c.listen, [Listen::Unix(DEFAULT_SOCKET.into())]);
    }
}
