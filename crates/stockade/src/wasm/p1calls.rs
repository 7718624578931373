//! The host-call channel of a WASI preview 1 guest (QuickJS), whose module is a fixed build with
//! no import of stockade's own: the guest reaches the channel as two WASI fd numbers that its
//! WASI table never hands out ([`GUEST_REQUESTS`], [`GUEST_ANSWERS`]). The runner's linker
//! shadows `fd_write` and `fd_read`: on those two numbers they write to and read from the jail's
//! channel fds as they are (the frames are the guest's; the supervisor reads and bounds them, see
//! `supervisor/calls.rs`); on every other fd they are WASI's own. The guest gains no fd of the
//! host's, no syscall and no path: only the two pipes the supervisor set up before it started.
//!
//! Here too: a command module's imports resolved against WASI preview 1 with these shadows
//! ([`instance_pre`]), a preloaded module's fresh instance ([`fresh`]), and the JavaScript guest's
//! read of its turn's bytes ([`js_turn_bytes`]).
//!
//! Imports: shared.rs, store.rs, turns.rs, jsimage.rs; never component.rs, preload.rs or the runner's files
//! above them.

use super::shared::one_line;
use super::store::{Instanced, State, fresh_store};
use super::turns::{Account, Next, TurnIo, next_frame, tell, turn_fuel};
use std::time::Instant;
use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1};
use wasmtime_wasi::runtime::in_tokio;
use wiggle::GuestMemory;

/// The guest's fd for its requests (the JS bootstrap's `host.call` writes its frames there).
pub const GUEST_REQUESTS: u32 = 0x7FFF_FF00;
/// The guest's fd for the answers.
pub const GUEST_ANSWERS: u32 = 0x7FFF_FF01;
/// The guest's fd for what its code gives back (the JavaScript bootstrap writes the code's value
/// there: see [`crate::Report::give`]), kept in its store's [`State::given`].
pub const GUEST_GIVEN: u32 = 0x7FFF_FF03;

const MODULE: &str = "wasi_snapshot_preview1";
// WASI preview 1 errno values.
const ERRNO_BADF: i32 = 8;
const ERRNO_FAULT: i32 = 21;
const ERRNO_IO: i32 = 29;
const ERRNO_PIPE: i32 = 64;

type P1 = State<WasiP1Ctx>;

/// A command module's imports resolved against WASI preview 1.
pub(super) type Pre = wasmtime::InstancePre<State<WasiP1Ctx>>;

/// Resolves `module`'s imports (WASI preview 1) in `engine`, with the host-call channel's fds
/// (`host_calls`: its store's [`State::channel`], when its run has one) and its turns' stdin and
/// status (`turns`). A module preloaded by a warm runner has the channel's fds, not the turns (a
/// live session's interpreter is never a warm one).
pub(super) fn instance_pre(
    engine: &wasmtime::Engine,
    module: &wasmtime::Module,
    host_calls: bool,
    turns: bool,
) -> Result<Pre, String> {
    let mut linker: Linker<State<WasiP1Ctx>> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s| &mut s.wasi).map_err(|e| one_line(&e))?;
    link(&mut linker, host_calls, turns).map_err(|e| one_line(&e))?;
    linker.instantiate_pre(module).map_err(|e| format!("cannot link: {}", one_line(&e)))
}

/// A preloaded module's fresh instance, in a store of its own (see `preload.rs`).
pub(super) fn fresh(
    engine: &wasmtime::Engine,
    pre: &Pre,
) -> wasmtime::Result<Instanced<WasiP1Ctx, wasmtime::Instance>> {
    let mut store = fresh_store(engine, WasiCtxBuilder::new().build_p1());
    let instance = pre.instantiate(&mut store)?;
    Ok((store, instance))
}

/// Shadows `fd_write` and `fd_read` in `linker` (which has WASI preview 1) so that the guest's
/// [`GUEST_GIVEN`] is its store's [`State::given`]; with `channel`, its two channel fds are its store's [`State::channel`] (the jail's
/// requests and answers; with none, they are fds the guest does not have); and, for a
/// guest that serves turns (`turns`), so that its stdin is its turns' frames and its status fd
/// ([`crate::handover::JS_STATUS_FD`]) the runner's (see `turns.rs`). Every other fd goes to
/// WASI's own functions, called as wasmtime-wasi's linker calls them (its generated bindings,
/// with the caller's memory and its host-call fuel).
pub(super) fn link(linker: &mut Linker<P1>, channel: bool, turns: bool) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap(
        MODULE,
        "fd_write",
        move |mut caller: Caller<'_, P1>, fd: i32, iovs: i32, count: i32, done: i32| -> wasmtime::Result<i32> {
            match (fd as u32, channel.then(|| caller.data().channel).flatten()) {
                (GUEST_REQUESTS, Some(channel)) => {
                    return Ok(transfer(&mut caller, channel.0, iovs, count, done, Way::Write));
                }
                (crate::handover::JS_STATUS_FD, _) if turns => {
                    return Ok(transfer(&mut caller, -1, iovs, count, done, Way::Status));
                }
                (GUEST_GIVEN, _) => return Ok(transfer(&mut caller, -1, iovs, count, done, Way::Given)),
                _ => {}
            }
            let (ctx, mut mem) = wasi(&mut caller)?;
            in_tokio(p1::fd_write(ctx, &mut mem, fd, iovs, count, done))
        },
    )?;
    linker.func_wrap(
        MODULE,
        "fd_read",
        move |mut caller: Caller<'_, P1>, fd: i32, iovs: i32, count: i32, done: i32| -> wasmtime::Result<i32> {
            match (fd as u32, channel.then(|| caller.data().channel).flatten()) {
                (GUEST_ANSWERS, Some(channel)) => {
                    return Ok(transfer(&mut caller, channel.1, iovs, count, done, Way::Read));
                }
                (0, _) if turns => {
                    if let Err(errno) = js_turn_bytes(&mut caller)? {
                        return Ok(errno);
                    }
                    return Ok(transfer(&mut caller, -1, iovs, count, done, Way::Turn));
                }
                _ => {}
            }
            let (ctx, mut mem) = wasi(&mut caller)?;
            in_tokio(p1::fd_read(ctx, &mut mem, fd, iovs, count, done))
        },
    )?;
    if turns {
        watch_opened(linker)?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// Shadows `path_open`, `fd_close` and `fd_renumber` (WASI's own, called as its linker calls
/// them) to know the descriptors a live guest holds open: a file held open cannot cross a
/// hibernation (see `jsimage.rs`).
fn watch_opened(linker: &mut Linker<P1>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "path_open",
        |mut caller: Caller<'_, P1>,
         dir: i32,
         dirflags: i32,
         path: i32,
         path_len: i32,
         oflags: i32,
         base: i64,
         inheriting: i64,
         fdflags: i32,
         opened: i32|
         -> wasmtime::Result<i32> {
            let errno = {
                let (ctx, mut mem) = wasi(&mut caller)?;
                in_tokio(p1::path_open(
                    ctx, &mut mem, dir, dirflags, path, path_len, oflags, base, inheriting, fdflags, opened,
                ))?
            };
            let fd = caller.get_export("memory").and_then(Extern::into_memory).and_then(|m| {
                m.data(&caller).get(opened as u32 as usize..).and_then(|b| b.get(..4)).map(<[u8]>::to_vec)
            });
            if let (0, Some(b), Some(js)) = (errno, fd, caller.data_mut().js.as_mut()) {
                js.opened.insert(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
            Ok(errno)
        },
    )?;
    linker.func_wrap(MODULE, "fd_close", |mut caller: Caller<'_, P1>, fd: i32| -> wasmtime::Result<i32> {
        let errno = {
            let (ctx, mut mem) = wasi(&mut caller)?;
            in_tokio(p1::fd_close(ctx, &mut mem, fd))?
        };
        if let (0, Some(js)) = (errno, caller.data_mut().js.as_mut()) {
            js.opened.remove(&(fd as u32));
        }
        Ok(errno)
    })?;
    linker.func_wrap(
        MODULE,
        "fd_renumber",
        |mut caller: Caller<'_, P1>, from: i32, to: i32| -> wasmtime::Result<i32> {
            let errno = {
                let (ctx, mut mem) = wasi(&mut caller)?;
                in_tokio(p1::fd_renumber(ctx, &mut mem, from, to))?
            };
            if let (0, Some(js)) = (errno, caller.data_mut().js.as_mut()) {
                let moved = js.opened.remove(&(from as u32));
                js.opened.remove(&(to as u32));
                if moved {
                    js.opened.insert(to as u32);
                }
            }
            Ok(errno)
        },
    )?;
    Ok(())
}

/// The caller's WASI context and memory, as wasmtime-wasi's own linker takes them for a call.
fn wasi<'a>(caller: &'a mut Caller<'_, P1>) -> wasmtime::Result<(&'a mut WasiP1Ctx, GuestMemory<'a>)> {
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        wasmtime::bail!("missing required memory export");
    };
    let fuel = caller.as_context_mut().hostcall_fuel();
    let (mem, state) = memory.data_and_store_mut(caller);
    state.wasi.set_hostcall_fuel(fuel);
    Ok((&mut state.wasi, GuestMemory::Unshared(mem)))
}

#[derive(Clone, Copy)]
enum Way {
    Write,
    Read,
    /// The guest's status of its turn, to the runner (see `turns.rs`).
    Status,
    /// The guest's read of its turn's bytes, which the runner holds.
    Turn,
    /// What the guest's code gives back, kept by the runner.
    Given,
}

/// One `fd_write` or `fd_read` of the guest on the channel fd `fd`: its iovecs (`count` of them
/// at `iovs`) written as one `write(2)`, or one `read(2)` into its first non-empty buffer (for
/// its turn's status and bytes, the runner's own instead of a fd); the bytes done stored at
/// `done`. Returns a WASI errno (0: done).
fn transfer(caller: &mut Caller<'_, P1>, fd: i32, iovs: i32, count: i32, done: i32, way: Way) -> i32 {
    let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory()) else {
        return ERRNO_BADF;
    };
    let (mem, state) = memory.data_and_store_mut(&mut *caller);
    let word = |mem: &[u8], at: usize| -> Option<u32> {
        let b = mem.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut buffers = Vec::new();
    for i in 0..(count as u32 as usize) {
        let Some(at) = (iovs as u32 as usize).checked_add(i * 8) else { return ERRNO_FAULT };
        let (Some(ptr), Some(len)) = (word(mem, at), word(mem, at + 4)) else { return ERRNO_FAULT };
        let (ptr, len) = (ptr as usize, len as usize);
        if ptr.checked_add(len).is_none_or(|end| end > mem.len()) {
            return ERRNO_FAULT;
        }
        buffers.push((ptr, len));
    }
    crate::sys::ignore_sigpipe();
    let moved = match way {
        Way::Write => {
            let bytes: Vec<u8> = buffers.iter().flat_map(|&(p, l)| mem[p..p + l].iter().copied()).collect();
            if bytes.is_empty() { Ok(0) } else { crate::sys::write(fd, &bytes) }
        }
        Way::Read => match buffers.iter().find(|&&(_, l)| l > 0) {
            Some(&(p, l)) => crate::sys::read(fd, &mut mem[p..p + l]),
            None => Ok(0),
        },
        Way::Status => {
            let bytes: Vec<u8> = buffers.iter().flat_map(|&(p, l)| mem[p..p + l].iter().copied()).collect();
            if let Some(t) = state.turn.as_mut() {
                t.said(&bytes);
            }
            Ok(bytes.len())
        }
        Way::Given => {
            let bytes: Vec<u8> = buffers.iter().flat_map(|&(p, l)| mem[p..p + l].iter().copied()).collect();
            state.give(&bytes);
            Ok(bytes.len())
        }
        Way::Turn => match (buffers.iter().find(|&&(_, l)| l > 0), state.turn.as_mut()) {
            (Some(&(p, l)), Some(t)) => Ok(t.give(&mut mem[p..p + l])),
            _ => Ok(0),
        },
    };
    let n = match moved {
        // At most the guest's buffers' length, which its 32-bit memory holds.
        Ok(n) => u32::try_from(n).unwrap_or(u32::MAX),
        Err(e) if e.0 == libc::EPIPE => return ERRNO_PIPE,
        Err(e) if e.0 == libc::EBADF => return ERRNO_BADF,
        Err(_) => return ERRNO_IO,
    };
    match mem.get_mut(done as u32 as usize..(done as u32 as usize).saturating_add(4)) {
        Some(slot) if slot.len() == 4 => {
            slot.copy_from_slice(&n.to_le_bytes());
            0
        }
        _ => ERRNO_FAULT,
    }
}

/// Before a read of the JavaScript guest's stdin: when the turn's bytes are all read, the
/// guest's turn returned (said, with its figures), and the runner waits for the next turn's
/// frame (its fuel set, its refused growths counted from zero). At the runner's end of input
/// the guest's stdin ends. A live guest with images resumes from its own at its first read, and
/// writes one at a hibernation's frame (see `jsimage.rs`). `Ok(Err)`: a WASI errno for the read;
/// `Err`: the guest cannot go on (its image could not be given back, or failed half written).
pub(super) fn js_turn_bytes(caller: &mut Caller<'_, State<WasiP1Ctx>>) -> wasmtime::Result<Result<(), i32>> {
    let Some(t) = caller.data_mut().turn.as_mut() else { return Ok(Ok(())) };
    if t.at < t.pending.len() {
        return Ok(Ok(()));
    }
    if let Some(mut ready) = t.ready.take() {
        if let Some(from) = resume_js(caller)?
            && let Account::Ready { resumed, .. } = &mut ready
        {
            *resumed = Some(from);
        }
        tell(&ready);
    } else if t.in_turn {
        let (status, fuel, started) = (t.status(), t.fuel, t.started);
        t.in_turn = false;
        let left = caller.get_fuel().ok();
        let started = started.unwrap_or_else(Instant::now);
        let mut given = std::mem::take(&mut caller.data_mut().given);
        tell(&Account::turn(status, fuel, left, &caller.data().limits, started, &mut given));
    }
    let frame = loop {
        match next_frame() {
            Err(_) => return Ok(Err(ERRNO_IO)),
            Ok(None) => return Ok(Ok(())),
            Ok(Some(Next::Turn(f))) => break f,
            Ok(Some(Next::Hibernate)) => tell(&hibernate_js(caller)?),
        }
    };
    let session = caller.data().turn.as_ref().and_then(|t| t.session_fuel);
    let fuel = turn_fuel(session, frame.fuel);
    if let Some(f) = fuel
        && caller.set_fuel(f).is_err()
    {
        return Ok(Err(ERRNO_IO));
    }
    caller.data_mut().limits.turn_begins();
    if let Some(t) = caller.data_mut().turn.as_mut() {
        *t = TurnIo {
            pending: frame.bytes,
            in_turn: true,
            started: Some(Instant::now()),
            fuel,
            session_fuel: session,
            ..TurnIo::default()
        };
    }
    Ok(Ok(()))
}

/// At a live JavaScript guest's first read: its image given back, when it resumes from one.
fn resume_js(caller: &mut Caller<'_, P1>) -> wasmtime::Result<Option<super::turns::ResumedFrom>> {
    let Some(mut js) = caller.data_mut().js.take() else { return Ok(None) };
    let memory = caller.get_export("memory").and_then(Extern::into_memory);
    let resumed = match memory {
        Some(m) => js.resume(&m, &mut *caller),
        None => Err("the guest has no memory to give its image to".into()),
    };
    caller.data_mut().js = Some(js);
    resumed.map_err(|why| wasmtime::format_err!("{why}"))
}

/// A hibernation's frame, in a live JavaScript guest's read: its image written (or why not).
fn hibernate_js(caller: &mut Caller<'_, P1>) -> wasmtime::Result<Account> {
    let memory = caller.get_export("memory").and_then(Extern::into_memory);
    let (Some(m), Some(js)) = (memory, caller.data().js.as_ref()) else {
        return Ok(Account::NotHibernated { why: "this interpreter has no image file".into() });
    };
    let (base, size) = (m.data_ptr(&*caller) as usize, m.data_size(&*caller));
    js.hibernate(base, size).map_err(|why| wasmtime::format_err!("{why}"))
}
