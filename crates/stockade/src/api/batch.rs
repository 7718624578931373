//! `POST /v1/batches`: many runs of one runtime, each in a fresh instance of its guest, sharing
//! a jail (see `runtime::Recipe::build_batch`). The body as sent ([`BatchBody`]: a list of runs,
//! or one program against a list of inputs), checked into a [`BatchRequest`] (every run's code,
//! arguments, stdin and limits within the server's caps and the batch's limits, the batch's
//! within its policy's; an error names the run's field, `runs[3].stdin`), and a judge's verdict
//! of each run ([`judge`]) against what it should have printed (`expect`).
//!
//! Imports (layers): `policy`, `report`.

pub use super::answer::Verdict;
use super::{ApiError, Catalog, RunResult, bounded};
use crate::policy::Limits;
use crate::report::{Report, Status};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `POST /v1/batches`, as sent: `runs`, or `code` with `inputs`.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BatchBody {
    /// A Wasm guest's runtime (`python`, `javascript`).
    pub runtime: String,
    /// A named policy (`GET /v1/info`); default: the runtime's.
    #[serde(default)]
    pub policy: Option<String>,
    /// Every run's limits (tighter than the policy's); `memory-max-bytes` and `pids-max` are the
    /// batch's jails' (their runs share them).
    #[serde(default)]
    pub limits: Limits,
    /// Each run's own code (and input): at most `requests.batch-max-runs`.
    #[serde(default, deserialize_with = "bounded::batch_runs")]
    pub runs: Vec<BatchRunBody>,
    /// One program for every input (with `inputs`).
    #[serde(default)]
    pub code: Option<String>,
    /// The inputs `code` runs against, one run each (no `code` of their own).
    #[serde(default, deserialize_with = "bounded::batch_runs")]
    pub inputs: Vec<BatchRunBody>,
    /// How a run's stdout is held against its `expect` (default `trailing-whitespace`).
    #[serde(default)]
    pub compare: Compare,
}

/// One run of a batch, as sent.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BatchRunBody {
    /// Its code (in `runs`; none in `inputs`).
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default, deserialize_with = "bounded::argv")]
    pub argv: Vec<String>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub stdin_base64: Option<String>,
    /// Its own limits, tighter than the batch's: the wall clock, output caps, a guest's fuel and
    /// linear memory (its memory and processes are its jail's).
    #[serde(default)]
    pub limits: Limits,
    /// What it must print on stdout for the verdict `accepted` (see `compare`); without it, the
    /// run has no verdict.
    #[serde(default)]
    pub expect: Option<String>,
}

/// How stdout is held against `expect`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Compare {
    /// Byte for byte.
    Exact,
    /// Line by line, each line's trailing spaces, tabs and `\r` ignored, and blank lines at the end.
    #[default]
    TrailingWhitespace,
}

/// A checked batch.
#[derive(Debug)]
pub struct BatchRequest {
    pub runtime: String,
    pub policy_name: String,
    /// The batch's limits (its jails are built with them).
    pub limits: Limits,
    pub runs: Vec<BatchRun>,
    pub compare: Compare,
}

/// One checked run of a batch.
#[derive(Debug)]
pub struct BatchRun {
    pub code: Arc<str>,
    pub argv: Vec<String>,
    pub stdin: Vec<u8>,
    /// The batch's limits tightened by its own.
    pub limits: Limits,
    pub expect: Option<String>,
}

/// What a batch answers: every run's result, in the runs' order, and the batch's count.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct BatchAnswer {
    pub batch_id: String,
    pub results: Vec<RunResult>,
    pub summary: BatchSummary,
}

/// How a batch went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct BatchSummary {
    pub runs: u32,
    /// Runs by status (`ok`, `timeout`, ...).
    pub statuses: BTreeMap<String, u32>,
    /// Runs with an `expect`, by verdict.
    pub verdicts: BTreeMap<Verdict, u32>,
    /// The jails the batch's runs shared (a run that ends its jail, at its wall clock say, has
    /// the next run in a new one).
    pub jails: u32,
    /// From its admission to its last run's end.
    pub wall_ms: f64,
}

impl BatchSummary {
    /// Counts one run's result.
    pub fn count(&mut self, r: &RunResult) {
        self.runs += 1;
        *self.statuses.entry(r.report.status.as_str().to_string()).or_default() += 1;
        if let Some(v) = r.verdict {
            *self.verdicts.entry(v).or_default() += 1;
        }
    }
}

/// One line of a streamed batch (`?stream=ndjson`): a run's result as it ends, with its index;
/// the last line the summary.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, rename_all_fields = "kebab-case")]
pub enum BatchEvent {
    Result { index: u32, result: Box<RunResult> },
    Summary { batch_id: String, summary: BatchSummary },
    Error { error: ApiError },
}

/// Checks a batch against what the server offers (`guests`: the runtimes that are Wasm guests,
/// which alone run batches). The errors name the field.
pub fn check_batch(body: BatchBody, cfg: &Catalog, guests: &[&str]) -> Result<BatchRequest, ApiError> {
    let r = &cfg.caps;
    let Some(spec) = cfg.runtimes.get(&body.runtime) else {
        return Err(ApiError::field("runtime", format!("unknown runtime {:?}", body.runtime)));
    };
    if !guests.contains(&body.runtime.as_str()) {
        return Err(ApiError::field(
            "runtime",
            format!(
                "runtime {:?} is a program: batches run a Wasm guest's runtime ({})",
                body.runtime,
                guests.join(", ")
            ),
        ));
    }
    let (policy_name, policy) = super::named_policy(body.policy, &spec.policies, &body.runtime, cfg)?;
    let batch = body
        .limits
        .within(&Limits::of(policy), &format!("policy {policy_name:?}"))
        .map_err(|e| ApiError::field(format!("limits.{}", e.key), e.message))?;
    let (list, key, shared) = match (body.runs.is_empty(), body.inputs.is_empty(), body.code) {
        (false, true, None) => (body.runs, "runs", None),
        (true, false, Some(code)) => (body.inputs, "inputs", Some(code)),
        (true, true, _) => return Err(ApiError::field("runs", "a batch needs runs, or code with inputs")),
        (false, _, _) => return Err(ApiError::field("runs", "give runs, or code with inputs, not both")),
        (true, false, None) => return Err(ApiError::field("code", "inputs need the code they run")),
    };
    let shared: Option<Arc<str>> = shared.map(|c| checked_code(c, r, "code")).transpose()?;
    let mut runs = Vec::with_capacity(list.len());
    let mut body_bytes = 0u64;
    for (i, run) in list.into_iter().enumerate() {
        let at = |f: &str| format!("{key}[{i}].{f}");
        let code = match (&shared, run.code) {
            (Some(c), None) => c.clone(),
            (None, Some(c)) => checked_code(c, r, &at("code"))?,
            (Some(_), Some(_)) => return Err(ApiError::field(at("code"), "an input has no code of its own")),
            (None, None) => return Err(ApiError::field(at("code"), "missing: the code to run")),
        };
        let stdin = super::stdin(&body.runtime, &run.argv, run.stdin, run.stdin_base64, true, r)
            .map_err(|e| ApiError { field: e.field.as_deref().map(at), ..e })?;
        if run.limits.memory_max_bytes.is_some() || run.limits.pids_max.is_some() {
            let which = if run.limits.memory_max_bytes.is_some() { "memory-max-bytes" } else { "pids-max" };
            return Err(ApiError::field(
                at(&format!("limits.{which}")),
                "a batch's runs share their jail's memory and processes: set it in the batch's limits",
            ));
        }
        let limits = run
            .limits
            .within(&batch, "the batch's limits")
            .map_err(|e| ApiError::field(at(&format!("limits.{}", e.key)), e.message))?;
        body_bytes += (code.len() + stdin.len()) as u64;
        runs.push(BatchRun { code, argv: run.argv, stdin, limits, expect: run.expect });
    }
    if body_bytes > r.body_max_bytes {
        return Err(ApiError::field(key, format!("more than {} bytes of code and stdin", r.body_max_bytes)));
    }
    Ok(BatchRequest { runtime: body.runtime, policy_name, limits: batch, runs, compare: body.compare })
}

fn checked_code(code: String, r: &super::RequestCaps, field: &str) -> Result<Arc<str>, ApiError> {
    if code.len() as u64 > r.code_max_bytes {
        return Err(ApiError::field(
            field,
            format!("{} bytes, more than {} (requests.code-max-bytes)", code.len(), r.code_max_bytes),
        ));
    }
    Ok(Arc::from(code))
}

/// A run's verdict against `expect` (see [`Verdict`]).
pub fn judge(report: &Report, expect: &str, compare: Compare) -> Verdict {
    match report.status {
        Status::Ok => {
            let printed = report.stdout.text.as_deref();
            let same = printed.is_some_and(|out| match compare {
                Compare::Exact => out == expect,
                Compare::TrailingWhitespace => trimmed(out).eq(trimmed(expect)),
            });
            if same && !report.stdout.truncated { Verdict::Accepted } else { Verdict::WrongAnswer }
        }
        Status::Timeout | Status::FuelExhausted | Status::CpuLimit => Verdict::Timeout,
        Status::Oom | Status::WasmMemoryLimit => Verdict::MemoryLimit,
        Status::OutputLimit => Verdict::OutputLimit,
        Status::ExitedNonzero | Status::Signaled | Status::WasmTrap | Status::SeccompViolation => Verdict::RuntimeError,
        Status::SetupFailed | Status::PidsLimit | Status::DiskLimit => Verdict::InternalError,
    }
}

/// Its lines, each without trailing whitespace, without the blank lines at its end.
fn trimmed(text: &str) -> impl Iterator<Item = &str> {
    let lines: Vec<&str> = text.split('\n').map(|l| l.trim_end_matches([' ', '\t', '\r'])).collect();
    let keep = lines.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
    lines.into_iter().take(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(status: Status, out: &str) -> Report {
        let mut r = Report::new("p", "x", &[], std::time::Duration::ZERO);
        r.status = status;
        r.stdout.text = Some(out.into());
        r
    }

    #[test]
    fn a_verdict_compares_what_was_printed() {
        let t = Compare::TrailingWhitespace;
        assert_eq!(judge(&ran(Status::Ok, "4\n"), "4", t), Verdict::Accepted);
        assert_eq!(judge(&ran(Status::Ok, "4  \r\n\n\n"), "4\n", t), Verdict::Accepted);
        assert_eq!(judge(&ran(Status::Ok, " 4\n"), "4", t), Verdict::WrongAnswer);
        assert_eq!(judge(&ran(Status::Ok, "4\n5\n"), "4", t), Verdict::WrongAnswer);
        assert_eq!(judge(&ran(Status::Ok, "4\n"), "4", Compare::Exact), Verdict::WrongAnswer);
        assert_eq!(judge(&ran(Status::Ok, "4\n"), "4\n", Compare::Exact), Verdict::Accepted);
        assert_eq!(judge(&ran(Status::Timeout, "4\n"), "4", t), Verdict::Timeout);
        assert_eq!(judge(&ran(Status::WasmMemoryLimit, ""), "4", t), Verdict::MemoryLimit);
        assert_eq!(judge(&ran(Status::ExitedNonzero, "4\n"), "4", t), Verdict::RuntimeError);
    }
}
