//! One engine configuration per kind of run, shared by the precompiler and the runner: an
//! artifact only loads into an engine configured exactly as the one that made it, so the
//! artifact's name carries a key derived from the wasmtime version and this configuration.
//!
//! Imports: no file of `crates/stockade/src/wasm/`.

use wasmtime::{Config, Engine, OptLevel};

/// The bounded Wasm stack every guest gets, bytes.
pub const WASM_STACK_BYTES: usize = 1 << 20;

/// Which engine configuration: what is compiled into the guest's code to bound it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Nothing: the wall-clock limit is the runner's own deadline, which ends the runner's
    /// process (see `deadline::deadline_tick`). No check runs in the guest's code (epoch checks at
    /// every loop and call cost a CPU-bound Python loop 1.27x).
    Plain,
    /// Fuel metering (`wasm.fuel`) and epoch interruption: such a run traps at its deadline
    /// inside its code, so the fuel it consumed is known when it is interrupted.
    Fuel,
}

impl EngineKind {
    /// Every kind: a guest is installed with an artifact for each.
    pub const ALL: [EngineKind; 2] = [EngineKind::Plain, EngineKind::Fuel];
}

/// The engine configuration for a kind.
pub fn config(kind: EngineKind) -> Config {
    let mut c = Config::new();
    c.epoch_interruption(kind == EngineKind::Fuel);
    c.consume_fuel(kind == EngineKind::Fuel);
    c.max_wasm_stack(WASM_STACK_BYTES);
    c.cranelift_opt_level(OptLevel::Speed);
    c.parallel_compilation(true);
    // Tables filled at instantiation rather than on each entry's first use: a preloaded guest's
    // fresh instance (see `preload.rs`) is made once, whole, and every run's copy of it finds
    // its indirect-call targets ready (the Python guest's tables hold thousands of functions,
    // each resolved per run otherwise). Indirect calls skip the lazy-init check too.
    c.table_lazy_init(false);
    c
}

/// The artifact key: wasmtime's version, the kind, and a version of this configuration (bump
/// it whenever `config` changes).
pub fn key(kind: EngineKind) -> String {
    const CONFIG_VERSION: u32 = 3;
    let k = match kind {
        EngineKind::Plain => "plain",
        EngineKind::Fuel => "fuel",
    };
    format!("{}{k}-c{CONFIG_VERSION}", key_prefix())
}

/// What every artifact key of this wasmtime starts with (an artifact of another wasmtime is
/// another build's, kept for it).
pub fn key_prefix() -> String {
    format!("wasmtime-{}-", env!("STOCKADE_WASMTIME_VERSION"))
}

pub fn engine(kind: EngineKind) -> wasmtime::Result<Engine> {
    Engine::new(&config(kind))
}

/// The engine of a batch's runner (see `batch.rs`): `kind`'s, its instances from a pool of
/// slots made once (`instances` core instances in one, at most), each linear memory at most `memory_max` bytes and table `table_elements`.
/// An instance's slot is set back to the guest's image when it is dropped, the pages it wrote
/// copied back from the image and kept resident (found with `PAGEMAP_SCAN` where the kernel
/// has it, 6.7): the next instance takes no page fault for them. It loads the same artifacts
/// (where instances come from is not compiled into them).
pub fn batch_engine(
    kind: EngineKind,
    instances: u32,
    memory_max: u64,
    table_elements: u64,
) -> wasmtime::Result<Engine> {
    use wasmtime::{Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};
    let mut pool = PoolingAllocationConfig::new();
    // One instance at a time (a component's core instances, memories and tables, with room).
    pool.total_component_instances(2)
        .total_core_instances(2 * instances)
        .max_core_instances_per_component(instances)
        .total_memories(8)
        .max_memories_per_component(4)
        .total_tables(64)
        .max_tables_per_component(32)
        .max_tables_per_module(8)
        .max_core_instance_size(8 << 20)
        .max_component_instance_size(8 << 20)
        .table_elements(usize::try_from(table_elements).unwrap_or(usize::MAX).min(1 << 16))
        .max_memory_size(usize::try_from(memory_max).unwrap_or(usize::MAX))
        .linear_memory_keep_resident(BATCH_KEEP_RESIDENT)
        .table_keep_resident(1 << 19)
        .pagemap_scan(Enabled::Auto);
    let mut c = config(kind);
    c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&c)
}

/// How much of a batch's instance's memory is set back to the image by copy, and kept resident,
/// when it is dropped (the rest is given back to the kernel).
pub const BATCH_KEEP_RESIDENT: usize = 64 << 20;

/// Compiles a module, or a component (the pre-initialized Python guest), for `kind` (outside
/// any jail, once per module and key).
pub fn precompile(wasm: &[u8], kind: EngineKind) -> wasmtime::Result<Vec<u8>> {
    let engine = engine(kind)?;
    if wasmparser::Parser::is_component(wasm) {
        engine.precompile_component(wasm)
    } else {
        engine.precompile_module(wasm)
    }
}

/// What this binary's engine of `kind` writes into every artifact it makes: the bytes of the
/// artifact's `.wasmtime.engine` section (wasmtime's version, the target, the compiler flags and
/// settings such as fuel metering). Learned once per process from an empty module's artifact.
fn fingerprint(kind: EngineKind) -> Result<&'static [u8], String> {
    use std::sync::OnceLock;
    static PLAIN: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    static FUEL: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    let cell = match kind {
        EngineKind::Plain => &PLAIN,
        EngineKind::Fuel => &FUEL,
    };
    let made = cell.get_or_init(|| {
        // On this thread alone: parallel compilation would start a pool of threads that stays
        // (and `stockade serve` learns this before it forks its single-threaded spawner). The
        // setting is not written into artifacts.
        let mut config = config(kind);
        config.parallel_compilation(false);
        let empty = Engine::new(&config)
            .and_then(|e| e.precompile_module(b"\0asm\x01\0\0\0"))
            .map_err(|e| format!("cannot make an empty artifact: {e}"))?;
        engine_section(&empty[..])
    });
    made.as_deref().map_err(Clone::clone)
}

/// The `.wasmtime.engine` section of an artifact (an ELF file).
fn engine_section<'d, R: object::ReadRef<'d>>(data: R) -> Result<Vec<u8>, String> {
    use object::{Object, ObjectSection};
    let file = object::read::elf::ElfFile64::<object::Endianness, R>::parse(data)
        .map_err(|e| format!("not an artifact of wasmtime: {e}"))?;
    let section = file.section_by_name(".wasmtime.engine").ok_or("not an artifact of wasmtime: no engine section")?;
    section.data().map(<[u8]>::to_vec).map_err(|e| format!("its engine section: {e}"))
}

/// Whether the artifact at `path` was made by this binary's engine of `kind` (`Err` says how
/// it differs, or why it cannot be read): checked before a jail is given it, so that an artifact
/// of another configuration or version is never what a run fails on. Reads only the file's
/// headers and that section.
pub fn check_artifact(path: &std::path::Path, kind: EngineKind) -> Result<(), String> {
    let want = fingerprint(kind)?;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let cache = object::ReadCache::new(file);
    if engine_section(&cache)? == want {
        Ok(())
    } else {
        Err(format!("it was made by another engine than this stockade's ({})", key(kind)))
    }
}
