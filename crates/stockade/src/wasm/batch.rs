//! The runner's side of a batch's jail: one jail, many runs, each in a fresh instance of the
//! guest that no other run touched.
//!
//! The runner loads the guest once into an engine with Wasmtime's pooling allocator
//! ([`super::engine::batch_engine`]), and for each run's frame on its stdin
//! ([`crate::handover::batch_frame`]) makes a new store and a new instance of it: its linear
//! memory the guest's snapshot again (a pool's slot whose pages the last instance wrote were set
//! back to the image's bytes when it was dropped, and stay resident: no page fault for the next),
//! its tables and globals as the guest declares them, its WASI its own (its arguments, its stdin
//! from the frame, `/app` emptied after each run), its fuel and linear memory the run's. The
//! guest's `run` (Python) or `_start` (a module: QuickJS) gets the frame's code and stdin as a
//! waiting interpreter's. A run that returns, exits, traps or runs out of its memory or fuel
//! ends alone: its store is dropped and its account said on the summary channel
//! ([`super::turns::Account::Ran`]: for the supervisor, a turn of the jail). A run past its wall
//! clock ends this process (a guest without epoch checks cannot be stopped otherwise), with the
//! account of an interrupted run: the supervisor reports that run as timed out, and its caller
//! builds another jail for the runs left.
//!
//! Imports: shared.rs, limits.rs, turns.rs, store.rs, component.rs, p1calls.rs, engine.rs,
//! pages.rs, snapshot.rs, deadline.rs, exit.rs; never runner.rs, module.rs, python.rs or preload.rs.

use super::component::{P2, PYTHON_INSTANCES};
use super::engine::EngineKind;
use super::exit::{ended, finish, load_error, summary};
use super::limits::Times;
use super::shared::{Entry, Outcome, RunnerConfig, Summary, one_line};
use super::store::{State, wasi_ctx};
use super::turns::{Account, tell};
use crate::handover::{BATCH_HEAD_LEN, BatchLimits, parse_batch_head};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;

/// The files a batch's runner reads besides its guest's (`config`, a batch's): for the Python
/// guest, the list of the pages a run writes and reads, and the record of the component it was
/// learned on (see `pages.rs`), when they are there.
pub(super) fn grants(config: &RunnerConfig) -> Vec<std::path::PathBuf> {
    let python = matches!(config.entry, Entry::PythonRun { .. });
    let Some(dir) = config.artifact.as_deref().and_then(std::path::Path::parent).filter(|_| config.batch && python)
    else {
        return Vec::new();
    };
    [super::snapshot::pages_path(dir), super::snapshot::manifest_path(dir)].into_iter().filter(|p| p.exists()).collect()
}

/// The guest, linked once.
enum Linked {
    /// The Python guest, and the pages of its instance's memory a run writes and reads, once
    /// found (in the pool's slot its instances take).
    Python(super::component::Pre, std::cell::OnceCell<Option<super::pages::Warm>>),
    Module(super::p1calls::Pre),
}

/// The most runs of pages a batch's Python instance is given ahead: the pool sets back the pages
/// an instance wrote found in at most 32 runs of them (Wasmtime's `PAGEMAP_SCAN` of a slot) and
/// gives the rest of the memory back to the kernel, so the next instance would fault them in
/// again; the learned pages, their small gaps filled, are kept to fewer runs than that, leaving
/// room for what a run writes beyond them.
const WARM_RUNS_MAX: usize = 26;

/// How often (in runs) the learned pages are faulted in again.
const REWARM_EVERY: u64 = 64;

/// The pages of the Python guest's memory a run writes and reads (see `pages.rs`), for the
/// instance just made in `store`: its written ones in at most [`WARM_RUNS_MAX`] runs. `None`
/// when there is no list for this guest and memory.
fn warm_pages(rc: &RunnerConfig, store: &Store<State<P2>>) -> Option<super::pages::Warm> {
    let artifact = rc.artifact.as_deref()?;
    let dir = artifact.parent()?;
    let component = super::snapshot::component_sha256(dir).ok()?;
    let size = store.data().limits.memory_peak();
    let list = super::snapshot::pages_path(dir);
    let mut warm = super::pages::ranges(&list, &component, artifact, rc.artifact_id, size).ok()?;
    warm.write = fewer_runs(std::mem::take(&mut warm.write), WARM_RUNS_MAX);
    Some(warm)
}

/// `ranges` (sorted, apart) as at most `max` ranges: the smallest gaps filled first.
fn fewer_runs(mut ranges: Vec<(usize, usize)>, max: usize) -> Vec<(usize, usize)> {
    while ranges.len() > max.max(1) {
        let gap = |i: usize| ranges[i + 1].0 - (ranges[i].0 + ranges[i].1);
        let Some(i) = (0..ranges.len() - 1).min_by_key(|&i| gap(i)) else { break };
        ranges[i].1 = ranges[i + 1].0 + ranges[i + 1].1 - ranges[i].0;
        ranges.remove(i + 1);
    }
    ranges
}

/// Serves a batch's runs (see the module's documentation) until the runner's stdin ends: then
/// its own account (an exit, 0), or a load error when the guest could not be loaded.
pub(super) fn serve(c: &RunnerConfig) -> (Summary, i32) {
    let t0 = Instant::now();
    let loaded = link(c);
    let Some(runtime) = super::deadline::wasi_runtime() else {
        return (load_error("cannot start the runner's tokio runtime".into()), 125);
    };
    let _entered = runtime.enter();
    let (engine, linked) = match loaded {
        Ok(l) => l,
        Err(e) => return (load_error(e), 125),
    };
    tell(&Account::Ready { load_ms: ms(t0.elapsed()), instantiate_ms: 0.0, resumed: None });
    let app = c.preopens.iter().find(|p| p.writable).map(|p| p.host.clone());
    loop {
        let (frame, limits) = match next_run() {
            Ok(Some(next)) => next,
            Ok(None) => return (ended_clean(), 0),
            Err(e) => return (load_error(e), 125),
        };
        let rc = run_config(c, limits);
        let account = match one(&engine, &linked, &rc, frame) {
            Ok(s) => s,
            Err(e) => load_error(e),
        };
        tell(&Account::Ran(Box::new(account)));
        if let Some(dir) = &app
            && let Err(e) = empty(dir)
        {
            // The next run would see it: this jail serves no more (its caller builds another).
            return (load_error(format!("cannot empty /app after a run: {e}")), 125);
        }
    }
}

/// The guest of `c` loaded into a pooling engine and linked.
fn link(c: &RunnerConfig) -> Result<(wasmtime::Engine, Linked), String> {
    let kind = if c.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let engine = super::engine::batch_engine(kind, PYTHON_INSTANCES, c.memory_max_bytes, c.table_elements_max)
        .map_err(|e| format!("cannot make the batch's engine: {}", one_line(&e)))?;
    let artifact = c.artifact.as_ref().ok_or("a batch's jail has no guest to load")?;
    let cannot = |e: wasmtime::Error| format!("cannot load {}: {}", artifact.display(), one_line(&e));
    let linked = match c.entry {
        Entry::PythonRun { .. } => {
            let component = crate::sys::load_component(&engine, artifact, c.artifact_id).map_err(cannot)?;
            Linked::Python(super::component::instance_pre(&engine, &component)?, std::cell::OnceCell::new())
        }
        Entry::Start => {
            let module = crate::sys::load_artifact(&engine, artifact, c.artifact_id).map_err(cannot)?;
            Linked::Module(super::p1calls::instance_pre(&engine, &module, false, false)?)
        }
    };
    Ok((engine, linked))
}

/// A run's configuration: the jail's, with its own wall clock, fuel and linear memory (each
/// within the jail's), its stdin the runner's to give.
fn run_config(c: &RunnerConfig, limits: BatchLimits) -> RunnerConfig {
    let mut rc = c.clone();
    rc.batch = false;
    rc.guest_stdin = false;
    rc.clock_from_stdin = false;
    rc.timeout_ms = limits.wall_ms.min(c.timeout_ms);
    rc.fuel = c.fuel.map(|f| limits.fuel.map_or(f, |l| l.min(f)));
    rc.memory_max_bytes = limits.wasm_memory_max_bytes.map_or(c.memory_max_bytes, |m| m.min(c.memory_max_bytes));
    rc
}

/// The runner's own account at the end of its batch.
fn ended_clean() -> Summary {
    let t = Times { load: Duration::ZERO, compile: None, instantiate: Duration::ZERO, started: Instant::now() };
    summary((Outcome::Exited, Some(0), None), None, (0, false), &t, false)
}

/// The next run's frame (its code's frame and stdin) and limits; `None` at the end of stdin.
fn next_run() -> Result<Option<(Vec<u8>, BatchLimits)>, String> {
    let mut head = [0u8; BATCH_HEAD_LEN];
    if !super::turns::exact(&mut head)? {
        return Ok(None);
    }
    let (n, k, limits) = parse_batch_head(&head).ok_or("a batch run's frame has no head")?;
    let mut bytes = vec![0u8; n.checked_add(k).ok_or("a batch run's frame is too long")?];
    if !super::turns::exact(&mut bytes)? {
        return Err("the runner's stdin ended in a batch run's frame".into());
    }
    Ok(Some((bytes, limits)))
}

/// The generation of the run under way: a deadline armed for an earlier one finds another here.
static RUN: AtomicU64 = AtomicU64::new(0);

/// One run in a fresh instance: its account. `Err`: it could not be instantiated.
fn one(engine: &wasmtime::Engine, linked: &Linked, rc: &RunnerConfig, frame: Vec<u8>) -> Result<Summary, String> {
    let t0 = Instant::now();
    let mut ctx = wasi_ctx(rc)?;
    ctx.stdin(MemoryInputPipe::new(frame));
    let generation = RUN.fetch_add(1, Ordering::SeqCst) + 1;
    arm(engine, rc, generation)?;
    let (result, store_end, instantiate, started) = match linked {
        Linked::Python(pre, warm) => {
            let wasi = P2 { ctx: ctx.build(), table: ResourceTable::new(), host_calls: None };
            let mut store = super::store::store(engine, rc, wasi, PYTHON_INSTANCES)?;
            let t1 = Instant::now();
            let instance = pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", one_line(&e)))?;
            // Once: they stay resident from one instance to the next (and again now and then,
            // should a run have written so much that the pool gave some back).
            let first = warm.get().is_none();
            if let Some(w) = warm.get_or_init(|| warm_pages(rc, &store))
                && (first || generation.is_multiple_of(REWARM_EVERY))
            {
                super::pages::fault_in(w);
            }
            let run = instance
                .get_typed_func::<(Option<&str>, &[String], &[(String, String)]), (i32,)>(&mut store, "run")
                .map_err(|e| format!("the Python guest has no run export: {}", one_line(&e)))?;
            let (instantiate, started) = (t1.elapsed(), Instant::now());
            let result = run.call(&mut store, (None, &[], &rc.env)).map(|(status,)| status);
            (result, end_of(store), instantiate, started)
        }
        Linked::Module(pre) => {
            let mut store = super::store::store(engine, rc, ctx.build_p1(), rc.instances_max)?;
            let t1 = Instant::now();
            let instance = pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", one_line(&e)))?;
            let start = instance
                .get_typed_func::<(), ()>(&mut store, "_start")
                .map_err(|e| format!("no _start: {}", one_line(&e)))?;
            let (instantiate, started) = (t1.elapsed(), Instant::now());
            let result = start.call(&mut store, ()).map(|()| 0);
            (result, end_of(store), instantiate, started)
        }
    };
    RUN.fetch_add(1, Ordering::SeqCst);
    let StoreEnd { fuel_left, memory, given } = store_end;
    let times = Times { load: started.duration_since(t0) - instantiate, compile: None, instantiate, started };
    let fuel = rc.fuel.map(|f| f.saturating_sub(fuel_left.unwrap_or(0)));
    let mut s = summary(ended(result), fuel, memory, &times, false);
    s.given = (!given.is_empty()).then(|| String::from_utf8_lossy(&given).into_owned());
    Ok(s)
}

/// What a run's store held at its end, the store dropped (its instance's slot back in the pool).
struct StoreEnd {
    fuel_left: Option<u64>,
    memory: (usize, bool),
    given: Vec<u8>,
}

fn end_of<W>(mut store: Store<State<W>>) -> StoreEnd {
    let given = std::mem::take(&mut store.data_mut().given);
    let limits = &store.data().limits;
    StoreEnd { fuel_left: store.get_fuel().ok(), memory: (limits.memory_peak, limits.memory_limit_hit), given }
}

/// How long a fuel-metered run has, after its epoch tick, to trap at its next check before its
/// deadline ends the runner all the same (it may be waiting in a host call).
const EPOCH_GRACE: Duration = Duration::from_millis(100);

/// The wall clock of the run under way, kept for all the runs by one thread of the runner's
/// ([`watch`]): a run sets its deadline without waking it (a syscall and a wake-up on another
/// CPU a run, its memory's TLB then shot down there too), unless it comes sooner than the one it
/// sleeps until.
struct Clock {
    armed: Mutex<Armed>,
    wake: Condvar,
}

#[derive(Clone, Copy)]
struct Armed {
    generation: u64,
    started: Instant,
    at: Instant,
    /// A fuel-metered run's epoch is ticked at `at` first (it traps, alone).
    fuel: bool,
    ticked: bool,
    sleeps_until: Option<Instant>,
}

static CLOCK: OnceLock<Result<&'static Clock, String>> = OnceLock::new();

/// Arms the run `generation`'s wall clock (see [`Clock`]); the first run starts its thread.
fn arm(engine: &wasmtime::Engine, rc: &RunnerConfig, generation: u64) -> Result<(), String> {
    let clock = CLOCK.get_or_init(|| start_clock(engine.clone())).as_ref().map_err(Clone::clone)?;
    let now = Instant::now();
    let mut a = clock.armed.lock().unwrap_or_else(PoisonError::into_inner);
    // A wall clock past what an `Instant` holds (some 10^8 years of milliseconds) is one the run
    // never reaches: 136 years, never a panic.
    let never = Duration::from_secs(u64::from(u32::MAX));
    let at = now.checked_add(Duration::from_millis(rc.timeout_ms)).or_else(|| now.checked_add(never)).unwrap_or(now);
    *a = Armed { generation, started: now, at, fuel: rc.fuel.is_some(), ticked: false, sleeps_until: a.sleeps_until };
    if a.sleeps_until.is_none_or(|u| at < u) {
        clock.wake.notify_one();
    }
    Ok(())
}

fn start_clock(engine: wasmtime::Engine) -> Result<&'static Clock, String> {
    let now = Instant::now();
    let armed = Armed { generation: 0, started: now, at: now, fuel: false, ticked: false, sleeps_until: None };
    let clock: &'static Clock = Box::leak(Box::new(Clock { armed: Mutex::new(armed), wake: Condvar::new() }));
    std::thread::Builder::new()
        .name("stockade-clock".into())
        .spawn(move || watch(clock, &engine))
        .map_err(|e| format!("cannot start the batch's wall clock: {e}"))?;
    Ok(clock)
}

/// How long the clock sleeps when no run is under way (a run that starts wakes it if sooner).
const IDLE: Duration = Duration::from_secs(3600);

/// The clock's thread: at the deadline of the run still under way, ticks the epoch (a
/// fuel-metered run; then [`EPOCH_GRACE`] more), then ends this process with the account of an
/// interrupted run.
fn watch(clock: &Clock, engine: &wasmtime::Engine) {
    let mut a = clock.armed.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let now = Instant::now();
        let under_way = a.generation != 0 && RUN.load(Ordering::SeqCst) == a.generation;
        if under_way && now >= a.at {
            if a.fuel && !a.ticked {
                engine.increment_epoch();
                a.ticked = true;
                a.at = now + EPOCH_GRACE;
                continue;
            }
            let t = Times { load: Duration::ZERO, compile: None, instantiate: Duration::ZERO, started: a.started };
            let end = (Outcome::Interrupted, None, Some(wasmtime::Trap::Interrupt.to_string()));
            let s = summary(end, None, (0, false), &t, false);
            finish(&s, super::guest_end(&s).exit_code(), None);
        }
        let until = if under_way { a.at } else { now + IDLE };
        a.sleeps_until = Some(until);
        a = clock.wake.wait_timeout(a, until.saturating_duration_since(now)).unwrap_or_else(PoisonError::into_inner).0;
    }
}

/// Removes what a run left in the jail's `/app` (a tmpfs of the jail's own; links removed, never
/// followed), so that the next run's is empty.
fn empty(dir: &std::path::Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(e.path())?;
        } else {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_made_fewer_by_filling_the_smallest_gaps() {
        let r = vec![(0, 4), (8, 4), (100, 4), (106, 4)];
        assert_eq!(fewer_runs(r.clone(), 4), r);
        assert_eq!(fewer_runs(r.clone(), 3), vec![(0, 4), (8, 4), (100, 10)]);
        assert_eq!(fewer_runs(r.clone(), 2), vec![(0, 12), (100, 10)]);
        assert_eq!(fewer_runs(r, 1), vec![(0, 110)]);
    }
}
