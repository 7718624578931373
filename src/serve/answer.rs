//! Answers as HTTP bodies, each holding its room in the engine's budget of answers
//! ([`stockade_engine::budget`]) until hyper has sent it or its connection is gone (a client
//! that reads nothing is cut by `server.write-timeout-ms`). Answers go out in pieces, so hyper's
//! buffers hold one piece at a time; a stream keeps the run's raw output (capped by the
//! supervisor) and makes its NDJSON lines as they are sent.

use axum::body::Bytes;
use std::pin::Pin;
use std::task::{Context, Poll};
use stockade_engine::budget::Reserved;
use tokio::sync::mpsc;

/// The most of an answer one piece holds.
const PIECE: usize = 64 * 1024;

/// A whole answer, sent in pieces, its reservation held until it is dropped.
pub struct Held {
    bytes: Bytes,
    _reserved: Reserved,
}

impl Held {
    pub fn new(bytes: Vec<u8>, mut reserved: Reserved) -> Held {
        reserved.shrink_to(bytes.len());
        Held { bytes: Bytes::from(bytes), _reserved: reserved }
    }
}

impl tokio_stream::Stream for Held {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.bytes.is_empty() {
            return Poll::Ready(None);
        }
        let n = self.bytes.len().min(PIECE);
        Poll::Ready(Some(Ok(self.bytes.split_to(n))))
    }
}

/// What a streamed run sends on: raw output of one stream (as the supervisor passed it on, under
/// its cap), or the last line.
#[derive(Debug)]
pub enum Piece {
    Output(Which, Vec<u8>),
    /// A line of its own (a host call's event), sent as it is.
    Line(Vec<u8>),
    Last(Vec<u8>),
}

#[derive(Debug, Clone, Copy)]
pub enum Which {
    Stdout,
    Stderr,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Stdout => "stdout",
            Which::Stderr => "stderr",
        }
    }
}

/// A streamed answer: NDJSON lines made from the raw pieces as the client takes them.
pub struct Ndjson {
    rx: mpsc::UnboundedReceiver<Piece>,
    /// An incomplete UTF-8 character at the end of each stream, waiting for the rest.
    carry: [Vec<u8>; 2],
    done: bool,
    _reserved: Reserved,
}

impl Ndjson {
    pub fn new(rx: mpsc::UnboundedReceiver<Piece>, reserved: Reserved) -> Ndjson {
        Ndjson { rx, carry: [Vec::new(), Vec::new()], done: false, _reserved: reserved }
    }
}

impl tokio_stream::Stream for Ndjson {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            let lines = match self.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.done = true;
                    continue;
                }
                Poll::Ready(Some(Piece::Output(w, bytes))) => {
                    let carry = &mut self.carry[w as usize];
                    carry.extend_from_slice(&bytes);
                    events(w.name(), carry, false).concat()
                }
                Poll::Ready(Some(Piece::Line(line))) => line,
                Poll::Ready(Some(Piece::Last(line))) => {
                    self.done = true;
                    let [out, err] = &mut self.carry;
                    let mut lines = events("stdout", out, true).concat();
                    lines.extend(events("stderr", err, true).concat());
                    lines.extend(line);
                    lines
                }
            };
            if !lines.is_empty() {
                return Poll::Ready(Some(Ok(Bytes::from(lines))));
            }
        }
    }
}

/// NDJSON lines for what `carry` holds: its UTF-8 text as `{"NAME": TEXT}`, bytes that are not
/// UTF-8 as `{"NAME-base64": ...}` (a run of them in one line); an incomplete character at the
/// end waits for more, unless `last`.
pub fn events(name: &str, carry: &mut Vec<u8>, last: bool) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let mut line = |key: String, value: String| {
        let mut l = serde_json::to_vec(&serde_json::json!({ key: value })).unwrap_or_default();
        l.push(b'\n');
        out.push(l);
    };
    let bytes = std::mem::take(carry);
    let mut rest: &[u8] = &bytes;
    while !rest.is_empty() {
        let valid = match std::str::from_utf8(rest) {
            Ok(_) => rest.len(),
            Err(e) => e.valid_up_to(),
        };
        if valid > 0 {
            line(name.to_string(), String::from_utf8_lossy(&rest[..valid]).into_owned());
            rest = &rest[valid..];
            continue;
        }
        // Bytes that are not UTF-8, up to the next valid character (or what may be the start of
        // one at the end, which waits for more unless this is the last).
        let mut bad = 0;
        while bad < rest.len() {
            match std::str::from_utf8(&rest[bad..]) {
                Ok(_) => break,
                Err(e) if e.valid_up_to() > 0 => break,
                Err(e) => match e.error_len() {
                    Some(n) => bad += n,
                    None if last => bad = rest.len(),
                    None => break,
                },
            }
        }
        if bad == 0 {
            *carry = rest.to_vec();
            break;
        }
        line(format!("{name}-base64"), base64::engine::general_purpose::STANDARD.encode(&rest[..bad]));
        rest = &rest[bad..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_text_from_bytes_and_wait_for_whole_characters() {
        let mut c = b"a\xc3".to_vec();
        let lines = events("stdout", &mut c, false);
        assert_eq!(lines, [b"{\"stdout\":\"a\"}\n".to_vec()]);
        assert_eq!(c, b"\xc3");
        c.extend_from_slice(b"\xa9\xffz");
        let lines: Vec<String> =
            events("stdout", &mut c, false).into_iter().map(|l| String::from_utf8(l).unwrap()).collect();
        assert_eq!(lines, ["{\"stdout\":\"é\"}\n", "{\"stdout-base64\":\"/w==\"}\n", "{\"stdout\":\"z\"}\n"]);
        let mut c = b"\xc3".to_vec();
        assert_eq!(events("stderr", &mut c, true), [b"{\"stderr-base64\":\"ww==\"}\n".to_vec()]);
    }

    #[test]
    fn a_run_of_bad_bytes_is_one_line() {
        let mut c = vec![0xff; 1000];
        let lines = events("stdout", &mut c, false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(c.is_empty());
    }
}
