//! A run of a session ([`Turn`]): the session is the run's from its admission to its end; the
//! run's request is made with the session's runtime, policy, limits and files; its end gives the
//! session its workspace back.

use super::{Sessions, Spec, Stored, kept_reason, nested, over_quota, unix_ms};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use stockade::api::session::{self, SessionRun, SessionRunBody};
use stockade::api::{self, ApiError, Catalog, ErrorCode, RunRequest, SkippedFile};
use stockade::layers::filesystem::exchange::{self, Pick, PutFile, Taken};

/// One run of a session, from its admission to its end.
#[derive(Debug)]
pub struct Turn {
    pub(super) sessions: Arc<Sessions>,
    pub(super) id: String,
    /// The run's id.
    pub run: String,
    pub spec: Spec,
    /// The workspace as the run starts.
    pub(super) files: Vec<(String, Vec<u8>)>,
    pub(super) done: bool,
    /// A live session's interpreter, held by its run (`None`: none yet, or it was lost).
    pub interp: Option<crate::live::Interp>,
    /// Why a live session's interpreter was lost since its last run, if it was.
    pub lost: Option<String>,
    /// How long the session has until its lifetime ends.
    pub lifetime_left: Duration,
    /// A live session's hibernated interpreter, as the run starts.
    pub image: Option<super::Image>,
    /// The run started an interpreter in the image's place (resumed from it, or refused it):
    /// the session's image is no longer its interpreter's state.
    pub drop_image: bool,
    /// With replicas: the image its live interpreter wrote as the run ended, the session's now.
    pub checkpoint: Option<super::Image>,
}

impl Turn {
    /// Its session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run request a session's run makes: its runtime and policy, its limits within the
    /// session's, its files written over the workspace's (within the quota). The request's
    /// `return-files` stays its own (the answer's room is reserved for it); the returned pick
    /// takes the whole workspace back ([`Turn::finish`] gives back what the request asked).
    pub fn request(&mut self, body: SessionRunBody, catalog: &Catalog) -> Result<(RunRequest, Pick), ApiError> {
        let limits = body
            .limits
            .within(&self.spec.limits, "the session")
            .map_err(|e| ApiError::field(format!("limits.{}", e.key), e.message))?;
        let mut req = api::check(body.into_run(&self.spec.runtime, &self.spec.policy, limits), catalog)?;
        let mut files: Vec<PutFile> = Vec::with_capacity(self.files.len() + req.files.len());
        for (path, bytes) in std::mem::take(&mut self.files) {
            if req.files.iter().any(|f| f.path.as_os_str() == path.as_str()) {
                continue;
            }
            if let Some(i) = req.files.iter().position(|f| nested(&path, &f.path.to_string_lossy())) {
                return Err(ApiError {
                    code: ErrorCode::FileConflict,
                    ..ApiError::field(
                        format!("files[{i}].path"),
                        format!("the workspace has {path}: a path cannot be both a file and a directory"),
                    )
                });
            }
            files.push(PutFile { path: path.into(), bytes });
        }
        files.append(&mut req.files);
        let b = &self.sessions.bounds;
        let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        over_quota(b, files.len() as u64, bytes).map_err(|e| ApiError { field: Some("files".into()), ..e })?;
        req.files = files;
        Ok((req, self.sessions.workspace.clone()))
    }

    /// The most bytes an image of its interpreter may take.
    pub fn image_max(&self) -> u64 {
        super::image::image_max(&self.spec)
    }

    /// Gives the session back its live interpreter when the run is over (or does not happen).
    pub fn keep(&mut self, interp: crate::live::Interp) {
        self.interp = Some(interp);
    }

    /// The run is over: its workspace, as the run left it (within the quota), is the session's
    /// (unless the session ended meanwhile), written to the state directory. Returns what the
    /// answer says of the session, and the files the request asked back (`None`: it asked
    /// none); `Err` (500) when the session could not be written.
    pub fn finish(
        mut self,
        taken: Option<Taken>,
        asked: Option<&Pick>,
    ) -> Result<(SessionRun, Option<Taken>), ApiError> {
        self.done = true;
        let now_ms = unix_ms();
        let sessions = self.sessions.clone();
        let bounds = sessions.bounds;
        let mut out = SessionRun {
            id: self.id.clone(),
            run: self.run.clone(),
            workspace: session::WorkspaceUse {
                files: 0,
                bytes: 0,
                files_max: bounds.workspace_max_files,
                bytes_max: bounds.workspace_max_bytes,
            },
            dropped: Vec::new(),
            dropped_count: 0,
            interpreter: None,
            interpreter_reason: None,
            resume_ms: None,
        };
        let returned = match (&taken, asked) {
            (Some(t), Some(pick)) => Some(exchange::select(&t.files, pick)),
            (None, Some(_)) => Some(Taken::default()),
            _ => None,
        };
        // The files' blobs first, outside the lock (the session is this run's meanwhile).
        let written = taken.map(|t| {
            let mut files = Vec::with_capacity(t.files.len());
            let mut unkept = Vec::new();
            for (path, data) in t.files {
                // A file no later run could be given (nested too deep) is not the workspace's.
                if let Err(why) = exchange::check_relative(&path) {
                    unkept.push(SkippedFile { reason: format!("{why}: no later run could be given it"), path });
                    continue;
                }
                match sessions.dir.put_blob(&self.id, &data) {
                    Ok(blob) => files.push((path, blob, data.len() as u64)),
                    Err(e) => unkept.push(SkippedFile {
                        reason: format!("the server could not write it to its state directory: {e}"),
                        path,
                    }),
                }
            }
            (files, unkept, t.skipped, t.skipped_count)
        });
        let mut st = sessions.lock();
        let Some(s) = st.open.get_mut(&self.id) else { return Ok((out, returned)) };
        let mut material = self.checkpoint.is_some() || (self.drop_image && s.image.is_some());
        if let Some((written, unkept, skipped, skipped_count)) = written {
            let mut files = BTreeMap::new();
            let mut bytes = 0u64;
            for (path, blob, len) in written {
                let kept = s.files.get(&path).filter(|old| old.blob == blob).map(|old| old.modified_unix_ms);
                bytes += len;
                files.insert(path, Stored { blob, len, modified_unix_ms: kept.unwrap_or(now_ms) });
            }
            material |= s.files != files;
            s.files = files;
            s.bytes = bytes;
            out.dropped_count = (skipped_count + unkept.len()) as u64;
            out.dropped = unkept;
            out.dropped
                .extend(skipped.into_iter().map(|k| SkippedFile { reason: kept_reason(&k.reason), path: k.path }));
        }
        s.running = None;
        s.interp = self.interp.take();
        s.runs += 1;
        s.auto_refused = false;
        s.idle_reset();
        let old = match self.checkpoint.take() {
            Some(c) => s.image.replace(c),
            None if self.drop_image => s.image.take(),
            None => None,
        };
        out.workspace = s.usage(&bounds);
        // A run that changed no file and no image changed only its clocks and its count: those
        // reach the disk with the next change, at drain, or once the clock on disk is due.
        if !material && !s.clock_due(now_ms) {
            return Ok((out, returned));
        }
        let save = s.changed(&self.id);
        let gone = s.unnamed(old);
        drop(st);
        sessions.write_dropping(save, gone)?;
        Ok((out, returned))
    }
}

impl Sessions {
    /// Writes `save`, then removes its session's blob `gone` (an image its meta no longer names).
    pub(super) fn write_dropping(&self, save: super::Save, gone: Option<crate::state::Hash>) -> Result<(), ApiError> {
        let id = save.id.clone();
        self.write(save)?;
        if let Some(h) = gone {
            self.dir.drop_blob(&id, &h);
        }
        Ok(())
    }

    /// Frees session `id` of run (or hold) `run` that did not happen, `back` given it: nothing
    /// when the session ended meanwhile, or is another's.
    pub(super) fn free(&self, id: &str, run: &str, back: impl FnOnce(&mut super::Session)) {
        let mut st = self.lock();
        if let Some(s) = st.open.get_mut(id)
            && s.running.as_deref() == Some(run)
        {
            s.running = None;
            back(s);
        }
    }
}

impl Drop for Turn {
    /// A run that did not happen (refused, or its jail failed): the session is free again, its
    /// workspace as it was.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (interp, lost) = (self.interp.take(), self.lost.take());
        self.sessions.free(&self.id, &self.run, |s| {
            s.interp = interp;
            if s.lost.is_none() {
                s.lost = lost;
            }
            s.idle_reset();
        });
    }
}
