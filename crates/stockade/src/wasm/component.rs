//! The pre-initialized Python guest, in the runner: a Wasm component (WASI preview 2) holding
//! CPython whose start-up ran once, when the guest was installed, and was snapshotted (see
//! `guests/python/`). Each run is a fresh instance of that snapshot: its linear memory mapped
//! copy-on-write from the artifact, so an instance costs what mapping it costs, not what
//! CPython's start-up does. Its `run` export gets the code and the arguments.
//!
//! This file: the component's imports resolved (WASI preview 2, and its `host` import: the jail's
//! host-call channel, and what the code gives back) and a preloaded guest's fresh instance; its runs are `python.rs`'s.
//!
//! Imports: shared.rs, store.rs; never preload.rs, python.rs or the runner's files above them.

use super::shared::one_line;
use super::store::{Instanced, State, fresh_store};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The core instances the Python component is made of (CPython, its libc and its extension
/// libraries, linked once at build time), with room for a rebuild: fixed by the guest, not by
/// the code it runs (Python code cannot instantiate Wasm), so `wasm.instances-max`, a bound on
/// what a module may instantiate, does not apply to it.
pub const PYTHON_INSTANCES: u32 = 32;

/// The guest's WASI (preview 2): its context and the resources it holds; and the jail's
/// host-call channel (requests, answers), when it has one.
pub(super) struct P2 {
    pub(super) ctx: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) host_calls: Option<(i32, i32)>,
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
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| one_line(&e))?;
    let mut host = linker.instance(HOST).map_err(|e| one_line(&e))?;
    host.func_wrap("call", |store: wasmtime::StoreContextMut<'_, State<P2>>, (name, args): (String, String)| {
        Ok((host_call(store.data().wasi.host_calls, &name, &args),))
    })
    .map_err(|e| one_line(&e))?;
    host.func_wrap("give", |mut store: wasmtime::StoreContextMut<'_, State<P2>>, (given,): (String,)| {
        store.data_mut().give(given.as_bytes());
        Ok(())
    })
    .map_err(|e| one_line(&e))?;
    linker.instantiate_pre(component).map_err(|e| format!("cannot link the Python guest: {}", one_line(&e)))
}

/// A preloaded Python guest's fresh instance, in a store of its own (see `preload.rs`).
pub(super) fn fresh(
    engine: &wasmtime::Engine,
    pre: &Pre,
) -> wasmtime::Result<Instanced<P2, wasmtime::component::Instance>> {
    let wasi = P2 { ctx: WasiCtx::builder().build(), table: ResourceTable::new(), host_calls: None };
    let mut store = fresh_store(engine, wasi);
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
