//! The Wasm runner's wrappers (stage 2: a new process after the jail's exec, one thread when it
//! starts).

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// The inherited fds already adopted (bit N: fd N), so none gets two owners.
static ADOPTED: AtomicU64 = AtomicU64::new(0);

/// Takes ownership of `fd`, inherited across the exec (the runner's channels, 3 and 4), if it is
/// open. Only fds 3 to 63 (beyond stdio, which std owns); each at most once per process, so two
/// owners can never close it twice.
pub fn take_inherited_fd(fd: RawFd) -> Option<OwnedFd> {
    let bit = 1u64.checked_shl(u32::try_from(fd).ok()?).filter(|_| fd >= 3)?;
    if ADOPTED.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
        return None;
    }
    if !fd_is_open(fd) {
        return None;
    }
    // SAFETY: the fd is open, was inherited across exec (nothing in this process opened it, and
    // std owns only 0-2), and `ADOPTED` makes this the only owner it will ever have.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Loads a precompiled Wasm artifact (native code, mapped as it is) when it is the very file the
/// supervisor checked: the same device and inode (`expect`, from the supervisor's own `stat` of
/// an artifact it found owned by root or itself and writable by nobody else, in a guest directory
/// the jail sees read-only). Another file at that path is refused.
#[cfg(feature = "wasm")]
pub fn load_artifact(
    engine: &wasmtime::Engine,
    path: &std::path::Path,
    expect: (u64, u64),
) -> wasmtime::Result<wasmtime::Module> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != expect {
        return Err(wasmtime::Error::msg(format!("{} is not the artifact the supervisor checked", path.display())));
    }
    // SAFETY: the file is the artifact the supervisor checked (device and inode above): one this
    // binary compiled for this engine configuration (its name carries the key), which nobody but
    // its installer (or root) could have written; wasmtime checks the version and flags itself.
    unsafe { wasmtime::Module::deserialize_open_file(engine, file) }
}

/// Loads a precompiled Wasm component (the pre-initialized Python guest) under the same rule as
/// [`load_artifact`]: the very file the supervisor checked. Wasmtime maps a component only by
/// path, so the path it is given is the descriptor checked (`/proc/self/fd/N`), never the name.
#[cfg(feature = "wasm")]
pub fn load_component(
    engine: &wasmtime::Engine,
    path: &std::path::Path,
    expect: (u64, u64),
) -> wasmtime::Result<wasmtime::component::Component> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if (meta.dev(), meta.ino()) != expect {
        return Err(wasmtime::Error::msg(format!("{} is not the artifact the supervisor checked", path.display())));
    }
    let by_fd = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if std::fs::metadata(&by_fd).is_ok_and(|m| (m.dev(), m.ino()) == expect) {
        // SAFETY: as in `load_artifact`: the file behind the descriptor is the artifact the
        // supervisor checked (device and inode, twice), one this binary compiled for this engine
        // configuration that nobody but its installer (or root) could have written.
        let component = unsafe { wasmtime::component::Component::deserialize_file(engine, &by_fd) };
        drop(file);
        return component;
    }
    // No /proc in this jail (`filesystem.proc = "none"`): the bytes of the descriptor checked,
    // read into memory (no mapping: slower, the same artifact).
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    std::io::Read::read_to_end(&mut { file }, &mut bytes)?;
    // SAFETY: as above: these are the bytes of the artifact the supervisor checked.
    unsafe { wasmtime::component::Component::deserialize(engine, &bytes) }
}

/// Whether `fd` is open in this process.
pub fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only queries the descriptor.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// This process's peak resident set, bytes (`getrusage(RUSAGE_SELF)`).
pub fn max_rss_bytes() -> u64 {
    // SAFETY: rusage is plain data; all-zero is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer for the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc == 0 { super::usage_figures(&ru).2 } else { 0 }
}

/// Blocks `SIGUSR1`, the supervisor's word that a runner waiting after its account may exit
/// ([`wait_to_go`]), in this thread and every thread it starts from now on. Blocked, it is never
/// delivered: one sent to a runner that does not wait ends nothing.
pub fn block_go_signal() {
    let set = go_signal();
    // SAFETY: `set` is a valid signal set; the old mask is not asked for (null).
    let _ = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits for the supervisor's word to exit (`SIGUSR1`, blocked by [`block_go_signal`]), at most
/// `most`. The supervisor's other words, freezing the run's cgroup and killing it, need no
/// waiting for.
pub fn wait_to_go(most: std::time::Duration) {
    let set = go_signal();
    let end = std::time::Instant::now() + most;
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let timeout = libc::timespec {
            tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(left.subsec_nanos()),
        };
        // SAFETY: `set` and `timeout` are valid for the call; no signal information is asked for.
        let got = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
        if got == libc::SIGUSR1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The set of `SIGUSR1` alone.
fn go_signal() -> libc::sigset_t {
    // SAFETY: a zeroed `sigset_t` is a valid argument to `sigemptyset`, which initializes it.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, initialized signal set; SIGUSR1 is a valid signal.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
    }
    set
}

/// Ends the process now with `code`: `_exit`, no atexit handlers, no flushing, no destructors.
/// The runner's last act, once its summary is written: its guest's memory and threads go with
/// the process, not piece by piece before it.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: `_exit` takes an integer and never returns; nothing of this process is used after.
    unsafe { libc::_exit(code) }
}

/// Fills `buf` from the kernel's random source (`getrandom(2)`, blocking until it is seeded).
pub fn os_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        // SAFETY: the kernel writes at most `rest.len()` bytes into `rest`, which this borrow owns.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match n {
            n if n > 0 => got += n.cast_unsigned(),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Ignores SIGPIPE in this process from now on: a write to a pipe nobody reads fails with EPIPE
/// (the runner's host calls, on a channel its run may have closed) instead of ending the runner.
pub fn ignore_sigpipe() {
    let _ = super::ignore_signal(libc::SIGPIPE);
}

/// Faults `[addr, addr + len)` in, without changing a byte (Linux 5.14). `write`: writable, as a
/// write of each page's own bytes would (`MADV_POPULATE_WRITE`: a page of a private mapping shared
/// with another process, copy-on-write, is copied for this one); else mapped as a read would
/// (`MADV_POPULATE_READ`: nothing is copied). `Err` when the range is not wholly mapped so, memory
/// runs out, or the kernel has no such advice; pages before the failure may be faulted in already.
pub fn populate(addr: usize, len: usize, write: bool) -> std::io::Result<()> {
    let advice = if write { libc::MADV_POPULATE_WRITE } else { libc::MADV_POPULATE_READ };
    // SAFETY: whatever the address, either advice changes no byte and no mapping (the kernel checks
    // the range and fails for what is not mapped so); it only makes pages present here, writable
    // for a write (callers give private mappings; a shared file's pages would turn dirty).
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, advice) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Writes `len` bytes of this process's memory at `addr` to `fd`, in order (a hibernating guest's
/// linear memory into the pipe its image goes out by). `Err` from `write(2)`; a short write is
/// written on.
#[cfg(feature = "wasm")]
pub fn write_memory(fd: std::os::fd::BorrowedFd<'_>, addr: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    whole(len, 0, libc::EIO, |done, _| {
        // SAFETY: the caller gives a range of a mapping of this process that is readable and that
        // nothing writes meanwhile (a guest's linear memory between two of its calls, one thread);
        // the kernel reads it, and fails (EFAULT) for what is not mapped.
        unsafe { libc::write(fd.as_raw_fd(), (addr + done) as *const libc::c_void, len - done) }
    })
}

/// Reads `len` bytes of `fd` at file offset `offset` into this process's memory at `addr` (a
/// resuming guest's linear memory from its image). `Err` from `pread(2)`, or at the file's end.
#[cfg(feature = "wasm")]
pub fn read_into_memory(fd: std::os::fd::BorrowedFd<'_>, offset: u64, addr: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    whole(len, offset, libc::ENODATA, |done, at| {
        // SAFETY: the caller gives a range of a writable private mapping of this process that no
        // code reads or writes meanwhile (a guest's linear memory before its next call, one
        // thread); the kernel writes it, and fails (EFAULT) for what is not mapped.
        unsafe { libc::pread(fd.as_raw_fd(), (addr + done) as *mut libc::c_void, len - done, at) }
    })
}

/// Calls `io(done, file offset)` until `len` bytes are done (from file offset `offset`): each
/// call's count added, `EINTR` asked again, a call that does nothing `Err(stalled)`.
#[cfg(feature = "wasm")]
fn whole(len: usize, offset: u64, stalled: i32, mut io: impl FnMut(usize, i64) -> isize) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let at = i64::try_from(offset + done as u64).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
        match io(done, at) {
            n if n > 0 => done += n.unsigned_abs(),
            0 => return Err(std::io::Error::from_raw_os_error(stalled)),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Gives `[addr, addr + len)` back its mappings' own bytes (`MADV_DONTNEED`): a private file
/// mapping's pages are the file's again, an anonymous mapping's zero. `Err` when the range is not
/// wholly mapped.
#[cfg(feature = "wasm")]
pub fn discard(addr: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: the caller gives a range of private mappings of this process that no code reads or
    // writes meanwhile (a guest's linear memory before its next call): the advice replaces their
    // bytes with the mappings' own (file or zero) and changes no mapping; the kernel fails for
    // what is not mapped.
    if unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Maps `len` bytes of `fd` at file offset `offset` over `[addr, addr + len)`, private and
/// writable (`MAP_FIXED`: the range's mapping is replaced, its pages faulted from the file, and
/// copied when written). `Err` from `mmap(2)`.
#[cfg(feature = "wasm")]
pub fn map_over(fd: std::os::fd::BorrowedFd<'_>, offset: u64, addr: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let off = libc::off_t::try_from(offset).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: the caller gives a page-aligned range inside a guest's linear memory, a private
    // read-write mapping of this process that no code touches meanwhile (before the guest's next
    // call): the new mapping keeps its protection and its place, so every pointer into it stays
    // valid; only its bytes change, to the file's.
    let at = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_FIXED,
            fd.as_raw_fd(),
            off,
        )
    };
    if at == libc::MAP_FAILED || at as usize != addr {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
