//! A process's own code, moved into anonymous huge pages and back (`stockade serve`'s spawner,
//! before it forks the helpers that build jails; a program's helper, after). Each step counts
//! the process's threads first and refuses more than one: the code swapped is the code running.

use super::*;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;

/// The size of a transparent huge page on x86_64 (one PMD entry).
const HUGE_PAGE: usize = 2 << 20;

/// `MADV_COLLAPSE` (Linux 6.1): back the range with transparent huge pages now, or fail.
const MADV_COLLAPSE: c_int = 25;

/// Replaces the mapping `[start, start + len)` of this process with anonymous memory holding the
/// same bytes at the same address, with protection `prot`, in transparent huge pages (the range
/// is whole huge pages). `Ok(false)`: the kernel gives this copy no huge pages (too old for
/// `MADV_COLLAPSE`, no huge page free, none allowed here), and the mapping is left as it was.
/// `Err`: the copy could not be made, and the mapping is left as it was. The process aborts when
/// the kernel fails the swap itself, which may have unmapped the range already.
///
/// A fork copies no page-table entry of a file's mapping that no process wrote, so each copy of a
/// process faults in, 4 KiB or 64 KiB at a time, the code it runs; it copies one entry per
/// anonymous huge page.
///
/// # Safety
///
/// The range must be a readable, private mapping of this process that nothing writes and that
/// nothing will munmap or remap concurrently, and this process must have one thread: code in the
/// range, the calling code included, runs identical bytes before and after the swap, which
/// `mremap` makes in one call.
unsafe fn move_to_huge_pages(start: usize, len: usize, prot: c_int) -> Result<bool, Errno> {
    if !start.is_multiple_of(HUGE_PAGE) || !len.is_multiple_of(HUGE_PAGE) || len == 0 {
        return Err(Errno(libc::EINVAL));
    }
    // SAFETY: a new anonymous mapping at an address of the kernel's choosing: nothing of this
    // process is there.
    let room = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len + HUGE_PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if room == libc::MAP_FAILED {
        return Err(Errno::last());
    }
    let room = room as usize;
    // The copy sits on huge-page boundaries, as the range does, so that `mremap` moves its huge
    // pages whole; the room on either side of it is given back.
    let copy = room.next_multiple_of(HUGE_PAGE);
    let unmap = |at: usize, n: usize| {
        if n > 0 {
            // SAFETY: `[at, at + n)` is a part of `room`, which this function mapped and which
            // nothing else refers to.
            unsafe { libc::munmap(at as *mut libc::c_void, n) };
        }
    };
    unmap(room, copy - room);
    unmap(copy + len, room + len + HUGE_PAGE - (copy + len));
    // SAFETY: `[copy, copy + len)` is this function's own anonymous mapping; madvise only sets
    // how the kernel backs it.
    if unsafe { libc::madvise(copy as *mut libc::c_void, len, libc::MADV_HUGEPAGE) } != 0 {
        unmap(copy, len);
        return Ok(false);
    }
    // SAFETY: the source is a readable mapping of `len` bytes that nothing writes (the caller's
    // promise); the destination is this function's own, writable, of the same length; they do
    // not overlap.
    unsafe { ptr::copy_nonoverlapping(start as *const u8, copy as *mut u8, len) };
    // Huge pages, or no move: in small pages the copy's entries would be copied one by one at
    // every fork, dearer than the faults it saves. MADV_COLLAPSE succeeds only when the whole
    // range is in huge pages (at once when the copy's faults already took them).
    // SAFETY: `[copy, copy + len)` is this function's own mapping; its bytes stay the same.
    if unsafe { libc::madvise(copy as *mut libc::c_void, len, MADV_COLLAPSE) } != 0 {
        unmap(copy, len);
        return Ok(false);
    }
    // SAFETY: `[copy, copy + len)` is this function's own mapping.
    if unsafe { libc::mprotect(copy as *mut libc::c_void, len, prot) } != 0 {
        let e = Errno::last();
        unmap(copy, len);
        return Err(e);
    }
    // The protection is the caller's: the range's own, but for a guest's headers made executable
    // with its code (see `move_edge`).
    // SAFETY: the copy replaces the range with the same bytes; this process has one thread and
    // nothing else uses the range meanwhile (the caller's promise), so the calling thread, in
    // the kernel during the swap, returns to identical instructions.
    let moved = unsafe {
        libc::mremap(
            copy as *mut libc::c_void,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            start as *mut libc::c_void,
        )
    };
    if moved == libc::MAP_FAILED {
        // The kernel unmaps the destination before it moves the copy there: the range may be
        // gone, and code or data of this process with it.
        eprintln!("stockade: cannot swap code into huge pages ({}): aborting", Errno::last());
        std::process::abort();
    }
    Ok(true)
}

/// Maps `len` bytes of `file` from `offset` at `start`, private, with protection `prot`, over
/// what is there (the code [`move_to_huge_pages`] moved, back in its file's mapping). The process
/// aborts when the kernel fails the mapping, which may have unmapped the range already.
///
/// # Safety
///
/// As for [`move_to_huge_pages`]: the range must hold, and keep holding while nothing else uses
/// it, the very bytes the file has there (read-only, never written), and this process must have
/// one thread.
unsafe fn map_file_at(start: usize, len: usize, prot: c_int, file: BorrowedFd<'_>, offset: u64) {
    let Ok(offset) = libc::off_t::try_from(offset) else {
        eprintln!("stockade: cannot map code back from its file: offset {offset} out of range: aborting");
        std::process::abort();
    };
    // SAFETY: the caller's promise: the file holds the range's bytes at `offset`, so the code in
    // the range, the calling code included, runs identical bytes before and after the call.
    let mapped = unsafe {
        libc::mmap(start as *mut libc::c_void, len, prot, libc::MAP_PRIVATE | libc::MAP_FIXED, file.as_raw_fd(), offset)
    };
    if mapped == libc::MAP_FAILED {
        eprintln!("stockade: cannot map code back from its file ({}): aborting", Errno::last());
        std::process::abort();
    }
}

/// Code [`move_code_to_huge_pages`] moved: where, and the file it came from.
struct Moved {
    start: usize,
    len: usize,
    prot: c_int,
    file: OwnedFd,
    offset: u64,
    /// The parts of it that were read-only in the file's mapping (a guest's headers beside its
    /// code, moved in one executable huge page), made so again once it is mapped back.
    read_only: Vec<(usize, usize)>,
}

/// What [`move_code_to_huge_pages`] moved, for [`map_code_back`].
static MOVED: std::sync::Mutex<Vec<Moved>> = std::sync::Mutex::new(Vec::new());

/// How many threads this process has now (`num_threads` of `/proc/self/stat`: one read, where
/// [`threads`] reads a file per thread; asked before each jail a helper builds).
pub fn thread_count() -> std::io::Result<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    num_threads(&stat)
        .ok_or_else(|| std::io::Error::other(format!("cannot read the thread count in /proc/self/stat: {stat}")))
}

/// `num_threads` of a `/proc/<pid>/stat` line: the 20th field, the 18th after the command's
/// closing parenthesis (the command may hold any byte, a parenthesis and spaces too).
fn num_threads(stat: &str) -> Option<usize> {
    stat.rsplit_once(") ")?.1.split(' ').nth(17)?.parse().ok()
}

/// Whether this process has one thread (`Err` in words otherwise): no other thread can be running
/// code while it is swapped, nor mapping or unmapping anything.
fn one_thread(what: &str) -> std::io::Result<()> {
    match thread_count()? {
        1 => Ok(()),
        n => Err(std::io::Error::other(format!("cannot {what}: this process has {n} threads"))),
    }
}

/// Moves the whole huge pages of this process's never-written code mappings (executable ones,
/// and the executable's read-only data) into anonymous huge pages at the same addresses, and then
/// the huge pages at the ends of its executable mappings that hold a guest's headers beside its
/// code; see [`crate::helper::code_in_huge_pages`]. The bytes moved (0 where the kernel
/// gives no 2 MiB transparent huge page to memory that asks). `Err` when this process has more
/// than one thread or its mappings cannot be read; a mapping that cannot be moved (its file not
/// found again, its copy not made) stays where it is.
pub fn move_code_to_huge_pages() -> std::io::Result<usize> {
    let thp = |name: &str| std::fs::read_to_string(format!("/sys/kernel/mm/transparent_hugepage/{name}"));
    let enabled = thp("enabled").unwrap_or_default();
    if !(enabled.contains("[always]") || enabled.contains("[madvise]"))
        || thp("hpage_pmd_size").unwrap_or_default().trim() != HUGE_PAGE.to_string()
    {
        return Ok(0);
    }
    one_thread("move code into huge pages")?;
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    let lines = Mapping::all(&smaps);
    // The executable is the file of the mapping this function's code is in.
    let here = move_code_to_huge_pages as *const () as usize;
    let exe = lines.iter().find(|m| (m.start..m.end).contains(&here)).map(|m| (m.device, m.inode));
    let mut moved = MOVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut bytes = 0;
    for m in &lines {
        let of_exe = exe == Some((m.device, m.inode));
        if !m.holds_its_file() || !(m.exec || of_exe) {
            continue;
        }
        let (Some(start), end) = (m.start.checked_next_multiple_of(HUGE_PAGE), m.end - m.end % HUGE_PAGE) else {
            continue;
        };
        if start >= end {
            continue;
        }
        let Some(file) = m.file(of_exe) else { continue };
        let prot = m.prot();
        // A guest's code is wasmtime's to unmap, with its engine, which lives as long as the process.
        // SAFETY: a private file mapping never written and not written now (code, read-only data),
        // nothing unmaps it meanwhile, and this process has one thread (above).
        match unsafe { move_to_huge_pages(start, end - start, prot) } {
            Ok(true) => {
                let offset = m.offset + (start - m.start) as u64;
                moved.push(Moved { start, len: end - start, prot, file, offset, read_only: Vec::new() });
                bytes += end - start;
            }
            // No huge pages here: the others would get none either.
            Ok(false) => return Ok(bytes),
            // This one stays where it is.
            Err(_) => {}
        }
    }
    for page in edge_pages(&lines) {
        match move_edge(&lines, page, exe, &mut moved) {
            Some(n) => bytes += n,
            // No huge pages here any more.
            None => break,
        }
    }
    Ok(bytes)
}

/// The most of a huge page at an end of an executable mapping that may be something else than
/// code for the page to move: a compiled guest's headers (its first 4 KiB page), which become
/// executable in the copy. A page with anything else (read-only data beside code) stays in its
/// files: mapped with each part's own protection, it would take small page-table entries, which
/// every fork copies one by one (measured: 0.90-0.95x the served runs per second).
const EDGE_HEADERS_MAX: usize = 16 << 10;

/// The huge pages that hold an end of an executable mapping that fills no huge page of its own,
/// which the pages moved whole leave in the file's mapping and each copy of the process would
/// fault in.
fn edge_pages(lines: &[Mapping<'_>]) -> Vec<usize> {
    let mut pages: Vec<usize> = Vec::new();
    for m in lines.iter().filter(|m| m.exec && m.holds_its_file()) {
        for end in [m.start, m.end - 1] {
            let page = end - end % HUGE_PAGE;
            // Moved whole already: the mapping fills it.
            let whole = m.start <= page && page + HUGE_PAGE <= m.end;
            if !whole && !pages.contains(&page) {
                pages.push(page);
            }
        }
    }
    pages
}

/// Moves the huge page at `page` into an anonymous huge page, executable, when one file's
/// never-written mappings fill it wholly, in the file's order (no gap, nothing written, nothing
/// of memory), and all of it is code but the file's headers (its start, [`EDGE_HEADERS_MAX`]
/// bytes at most); the bytes moved, 0 when it stays where it is, `None` when the kernel gives
/// no huge page. It is mapped back whole, and its parts given their own protection
/// again ([`map_code_back`]): a copy that unmapped a part of the huge page alone would leave it
/// partly mapped, which the kernel may split into small pages for every process.
fn move_edge(lines: &[Mapping<'_>], page: usize, exe: Option<(&str, u64)>, moved: &mut Vec<Moved>) -> Option<usize> {
    let end = page + HUGE_PAGE;
    let parts: Vec<&Mapping<'_>> = lines.iter().filter(|m| m.start < end && page < m.end).collect();
    let Some(first) = parts.first() else { return Some(0) };
    // Where `page` is in the file, were the first part's mapping to cover it.
    let Some(offset) = (first.offset + page as u64).checked_sub(first.start as u64) else { return Some(0) };
    let (mut at, mut read_only) = (page, Vec::new());
    for (i, m) in parts.iter().enumerate() {
        let in_order =
            (m.device, m.inode) == (first.device, first.inode) && m.offset + page as u64 == offset + m.start as u64;
        // Headers: what is not code is the file's start, before its code.
        let code_or_headers = m.exec || (i == 0 && m.offset == 0 && m.start == page);
        if m.start > at || !m.holds_its_file() || !in_order || !code_or_headers {
            return Some(0);
        }
        if !m.exec {
            read_only.push((m.start, m.end.min(end) - m.start));
        }
        at = m.end;
    }
    if at < end || read_only.iter().map(|r| r.1).sum::<usize>() > EDGE_HEADERS_MAX {
        return Some(0);
    }
    // The file, to map it back from, found while it is still mapped.
    let here = first.start.max(page)..first.end.min(end);
    let Some(file) = first.file_of(here, exe == Some((first.device, first.inode))) else { return Some(0) };
    let prot = libc::PROT_READ | libc::PROT_EXEC;
    // SAFETY: every part is a private file mapping never written and not written now (code, a
    // guest's headers), nothing unmaps it meanwhile, and this process has one thread (the
    // caller's check).
    match unsafe { move_to_huge_pages(page, HUGE_PAGE, prot) } {
        Ok(true) => {
            moved.push(Moved { start: page, len: HUGE_PAGE, prot, file, offset, read_only });
            Some(HUGE_PAGE)
        }
        Ok(false) => None,
        Err(_) => Some(0),
    }
}

/// Maps the code [`move_code_to_huge_pages`] moved back from its files, in a copy of the process
/// that moved it; see [`crate::helper::code_back_in_files`]. `Err` when this process has more
/// than one thread.
pub fn map_code_back() -> std::io::Result<()> {
    let mut moved = MOVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if moved.is_empty() {
        return Ok(());
    }
    one_thread("map code back")?;
    let moved = std::mem::take(&mut *moved);
    for m in &moved {
        // SAFETY: the range holds the bytes its file has at that offset (they were copied from
        // that very mapping, never written, and no page of it was a private copy); this process
        // has one thread (above).
        unsafe { map_file_at(m.start, m.len, m.prot, m.file.as_fd(), m.offset) };
        for &(start, len) in &m.read_only {
            // SAFETY: `[start, start + len)` is part of the file mapping just made, this
            // process's own; it holds a guest's headers, not code that runs.
            if unsafe { libc::mprotect(start as *mut libc::c_void, len, libc::PROT_READ) } != 0 {
                eprintln!("stockade: cannot make a guest's headers read-only again ({}): aborting", Errno::last());
                std::process::abort();
            }
        }
    }
    Ok(())
}

/// A mapping of `/proc/self/smaps` (or of `/proc/self/maps`, without its figures).
pub struct Mapping<'a> {
    pub start: usize,
    pub end: usize,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    pub private: bool,
    pub offset: u64,
    /// As the kernel writes it (`fe:00`).
    pub device: &'a str,
    pub inode: u64,
    path: &'a str,
    /// Its pages that are private copies (written), in memory and swapped out, kB; `None`: not
    /// said.
    anonymous_kb: Option<u64>,
    swap_kb: Option<u64>,
}

impl<'a> Mapping<'a> {
    /// The mappings of the text of `/proc/<pid>/smaps`. A figure is taken for the mapping whose
    /// first line it follows; after a first line that cannot be read, for none.
    fn all(smaps: &'a str) -> Vec<Mapping<'a>> {
        let mut all: Vec<Mapping<'a>> = Vec::new();
        let mut current = false;
        for line in smaps.lines() {
            let first = line.split(' ').next().unwrap_or_default();
            if !first.ends_with(':') {
                current = Mapping::of(line).map(|m| all.push(m)).is_some();
                continue;
            }
            let (Some(m), true) = (all.last_mut(), current) else { continue };
            let kb = || line[first.len()..].trim().trim_end_matches("kB").trim().parse().ok();
            match first {
                "Anonymous:" => m.anonymous_kb = kb(),
                "Swap:" => m.swap_kb = kb(),
                _ => {}
            }
        }
        all
    }

    /// Readable, private, of a file and never written (no page of it is a private copy, in
    /// memory or swapped out): its file holds its bytes. (What the dynamic loader relocated does
    /// not, and a fork copies its entries anyway.)
    fn holds_its_file(&self) -> bool {
        let unwritten = self.anonymous_kb == Some(0) && self.swap_kb == Some(0);
        self.read && !self.write && self.private && unwritten && self.inode != 0
    }

    /// Its protection, as `mmap` takes it (readable: the mappings moved are).
    fn prot(&self) -> c_int {
        if self.exec { libc::PROT_READ | libc::PROT_EXEC } else { libc::PROT_READ }
    }

    /// The file it maps, to map it back from: the very file mapped (`/proc/self/map_files`, which
    /// needs `CAP_SYS_ADMIN`), or else this process's executable (`exe`: it maps that) or the file
    /// at its path, while that has its inode. `None`: neither.
    fn file(&self, exe: bool) -> Option<OwnedFd> {
        self.file_of(self.start..self.end, exe)
    }

    /// As [`Mapping::file`], for the part of it now mapped at `range` (a mapping the kernel
    /// split when a part of it moved).
    fn file_of(&self, range: std::ops::Range<usize>, exe: bool) -> Option<OwnedFd> {
        let exact = format!("/proc/self/map_files/{:x}-{:x}", range.start, range.end);
        if let Ok(f) = std::fs::File::open(exact) {
            return Some(f.into());
        }
        let f = std::fs::File::open(if exe { "/proc/self/exe" } else { self.path }).ok()?;
        (std::os::unix::fs::MetadataExt::ino(&f.metadata().ok()?) == self.inode).then(|| f.into())
    }

    /// A mapping's first line (as in `/proc/<pid>/maps`).
    pub fn of(line: &'a str) -> Option<Mapping<'a>> {
        let mut fields = line.splitn(6, ' ');
        let (range, perms, offset, device, inode) =
            (fields.next()?, fields.next()?.as_bytes(), fields.next()?, fields.next()?, fields.next()?);
        let (start, end) = range.split_once('-')?;
        Some(Mapping {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            read: perms.first()? == &b'r',
            write: perms.get(1)? == &b'w',
            exec: perms.get(2)? == &b'x',
            private: perms.get(3)? == &b'p',
            offset: u64::from_str_radix(offset, 16).ok()?,
            device,
            inode: inode.parse().ok()?,
            path: fields.next().unwrap_or_default().trim_start(),
            anonymous_kb: None,
            swap_kb: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Mapping, num_threads, thread_count};

    /// The thread count of a process with one thread, whatever its command is called, and of
    /// this one with a thread of its own started.
    #[test]
    fn threads_are_counted_from_the_stat_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let odd = dir.path().join("a) b c) 1 2 3");
        std::os::unix::fs::symlink("/bin/sleep", &odd).expect("symlink");
        let mut child = std::process::Command::new(&odd).arg("5").spawn().expect("sleep");
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).expect("stat");
        let _ = child.kill();
        let _ = child.wait();
        assert!(stat.contains("(a) b c) 1 2 3)"), "{stat}");
        assert_eq!(num_threads(&stat), Some(1), "{stat}");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert!(thread_count().expect("count") >= 2);
        drop(tx);
        let _ = other.join();
    }

    #[test]
    fn a_mapping_line_is_read_and_a_foreign_one_is_not() {
        let m = Mapping::of("7f2c454f0000-7f2c46040000 rw-p 01396000 fe:01 5350538    /g/python314.cwasm")
            .expect("a mapping");
        assert_eq!((m.start, m.end, m.offset), (0x7f2c454f0000, 0x7f2c46040000, 0x01396000));
        assert_eq!((m.read, m.write, m.exec, m.private), (true, true, false, true));
        assert_eq!((m.device, m.inode, m.path), ("fe:01", 5350538, "/g/python314.cwasm"));
        let guard = Mapping::of("7f2c46050000-7f2d47400000 ---p 00000000 00:00 0").expect("a mapping");
        assert!(!guard.read && !guard.write && guard.inode == 0 && guard.path.is_empty());
        assert!(Mapping::of("not a mapping").is_none());
    }
}
