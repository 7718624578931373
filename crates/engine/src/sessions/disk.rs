//! A session on disk: its meta (which [`crate::state::StateDir`] writes whole, with its MAC)
//! made from the session, and the session made back from it when a server starts on the state
//! directory. A meta is checked as any input is: a path a run could not be given, a blob name
//! that is not a hash, a clock or a count out of range refuse it, naming the session.

use super::{Image, Owner, Session, Spec, Stored};
use crate::state::{self, StateDir};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stockade::api::session::Mode;
use stockade::layers::filesystem::exchange;
use stockade::policy::Limits;

/// The meta's format (`version`): a server refuses a meta of a version it does not know.
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Meta {
    version: u32,
    /// The SHA-256 of its maker's token, in hex (never the token); `None`: the unix socket's.
    owner: Option<String>,
    runtime: String,
    mode: Mode,
    policy: String,
    limits: Limits,
    idle_timeout_ms: u64,
    max_lifetime_ms: u64,
    created_unix_ms: u64,
    last_used_unix_ms: u64,
    runs: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    forked_from: Option<String>,
    files: Vec<FileMeta>,
    /// A live session's hibernated interpreter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<ImageMeta>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ImageMeta {
    blob: String,
    bytes: u64,
    memory_bytes: u64,
    component_sha256: String,
    hibernated_unix_ms: u64,
    hibernate_ms: f64,
    reseed: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileMeta {
    path: String,
    blob: String,
    bytes: u64,
    modified_unix_ms: u64,
}

/// Session `s`'s meta, as one line of JSON.
pub(super) fn meta_of(s: &Session) -> Vec<u8> {
    let m = Meta {
        version: VERSION,
        owner: s.owner.map(|o| state::hex(&o)),
        runtime: s.spec.runtime.clone(),
        mode: s.spec.mode,
        policy: s.spec.policy.clone(),
        limits: s.spec.limits,
        idle_timeout_ms: super::millis(s.spec.idle),
        max_lifetime_ms: super::millis(s.spec.lifetime),
        created_unix_ms: s.created_unix_ms,
        last_used_unix_ms: s.last_used_unix_ms,
        runs: s.runs,
        forked_from: s.forked_from.clone(),
        files: s
            .files
            .iter()
            .map(|(path, f)| FileMeta {
                path: path.clone(),
                blob: state::hex(&f.blob),
                bytes: f.len,
                modified_unix_ms: f.modified_unix_ms,
            })
            .collect(),
        image: s.image.as_ref().map(|i| ImageMeta {
            blob: state::hex(&i.blob),
            bytes: i.bytes,
            memory_bytes: i.memory_bytes,
            component_sha256: i.component.clone(),
            hibernated_unix_ms: i.hibernated_unix_ms,
            hibernate_ms: i.hibernate_ms,
            reseed: i.reseed,
        }),
    };
    // A struct of strings, numbers and a map with string keys: it serializes.
    serde_json::to_vec(&m).unwrap_or_default()
}

/// The session a meta describes. `Err` in words when it is not one this server can hold.
fn session_of(json: &[u8]) -> Result<Session, String> {
    let m: Meta = serde_json::from_slice(json).map_err(|e| format!("its meta does not decode: {e}"))?;
    if m.version != VERSION {
        return Err(format!("its meta is of version {}; this server reads version {VERSION}", m.version));
    }
    let owner: Owner = match &m.owner {
        None => None,
        Some(hex) => Some(state::unhex(hex).ok_or("its owner is not a SHA-256 in hex")?),
    };
    let mut files = BTreeMap::new();
    let mut bytes = 0u64;
    for f in m.files {
        exchange::check_relative(&f.path).map_err(|why| format!("its file {:?} {why}", f.path))?;
        let blob = state::unhex(&f.blob).ok_or_else(|| format!("its file {:?} names no blob", f.path))?;
        bytes = bytes.checked_add(f.bytes).ok_or("its files' sizes overflow")?;
        files.insert(f.path, Stored { blob, len: f.bytes, modified_unix_ms: f.modified_unix_ms });
    }
    let image = match m.image {
        Some(_) if m.mode != Mode::Live => return Err("a workspace session's meta names an image".into()),
        Some(i) => Some(Image {
            blob: state::unhex(&i.blob).ok_or("its image names no blob")?,
            bytes: i.bytes,
            memory_bytes: i.memory_bytes,
            component: i.component_sha256,
            hibernated_unix_ms: i.hibernated_unix_ms,
            hibernate_ms: i.hibernate_ms,
            reseed: i.reseed,
        }),
        None => None,
    };
    Ok(Session {
        owner,
        spec: Spec {
            runtime: m.runtime,
            mode: m.mode,
            policy: m.policy,
            limits: m.limits,
            idle: Duration::from_millis(m.idle_timeout_ms),
            lifetime: Duration::from_millis(m.max_lifetime_ms),
        },
        created_unix_ms: m.created_unix_ms,
        last_used_unix_ms: m.last_used_unix_ms,
        disk_used_unix_ms: m.last_used_unix_ms,
        files,
        bytes,
        runs: m.runs,
        running: None,
        interp: None,
        lost: (m.mode == Mode::Live && image.is_none()).then(|| LOST_IN_RESTART.to_string()),
        forked_from: m.forked_from.filter(|p| state::valid_id(p)),
        image,
        auto_refused: false,
        gc: false,
        changes: 0,
        saved: Arc::new(Mutex::new(0)),
        lease: None,
    })
}

/// Session `id` as its meta on `dir` says it (`Err` in words when it cannot be read, or does
/// not hold).
pub(super) fn load_one(dir: &StateDir, id: &str) -> Result<Session, String> {
    dir.load(id).and_then(|json| session_of(&json))
}

/// Why a live session found on disk has no interpreter.
const LOST_IN_RESTART: &str =
    "the server restarted: a live interpreter that was not hibernated does not outlive its server";

/// The sessions on `dir`, each made back from its meta; a session whose meta cannot be read, or
/// does not hold, is left out, with why (its files are left on disk: nothing is served from
/// them). Blobs no session names and directories whose making was cut short are reaped, once
/// older than [`state::GRACE`].
pub(super) fn load_all(dir: &StateDir) -> (Vec<(String, Session)>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let ids = match dir.ids() {
        Ok(ids) => ids,
        Err(e) => return (found, vec![format!("cannot list {}: {e}", dir.root().display())]),
    };
    for id in ids {
        if dir.reap_unmade(&id) {
            continue;
        }
        match load_one(dir, &id) {
            Ok(s) => {
                let keep: HashSet<state::Hash> = s.blobs();
                dir.reap_blobs(&id, &keep);
                found.push((id, s));
            }
            Err(why) => problems.push(format!("session {id} is not served: {why}")),
        }
    }
    (found, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_that_names_a_path_no_run_could_be_given_is_refused() {
        let json = br#"{"version":1,"owner":null,"runtime":"python","mode":"workspace","policy":"default","limits":{},"idle-timeout-ms":1,"max-lifetime-ms":1,"created-unix-ms":0,"last-used-unix-ms":0,"runs":0,"files":[{"path":"../x","blob":"00","bytes":1,"modified-unix-ms":0}]}"#;
        let why = session_of(json).err().unwrap_or_default();
        assert!(why.contains("../x"), "{why}");
    }
}
