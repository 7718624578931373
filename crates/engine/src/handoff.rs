//! What the server and a jail's helper process ([`super::spawner`]) say to each other over the
//! helper's socket: that the jail is ready (or why not), the run's [`Start`], and how it ended.
//!
//! A frame is two little-endian `u64` lengths, a JSON header of that first length and the bytes
//! the header points into (files, stdin, output channels: raw, never escaped). A run's output
//! pipes (a streaming answer) travel as file descriptors on the frame's first byte.
//!
//! Both ends are stockade's own processes outside any jail; the lengths are checked all the
//! same (no frame past [`FRAME_MAX_BYTES`], no slice out of its bytes).
//!
//! Imports (layers): none.

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
    recvmsg, sendmsg,
};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use stockade::layers::filesystem::exchange::{self, Pick, PutFile, Skipped, Taken};
use stockade::policy::Limits;
use stockade::{Cleanup, Error, Exchange, Finished, Gated, Host, HostCalls, Report, Start};

/// The largest frame either side accepts: more than any answer a server's caps allow.
pub const FRAME_MAX_BYTES: u64 = 1 << 32;
/// The two lengths before a frame's header.
pub const LENGTHS: usize = 16;

/// Bytes of a frame, by place.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Blob {
    at: u64,
    len: u64,
}

/// One message between the server and a helper.
#[derive(Debug, Serialize, Deserialize)]
pub enum Msg {
    /// The jail is built and waits at its gate; where its network namespace came from.
    Ready(stockade::NetJoined),
    /// The jail could not be built (why, in words).
    Refused(String),
    /// The server's run for the jail.
    Start(Box<StartWire>),
    /// The run ended with a report.
    Ran(Box<RanWire>),
    /// The jail ended before its run (why, in words).
    NotStarted(String),
    /// The run could not be supervised: `files`, its files could not be put (the request's
    /// fault); else the host's.
    Failed { files: bool, why: String },
    /// The helper panicked (a bug of ours) while it ran the jail.
    Panicked(String),
    /// The run opened: the jail's host-call channel (its requests' read end, its answers' write
    /// end) comes with the frame's first byte, for the server to serve.
    Calls,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct StartWire {
    stdin: Blob,
    files: Option<ExchangeWire>,
    limits: Limits,
    /// Two fds (stdout, stderr) come with the frame.
    streams: bool,
    argv_display: Option<Vec<String>>,
    from_release: bool,
    /// The run has host calls, which the server serves: the helper lends it the jail's channel
    /// as the run opens ([`Msg::Calls`]).
    lend_calls: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct ExchangeWire {
    dir: PathBuf,
    put: Vec<(PathBuf, Blob)>,
    /// The patterns as written, and the caps.
    take: Option<(Vec<String>, usize, u64)>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct RanWire {
    /// The report without its layers, which come as the JSON the helper's library made while the
    /// jail waited: the server writes them into its answer as they came.
    report: Report,
    layers: Option<Box<serde_json::value::RawValue>>,
    channels: Vec<Blob>,
    files: Option<TakenWire>,
}

#[derive(Debug, Serialize, Deserialize)]
struct TakenWire {
    files: Vec<(String, Blob)>,
    capped: bool,
    skipped: Vec<(String, String)>,
    skipped_count: usize,
}

/// A frame's bytes, written as its header points into them.
#[derive(Debug, Default)]
pub struct Blobs(Vec<u8>);

impl Blobs {
    fn add(&mut self, b: &[u8]) -> Blob {
        let at = self.0.len() as u64;
        self.0.extend_from_slice(b);
        Blob { at, len: b.len() as u64 }
    }
}

/// A frame's bytes, read: the slices its header names.
fn slice<'a>(bytes: &'a [u8], b: &Blob) -> io::Result<&'a [u8]> {
    let at = usize::try_from(b.at).ok();
    let end = at.zip(usize::try_from(b.len).ok()).and_then(|(at, len)| at.checked_add(len));
    match (at, end) {
        (Some(at), Some(end)) if end <= bytes.len() => Ok(&bytes[at..end]),
        _ => Err(bad("a blob past the frame's end")),
    }
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("a helper's frame: {why}"))
}

/// The frame of `msg` (with the bytes its header points into).
pub fn encode(msg: &Msg, blobs: &Blobs) -> io::Result<Vec<u8>> {
    let header = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let mut out = Vec::with_capacity(LENGTHS + header.len() + blobs.0.len());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(&(blobs.0.len() as u64).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&blobs.0);
    Ok(out)
}

/// How many bytes follow a frame's lengths (checked against [`FRAME_MAX_BYTES`]).
pub fn rest_len(lengths: &[u8; LENGTHS]) -> io::Result<(usize, usize)> {
    let h = u64::from_le_bytes(lengths[..8].try_into().unwrap_or_default());
    let b = u64::from_le_bytes(lengths[8..].try_into().unwrap_or_default());
    match (usize::try_from(h), usize::try_from(b)) {
        (Ok(h), Ok(b)) if (h as u64).saturating_add(b as u64) <= FRAME_MAX_BYTES => Ok((h, b)),
        _ => Err(bad("longer than any frame may be")),
    }
}

/// Reads what follows a frame's lengths into a message and its bytes (the same buffer, its
/// header taken off the front: the bytes are not copied into another).
pub fn decode(mut rest: Vec<u8>, header_len: usize) -> io::Result<(Msg, Vec<u8>)> {
    let header_len = header_len.min(rest.len());
    let msg = serde_json::from_slice(&rest[..header_len]).map_err(|e| bad(&e.to_string()))?;
    rest.drain(..header_len);
    Ok((msg, rest))
}

/// Writes one frame (blocking).
pub fn write_frame(w: &mut impl Write, msg: &Msg, blobs: &Blobs) -> io::Result<()> {
    w.write_all(&encode(msg, blobs)?)
}

/// Reads one frame whose lengths were read already (blocking).
pub fn read_rest(r: &mut impl Read, lengths: &[u8; LENGTHS]) -> io::Result<(Msg, Vec<u8>)> {
    let (h, b) = rest_len(lengths)?;
    let mut rest = vec![0; h + b];
    r.read_exact(&mut rest)?;
    decode(rest, h)
}

/// Reads one frame (blocking).
pub fn read_frame(r: &mut impl Read) -> io::Result<(Msg, Vec<u8>)> {
    let mut lengths = [0; LENGTHS];
    r.read_exact(&mut lengths)?;
    read_rest(r, &lengths)
}

/// A run's start as a frame, the output pipes that go with it, and its host calls, which the
/// server serves on the channel the helper lends it ([`Msg::Calls`]).
pub fn start_out(start: Start) -> io::Result<(Vec<u8>, Vec<OwnedFd>, Option<HostCalls>)> {
    if start.live.is_some() {
        return Err(io::Error::other("a run lending its directory runs in this process"));
    }
    let host = match start.host {
        None => None,
        Some(Host::Run(h)) => Some(h),
        Some(_) => return Err(io::Error::other("a run of turns runs in this process")),
    };
    let mut blobs = Blobs::default();
    let stdin = blobs.add(&start.stdin);
    let files = start.files.map(|x| ExchangeWire {
        put: x.put.iter().map(|f| (f.path.clone(), blobs.add(&f.bytes))).collect(),
        dir: x.dir,
        take: x.take.map(|p| (p.sources, p.max_files, p.max_bytes)),
    });
    let streams = start.stdout_to.is_some() && start.stderr_to.is_some();
    let fds: Vec<OwnedFd> = start.stdout_to.into_iter().chain(start.stderr_to).collect();
    let wire = StartWire {
        stdin,
        files,
        limits: start.limits,
        streams,
        argv_display: start.argv_display,
        from_release: start.from_release,
        lend_calls: host.is_some(),
    };
    Ok((encode(&Msg::Start(Box::new(wire)), &blobs)?, fds, host))
}

/// A run's start from its frame, with the pipes that came with it; a run with host calls lends
/// the jail's channel to the server on `sock` (the helper's socket) as it opens.
pub fn start_in(wire: StartWire, bytes: &[u8], fds: Vec<OwnedFd>, sock: &UnixStream) -> io::Result<Start> {
    let mut fds = fds.into_iter();
    let (stdout_to, stderr_to) = match (wire.streams, wire.streams.then(|| fds.next()).flatten()) {
        (false, None) => (None, None),
        (true, Some(o)) => (Some(o), Some(fds.next().ok_or_else(|| bad("its stderr pipe did not come with it"))?)),
        _ => return Err(bad("its output pipes did not come with it")),
    };
    let host = match wire.lend_calls {
        false => None,
        true => {
            let sock = sock.try_clone()?;
            Some(Host::Lent(stockade::Lend::new(move |requests, answers| {
                // Lost with the server's end: the run goes on, its calls unanswered (they fail
                // as the channel's ends close with this helper).
                let _ = lend(&sock, &requests, &answers);
            })))
        }
    };
    if fds.next().is_some() {
        return Err(bad("more pipes came with it than its header says"));
    }
    let files = match wire.files {
        None => None,
        Some(ExchangeWire { dir, put, take }) => {
            let put = put
                .into_iter()
                .map(|(path, b)| Ok(PutFile { path, bytes: slice(bytes, &b)?.to_vec() }))
                .collect::<io::Result<_>>()?;
            let take = match take {
                None => None,
                Some((sources, max_files, max_bytes)) => {
                    let patterns = exchange::patterns(&sources).map_err(|(_, why)| bad(&why))?;
                    Some(Pick { patterns, sources, max_files, max_bytes })
                }
            };
            Some(Exchange { dir, put, take })
        }
    };
    Ok(Start {
        stdin: slice(bytes, &wire.stdin)?.to_vec(),
        files,
        limits: wire.limits,
        stdout_to,
        stderr_to,
        live: None,
        host,
        argv_display: wire.argv_display,
        from_release: wire.from_release,
    })
}

/// Sends `data` with `fds` (on a socket; never SIGPIPE).
pub fn send_with_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many fds for one message"));
    }
    Ok(sendmsg(sock, &[IoSlice::new(data)], &mut control, SendFlags::NOSIGNAL)?)
}

/// Receives into `buf`, with the fds that came along (at most three).
pub fn recv_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(sock, &mut [IoSliceMut::new(buf)], &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = m {
            fds.extend(rights);
        }
    }
    Ok((got.bytes, fds))
}

/// Sends the server the jail's host-call channel ([`Msg::Calls`], the fds on its first byte).
fn lend(sock: &UnixStream, requests: &OwnedFd, answers: &OwnedFd) -> io::Result<()> {
    let frame = encode(&Msg::Calls, &Blobs::default())?;
    let sent = send_with_fds(sock.as_fd(), &frame[..1], &[requests.as_fd(), answers.as_fd()])?;
    (&mut &*sock).write_all(&frame[sent..])
}

/// How a gated jail ended, as a frame; its clean-up stays with the helper.
pub fn ended_out(gated: Result<Gated, Error>) -> io::Result<(Vec<u8>, Option<Cleanup>)> {
    let mut blobs = Blobs::default();
    let (msg, cleanup) = match gated {
        Ok(Gated::Ran(mut f)) => {
            let cleanup = f.cleanup.take();
            let channels = f.channels.iter().map(|c| blobs.add(c)).collect();
            let files = f.files.map(|t| TakenWire {
                files: t.files.iter().map(|(p, b)| (p.clone(), blobs.add(b))).collect(),
                capped: t.capped,
                skipped: t.skipped.into_iter().map(|s| (s.path, s.reason)).collect(),
                skipped_count: t.skipped_count,
            });
            let layers = f.report.enforcement.take_json();
            (Msg::Ran(Box::new(RanWire { report: f.report, layers, channels, files })), cleanup)
        }
        Ok(Gated::NotStarted(why)) => (Msg::NotStarted(why), None),
        Err(e) => (Msg::Failed { files: matches!(e, Error::Filesystem(_)), why: e.to_string() }, None),
    };
    Ok((encode(&msg, &blobs)?, cleanup))
}

/// A finished run from its frame.
pub fn finished_in(wire: RanWire, bytes: &[u8]) -> io::Result<Finished> {
    let channels = wire.channels.iter().map(|b| slice(bytes, b).map(<[u8]>::to_vec)).collect::<io::Result<_>>()?;
    let files = match wire.files {
        None => None,
        Some(t) => Some(Taken {
            files: t.files.into_iter().map(|(p, b)| Ok((p, slice(bytes, &b)?.to_vec()))).collect::<io::Result<_>>()?,
            capped: t.capped,
            skipped: t.skipped.into_iter().map(|(path, reason)| Skipped { path, reason }).collect(),
            skipped_count: t.skipped_count,
        }),
    };
    let mut report = wire.report;
    if let Some(json) = wire.layers {
        report.enforcement = stockade::Layers::from_json(json);
    }
    Ok(Finished { report, channels, files, cleanup: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_start_and_its_files_cross_unchanged() {
        let take = Pick {
            patterns: exchange::patterns(&["*.txt".into()]).expect("patterns"),
            sources: vec!["*.txt".into()],
            max_files: 3,
            max_bytes: 99,
        };
        let start = Start {
            stdin: b"print(1)\n\0\xff".to_vec(),
            files: Some(Exchange {
                dir: "/app".into(),
                put: vec![PutFile { path: "a/b.bin".into(), bytes: vec![0, 1, 255] }],
                take: Some(take),
            }),
            limits: Limits { wall_timeout_ms: Some(5), ..Limits::default() },
            argv_display: Some(vec!["python".into(), "print(1)".into()]),
            from_release: true,
            ..Start::default()
        };
        let (frame, fds, host) = start_out(start).expect("out");
        assert!(fds.is_empty() && host.is_none());
        let (msg, bytes) = read_frame(&mut frame.as_slice()).expect("frame");
        let Msg::Start(wire) = msg else { panic!("not a start: {msg:?}") };
        let got = start_in(*wire, &bytes, Vec::new(), &sock()).expect("in");
        assert_eq!(got.stdin, b"print(1)\n\0\xff");
        let x = got.files.expect("files");
        assert_eq!(
            (x.dir.to_str(), x.put[0].path.to_str(), x.put[0].bytes.as_slice()),
            (Some("/app"), Some("a/b.bin"), &[0, 1, 255][..])
        );
        let take = x.take.expect("take");
        assert!(take.patterns.is_match("x.txt") && !take.patterns.is_match("x.png"));
        assert_eq!((take.max_files, take.max_bytes), (3, 99));
        assert_eq!(got.limits.wall_timeout_ms, Some(5));
        assert!(got.from_release && got.stdout_to.is_none());
    }

    #[test]
    fn a_start_s_pipes_cross_in_their_order() {
        let pipe = || {
            let (r, w) = std::io::pipe().expect("pipe");
            (OwnedFd::from(r), OwnedFd::from(w))
        };
        let ((_, out), (_, err)) = (pipe(), pipe());
        let ino = |fd: &OwnedFd| std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).map(|m| m.ino()).ok();
        let want = [ino(&out), ino(&err)];
        let start = Start { stdout_to: Some(out), stderr_to: Some(err), ..Start::default() };
        let (frame, fds, _) = start_out(start).expect("out");
        assert_eq!(fds.len(), 2);
        let (msg, bytes) = read_frame(&mut frame.as_slice()).expect("frame");
        let Msg::Start(wire) = msg else { panic!("not a start: {msg:?}") };
        let got = start_in(*wire, &bytes, fds, &sock()).expect("in");
        let have = [got.stdout_to.as_ref(), got.stderr_to.as_ref()].map(|f| f.and_then(ino));
        assert_eq!(have, want);
        // Fewer fds than the header says, or more: refused.
        let ((_, out), (_, err)) = (pipe(), pipe());
        let (frame, mut fds, _) =
            start_out(Start { stdout_to: Some(out), stderr_to: Some(err), ..Start::default() }).expect("out");
        let (Msg::Start(wire), bytes) = read_frame(&mut frame.as_slice()).expect("frame") else { panic!() };
        fds.pop();
        assert!(start_in(*wire, &bytes, fds, &sock()).is_err());
        let (frame, mut fds, _) = start_out(Start::default()).expect("out");
        let (Msg::Start(wire), bytes) = read_frame(&mut frame.as_slice()).expect("frame") else { panic!() };
        fds.push(pipe().0);
        assert!(start_in(*wire, &bytes, fds, &sock()).is_err());
    }

    /// A helper's socket, for a start that lends nothing through it.
    fn sock() -> UnixStream {
        UnixStream::pair().expect("pair").0
    }

    #[test]
    fn a_report_crosses_with_its_layers_and_is_answered_as_it_was_made() {
        use stockade::{LayerReport, Layers};
        let list = vec![
            LayerReport::new("namespace.user", "new", "new"),
            LayerReport::new("seccomp", "deny: \"net\"", "1 filter"),
        ];
        let argv = ["python".to_string(), "print(1)".to_string()];
        let mut report = Report::new("builtin:default", "x", &argv, std::time::Duration::from_secs(1));
        report.stdout.text = Some("1\n".into());
        let want =
            stockade::api::RunResult::new(Report { enforcement: Layers::new(list.clone()), ..report.clone() }, None)
                .to_json();
        report.enforcement = Layers::encoded(list.clone());
        let f = Finished { report, channels: vec![b"c".to_vec()], files: None, cleanup: None };
        let (frame, _) = ended_out(Ok(Gated::Ran(Box::new(f)))).expect("out");
        let text = String::from_utf8_lossy(&frame);
        assert_eq!(text.matches("namespace.user").count(), 1, "{text}");
        let (Msg::Ran(wire), bytes) = read_frame(&mut frame.as_slice()).expect("frame") else { panic!("not a run") };
        let got = finished_in(*wire, &bytes).expect("in");
        assert_eq!(got.channels, vec![b"c".to_vec()]);
        assert_eq!(got.report.enforcement.as_slice(), list.as_slice());
        let answer = stockade::api::RunResult::new(got.report, None).to_json();
        assert_eq!(String::from_utf8_lossy(&answer), String::from_utf8_lossy(&want));
    }

    #[test]
    fn a_blob_past_the_end_and_an_oversized_frame_are_refused() {
        let mut frame = encode(&Msg::Ready(stockade::NetJoined::InTurn), &Blobs::default()).expect("frame");
        assert!(matches!(read_frame(&mut frame.as_slice()), Ok((Msg::Ready(stockade::NetJoined::InTurn), _))));
        frame[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_frame(&mut frame.as_slice()).is_err());
        assert!(slice(b"abc", &Blob { at: 2, len: 2 }).is_err());
        assert!(slice(b"abc", &Blob { at: u64::MAX, len: 2 }).is_err());
    }
}
