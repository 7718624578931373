//! A session's making: its settings checked against what the server offers ([`Sessions::check`]),
//! room for it among the server's sessions and its token's, its directory and first meta written
//! ([`Sessions::create`]); a session forked from another ([`Sessions::fork`]).

use super::{Hold, Image, Owner, Session, Sessions, Spec, find, random_hex, same_owner, unix_ms, wait_for_first};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stockade::api::session::{Mode, SessionBody, SessionInfo};
use stockade::api::{self, ApiError, Catalog, ErrorCode};

/// Why a fork of a live session whose interpreter cannot be written has none.
const FORKED_UNIMAGED: &str = "forked from a live session whose interpreter cannot be copied (only the python guest's can: a javascript fork would draw the same Math.random): its workspace was copied, not its interpreter's state";

impl Sessions {
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
            egress_allow: None,
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
        self.room(&st, owner, spec.mode)?;
        let now = unix_ms();
        let s = Session {
            owner,
            spec,
            created_unix_ms: now,
            last_used_unix_ms: now,
            disk_used_unix_ms: now,
            files: BTreeMap::new(),
            bytes: 0,
            runs: 0,
            running: None,
            interp: None,
            lost: None,
            forked_from: None,
            image: None,
            auto_refused: false,
            gc: false,
            changes: 0,
            saved: Arc::new(Mutex::new(0)),
            lease: None,
        };
        let id = format!("s-{}", random_hex(16)?);
        self.dir.create(&id).map_err(|e| self.disk_error(&id, &e))?;
        self.made(&mut st, id, s)
    }

    /// Forks session `id`: a new session of the same owner, runtime, policy and limits, its own
    /// clocks from now, a copy of the workspace (its blobs linked, never copied: they never
    /// change) and of its interpreter's state (its image: the parent's hibernated one, or
    /// `written`, the image just copied of its live interpreter, a blob of the parent's it does
    /// not name, which the session `hold` holds); each goes on on its own, a fork's interpreter
    /// drawing its `random` again. 409 while the session runs, 429 as [`Sessions::create`].
    pub fn fork(&self, id: &str, owner: Owner, written: Option<(&Hold, Image)>) -> Result<SessionInfo, ApiError> {
        let mut st = self.lock();
        let parent = find(&mut st, id, owner)?;
        self.held(parent, id)?;
        parent.idle_reset();
        match &written {
            Some((hold, _)) if parent.running.as_deref() == Some(hold.run.as_str()) => {}
            _ => parent.not_running(id)?,
        }
        let copied = written.as_ref().map(|(_, image)| image.clone());
        let image = copied.clone().or_else(|| parent.image.clone().filter(|_| parent.interp.is_none()));
        let unimaged =
            parent.spec.mode == Mode::Live && image.is_none() && (parent.interp.is_some() || written.is_some());
        let now = unix_ms();
        let s = Session {
            owner: parent.owner,
            spec: parent.spec.clone(),
            created_unix_ms: now,
            last_used_unix_ms: now,
            disk_used_unix_ms: now,
            files: parent.files.clone(),
            bytes: parent.bytes,
            runs: 0,
            running: None,
            interp: None,
            lost: unimaged.then(|| FORKED_UNIMAGED.to_string()),
            forked_from: Some(id.to_string()),
            image: image.map(|i| Image { reseed: true, ..i }),
            auto_refused: false,
            gc: false,
            changes: 0,
            saved: Arc::new(Mutex::new(0)),
            lease: None,
        };
        let parent_names = copied.as_ref().is_some_and(|c| parent.names(Some(&c.blob)));
        // A fork with an image is hibernated: it holds no jail.
        let mode = if s.hibernated() { Mode::Workspace } else { s.spec.mode };
        self.room(&st, owner, mode)?;
        let new = format!("s-{}", random_hex(16)?);
        let linked = self.dir.create(&new).and_then(|()| {
            s.files.values().try_for_each(|f| self.dir.link_blob(id, &new, &f.blob))?;
            s.image.as_ref().map_or(Ok(()), |i| self.dir.link_blob(id, &new, &i.blob))
        });
        if let Err(e) = linked {
            let _ = self.dir.remove(&new);
            return Err(self.disk_error(&new, &e));
        }
        let made = self.made(&mut st, new, s);
        drop(st);
        if let Some(c) = copied.filter(|_| !parent_names) {
            self.dir.drop_blob(id, &c.blob);
        }
        made
    }

    /// Session `s`, its directory made as `id`, written and held. Written under the lock, once:
    /// no other request knows of it yet.
    fn made(&self, st: &mut super::State, id: String, mut s: Session) -> Result<SessionInfo, ApiError> {
        s.lease = match self.first_hold() {
            Some(h) => Some(h),
            None => Some(self.first_lease(&id)?),
        };
        let save = s.changed(&id);
        if let Err(e) = self.write(save) {
            let _ = self.dir.remove(&id);
            return Err(e);
        }
        let info = s.info(&id, &self.bounds, unix_ms());
        st.open.insert(id, s);
        self.metrics.session_opened(st.open.len());
        Ok(info)
    }

    /// Whether a session of `mode` (a live one: holding a jail) for `owner` fits: 429 (with the
    /// seconds until the first one ends) when the server, or the token, holds as many as it may.
    fn room(&self, st: &super::State, owner: Owner, mode: Mode) -> Result<(), ApiError> {
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
        // A hibernated session holds no jail: it counts against `max` alone.
        let live = st.open.values().filter(|s| s.holds_jail()).count();
        if mode == Mode::Live && live >= self.bounds.live_max {
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
        let live_of = |s: &&Session| s.holds_jail() && same_owner(&s.owner, &owner);
        let mine_live = st.open.values().filter(live_of).count();
        if mode == Mode::Live && mine_live >= self.bounds.live_max_per_token {
            return Err(ApiError::new(
                ErrorCode::TooManySessions,
                format!(
                    "this token holds {mine_live} live sessions, its most (sessions.live-max-per-token): end one, or wait"
                ),
            )
            .retry_after(wait_for_first(st.open.values().filter(live_of))));
        }
        Ok(())
    }
}
