//! Replicas on one state directory (`sessions.replica-lease-ms`): a request for a session takes
//! its lease first ([`Engine::claim`]); one another server holds is asked for (that server lets
//! it go between two runs, its interpreter hibernated) and waited for, up to a lease and a half
//! (long enough for a lease whose holder died to lapse), then refused 409 `session-busy`. Each
//! answered run of a live session leaves its interpreter's image on disk before its answer goes
//! ([`Engine::checkpoint`]), so that a replica killed loses no answered run.
//!
//! Imports (layers): `hibernate`, `live`, `sessions`.

use crate::hibernate::Why;
use crate::live::{Imaged, Interp};
use crate::sessions::{Claim, Image, Owner, Turn};
use crate::{Engine, internal};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stockade::api::{ApiError, ErrorCode};

/// How often a request waiting for a session held elsewhere looks again.
const LOOK_AGAIN: Duration = Duration::from_millis(50);

impl Engine {
    /// Takes session `id` (of `owner`) for this server before a request acts on it (nothing
    /// without replicas). 409 `session-busy` when another server holds it and does not let it
    /// go within a lease and a half.
    pub(crate) async fn claim(&self, id: &str, owner: Owner) -> Result<(), ApiError> {
        let Some(length) = self.sessions.lease_length() else { return Ok(()) };
        let deadline = Instant::now() + length + length / 2;
        let mut asked = false;
        loop {
            let (sessions, i) = (self.sessions.clone(), id.to_string());
            let claim = tokio::task::spawn_blocking(move || sessions.try_claim(&i, owner))
                .await
                .map_err(|_| internal("a session's lease could not be taken"))??;
            let (holder, left) = match claim {
                Claim::Mine => return Ok(()),
                Claim::Elsewhere { holder, left } => (holder, left),
            };
            if !asked {
                self.sessions.dir().want(id);
                asked = true;
            }
            if Instant::now() >= deadline {
                return Err(ApiError::new(
                    ErrorCode::SessionBusy,
                    format!(
                        "session {id} is held by the replica {holder}, which is running it (or did not let it go): try again"
                    ),
                )
                .retry_after(left.as_secs().clamp(1, 600)));
            }
            tokio::time::sleep(LOOK_AGAIN).await;
        }
    }

    /// Keeps this server's leases, in a task of their own (a long hibernation does not hold
    /// their renewals up), every quarter of their length.
    pub(crate) fn keep_leases(self: &Arc<Self>) {
        let Some(length) = self.sessions.lease_length() else { return };
        let engine = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(length / 4);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(e) = engine.upgrade() else { break };
                e.lease_tick().await;
            }
        });
    }

    /// One tick of the leases: renewed, let go when not needed; an interpreter another server
    /// wants is hibernated (and so let go), each in a task of its own; one whose lease was lost
    /// ends (a draining server's too: it lets them go once its interpreters are hibernated).
    async fn lease_tick(self: &Arc<Self>) {
        let sessions = self.sessions.clone();
        let Ok(tick) = tokio::task::spawn_blocking(move || sessions.lease_tick()).await else { return };
        drop(tick.lost);
        for id in tick.handover {
            let e = self.clone();
            tokio::spawn(async move {
                if let Err(err) = e.hibernate_session(&id, None, Why::Handover).await
                    && err.code != ErrorCode::SessionBusy
                {
                    eprintln!("stockade serve: session {id} could not be handed over: {}", err.message);
                }
            });
        }
    }

    /// With replicas, after a live session's answered run: its interpreter's image, written
    /// before the answer goes, becomes the session's (`turn.checkpoint`). One that cannot be
    /// written leaves the session without an image (its last one is no longer its state): a
    /// replica that takes it after this one died restarts its interpreter, saying why.
    pub(crate) async fn checkpoint(&self, turn: &mut Turn, interp: &mut Interp) {
        if self.sessions.lease_length().is_none() || !interp.imaged() {
            return;
        }
        turn.drop_image = true;
        let t0 = Instant::now();
        let Ok(into) = self.sessions.dir().new_image(turn.id()) else { return };
        let Imaged::Written { file, hash, bytes, memory_bytes } = interp.image(into, turn.image_max()).await else {
            return;
        };
        let (dir, id, sync) = (self.sessions.dir(), turn.id().to_string(), self.bounds.sessions.sync_images);
        let kept = tokio::task::spawn_blocking(move || dir.keep_image(&id, file, &hash, sync)).await;
        if matches!(kept, Ok(Ok(()))) {
            self.metrics.session_hibernated("checkpoint");
            turn.checkpoint = Some(Image {
                blob: hash,
                bytes,
                memory_bytes,
                component: self.component(&turn.spec.runtime),
                hibernated_unix_ms: crate::sessions::now_unix_ms(),
                hibernate_ms: crate::sessions::ms_since(t0),
                reseed: false,
            });
        }
    }
}
