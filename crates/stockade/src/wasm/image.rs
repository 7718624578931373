//! A live Python guest's image, in the runner: its interpreter between two turns is only data
//! (its one linear memory; its globals and tables are as a fresh instance has them between calls,
//! and its host resources are the ones its first turn makes), so hibernating it writes the pages
//! of that memory it changed, and resuming it gives a fresh instance of the same component those
//! pages back.
//!
//! The image (`dump`): the pages of the memory that are this process's own (written since the
//! instance was made: anonymous in `/proc/self/pagemap`, or swapped), run after run, page-aligned
//! from the file's start; then a trailer (JSON: the memory's size, the runs, the guest's clock,
//! the resources it holds), its length and a magic. Pages it only read are the artifact's, and
//! pages it never touched are zero: neither is written. It goes out on a pipe (the jail writes
//! no file of the host's, and no file-size limit bounds it), after its length as 8 bytes (0: no
//! image comes); the supervisor writes the file.
//!
//! Resuming (`restore`): a fresh instance whose first turn made the same resources, in the same
//! order, as the hibernated one's did (the guest's prologue: `/app`, then stdout, then stderr),
//! its memory grown to at least the image's size; every page of it is given back its mapping's
//! own bytes (`MADV_DONTNEED`: the artifact's, or zero), then the image's runs are mapped over it
//! copy-on-write (`MAP_PRIVATE | MAP_FIXED`; short runs are read in): nothing is copied that the
//! guest does not touch.
//!
//! Imports: pages.rs; never any other file of `crates/stockade/src/wasm/`.

use super::pages::{Memory, PAGE};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, BorrowedFd};

/// The image's last 8 bytes.
const MAGIC: &[u8; 8] = b"stkimg01";

/// Runs this long or longer are mapped from the image; shorter ones are read into the memory (a
/// mapping each would split the memory's mapping into many).
const MAP_AT_LEAST: usize = 16;

/// The most a trailer may take (a run is a few bytes: far more than any memory has).
const TRAILER_MAX_BYTES: u64 = 64 << 20;

/// What an image says of itself, after its pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Trailer {
    /// The linear memory's size when it was written.
    pub memory_bytes: usize,
    /// Its runs of pages: first page, pages; in the file in this order, from offset 0.
    pub runs: Vec<(usize, usize)>,
    /// The guest's monotonic clock when it was written, in nanoseconds.
    pub clock_ns: u64,
    /// The host resources the guest held (its prologue's): a resumed one must hold as many.
    pub resources: u64,
}

impl Trailer {
    /// The image's pages, all runs together.
    pub fn pages(&self) -> usize {
        self.runs.iter().map(|r| r.1).sum()
    }
}

/// Writes the image of memory `m` (`size` bytes now) to pipe `out`, after its length: its own pages, and those of `mapped` (the runs a resume mapped from its image, which
/// are the image file's until they are written). Returns its trailer and its length.
pub(super) fn dump(
    m: &Memory,
    size: usize,
    out: BorrowedFd<'_>,
    clock_ns: u64,
    resources: u64,
    mapped: &[(usize, usize)],
) -> Result<(Trailer, u64), String> {
    let cannot = |e: std::io::Error| format!("cannot write the interpreter's image: {e}");
    let entries =
        super::pages::page_entries(m.base, size).map_err(|e| format!("cannot read the memory's pages: {e}"))?;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut from_image = mapped.iter().peekable();
    for (i, e) in entries.iter().enumerate() {
        while from_image.next_if(|(first, n)| first + n <= i).is_some() {}
        let in_image = from_image.peek().is_some_and(|(first, _)| *first <= i);
        if !super::pages::own(*e) && !in_image {
            continue;
        }
        match runs.last_mut() {
            Some((first, n)) if *first + *n == i => *n += 1,
            _ => runs.push((i, 1)),
        }
    }
    let trailer = Trailer { memory_bytes: size, runs, clock_ns, resources };
    let json = serde_json::to_vec(&trailer).map_err(|e| format!("cannot write the image's trailer: {e}"))?;
    let mut tail = json;
    tail.extend_from_slice(&(tail.len() as u64).to_le_bytes());
    tail.extend_from_slice(MAGIC);
    let len = (trailer.pages() * PAGE + tail.len()) as u64;
    let mut pipe = std::fs::File::from(out.try_clone_to_owned().map_err(cannot)?);
    use std::io::Write;
    pipe.write_all(&len.to_le_bytes()).map_err(cannot)?;
    for &(first, n) in &trailer.runs {
        crate::sys::write_memory(out, m.base + first * PAGE, n * PAGE).map_err(cannot)?;
    }
    pipe.write_all(&tail).map_err(cannot)?;
    Ok((trailer, len))
}

/// Says on pipe `out` that no image comes (a length of 0).
pub(super) fn none(out: BorrowedFd<'_>) {
    use std::io::Write;
    if let Ok(fd) = out.try_clone_to_owned() {
        let _ = std::fs::File::from(fd).write_all(&0u64.to_le_bytes());
    }
}

/// The trailer of image `image`: `Err` in words when it is not an image (its magic, its trailer's
/// length, its runs against the file's length).
pub(super) fn trailer(image: BorrowedFd<'_>) -> Result<Trailer, String> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::from(image.try_clone_to_owned().map_err(|e| e.to_string())?);
    let bad = |why: &str| format!("the interpreter's image is not one: {why}");
    let len = file.metadata().map_err(|e| bad(&e.to_string()))?.len();
    let mut end = [0u8; 16];
    if len < 16 {
        return Err(bad("too short"));
    }
    file.read_exact_at(&mut end, len - 16).map_err(|e| bad(&e.to_string()))?;
    if &end[8..] != MAGIC {
        return Err(bad("no magic at its end"));
    }
    let n = u64::from_le_bytes(end[..8].try_into().unwrap_or_default());
    if n > TRAILER_MAX_BYTES || n + 16 > len {
        return Err(bad("its trailer's length is out of range"));
    }
    let mut json = vec![0u8; usize::try_from(n).map_err(|_| bad("too long"))?];
    file.read_exact_at(&mut json, len - 16 - n).map_err(|e| bad(&e.to_string()))?;
    let t: Trailer = serde_json::from_slice(&json).map_err(|e| bad(&e.to_string()))?;
    let pages = t.memory_bytes / PAGE;
    let mut next = 0usize;
    for &(first, count) in &t.runs {
        if count == 0 || first < next || first.checked_add(count).is_none_or(|e| e > pages) {
            return Err(bad("its runs are not in order within its memory"));
        }
        next = first + count;
    }
    if (t.pages() * PAGE) as u64 + n + 16 != len {
        return Err(bad("its pages do not fill it"));
    }
    Ok(t)
}

/// Gives memory `m` (`size` bytes now, at least the image's) the bytes of image `image` (its
/// trailer `t`): every page back to its mapping's own, then the image's runs over them. Returns
/// the runs it mapped (their pages are the image file's, not the process's own, until written:
/// the next image must hold them too).
pub(super) fn restore(
    m: &Memory,
    size: usize,
    image: BorrowedFd<'_>,
    t: &Trailer,
) -> Result<Vec<(usize, usize)>, String> {
    if size < t.memory_bytes {
        return Err(format!(
            "the resumed interpreter's memory is {size} bytes, less than its image's {}",
            t.memory_bytes
        ));
    }
    let cannot = |e: std::io::Error| format!("cannot give the interpreter its image: {e}");
    crate::sys::discard(m.base, size).map_err(cannot)?;
    let mut at = 0u64;
    let mut mapped = Vec::new();
    for &(first, n) in &t.runs {
        let (addr, len) = (m.base + first * PAGE, n * PAGE);
        if n >= MAP_AT_LEAST {
            crate::sys::map_over(image.as_fd(), at, addr, len).map_err(cannot)?;
            mapped.push((first, n));
        } else {
            crate::sys::read_into_memory(image.as_fd(), at, addr, len).map_err(cannot)?;
        }
        at += len as u64;
    }
    Ok(mapped)
}

/// The monotonic clock of a live guest: on from where its image's stopped (0 for a fresh one).
#[derive(Debug, Clone, Copy)]
pub(super) struct Resumed {
    pub(super) from_ns: u64,
    pub(super) since: std::time::Instant,
}

impl wasmtime_wasi::HostMonotonicClock for Resumed {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.from_ns.saturating_add(u64::try_from(self.since.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}
