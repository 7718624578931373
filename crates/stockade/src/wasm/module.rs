//! A WASI preview 1 command module's run in the runner: loaded (or compiled here, from its bytes
//! on stdin, its artifact handed to the supervisor on fd 4), instantiated (or the fresh instance
//! a preloading process made taken), its `_start` called.
//!
//! Imports: shared.rs, limits.rs, stdin.rs, turns.rs, store.rs, p1calls.rs, preload.rs,
//! exit.rs, deadline.rs, image.rs, jsimage.rs; never runner.rs.

use super::deadline::deadline_tick;
use super::exit::{ms, summary_out};
use super::limits::{Times, returned, tell};
use super::p1calls::instance_pre;
use super::shared::{ARTIFACT_FD, COMPILE_MARKER, RunnerConfig, one_line};
use super::store::{self, Ran, State, adopt, wasi_ctx};
use std::io::Write;
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime_wasi::p1::WasiP1Ctx;

/// A command module's run (begun at `t0`): loaded (or compiled here), instantiated (or the copy
/// of the instance this process made ahead taken), its `_start` called.
pub(super) fn start(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Ran, String> {
    let fresh = match loaded.and_then(super::preload::Loaded::take_fresh) {
        Some(super::preload::Fresh::Module(store, instance)) => {
            adopt((store, instance), c, wasi_ctx(c)?.build_p1(), c.instances_max)?
        }
        _ => None,
    };
    // A live JavaScript guest's images: its clock goes on from the one it resumes from.
    let js = match (&c.images, c.turns) {
        (Some(fds), true) => Some(super::jsimage::JsImages::take(fds)?),
        _ => None,
    };
    let fresh = if js.is_some() { None } else { fresh };
    let Made { load, compile, mut store, instance, t1 } = match fresh {
        Some((store, instance)) => {
            let load = t0.elapsed();
            deadline_tick(engine, c, load, None);
            Made { load, compile: None, store, instance, t1: Instant::now() }
        }
        None => instantiate_module(engine, c, loaded, t0, js.as_ref().map(|j| j.clock))?,
    };
    store.data_mut().js = js;
    let start =
        instance.get_typed_func::<(), ()>(&mut store, "_start").map_err(|e| format!("no _start: {}", one_line(&e)))?;
    let times = tell(Times { load, compile, instantiate: t1.elapsed(), started: Instant::now() });
    if let Some(t) = store.data_mut().turn.as_mut() {
        // Said at its first read of stdin, where it waits for its first turn.
        t.ready = Some(super::turns::Account::Ready {
            load_ms: ms(times.load),
            instantiate_ms: ms(times.instantiate),
            resumed: None,
        });
    }
    let result = start.call(&mut store, ()).map(|()| 0);
    returned();
    Ok(Ran::of(store, result, times))
}

/// A command module's instance, ready for its `_start`: how long loading and compiling took,
/// and when instantiating began.
struct Made {
    load: Duration,
    compile: Option<Duration>,
    store: Store<State<WasiP1Ctx>>,
    instance: wasmtime::Instance,
    t1: Instant,
}

/// The module loaded (or compiled here) and instantiated in this run (`t0`: when the run began).
fn instantiate_module(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
    clock: Option<super::image::Resumed>,
) -> Result<Made, String> {
    let (pre, compile) = match (&c.artifact, c.module_bytes, loaded.map(|l| &l.guest)) {
        (Some(_), _, Some(super::preload::Guest::Module(pre))) => (pre.clone(), None),
        (Some(artifact), _, _) => match crate::sys::load_artifact(engine, artifact, c.artifact_id) {
            Ok(m) => (instance_pre(engine, &m, c.host_calls.is_some(), c.turns)?, None),
            Err(e) => return Err(format!("cannot load {}: {}", artifact.display(), one_line(&e))),
        },
        (None, Some(size), _) => {
            let (m, took) = compile(engine, size)?;
            (instance_pre(engine, &m, c.host_calls.is_some(), c.turns)?, Some(took))
        }
        (None, None, _) => return Err("no artifact and no module to compile".into()),
    };
    let load = t0.elapsed() - compile.unwrap_or_default();
    let mut ctx = wasi_ctx(c)?;
    if let Some(clock) = clock {
        ctx.monotonic_clock(clock);
    }
    let mut store = store::store(engine, c, ctx.build_p1(), c.instances_max)?;
    deadline_tick(engine, c, load, compile);
    let t1 = Instant::now();
    let instance = pre.instantiate(&mut store).map_err(|e| format!("cannot instantiate: {}", one_line(&e)))?;
    std::mem::forget(pre);
    Ok(Made { load, compile, store, instance, t1 })
}

/// Reads the module (`size` bytes) from stdin, compiles it, and hands the serialized artifact to
/// the supervisor on fd 4, all before any of its code can run.
fn compile(engine: &wasmtime::Engine, size: u64) -> Result<(wasmtime::Module, Duration), String> {
    use std::io::Read;
    if let Some(f) = summary_out().as_mut() {
        let _ = writeln!(f, "{COMPILE_MARKER}");
    }
    let mut bytes = Vec::new();
    // Unbuffered: the guest's stdin is what follows the module, byte for byte.
    super::stdin::stdin_file()
        .and_then(|f| f.take(size).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read the module from stdin: {e}"))?;
    if bytes.len() as u64 != size {
        return Err(format!("the module on stdin has {} bytes, not {size}", bytes.len()));
    }
    let t = Instant::now();
    let module = wasmtime::Module::new(engine, &bytes).map_err(|e| format!("cannot compile: {}", one_line(&e)))?;
    let took = t.elapsed();
    if let Some(fd) = crate::sys::take_inherited_fd(ARTIFACT_FD) {
        let artifact = module.serialize().map_err(|e| format!("cannot serialize: {}", one_line(&e)))?;
        let _ = std::fs::File::from(fd).write_all(&artifact);
    }
    Ok((module, took))
}
