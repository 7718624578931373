//! `Idempotency-Key` on a run's request (`POST /v1/runs`, `POST /v1/sessions/{id}/runs`): a
//! client that lost an answer asks again with the same key and gets the first answer, never a
//! second run. A key is its caller's (the hash of its token, or the unix socket's clients), and is
//! bound to its request (the path and the body's SHA-256): the same key with another request is
//! refused (422). Kept for `requests.idempotency-window-ms` after the answer, within
//! `requests.idempotency-max-bytes` of answers (the oldest go first); a request that comes while
//! the first is still running waits for its answer. Nothing is kept of a request refused before
//! its run (a full queue, a draining server): asked again, it runs. In this server's memory only:
//! another replica, or this one restarted, does not know the key.

use axum::http::{HeaderMap, StatusCode};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use stockade::api::{ApiError, ErrorCode};
use stockade_engine::sessions::Owner;
use tokio::sync::watch;

/// The header.
pub const HEADER: &str = "idempotency-key";
/// The header of an answer given again.
pub const REPLAYED: &str = "idempotency-replayed";

/// An answer kept for its key.
#[derive(Debug)]
pub struct Kept {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

type Id = (Owner, String);

#[derive(Debug)]
enum State {
    /// The first request runs: those that come meanwhile wait on it.
    Running(watch::Sender<Option<Arc<Kept>>>),
    /// Its answer (`None`: too large to keep).
    Done(Option<Arc<Kept>>),
}

#[derive(Debug)]
struct Entry {
    fingerprint: [u8; 32],
    state: State,
    at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<Id, Entry>,
    /// The answered ones, oldest first (an id may stand here more than once: its last is current).
    order: VecDeque<(Id, Instant)>,
    bytes: u64,
}

/// The server's keys.
#[derive(Debug)]
pub struct Keys {
    inner: Mutex<Inner>,
    window: Duration,
    max_bytes: u64,
}

/// What a request with a key is to do.
#[derive(Debug)]
pub enum Claim {
    /// It is the first: it runs, and its answer is kept ([`Guard::keep`]).
    First(Guard),
    /// Its answer is there (`None`: it was too large to keep).
    Replay(Option<Arc<Kept>>),
    /// The first is still running: its answer comes here.
    Wait(watch::Receiver<Option<Arc<Kept>>>),
}

/// The first request of a key, until its answer is kept; dropped without one (it was refused
/// before its run, or its client went), the key is forgotten.
#[derive(Debug)]
pub struct Guard {
    keys: Arc<Keys>,
    id: Id,
    kept: bool,
}

/// The key a request carries, checked: 1 to 255 visible ASCII characters (a UUID is the usual).
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get(HEADER) else { return Ok(None) };
    let bad = || ApiError::field("Idempotency-Key", "1 to 255 visible ASCII characters (a UUID, say)");
    let s = v.to_str().map_err(|_| bad())?;
    if s.is_empty() || s.len() > 255 || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad());
    }
    Ok(Some(s.to_string()))
}

impl Keys {
    pub fn new(window: Duration, max_bytes: u64) -> Keys {
        Keys { inner: Mutex::new(Inner::default()), window, max_bytes }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `key` of `owner` for a request of `fingerprint` (its path and body, hashed).
    pub fn claim(self: &Arc<Self>, owner: Owner, key: String, fingerprint: [u8; 32]) -> Result<Claim, ApiError> {
        let mut inner = self.lock();
        self.expire(&mut inner);
        let id = (owner, key);
        if let Some(e) = inner.map.get(&id) {
            if e.fingerprint != fingerprint {
                return Err(ApiError::new(
                    ErrorCode::IdempotencyMismatch,
                    format!(
                        "Idempotency-Key {:?} was used with another request (another path or body) in the last {} ms",
                        id.1,
                        self.window.as_millis()
                    ),
                ));
            }
            return Ok(match &e.state {
                State::Running(tx) => Claim::Wait(tx.subscribe()),
                State::Done(kept) => Claim::Replay(kept.clone()),
            });
        }
        let (tx, _) = watch::channel(None);
        inner.map.insert(id.clone(), Entry { fingerprint, state: State::Running(tx), at: Instant::now() });
        Ok(Claim::First(Guard { keys: self.clone(), id, kept: false }))
    }

    /// Forgets the answers older than the window.
    fn expire(&self, inner: &mut Inner) {
        while let Some((_, at)) = inner.order.front()
            && at.elapsed() >= self.window
        {
            let Some((id, at)) = inner.order.pop_front() else { break };
            self.forget_done(inner, &id, at);
        }
    }

    /// Forgets `id`'s answer, if it is the one answered at `at`.
    fn forget_done(&self, inner: &mut Inner, id: &Id, at: Instant) {
        if inner.map.get(id).is_some_and(|e| e.at == at && matches!(e.state, State::Done(_)))
            && let Some(Entry { state: State::Done(kept), .. }) = inner.map.remove(id)
        {
            inner.bytes -= kept.map_or(0, |k| k.body.len() as u64);
        }
    }
}

impl Guard {
    /// Keeps the first answer for the key (the oldest answers go to make room; one larger than
    /// all the room is not kept, and its key answers 409 from then on) and hands it to those
    /// waiting.
    pub fn keep(mut self, status: StatusCode, body: &[u8]) {
        self.kept = true;
        let keys = self.keys.clone();
        let mut inner = keys.lock();
        let size = body.len() as u64;
        let kept = (size <= keys.max_bytes).then(|| Arc::new(Kept { status, body: body.to_vec() }));
        if kept.is_some() {
            while inner.bytes + size > keys.max_bytes {
                let Some((id, at)) = inner.order.pop_front() else { break };
                keys.forget_done(&mut inner, &id, at);
            }
            inner.bytes += size;
        }
        let at = Instant::now();
        if let Some(e) = inner.map.get_mut(&self.id) {
            if let State::Running(tx) = &e.state {
                tx.send_replace(kept.clone());
            }
            e.state = State::Done(kept);
            e.at = at;
            inner.order.push_back((self.id.clone(), at));
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.kept {
            // Those waiting see the sender go: the first ended without an answer.
            self.keys.lock().map.remove(&self.id);
        }
    }
}

/// 409 for a request whose key's first answer cannot be given (it was too large to keep, or the
/// first request ended without one).
pub fn not_kept(why: &str) -> ApiError {
    ApiError::new(ErrorCode::IdempotencyConflict, format!("this Idempotency-Key's first request {why}"))
}

/// What `path` and `body` are, for a key: their SHA-256.
pub fn fingerprint(path: &str, body: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(body);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gives_its_first_answer_and_refuses_another_request() {
        let keys = Arc::new(Keys::new(Duration::from_secs(60), 10));
        let (a, b) = (fingerprint("/v1/runs", b"{}"), fingerprint("/v1/runs", b"{ }"));
        let Ok(Claim::First(g)) = keys.claim(None, "k".into(), a) else { panic!("not first") };
        let Ok(Claim::Wait(mut rx)) = keys.claim(None, "k".into(), a) else { panic!("not waiting") };
        assert!(keys.claim(None, "k".into(), b).is_err(), "another request with the key");
        assert!(matches!(keys.claim(Some([1; 32]), "k".into(), b), Ok(Claim::First(_))), "another caller's key");
        g.keep(StatusCode::OK, b"answer");
        assert_eq!(rx.borrow_and_update().as_ref().map(|k| k.body.clone()), Some(b"answer".to_vec()));
        let Ok(Claim::Replay(Some(k))) = keys.claim(None, "k".into(), a) else { panic!("not replayed") };
        assert_eq!(k.body, b"answer");
        // Too large for the room: not kept, said.
        let Ok(Claim::First(g)) = keys.claim(None, "big".into(), a) else { panic!("not first") };
        g.keep(StatusCode::OK, b"more than ten bytes");
        assert!(matches!(keys.claim(None, "big".into(), a), Ok(Claim::Replay(None))));
        // Refused before its run: forgotten, so that it runs when asked again.
        let Ok(Claim::First(g)) = keys.claim(None, "busy".into(), a) else { panic!("not first") };
        drop(g);
        assert!(matches!(keys.claim(None, "busy".into(), a), Ok(Claim::First(_))));
    }

    #[test]
    fn the_oldest_answers_make_room_and_the_window_ends_them() {
        let keys = Arc::new(Keys::new(Duration::from_millis(50), 10));
        for k in ["a", "b"] {
            let Ok(Claim::First(g)) = keys.claim(None, k.into(), [0; 32]) else { panic!() };
            g.keep(StatusCode::OK, b"123456");
        }
        assert!(matches!(keys.claim(None, "a".into(), [0; 32]), Ok(Claim::First(_))), "a made room for b");
        std::thread::sleep(Duration::from_millis(60));
        assert!(matches!(keys.claim(None, "b".into(), [0; 32]), Ok(Claim::First(_))), "past the window");
    }
}
