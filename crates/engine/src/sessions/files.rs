//! A session's workspace, file by file (`/v1/sessions/{id}/files/...`): each file a blob of the
//! session's directory, written before the session names it, read back checked.

use super::{Owner, Sessions, Stored, find, nested, over_quota, unix_ms};
use stockade::api::session::{FileInfo, FileList};
use stockade::api::{ApiError, ErrorCode};
use stockade::layers::filesystem::exchange;

impl Sessions {
    /// Writes a file into a session's workspace (replacing one of that path): 409 when a run
    /// is under way or the path is a directory of the workspace (or below a file), 413 past its
    /// quota.
    pub fn put_file(&self, id: &str, owner: Owner, path: &str, bytes: Vec<u8>) -> Result<FileInfo, ApiError> {
        let rel = checked_path(path)?;
        let check = |s: &super::Session| -> Result<u64, ApiError> {
            s.not_running(id)?;
            if let Some(other) = s.files.keys().find(|k| nested(k, &rel)) {
                return Err(ApiError::new(
                    ErrorCode::FileConflict,
                    format!("{rel}: the workspace has {other}: a path cannot be both a file and a directory"),
                ));
            }
            let old = s.files.get(&rel).map_or(0, |f| f.len);
            let count = s.files.len() as u64 + u64::from(!s.files.contains_key(&rel));
            let bytes_after = s.bytes - old + bytes.len() as u64;
            over_quota(&self.bounds, count, bytes_after)?;
            Ok(bytes_after)
        };
        {
            let mut st = self.lock();
            let s = find(&mut st, id, owner)?;
            self.held(s, id)?;
            s.idle_reset();
            check(s)?;
        }
        // Written before the session names it; checked again once it is (the session may have
        // changed meanwhile).
        let blob = self.dir.put_blob(id, &bytes).map_err(|e| self.disk_error(id, &e))?;
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        let bytes_after = check(s)?;
        let info = FileInfo { path: rel.clone(), bytes: bytes.len() as u64, modified_unix_ms: unix_ms() };
        s.files.insert(rel, Stored { blob, len: info.bytes, modified_unix_ms: info.modified_unix_ms });
        s.bytes = bytes_after;
        let save = s.changed(id);
        drop(st);
        self.write(save)?;
        Ok(info)
    }

    pub fn get_file(&self, id: &str, owner: Owner, path: &str) -> Result<Vec<u8>, ApiError> {
        let rel = checked_path(path)?;
        let f = {
            let mut st = self.lock();
            let s = find(&mut st, id, owner)?;
            s.idle_reset();
            *s.files.get(&rel).ok_or_else(|| no_file(&rel))?
        };
        self.read(id, &rel, &f)
    }

    /// The bytes of file `path` (its blob `f`) of session `id`. 500 when they cannot be read or
    /// were changed on disk: never bytes the session did not write.
    pub(super) fn read(&self, id: &str, path: &str, f: &Stored) -> Result<Vec<u8>, ApiError> {
        self.dir.read_blob(id, &f.blob, f.len).map_err(|e| {
            super::super::incident(
                ErrorCode::Internal,
                "the server could not read the session's file from its state directory",
                &format!("session {id}, file {path}: {e}"),
            )
        })
    }

    pub fn delete_file(&self, id: &str, owner: Owner, path: &str) -> Result<(), ApiError> {
        let rel = checked_path(path)?;
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        self.held(s, id)?;
        s.idle_reset();
        s.not_running(id)?;
        let f = s.files.remove(&rel).ok_or_else(|| no_file(&rel))?;
        s.bytes -= f.len;
        let save = s.changed(id);
        drop(st);
        self.write(save)
    }

    pub fn files(&self, id: &str, owner: Owner) -> Result<FileList, ApiError> {
        let mut st = self.lock();
        let s = find(&mut st, id, owner)?;
        s.idle_reset();
        let files = s
            .files
            .iter()
            .map(|(p, f)| FileInfo { path: p.clone(), bytes: f.len, modified_unix_ms: f.modified_unix_ms })
            .collect();
        Ok(FileList { files, workspace: s.usage(&self.bounds) })
    }
}

/// A file path of a workspace as a request wrote it (URL-decoded): plain names only.
fn checked_path(path: &str) -> Result<String, ApiError> {
    exchange::check_relative(path).map_err(|why| ApiError::field("path", format!("{path:?} {why}")))?;
    Ok(path.to_string())
}

fn no_file(path: &str) -> ApiError {
    ApiError {
        field: Some("path".into()),
        ..ApiError::new(ErrorCode::NotFound, format!("no file {path} in the workspace"))
    }
}
