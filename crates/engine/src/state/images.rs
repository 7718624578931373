//! A live interpreter's images in the state directory. Its jail sends its image on a pipe (the
//! jail writes no file of the host's, and its file-size limit holds); the server writes it into a
//! new file of the session's blobs ([`StateDir::new_image`], [`receive`]), hashing it as it comes,
//! and names it by that hash once it is whole ([`StateDir::keep_image`]). A blob's hash is checked
//! before it is given to a jail ([`StateDir::open_image`]); a blob this process wrote and hashed
//! itself, whose inode, size and times are unchanged since, is not read again (so a resume does
//! not read a GiB it maps lazily).

use super::{BLOBS, Hash, StateDir, TMP, changed, hex, random16};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What a blob's file was when this process last hashed it: a later change of its bytes
/// changes its ctime (which no one sets by hand), a rewrite its inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    fn of(m: &fs::Metadata) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        }
    }
}

/// An image being written into session's blobs (a write in flight until it is kept: its name
/// goes with it otherwise).
#[derive(Debug)]
pub struct ImageFile {
    pub file: File,
    path: PathBuf,
}

impl Drop for ImageFile {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// How much of an image is read at a time to hash or copy it.
const CHUNK: usize = 1 << 20;

impl StateDir {
    /// A new file, among session `id`'s blobs, for an image.
    pub fn new_image(&self, id: &str) -> io::Result<ImageFile> {
        let path = self.session(id).join(BLOBS).join(format!("{TMP}image-{}", hex(&random16())));
        let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
        Ok(ImageFile { file, path })
    }

    /// Makes image `f` (received whole, its hash `hash`) a blob of session `id`: flushed when
    /// `sync`, renamed under its hash, its directory flushed.
    pub fn keep_image(&self, id: &str, mut f: ImageFile, hash: &Hash, sync: bool) -> io::Result<()> {
        if sync {
            f.file.sync_all()?;
        }
        let blobs = self.session(id).join(BLOBS);
        fs::rename(&f.path, blobs.join(hex(hash)))?;
        // Renamed away: its drop has no name to remove.
        f.path = PathBuf::new();
        self.trust(id, hash, &f.file)?;
        File::open(&blobs)?.sync_all()
    }

    /// Session `id`'s image `hash`, which must be `len` bytes, opened read-only for a jail to
    /// resume from. `Err(InvalidData)` when the file holds other bytes (it was changed on disk).
    pub fn open_image(&self, id: &str, hash: &Hash, len: u64) -> io::Result<File> {
        let path = self.session(id).join(BLOBS).join(hex(hash));
        let f = File::open(&path)?;
        let meta = f.metadata()?;
        if meta.len() != len {
            return Err(changed(&path));
        }
        let known = self.stamps().get(&(id.to_string(), *hash)).copied();
        if known == Some(Stamp::of(&meta)) {
            return Ok(f);
        }
        if hash_file(&f)? != (*hash, len) {
            return Err(changed(&path));
        }
        self.trust(id, hash, &f)?;
        Ok(f)
    }

    /// Removes session `id`'s blob `hash` (an image it no longer names).
    pub fn drop_blob(&self, id: &str, hash: &Hash) {
        self.stamps().remove(&(id.to_string(), *hash));
        let _ = fs::remove_file(self.session(id).join(BLOBS).join(hex(hash)));
    }

    fn trust(&self, id: &str, hash: &Hash, f: &File) -> io::Result<()> {
        let stamp = Stamp::of(&f.metadata()?);
        self.stamps().insert((id.to_string(), *hash), stamp);
        Ok(())
    }

    /// Forgets what this process hashed of session `id`'s blobs (it ended).
    pub(super) fn forget(&self, id: &str) {
        self.stamps().retain(|(of, _), _| of != id);
    }
}

/// The BLAKE3 hash and size of `f`'s bytes.
fn hash_file(f: &File) -> io::Result<(Hash, u64)> {
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    loop {
        let n = match f.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok((h.finalize().into(), at))
}

/// Receives an image from a jail's `pipe` into `into`: its length (8 bytes; 0: none comes), then
/// that many bytes, hashed as they come (on a thread of its own, beside the copy: the two take
/// about as long). `Ok(None)`: none came. `Err` for a length over `max`, an end before the
/// image's, or `stop` set while it waits (the jail will send nothing more).
pub fn receive(pipe: &File, into: &mut File, max: u64, stop: &AtomicBool) -> io::Result<Option<(Hash, u64)>> {
    let mut len = [0u8; 8];
    read_exact(pipe, &mut len, stop)?;
    let len = u64::from_le_bytes(len);
    if len == 0 {
        return Ok(None);
    }
    if len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("an image of {len} bytes, over {max}")));
    }
    // Buffers go to the hasher and come back: at most DEPTH of them in flight.
    const DEPTH: usize = 4;
    let (to_hash, hashing) = std::sync::mpsc::sync_channel::<(Vec<u8>, usize)>(DEPTH);
    let (to_fill, filling) = std::sync::mpsc::sync_channel::<Vec<u8>>(DEPTH);
    for _ in 0..DEPTH {
        let _ = to_fill.send(vec![0u8; CHUNK]);
    }
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut h = blake3::Hasher::new();
            for (buf, n) in hashing {
                h.update(&buf[..n]);
                let _ = to_fill.send(buf);
            }
            blake3::Hash::into(h.finalize())
        });
        let copied = (|| {
            let mut left = len;
            while left > 0 {
                let mut buf = filling.recv().map_err(|_| io::Error::other("the image's hasher ended"))?;
                let n = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
                read_exact(pipe, &mut buf[..n], stop)?;
                into.write_all(&buf[..n])?;
                to_hash.send((buf, n)).map_err(|_| io::Error::other("the image's hasher ended"))?;
                left -= n as u64;
            }
            Ok::<(), io::Error>(())
        })();
        drop(to_hash);
        let hash: Hash = hasher.join().map_err(|_| io::Error::other("the image's hasher panicked"))?;
        copied.map(|()| Some((hash, len)))
    })
}

/// Fills `buf` from `pipe`, waiting for it at most 100 ms at a time while `stop` is not set.
fn read_exact(mut pipe: &File, buf: &mut [u8], stop: &AtomicBool) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut done = 0;
    while done < buf.len() {
        let mut fds = [PollFd::new(&pipe, PollFlags::IN)];
        let wait = Timespec { tv_sec: 0, tv_nsec: i64::try_from(Duration::from_millis(100).as_nanos()).unwrap_or(0) };
        match poll(&mut fds, Some(&wait)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {
                if stop.load(Ordering::SeqCst) {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "no more of the image will come"));
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        match pipe.read(&mut buf[done..]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the jail ended before its image")),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted || e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
