//! The store of a guest in the runner ([`State`]: its WASI, its limits, a JavaScript guest's
//! turn): made for a run ([`store`]) or for a preloaded guest's fresh instance
//! ([`fresh_store`]), a fresh instance made a run's ([`adopt`]), what became of a call on it
//! ([`Ran`]), and the guest's WASI context ([`wasi_ctx`]).
//!
//! Imports: shared.rs, limits.rs, turns.rs, stdin.rs, jsimage.rs; never p1calls.rs, component.rs,
//! preload.rs or the runner's files above them.

use super::limits::{Limits, Times};
use super::shared::{RunnerConfig, one_line};
use wasmtime::Store;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub(super) struct State<W> {
    pub(super) wasi: W,
    pub(super) limits: Limits,
    /// The JavaScript guest's turn, when it serves turns (see `turns.rs`).
    pub(super) turn: Option<super::turns::TurnIo>,
    /// A live JavaScript guest's images (see `jsimage.rs`).
    pub(super) js: Option<super::jsimage::JsImages>,
    /// A preview-1 guest's host-call channel (requests, answers), when its run has one (see
    /// `p1calls.rs`).
    pub(super) channel: Option<(i32, i32)>,
    /// What the code gave back (its value, as its runtime writes it: see
    /// [`crate::Report::give`]), at most [`GIVEN_MAX`] bytes; taken at the run's or turn's end.
    pub(super) given: Vec<u8>,
}

/// The most a Wasm guest gives back: a value (its JSON or repr, see
/// [`crate::report::VALUE_MAX_BYTES`]) with room for its escapes; a Wasm guest has no figures.
pub(super) const GIVEN_MAX: usize = 8 * crate::report::VALUE_MAX_BYTES;

impl<W> State<W> {
    /// Adds `bytes` to what the code gives back; past [`GIVEN_MAX`], what it gives is dropped
    /// whole (the supervisor says so: it is not a value).
    pub(super) fn give(&mut self, bytes: &[u8]) {
        if self.given.len() + bytes.len() > GIVEN_MAX {
            self.given = b"{\"left-out\": \"the code's value was left out: over its cap\"}".to_vec();
        } else {
            self.given.extend_from_slice(bytes);
        }
    }
}

/// How a guest's call went, as the runner's `run` (`runner.rs`) reports it.
pub(super) struct Ran {
    /// The guest's exit status, or how it ended otherwise.
    pub(super) result: wasmtime::Result<i32>,
    pub(super) times: Times,
    pub(super) fuel_left: Option<u64>,
    pub(super) memory_peak: usize,
    pub(super) memory_limit_hit: bool,
    /// What the code gave back ([`State::given`]).
    pub(super) given: Vec<u8>,
}

impl Ran {
    /// What became of a call on `store` begun at `started`. The process ends right after: its
    /// memory goes with it, so the guest's store, instance and linear memory are not torn down
    /// piece by piece first (milliseconds for a Python guest).
    pub(super) fn of<W>(mut store: Store<State<W>>, result: wasmtime::Result<i32>, times: Times) -> Ran {
        let given = std::mem::take(&mut store.data_mut().given);
        let limits = &store.data().limits;
        let ran = Ran {
            result,
            times,
            fuel_left: store.get_fuel().ok(),
            memory_peak: limits.memory_peak,
            memory_limit_hit: limits.memory_limit_hit,
            given,
        };
        std::mem::forget(store);
        ran
    }
}

/// The store of a guest: its WASI, its limits, its fuel and its deadline.
/// `instances_max`: the policy's for a module, the guest's own for the Python component.
pub(super) fn store<W>(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    wasi: W,
    instances_max: u32,
) -> Result<Store<State<W>>, String> {
    let turn = c.turns.then(|| super::turns::TurnIo::new(c.fuel));
    let mut store = Store::new(
        engine,
        State { wasi, limits: Limits::of(c, instances_max), turn, js: None, channel: c.host_calls, given: Vec::new() },
    );
    store.limiter(|s| &mut s.limits);
    arm(&mut store, c)?;
    Ok(store)
}

/// A store for a preloaded guest's fresh instance: no WASI of a run's, no limit (what the
/// instance takes is recorded), no deadline while it is made.
pub(super) fn fresh_store<W>(engine: &wasmtime::Engine, wasi: W) -> Store<State<W>> {
    let mut store = Store::new(
        engine,
        State { wasi, limits: Limits::none(), turn: None, js: None, channel: None, given: Vec::new() },
    );
    store.limiter(|s| &mut s.limits);
    // Made outside any run: a start function of the guest's own runs unmetered.
    let _ = store.set_fuel(u64::MAX);
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// An instance (a module's or a component's) in its store.
pub(super) type Instanced<W, I> = (Store<State<W>>, I);

/// Makes a preloaded guest's fresh instance (`fresh`, the store it was made in) this run's:
/// its WASI, its limits, its fuel and its deadline. `None`: the run's limits would not have
/// admitted the instance; the run instantiates afresh.
pub(super) fn adopt<W, I>(
    fresh: Instanced<W, I>,
    c: &RunnerConfig,
    wasi: W,
    instances_max: u32,
) -> Result<Option<Instanced<W, I>>, String> {
    let (mut store, instance) = fresh;
    let mut limits = Limits::of(c, instances_max);
    let took = &store.data().limits;
    if !limits.admits(took) {
        return Ok(None);
    }
    limits.memory_peak = took.memory_peak;
    limits.tell();
    *store.data_mut() = State { wasi, limits, turn: None, js: None, channel: c.host_calls, given: Vec::new() };
    arm(&mut store, c)?;
    Ok(Some((store, instance)))
}

/// A store's fuel and, with fuel, its epoch deadline (the next tick) for a run.
fn arm<W>(store: &mut Store<State<W>>, c: &RunnerConfig) -> Result<(), String> {
    if let Some(fuel) = c.fuel {
        store.set_fuel(fuel).map_err(|e| one_line(&e))?;
        store.set_epoch_deadline(1);
    }
    Ok(())
}

/// The guest's WASI: its argv and environment, stdout and stderr inherited (the supervisor's
/// capped pipes), its stdin when it reads one, its preopened directories, to be built for
/// preview 1 or 2. `Err` in words.
pub(super) fn wasi_ctx(c: &RunnerConfig) -> Result<WasiCtxBuilder, String> {
    let mut wasi = WasiCtxBuilder::new();
    // Blocking WASI calls (file I/O in /app) run on this thread, not through a tokio
    // blocking pool: no thread hand-off per call, and no extra threads at all.
    wasi.args(&c.argv).envs(&c.env).inherit_stdout().inherit_stderr().allow_blocking_current_thread(true);
    // No sockets of any kind, no name lookups (WASI preview 2 has both; the jail has no network
    // and the runner's filter no socket(2) either).
    wasi.allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    seed_randomness(&mut wasi)?;
    if c.guest_stdin {
        // The guest reads fd 0 itself (no thread between it and its input).
        match super::stdin::stdin_file() {
            Ok(f) => {
                wasi.stdin(super::stdin::GuestStdin(wasmtime_wasi::cli::InputFile::new(f)));
            }
            Err(e) => return Err(format!("cannot give the guest its stdin: {e}")),
        }
    }
    for p in &c.preopens {
        let perms = if p.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        if let Err(e) = wasi.preopened_dir(&p.host, &p.guest, perms) {
            return Err(format!("cannot open {} for the guest: {}", p.host.display(), one_line(&e)));
        }
    }
    Ok(wasi)
}

/// Seeds every random source the guest has from the kernel, in this process. WASI's defaults
/// come from the thread's `rand` generator, whose state a process copied from another (a warm
/// runner is a copy of its spawner) shares with every other copy: `rand` does not reseed on
/// fork, and two runs would draw the same numbers.
fn seed_randomness(wasi: &mut WasiCtxBuilder) -> Result<(), String> {
    use rand::SeedableRng;
    let mut seeds = [0u8; 80];
    crate::sys::os_random(&mut seeds).map_err(|e| format!("cannot seed the guest's random generators: {e}"))?;
    let (secure, rest) = seeds.split_at(32);
    let (insecure, seed) = rest.split_at(32);
    let array = |b: &[u8]| <[u8; 32]>::try_from(b).unwrap_or_default();
    wasi.secure_random(rand::rngs::StdRng::from_seed(array(secure)))
        .insecure_random(rand::rngs::SmallRng::from_seed(array(insecure)))
        .insecure_random_seed(u128::from_le_bytes(<[u8; 16]>::try_from(seed).unwrap_or_default()));
    Ok(())
}
