//! `stockade mcp --host-tools FILE`: the operator's tools that the model's code may call back
//! (host calls: `stockade_host.call(name, args)` in Python, `host.call(name, args)` in
//! JavaScript). Without the flag the model's code has none. Each tool is a program of the
//! operator's, run on this host outside any jail (as any agent's tool is), for each call: the
//! call's arguments (JSON) on its stdin, its answer (JSON) on its stdout; an exit status other
//! than 0 is the tool's error, its stderr the reason. Its environment is `PATH`, `HOME` and
//! `LANG` of this process and the variables the file names, nothing else; past the tool's
//! `timeout-ms` its whole process group is killed. Every budget is the jail's supervisor's, as
//! for any run (`max-calls`, bytes each way, each call's time, the run's wall limit).
//!
//! ```toml
//! version = 1
//!
//! [[tool]]
//! name = "search"
//! description = "Searches the product docs. Args: {\"q\": string}. Returns a list of titles."
//! command = ["/usr/local/bin/docs-search", "--json"]
//! env = ["DOCS_INDEX"]     # passed through from this process's environment
//! max-calls = 20           # the budgets, as a run's `tools` has them (defaults when left out)
//! timeout-ms = 5000
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stockade::Answerer;
use stockade::api::{self, ToolBody};
use stockade::policy::{LocatedProblem, PolicyError};

/// The file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct HostToolsFile {
    /// The format's version: 1.
    version: u32,
    #[serde(default)]
    tool: Vec<ToolFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ToolFile {
    name: String,
    /// What the tool does and what it takes, for the model (in the server's instructions).
    description: String,
    /// The program (an absolute path) and its arguments.
    command: Vec<String>,
    /// Variables of this process's environment the program gets too.
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    max_calls: Option<u32>,
    #[serde(default)]
    max_request_bytes: Option<u32>,
    #[serde(default)]
    max_response_bytes: Option<u32>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// The most bytes of the file.
const FILE_MAX_BYTES: u64 = 1 << 20;
/// The most bytes of a tool's stderr its error keeps.
const STDERR_MAX_BYTES: usize = 1024;

/// The operator's host tools, checked.
#[derive(Debug, Clone)]
pub struct HostTools {
    /// As a run's request declares them (its budgets).
    pub bodies: Vec<ToolBody>,
    programs: Arc<BTreeMap<String, Program>>,
    descriptions: Vec<(String, String)>,
}

#[derive(Debug)]
struct Program {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    max_response_bytes: u32,
    timeout: Duration,
}

/// Reads and checks `path`: every problem named by its key (`tool[0].command`) and position.
pub fn load(path: &Path) -> Result<HostTools, PolicyError> {
    let origin = path.display().to_string();
    let text = stockade::input::read_text(path, FILE_MAX_BYTES, "a host tools file")?;
    let file = match stockade::policy::parse_toml::<HostToolsFile>(&text, &origin) {
        (problems, Some(f)) if problems.is_empty() => f,
        (problems, _) => return Err(PolicyError::Invalid { problems }),
    };
    let mut problems = Vec::new();
    let mut bad = |key: String, message: String| {
        problems.push(LocatedProblem {
            position: stockade::policy::locate_key(&text, &key),
            file: origin.clone(),
            key,
            message,
        });
    };
    if file.version != 1 {
        bad("version".into(), format!("version {} is not known to this stockade (1 is)", file.version));
    }
    let bodies: Vec<ToolBody> = file
        .tool
        .iter()
        .map(|t| ToolBody {
            name: t.name.clone(),
            max_calls: t.max_calls,
            max_request_bytes: t.max_request_bytes,
            max_response_bytes: t.max_response_bytes,
            timeout_ms: t.timeout_ms,
        })
        .collect();
    let checked = match api::tool_list(&bodies) {
        Ok(list) => list,
        Err(e) => {
            let key = e.field.as_deref().unwrap_or("tool").replacen("tools", "tool", 1);
            bad(key, e.message.clone());
            Vec::new()
        }
    };
    let mut programs = BTreeMap::new();
    for (i, (t, lib)) in file.tool.iter().zip(&checked).enumerate() {
        if let Err(why) = program_ok(&t.command) {
            bad(format!("tool[{i}].command"), why);
        }
        if t.description.trim().is_empty() {
            bad(format!("tool[{i}].description"), "say what the tool does and what it takes".into());
        }
        let mut env = Vec::new();
        for (j, name) in t.env.iter().enumerate() {
            match std::env::var(name) {
                Ok(v) => env.push((name.clone(), v)),
                Err(_) => {
                    bad(format!("tool[{i}].env[{j}]"), format!("{name} is not set in this process's environment"))
                }
            }
        }
        let program =
            Program { argv: t.command.clone(), env, max_response_bytes: lib.max_response_bytes, timeout: lib.timeout };
        programs.insert(t.name.clone(), program);
    }
    if !problems.is_empty() {
        return Err(PolicyError::Invalid { problems });
    }
    let descriptions = file.tool.iter().map(|t| (t.name.clone(), t.description.trim().to_string())).collect();
    Ok(HostTools { bodies, programs: Arc::new(programs), descriptions })
}

/// Why `argv` cannot be a tool's command, if it cannot.
fn program_ok(argv: &[String]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(first) = argv.first() else { return Err("the program and its arguments; it is empty".into()) };
    let p = PathBuf::from(first);
    if !p.is_absolute() {
        return Err(format!("{first:?}: the program's absolute path (no PATH lookup)"));
    }
    match std::fs::metadata(&p) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(format!("{first}: not an executable file")),
        Err(e) => Err(format!("{first}: {e}")),
    }
}

impl HostTools {
    /// A run's host calls' answers: each by its tool's program.
    pub fn answerer(&self) -> Answerer {
        let programs = self.programs.clone();
        Arc::new(move |name: &str, args: &str| match programs.get(name) {
            Some(p) => p.answer(args),
            None => Err(format!("no tool {name:?}")),
        })
    }

    /// What the model is told of them.
    pub fn instructions(&self) -> String {
        let how: Vec<&str> = stockade::runtime::LANGUAGES.iter().map(|l| l.host_call).collect();
        let mut s = format!(
            " The code may call these tools of the host ({}; args and the answer are JSON values):",
            how.join(", ")
        );
        for (name, what) in &self.descriptions {
            s.push_str(&format!(" `{name}`: {what}"));
            if !what.ends_with('.') {
                s.push('.');
            }
        }
        s
    }
}

impl Program {
    /// One call: the program run with `args` on its stdin, its stdout the answer (JSON), within
    /// its time (then its process group is killed).
    fn answer(&self, args: &str) -> Result<String, String> {
        let mut child = Command::new(&self.argv[0])
            .args(&self.argv[1..])
            .env_clear()
            .envs(["PATH", "HOME", "LANG"].iter().filter_map(|k| std::env::var(k).ok().map(|v| (*k, v))))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("the tool's program could not start: {e}"))?;
        let deadline = Instant::now() + self.timeout;
        let pid = child.id();
        let (mut stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let args = args.as_bytes().to_vec();
        let writer = std::thread::spawn(move || {
            if let Some(s) = stdin.as_mut() {
                let _ = s.write_all(&args);
            }
        });
        let most = u64::from(self.max_response_bytes) + 1;
        let (done_tx, done) = std::sync::mpsc::channel();
        let out = spawn_reader(stdout, most, done_tx.clone());
        let err = spawn_reader(stderr, STDERR_MAX_BYTES as u64, done_tx);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                _ => break None,
            }
        };
        // Its output ends when the last process holding its pipes does: the program, or what it
        // left running, which is killed at the deadline (the group is still there then: its
        // members hold the pipes, so its id cannot have gone to anyone else).
        let mut ended = 0;
        while ended < 2 && status.is_some() {
            match done.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(()) => ended += 1,
                Err(_) => break,
            }
        }
        if status.is_none() || ended < 2 {
            if let Some(pgid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
            let _ = child.wait();
        }
        let _ = writer.join();
        let out = out.join().unwrap_or_default();
        let err = err.join().unwrap_or_default();
        let Some(status) = status else {
            return Err(format!("the tool did not answer within {} ms", self.timeout.as_millis()));
        };
        if !status.success() {
            let why = String::from_utf8_lossy(&err).trim().to_string();
            return Err(if why.is_empty() { format!("the tool failed ({status})") } else { why });
        }
        if out.len() as u64 >= most {
            return Err(format!("the tool's answer is over its max-response-bytes ({})", self.max_response_bytes));
        }
        let text = String::from_utf8(out).map_err(|_| "the tool's answer is not UTF-8".to_string())?;
        serde_json::from_str::<serde::de::IgnoredAny>(&text)
            .map_err(|e| format!("the tool's answer is not JSON: {e}"))?;
        Ok(text.trim().to_string())
    }
}

/// Reads at most `most` bytes of `from` on a thread (the rest is read and dropped: the program
/// is not held on a full pipe); says on `done` when its end came.
fn spawn_reader(
    from: Option<impl Read + Send + 'static>,
    most: u64,
    done: std::sync::mpsc::Sender<()>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        if let Some(mut r) = from {
            let _ = (&mut r).take(most).read_to_end(&mut kept);
            let _ = std::io::copy(&mut r, &mut std::io::sink());
        }
        let _ = done.send(());
        kept
    })
}
