//! The run report: how the run ended, what it used, and what each layer enforced.
//! The JSON form is documented in `docs/report.md`; bump [`SCHEMA_VERSION`] on incompatible change.
//! The layers' records ([`Enforcement`], [`LayerReport`], [`Layers`]) are in `enforcement.rs`,
//! the egress proxy's ([`EgressReport`]) in `egress.rs`, what the code gave back
//! ([`Report::give`]) in `given.rs`, re-exported here.
//!
//! Imports (layers): `sys`.

mod egress;
mod enforcement;
mod given;

pub use egress::{Cut, EgressConnection, EgressReport, MAX_LISTED, Refusal};
pub use enforcement::{Enforcement, LayerReport, Layers};
pub use given::{GIVEN_MAX_BYTES, GivenOutput, OUTPUTS_MAX, OUTPUTS_MAX_BYTES, VALUE_MAX_BYTES};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version of the JSON report format.
pub const SCHEMA_VERSION: u32 = 1;

/// Exit code of `stockade run` when the wall-clock limit ended the run (as coreutils `timeout`).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code when stockade itself failed: bad policy or arguments, or jail setup failed.
pub const EXIT_SETUP_FAILED: i32 = crate::sys::EXIT_SETUP_FAILED;
/// Exit code when the program was found but could not be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit code when the program does not exist (on the host, or inside the jail).
pub const EXIT_NOT_FOUND: i32 = 127;
/// Exit code when a seccomp `kill` group was violated: 128 + SIGSYS, as the kernel's own
/// seccomp kill would give.
pub const EXIT_SECCOMP_VIOLATION: i32 = 128 + libc::SIGSYS;

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The program exited with code 0.
    Ok,
    /// The program exited with a non-zero code.
    ExitedNonzero,
    /// The program was killed by a signal it did not get from stockade.
    Signaled,
    /// The wall-clock limit passed; stockade killed every process of the run.
    Timeout,
    /// The jail could not be set up, or the program could not be started; nothing ran.
    SetupFailed,
    /// The program made a system call in a seccomp group whose action is `kill`: the whole run
    /// was killed. `seccomp-violation` names the call.
    SeccompViolation,
    /// The run reached its memory limit and the kernel OOM-killed a process of it.
    Oom,
    /// The program ended by its CPU-time limit (`rlimits.cpu-seconds`).
    CpuLimit,
    /// A fork or thread creation was refused at `cgroups.pids-max` (the program's own exit code
    /// is kept); see also `pids-limit-hit`.
    PidsLimit,
    /// The Wasm guest burned all its fuel (`wasm.fuel`).
    FuelExhausted,
    /// The Wasm guest trapped (`error` has the trap: unreachable, call stack exhausted...).
    WasmTrap,
    /// The Wasm guest tried to grow its memory past `wasm.memory-max-bytes` and was refused.
    WasmMemoryLimit,
    /// A writable directory was full (`filesystem.writable-max-bytes` or `-files`) when the run
    /// ended: a write failed with ENOSPC (the program's own exit code is kept); see `writable-dirs`.
    DiskLimit,
    /// The program wrote past an output cap (`output.stdout-max-bytes` or `stderr-max-bytes`,
    /// with `output.over-cap = "end"`): the whole run was killed then.
    OutputLimit,
}

impl Status {
    /// The status's name, as the report and the metrics write it (`exited-nonzero`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::ExitedNonzero => "exited-nonzero",
            Status::Signaled => "signaled",
            Status::Timeout => "timeout",
            Status::SetupFailed => "setup-failed",
            Status::SeccompViolation => "seccomp-violation",
            Status::Oom => "oom",
            Status::CpuLimit => "cpu-limit",
            Status::PidsLimit => "pids-limit",
            Status::FuelExhausted => "fuel-exhausted",
            Status::WasmTrap => "wasm-trap",
            Status::WasmMemoryLimit => "wasm-memory-limit",
            Status::DiskLimit => "disk-limit",
            Status::OutputLimit => "output-limit",
        }
    }
}

impl Report {
    /// How the run ended, in one line, when a limit or the jail ended it (a timeout, the memory
    /// or process limit, an output cap, a forbidden system call...); `None` when the program
    /// ended by itself. `stockade run` says it on stderr.
    pub fn ending_words(&self) -> Option<String> {
        let why = match self.status {
            Status::Timeout => format!("passed its wall-clock limit ({} ms) and was killed", self.wall_timeout_ms),
            Status::Oom => "reached its memory limit (cgroups.memory-max-bytes) and was OOM-killed".into(),
            Status::PidsLimit => "was refused a process or thread at its limit (cgroups.pids-max)".into(),
            Status::CpuLimit => "reached its CPU-time limit (rlimits.cpu-seconds)".into(),
            Status::OutputLimit => {
                "wrote past an output cap (output.stdout-max-bytes or stderr-max-bytes) and was ended".into()
            }
            Status::DiskLimit => "filled a writable directory (filesystem.writable-max-bytes or -files)".into(),
            Status::SeccompViolation => format!(
                "made a forbidden system call{} and was killed",
                self.seccomp_violation
                    .as_ref()
                    .map(|v| format!(" ({}, group {})", v.syscall, v.group))
                    .unwrap_or_default()
            ),
            Status::FuelExhausted => "burned all its fuel (wasm.fuel)".into(),
            Status::WasmMemoryLimit => "was refused memory past its limit (wasm.memory-max-bytes)".into(),
            _ => return None,
        };
        Some(format!("the run {why}: {}", self.status.as_str()))
    }
}

/// How a guest ended, by the account of the runner the program was (a neutral form the verdict
/// reads; the Wasm runner's summary is turned into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestEnd {
    /// It returned or exited (with this code); whether a memory growth was refused on the way.
    Exited { code: i32, memory_limit_hit: bool },
    /// It burned all its fuel.
    FuelExhausted,
    /// Its own deadline (the runner's) ended it.
    Interrupted,
    /// It trapped; the trap in one line.
    Trap(String),
    /// The runner could not load or start it; why.
    LoadError(String),
}

impl GuestEnd {
    /// The exit code of a runner whose guest ended so (the Wasm runner's: the guest's own, 124
    /// interrupted, 137 out of fuel, 134 trapped, 125 not loaded).
    pub fn exit_code(&self) -> i32 {
        match self {
            GuestEnd::Exited { code, .. } => *code,
            GuestEnd::Interrupted => 124,
            GuestEnd::FuelExhausted => 137,
            GuestEnd::Trap(_) => 134,
            GuestEnd::LoadError(_) => 125,
        }
    }
}

/// Where a Wasm run's time went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WasmTime {
    /// Loading the precompiled artifact.
    pub load_ms: f64,
    /// Compiling the module inside the jail (a module run for the first time; then cached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ms: Option<f64>,
    /// Instantiating the module with WASI.
    pub instantiate_ms: f64,
    /// Running `_start`.
    pub run_ms: f64,
}

/// What came before the run's start, for a jail released ahead of its run (a service's warm
/// pool): its program had started and got itself ready (an interpreter loaded), then waited.
/// The report's wall and CPU times count from the hand-over; this is apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WarmStart {
    /// From the program's start to the hand-over, milliseconds.
    pub waited_ms: f64,
    /// CPU time the run's cgroup used before the hand-over (the program's start-up),
    /// milliseconds; not in `cpu-user-ms`/`cpu-sys-ms`. Absent without a cgroup (then those
    /// include it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
}

/// One writable directory of the run (a staged tmpfs): what the program left in it and what was
/// written back to the host.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WritableDir {
    /// The directory, as the program saw it (a granted host path, or a Wasm run's `/app`).
    pub path: String,
    /// Bytes and files (inodes) in use when the run ended, against the quota.
    pub bytes_used: u64,
    pub files_used: u64,
    /// Whether the quota was reached.
    pub full: bool,
    /// Files and links written back to the host, their bytes, and entries removed there.
    pub written_back: u64,
    pub written_back_bytes: u64,
    pub removed: u64,
    /// Host entries that were not carried into the jail: sockets, FIFOs, devices, other
    /// filesystems mounted below, unreadable files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_carried: Vec<String>,
}

/// The system call that ended a run with status `seccomp-violation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Violation {
    /// The system call's name, e.g. `ptrace`.
    pub syscall: String,
    /// Its number on x86-64.
    pub number: i32,
    /// The policy group it belongs to, e.g. `ptrace` (in `seccomp.kill`).
    pub group: String,
}

/// What the program wrote on one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StreamReport {
    /// Every byte the program wrote, including the ones past the cap.
    pub bytes: u64,
    /// True when `bytes` exceeded the cap and the rest was discarded.
    pub truncated: bool,
    /// The captured bytes (up to the cap), when output is embedded and is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The captured bytes, base64 (standard alphabet), when output is embedded and not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
}

/// One host call of a run ([`HostCalls`](crate::HostCalls)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CallRecord {
    /// The tool's name (empty when the request could not be read).
    pub name: String,
    /// The request's bytes (its JSON frame) and the answer's (its value).
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// From the request read to the answer written, milliseconds.
    pub ms: f64,
    /// `ok`, `error` (the host's tool failed), `refused` (no such tool, past a budget), or
    /// `timeout` (past the tool's timeout).
    pub outcome: String,
    /// Why, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl CallRecord {
    pub(crate) fn refused(name: &str, request_bytes: u64, reason: String) -> CallRecord {
        CallRecord {
            name: name.to_string(),
            request_bytes,
            response_bytes: 0,
            ms: 0.0,
            outcome: "refused".into(),
            reason: Some(reason),
        }
    }
}

/// The report of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Report {
    pub schema_version: u32,
    pub status: Status,
    /// The program's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the program, when one did (SIGKILL after a timeout).
    pub signal: Option<i32>,
    /// The signal's name, e.g. `SIGSEGV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_name: Option<String>,
    /// For `setup-failed`: what failed, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `seccomp-violation`: the system call that ended the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_violation: Option<Violation>,
    /// The exit code `stockade run` uses for this report.
    pub stockade_exit_code: i32,
    /// The policy in force (a path, or `builtin:default`).
    pub policy: String,
    /// The program as given, and the argument vector it got.
    pub program: String,
    pub argv: Vec<String>,
    /// Wall-clock time from start to the last process's end, milliseconds (µs precision).
    pub wall_ms: f64,
    /// The wall-clock limit in force, milliseconds.
    pub wall_timeout_ms: u64,
    /// CPU time of every process of the run that was reaped, milliseconds.
    pub cpu_user_ms: f64,
    pub cpu_sys_ms: f64,
    /// Largest resident set of any single process of the run, bytes.
    pub max_rss_bytes: u64,
    /// Most memory the run's cgroup held at once (all processes, page cache, tmpfs), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
    /// Processes the kernel OOM-killed in the run's cgroup.
    #[serde(default)]
    pub oom_kills: u64,
    /// Most processes and threads alive at once in the run's cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_peak: Option<u64>,
    /// Whether a fork or thread creation was refused at `cgroups.pids-max`.
    #[serde(default)]
    pub pids_limit_hit: bool,
    /// CPU time the supervisor's thread spent on this run (copying the writable directories in
    /// and back, reading output, enforcing the deadline), milliseconds. Not in any limit of the
    /// run: the supervisor lives outside the run's cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor_cpu_ms: Option<f64>,
    /// For a run handed to a jail started ahead of it: what came before its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_start: Option<WarmStart>,
    /// The run's writable directories (staged on tmpfs, written back at the end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_dirs: Vec<WritableDir>,
    /// For Wasm runs: the guest's own exit code (`proc_exit`), when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_exit_code: Option<i32>,
    /// For Wasm runs with `wasm.fuel`: fuel burned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel_consumed: Option<u64>,
    /// For Wasm runs: the largest linear memory the guest had, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm_memory_peak_bytes: Option<u64>,
    /// For Wasm runs: load, instantiate and run times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm_time: Option<WasmTime>,
    pub stdout: StreamReport,
    pub stderr: StreamReport,
    /// Every host call the program made, in order (when the run had host calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_calls: Vec<CallRecord>,
    /// The connections the program asked its egress proxy for (a policy with an egress list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressReport>,
    /// The value of the code's last expression (a notebook cell's), when it is JSON and not
    /// `None`/`null`/`undefined` (at most [`VALUE_MAX_BYTES`] as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub value: Option<serde_json::Value>,
    /// That value's repr (Python) or string (JavaScript) when it is not JSON, cut at
    /// [`VALUE_MAX_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_repr: Option<String>,
    /// The figures the code left open (a runtime with matplotlib), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<GivenOutput>,
    /// The jail this run shared with others, when it did: `batch` (a batch's runs, each in a
    /// fresh instance of its guest, the layers below the jail's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jail: Option<String>,
    /// The batch it was a run of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// Each layer, in the order the jail applies them.
    pub enforcement: Layers,
}

impl Report {
    /// A report of a run of `program` that has not happened: status `setup-failed`, no output, no
    /// layer. The supervisor fills in how the run went; a refusal adds its reason.
    pub fn new(policy: &str, program: &str, argv: &[String], wall_timeout: std::time::Duration) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            status: Status::SetupFailed,
            exit_code: None,
            signal: None,
            signal_name: None,
            error: None,
            seccomp_violation: None,
            stockade_exit_code: EXIT_SETUP_FAILED,
            policy: policy.to_string(),
            program: program.to_string(),
            argv: argv.to_vec(),
            wall_ms: 0.0,
            wall_timeout_ms: u64::try_from(wall_timeout.as_millis()).unwrap_or(u64::MAX),
            cpu_user_ms: 0.0,
            cpu_sys_ms: 0.0,
            max_rss_bytes: 0,
            memory_peak_bytes: None,
            oom_kills: 0,
            pids_peak: None,
            pids_limit_hit: false,
            supervisor_cpu_ms: None,
            warm_start: None,
            writable_dirs: Vec::new(),
            guest_exit_code: None,
            fuel_consumed: None,
            wasm_memory_peak_bytes: None,
            wasm_time: None,
            stdout: StreamReport::default(),
            stderr: StreamReport::default(),
            host_calls: Vec::new(),
            egress: None,
            value: None,
            value_repr: None,
            outputs: Vec::new(),
            jail: None,
            batch_id: None,
            enforcement: Layers::default(),
        }
    }

    /// Takes what the code gave back (its runtime's channel for it, as written: see `given.rs`):
    /// its value or repr and its outputs, checked against their caps; what was dropped is noted.
    pub fn give(&mut self, bytes: &[u8]) {
        let given = given::read(bytes);
        self.value = given.value;
        self.value_repr = given.repr;
        self.outputs = given.outputs;
        for note in given.notes {
            self.add_note(note);
        }
    }

    /// Adds a note to `error` (after what is there): something said loudly about a run that is
    /// reported as it happened (a cgroup left behind, a write-back that failed).
    pub fn add_note(&mut self, note: impl Into<String>) {
        let note = note.into();
        self.error = Some(match self.error.take() {
            Some(prev) => format!("{prev}; {note}"),
            None => note,
        });
    }

    /// Serializes to pretty JSON (with a final newline).
    pub fn to_json(&self) -> String {
        let mut s = if self.enforcement.has_json() {
            // Layers that carry their JSON write it as it is: from their list, they are pretty too.
            let listed = Report { enforcement: Layers::new(self.enforcement.to_vec()), ..self.clone() };
            serde_json::to_string_pretty(&listed)
        } else {
            serde_json::to_string_pretty(self)
        }
        .unwrap_or_default();
        s.push('\n');
        s
    }

    /// Parses a report.
    pub fn from_json(text: &str) -> Result<Report, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The conventional name of a signal number.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        n if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n) => return format!("SIGRTMIN+{}", n - libc::SIGRTMIN()),
        n => return format!("SIG{n}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_round_trips_through_json() {
        let argv = ["/bin/sh", "-c", "sleep 9"].map(String::from);
        let r = Report {
            status: Status::Timeout,
            signal: Some(9),
            signal_name: Some(signal_name(9)),
            stockade_exit_code: EXIT_TIMEOUT,
            wall_ms: 300.25,
            cpu_user_ms: 0.5,
            cpu_sys_ms: 1.0,
            max_rss_bytes: 4096,
            memory_peak_bytes: Some(8192),
            pids_peak: Some(2),
            stdout: StreamReport { bytes: 3, truncated: false, text: Some("hi\n".into()), base64: None },
            enforcement: vec![LayerReport::new("namespace.user", "new", "new")].into(),
            ..Report::new("builtin:default", "/bin/sh", &argv, std::time::Duration::from_millis(300))
        };
        let json = r.to_json();
        assert!(json.contains("\"status\": \"timeout\""), "{json}");
        assert!(json.contains("\"schema-version\": 1"), "{json}");
        assert_eq!(Report::from_json(&json).expect("parses"), r);
    }

    #[test]
    fn status_names_are_the_serialized_ones() {
        let all = [
            Status::Ok,
            Status::ExitedNonzero,
            Status::Signaled,
            Status::Timeout,
            Status::SetupFailed,
            Status::SeccompViolation,
            Status::Oom,
            Status::CpuLimit,
            Status::PidsLimit,
            Status::FuelExhausted,
            Status::WasmTrap,
            Status::WasmMemoryLimit,
            Status::DiskLimit,
            Status::OutputLimit,
        ];
        for s in all {
            assert_eq!(serde_json::to_value(s).expect("serializes"), serde_json::Value::from(s.as_str()));
        }
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
    }
}
