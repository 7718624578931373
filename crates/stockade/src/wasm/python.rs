//! The pre-initialized Python guest's runs in the runner (the guest: see `component.rs`): a
//! fresh instance of its snapshot for each run, or the one a preloading process made, whose
//! `run` export gets the code and the arguments ([`run_python`]), or whose `turn` export serves
//! a live session's turns ([`python_turns`]).
//!
//! Imports: shared.rs, limits.rs, turns.rs, store.rs, pages.rs, component.rs, preload.rs,
//! deadline.rs; never module.rs or runner.rs.

use super::component::{P2, PYTHON_INSTANCES, instance_pre};
use super::deadline::deadline_tick;
use super::limits::{self, Times};
use super::shared::{RunnerConfig, one_line};
use super::store::{self, Ran, State, adopt, wasi_ctx};
use std::time::{Duration, Instant};
use wasmtime::component::{Instance, ResourceTable};

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
        Ok(P2 { ctx: wasi_ctx(c)?.build(), table: ResourceTable::new(), host_calls: c.host_calls })
    };
    let fresh = match loaded.and_then(super::preload::Loaded::take_fresh) {
        Some(super::preload::Fresh::Component(store, instance)) => {
            adopt((store, instance), c, wasi()?, PYTHON_INSTANCES)?
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
            deadline_tick(engine, c, load, None);
            (load, store, instance, Instant::now())
        }
        None => {
            let pre = match loaded.map(|l| &l.guest) {
                Some(super::preload::Guest::Component(pre)) => pre.clone(),
                _ => {
                    let component = crate::sys::load_component(engine, artifact, c.artifact_id)
                        .map_err(|e| format!("cannot load {}: {}", artifact.display(), one_line(&e)))?;
                    instance_pre(engine, &component)?
                }
            };
            let load = t0.elapsed();
            let mut store = store::store(engine, c, wasi()?, PYTHON_INSTANCES)?;
            deadline_tick(engine, c, load, None);
            let t1 = Instant::now();
            let instance = pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", one_line(&e)))?;
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
        .map_err(|e| format!("the Python guest has no run export: {}", one_line(&e)))?;
    let times = limits::tell(Times { load, compile: None, instantiate: t1.elapsed(), started: Instant::now() });
    let size = store.data().limits.memory_peak();
    let mut call = || {
        let called = run.call(&mut store, (code, args, &c.env));
        limits::returned();
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
        .map_err(|e| format!("the Python guest has no turn export: {}", one_line(&e)))?;
    let mut times = Times { load, compile: None, instantiate: t1.elapsed(), started: Instant::now() };
    tell(&Account::Ready { load_ms: ms(times.load), instantiate_ms: ms(times.instantiate) });
    loop {
        let Some(frame) = next_frame()? else { return Ok(Ran::of(store, Ok(0), times)) };
        let fuel = turn_fuel(c.fuel, frame.fuel);
        if let Some(f) = fuel {
            store.set_fuel(f).map_err(|e| one_line(&e))?;
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
