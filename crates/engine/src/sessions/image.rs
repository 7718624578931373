//! A live session's hibernated interpreter: its image, a blob of the session's directory named
//! in its meta, and the hold a hibernation (or a live fork) has on the session while its
//! interpreter writes it ([`Hold`]): the session is marked running meanwhile, as for a run.

use super::{Owner, Session, Sessions, find, random_hex, unix_ms};
use crate::live::Interp;
use crate::state::{Hash, ImageFile};
use std::sync::Arc;
use stockade::api::session::{Mode, SessionInfo};
use stockade::api::{ApiError, ErrorCode};

/// A hibernated interpreter's image, as its session names it.
#[derive(Debug, Clone)]
pub struct Image {
    pub blob: Hash,
    pub bytes: u64,
    /// The guest's memory it holds (its size, not the pages written).
    pub memory_bytes: u64,
    /// The SHA-256 of the guest component it was written by: only that one resumes it.
    pub component: String,
    pub hibernated_unix_ms: u64,
    pub hibernate_ms: f64,
    /// A fork's: its interpreter draws its `random` again when it resumes.
    pub reseed: bool,
}

/// Why a live session has no interpreter after its server drained without hibernating it.
pub const NOT_IMAGED: &str = "its interpreter cannot be hibernated (only the Wasm guests' can): \
                              it was ended, and the workspace kept";

/// A session held while its interpreter is written: until [`Hold::finish`] (or its drop, which
/// gives the interpreter back as it was).
#[derive(Debug)]
pub struct Hold {
    sessions: Arc<Sessions>,
    pub id: String,
    pub(super) run: String,
    /// Its interpreter (`None`: it has none to write).
    pub interp: Option<Interp>,
    /// What the session has hibernated already, if it has.
    pub image: Option<Image>,
    pub runtime: String,
    /// The most bytes its image may take: its guest's memory at most, and a trailer.
    pub image_max: u64,
    done: bool,
}

/// What became of a held session's interpreter.
#[derive(Debug)]
pub enum Held {
    /// Nothing: it goes on as it was (given back), or it had none.
    Unchanged,
    /// It was written and ended: the session is hibernated.
    Hibernated(Image),
    /// It was ended without an image, and why (the session's next run says so).
    Ended(String),
    /// It is given back, and will not be hibernated by itself again before its next run (it
    /// could not be, and why).
    Refused(String),
}

impl Sessions {
    /// Holds session `id` (of `owner`; `None`: the engine's own, for any owner) to write its
    /// interpreter: 409 while it runs, 400 naming `mode` for a workspace session.
    pub fn hold(self: &Arc<Self>, id: &str, owner: Option<Owner>) -> Result<Hold, ApiError> {
        let mut st = self.lock();
        let s = match owner {
            Some(o) => find(&mut st, id, o)?,
            None => st.open.get_mut(id).ok_or_else(|| ApiError::new(ErrorCode::SessionNotFound, "gone"))?,
        };
        if s.spec.mode != Mode::Live {
            return Err(ApiError::field("mode", format!("session {id} is a workspace session: it has no interpreter")));
        }
        s.not_running(id)?;
        self.held(s, id)?;
        let run = format!("r-{}", random_hex(8)?);
        s.running = Some(run.clone());
        Ok(Hold {
            sessions: self.clone(),
            id: id.to_string(),
            run,
            interp: s.interp.take(),
            image: s.image.clone(),
            runtime: s.spec.runtime.clone(),
            image_max: image_max(&s.spec),
            done: false,
        })
    }

    /// The live sessions whose interpreter has waited `after_ms` or more since their last run or
    /// file operation (those that can be hibernated, and were not refused it since).
    pub fn idle_interps(&self, after_ms: u64) -> Vec<String> {
        let now = unix_ms();
        let st = self.lock();
        st.open
            .iter()
            .filter(|(_, s)| s.running.is_none() && !s.auto_refused)
            .filter(|(_, s)| s.interp.as_ref().is_some_and(Interp::imaged))
            .filter(|(_, s)| now >= s.last_used_unix_ms.saturating_add(after_ms))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// When session `id` (of `owner`) is hibernated and its resume would hold more live
    /// interpreters than the server's or the token's most, the idle interpreter to hibernate
    /// first to make room: the one that waited longest (the token's own when its most binds).
    pub fn to_make_room(&self, id: &str, owner: Owner) -> Option<String> {
        let st = self.lock();
        let me = st.open.get(id).filter(|s| s.hibernated() && super::same_owner(&s.owner, &owner))?;
        let all = st.open.values().filter(|o| o.holds_jail()).count();
        let mine: Vec<_> =
            st.open.values().filter(|o| o.holds_jail()).filter(|o| super::same_owner(&o.owner, &me.owner)).collect();
        let theirs_only = mine.len() >= self.bounds.live_max_per_token;
        if all < self.bounds.live_max && !theirs_only {
            return None;
        }
        st.open
            .iter()
            .filter(|(_, s)| s.running.is_none() && s.interp.as_ref().is_some_and(Interp::imaged))
            .filter(|(_, s)| !theirs_only || super::same_owner(&s.owner, &me.owner))
            .min_by_key(|(_, s)| s.last_used_unix_ms)
            .map(|(id, _)| id.clone())
    }

    /// The sessions that hold an interpreter now (between their runs).
    pub fn with_interps(&self) -> Vec<String> {
        self.lock().open.iter().filter(|(_, s)| s.interp.is_some()).map(|(id, _)| id.clone()).collect()
    }
}

/// The most bytes an image of a session of `spec` may take: its guest's memory at most, and a
/// trailer.
pub(super) fn image_max(spec: &super::Spec) -> u64 {
    spec.limits.wasm_memory_max_bytes.unwrap_or(u64::from(u32::MAX)).saturating_add(IMAGE_TRAILER_MAX)
}

/// The most an image's trailer takes besides its pages (the runner's own bound, and its length).
const IMAGE_TRAILER_MAX: u64 = (64 << 20) + 16;

impl Hold {
    /// A new file among the session's blobs for its interpreter's image (500 naming the state
    /// directory when it cannot be made).
    pub fn new_image(&self) -> Result<ImageFile, ApiError> {
        self.sessions.dir.new_image(&self.id).map_err(|e| self.sessions.disk_error(&self.id, &e))
    }

    /// The hold is over: the session takes `held`, is written to the state directory, and is
    /// free again. Returns it as the answer says it.
    pub fn finish(mut self, held: Held) -> Result<SessionInfo, ApiError> {
        self.done = true;
        let sessions = self.sessions.clone();
        let mut st = sessions.lock();
        let Some(s) = st.open.get_mut(&self.id) else {
            return Err(ApiError::new(ErrorCode::SessionNotFound, format!("session {} ended meanwhile", self.id)));
        };
        s.running = None;
        let mut old = None;
        match held {
            Held::Unchanged => s.interp = self.interp.take(),
            Held::Hibernated(image) => {
                old = s.image.replace(image);
                s.lost = None;
            }
            Held::Ended(why) => s.lost = Some(why),
            Held::Refused(_) => {
                s.interp = self.interp.take();
                s.auto_refused = true;
            }
        }
        let info = s.info(&self.id, &sessions.bounds, unix_ms());
        let save = s.changed(&self.id);
        let gone = s.unnamed(old);
        drop(st);
        sessions.write_dropping(save, gone)?;
        sessions.let_go(&self.id);
        Ok(info)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let interp = self.interp.take();
        self.sessions.free(&self.id, &self.run, |s| s.interp = interp);
    }
}

impl Session {
    /// Whether it holds a jail of this server's (or will, at its next run): a live session held
    /// here, not hibernated.
    pub(super) fn holds_jail(&self) -> bool {
        self.spec.mode == Mode::Live && !self.hibernated() && self.lease.is_some()
    }

    /// Whether it is hibernated: its interpreter written, no jail held for it.
    pub(super) fn hibernated(&self) -> bool {
        self.image.is_some() && self.interp.is_none() && self.running.is_none()
    }

    /// The blob of image `old` (its last), unless its workspace or its image names it still.
    pub(super) fn unnamed(&self, old: Option<Image>) -> Option<Hash> {
        old.map(|i| i.blob).filter(|h| !self.names(Some(h)))
    }

    /// Whether its workspace or its image names blob `hash` (`None`: no).
    pub(super) fn names(&self, hash: Option<&Hash>) -> bool {
        hash.is_some_and(|h| {
            self.files.values().any(|f| f.blob == *h) || self.image.as_ref().is_some_and(|i| i.blob == *h)
        })
    }

    /// How long its last hibernation took and its image's size, while it is hibernated.
    pub(super) fn image_figures(&self) -> (Option<f64>, Option<u64>) {
        match (&self.interp, &self.image) {
            (None, Some(i)) if self.running.is_none() => (Some(i.hibernate_ms), Some(i.bytes)),
            _ => (None, None),
        }
    }
}

/// Milliseconds, as a hibernation's figures say them.
pub fn ms_since(t0: std::time::Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}
