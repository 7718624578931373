//! A session's making: its settings checked against what the server offers ([`Sessions::check`]),
//! room for it among the server's sessions and its token's, its directory and first meta written
//! ([`Sessions::create`]).

use super::{Owner, Session, Sessions, Spec, random_hex, same_owner, unix_ms, wait_for_first};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stockade::api::session::{Mode, SessionBody, SessionInfo};
use stockade::api::{self, ApiError, Catalog, ErrorCode};

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
        let now = unix_ms();
        let mut s = Session {
            owner,
            spec,
            created_unix_ms: now,
            last_used_unix_ms: now,
            files: BTreeMap::new(),
            bytes: 0,
            runs: 0,
            running: None,
            interp: None,
            lost: None,
            changes: 0,
            saved: Arc::new(Mutex::new(0)),
        };
        self.dir.create(&id).map_err(|e| self.disk_error(&id, &e))?;
        let save = s.changed(&id);
        // Written under the lock, once: no other request knows of the session yet.
        if let Err(e) = self.write(save) {
            let _ = self.dir.remove(&id);
            return Err(e);
        }
        let info = s.info(&id, &self.bounds, now);
        st.open.insert(id, s);
        self.metrics.session_opened(st.open.len());
        Ok(info)
    }
}
