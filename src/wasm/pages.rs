//! The pages of the Python guest's linear memory that a run writes, learned once when the guest
//! is installed, and faulted in by each warm runner before its code comes.
//!
//! A served Python jail's runner is a copy of the spawner, and so is its instance of the guest
//! (see `preload.rs`): its linear memory is the spawner's, shared copy-on-write. Every page a run
//! writes is copied at its first write, one fault each, and those faults were part of every
//! run's time once its code had come. A warm runner now asks the kernel for its own copies of the
//! pages a run of `print(1)` writes (about 150 of 3,150) while it waits, with one
//! `MADV_POPULATE_WRITE` per range: the same copies, made before the run instead of in it, and
//! made in one call per range instead of one fault per page. Pages a run writes beyond those are
//! copied as before; a page copied for a run that does not write it costs its copy and nothing
//! else (no byte changes).
//!
//! The list is learned by the runner itself, outside any jail, at `stockade guest install`: the
//! guest's memory is read before and after one run of `print(1)`, framed on stdin as a served
//! run's code is, and the pages whose bytes changed are written beside the component. A list of
//! another build, or for a memory of another size, is not used.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// 4 KiB: the kernel's page on the hosts stockade runs on (x86_64).
const PAGE: usize = 4096;

/// The first line of a list, with the size of the memory it was learned on.
const HEADER: &str = "# stockade: pages of the Python guest's linear memory a run of print(1) wrote; memory bytes ";

/// The code whose run is learned (as the bench's and most agents' first run).
pub const LEARNED_CODE: &str = "print(1)";

/// Where a linear memory of `size` bytes whose copy-on-write image is mapped from the artifact
/// with inode `ino` lies in this process: its start, and the image's own mapping (start, end).
/// The memory is the run of private writable mappings around the artifact's own writable
/// mapping, which must be exactly `size` bytes long (Wasmtime keeps guard regions, never
/// writable, on both sides). `None` when there is no such run: the image is not mapped from the
/// artifact, or the run's length is not the memory's.
pub(super) fn linear_memory(ino: u64, size: usize) -> Option<(usize, (usize, usize))> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let rows: Vec<(usize, usize, bool, u64)> = maps.lines().filter_map(map_row).collect();
    let i = rows.iter().position(|r| r.2 && r.3 == ino)?;
    let mut start = i;
    while start > 0 && rows[start - 1].2 && rows[start - 1].1 == rows[start].0 {
        start -= 1;
    }
    let mut end = i;
    while end + 1 < rows.len() && rows[end + 1].2 && rows[end + 1].0 == rows[end].1 {
        end += 1;
    }
    (rows[end].1 - rows[start].0 == size).then_some((rows[start].0, (rows[i].0, rows[i].1)))
}

/// One line of /proc/self/maps: start, end, whether private and writable (`rw-p`), inode.
fn map_row(line: &str) -> Option<(usize, usize, bool, u64)> {
    let mut f = line.split_whitespace();
    let (a, b) = f.next()?.split_once('-')?;
    let perms = f.next()?;
    let (_offset, _device) = (f.next()?, f.next()?);
    let inode = f.next()?.parse().ok()?;
    Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?, perms == "rw-p", inode))
}

/// This process's `size` bytes at `base`, read through /proc/self/mem, and each page's entry
/// in /proc/self/pagemap.
fn read_memory(base: usize, size: usize) -> std::io::Result<(Vec<u8>, Vec<u64>)> {
    let mut f = std::fs::File::open("/proc/self/mem")?;
    f.seek(SeekFrom::Start(base as u64))?;
    let mut bytes = vec![0u8; size];
    f.read_exact(&mut bytes)?;
    let mut f = std::fs::File::open("/proc/self/pagemap")?;
    f.seek(SeekFrom::Start((base / PAGE * 8) as u64))?;
    let mut entries = vec![0u8; size / PAGE * 8];
    f.read_exact(&mut entries)?;
    let entries = entries.chunks_exact(8).map(|e| u64::from_le_bytes(e.try_into().unwrap_or_default())).collect();
    Ok((bytes, entries))
}

/// A pagemap entry's page: present, and anonymous (not the file's page): a page of the image
/// that was written.
fn anonymous(entry: u64) -> bool {
    entry & (1 << 63) != 0 && entry & (1 << 61) == 0
}

/// Runs `run` and writes to `out` the list of the pages of the linear memory (`size` bytes, its
/// image the artifact with inode `ino`) it wrote, as far as this process can tell: the pages
/// whose bytes it changed, and the pages of the image it made its own (a page written back to
/// what it was, such as an object's reference count taken and given back, is copied all the
/// same). Returns what `run` returned.
pub(super) fn learn<T>(ino: u64, size: usize, out: &Path, run: impl FnOnce() -> T) -> Result<T, String> {
    let (base, image) = linear_memory(ino, size).ok_or("the guest's linear memory is not mapped from its artifact")?;
    let cannot = |e: std::io::Error| format!("cannot read the guest's memory: {e}");
    let (before, was) = read_memory(base, size).map_err(cannot)?;
    let result = run();
    let (after, is) = read_memory(base, size).map_err(cannot)?;
    let in_image = |i: usize| (image.0..image.1).contains(&(base + i * PAGE));
    let mut text = format!("{HEADER}{size}\n");
    for (i, (a, b)) in after.chunks(PAGE).zip(before.chunks(PAGE)).enumerate() {
        let made_own = in_image(i) && anonymous(is[i]) && !anonymous(was[i]);
        if a != b || made_own {
            text.push_str(&format!("{i}\n"));
        }
    }
    std::fs::write(out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    Ok(result)
}

/// The ranges (start address, bytes) to fault in for the list at `path`, in a linear memory of
/// `size` bytes whose image is the artifact with inode `ino`, in this process. `Err` in words
/// when there is no list (an install by an earlier stockade) or one this memory cannot use.
pub(super) fn ranges(path: &Path, ino: u64, size: usize) -> Result<Vec<(usize, usize)>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{} is missing (`stockade guest install` writes it)", path.display()));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    super::guests::check_owner(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines();
    let learned_on = lines.next().and_then(|l| l.strip_prefix(HEADER)).and_then(|s| s.parse::<usize>().ok());
    if learned_on != Some(size) {
        return Err(format!("{} is not a list for this guest's memory of {size} bytes", path.display()));
    }
    let mut pages = Vec::new();
    for l in lines {
        match l.parse::<usize>() {
            Ok(p) if p < size / PAGE => pages.push(p),
            _ => return Err(format!("{}: {l:?} is not a page of the memory", path.display())),
        }
    }
    pages.sort_unstable();
    pages.dedup();
    let (base, _) = linear_memory(ino, size).ok_or("the guest's linear memory is not mapped from its artifact")?;
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for p in pages {
        let at = base + p * PAGE;
        match ranges.last_mut() {
            Some((start, len)) if *start + *len == at => *len += PAGE,
            _ => ranges.push((at, PAGE)),
        }
    }
    Ok(ranges)
}

/// Faults `ranges` in writable in this process (each a private copy now), leaving every byte as
/// it is. A range the kernel refuses is left to fault as the run writes it.
pub(super) fn fault_in(ranges: &[(usize, usize)]) {
    for &(start, len) in ranges {
        let _ = crate::sys::populate_write(start, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_line_is_read_and_a_foreign_one_is_not() {
        let l = "7f2c454f0000-7f2c46040000 rw-p 01396000 fe:00 5350538    /g/python314.cwasm";
        assert_eq!(map_row(l), Some((0x7f2c454f0000, 0x7f2c46040000, true, 5350538)));
        let guard = "7f2c46050000-7f2d47400000 ---p 00000000 00:00 0";
        assert_eq!(map_row(guard), Some((0x7f2c46050000, 0x7f2d47400000, false, 0)));
        assert_eq!(map_row("not a mapping"), None);
    }

    #[test]
    fn a_missing_list_one_of_another_memory_or_with_a_page_outside_it_is_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let list = dir.path().join("g.pages");
        let e = ranges(&list, 1, 8 * PAGE).expect_err("no list");
        assert!(e.contains("g.pages is missing (`stockade guest install` writes it)"), "{e}");
        std::fs::write(&list, format!("{HEADER}{}\n1\n2\n", 16 * PAGE)).expect("write");
        let e = ranges(&list, 1, 8 * PAGE).expect_err("another memory's list");
        assert!(e.contains("not a list for this guest's memory of 32768 bytes"), "{e}");
        std::fs::write(&list, format!("{HEADER}{}\n1\n8\n", 8 * PAGE)).expect("write");
        let e = ranges(&list, 1, 8 * PAGE).expect_err("a page past the memory");
        assert!(e.contains("\"8\" is not a page of the memory"), "{e}");
        std::fs::write(&list, "1\n2\n").expect("write");
        assert!(ranges(&list, 1, 8 * PAGE).is_err(), "a list without its header");
    }
}
