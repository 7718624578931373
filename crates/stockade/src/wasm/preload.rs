//! Guests loaded once by a process that builds many jails (`stockade serve`'s spawner, before it
//! forks the helpers that build them), so that each jail's runner is a copy of that process
//! instead of an exec of stockade (see [`crate::InProcess`]): no binary mapped and relocated,
//! no engine made, no artifact read and deserialized per run. The guest's memory images are made
//! once too, mapped copy-on-write from the artifact by every instance.
//!
//! The runner uses what was loaded only for the very artifact its configuration names (path,
//! device and inode, engine kind): anything else it loads itself, as an exec'd runner does.
//!
//! Each guest is also instantiated here, once, and never called: a [`Fresh`] instance. A
//! jail's runner, a copy of this process, runs its own copy of that instance (its linear memory
//! still the snapshot's image, its tables filled, not one of its functions ever called), so no
//! run pays for instantiating the guest, and no run sees another's: each copy is private to its
//! process, and dies with it. The runner first gives the copy its own WASI, limits, fuel and
//! deadline, and instantiates afresh instead when the run's limits would not have admitted the
//! instance (see [`super::limits::Limits::admits`]). A Python runner first faults in, as its own,
//! the pages of that instance's memory a run writes, and maps those it reads (see `pages.rs`).
//!
//! Imports: engine.rs, pages.rs, snapshot.rs, shared.rs, limits.rs, store.rs, p1calls.rs,
//! component.rs; never module.rs, python.rs or runner.rs.

use super::engine::{self, EngineKind};
use super::shared::one_line;
use super::store::State;
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// Which artifact, for which engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) path: PathBuf,
    /// Its device and inode, as the jail's plan checked them.
    pub(super) id: (u64, u64),
    pub(super) kind: EngineKind,
    /// The pre-initialized Python guest (a component), or a module.
    pub(super) component: bool,
}

/// A guest loaded into its engine, its imports resolved (WASI's).
pub(super) enum Guest {
    Component(super::component::Pre),
    Module(super::p1calls::Pre),
}

pub(super) struct Loaded {
    pub(super) key: Key,
    pub(super) engine: wasmtime::Engine,
    pub(super) guest: Guest,
    /// The fds the engine holds for it (the artifact's mapping, any memory image), sorted: a
    /// jail's runner keeps them.
    pub(super) fds: Vec<RawFd>,
    /// The guest instantiated here and never called, until a runner (a copy of this process)
    /// takes its copy.
    fresh: Mutex<Option<Fresh>>,
    /// The ranges of the fresh instance's linear memory a run of the Python guest writes or
    /// reads, which its runner faults in while it waits for its code (see `pages.rs`); empty for
    /// a module.
    pub(super) warm_pages: super::pages::Warm,
}

/// A guest's instance made by [`load`], in a store of its own whose limits recorded what the
/// instance took; never called.
pub(super) enum Fresh {
    Component(wasmtime::Store<State<super::component::P2>>, wasmtime::component::Instance),
    Module(wasmtime::Store<State<wasmtime_wasi::p1::WasiP1Ctx>>, wasmtime::Instance),
}

impl Loaded {
    /// This process's fresh instance of the guest, taken (a runner takes its own copy, once).
    pub(super) fn take_fresh(&self) -> Option<Fresh> {
        self.fresh.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

static LOADED: Mutex<Vec<Arc<Loaded>>> = Mutex::new(Vec::new());

/// Which artifact a runner's configuration `c` names, for which engine (`None`: it names none).
pub(super) fn key_of(c: &super::shared::RunnerConfig) -> Option<Key> {
    let kind = if c.fuel.is_some() { EngineKind::Fuel } else { EngineKind::Plain };
    let component = matches!(c.entry, super::shared::Entry::PythonRun { .. });
    Some(Key { path: c.artifact.clone()?, id: c.artifact_id, kind, component })
}

/// What was loaded for `key`.
pub(super) fn find(key: &Key) -> Option<Arc<Loaded>> {
    LOADED.lock().unwrap_or_else(PoisonError::into_inner).iter().find(|l| l.key == *key).cloned()
}

/// Loads the guest of `key` into this process (once). Its fds are numbered above those a jail's
/// channels take (the lower free numbers are held while it loads). `Err` in words.
pub(super) fn load(key: &Key) -> Result<(), String> {
    if find(key).is_some() {
        return Ok(());
    }
    let before = open_fds()?;
    let low = hold_low_numbers()?;
    let engine = engine::engine(key.kind).map_err(|e| e.to_string())?;
    let cannot = |e: wasmtime::Error| format!("cannot load {}: {e:#}", key.path.display());
    let instantiated = |e: wasmtime::Error| format!("cannot instantiate {}: {}", key.path.display(), one_line(&e));
    let (guest, fresh, warm_pages) = if key.component {
        let c = sys::load_component(&engine, &key.path, key.id).map_err(cannot)?;
        c.initialize_copy_on_write_image().map_err(cannot)?;
        let pre = super::component::instance_pre(&engine, &c)?;
        let fresh = super::component::fresh(&engine, &pre).map_err(instantiated)?;
        let warm_pages = warm_pages(key, fresh.0.data().limits.memory_peak()).unwrap_or_else(|e| {
            eprintln!("stockade serve: warm Python runners fault in no pages ahead of their runs: {e}");
            super::pages::Warm::default()
        });
        (Guest::Component(pre), Fresh::Component(fresh.0, fresh.1), warm_pages)
    } else {
        let m = sys::load_artifact(&engine, &key.path, key.id).map_err(cannot)?;
        m.initialize_copy_on_write_image().map_err(cannot)?;
        let pre = super::p1calls::instance_pre(&engine, &m, true, false)?;
        let fresh = super::p1calls::fresh(&engine, &pre).map_err(instantiated)?;
        (Guest::Module(pre), Fresh::Module(fresh.0, fresh.1), super::pages::Warm::default())
    };
    drop(low);
    let fds: Vec<RawFd> = open_fds()?.into_iter().filter(|fd| !before.contains(fd)).collect();
    let loaded = Loaded { key: key.clone(), engine, guest, fds, fresh: Mutex::new(Some(fresh)), warm_pages };
    LOADED.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::new(loaded));
    Ok(())
}

/// The ranges of the linear memory (`size` bytes) of the Python guest's fresh instance that a run
/// writes or reads, from the list installed beside its component (see `pages.rs`).
fn warm_pages(key: &Key, size: usize) -> Result<super::pages::Warm, String> {
    if !super::pages::kernel_populates() {
        return Err("this kernel cannot fault pages in ahead (MADV_POPULATE_WRITE and _READ, Linux 5.14)".into());
    }
    let dir = key.path.parent().unwrap_or(std::path::Path::new("/"));
    let component = super::snapshot::component_sha256(dir).map_err(|e| e.to_string())?;
    super::pages::ranges(&super::snapshot::pages_path(dir), &component, &key.path, key.id, size)
}

/// This process's open fds, sorted.
fn open_fds() -> Result<Vec<RawFd>, String> {
    let dir = std::fs::read_dir("/proc/self/fd").map_err(|e| format!("cannot list /proc/self/fd: {e}"))?;
    // The listing's own fd is among them, and closed by the time it is used.
    let mut fds: Vec<RawFd> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    fds.retain(|&fd| sys::fd_is_open(fd));
    fds.sort_unstable();
    Ok(fds)
}

/// Every free fd number below [`sys::FIRST_FREE_FD`], taken (by `/dev/null`) until dropped.
fn hold_low_numbers() -> Result<Vec<OwnedFd>, String> {
    let null = OwnedFd::from(std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?);
    let mut held = vec![null];
    loop {
        let fd = held[0].try_clone().map_err(|e| format!("cannot hold an fd: {e}"))?;
        if fd.as_raw_fd() >= sys::FIRST_FREE_FD {
            return Ok(held);
        }
        held.push(fd);
    }
}
