//! The state directory (`sessions.state-dir`): what of the engine outlives its process. Each
//! session is a directory of its own, `sessions/<id>/`:
//!
//! - `meta`: the session's settings, clocks and workspace (its files by content hash), as one JSON
//!   line after a line holding its MAC (keyed BLAKE3, the key the directory's own `key`, bound to
//!   the session's id). A meta whose MAC does not hold was changed by someone without the key: it
//!   is refused, never served.
//! - `blobs/<hash>`: the content of its files (and of its hibernated interpreter), each named by
//!   its BLAKE3 hash, written once and never changed; a read that finds other bytes refuses them.
//!
//! Every write is made whole beside its place (`.tmp-…`), flushed to the disk, renamed into place,
//! and its directory flushed: a crash at any moment leaves the meta of the last change made, never
//! half of one, and every blob that meta names. A fork's blobs are hard links to its parent's. A
//! session ends by its directory's rename into `trash/`, emptied then and at the next start.
//! Blobs no meta names, and writes in flight, are left alone for [`GRACE`], then reaped.
//!
//! One server at a time, or replicas: a server alone holds an exclusive lock on the directory's
//! `lock` file for as long as it lives (another is refused, naming the holder's pid); replicas
//! (`sessions.replica-lease-ms`) each hold a shared one, and hold each session by its lease
//! (`state/lease.rs`).
//!
//! Imports (layers): none.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

mod images;
mod lease;
pub use images::{ImageFile, receive};
pub use lease::{Lease, Taken, replica_name};

/// A blob's name: the BLAKE3 hash of its bytes.
pub type Hash = [u8; 32];

/// How long a blob no meta names, or a write in flight, is left alone before it is reaped.
pub const GRACE: Duration = Duration::from_secs(120);

const KEY: &str = "key";
const LOCK: &str = "lock";
const SESSIONS: &str = "sessions";
const TRASH: &str = "trash";
const META: &str = "meta";
const BLOBS: &str = "blobs";
const TMP: &str = ".tmp-";
/// What a meta's MAC covers before its id and its JSON: the format's name and version.
const MAC_CONTEXT: &[u8] = b"stockade session meta v1\0";

/// An open state directory, its key read (or made).
pub struct StateDir {
    root: PathBuf,
    /// The MAC key; wiped in a copy of this process that runs guests ([`StateDir::scrub`]).
    key: Mutex<[u8; 32]>,
    /// The directory's lock, held while this value lives (closed in such a copy).
    lock: Mutex<Option<File>>,
    /// A directory made for this process alone (no `state-dir` configured): removed with it.
    temporary: Option<tempfile::TempDir>,
    /// The blobs this process hashed itself, by session and hash (see `state/images.rs`).
    stamps: Mutex<HashMap<(String, Hash), images::Stamp>>,
}

impl std::fmt::Debug for StateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateDir").field("root", &self.root).finish_non_exhaustive()
    }
}

impl StateDir {
    /// Opens (or makes) the state directory at `root`: it must be this user's and no one else's
    /// (mode 0700 or tighter), and so must its key; `shared`: by replicas, each holding its
    /// sessions by their leases. `Err` in words, naming the path.
    pub fn open(root: &Path, shared: bool) -> Result<StateDir, String> {
        let at = |p: &Path, e: io::Error| format!("state directory {}: {e}", p.display());
        fs::create_dir_all(root).map_err(|e| at(root, e))?;
        let meta = check(root)?.ok_or_else(|| at(root, io::ErrorKind::NotFound.into()))?;
        if meta.mode() & 0o077 != 0 {
            // This user's (checked), made with the umask's mode: tightened.
            fs::set_permissions(root, fs::Permissions::from_mode(0o700)).map_err(|e| at(root, e))?;
        }
        for sub in [SESSIONS, TRASH] {
            let p = root.join(sub);
            match fs::create_dir(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(at(&p, e)),
            }
        }
        let lock = take_lock(&root.join(LOCK), shared)?;
        let key = read_or_make_key(&root.join(KEY))?;
        let dir = StateDir {
            root: root.to_path_buf(),
            key: Mutex::new(key),
            lock: Mutex::new(Some(lock)),
            temporary: None,
            stamps: Mutex::default(),
        };
        dir.empty_trash();
        Ok(dir)
    }

    /// A state directory of this process alone (an engine configured with none), removed when
    /// it is dropped: its sessions end with the process.
    pub fn temporary() -> Result<StateDir, String> {
        let t = tempfile::Builder::new()
            .prefix("stockade-state-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary state directory: {e}"))?;
        let mut dir = StateDir::open(t.path(), false)?;
        dir.temporary = Some(t);
        Ok(dir)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// In a copy of this process that runs guests (the spawner, whose copies are warm jails'
    /// runners): the key wiped, the lock's fd closed (the lock stays this process's).
    pub fn scrub(&self) {
        zeroize::Zeroize::zeroize(&mut *self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        drop(self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take());
    }

    /// Whether this directory is the process's own, gone with it.
    pub fn istemporary(&self) -> bool {
        self.temporary.is_some()
    }

    fn session(&self, id: &str) -> PathBuf {
        self.root.join(SESSIONS).join(id)
    }

    /// Whether session `id` has a directory.
    pub fn exists(&self, id: &str) -> bool {
        self.session(id).is_dir()
    }

    /// Makes session `id`'s directory (`Err` when it is there already).
    pub fn create(&self, id: &str) -> io::Result<()> {
        let dir = self.session(id);
        fs::create_dir(&dir)?;
        fs::create_dir(dir.join(BLOBS))
    }

    /// Writes `bytes` as a blob of session `id` (nothing when it has that blob already), flushed
    /// to the disk; its directory entry is flushed by the next [`StateDir::save`].
    pub fn put_blob(&self, id: &str, bytes: &[u8]) -> io::Result<Hash> {
        let hash: Hash = blake3::hash(bytes).into();
        let blobs = self.session(id).join(BLOBS);
        let path = blobs.join(hex(&hash));
        if path.exists() {
            // Its clock starts again: a blob about to be named again is no garbage.
            File::open(&path)?.set_modified(SystemTime::now())?;
            return Ok(hash);
        }
        write_whole(&blobs, &path, &[bytes])?;
        Ok(hash)
    }

    /// Session `id`'s blob `hash`, which must be `len` bytes: `Err(InvalidData)` when the file
    /// holds other bytes (it was changed on disk).
    pub fn read_blob(&self, id: &str, hash: &Hash, len: u64) -> io::Result<Vec<u8>> {
        let path = self.session(id).join(BLOBS).join(hex(hash));
        let mut f = File::open(&path)?;
        if f.metadata()?.len() != len {
            return Err(changed(&path));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        f.read_to_end(&mut bytes)?;
        if bytes.len() as u64 != len || blake3::hash(&bytes) != blake3::Hash::from(*hash) {
            return Err(changed(&path));
        }
        Ok(bytes)
    }

    /// Gives session `to` the blob `hash` of session `from` (a hard link: blobs never change).
    pub fn link_blob(&self, from: &str, to: &str, hash: &Hash) -> io::Result<()> {
        let name = hex(hash);
        match fs::hard_link(self.session(from).join(BLOBS).join(&name), self.session(to).join(BLOBS).join(&name)) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    /// Writes session `id`'s meta (`json`, one line) with its MAC, whole: written beside it,
    /// flushed, renamed over the last one, the directory (and its blobs') flushed.
    pub fn save(&self, id: &str, json: &[u8]) -> io::Result<()> {
        let dir = self.session(id);
        File::open(dir.join(BLOBS))?.sync_all()?;
        let mac = hex(&self.mac(id, json));
        write_whole(&dir, &dir.join(META), &[mac.as_bytes(), b"\n", json, b"\n"])
    }

    /// Session `id`'s meta, its MAC checked. `Err` in words (naming the file) when it cannot be
    /// read or its MAC does not hold.
    pub fn load(&self, id: &str) -> Result<Vec<u8>, String> {
        let path = self.session(id).join(META);
        let text = stockade::input::read_text(&path, 16 << 20, "a session's meta").map_err(|e| e.to_string())?;
        let (mac, json) = text.split_once('\n').ok_or_else(|| format!("{}: no MAC line", path.display()))?;
        let json = json.strip_suffix('\n').unwrap_or(json);
        let want = hex(&self.mac(id, json.as_bytes()));
        if !bool::from(subtle::ConstantTimeEq::ct_eq(mac.as_bytes(), want.as_bytes())) {
            return Err(format!(
                "{}: its MAC does not hold (it was changed by someone without the state directory's key)",
                path.display()
            ));
        }
        Ok(json.as_bytes().to_vec())
    }

    fn mac(&self, id: &str, json: &[u8]) -> Hash {
        let key = *self.key.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut h = blake3::Hasher::new_keyed(&key);
        h.update(MAC_CONTEXT).update(id.as_bytes()).update(b"\0").update(json);
        h.finalize().into()
    }

    /// The ids of the sessions on disk (directories with a name an id may have).
    pub fn ids(&self) -> io::Result<Vec<String>> {
        let mut ids = Vec::new();
        for e in fs::read_dir(self.root.join(SESSIONS))? {
            let name = e?.file_name();
            if let Some(n) = name.to_str().filter(|n| valid_id(n)) {
                ids.push(n.to_string());
            }
        }
        Ok(ids)
    }

    /// Ends session `id` on disk: its directory goes to the trash (one rename: no reader sees
    /// half of it), which is emptied.
    pub fn remove(&self, id: &str) -> io::Result<()> {
        self.forget(id);
        let to = self.root.join(TRASH).join(format!("{id}-{}", hex(&random16())));
        match fs::rename(self.session(id), &to) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            Ok(()) => fs::remove_dir_all(&to),
        }
    }

    /// Removes session `id`'s blobs not in `keep` and its writes in flight, once older than
    /// [`GRACE`]. Returns how many went.
    pub fn reap_blobs(&self, id: &str, keep: &HashSet<Hash>) -> usize {
        let dir = self.session(id);
        let mut gone = reap_stale(&dir, |name| name.starts_with(TMP));
        gone += reap_stale(&dir.join(BLOBS), |name| unhex(name).is_none_or(|h| !keep.contains(&h)));
        gone
    }

    /// Removes session `id`'s blobs not in `keep`, once older than [`GRACE`] (a running server's
    /// collection: its writes in flight, an interpreter's image file among them, are left).
    pub fn reap_garbage(&self, id: &str, keep: &HashSet<Hash>) -> usize {
        reap_stale(&self.session(id).join(BLOBS), |name| unhex(name).is_none_or(|h| !keep.contains(&h)))
    }

    fn stamps(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Hash), images::Stamp>> {
        self.stamps.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Removes the directory of a session that has no meta (its making was cut short), once
    /// older than [`GRACE`]. Returns whether it went.
    pub fn reap_unmade(&self, id: &str) -> bool {
        let dir = self.session(id);
        let old = fs::metadata(&dir).is_ok_and(|m| older_than_grace(&m));
        old && !dir.join(META).exists() && self.remove(id).is_ok()
    }

    fn empty_trash(&self) {
        if let Ok(entries) = fs::read_dir(self.root.join(TRASH)) {
            for e in entries.flatten() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Whether a state directory could be opened at `root` without opening it (`stockade serve
/// --check`): when it is there, it must be a directory of this user's. Its metadata, if it is.
pub fn check(root: &Path) -> Result<Option<fs::Metadata>, String> {
    let meta = match fs::metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("state directory {}: {e}", root.display())),
    };
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me {
        return Err(format!(
            "state directory {}: it must be a directory owned by uid {me} and reachable by no one else (mode 0700); it is uid {}, mode {:o}",
            root.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(Some(meta))
}

/// Whether `name` is a session's id as the engine makes them (`s-` and 32 hex digits): what a
/// path below the state directory may be made from.
pub fn valid_id(name: &str) -> bool {
    name.len() == 34 && name.starts_with("s-") && name[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

fn changed(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: its bytes were changed on disk", path.display()))
}

/// Writes `parts` as the whole of `path` (in `dir`): beside it first, flushed, renamed, the
/// directory flushed.
fn write_whole(dir: &Path, path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    let tmp = dir.join(format!("{TMP}{}", hex(&random16())));
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    File::open(dir)?.sync_all()
}

/// Removes the entries of `dir` that `stale` picks, once older than [`GRACE`].
fn reap_stale(dir: &Path, stale: impl Fn(&str) -> bool) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut gone = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let pick = name.to_str().is_some_and(&stale);
        if pick && e.metadata().is_ok_and(|m| older_than_grace(&m)) && fs::remove_file(e.path()).is_ok() {
            gone += 1;
        }
    }
    gone
}

fn older_than_grace(m: &fs::Metadata) -> bool {
    m.modified().ok().and_then(|t| SystemTime::now().duration_since(t).ok()).is_some_and(|age| age > GRACE)
}

/// The directory's lock, taken: exclusive, this process's pid written in it, or `shared` by
/// replicas. `Err` naming the holder when a server alone holds it, or replicas do and this one
/// would be alone.
fn take_lock(path: &Path, shared: bool) -> Result<File, String> {
    use rustix::fs::{FlockOperation, flock};
    let at = |e: io::Error| format!("{}: {e}", path.display());
    let mut f =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path).map_err(at)?;
    let how = if shared { FlockOperation::NonBlockingLockShared } else { FlockOperation::NonBlockingLockExclusive };
    if flock(&f, how).is_ok() {
        if !shared {
            f.set_len(0).and_then(|()| f.write_all(std::process::id().to_string().as_bytes())).map_err(at)?;
        }
        return Ok(f);
    }
    let dir = path.parent().unwrap_or(path).display();
    // A shared lock given to this one too: replicas hold it.
    if !shared && flock(&f, FlockOperation::NonBlockingLockShared).is_ok() {
        return Err(format!(
            "{dir} is in use by replicas (sessions.replica-lease-ms): a server alone cannot share it; set the same sessions.replica-lease-ms"
        ));
    }
    let mut holder = String::new();
    let _ = f.read_to_string(&mut holder);
    Err(format!(
        "{dir} is in use by another server (pid {}): one server at a time on a state directory, unless every one sets sessions.replica-lease-ms",
        holder.trim()
    ))
}

/// The directory's key: read, or made (32 random bytes, mode 0600) when there is none.
fn read_or_make_key(path: &Path) -> Result<[u8; 32], String> {
    let at = |e: io::Error| format!("state directory key {}: {e}", path.display());
    match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut f) => {
            let key: [u8; 32] = {
                let mut k = [0u8; 32];
                k[..16].copy_from_slice(&random16());
                k[16..].copy_from_slice(&random16());
                k
            };
            f.write_all(&key).and_then(|()| f.sync_all()).map_err(at)?;
            if let Some(dir) = path.parent() {
                File::open(dir).and_then(|d| d.sync_all()).map_err(at)?;
            }
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let mut f = File::open(path).map_err(at)?;
            let m = f.metadata().map_err(at)?;
            if m.mode() & 0o077 != 0 || m.uid() != rustix::process::geteuid().as_raw() {
                return Err(format!(
                    "state directory key {}: it must be this user's and readable by no one else (mode 0600); it is mode {:o}",
                    path.display(),
                    m.mode() & 0o7777
                ));
            }
            let mut key = [0u8; 32];
            let mut rest = Vec::new();
            f.read_exact(&mut key).map_err(at)?;
            f.read_to_end(&mut rest).map_err(at)?;
            if !rest.is_empty() {
                return Err(format!("state directory key {}: it must be 32 bytes", path.display()));
            }
            Ok(key)
        }
        Err(e) => Err(at(e)),
    }
}

/// 16 bytes from the kernel's random source (`getrandom(2)`; it does not fail for this size
/// once the pool is ready, which it is after boot).
fn random16() -> [u8; 16] {
    let mut b = [0u8; 16];
    let mut filled = 0;
    while filled < b.len() {
        match rustix::rand::getrandom(&mut b[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    b
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash from 64 hex digits.
pub fn unhex(s: &str) -> Option<Hash> {
    if s.len() != 64 {
        return None;
    }
    let mut h = [0u8; 32];
    for (i, b) in h.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_changed_without_the_key_is_refused() {
        let d = StateDir::temporary().expect("state");
        let id = "s-0123456789abcdef0123456789abcdef";
        d.create(id).expect("create");
        d.save(id, br#"{"runs":1}"#).expect("save");
        assert_eq!(d.load(id).expect("load"), br#"{"runs":1}"#);
        let path = d.root().join("sessions").join(id).join("meta");
        let text = fs::read_to_string(&path).expect("read");
        fs::write(&path, text.replace("\"runs\":1", "\"runs\":2")).expect("write");
        assert!(d.load(id).expect_err("tampered").contains("MAC does not hold"));
    }

    #[test]
    fn a_blob_changed_on_disk_is_refused() {
        let d = StateDir::temporary().expect("state");
        let id = "s-0123456789abcdef0123456789abcdef";
        d.create(id).expect("create");
        let h = d.put_blob(id, b"hello").expect("put");
        assert_eq!(d.read_blob(id, &h, 5).expect("read"), b"hello");
        fs::write(d.root().join("sessions").join(id).join("blobs").join(hex(&h)), b"jello").expect("write");
        assert_eq!(d.read_blob(id, &h, 5).expect_err("changed").kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn ids_are_only_what_the_engine_makes() {
        assert!(valid_id("s-0123456789abcdef0123456789abcdef"));
        assert!(!valid_id("s-../../../../etc/passwd/0123456789ab"));
        assert!(!valid_id("s-0123456789abcdef0123456789abcdeg"));
        assert_eq!(unhex(&hex(&[7u8; 32])), Some([7u8; 32]));
    }
}
