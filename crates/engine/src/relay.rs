//! Host calls of a run in a helper's jail ([`super::spawner`]), answered in the server: the
//! helper's library serves the jail's channel as for any run (every budget, each call's time,
//! the report's records), and its answerer sends each call to the server on a socket the server
//! gave with the run's start; the server answers it with the run's own answerer (its client,
//! through the run's stream) and sends the answer back. Both ends are stockade's own processes
//! outside any jail; the lengths are checked all the same.
//!
//! ```text
//! call   (helper -> server): <u32 BE length> <u64 BE id> <u32 BE name length> name args
//! answer (server -> helper): <u32 BE length> <u64 BE id> <u8: 1 ok, 0 error> value or why
//! ```
//!
//! Imports (layers): none.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use stockade::Answerer;

/// The longest call frame: a request the library let through ([`stockade::REQUEST_MAX_BYTES`])
/// with its id and name's length.
const CALL_MAX_BYTES: u32 = stockade::REQUEST_MAX_BYTES + 12;
/// The longest answer frame: four times the most a tool's `max-response-bytes` may be (16 MiB;
/// the library cuts an answer past its tool's anyway); this bounds what the helper holds for one.
const ANSWER_MAX_BYTES: u32 = 64 << 20;
/// What a call gets instead of an answer too long for a frame.
const TOO_LONG: &str = "the answer is too long to relay";

type Answer = Result<String, String>;
/// The calls waiting for their answers, by id (`None` once the server's end closed).
type Waiting = Arc<Mutex<Option<HashMap<u64, SyncSender<Answer>>>>>;

/// The helper's side: an answerer sending each call on `sock` and waiting for its answer (a
/// call the library stopped waiting for gets its late answer dropped). When the server's end
/// closes, every waiting call and every later one fails.
pub fn answerer(sock: UnixStream) -> io::Result<Answerer> {
    let reader = sock.try_clone()?;
    let waiting: Waiting = Arc::new(Mutex::new(Some(HashMap::new())));
    let w = waiting.clone();
    std::thread::Builder::new().name("stockade-relay".into()).spawn(move || {
        let mut reader = reader;
        while let Ok((id, answer)) = read_answer(&mut reader) {
            let tx = w.lock().unwrap_or_else(PoisonError::into_inner).as_mut().and_then(|m| m.remove(&id));
            if let Some(tx) = tx {
                let _ = tx.send(answer);
            }
        }
        // The server's end is gone: no answer comes any more (the waiting senders drop).
        w.lock().unwrap_or_else(PoisonError::into_inner).take();
    })?;
    let out = Mutex::new(sock);
    let next = AtomicU64::new(0);
    Ok(Arc::new(move |name: &str, args: &str| {
        let id = next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = sync_channel(1);
        let closed = || "host calls are closed for this run".to_string();
        match waiting.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            Some(m) => m.insert(id, tx),
            None => return Err(closed()),
        };
        let frame = call_frame(id, name, args).ok_or_else(|| "the call is too long to relay".to_string())?;
        if out.lock().unwrap_or_else(PoisonError::into_inner).write_all(&frame).is_err() {
            return Err(closed());
        }
        rx.recv().unwrap_or_else(|_| Err("the host's answer was lost".into()))
    }))
}

/// The server's side: answers each call coming on `sock` with `answer`, each on a thread of its
/// own (a call its run stopped waiting for holds no other), until the helper closes its end.
pub fn serve(sock: UnixStream, answer: Answerer) -> io::Result<()> {
    let out = Arc::new(Mutex::new(sock.try_clone()?));
    std::thread::Builder::new().name("stockade-relay".into()).spawn(move || {
        let mut sock = sock;
        while let Ok((id, name, args)) = read_call(&mut sock) {
            let (answer, to) = (answer.clone(), out.clone());
            let spawned = std::thread::Builder::new().name("stockade-call".into()).spawn(move || {
                let frame = answer_frame(id, &answer(&name, &args));
                let _ = to.lock().unwrap_or_else(PoisonError::into_inner).write_all(&frame);
            });
            if spawned.is_err() {
                let frame = answer_frame(id, &Err("the host could not start the call".into()));
                let _ = out.lock().unwrap_or_else(PoisonError::into_inner).write_all(&frame);
            }
        }
    })?;
    Ok(())
}

fn call_frame(id: u64, name: &str, args: &str) -> Option<Vec<u8>> {
    let len = u32::try_from(12 + name.len() + args.len()).ok().filter(|n| *n <= CALL_MAX_BYTES)?;
    let mut f = Vec::with_capacity(4 + len as usize);
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(&u32::try_from(name.len()).ok()?.to_be_bytes());
    f.extend_from_slice(name.as_bytes());
    f.extend_from_slice(args.as_bytes());
    Some(f)
}

fn answer_frame(id: u64, answer: &Answer) -> Vec<u8> {
    let (ok, text) = match answer {
        Ok(v) => (1u8, v.as_bytes()),
        Err(why) => (0u8, why.as_bytes()),
    };
    // An answer too long for a frame is said to be so (the library cuts far shorter ones).
    let (ok, text, len) = match u32::try_from(9 + text.len()) {
        Ok(len) if len <= ANSWER_MAX_BYTES => (ok, text, len),
        _ => (0, TOO_LONG.as_bytes(), u32::try_from(9 + TOO_LONG.len()).unwrap_or(ANSWER_MAX_BYTES)),
    };
    let mut f = Vec::with_capacity(13 + text.len());
    f.extend_from_slice(&len.to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.push(ok);
    f.extend_from_slice(text);
    f
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("a host call's relay: {why}"))
}

/// One frame's body (after its length, at least `least` and at most `most` bytes).
fn read_body(r: &mut impl Read, least: u32, most: u32) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len);
    if n < least || n > most {
        return Err(bad("a frame of a length no frame has"));
    }
    let mut body = vec![0u8; n as usize];
    r.read_exact(&mut body)?;
    Ok(body)
}

fn id_of(body: &[u8]) -> u64 {
    u64::from_be_bytes(body[..8].try_into().unwrap_or_default())
}

fn read_call(r: &mut impl Read) -> io::Result<(u64, String, String)> {
    let body = read_body(r, 12, CALL_MAX_BYTES)?;
    let name_len = u32::from_be_bytes(body[8..12].try_into().unwrap_or_default()) as usize;
    let rest = &body[12..];
    if name_len > rest.len() {
        return Err(bad("a name past its frame"));
    }
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| bad("not UTF-8"));
    Ok((id_of(&body), text(&rest[..name_len])?, text(&rest[name_len..])?))
}

fn read_answer(r: &mut impl Read) -> io::Result<(u64, Answer)> {
    let body = read_body(r, 9, ANSWER_MAX_BYTES)?;
    let text = String::from_utf8(body[9..].to_vec()).map_err(|_| bad("not UTF-8"))?;
    Ok((id_of(&body), if body[8] == 1 { Ok(text) } else { Err(text) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_crosses_and_its_answer_comes_back_by_its_id() {
        let (helper, server) = UnixStream::pair().unwrap();
        serve(server, Arc::new(|name: &str, args: &str| Ok(format!("{{\"{name}\": {args}}}")))).unwrap();
        let ask = answerer(helper).unwrap();
        assert_eq!(ask("add", "[1, 2]").unwrap(), "{\"add\": [1, 2]}");
        assert_eq!(ask("none", "null").unwrap(), "{\"none\": null}");
    }

    #[test]
    fn an_error_crosses_as_an_error_and_a_closed_server_fails_every_call() {
        let (helper, server) = UnixStream::pair().unwrap();
        serve(server, Arc::new(|_: &str, _: &str| Err("no such thing".into()))).unwrap();
        let ask = answerer(helper).unwrap();
        assert_eq!(ask("x", "1").unwrap_err(), "no such thing");
        let (helper, server) = UnixStream::pair().unwrap();
        drop(server);
        let ask = answerer(helper).unwrap();
        assert!(ask("x", "1").is_err());
    }

    #[test]
    fn a_frame_of_a_length_no_frame_has_ends_the_relay() {
        let mut short = &[0u8, 0, 0, 3, 1, 2, 3][..];
        assert!(read_call(&mut short).is_err());
        let mut name_past = Vec::from(13u32.to_be_bytes());
        name_past.extend_from_slice(&[0; 8]);
        name_past.extend_from_slice(&99u32.to_be_bytes());
        name_past.push(b'x');
        assert!(read_call(&mut &name_past[..]).is_err());
    }
}
