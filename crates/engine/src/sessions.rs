//! Sessions (`[sessions]`): runs of one runtime and policy that share a workspace. The server
//! holds each session's files in its memory, within the session's quota; each run of it is an
//! ordinary run (a fresh jail, warm when one waits) whose `/app` is given the files before it
//! starts and taken back, whole, when it is over. Nothing of a session is on disk or in a jail
//! between its runs: a session the server forgets (it ended, or the server did) leaves nothing.
//!
//! Three clocks end a session: its idle timeout (reset by each run and file operation), its
//! lifetime (from its making) and, for one run, that run's own wall limit. One run at a time:
//! a session is marked running before its run is admitted, and unmarked when its run is over,
//! whether its client is still there or not. A session belongs to the bearer token that made it
//! (its SHA-256); with tokens on, any other token is told the same thing as for an id that was
//! never made.
//!
//! Imports (layers): `config`, `live`, `metrics`.

use super::metrics::Metrics;
use crate::config::SessionBounds;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use stockade::api::session::{self, FileInfo, FileList, Mode, SessionBody, SessionInfo};
use stockade::api::{self, ApiError, Catalog, ErrorCode};
use stockade::layers::filesystem::exchange::{self, Pick};
use stockade::policy::Limits;
use subtle::ConstantTimeEq;

mod turn;
pub use turn::Turn;

/// Who made a session: the SHA-256 of its bearer token (`None`: a unix socket's client, whom
/// the socket's mode and group let in).
pub type Owner = Option<[u8; 32]>;

/// The owner of a request made with `token`.
pub fn owner_of(token: Option<&str>) -> Owner {
    use sha2::Digest;
    token.map(|t| sha2::Sha256::digest(t.as_bytes()).into())
}

/// A session's settings, checked.
#[derive(Debug, Clone)]
pub struct Spec {
    pub runtime: String,
    pub mode: Mode,
    pub policy: String,
    /// Every run's limits: the policy's, tightened by the session's.
    pub limits: Limits,
    pub idle: Duration,
    pub lifetime: Duration,
}

/// A file of a workspace, and when its content last changed.
#[derive(Debug)]
struct Stored {
    bytes: Vec<u8>,
    modified_unix_ms: u64,
}

#[derive(Debug)]
struct Session {
    owner: Owner,
    spec: Spec,
    created: Instant,
    created_unix_ms: u64,
    last_used: Instant,
    files: BTreeMap<String, Stored>,
    bytes: u64,
    runs: u64,
    running: Option<String>,
    /// A live session's interpreter, between its runs (a run holds it).
    interp: Option<super::live::Interp>,
}

/// What ended a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Idle,
    Lifetime,
    Deleted,
}

impl End {
    /// As the metrics' label and the answer to a later request say it.
    pub fn as_str(self) -> &'static str {
        match self {
            End::Idle => "idle-timeout",
            End::Lifetime => "max-lifetime",
            End::Deleted => "deleted",
        }
    }
}

/// A session that ended, remembered for a while to tell its owner why.
#[derive(Debug)]
struct Ended {
    id: String,
    owner: Owner,
    why: End,
    at: Instant,
}

/// How long, and how many, ended sessions are remembered.
const ENDED_KEPT: Duration = Duration::from_secs(3600);
const ENDED_MAX: usize = 4096;

#[derive(Debug, Default)]
struct State {
    open: HashMap<String, Session>,
    ended: VecDeque<Ended>,
}

/// The server's sessions.
#[derive(Debug)]
pub struct Sessions {
    bounds: SessionBounds,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
    /// What a run of a session takes back: its whole workspace, within the quota.
    workspace: Pick,
}

impl Sessions {
    pub fn new(bounds: SessionBounds, metrics: Arc<Metrics>) -> Sessions {
        let all = vec!["**".to_string()];
        let workspace = Pick {
            patterns: exchange::patterns(&all).unwrap_or_default(),
            sources: all,
            max_files: usize::try_from(bounds.workspace_max_files).unwrap_or(usize::MAX),
            max_bytes: bounds.workspace_max_bytes,
        };
        Sessions { bounds, metrics, state: Mutex::new(State::default()), workspace }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks `body` against what the server offers: a runtime (not a module), a policy it may
    /// run under, limits only tighter, clocks within the server's.
    pub fn check(&self, body: SessionBody, catalog: &Catalog) -> Result<Spec, ApiError> {
        if body.runtime == "wasm" {
            return Err(ApiError::field("runtime", "a session runs a runtime's code, not modules"));
        }
        let probe = api::RunBody {
            runtime: body.runtime.clone(),
            code: Some(String::new()),
            module: None,
            argv: Vec::new(),
            stdin: None,
            stdin_base64: None,
            files: Vec::new(),
            policy: body.policy,
            limits: body.limits,
            return_files: Vec::new(),
            tools: Vec::new(),
        };
        let checked = api::check(probe, catalog)?;
        let clock = |field: &str, asked: Option<u64>, most: u64, key: &str| match asked {
            None => Ok(most),
            Some(0) => Err(ApiError::field(field, "must be more than 0")),
            Some(ms) if ms > most => {
                Err(ApiError::field(field, format!("{ms} is more than the server's {most} (sessions.{key})")))
            }
            Some(ms) => Ok(ms),
        };
        let b = &self.bounds;
        let idle = clock("idle-timeout-ms", body.idle_timeout_ms, b.idle_timeout_ms, "idle-timeout-ms")?;
        let life = clock("max-lifetime-ms", body.max_lifetime_ms, b.max_lifetime_ms, "max-lifetime-ms")?;
        Ok(Spec {
            runtime: body.runtime,
            mode: body.mode,
            policy: checked.policy_name,
            limits: checked.limits,
            idle: Duration::from_millis(idle),
            lifetime: Duration::from_millis(life),
        })
    }

    /// Opens a session: 429 (with the seconds until the first one ends) when the server holds
    /// as many as it may.
    pub fn create(&self, owner: Owner, spec: Spec) -> Result<SessionInfo, ApiError> {
        let mut st = self.lock();
        if st.open.len() >= self.bounds.max {
            if self.bounds.max == 0 {
                return Err(ApiError::new(
                    ErrorCode::TooManySessions,
                    "this server keeps no sessions (sessions.max = 0)",
                ));
            }
            return Err(ApiError::new(
                ErrorCode::TooManySessions,
                format!("the server holds {} sessions, its most (sessions.max): end one, or wait", st.open.len()),
            )
            .retry_after(wait_for_first(st.open.values())));
        }
        let live = st.open.values().filter(|s| s.spec.mode == Mode::Live).count();
        if spec.mode == Mode::Live && live >= self.bounds.live_max {
            let e = ApiError::new(
                ErrorCode::TooManySessions,
                format!("the server holds {live} live sessions, its most (sessions.live-max): end one, or wait"),
            );
            return Err(if self.bounds.live_max == 0 {
                ApiError::field("mode", "this server keeps no live sessions (sessions.live-max = 0)")
            } else {
                e.retry_after(wait_for_first(st.open.values().filter(|s| s.spec.mode == Mode::Live)))
            });
        }
        let mine = st.open.values().filter(|s| same_owner(&s.owner, &owner)).count();
        if mine >= self.bounds.max_per_token {
            return Err(ApiError::new(
                ErrorCode::TooManySessions,
                format!("this token holds {mine} sessions, its most (sessions.max-per-token): end one, or wait"),
            )
            .retry_after(wait_for_first(st.open.values().filter(|s| same_owner(&s.owner, &owner)))));
        }
        let live_of = |s: &&Session| s.spec.mode == Mode::Live && same_owner(&s.owner, &owner);
        let mine_live = st.open.values().filter(live_of).count();
        if spec.mode == Mode::Live && mine_live >= self.bounds.live_max_per_token {
            return Err(ApiError::new(
                ErrorCode::TooManySessions,
                format!(
                    "this token holds {mine_live} live sessions, its most (sessions.live-max-per-token): end one, or wait"
                ),
            )
            .retry_after(wait_for_first(st.open.values().filter(live_of))));
        }
        let id = format!("s-{}", random_hex(16)?);
        let now = Instant::now();
        let s = Session {
            owner,
            spec,
            created: now,
            created_unix_ms: unix_ms(),
            last_used: now,
            files: BTreeMap::new(),
            bytes: 0,
            runs: 0,
            running: None,
            interp: None,
        };
        let info = s.info(&id, &self.bounds, now);
        st.open.insert(id, s);
        self.metrics.session_opened(st.open.len());
        Ok(info)
    }

    pub fn info(&self, id: &str, owner: Owner) -> Result<SessionInfo, ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        Ok(s.info(id, &self.bounds, Instant::now()))
    }

    /// The sessions `owner` made.
    pub fn list(&self, owner: Owner) -> Vec<SessionInfo> {
        let st = self.lock();
        let now = Instant::now();
        let mut all: Vec<SessionInfo> = st
            .open
            .iter()
            .filter(|(_, s)| same_owner(&s.owner, &owner))
            .map(|(id, s)| s.info(id, &self.bounds, now))
            .collect();
        all.sort_by_key(|i| i.created_unix_ms);
        all
    }

    /// Ends a session and forgets its files (a run in progress goes on to its end, its
    /// workspace not kept).
    pub fn delete(&self, id: &str, owner: Owner) -> Result<(), ApiError> {
        let mut st = self.lock();
        find(&mut st, id, owner)?;
        st.open.remove(id);
        end(&mut st, id, owner, End::Deleted, &self.metrics);
        Ok(())
    }

    /// Ends every session past one of its clocks (not while it runs: its run's own wall limit
    /// ends that, and the session after it). Returns how many ended.
    pub fn reap(&self) -> usize {
        let mut st = self.lock();
        let now = Instant::now();
        let expired: Vec<(String, Owner, End)> = st
            .open
            .iter()
            .filter(|(_, s)| s.running.is_none())
            .filter_map(|(id, s)| {
                let why = if now >= s.created + s.spec.lifetime {
                    End::Lifetime
                } else if now >= s.last_used + s.spec.idle {
                    End::Idle
                } else {
                    return None;
                };
                Some((id.clone(), s.owner, why))
            })
            .collect();
        for (id, owner, why) in &expired {
            st.open.remove(id);
            end(&mut st, id, *owner, *why, &self.metrics);
        }
        let cutoff = now.checked_sub(ENDED_KEPT);
        while st.ended.front().is_some_and(|e| cutoff.is_some_and(|c| e.at < c)) {
            st.ended.pop_front();
        }
        expired.len()
    }

    /// Starts a run of a session: 409 while another runs. The run is the session's until the
    /// returned turn is finished or dropped.
    pub fn begin(self: &Arc<Self>, id: &str, owner: Owner) -> Result<Turn, ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        if let Some(run) = &s.running {
            return Err(ApiError {
                run: Some(run.clone()),
                ..ApiError::new(
                    ErrorCode::SessionBusy,
                    format!("session {id} is running {run}: one run at a time (wait for its answer)"),
                )
            });
        }
        let run = format!("r-{}", random_hex(8)?);
        s.running = Some(run.clone());
        s.last_used = Instant::now();
        let files = s.files.iter().map(|(p, f)| (p.clone(), f.bytes.clone())).collect();
        let lifetime_left = (s.created + s.spec.lifetime).saturating_duration_since(Instant::now());
        Ok(Turn {
            sessions: self.clone(),
            id: id.to_string(),
            run,
            spec: s.spec.clone(),
            files,
            done: false,
            interp: s.interp.take(),
            lifetime_left,
        })
    }

    /// Writes a file into a session's workspace (replacing one of that path): 409 when a run
    /// is under way or the path is a directory of the workspace (or below a file), 413 past its
    /// quota.
    pub fn put_file(&self, id: &str, owner: Owner, path: &str, bytes: Vec<u8>) -> Result<FileInfo, ApiError> {
        let rel = checked_path(path)?;
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        s.idle_reset();
        s.not_running(id)?;
        if let Some(other) = s.files.keys().find(|k| nested(k, &rel)) {
            return Err(ApiError::new(
                ErrorCode::FileConflict,
                format!("{rel}: the workspace has {other}: a path cannot be both a file and a directory"),
            ));
        }
        let old = s.files.get(&rel).map_or(0, |f| f.bytes.len() as u64);
        let count = s.files.len() as u64 + u64::from(!s.files.contains_key(&rel));
        let bytes_after = s.bytes - old + bytes.len() as u64;
        over_quota(&self.bounds, count, bytes_after)?;
        let info = FileInfo { path: rel.clone(), bytes: bytes.len() as u64, modified_unix_ms: unix_ms() };
        s.files.insert(rel, Stored { bytes, modified_unix_ms: info.modified_unix_ms });
        s.bytes = bytes_after;
        Ok(info)
    }

    pub fn get_file(&self, id: &str, owner: Owner, path: &str) -> Result<Vec<u8>, ApiError> {
        let rel = checked_path(path)?;
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        s.idle_reset();
        s.files.get(&rel).map(|f| f.bytes.clone()).ok_or_else(|| no_file(&rel))
    }

    pub fn delete_file(&self, id: &str, owner: Owner, path: &str) -> Result<(), ApiError> {
        let rel = checked_path(path)?;
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        s.idle_reset();
        s.not_running(id)?;
        let f = s.files.remove(&rel).ok_or_else(|| no_file(&rel))?;
        s.bytes -= f.bytes.len() as u64;
        Ok(())
    }

    pub fn files(&self, id: &str, owner: Owner) -> Result<FileList, ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        s.idle_reset();
        let files = s
            .files
            .iter()
            .map(|(p, f)| FileInfo {
                path: p.clone(),
                bytes: f.bytes.len() as u64,
                modified_unix_ms: f.modified_unix_ms,
            })
            .collect();
        Ok(FileList { files, workspace: s.usage(&self.bounds) })
    }

    /// The most bytes a workspace holds.
    pub fn workspace_max_bytes(&self) -> u64 {
        self.bounds.workspace_max_bytes
    }

    /// How many sessions are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Ends every session (a draining server: their live interpreters go now).
    pub fn end_all(&self) {
        let mut st = self.lock();
        let all: Vec<(String, Owner)> = st.open.iter().map(|(id, s)| (id.clone(), s.owner)).collect();
        for (id, owner) in all {
            st.open.remove(&id);
            end(&mut st, &id, owner, End::Deleted, &self.metrics);
        }
    }
}

impl Session {
    fn expires(&self) -> Instant {
        (self.created + self.spec.lifetime).min(self.last_used + self.spec.idle)
    }

    fn idle_reset(&mut self) {
        self.last_used = Instant::now();
    }

    fn not_running(&self, id: &str) -> Result<(), ApiError> {
        match &self.running {
            None => Ok(()),
            Some(run) => Err(ApiError {
                run: Some(run.clone()),
                ..ApiError::new(
                    ErrorCode::SessionBusy,
                    format!("session {id} is running {run}: its workspace changes when the run is over"),
                )
            }),
        }
    }

    fn usage(&self, b: &SessionBounds) -> session::WorkspaceUse {
        session::WorkspaceUse {
            files: self.files.len() as u64,
            bytes: self.bytes,
            files_max: b.workspace_max_files,
            bytes_max: b.workspace_max_bytes,
        }
    }

    fn info(&self, id: &str, b: &SessionBounds, now: Instant) -> SessionInfo {
        let left = self.expires().saturating_duration_since(now);
        SessionInfo {
            id: id.to_string(),
            runtime: self.spec.runtime.clone(),
            mode: self.spec.mode,
            policy: self.spec.policy.clone(),
            limits: self.spec.limits,
            idle_timeout_ms: millis(self.spec.idle),
            max_lifetime_ms: millis(self.spec.lifetime),
            created_unix_ms: self.created_unix_ms,
            expires_unix_ms: unix_ms() + millis(left),
            runs: self.runs,
            running: self.running.clone(),
            workspace: self.usage(b),
        }
    }
}

/// The open session `id` of `owner`. Else, to its owner, why it ended (410) when that is
/// remembered; to anyone else the same answer as for an id never made: 404 on a unix socket,
/// 403 with tokens (an id is no way to learn of another token's sessions).
fn find<'s>(st: &'s mut State, id: &str, owner: Owner) -> Result<&'s mut Session, ApiError> {
    let none = || match owner {
        None => ApiError::new(ErrorCode::SessionNotFound, format!("no session {id}")),
        Some(_) => ApiError::new(ErrorCode::Forbidden, format!("no session {id} for this token")),
    };
    if session::check_id(id).is_err() {
        return Err(none());
    }
    let theirs = st.open.get(id).map(|s| s.owner);
    // Compared whether it exists or not: the time taken says nothing of it.
    let same = same_owner(&theirs.unwrap_or(Some([0xa5; 32])), &owner);
    if theirs.is_some() && same {
        return st.open.get_mut(id).ok_or_else(none);
    }
    if theirs.is_none()
        && let Some(e) = st.ended.iter().rev().find(|e| e.id == id && same_owner(&e.owner, &owner))
    {
        let ago = e.at.elapsed().as_secs();
        return Err(ApiError::new(
            ErrorCode::SessionEnded,
            format!("session {id} ended {ago} s ago: {}", ended_why(e.why)),
        ));
    }
    Err(none())
}

/// Seconds until the first of `sessions` ends by its clocks (1 to 3600), for `Retry-After`.
fn wait_for_first<'a>(sessions: impl Iterator<Item = &'a Session>) -> u64 {
    let now = Instant::now();
    let soonest = sessions.map(Session::expires).min().unwrap_or(now);
    soonest.saturating_duration_since(now).as_secs().clamp(1, 3600)
}

fn ended_why(why: End) -> &'static str {
    match why {
        End::Idle => "its idle timeout passed with no run or file operation (idle-timeout-ms)",
        End::Lifetime => "its lifetime was over (max-lifetime-ms)",
        End::Deleted => "it was deleted",
    }
}

/// Constant-time: tokens' digests are secrets' digests.
pub(super) fn same_owner(a: &Owner, b: &Owner) -> bool {
    let bytes = |o: &Owner| {
        let mut v = [0u8; 33];
        if let Some(d) = o {
            v[0] = 1;
            v[1..].copy_from_slice(d);
        }
        v
    };
    bool::from(bytes(a).ct_eq(&bytes(b)))
}

fn end(st: &mut State, id: &str, owner: Owner, why: End, metrics: &Metrics) {
    if st.ended.len() >= ENDED_MAX {
        st.ended.pop_front();
    }
    st.ended.push_back(Ended { id: id.to_string(), owner, why, at: Instant::now() });
    metrics.session_ended(why.as_str(), st.open.len());
}

/// A file path of a workspace as a request wrote it (URL-decoded): plain names only.
fn checked_path(path: &str) -> Result<String, ApiError> {
    exchange::check_relative(path).map_err(|why| ApiError::field("path", format!("{path:?} {why}")))?;
    Ok(path.to_string())
}

/// Whether one of two paths is a directory of the other.
fn nested(a: &str, b: &str) -> bool {
    let below = |x: &str, dir: &str| x.len() > dir.len() && x.starts_with(dir) && x.as_bytes()[dir.len()] == b'/';
    below(a, b) || below(b, a)
}

fn over_quota(b: &SessionBounds, files: u64, bytes: u64) -> Result<(), ApiError> {
    if files > b.workspace_max_files {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the workspace would hold {files} files, more than {} (sessions.workspace-max-files)",
                b.workspace_max_files
            ),
        ));
    }
    if bytes > b.workspace_max_bytes {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "the workspace would hold {bytes} bytes, more than {} (sessions.workspace-max-bytes)",
                b.workspace_max_bytes
            ),
        ));
    }
    Ok(())
}

/// A take's reason for leaving a file out, as the workspace's.
fn kept_reason(reason: &str) -> String {
    match reason {
        exchange::OVER_COUNT => "over the workspace's quota of files (sessions.workspace-max-files)".into(),
        exchange::OVER_BYTES => "over the workspace's quota of bytes (sessions.workspace-max-bytes)".into(),
        other => other.to_string(),
    }
}

fn no_file(path: &str) -> ApiError {
    ApiError {
        field: Some("path".into()),
        ..ApiError::new(ErrorCode::NotFound, format!("no file {path} in the workspace"))
    }
}

fn internal(why: &str) -> ApiError {
    super::incident(ErrorCode::Internal, "internal error", why)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, millis)
}

/// `n` random bytes from the kernel, as hex (an id must never be guessable: no fallback).
/// A new run's id: `r-` and 16 hex digits.
pub fn run_id() -> Result<String, ApiError> {
    Ok(format!("r-{}", random_hex(8)?))
}

pub(super) fn random_hex(n: usize) -> Result<String, ApiError> {
    use std::io::Read;
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| internal(&format!("cannot read /dev/urandom for an id: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_not_both_a_file_and_a_directory() {
        assert!(nested("a/b", "a") && nested("a", "a/b/c"));
        assert!(!nested("ab", "a") && !nested("a", "a") && !nested("a.txt", "a"));
    }

    #[test]
    fn a_run_of_a_session_takes_its_whole_workspace_back() {
        let b = SessionBounds {
            max: 1,
            max_per_token: 1,
            live_max: 1,
            live_max_per_token: 1,
            idle_timeout_ms: 1,
            max_lifetime_ms: 1,
            workspace_max_bytes: 10,
            workspace_max_files: 2,
        };
        let s = Sessions::new(b, Arc::new(Metrics::new()));
        for path in ["a", ".hidden", "d/e/f.bin", "x y"] {
            assert!(s.workspace.patterns.is_match(path), "{path}");
        }
        assert_eq!((s.workspace.max_files, s.workspace.max_bytes), (2, 10));
    }

    #[test]
    fn owners_are_told_apart() {
        let (a, b) = (owner_of(Some("one")), owner_of(Some("two")));
        assert!(same_owner(&a, &a) && same_owner(&None, &None));
        assert!(!same_owner(&a, &b) && !same_owner(&a, &None) && !same_owner(&None, &b));
    }
}
