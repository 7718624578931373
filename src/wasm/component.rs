//! The pre-initialized Python guest, in the runner: a Wasm component (WASI preview 2) holding
//! CPython whose start-up ran once, when the guest was installed, and was snapshotted (see
//! `guests/python/`). Each run is a fresh instance of that snapshot: its linear memory mapped
//! copy-on-write from the artifact, so an instance costs what mapping it costs, not what
//! CPython's start-up does. Its `run` export gets the code and the arguments.

use super::runner::{self, Ran, RunnerConfig, State, Times};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Instance, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The core instances the Python component is made of (CPython, its libc and its extension
/// libraries, linked once at build time), with room for a rebuild: fixed by the guest, not by
/// the code it runs (Python code cannot instantiate Wasm), so `wasm.instances-max`, a bound on
/// what a module may instantiate, does not apply to it.
pub const PYTHON_INSTANCES: u32 = 32;

/// The guest's WASI (preview 2): its context and the resources it holds; and the jail's
/// host-call channel (requests, answers), when it has one.
pub(super) struct P2 {
    ctx: WasiCtx,
    table: ResourceTable,
    host_calls: Option<(i32, i32)>,
}

impl WasiView for State<P2> {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi.ctx, table: &mut self.wasi.table }
    }
}

/// The Python guest's imports resolved against WASI preview 2, once per engine and component.
pub(super) type Pre = wasmtime::component::InstancePre<State<P2>>;

/// Resolves `component`'s imports (WASI preview 2) in `engine`.
pub(super) fn instance_pre(engine: &wasmtime::Engine, component: &Component) -> Result<Pre, String> {
    let mut linker = Linker::<State<P2>>::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| runner::one_line(&e))?;
    let mut host = linker.instance(HOST).map_err(|e| runner::one_line(&e))?;
    host.func_wrap("call", |store: wasmtime::StoreContextMut<'_, State<P2>>, (name, args): (String, String)| {
        Ok((host_call(store.data().wasi.host_calls, &name, &args),))
    })
    .map_err(|e| runner::one_line(&e))?;
    linker.instantiate_pre(component).map_err(|e| format!("cannot link the Python guest: {}", runner::one_line(&e)))
}

/// A guest instantiated: its load and instantiation times, its store and instance, when
/// instantiating began.
type Instantiated = (Duration, wasmtime::Store<State<P2>>, Instance, Instant);

/// The Python guest instantiated for a run begun at `t0`: `loaded`, the guest this process
/// loaded ahead, linked, with the fresh instance it made (this process's copy of it is taken);
/// else loaded and instantiated here. Its load and instantiation times, and when instantiating
/// began. `Err` in words when it cannot be loaded or instantiated.
fn instantiated(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Instantiated, String> {
    let artifact = c.artifact.as_ref().ok_or("no artifact of the Python guest")?;
    let wasi = || -> Result<P2, String> {
        Ok(P2 { ctx: runner::wasi_ctx(c)?.build(), table: ResourceTable::new(), host_calls: c.host_calls })
    };
    let fresh = match loaded.and_then(super::preload::Loaded::take_fresh) {
        Some(super::preload::Fresh::Component(store, instance)) => {
            runner::adopt((store, instance), c, wasi()?, PYTHON_INSTANCES)?
        }
        _ => None,
    };
    if let (Some(l), Some(_)) = (loaded, &fresh) {
        // This copy's own pages for what a run writes, and those it reads mapped, while it waits
        // (see `pages.rs`).
        super::pages::fault_in(&l.warm_pages);
    }
    Ok(match fresh {
        Some((store, instance)) => {
            let load = t0.elapsed();
            runner::deadline_tick(engine, c, load, None);
            (load, store, instance, Instant::now())
        }
        None => {
            let pre = match loaded.map(|l| &l.guest) {
                Some(super::preload::Guest::Component(pre)) => pre.clone(),
                _ => {
                    let component = crate::sys::load_component(engine, artifact, c.artifact_id)
                        .map_err(|e| format!("cannot load {}: {}", artifact.display(), runner::one_line(&e)))?;
                    instance_pre(engine, &component)?
                }
            };
            let load = t0.elapsed();
            let mut store = runner::store(engine, c, wasi()?, PYTHON_INSTANCES)?;
            runner::deadline_tick(engine, c, load, None);
            let t1 = Instant::now();
            let instance =
                pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", runner::one_line(&e)))?;
            std::mem::forget(pre);
            (load, store, instance, t1)
        }
    })
}

/// Runs the Python guest once: `code` with `args` as `sys.argv[1:]`, or (`code` `None`) the
/// code framed on stdin, in the run's environment (see [`instantiated`] for `loaded`).
pub(super) fn run_python(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    code: Option<&str>,
    args: &[String],
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Ran, String> {
    let artifact = c.artifact.as_ref().ok_or("no artifact of the Python guest")?;
    let (load, mut store, instance, t1) = instantiated(engine, c, loaded, t0)?;
    let run = instance
        .get_typed_func::<(Option<&str>, &[String], &[(String, String)]), (i32,)>(&mut store, "run")
        .map_err(|e| format!("the Python guest has no run export: {}", runner::one_line(&e)))?;
    let times = runner::tell(Times { load, compile: None, instantiate: t1.elapsed(), started: Instant::now() });
    let size = store.data().limits.memory_peak();
    let mut call = || {
        let called = run.call(&mut store, (code, args, &c.env));
        runner::returned();
        called
    };
    let result = match &c.learned_pages {
        Some(out) => super::pages::learn(artifact, c.artifact_id, size, out, call)?,
        None => call(),
    }
    .map(|(status,)| status);
    Ok(Ran::of(store, result, times))
}

/// Serves a live session's turns (see `turns.rs`): the guest instantiated once, then its `turn`
/// export called with each turn's code and stdin, in one main module; each return is said on
/// the summary channel with the turn's figures, and the next frame waited for. A trap (out of
/// fuel, a stack exhausted) ends the guest: its instance cannot be called again. The runner's
/// end of input ends it as an exit.
pub(super) fn python_turns(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Ran, String> {
    use super::turns::{Account, next_frame, tell, turn_fuel};
    let (load, mut store, instance, t1) = instantiated(engine, c, loaded, t0)?;
    let turn = instance
        .get_typed_func::<(&str, &[u8], &[(String, String)]), (i32,)>(&mut store, "turn")
        .map_err(|e| format!("the Python guest has no turn export: {}", runner::one_line(&e)))?;
    let mut times = Times { load, compile: None, instantiate: t1.elapsed(), started: Instant::now() };
    tell(&Account::Ready { load_ms: ms(times.load), instantiate_ms: ms(times.instantiate) });
    loop {
        let Some(frame) = next_frame()? else { return Ok(Ran::of(store, Ok(0), times)) };
        let fuel = turn_fuel(c.fuel, frame.fuel);
        if let Some(f) = fuel {
            store.set_fuel(f).map_err(|e| runner::one_line(&e))?;
        }
        store.data_mut().limits.turn_begins();
        times.started = Instant::now();
        let status = match turn.call(&mut store, (frame.code(), frame.stdin(), &c.env)) {
            Ok((status,)) => status,
            Err(e) => return Ok(Ran::of(store, Err(e), times)),
        };
        let left = store.get_fuel().ok();
        tell(&Account::turn(status, fuel, left, &store.data().limits, times.started));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A preloaded Python guest's fresh instance, in a store of its own (see `preload.rs`).
pub(super) fn fresh(
    engine: &wasmtime::Engine,
    pre: &Pre,
) -> wasmtime::Result<runner::Instanced<P2, wasmtime::component::Instance>> {
    let wasi = P2 { ctx: WasiCtx::builder().build(), table: ResourceTable::new(), host_calls: None };
    let mut store = runner::fresh_store(engine, wasi);
    let instance = pre.instantiate(&mut store)?;
    Ok((store, instance))
}

/// The guest's `host` import (see `guests/python/wit/stockade.wit`).
const HOST: &str = "stockade:python/host@1.0.0";

/// One host call on the jail's channel (`fds`: requests, answers): the request framed as the
/// supervisor reads it (`supervisor/calls.rs`), its answer read back. The budgets are the
/// supervisor's; the guest's `args` are its JSON text, passed on as they are.
fn host_call(fds: Option<(i32, i32)>, name: &str, args: &str) -> Result<String, String> {
    let closed = || "host calls are closed for this run".to_string();
    let Some((requests, answers)) = fds else { return Err("this run has no host calls".into()) };
    crate::sys::ignore_sigpipe();
    let body = format!("{{\"name\":{},\"args\":{args}}}", serde_json::Value::from(name));
    let len = u32::try_from(body.len()).map_err(|_| "the request is too large".to_string())?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(body.as_bytes());
    let mut sent = 0;
    while sent < frame.len() {
        match crate::sys::write(requests, &frame[sent..]) {
            Ok(n) if n > 0 => sent += n,
            _ => return Err("this run has no host calls".into()),
        }
    }
    let read_exact = |n: usize| -> Result<Vec<u8>, String> {
        let mut b = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match crate::sys::read(answers, &mut b[got..]) {
                Ok(k) if k > 0 => got += k,
                _ => return Err(closed()),
            }
        }
        Ok(b)
    };
    let head = read_exact(4)?;
    let n = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let answer: serde_json::Value = serde_json::from_slice(&read_exact(n)?).map_err(|_| closed())?;
    match (answer.get("ok"), answer.get("error")) {
        (Some(v), _) => Ok(v.to_string()),
        (None, Some(why)) => Err(why.as_str().unwrap_or("the tool failed").to_string()),
        _ => Err(closed()),
    }
}
