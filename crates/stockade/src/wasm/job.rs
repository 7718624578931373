//! A Wasm job ([`WasmJob`]): what a jail whose program is the runner runs, and a live Python
//! guest's images ([`LiveImages`]).
//!
//! Imports: guests.rs; never any other file of `crates/stockade/src/wasm/`.

use super::GuestCode;
use std::path::PathBuf;

/// A Wasm job: the code, its arguments, and where its files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmJob {
    pub code: GuestCode,
    pub args: Vec<String>,
    /// Host directory seen as `/app`, kept between runs; `None`: a fresh one, removed afterwards.
    pub workspace: Option<PathBuf>,
    /// Host directories the guest reads at the same path.
    pub data: Vec<PathBuf>,
    /// Where guests and artifacts live; `None`: [`super::guests::default_dir`].
    pub guest_dir: Option<PathBuf>,
    /// The stockade binary that runs as stage 2.
    pub runner: PathBuf,
    /// Bytes for the guest's stdin (`None`: its stdin is empty, unless its code comes there).
    pub stdin: Option<Vec<u8>>,
    /// A managed guest's artifact missing (or made by another engine) is compiled now, in this
    /// process, outside any jail (`stockade run`: the guest's bytes are pinned). `false` (a
    /// server): refused, naming `stockade guest install`.
    pub compile_guests: bool,
    /// The jail gets a host-call channel ([`crate::Job::host_calls`]) that the Python guest's
    /// `stockade_host` reaches (the other guests have no way to it: ignored for them).
    pub host_calls: bool,
    /// A live Python guest's images (see [`LiveImages`]): the jail is passed their files at its
    /// prestart ([`super::WasmPlan::prestart_passing`]). Ignored for the other guests.
    pub images: Option<LiveImages>,
    /// A batch's jail (see `batch.rs`): the code is a waiting interpreter's
    /// ([`GuestCode::PythonFromStdin`], [`GuestCode::JsFromStdin`]), each run of the batch a
    /// fresh instance of it, a turn of the jail ([`crate::TurnEnd::Account`]).
    pub batch: bool,
}

/// What a live Python guest's jail is passed ([`super::WasmPlan::prestart_passing`]), in this order: a
/// file it writes its image into when it is asked to hibernate (read and write, from its start:
/// what was there is cut off), and, when it resumes, the image it resumes from (read-only). A
/// fork's resumed interpreter has its `random` drawn again (`reseed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveImages {
    pub resume: bool,
    pub reseed: bool,
}

impl WasmJob {
    pub fn new(code: GuestCode, runner: impl Into<PathBuf>) -> WasmJob {
        WasmJob {
            code,
            args: Vec::new(),
            workspace: None,
            data: Vec::new(),
            guest_dir: None,
            runner: runner.into(),
            stdin: None,
            compile_guests: true,
            host_calls: false,
            images: None,
            batch: false,
        }
    }
}
