//! Sessions (`[sessions]`): runs of one runtime and policy that share a workspace. Each session
//! lives in the state directory (`sessions.state-dir`, see `state.rs`): its meta and its files,
//! within its quota, written whole at each change (`sessions/disk.rs`), so that a server started
//! again on the directory has it again as of its last answered run; the server's memory holds
//! what it says of each (its clocks, its files' names, sizes and hashes), never a file's bytes.
//! Each run of a session is an ordinary run (a fresh jail, warm when one waits) whose `/app` is
//! given the files before it starts and taken back, whole, when it is over. A session that ends
//! leaves nothing.
//!
//! Three clocks end a session: its idle timeout (reset by each run and file operation), its
//! lifetime (from its making) and, for one run, that run's own wall limit. One run at a time:
//! a session is marked running before its run is admitted, and unmarked when its run is over,
//! whether its client is still there or not. A session belongs to the bearer token that made it
//! (its SHA-256); with tokens on, any other token is told the same thing as for an id that was
//! never made.
//!
//! Imports (layers): `config`, `live`, `metrics`, `state`.

use super::metrics::Metrics;
use crate::config::SessionBounds;
use crate::state::{Hash, StateDir};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use stockade::api::session::{self, Mode, SessionInfo, SessionState};
use stockade::api::{ApiError, ErrorCode};
use stockade::layers::filesystem::exchange::{self, Pick};
use stockade::policy::Limits;
use subtle::ConstantTimeEq;

mod disk;
mod end;
mod files;
mod image;
mod lease;
mod open;
mod turn;
pub use image::{Held, Hold, Image, NOT_IMAGED, ms_since};
pub use lease::{Claim, Tick};
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

/// A file of a workspace: its blob in the session's directory, its size, when its content last
/// changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stored {
    blob: Hash,
    len: u64,
    modified_unix_ms: u64,
}

#[derive(Debug)]
struct Session {
    owner: Owner,
    spec: Spec,
    created_unix_ms: u64,
    last_used_unix_ms: u64,
    /// The `last_used_unix_ms` its meta on disk says.
    disk_used_unix_ms: u64,
    files: BTreeMap<String, Stored>,
    bytes: u64,
    runs: u64,
    running: Option<String>,
    /// A live session's interpreter, between its runs (a run holds it).
    interp: Option<super::live::Interp>,
    /// Why a live session has no interpreter though it had one (its next run says so).
    lost: Option<String>,
    /// The session it was forked from, if it was.
    forked_from: Option<String>,
    /// A live session's hibernated interpreter (its next run resumes it).
    image: Option<Image>,
    /// Its interpreter could not be hibernated when it was last idle: not tried again by itself
    /// before its next run.
    auto_refused: bool,
    /// Blobs it named may be garbage since its last collection.
    gc: bool,
    /// Its changes so far, and the last one on disk: a change is written with its number, and
    /// one older than what is on disk is not written (a later one holds it too).
    changes: u64,
    saved: Arc<Mutex<u64>>,
    /// This server's hold on it (`None`: another replica may hold it; what is here is what this
    /// one last read).
    lease: Option<lease::Held>,
}

/// A change of a session to write: its meta as of the change, and the change's number.
struct Save {
    id: String,
    json: Vec<u8>,
    change: u64,
    saved: Arc<Mutex<u64>>,
    /// The lease it was made under.
    lease: Option<u64>,
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

/// Why a live session has no interpreter after its server drained.
const LOST_IN_DRAIN: &str =
    "the server stopped: a live interpreter that was not hibernated does not outlive its server";

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
    /// Where they live.
    dir: Arc<StateDir>,
    /// Replicas' leases (`None`: a server alone).
    leases: Option<lease::Leases>,
}

impl Sessions {
    /// The sessions of state directory `dir`: those on it are the server's again (each as of its
    /// last change; what cannot be read is said in the returned problems and left out).
    pub fn new(bounds: SessionBounds, metrics: Arc<Metrics>, dir: Arc<StateDir>) -> (Sessions, Vec<String>) {
        let all = vec!["**".to_string()];
        let workspace = Pick {
            patterns: exchange::patterns(&all).unwrap_or_default(),
            sources: all,
            max_files: usize::try_from(bounds.workspace_max_files).unwrap_or(usize::MAX),
            max_bytes: bounds.workspace_max_bytes,
        };
        let (found, problems) = disk::load_all(&dir);
        let leases = bounds.replica_lease_ms.map(lease::Leases::new);
        let mut state = State::default();
        let first = leases.is_none().then(lease::Held::alone);
        state.open.extend(found.into_iter().map(|(id, s)| (id, Session { lease: first, ..s })));
        metrics.sessions_open(state.open.len());
        (Sessions { bounds, metrics, state: Mutex::new(state), workspace, dir, leases }, problems)
    }

    /// Writes a change of a session (unless a later one is on disk already). `Err`: 500 naming
    /// the state directory (the change holds in this server, and goes to disk with the next).
    fn write(&self, save: Save) -> Result<(), ApiError> {
        let mut last = save.saved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if save.change <= *last {
            return Ok(());
        }
        if !self.may_write(&save.id, save.lease) {
            return Err(ApiError::new(
                ErrorCode::SessionBusy,
                format!("session {} was taken by another replica meanwhile: this change was not written", save.id),
            ));
        }
        self.dir.save(&save.id, &save.json).map_err(|e| self.disk_error(&save.id, &e))?;
        *last = save.change;
        Ok(())
    }

    /// The state directory.
    pub fn dir(&self) -> Arc<StateDir> {
        self.dir.clone()
    }

    /// 500 naming the state directory, for a write of session `id`'s that failed.
    pub fn disk_failure(&self, id: &str, e: &std::io::Error) -> ApiError {
        self.disk_error(id, e)
    }

    fn disk_error(&self, id: &str, e: &std::io::Error) -> ApiError {
        super::incident(
            ErrorCode::Internal,
            "the server could not write the session to its state directory",
            &format!("session {id} in {}: {e}", self.dir.root().display()),
        )
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn info(&self, id: &str, owner: Owner) -> Result<SessionInfo, ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        Ok(s.info(id, &self.bounds, unix_ms()))
    }

    /// The sessions `owner` made.
    pub fn list(&self, owner: Owner) -> Vec<SessionInfo> {
        let st = self.lock();
        let now = unix_ms();
        let mut all: Vec<SessionInfo> = st
            .open
            .iter()
            .filter(|(_, s)| same_owner(&s.owner, &owner))
            .map(|(id, s)| s.info(id, &self.bounds, now))
            .collect();
        all.sort_by_key(|i| i.created_unix_ms);
        all
    }

    /// Starts a run of a session: 409 while another runs. The run is the session's until the
    /// returned turn is finished or dropped. Reads the workspace's files from the state
    /// directory (500 when one of them was changed there: nothing runs on it).
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
        self.held(s, id)?;
        if s.hibernated() {
            let all = st.open.values().filter(|o| o.holds_jail()).count();
            let mine = st.open.values().filter(|o| o.holds_jail()).filter(|o| same_owner(&o.owner, &owner)).count();
            let over = if all >= self.bounds.live_max {
                Some((all, "the server holds", "sessions.live-max"))
            } else if mine >= self.bounds.live_max_per_token {
                Some((mine, "this token holds", "sessions.live-max-per-token"))
            } else {
                None
            };
            if let Some((n, who, key)) = over {
                return Err(ApiError::new(
                    ErrorCode::TooManySessions,
                    format!("session {id} is hibernated, and {who} {n} live interpreters, its most ({key}): hibernate one, or wait"),
                )
                .retry_after(1));
            }
        }
        let s = find(&mut st, id, owner)?;
        let run = format!("r-{}", random_hex(8)?);
        s.running = Some(run.clone());
        s.idle_reset();
        let refs: Vec<(String, Stored)> = s.files.iter().map(|(p, f)| (p.clone(), *f)).collect();
        let left = s.created_unix_ms.saturating_add(millis(s.spec.lifetime)).saturating_sub(unix_ms());
        let mut turn = Turn {
            sessions: self.clone(),
            id: id.to_string(),
            run,
            spec: s.spec.clone(),
            files: Vec::new(),
            done: false,
            interp: s.interp.take(),
            lost: s.lost.take(),
            image: s.image.clone(),
            drop_image: false,
            checkpoint: None,
            lifetime_left: Duration::from_millis(left),
        };
        drop(st);
        // Read with the session marked running: its files do not change meanwhile. A refusal
        // drops the turn, which frees the session.
        for (path, f) in refs {
            let bytes = self.read(id, &path, &f)?;
            turn.files.push((path, bytes));
        }
        Ok(turn)
    }

    /// In a copy of this process that runs guests: the state directory's key wiped.
    pub fn scrub(&self) {
        self.dir.scrub();
    }

    /// The most bytes a workspace holds.
    pub fn workspace_max_bytes(&self) -> u64 {
        self.bounds.workspace_max_bytes
    }

    /// How many sessions are open.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }
}

impl Session {
    /// When it ends by its clocks, in milliseconds since the Unix epoch.
    fn expires(&self) -> u64 {
        let lifetime = self.created_unix_ms.saturating_add(millis(self.spec.lifetime));
        lifetime.min(self.last_used_unix_ms.saturating_add(millis(self.spec.idle)))
    }

    /// Its idle clock starts again (held in memory; on disk with its next change).
    fn idle_reset(&mut self) {
        self.last_used_unix_ms = unix_ms();
    }

    /// Whether its idle clock on disk is far enough behind to be written though nothing else
    /// changed: a quarter of its idle timeout, at most a minute (a server killed meanwhile
    /// restarts it with at most that much less idle time).
    fn clock_due(&self, now_ms: u64) -> bool {
        let every = (self.spec.idle / 4).min(Duration::from_secs(60));
        now_ms.saturating_sub(self.disk_used_unix_ms) >= millis(every)
    }

    /// Counts a change of session `id` and makes its write.
    fn changed(&mut self, id: &str) -> Save {
        self.disk_used_unix_ms = self.last_used_unix_ms;
        self.changes += 1;
        self.gc = true;
        Save {
            id: id.to_string(),
            json: disk::meta_of(self),
            change: self.changes,
            saved: self.saved.clone(),
            lease: self.lease.map(|h| h.epoch),
        }
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

    fn info(&self, id: &str, b: &SessionBounds, now: u64) -> SessionInfo {
        SessionInfo {
            id: id.to_string(),
            runtime: self.spec.runtime.clone(),
            mode: self.spec.mode,
            policy: self.spec.policy.clone(),
            limits: self.spec.limits,
            idle_timeout_ms: millis(self.spec.idle),
            max_lifetime_ms: millis(self.spec.lifetime),
            created_unix_ms: self.created_unix_ms,
            expires_unix_ms: self.expires().max(now),
            runs: self.runs,
            running: self.running.clone(),
            workspace: self.usage(b),
            forked_from: self.forked_from.clone(),
            state: self.state(),
            hibernate_ms: self.image_figures().0,
            image_bytes: self.image_figures().1,
        }
    }

    /// Where its interpreter is: held by a run counts as live.
    fn state(&self) -> SessionState {
        let held = self.running.is_some() && self.spec.mode == Mode::Live && self.image.is_none();
        if self.interp.is_some() || held {
            SessionState::Live
        } else if self.image.is_some() {
            SessionState::Hibernated
        } else {
            SessionState::None
        }
    }

    /// The blobs it names.
    fn blobs(&self) -> HashSet<Hash> {
        self.files.values().map(|f| f.blob).chain(self.image.as_ref().map(|i| i.blob)).collect()
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
            format!("session {id} ended {ago} s ago: {}", end::ended_why(e.why)),
        ));
    }
    Err(none())
}

/// Seconds until the first of `sessions` ends by its clocks (1 to 3600), for `Retry-After`.
fn wait_for_first<'a>(sessions: impl Iterator<Item = &'a Session>) -> u64 {
    let now = unix_ms();
    let soonest = sessions.map(Session::expires).min().unwrap_or(now);
    (soonest.saturating_sub(now) / 1000).clamp(1, 3600)
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

fn internal(why: &str) -> ApiError {
    super::incident(ErrorCode::Internal, "internal error", why)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_unix_ms() -> u64 {
    unix_ms()
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
            hibernate_after_ms: None,
            sync_images: false,
            replica_lease_ms: None,
            workspace_max_bytes: 10,
            workspace_max_files: 2,
        };
        let dir = Arc::new(StateDir::temporary().expect("state directory"));
        let (s, _) = Sessions::new(b, Arc::new(Metrics::new()), dir);
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
