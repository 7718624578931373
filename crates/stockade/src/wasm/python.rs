//! The pre-initialized Python guest's runs in the runner (the guest: see `component.rs`): a
//! fresh instance of its snapshot for each run, or the one a preloading process made, whose
//! `run` export gets the code and the arguments ([`run_python`]), or whose `turn` export serves
//! a live session's turns ([`python_turns`]).
//!
//! Imports: shared.rs, limits.rs, turns.rs, store.rs, pages.rs, image.rs, component.rs,
//! preload.rs, deadline.rs; never module.rs or runner.rs.

use super::component::{P2, PYTHON_INSTANCES, instance_pre};
use super::deadline::deadline_tick;
use super::limits::{self, Times};
use super::shared::{RunnerConfig, one_line};
use super::store::{self, Ran, State, adopt, wasi_ctx};
use std::os::fd::AsFd;
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
    clock: Option<super::image::Resumed>,
) -> Result<Instantiated, String> {
    let artifact = c.artifact.as_ref().ok_or("no artifact of the Python guest")?;
    let clock = std::cell::Cell::new(clock);
    let wasi = || -> Result<P2, String> {
        let mut ctx = wasi_ctx(c)?;
        if let Some(clock) = clock.take() {
            ctx.monotonic_clock(clock);
        }
        Ok(P2 { ctx: ctx.build(), table: ResourceTable::new(), host_calls: c.host_calls })
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
    let (load, mut store, instance, t1) = instantiated(engine, c, loaded, t0, None)?;
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

/// Serves a live session's turns (see `turns.rs`): the guest instantiated once, its prologue run
/// (an empty first turn: the resources every instance's first turn makes, made in the same
/// order), or, resuming from an image (`image.rs`), the hibernated interpreter given back; then
/// its `turn` export called with each turn's code and stdin, in one main module; each return is
/// said on the summary channel with the turn's figures, and the next frame waited for. A
/// hibernation's frame writes the image and says so; the guest goes on waiting. A trap (out of
/// fuel, a stack exhausted) ends the guest: its instance cannot be called again. The runner's
/// end of input ends it as an exit.
pub(super) fn python_turns(
    engine: &wasmtime::Engine,
    c: &RunnerConfig,
    loaded: Option<&super::preload::Loaded>,
    t0: Instant,
) -> Result<Ran, String> {
    use super::turns::{Account, Next, next_frame, tell, turn_fuel};
    let images = c.images.as_ref().map(Images::take).transpose()?;
    let resume = match images.as_ref().and_then(|i| i.resume.as_ref()) {
        Some(fd) => Some(super::image::trailer(fd.as_fd())?),
        None => None,
    };
    let clock = super::image::Resumed { from_ns: resume.as_ref().map_or(0, |t| t.clock_ns), since: Instant::now() };
    let (load, mut store, instance, t1) = instantiated(engine, c, loaded, t0, Some(clock))?;
    let turn = instance
        .get_typed_func::<(&str, &[u8], &[(String, String)]), (i32,)>(&mut store, "turn")
        .map_err(|e| format!("the Python guest has no turn export: {}", one_line(&e)))?;
    let mut times = Times { load, compile: None, instantiate: t1.elapsed(), started: Instant::now() };
    let mut live = Live { instance, clock, baseline: 0, mapped: Vec::new() };
    live.call(&mut store, c, "")?;
    live.baseline = resources(&mut store);
    let resumed = match (&images, &resume) {
        (Some(Images { resume: Some(fd), reseed, .. }), Some(t)) => {
            Some(live.resume(&mut store, c, fd.as_fd(), t, *reseed)?)
        }
        _ => None,
    };
    tell(&Account::Ready { load_ms: ms(times.load), instantiate_ms: ms(times.instantiate), resumed });
    loop {
        let frame = match next_frame()? {
            None => return Ok(Ran::of(store, Ok(0), times)),
            Some(Next::Hibernate) => {
                let out = images.as_ref().map(|i| i.hibernate.as_fd());
                tell(&live.hibernate(&mut store, c, out)?);
                continue;
            }
            Some(Next::Turn(frame)) => frame,
        };
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
        let mut given = std::mem::take(&mut store.data_mut().given);
        tell(&Account::turn(status, fuel, left, &store.data().limits, times.started, &mut given));
    }
}

/// A live guest's image files, taken from the fds the supervisor passed (see
/// [`super::shared::ImageFds`]).
struct Images {
    hibernate: std::os::fd::OwnedFd,
    resume: Option<std::os::fd::OwnedFd>,
    reseed: bool,
}

impl Images {
    fn take(fds: &super::shared::ImageFds) -> Result<Images, String> {
        let take = |fd: i32| crate::sys::take_inherited_fd(fd).ok_or(format!("the image's fd {fd} is not open"));
        Ok(Images { hibernate: take(fds.hibernate)?, resume: fds.resume.map(take).transpose()?, reseed: fds.reseed })
    }
}

/// The host resources the guest holds now (its streams, its preopened directories' descriptors,
/// files it opened).
fn resources(store: &mut wasmtime::Store<State<P2>>) -> u64 {
    store.data_mut().wasi.table.iter_mut().count() as u64
}

/// A live guest between its turns: its instance, its clock, the resources its prologue made,
/// the runs of its memory mapped from the image it resumed from.
struct Live {
    instance: Instance,
    clock: super::image::Resumed,
    baseline: u64,
    mapped: Vec<(usize, usize)>,
}

/// The fuel a turn of the runner's own (a prologue, a resume's warm-up) runs with when the guest
/// is fuel-metered: its start-up's, more than any of them takes.
const OWN_TURN_FUEL: u64 = 5_000_000_000;

impl Live {
    /// A turn of the runner's own: `code`, in the guest's main module (it binds no name there).
    fn call(&self, store: &mut wasmtime::Store<State<P2>>, c: &RunnerConfig, code: &str) -> Result<(), String> {
        if c.fuel.is_some() {
            store.set_fuel(OWN_TURN_FUEL).map_err(|e| one_line(&e))?;
        }
        let turn = self
            .instance
            .get_typed_func::<(&str, &[u8], &[(String, String)]), (i32,)>(&mut *store, "turn")
            .map_err(|e| format!("the Python guest has no turn export: {}", one_line(&e)))?;
        match turn.call(&mut *store, (code, &[], &c.env)) {
            Ok((0,)) => Ok(()),
            Ok((status,)) => Err(format!("the interpreter's own turn ended with status {status}")),
            Err(e) => Err(format!("the interpreter's own turn failed: {}", one_line(&e))),
        }
    }

    /// The guest's linear memory in this process, `size` bytes now.
    fn memory(store: &wasmtime::Store<State<P2>>, c: &RunnerConfig) -> Result<(super::pages::Memory, usize), String> {
        let artifact = c.artifact.as_ref().ok_or("no artifact of the Python guest")?;
        let size = store.data().limits.memory_peak();
        Ok((super::pages::linear_memory(artifact, c.artifact_id, size)?, size))
    }

    /// Gives this fresh instance (its prologue run) the interpreter of image `image` (its trailer
    /// `t`): its memory grown to the image's, checked to hold as many resources as the image's
    /// did, given the image's pages; a fork's `random` reseeded.
    fn resume(
        &mut self,
        store: &mut wasmtime::Store<State<P2>>,
        c: &RunnerConfig,
        image: std::os::fd::BorrowedFd<'_>,
        t: &super::image::Trailer,
        reseed: bool,
    ) -> Result<super::turns::ResumedFrom, String> {
        let t0 = Instant::now();
        for i in 0..4usize {
            let (_, size) = Live::memory(store, c)?;
            let Some(short) = t.memory_bytes.checked_sub(size).filter(|n| *n > 0) else { break };
            let more = short + (i << 20);
            // A buffer that size, never written and dropped at once (`os.read` allocates its
            // buffer before it finds the fd bad): the memory grows, and stays grown, untouched
            // (what the allocator had free at its top grows it less: asked again).
            let grow = format!("exec('import os\\ntry: os.read(-1, {more})\\nexcept OSError: pass', {{}})");
            self.call(store, c, &grow)?;
        }
        if self.baseline != t.resources {
            return Err(format!(
                "the resumed interpreter holds {} host resources after its prologue, its image {}",
                self.baseline, t.resources
            ));
        }
        let (m, size) = Live::memory(store, c)?;
        self.mapped = super::image::restore(&m, size, image, t)?;
        if reseed {
            self.call(store, c, "__import__('random').seed()")?;
        }
        Ok(super::turns::ResumedFrom {
            image_pages: t.pages(),
            memory_bytes: t.memory_bytes,
            restore_ms: ms(t0.elapsed()),
        })
    }

    /// Writes the interpreter's image to `out` (its files left open closed first: they cannot
    /// cross); what it says on the summary channel. `Err` when the image failed once begun (the
    /// pipe holds part of one): the interpreter ends.
    fn hibernate(
        &self,
        store: &mut wasmtime::Store<State<P2>>,
        c: &RunnerConfig,
        out: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> Result<super::turns::Account, String> {
        use super::turns::Account;
        let t0 = Instant::now();
        let Some(out) = out else {
            return Ok(Account::NotHibernated { why: "this interpreter has no image file".into() });
        };
        let not = |why: String| {
            super::image::none(out);
            Ok(Account::NotHibernated { why })
        };
        if resources(store) > self.baseline
            && let Err(why) = self.call(store, c, CLOSE_FILES)
        {
            return not(why);
        }
        let held = resources(store);
        if held != self.baseline {
            return not(format!(
                "it holds {} host resources its prologue did not make (files or directories opened with os.open, or sockets), which cannot cross a hibernation",
                held - self.baseline.min(held)
            ));
        }
        let clock_ns =
            self.clock.from_ns.saturating_add(u64::try_from(self.clock.since.elapsed().as_nanos()).unwrap_or(0));
        let dumped = Live::memory(store, c)
            .and_then(|(m, size)| super::image::dump(&m, size, out, clock_ns, held, &self.mapped));
        let (t, bytes) = dumped?;
        Ok(Account::Hibernated {
            image_bytes: bytes,
            image_pages: t.pages(),
            memory_bytes: t.memory_bytes,
            write_ms: ms(t0.elapsed()),
        })
    }
}

/// Closes every file object the interpreter holds open but its standard streams (a file left
/// open cannot cross a hibernation: a closed one says so when it is used), in a namespace of its
/// own (no name of the session's is bound or changed).
const CLOSE_FILES: &str = "exec(\"import gc, io\nfor o in gc.get_objects():\n    try:\n        if isinstance(o, io.IOBase) and not o.closed and o.fileno() > 2: o.close()\n    except Exception: pass\nfor o in gc.get_objects():\n    if type(o).__name__ == 'ScandirIterator': o.close()\n\", {})";

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
