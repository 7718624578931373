//! Live interpreters written down and brought back: a live session's interpreter hibernated
//! (asked, idle for `sessions.hibernate-after-ms`, or as the server drains) has its image written
//! by its jail into the session's directory, made a blob of the session, and its jail ended; the
//! session's next run resumes it in a fresh jail from that image, once its hash (bound to the
//! session by its MAC'd meta) and its guest's component are what they were. A live fork copies
//! the image of an interpreter that goes on (a Python guest's only: QuickJS's `Math.random`
//! cannot be seeded again). The Wasm guests' interpreters have images; a host program's
//! (`python3`) is ended (the workspace kept, its next run saying why).
//!
//! Imports (layers): `config`, `live`, `sessions`, `state`.

use crate::live::{Imaged, Images};
use crate::sessions::{Held, Hold, Image, NOT_IMAGED, Owner, Turn, ms_since};
use crate::state::Hash;
use crate::{Engine, incident, internal};
use std::fs::File;
use std::time::Instant;
use stockade::api::session::SessionInfo;
use stockade::api::{ApiError, ErrorCode};
use stockade::runtime::Guest;

/// Why an interpreter is hibernated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its client asked (`POST /v1/sessions/{id}/hibernate`).
    Asked,
    /// It was idle for `sessions.hibernate-after-ms`.
    Idle,
    /// The server drains.
    Drain,
    /// A hibernated session's run needs its place among the live interpreters.
    Room,
    /// Another replica wants the session.
    Handover,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Why::Asked => "asked",
            Why::Idle => "idle",
            Why::Drain => "drain",
            Why::Room => "room",
            Why::Handover => "handover",
        }
    }
}

impl Engine {
    /// Whether runtime `name`'s live interpreter can be hibernated: a Wasm guest's (python or
    /// javascript).
    pub(crate) fn hibernates(&self, name: &str) -> bool {
        matches!(self.runtimes.get(name).map(|r| &r.kind), Some(crate::config::Kind::Guest(_)))
    }

    /// Whether a fork of runtime `name`'s live interpreter gets its image: the python guest's,
    /// whose `random` a fork draws again (QuickJS's `Math.random` cannot be seeded again: a
    /// javascript fork copies the workspace, and its interpreter starts anew).
    fn forks_interp(&self, name: &str) -> bool {
        matches!(self.runtimes.get(name).map(|r| &r.kind), Some(crate::config::Kind::Guest(Guest::Python)))
    }

    /// Hibernates session `id`'s interpreter (of `owner`; `None`: for the engine itself): the
    /// session, as the answer says it. One that cannot be written is ended when asked or
    /// draining (the workspace kept), left running when idle; one that refuses now (files it
    /// holds open) is 409 `cannot-hibernate` when asked.
    pub async fn hibernate_session(&self, id: &str, owner: Option<Owner>, why: Why) -> Result<SessionInfo, ApiError> {
        let mut hold = self.sessions.hold(id, owner)?;
        let Some(mut interp) = hold.interp.take() else { return hold.finish(Held::Unchanged) };
        if !interp.imaged() {
            if matches!(why, Why::Idle | Why::Room) {
                hold.interp = Some(interp);
                return hold.finish(Held::Refused(NOT_IMAGED.into()));
            }
            drop(interp);
            return hold.finish(Held::Ended(NOT_IMAGED.into()));
        }
        let t0 = Instant::now();
        let into = match hold.new_image() {
            Ok(f) => f,
            Err(e) => {
                hold.interp = Some(interp);
                return Err(e);
            }
        };
        match interp.image(into, hold.image_max).await {
            Imaged::Written { file, hash, bytes, memory_bytes } => {
                // Its jail ends: the image is the interpreter now.
                drop(interp);
                let (dir, component, metrics) =
                    (self.sessions.dir(), self.component(&hold.runtime), self.metrics.clone());
                let sync = self.bounds.sessions.sync_images;
                let done = tokio::task::spawn_blocking(move || match dir.keep_image(&hold.id, file, &hash, sync) {
                    Ok(()) => {
                        metrics.session_hibernated(why.as_str());
                        hold.finish(Held::Hibernated(image_of(hash, bytes, memory_bytes, component, t0, false)))
                    }
                    Err(e) => {
                        let err = incident(
                            ErrorCode::Internal,
                            "the server could not write the session's interpreter to its state directory",
                            &format!("session {}: its image: {e}", hold.id),
                        );
                        let lost = format!("its image could not be written to the state directory ({e})");
                        hold.finish(Held::Ended(lost)).and(Err(err))
                    }
                });
                done.await.unwrap_or_else(|_| Err(internal("a hibernation ended abnormally")))
            }
            Imaged::Refused(reason) => match why {
                Why::Asked => {
                    hold.interp = Some(interp);
                    drop(hold);
                    Err(ApiError::new(
                        ErrorCode::CannotHibernate,
                        format!("session {id}'s interpreter cannot be hibernated now: {reason}"),
                    ))
                }
                Why::Idle | Why::Room => {
                    hold.interp = Some(interp);
                    hold.finish(Held::Refused(reason))
                }
                Why::Drain | Why::Handover => {
                    drop(interp);
                    let how = if why == Why::Drain { "the server stopped" } else { "it moved to another replica" };
                    hold.finish(Held::Ended(format!("{how}, and its interpreter could not be hibernated: {reason}")))
                }
            },
            Imaged::Lost(reason) => {
                hold.finish(Held::Ended(format!("its interpreter was lost as it was hibernated: {reason}")))
            }
        }
    }

    /// Forks session `id` of `owner` (see [`crate::sessions::Sessions::fork`]): a live
    /// interpreter that can be written is, and goes on; its fork resumes its image.
    pub async fn fork_session(&self, id: &str, owner: Owner) -> Result<SessionInfo, ApiError> {
        let live = self.sessions.info(id, owner)?.state == stockade::api::session::SessionState::Live;
        let mut written: Option<(Hold, Image)> = None;
        if live && let Ok(mut hold) = self.sessions.hold(id, Some(owner)) {
            match hold.interp.take() {
                Some(mut interp) if interp.imaged() && self.forks_interp(&hold.runtime) => {
                    let t0 = Instant::now();
                    let into = hold.new_image();
                    let imaged = match into {
                        Ok(into) => interp.image(into, hold.image_max).await,
                        Err(e) => {
                            hold.interp = Some(interp);
                            return Err(e);
                        }
                    };
                    hold.interp = Some(interp);
                    match imaged {
                        Imaged::Written { file, hash, bytes, memory_bytes } => {
                            // A blob of the parent's it does not name, linked into the fork.
                            let (dir, parent) = (self.sessions.dir(), id.to_string());
                            let sync = self.bounds.sessions.sync_images;
                            let kept = tokio::task::spawn_blocking(move || dir.keep_image(&parent, file, &hash, sync))
                                .await
                                .map_err(|_| internal("a fork ended abnormally"))?;
                            kept.map_err(|e| self.sessions.disk_failure(id, &e))?;
                            self.metrics.session_hibernated("fork");
                            let component = self.component(&hold.runtime);
                            written = Some((hold, image_of(hash, bytes, memory_bytes, component, t0, true)));
                        }
                        Imaged::Refused(reason) => {
                            return Err(ApiError::new(
                                ErrorCode::CannotHibernate,
                                format!("session {id}'s interpreter cannot be copied now: {reason}"),
                            ));
                        }
                        Imaged::Lost(reason) => {
                            hold.interp = None;
                            hold.finish(Held::Ended(format!("its interpreter was lost as it was forked: {reason}")))?;
                        }
                    }
                }
                other => hold.interp = other,
            }
        }
        let (sessions, id) = (self.sessions.clone(), id.to_string());
        let forked = tokio::task::spawn_blocking(move || {
            // The parent's hold, given back (its interpreter too) once the fork is made.
            let w = written.as_ref().map(|(h, i)| (h, i.clone()));
            sessions.fork(&id, owner, w)
        });
        forked.await.unwrap_or_else(|_| Err(internal("a fork ended abnormally")))
    }

    /// What a new live interpreter of `turn`'s session is given: a file for its images (when it
    /// can be hibernated), and the session's image to resume from when it has one that holds.
    /// One that does not is refused, never run: the interpreter starts anew, its run saying why.
    pub(crate) async fn images_for(&self, turn: &mut Turn) -> Result<Option<Images>, ApiError> {
        let image = turn.image.clone();
        turn.drop_image = image.is_some();
        if !self.hibernates(&turn.spec.runtime) {
            return Ok(None);
        }
        let Some(image) = image else { return Ok(Some(Images { resume: None })) };
        let opened = self.open_image(turn.id(), &turn.spec.runtime, &image).await;
        let resume = match opened {
            Ok(f) => Some((f, image.reseed)),
            Err((outcome, why)) => {
                self.metrics.session_resumed(outcome);
                turn.lost = Some(why);
                None
            }
        };
        Ok(Some(Images { resume }))
    }

    /// Session `id`'s `image`, opened to resume from: `Err` with the metrics' outcome and the
    /// reason its run gives when it does not hold (its guest changed; its bytes changed on disk).
    async fn open_image(&self, id: &str, runtime: &str, image: &Image) -> Result<File, (&'static str, String)> {
        if self.component(runtime) != image.component {
            return Err((
                "component-changed",
                format!(
                    "the {runtime} guest was changed since the session was hibernated (its component is not the image's): \
                     a new interpreter was started"
                ),
            ));
        }
        let (dir, id, img) = (self.sessions.dir(), id.to_string(), image.clone());
        let opened =
            tokio::task::spawn_blocking(move || dir.open_image(&id, &img.blob, img.bytes).map_err(|e| (id, e)))
                .await
                .map_err(|_| ("failed", "its image could not be read".to_string()))?;
        opened.map_err(|(id, e)| {
            let changed = e.kind() == std::io::ErrorKind::InvalidData;
            let _ = incident(ErrorCode::Internal, "a hibernated image refused", &format!("session {id}: {e}"));
            if changed {
                (
                    "image-changed",
                    "its hibernated image was changed on disk (or cut short by a machine crash): refused, never run; \
                     a new interpreter was started"
                        .to_string(),
                )
            } else {
                ("failed", format!("its hibernated image could not be read ({e}): a new interpreter was started"))
            }
        })
    }

    /// What wrote runtime `name`'s images, which only it resumes: the SHA-256 of the installed
    /// python guest's component, as its build recorded it (`""` when it cannot be read: no image
    /// then resumes), or the javascript guest's module (pinned).
    pub(crate) fn component(&self, name: &str) -> String {
        match self.runtimes.get(name).map(|r| &r.kind) {
            Some(crate::config::Kind::Guest(Guest::JavaScript)) => stockade::wasm::guests::QUICKJS.sha256.to_string(),
            _ => stockade::wasm::snapshot::component_sha256(&stockade::wasm::guests::default_dir()).unwrap_or_default(),
        }
    }

    /// Hibernates the live interpreters idle for `sessions.hibernate-after-ms`, one at a time.
    pub(crate) async fn hibernate_idle(&self) {
        let Some(after) = self.bounds.sessions.hibernate_after_ms else { return };
        for id in self.sessions.idle_interps(after) {
            if let Err(e) = self.hibernate_session(&id, None, Why::Idle).await
                && e.code != ErrorCode::SessionBusy
            {
                eprintln!("stockade serve: session {id} could not be hibernated: {}", e.message);
            }
        }
    }

    /// Before a hibernated session's run: when its resume would hold more live interpreters than
    /// the server or its token may, the idle one that waited longest is hibernated first.
    pub(crate) async fn make_room(&self, id: &str, owner: Owner) {
        if let Some(other) = self.sessions.to_make_room(id, owner) {
            let _ = self.hibernate_session(&other, None, Why::Room).await;
        }
    }

    /// A draining server hibernates every live interpreter it holds (those between runs).
    pub(crate) async fn hibernate_all(&self) {
        for id in self.sessions.with_interps() {
            if let Err(e) = self.hibernate_session(&id, None, Why::Drain).await {
                eprintln!("stockade serve: session {id} was not hibernated as the server stopped: {}", e.message);
            }
        }
    }
}

/// The image `hash` (`bytes` long, of a guest memory of `memory_bytes`) written since `t0` by
/// the guest component `component`; a fork's when `reseed`.
fn image_of(hash: Hash, bytes: u64, memory_bytes: u64, component: String, t0: Instant, reseed: bool) -> Image {
    Image {
        blob: hash,
        bytes,
        memory_bytes,
        component,
        hibernated_unix_ms: crate::sessions::now_unix_ms(),
        hibernate_ms: ms_since(t0),
        reseed,
    }
}

/// The engine, behind an `Arc`, as the reaper's task holds it (weakly: it does not keep the
/// engine alive).
pub(crate) type Weak = std::sync::Weak<Engine>;

/// One tick of the sessions' keeper: sessions past their clocks end, idle interpreters are
/// hibernated.
pub(crate) async fn keep_sessions(engine: &Weak) -> bool {
    let Some(e) = engine.upgrade() else { return false };
    e.sessions.reap();
    e.hibernate_idle().await;
    true
}
