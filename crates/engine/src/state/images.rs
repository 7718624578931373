//! A live interpreter's images in the state directory. Its jail writes its image into a file of
//! its session's directory (`.tmp-image-…`, [`StateDir::image_out`]) that the jail holds open for
//! its life; once written, the image becomes a blob like any other: hashed, flushed, and moved
//! under its hash (the jail ended: [`StateDir::keep_image`]) or copied there (the jail goes on: a
//! fork's, [`StateDir::copy_image`]). A blob's hash is checked before it is given to a jail
//! ([`StateDir::open_image`]); a blob this process wrote and hashed itself, whose inode, size and
//! times are unchanged since, is not read again (so a resume does not read a GiB it maps lazily).

use super::{BLOBS, Hash, StateDir, TMP, changed, hex, random16};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

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

/// The file a live interpreter's jail writes its images into, in its session's directory.
#[derive(Debug)]
pub struct ImageOut {
    pub file: File,
    path: PathBuf,
}

impl Drop for ImageOut {
    /// Its name goes with it (a kept image was renamed away first).
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// How much of an image is read at a time to hash or copy it.
const CHUNK: usize = 1 << 20;

impl StateDir {
    /// A new file, read and write, for the images of a live interpreter of session `id`.
    pub fn image_out(&self, id: &str) -> io::Result<ImageOut> {
        let path = self.session(id).join(format!("{TMP}image-{}", hex(&random16())));
        let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
        Ok(ImageOut { file, path })
    }

    /// Makes the image `out` holds (its jail ended: nothing writes it again) a blob of session
    /// `id`: hashed, flushed and renamed under its hash. Returns its hash and size.
    pub fn keep_image(&self, id: &str, mut out: ImageOut) -> io::Result<(Hash, u64)> {
        let (hash, len) = hash_file(&out.file, None)?;
        out.file.sync_all()?;
        let blobs = self.session(id).join(BLOBS);
        let to = blobs.join(hex(&hash));
        fs::rename(&out.path, &to)?;
        // Renamed away: its drop has no name to remove.
        out.path = PathBuf::new();
        self.trust(id, &hash, &out.file)?;
        File::open(&blobs)?.sync_all()?;
        Ok((hash, len))
    }

    /// Copies the image `out` holds (its jail goes on, and writes it again at its next image) as
    /// a blob of session `to`. Returns its hash and size.
    pub fn copy_image(&self, out: &ImageOut, to: &str) -> io::Result<(Hash, u64)> {
        let blobs = self.session(to).join(BLOBS);
        let tmp = blobs.join(format!("{TMP}{}", hex(&random16())));
        let copied = (|| -> io::Result<(Hash, u64)> {
            let mut dst = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
            let (hash, len) = hash_file(&out.file, Some(&mut dst))?;
            dst.sync_all()?;
            let path = blobs.join(hex(&hash));
            fs::rename(&tmp, &path)?;
            self.trust(to, &hash, &File::open(&path)?)?;
            Ok((hash, len))
        })();
        if copied.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        let done = copied?;
        File::open(&blobs)?.sync_all()?;
        Ok(done)
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
        if hash_file(&f, None)? != (*hash, len) {
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

/// The BLAKE3 hash and size of `f`'s bytes, each chunk also written to `copy` when given.
fn hash_file(f: &File, mut copy: Option<&mut File>) -> io::Result<(Hash, u64)> {
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
        if let Some(dst) = copy.as_deref_mut() {
            dst.write_all(&buf[..n])?;
        }
        at += n as u64;
    }
    Ok((h.finalize().into(), at))
}
