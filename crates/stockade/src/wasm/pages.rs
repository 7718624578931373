//! The pages of the Python guest's linear memory that a run writes, and those it only reads,
//! learned once when the guest is installed, and faulted in by each warm runner before its code
//! comes.
//!
//! A served Python jail's runner is a copy of the spawner, and so is its instance of the guest
//! (see `preload.rs`): its linear memory is the spawner's, shared copy-on-write. Every page a run
//! writes is copied at its first write, one fault each, inside the run's time. A warm runner asks
//! the kernel for its own copies of the pages a run of `print(1)` writes (about 200 of 3,150)
//! while it waits, with one `MADV_POPULATE_WRITE` per range: the same copies, made before the run
//! instead of in it, and in one call per range instead of one fault per page. Pages a run writes
//! beyond those are copied as before; a page copied for a run that does not write it costs its
//! copy (4 KiB of the jail's memory) and nothing else: no byte changes.
//!
//! The pages a run only reads are the image's (the artifact's file, in the page cache) or zeros:
//! a copy of the spawner maps none of them (a fork copies no page-table entry of a file's
//! mapping that no process wrote, and the spawner never touches its fresh instance's memory), so
//! each first read in a run was a fault too. The runner maps
//! those ahead with one `MADV_POPULATE_READ` per range: nothing is copied, and nothing changes.
//!
//! The list is learned by the runner itself, outside any jail, at `stockade guest install`: the
//! guest's memory is read before and after one run of `print(1)` as a served run makes it, and the
//! pages it wrote (a line `N` each) and those it only read (`r N`) are listed beside the
//! component, with the component's checksum and the memory's size. A list of another component,
//! or for a memory of another size, is not used.
//!
//! Imports: guests.rs; never any other file of `crates/stockade/src/wasm/`.

use crate::sys::Mapping;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// 4 KiB: the kernel's page on the hosts stockade runs on (x86_64).
pub(super) const PAGE: usize = 4096;

/// What a list's first line starts with; `component-sha256=HEX memory-bytes=N` follow. It still
/// says "writes", as the lists of installs before the read pages (`r N` lines) were added did:
/// those lists stay valid.
const HEADER: &str = "# stockade: the pages of the Python guest's linear memory a run writes;";

/// The code whose run is learned (as the bench's and most agents' first run).
pub const LEARNED_CODE: &str = "print(1)";

/// A linear memory in this process: where it starts, its image's own mapping (start, end), and
/// where in the artifact that mapping starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Memory {
    pub(super) base: usize,
    image: (usize, usize),
    offset: u64,
}

impl Memory {
    /// The linear memory at `base` (a core module's, found by its instance: no image of an
    /// artifact's is looked for).
    pub(super) fn at(base: usize) -> Memory {
        Memory { base, image: (0, 0), offset: 0 }
    }
}

/// Where the linear memory of `size` bytes whose copy-on-write image is mapped from the artifact
/// `file` (its device and inode) lies in this process: the run of private writable mappings
/// around one of the artifact's own writable mappings, exactly `size` bytes long (Wasmtime keeps
/// guard regions, never writable, on both sides). `Err` names the artifact when there is none.
pub(super) fn linear_memory(artifact: &Path, file: (u64, u64), size: usize) -> Result<Memory, String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("cannot read /proc/self/maps: {e}"))?;
    let rows: Vec<Mapping> = maps.lines().filter_map(Mapping::of).collect();
    let writable = |m: &Mapping| m.read && m.write && !m.exec && m.private;
    // As the kernel writes a device (`%02x:%02x`).
    let device = format!("{:02x}:{:02x}", libc::major(file.0), libc::minor(file.0));
    let found =
        rows.iter().enumerate().filter(|(_, m)| writable(m) && m.device == device && m.inode == file.1).find_map(
            |(i, m)| {
                let mut start = i;
                while start > 0 && writable(&rows[start - 1]) && rows[start - 1].end == rows[start].start {
                    start -= 1;
                }
                let mut end = i;
                while end + 1 < rows.len() && writable(&rows[end + 1]) && rows[end + 1].start == rows[end].end {
                    end += 1;
                }
                (rows[end].end - rows[start].start == size).then_some(Memory {
                    base: rows[start].start,
                    image: (m.start, m.end),
                    offset: m.offset,
                })
            },
        );
    found.ok_or_else(|| format!("no linear memory of {size} bytes is mapped from {}", artifact.display()))
}

/// Each page's entry in this process's /proc/self/pagemap, for the `size` bytes at `base`.
pub(super) fn page_entries(base: usize, size: usize) -> std::io::Result<Vec<u64>> {
    let mut entries = vec![0u8; size / PAGE * 8];
    std::fs::File::open("/proc/self/pagemap")?.read_exact_at(&mut entries, (base / PAGE * 8) as u64)?;
    Ok(entries.chunks_exact(8).map(|e| u64::from_le_bytes(e.try_into().unwrap_or_default())).collect())
}

/// This process's `size` bytes at `base`, read through /proc/self/mem (which maps every page
/// it reads in this process).
fn read_memory(base: usize, size: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; size];
    std::fs::File::open("/proc/self/mem")?.read_exact_at(&mut bytes, base as u64)?;
    Ok(bytes)
}

/// The bytes of memory `m` (`size` bytes; `entries`: its pagemap now) as they are, read without
/// mapping a page that is not mapped yet: a mapped (or swapped) page through /proc/self/mem, an
/// image's page from the artifact (`artifact`, its device and inode `file`), any other page zero
/// (anonymous memory never touched). `Err` in words, naming the file.
fn memory_as_is(
    m: &Memory,
    size: usize,
    entries: &[u64],
    artifact: &Path,
    file: (u64, u64),
) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::MetadataExt;
    let mem = std::fs::File::open("/proc/self/mem").map_err(|e| format!("cannot open /proc/self/mem: {e}"))?;
    let at = |offset: u64, e: std::io::Error| format!("cannot read {} at {offset}: {e}", artifact.display());
    let image = std::fs::File::open(artifact).map_err(|e| at(0, e))?;
    let meta = image.metadata().map_err(|e| at(0, e))?;
    if (meta.dev(), meta.ino()) != file {
        return Err(format!("{} is not the artifact this process mapped (it was replaced)", artifact.display()));
    }
    let mut bytes = vec![0u8; size];
    for (i, page) in bytes.chunks_mut(PAGE).enumerate() {
        let addr = m.base + i * PAGE;
        if present(entries[i]) || swapped(entries[i]) {
            mem.read_exact_at(page, addr as u64)
                .map_err(|e| format!("cannot read /proc/self/mem at {addr:#x}: {e}"))?;
        } else if (m.image.0..m.image.1).contains(&addr) {
            let offset = m.offset + (addr - m.image.0) as u64;
            image.read_exact_at(page, offset).map_err(|e| at(offset, e))?;
        }
    }
    Ok(bytes)
}

/// A pagemap entry's page: present, and anonymous (not the file's page): a page of the image
/// that was written.
fn anonymous(entry: u64) -> bool {
    present(entry) && entry & (1 << 61) == 0
}

/// A pagemap entry's page is this process's own: written here (anonymous) or swapped out.
pub(super) fn own(entry: u64) -> bool {
    anonymous(entry) || swapped(entry)
}

/// A pagemap entry's page is present (mapped in this process).
fn present(entry: u64) -> bool {
    entry & (1 << 63) != 0
}

/// A pagemap entry's page is swapped out (a private page written, then swapped).
fn swapped(entry: u64) -> bool {
    entry & (1 << 62) != 0
}

/// Runs `run` and writes to `out` the pages of the linear memory of `size` bytes, its image the
/// artifact `file` (device, inode), that it wrote, as far as this process can tell: the pages
/// whose bytes it changed, and the pages of the image it made its own (a page written back to
/// what it was, such as an object's reference count taken and given back, is copied all the
/// same), each on a line of its own; then the pages it only read (mapped in this process after
/// the run; the memory before it is read without mapping any page), each as `r N`. The list's
/// first line is `memory-bytes=N`. Returns what `run` returned.
pub(super) fn learn<T>(
    artifact: &Path,
    file: (u64, u64),
    size: usize,
    out: &Path,
    run: impl FnOnce() -> T,
) -> Result<T, String> {
    let m = linear_memory(artifact, file, size)?;
    let cannot = |e: std::io::Error| format!("cannot read the guest's memory: {e}");
    let was = page_entries(m.base, size).map_err(cannot)?;
    let before = memory_as_is(&m, size, &was, artifact, file)?;
    let result = run();
    let is = page_entries(m.base, size).map_err(cannot)?;
    let after = read_memory(m.base, size).map_err(cannot)?;
    let in_image = |i: usize| (m.image.0..m.image.1).contains(&(m.base + i * PAGE));
    let mut text = format!("memory-bytes={size}\n");
    for (i, (a, b)) in after.chunks(PAGE).zip(before.chunks(PAGE)).enumerate() {
        if a != b || (in_image(i) && anonymous(is[i]) && !anonymous(was[i])) {
            text.push_str(&format!("{i}\n"));
        } else if present(is[i]) {
            text.push_str(&format!("r {i}\n"));
        }
    }
    std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(result)
}

/// The pages a list names: those a run writes, and those it only reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pages {
    pub written: Vec<usize>,
    pub read: Vec<usize>,
}

/// The list of a learned run (`learned`: what [`learn`] wrote) as kept beside the component of
/// checksum `component`: its header, then the pages. `Err` in words when it is not such a list.
pub fn keep(learned: &str, component: &str) -> Result<(String, Pages), String> {
    let mut lines = learned.lines();
    let size: usize = lines
        .next()
        .and_then(|l| l.strip_prefix("memory-bytes="))
        .and_then(|n| n.parse().ok())
        .ok_or("the run's list has no memory size")?;
    let mut text = format!("{HEADER} component-sha256={component} memory-bytes={size}\n");
    let pages = parse_pages(lines, size)?;
    for p in &pages.written {
        text.push_str(&format!("{p}\n"));
    }
    for p in &pages.read {
        text.push_str(&format!("r {p}\n"));
    }
    Ok((text, pages))
}

/// The pages of a list's lines (`N` written, `r N` only read), each below `size`'s last page,
/// sorted and without repeats; a page both written and read is a written one.
fn parse_pages<'a>(lines: impl Iterator<Item = &'a str>, size: usize) -> Result<Pages, String> {
    let mut pages = Pages::default();
    for l in lines {
        let (list, n) = match l.strip_prefix("r ") {
            Some(n) => (&mut pages.read, n),
            None => (&mut pages.written, l),
        };
        match n.parse::<usize>() {
            Ok(p) if p < size / PAGE => list.push(p),
            _ => return Err(format!("{l:?} is not a page of a memory of {size} bytes")),
        }
    }
    for list in [&mut pages.written, &mut pages.read] {
        list.sort_unstable();
        list.dedup();
    }
    let written = &pages.written;
    pages.read.retain(|p| written.binary_search(p).is_err());
    Ok(pages)
}

/// The pages a kept list (`text`) names, when it was learned on the component of checksum
/// `component` with a memory of `size` bytes; `Err` in words otherwise.
fn pages_for(text: &str, component: &str, size: usize) -> Result<Pages, String> {
    let mut lines = text.lines();
    let header = lines.next().and_then(|l| l.strip_prefix(HEADER)).unwrap_or_default();
    if header != format!(" component-sha256={component} memory-bytes={size}") {
        return Err(format!("it is not a list for this component ({component}) and its memory of {size} bytes"));
    }
    parse_pages(lines, size)
}

/// The pages a kept list (`text`) names, when it was kept for the component of checksum
/// `component` (for a memory of whatever size it says); `Err` in words otherwise.
pub(super) fn listed(text: &str, component: &str) -> Result<Pages, String> {
    let size = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix(HEADER)?.strip_prefix(&format!(" component-sha256={component} memory-bytes=")))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("it is not a list for this component ({component})"))?;
    pages_for(text, component, size)
}

/// The address ranges (start, bytes) of `pages` in the memory at `base`, adjacent pages merged.
fn coalesce(base: usize, pages: &[usize]) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for p in pages {
        let at = base + p * PAGE;
        match ranges.last_mut() {
            Some((start, len)) if *start + *len == at => *len += PAGE,
            _ => ranges.push((at, PAGE)),
        }
    }
    ranges
}

/// The address ranges (start, bytes) a warm runner faults in: writable (its own copies), and
/// readable (mapped, nothing copied).
#[derive(Debug, Clone, Default)]
pub(super) struct Warm {
    pub(super) write: Vec<(usize, usize)>,
    pub(super) read: Vec<(usize, usize)>,
}

/// The ranges to fault in for the list at `list`, in this process's linear memory of `size` bytes
/// mapped from the artifact `file` (device, inode) of the component of checksum `component`.
/// `Err` in words, naming the file, when there is no list (an install by an earlier stockade),
/// one of another component or memory, or no such memory.
pub(super) fn ranges(
    list: &Path,
    component: &str,
    artifact: &Path,
    file: (u64, u64),
    size: usize,
) -> Result<Warm, String> {
    if !list.exists() {
        return Err(format!("{} is missing (`stockade guest install` writes it)", list.display()));
    }
    super::guests::check_owner(list).map_err(|e| e.to_string())?;
    let text = crate::input::read_text(list, 1 << 20, "a list of pages").map_err(|e| e.to_string())?;
    let pages = pages_for(&text, component, size).map_err(|e| format!("{}: {e}", list.display()))?;
    let memory = linear_memory(artifact, file, size)?;
    Ok(Warm { write: coalesce(memory.base, &pages.written), read: coalesce(memory.base, &pages.read) })
}

/// Whether this kernel has `MADV_POPULATE_WRITE` and `MADV_POPULATE_READ` (Linux 5.14).
pub(super) fn kernel_populates() -> bool {
    crate::host::kernel_at_least(&crate::host::kernel_release(), 5, 14)
}

/// Faults `warm`'s ranges in in this process: the written ones writable, each page a private copy
/// now; then the read ones, mapped. Every byte is left as it is. Each kind stops at the first
/// range the kernel refuses: the rest fault as the run touches them.
pub(super) fn fault_in(warm: &Warm) {
    for (ranges, write) in [(&warm.write, true), (&warm.read, false)] {
        for &(start, len) in ranges {
            if crate::sys::populate(start, len, write).is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learned_list_is_kept_with_its_component_and_read_back_only_for_it() {
        let size = 8 * PAGE;
        let (kept, n) = keep("memory-bytes=32768\n5\n1\nr 3\n2\nr 0\n5\nr 2\n", "abc").expect("a list");
        let want = Pages { written: vec![1, 2, 5], read: vec![0, 3] };
        assert_eq!(n, want);
        assert!(kept.ends_with("\n1\n2\n5\nr 0\nr 3\n"), "{kept}");
        assert_eq!(pages_for(&kept, "abc", size), Ok(want.clone()));
        assert_eq!((listed(&kept, "abc"), listed(&kept, "abd").is_err()), (Ok(want), true));
        assert_eq!(coalesce(0x10000, &[1, 2, 5]), vec![(0x11000, 2 * PAGE), (0x15000, PAGE)]);
        let e = pages_for(&kept, "def", size).expect_err("another component's");
        assert!(e.contains("not a list for this component (def) and its memory of 32768 bytes"), "{e}");
        assert!(pages_for(&kept, "abc", 16 * PAGE).is_err(), "another memory size's");
        let e = keep("memory-bytes=32768\n1\n8\n", "abc").expect_err("a page past the memory");
        assert!(e.contains("\"8\" is not a page of a memory of 32768 bytes"), "{e}");
        let e = keep("memory-bytes=32768\nr 8\n", "abc").expect_err("a read page past the memory");
        assert!(e.contains("\"r 8\" is not a page"), "{e}");
        assert!(keep("memory-bytes=32768\nw 1\n", "abc").is_err(), "a line of no kind");
        assert!(keep("1\n2\n", "abc").is_err(), "a run's list without its size");
    }
}
