//! A session's run, admitted ([`crate::door`]): an ordinary run whose `/app` is the session's
//! workspace, taken back whole for it; or, for a live session, a turn of its interpreter (started
//! when it has none), given the session's files and the run's code. Either way the run goes on
//! to its end in a task of its own, whether the caller stays or not, and the session is given
//! back its workspace (or its interpreter) by the turn's end.
//!
//! Imports (layers): `live`, `sessions`.

use crate::{Engine, Running, Streams, internal, live, sessions};
use std::sync::Arc;
use std::time::Instant;
use stockade::api::{ApiError, RunRequest, RunResult};
use tokio::sync::OwnedSemaphorePermit;

impl Engine {
    /// Runs an admitted run of a session ([`sessions::Turn::request`] made `req` and
    /// `workspace`): the whole workspace is taken back for the session, and the answer gives
    /// back what the request asked.
    pub(crate) async fn run_turn(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        turn: sessions::Turn,
        mut req: RunRequest,
        workspace: stockade::layers::filesystem::exchange::Pick,
        streams: Streams,
    ) -> Result<RunResult, ApiError> {
        if turn.spec.mode == stockade::api::session::Mode::Live {
            return self.live_turn(permit, turn, req, workspace, streams).await;
        }
        let asked = req.return_files.replace(workspace);
        let then = move |report, taken| {
            let (session, returned) = turn.finish(taken, asked.as_ref())?;
            Ok(RunResult { session: Some(session), ..RunResult::new(report, returned.as_ref()) })
        };
        self.execute_then(permit, req, streams, then).await
    }

    /// A run of a live session: its interpreter (started when it has none) brought the
    /// session's files, given the run's code, and its directory taken back as the session's
    /// workspace. Runs to its end in a task of its own, whether the caller stays or not.
    async fn live_turn(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        mut turn: sessions::Turn,
        mut req: RunRequest,
        workspace: stockade::layers::filesystem::exchange::Pick,
        streams: Streams,
    ) -> Result<RunResult, ApiError> {
        use stockade::api::session::Interpreter;
        let engine = self.clone();
        let task = tokio::spawn(async move {
            let _permit = permit;
            let running = Running::new(&engine);
            let t0 = Instant::now();
            engine.refuse_for_live(&req, &turn.spec.limits)?;
            let asked = req.return_files.take();
            let files = std::mem::take(&mut req.files);
            let mut resume_ms = None;
            let (mut interp, mut how) = match turn.interp.take() {
                Some(mut i) => match i.sync(files).await {
                    Ok(()) => (i, Interpreter::Kept),
                    Err(e) => {
                        // The run does not happen; the interpreter stays the session's.
                        turn.keep(i);
                        return Err(e);
                    }
                },
                None => match engine.start_interp(&mut turn, &req, files).await? {
                    live::Started::Ready(i, Some(_)) => {
                        resume_ms = Some(crate::sessions::ms_since(t0));
                        engine.metrics.session_resumed("resumed");
                        (i, Interpreter::Resumed)
                    }
                    // One lost since the last run (its server restarted): its state is gone.
                    live::Started::Ready(i, None) if turn.lost.is_some() => (i, Interpreter::Restarted),
                    live::Started::Ready(i, None) => (i, Interpreter::Started),
                    live::Started::Died(report) => {
                        drop(running);
                        engine.metrics.run_done(
                            &req.runtime_name,
                            report.status.as_str(),
                            false,
                            t0.elapsed().as_secs_f64(),
                        );
                        let lost = turn.lost.take();
                        let (mut session, returned) = finish(turn, None, asked).await?;
                        session.interpreter = Some(Interpreter::Restarted);
                        session.interpreter_reason = lost;
                        return Ok(RunResult { session: Some(session), ..RunResult::new(*report, returned.as_ref()) });
                    }
                },
            };
            let (report, alive) = interp.turn(&req, streams).await?;
            let taken = interp.take(workspace).await;
            if alive {
                engine.checkpoint(&mut turn, &mut interp).await;
                turn.keep(interp);
            } else {
                drop(interp);
                how = Interpreter::Restarted;
                engine.metrics.session_restarted();
            }
            drop(running);
            engine.metrics.egress(&report);
            engine.metrics.run_done(&req.runtime_name, report.status.as_str(), true, t0.elapsed().as_secs_f64());
            let lost = turn.lost.take();
            let (mut session, returned) = finish(turn, taken, asked).await?;
            session.interpreter = Some(how);
            session.resume_ms = resume_ms;
            if how != Interpreter::Kept {
                session.interpreter_reason = lost;
            }
            Ok(RunResult { session: Some(session), ..RunResult::new(report, returned.as_ref()) })
        });
        task.await.unwrap_or_else(|_| Err(internal("the run's task ended abnormally")))
    }
}

impl Engine {
    /// A new interpreter for a live session's run: resumed from the session's image when it has
    /// one that holds (see [`Engine::images_for`]), else started anew.
    async fn start_interp(
        &self,
        turn: &mut sessions::Turn,
        req: &RunRequest,
        files: Vec<stockade::layers::filesystem::exchange::PutFile>,
    ) -> Result<live::Started, ApiError> {
        let images = self.images_for(turn).await?;
        self.live_start(req, &turn.spec.limits, turn.lifetime_left, files, images).await
    }
}

/// [`sessions::Turn::finish`], on a thread that may block (it writes to disk).
async fn finish(
    turn: sessions::Turn,
    taken: Option<stockade::layers::filesystem::exchange::Taken>,
    asked: Option<stockade::layers::filesystem::exchange::Pick>,
) -> Result<(stockade::api::session::SessionRun, Option<stockade::layers::filesystem::exchange::Taken>), ApiError> {
    tokio::task::spawn_blocking(move || turn.finish(taken, asked.as_ref()))
        .await
        .unwrap_or_else(|_| Err(internal("the run's answer ended abnormally")))
}
