//! One engine configuration per kind of run, shared by the precompiler and the runner: an
//! artifact only loads into an engine configured exactly as the one that made it, so the
//! artifact's name carries a key derived from the wasmtime version and this configuration.

use wasmtime::{Config, Engine, OptLevel};

/// The bounded Wasm stack every guest gets, bytes.
pub const WASM_STACK_BYTES: usize = 1 << 20;

/// Which engine configuration: fuel metering changes the compiled code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Epoch interruption only (the wall-clock limit).
    Epoch,
    /// Epoch interruption and fuel metering (`wasm.fuel`).
    EpochFuel,
}

/// The engine configuration for a kind.
pub fn config(kind: EngineKind) -> Config {
    let mut c = Config::new();
    c.epoch_interruption(true);
    c.consume_fuel(kind == EngineKind::EpochFuel);
    c.max_wasm_stack(WASM_STACK_BYTES);
    c.cranelift_opt_level(OptLevel::Speed);
    c.parallel_compilation(true);
    c
}

/// The artifact key: wasmtime's version, the kind, and a version of this configuration (bump
/// it whenever `config` changes).
pub fn key(kind: EngineKind) -> String {
    const CONFIG_VERSION: u32 = 1;
    let k = match kind {
        EngineKind::Epoch => "epoch",
        EngineKind::EpochFuel => "epoch-fuel",
    };
    format!("wasmtime-{}-{k}-c{CONFIG_VERSION}", env!("STOCKADE_WASMTIME_VERSION"))
}

pub fn engine(kind: EngineKind) -> wasmtime::Result<Engine> {
    Engine::new(&config(kind))
}

/// Compiles a module for `kind` (outside any jail, once per module and key).
pub fn precompile(wasm: &[u8], kind: EngineKind) -> wasmtime::Result<Vec<u8>> {
    engine(kind)?.precompile_module(wasm)
}
