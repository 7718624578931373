//! Host calls through the service: a streaming run's calls go to its client as `call` events,
//! and the client answers each with `POST /v1/runs/{run}/calls/{id}`. The library's host-call
//! server holds every budget (the tools, counts, bytes, each call's time: `stockade::HostCalls`);
//! this is only the way between it and the client: the pending calls, by run, each answered at
//! most once, by the caller that made the run.
//!
//! Imports (layers): `sessions`.

use super::sessions::Owner;
use std::collections::HashMap;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use stockade::api::{ApiError, ErrorCode};
use stockade::{HostCalls, Tool};

/// Sends a call's event on the run's stream (one NDJSON line, with its newline); `false` when
/// the stream is gone.
pub type Events = Arc<dyn Fn(Vec<u8>) -> bool + Send + Sync>;

/// The runs with host calls, and their calls waiting for an answer.
#[derive(Debug, Default)]
pub struct Calls {
    runs: Mutex<HashMap<String, Run>>,
}

#[derive(Debug)]
struct Run {
    owner: Owner,
    next: u64,
    /// Each call waiting: where its answer goes, and the most bytes its tool's answer may take.
    waiting: HashMap<String, (SyncSender<Result<String, String>>, u32)>,
}

/// A run's place among the calls: forgotten (with its calls waiting) when dropped.
#[derive(Debug)]
pub struct Open {
    calls: Arc<Calls>,
    run: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.run);
    }
}

/// How long after its tool's timeout a call's answer is still waited for here (the library has
/// answered the program by then; this only frees the waiting thread).
const GRACE: Duration = Duration::from_millis(500);

impl Calls {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Run>> {
        self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens run `run` of `owner` for host calls of `tools`: each call becomes an event on
    /// `events` and waits for its answer ([`Calls::answer`]).
    pub fn open(self: &Arc<Self>, run: &str, owner: Owner, tools: Vec<Tool>, events: Events) -> (HostCalls, Open) {
        self.lock().insert(run.to_string(), Run { owner, next: 0, waiting: HashMap::new() });
        let budgets: HashMap<String, (Duration, u32)> =
            tools.iter().map(|t| (t.name.clone(), (t.timeout, t.max_response_bytes))).collect();
        let (calls, run_id) = (self.clone(), run.to_string());
        let answer = move |name: &str, args: &str| -> Result<String, String> {
            let (tx, rx) = sync_channel(1);
            let (timeout, most) = budgets.get(name).copied().unwrap_or_default();
            let id = {
                let mut runs = calls.lock();
                let r = runs.get_mut(&run_id).ok_or("the run is over")?;
                r.next += 1;
                let id = format!("c-{}", r.next);
                r.waiting.insert(id.clone(), (tx, most));
                id
            };
            let args: serde_json::Value = serde_json::from_str(args).unwrap_or(serde_json::Value::Null);
            let event = serde_json::json!({"call": {"run": run_id, "id": id, "name": name, "args": args}});
            let mut line = serde_json::to_vec(&event).unwrap_or_default();
            line.push(b'\n');
            if !events(line) {
                calls.forget(&run_id, &id);
                return Err("the run's client is gone".into());
            }
            let got = rx.recv_timeout(timeout + GRACE);
            calls.forget(&run_id, &id);
            got.unwrap_or_else(|_| Err(format!("{name} was not answered")))
        };
        let host = HostCalls { tools, answer: Arc::new(answer) };
        (host, Open { calls: self.clone(), run: run.to_string() })
    }

    fn forget(&self, run: &str, id: &str) {
        if let Some(r) = self.lock().get_mut(run) {
            r.waiting.remove(id);
        }
    }

    /// The most bytes the answer of call `id` of run `run` may take (its tool's
    /// `max-response-bytes`), when it waits for one from `owner`: asked before its body is read,
    /// so that an answer to no call costs nothing, and one to a call is read within its bound.
    pub fn waiting(&self, run: &str, id: &str, owner: Owner) -> Result<u32, ApiError> {
        let runs = self.lock();
        let r = runs.get(run).filter(|r| super::sessions::same_owner(&r.owner, &owner));
        r.and_then(|r| r.waiting.get(id)).map(|(_, most)| *most).ok_or_else(|| not_waiting(run, id))
    }

    /// Answers call `id` of run `run` for `owner`: `answer` is the value (JSON text) or the
    /// tool's error. 404 `call-not-found` when no such call waits (answered, past its time, or
    /// never made); a run that is not the caller's is answered as one that does not exist.
    pub fn answer(&self, run: &str, id: &str, owner: Owner, answer: Result<String, String>) -> Result<(), ApiError> {
        let mut runs = self.lock();
        let none = || not_waiting(run, id);
        let r = runs.get_mut(run).filter(|r| super::sessions::same_owner(&r.owner, &owner)).ok_or_else(none)?;
        let (tx, _) = r.waiting.remove(id).ok_or_else(none)?;
        tx.try_send(answer).map_err(|_| none())
    }
}

/// 404 `call-not-found`: no such call waits.
fn not_waiting(run: &str, id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::CallNotFound,
        format!("no call {id} of run {run} waits for an answer (answered, past its time, or never made)"),
    )
}
