//! The server's configuration: a TOML file (typed, `deny_unknown_fields`, version 1) turned into
//! a checked [`Config`], every problem as `FILE:LINE:COL: KEY: message` like a policy's. Without
//! a file, the built-in defaults (`stockade serve --print-config` shows them as a file).
//!
//! Imports (layers): none.

mod check;
mod file;

pub use file::{ConfigFile, PoliciesFile, ServerFile, SessionsFile, default_file_text, default_runtimes};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use stockade::api::{Catalog, RequestCaps};
use stockade::policy::PolicyError;

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
    /// A Wasm guest of the runner's, waiting for framed code on stdin.
    Guest(stockade::runtime::Guest),
    /// A host program; `framed`: stockade's Python bootstrap reads the frame, in `python`'s
    /// environment (`venv`, `preload`).
    Program { path: String, args: Vec<String>, framed: bool, python: stockade::runtime::PythonEnv },
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

impl Config {
    /// A front's cgroup settings (`--cgroup-parent`, `--cgroups-best-effort`), on every policy
    /// the server offers.
    pub fn apply_cgroups(&mut self, flags: &CgroupFlags) -> Result<(), PolicyError> {
        for policy in self.catalog.policies.values_mut() {
            flags.apply(policy)?;
        }
        Ok(())
    }
}

pub use stockade::policy::CgroupFlags;

impl Runtime {
    /// What its jails run, as the library builds them.
    pub fn code(&self) -> stockade::runtime::Code<'_> {
        use stockade::runtime::Code;
        match &self.kind {
            Kind::Guest(guest) => Code::Guest(*guest),
            Kind::Program { path, args, framed, python } => Code::Program { path, args, framed: *framed, python },
        }
    }
}

/// Where the server listens and who may call it.
#[derive(Debug, Clone)]
pub struct Listeners {
    pub listen: Vec<Listen>,
    /// The unix socket's mode and group.
    pub socket_mode: u32,
    pub socket_gid: Option<u32>,
    /// Bearer tokens TCP listeners require.
    pub tokens: Vec<String>,
    /// Whether the playground is served (`server.ui`, `--ui`).
    pub ui: bool,
}

/// Every bound the service puts on what its clients can hold, in size and in time, built once
/// from `[server]` and `[requests]` (each key is documented in `contrib/serve.toml`) and read by
/// the listeners, the HTTP front and the engine. The content of one request (its code, stdin,
/// arguments, files, the files it takes back) is bounded by the catalog's [`RequestCaps`],
/// which the library's `api` checks.
#[derive(Debug, Clone)]
pub struct Bounds {
    /// Runs at once (`server.concurrency`).
    pub concurrency: usize,
    /// Requests waiting for a run slot (`server.queue`; past it 429), each at most
    /// `server.queue-timeout-ms` (then 503).
    pub queue: usize,
    pub queue_timeout: Duration,
    /// Connections at once (`server.max-connections`; the next wait to be accepted).
    pub max_connections: usize,
    /// A request's headers within `server.header-timeout-ms`.
    pub header_timeout: Duration,
    /// A write to a client that makes no progress for `server.write-timeout-ms` ends its
    /// connection (and frees its answer).
    pub write_timeout: Duration,
    /// A body: at most `requests.body-max-bytes` (413), all of it within `server.body-timeout-ms`
    /// and at least `server.body-min-bytes-per-second` every second after the first (408).
    pub body_max_bytes: u64,
    pub body_timeout: Duration,
    pub body_min_rate: u64,
    /// Bodies in memory at once, all requests together (`requests.in-flight-max-bytes`; 503):
    /// bodies over 1 MiB leave the last quarter to smaller ones.
    pub bodies_in_flight_max_bytes: u64,
    /// Answers in memory at once (`requests.answers-in-flight-max-bytes`; 503): each run
    /// reserves the most its answer can take before it starts, until its client has read it.
    pub answers_in_flight_max_bytes: u64,
    /// How long a stopping server lets its runs finish (`server.drain-timeout-ms`).
    pub drain_timeout: Duration,
    /// Whether a spawner process builds the warm jails (`server.spawner`).
    pub spawner: bool,
    /// `[sessions]`.
    pub sessions: SessionBounds,
    /// `sessions.state-dir` (`None`: a directory of the engine's own, gone with it).
    pub state_dir: Option<PathBuf>,
}

/// `[sessions]`, checked: how many, their clocks' most, their workspaces' quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBounds {
    pub max: usize,
    pub max_per_token: usize,
    pub live_max: usize,
    pub live_max_per_token: usize,
    pub idle_timeout_ms: u64,
    pub max_lifetime_ms: u64,
    /// After how long idle a live interpreter is hibernated (`None`: never by itself).
    pub hibernate_after_ms: Option<u64>,
    /// Whether a hibernation waits for its image to be on the disk.
    pub sync_images: bool,
    /// Replicas' lease on a session (`None`: a server alone on its state directory).
    pub replica_lease_ms: Option<u64>,
    pub workspace_max_bytes: u64,
    pub workspace_max_files: u64,
}

/// The checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from (a path, or `builtin`), for messages.
    pub origin: String,
    pub listeners: Listeners,
    pub bounds: Bounds,
    /// What requests are checked against: the runtimes, every named policy a runtime may run
    /// under (each once, here), the request caps.
    pub catalog: Catalog,
    /// How each runtime's jails are built.
    pub runtimes: BTreeMap<String, Runtime>,
}

/// What the command line says over a configuration file: `--listen` (replaces its listeners;
/// checked the same way), `--tokens-file` (replaces `server.tokens-file`), and a policy every
/// runtime may also run under (`stockade mcp --policy`: the operator's choice).
#[derive(Debug, Clone, Default)]
pub struct Overrides<'a> {
    pub listen: &'a [String],
    pub tokens_file: Option<&'a Path>,
    pub also: Option<&'a str>,
    /// `--state-dir` (replaces `sessions.state-dir`).
    pub state_dir: Option<&'a Path>,
    /// With neither `--state-dir` nor `sessions.state-dir`: [`default_state_dir`] (`stockade
    /// serve`), or none (an engine of its own).
    pub default_state_dir: bool,
    /// `--ui`: serve the playground; with no `tcp:` listener, also on [`UI_LISTEN`] (only there
    /// with neither a configuration file nor `--listen`); with no tokens file, `ui_token` is this
    /// run's only token.
    pub ui: bool,
    pub ui_token: Option<&'a str>,
}

/// Where `--ui` listens when the configuration has no TCP listener.
pub const UI_LISTEN: &str = "tcp:127.0.0.1:8787";

/// Where `stockade serve` keeps sessions when told nowhere: `/var/lib/stockade/state` for root,
/// else `$XDG_STATE_HOME/stockade`, else `~/.local/state/stockade`. `None` with no home to put
/// it in.
pub fn default_state_dir() -> Option<PathBuf> {
    if rustix::process::geteuid().is_root() {
        return Some(PathBuf::from("/var/lib/stockade/state"));
    }
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").and_then(absolute) {
        return Some(xdg.join("stockade"));
    }
    std::env::var_os("HOME").and_then(absolute).map(|h| h.join(".local/state/stockade"))
}

/// Checks a configuration given as text (an embedding program's), `origin` naming it in every
/// problem: the same checks as a file's, with no command line's overrides.
pub fn parse(text: &str, origin: &str) -> Result<Config, PolicyError> {
    match stockade::policy::parse_toml::<ConfigFile>(text, origin) {
        (problems, Some(f)) if problems.is_empty() => {
            check::check(f, text, origin, false, check::Flags::default(), None)
        }
        (problems, _) => Err(PolicyError::Invalid { problems }),
    }
}

/// Reads and checks a configuration file (`None`: the built-in defaults) with the command line's
/// overrides.
pub fn load(path: Option<&Path>, over: &Overrides<'_>) -> Result<Config, PolicyError> {
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
            sessions: SessionsFile::default(),
            runtimes: default_runtimes(),
        },
        Some(_) => match stockade::policy::parse_toml::<ConfigFile>(&text, &origin) {
            (problems, Some(f)) if problems.is_empty() => f,
            (problems, _) => return Err(PolicyError::Invalid { problems }),
        },
    };
    let mut file = file;
    if !over.listen.is_empty() {
        file.server.listen = over.listen.to_vec();
    }
    if let Some(t) = over.tokens_file {
        file.server.tokens_file = t.display().to_string();
    }
    if over.ui {
        file.server.ui = true;
        if path.is_none() && over.listen.is_empty() {
            // The built-in configuration's socket is root's: the page alone needs no socket.
            file.server.listen = vec![UI_LISTEN.to_string()];
        } else if !file.server.listen.iter().any(|l| l.starts_with("tcp:") || l == "systemd") {
            file.server.listen.push(UI_LISTEN.to_string());
        }
        if file.server.tokens_file.is_empty()
            && let Some(t) = over.ui_token
        {
            file.server.run_tokens.push(zeroize::Zeroizing::new(t.to_string()));
        }
    }
    if let Some(d) = over.state_dir {
        file.sessions.state_dir = d.display().to_string();
    } else if file.sessions.state_dir.is_empty()
        && over.default_state_dir
        && let Some(d) = default_state_dir()
    {
        file.sessions.state_dir = d.display().to_string();
    }
    let flags = check::Flags { listen: !over.listen.is_empty(), tokens_file: over.tokens_file.is_some() };
    check::check(file, &text, &origin, path.is_none(), flags, over.also)
}

#[cfg(test)]
mod tests {
    use super::file::DEFAULT_SOCKET;
    use super::*;

    fn from(text: &str) -> Result<Config, String> {
        parse(text, "t.toml").map_err(|e| e.to_string())
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
        assert_eq!(c.listeners.listen, [Listen::Unix("/tmp/s".into())]);
    }

    #[test]
    fn the_printed_defaults_read_back() {
        let text = default_file_text();
        let c = from(&text).expect("the defaults are valid");
        assert!(c.runtimes.contains_key("python") && c.runtimes.contains_key("javascript"));
        assert_eq!(c.listeners.listen, [Listen::Unix(DEFAULT_SOCKET.into())]);
    }
}
