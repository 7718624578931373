//! The server's configuration file as written: `[server]`, `[requests]`, `[policies]`,
//! `[runtimes.NAME]` (typed, `deny_unknown_fields`), with the built-in defaults.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use stockade::api::RequestCaps;

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
    #[serde(default)]
    pub sessions: SessionsFile,
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
    /// Whether the warm jails are built by a spawner process forked at start (small and
    /// single-threaded: a jail does not copy the server's memory); `false`: on the server's
    /// own threads.
    pub spawner: bool,
    /// Whether the playground (a page for a person, in the binary) is served at `/` of every
    /// listener; a browser needs a `tcp:` listener (or a systemd socket) to reach it.
    pub ui: bool,
    /// A token for this run only (`stockade serve --ui` without a tokens file), never in a file;
    /// wiped when dropped, as the tokens file's buffer is.
    #[serde(skip)]
    pub run_tokens: Vec<zeroize::Zeroizing<String>>,
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
            spawner: true,
            ui: false,
            run_tokens: Vec::new(),
        }
    }
}

/// `[sessions]`: runs that share a workspace, kept in the state directory between runs.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct SessionsFile {
    /// Sessions open at once, all clients together (past it, 429); 0: no sessions.
    pub max: u32,
    /// Sessions open at once made with one bearer token (or on the unix socket), so that one
    /// client cannot take them all (past it, 429); unset, a quarter of `max` (at least 1).
    pub max_per_token: Option<u32>,
    /// Live sessions open at once (each holds a jailed interpreter, its memory limit and its
    /// processes, for its life; past it, 429); 0: no live sessions.
    pub live_max: u32,
    /// Live sessions open at once made with one bearer token (or on the unix socket): at most
    /// `max-per-token` and `live-max` (past it, 429); unset, a quarter of `live-max` (at least 1).
    pub live_max_per_token: Option<u32>,
    /// A session ends after this long without a run or a file operation (a session may ask
    /// for less, not more).
    pub idle_timeout_ms: u64,
    /// A session ends this long after it was made, whatever it does (a session may ask for
    /// less, not more).
    pub max_lifetime_ms: u64,
    /// A live session whose interpreter can be hibernated is, after this long without a run or
    /// a file operation: its image written to the state directory, its jail ended (its next run
    /// resumes it). 0: only when asked (`POST /v1/sessions/{id}/hibernate`) or as the server
    /// drains.
    pub hibernate_after_ms: u64,
    /// Whether a hibernation waits until its image is on the disk (fsync). Without, the image
    /// reaches it by the kernel's writeback (seconds), the meta naming it is flushed as always,
    /// and an image a machine crash cut short is refused by its hash, never run (its session's
    /// next run restarts the interpreter, saying why); a killed server loses nothing either way.
    pub sync_images: bool,
    /// 0: this server is alone on its state directory (it holds it locked). More: replicas, any
    /// number of servers on one state directory (a shared filesystem), each holding a session
    /// by a lease of this length that it renews; a session whose server stopped renewing is
    /// taken by the next that is asked for it, once its lease lapsed (or at once when it was let
    /// go: hibernated, or idle). Every answered run of a live session then leaves its
    /// interpreter's image on disk before its answer goes (a replica killed loses no answered
    /// run). 1000 to 600000.
    pub replica_lease_ms: u64,
    /// A session's workspace: its bytes and its files, together (on disk between runs; a run's
    /// workspace is in the server's memory while it starts and ends).
    pub workspace_max_bytes: u64,
    pub workspace_max_files: u32,
    /// Where sessions live (an absolute path; this user's, mode 0700): each session's settings,
    /// clocks and files, so that a server started again on it has them again. `""`: `stockade
    /// serve`'s default (`/var/lib/stockade/state` for root, else `$XDG_STATE_HOME/stockade`
    /// or `~/.local/state/stockade`); an embedding engine's sessions then end with it.
    pub state_dir: String,
}

impl SessionsFile {
    /// `max-per-token` as set, or its default: a quarter, so that one client cannot hold every
    /// session from the others.
    pub fn max_per_token(&self) -> u32 {
        self.max_per_token.unwrap_or(self.max.div_ceil(4).max(1))
    }

    /// `live-max-per-token` as set, or its default: a quarter of `live-max`, within
    /// `max-per-token`.
    pub fn live_max_per_token(&self) -> u32 {
        self.live_max_per_token.unwrap_or(self.live_max.div_ceil(4).max(1).min(self.max_per_token()))
    }
}

impl Default for SessionsFile {
    fn default() -> Self {
        SessionsFile {
            max: 32,
            max_per_token: None,
            live_max: 8,
            live_max_per_token: None,
            idle_timeout_ms: 600_000,
            max_lifetime_ms: 3_600_000,
            hibernate_after_ms: 60_000,
            sync_images: false,
            replica_lease_ms: 0,
            workspace_max_bytes: 8 << 20,
            workspace_max_files: 256,
            state_dir: String::new(),
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
    /// `bootstrap = "python"` only: modules its interpreters import before their code arrives
    /// (a warm one while it waits), e.g. `["numpy", "pandas", "matplotlib.pyplot"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preload: Vec<String>,
    /// `bootstrap = "python"` only: a virtual environment's directory (absolute), granted
    /// read-only; its site-packages are on its interpreters' path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub venv: Option<String>,
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
        preload: Vec::new(),
        venv: None,
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
            preload: Vec::new(),
            venv: None,
        },
    );
    out
}

/// The defaults as a configuration file, for `stockade serve --print-config`.
pub fn default_file_text() -> String {
    let file = ConfigFile {
        version: 1,
        server: ServerFile::default(),
        requests: RequestCaps::default(),
        policies: PoliciesFile::default(),
        sessions: SessionsFile::default(),
        runtimes: default_runtimes(),
    };
    toml::to_string_pretty(&file).unwrap_or_default()
}
