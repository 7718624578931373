//! Which file runs: resolved and opened on the host before fork, executed from that fd.
//!
//! No path inside the jail decides what runs. The program (or, for a `#!` script, its
//! interpreter) is opened `O_PATH` here and the child calls `execveat(fd, "", AT_EMPTY_PATH)`.
//! Scripts are unwrapped here as the kernel would (interpreter, optional argument, script path),
//! so the exec fd can stay close-on-exec and no fd leaks into the program. Every file involved
//! (program, interpreters, the ELF loader) must also be visible inside the jail, or the run is
//! refused with the path named.
//!
//! Imports (layers): `layers`, `policy`, `report`, `sys`.

use crate::layers::filesystem::FsPlan;
use crate::report::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};
use crate::sys;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why the program cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("program {name:?}: not found in the jail's PATH ({path})")]
    NotInPath { name: String, path: String },
    #[error("program {}: {}", path.display(), sys::describe_errno(source.raw_os_error().unwrap_or(0)))]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{what} {} is not visible inside the jail; grant it (or its directory) with --ro or filesystem.read-only",
        path.display()
    )]
    NotVisible { what: &'static str, path: PathBuf },
    #[error("program {}: {reason}", path.display())]
    NotExecutable { path: PathBuf, reason: &'static str },
    #[error("program {}: more than 4 levels of #! interpreters", path.display())]
    TooManyInterpreters { path: PathBuf },
    #[error("program: the name is empty")]
    Empty,
}

impl ProgramError {
    /// The exit code `stockade run` uses: 127 not found, 126 not executable.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProgramError::NotExecutable { .. } | ProgramError::TooManyInterpreters { .. } => EXIT_NOT_EXECUTABLE,
            ProgramError::Open { source, .. } if source.kind() != std::io::ErrorKind::NotFound => EXIT_NOT_EXECUTABLE,
            _ => EXIT_NOT_FOUND,
        }
    }
}

/// The file to exec and its argument vector.
#[derive(Debug)]
pub struct ProgramPlan {
    /// `O_PATH` fd of the file the kernel will run (the program, or its script interpreter).
    pub exe: OwnedFd,
    pub argv: Vec<CString>,
    /// argv as strings, for the report.
    pub argv_display: Vec<String>,
    /// The program as the caller named it.
    pub name: String,
}

/// Resolves `program` (searching `path_var` when it has no `/`), checks it and everything it
/// needs is visible inside, and opens it.
pub fn prepare(program: &str, args: &[String], path_var: &str, fs: &FsPlan) -> Result<ProgramPlan, ProgramError> {
    if program.is_empty() {
        return Err(ProgramError::Empty);
    }
    let mut path = if program.contains('/') {
        let p = Path::new(program);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().map_err(|source| ProgramError::Open { path: p.into(), source })?.join(p)
        }
    } else {
        search(program, path_var, fs)?
    };
    let mut argv: Vec<Vec<u8>> =
        std::iter::once(program.as_bytes().to_vec()).chain(args.iter().map(|a| a.as_bytes().to_vec())).collect();
    let mut what = "program";
    for _level in 0..5 {
        let inside = visible(&path, what, fs)?;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(&inside)
            .map_err(|source| ProgramError::Open { path: path.clone(), source })?;
        let meta = file.metadata().map_err(|source| ProgramError::Open { path: path.clone(), source })?;
        if meta.is_dir() {
            return Err(ProgramError::NotExecutable { path, reason: "is a directory" });
        }
        if !meta.is_file() {
            return Err(ProgramError::NotExecutable { path, reason: "is not a regular file" });
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(ProgramError::NotExecutable { path, reason: "has no execute permission" });
        }
        match read_head(&inside) {
            Head::Script { interpreter, arg } => {
                // As the kernel does: [interpreter, arg?, script path, original args after argv[0]...].
                argv[0] = path.as_os_str().as_bytes().to_vec();
                if let Some(a) = arg {
                    argv.insert(0, a);
                }
                argv.insert(0, interpreter.as_os_str().as_bytes().to_vec());
                path = interpreter;
                what = "script interpreter";
            }
            Head::Elf { loader } => {
                if let Some(loader) = loader {
                    visible(&loader, "ELF interpreter", fs)?;
                }
                return Ok(finish(file, argv, program));
            }
            Head::Other => return Ok(finish(file, argv, program)),
        }
    }
    Err(ProgramError::TooManyInterpreters { path })
}

fn finish(file: File, argv: Vec<Vec<u8>>, program: &str) -> ProgramPlan {
    let argv_display = argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    // Arguments come from Rust strings or file bytes cut at NUL/newline: no interior NUL.
    let argv = argv.into_iter().map(|a| CString::new(a).unwrap_or_default()).collect();
    ProgramPlan { exe: file.into(), argv, argv_display, name: program.to_string() }
}

/// The canonical path of `path` as the jail sees it; it must be a host file inside a grant.
fn visible(path: &Path, what: &'static str, fs: &FsPlan) -> Result<PathBuf, ProgramError> {
    match fs.resolve_inside(path) {
        Some(p) if fs.host_backed(&p) => Ok(p),
        _ if !path.exists() => Err(ProgramError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        }),
        _ => Err(ProgramError::NotVisible { what, path: path.to_path_buf() }),
    }
}

fn search(name: &str, path_var: &str, fs: &FsPlan) -> Result<PathBuf, ProgramError> {
    for dir in path_var.split(':').filter(|d| d.starts_with('/')) {
        let candidate = Path::new(dir).join(name);
        let Some(inside) = fs.resolve_inside(&candidate) else { continue };
        if !fs.host_backed(&inside) {
            continue;
        }
        if let Ok(meta) = std::fs::metadata(&inside)
            && meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
        {
            return Ok(candidate);
        }
    }
    Err(ProgramError::NotInPath { name: name.into(), path: path_var.into() })
}

enum Head {
    Script { interpreter: PathBuf, arg: Option<Vec<u8>> },
    Elf { loader: Option<PathBuf> },
    Other,
}

/// Looks at the start of a file: `#!` line, or an ELF's PT_INTERP. Unreadable files are left to
/// the kernel to judge at exec.
fn read_head(path: &Path) -> Head {
    let Ok(mut f) = File::open(path) else { return Head::Other };
    let mut buf = [0u8; 256];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let head = &buf[..n];
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let line = line.split(|&b| b == 0).next().unwrap_or(&[]);
        let trimmed = line.trim_ascii();
        let (interp, rest) = match trimmed.iter().position(|b| *b == b' ' || *b == b'\t') {
            Some(i) => (&trimmed[..i], trimmed[i..].trim_ascii()),
            None => (trimmed, &[][..]),
        };
        if interp.is_empty() {
            return Head::Other;
        }
        return Head::Script {
            interpreter: PathBuf::from(std::ffi::OsStr::from_bytes(interp)),
            arg: (!rest.is_empty()).then(|| rest.to_vec()),
        };
    }
    if head.starts_with(b"\x7fELF") && head.len() >= 64 && head[4] == 2 && head[5] == 1 {
        return Head::Elf { loader: elf_interp(&f, head) };
    }
    Head::Other
}

/// PT_INTERP of a 64-bit little-endian ELF.
fn elf_interp(f: &File, header: &[u8]) -> Option<PathBuf> {
    let u16_at =
        |b: &[u8], o: usize| -> Option<usize> { Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?).into()) };
    let u32_at = |b: &[u8], o: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    let u64_at = |b: &[u8], o: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)) };
    let phoff = u64_at(header, 32)?;
    let phentsize = u16_at(header, 54)?;
    let phnum = u16_at(header, 56)?;
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut table = vec![0u8; phentsize * phnum];
    f.read_exact_at(&mut table, phoff).ok()?;
    for i in 0..phnum {
        let ph = table.get(i * phentsize..)?;
        if u32_at(ph, 0)? == 3 {
            let (off, size) = (u64_at(ph, 8)?, u64_at(ph, 32)?);
            if size == 0 || size > 4096 {
                return None;
            }
            let mut name = vec![0u8; usize::try_from(size).ok()?];
            f.read_exact_at(&mut name, off).ok()?;
            let name = name.split(|&b| b == 0).next()?;
            return Some(PathBuf::from(std::ffi::OsStr::from_bytes(name)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::filesystem;
    use crate::policy::Policy;

    fn fs_with(ro: &[&str]) -> FsPlan {
        let mut p = Policy::builtin();
        for r in ro {
            p.add_read_only(r, "--ro").expect("valid");
        }
        filesystem::prepare(&p, &crate::layers::identity::prepare(&p).expect("ids")).expect("plan")
    }

    #[test]
    fn finds_sh_on_the_jail_path_and_its_loader_is_visible() {
        let fs = fs_with(&[]);
        let plan = prepare("sh", &["-c".into(), "true".into()], "/usr/bin:/bin", &fs).expect("sh");
        assert_eq!(plan.argv_display, ["sh", "-c", "true"]);
    }

    #[test]
    fn unwraps_scripts_like_the_kernel() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh -e\necho hi\n").expect("write");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let d = dir.path().to_str().expect("utf8");
        let fs = fs_with(&[d]);
        let s = script.to_str().expect("utf8");
        let plan = prepare(s, &["a".into()], "/usr/bin", &fs).expect("script");
        assert_eq!(plan.argv_display, ["/bin/sh", "-e", s, "a"]);
    }

    #[test]
    fn refuses_what_the_jail_cannot_see_or_run() {
        let fs = fs_with(&[]);
        let err = prepare("/etc/hostname", &[], "", &fs).expect_err("not visible");
        assert!(matches!(err, ProgramError::NotVisible { .. }), "{err}");
        assert_eq!(err.exit_code(), EXIT_NOT_FOUND);
        let err = prepare("no-such-program-xyz", &[], "/usr/bin", &fs).expect_err("missing");
        assert_eq!(err.to_string(), "program \"no-such-program-xyz\": not found in the jail's PATH (/usr/bin)");
        let err = prepare("/usr/bin", &[], "", &fs).expect_err("dir");
        assert_eq!(err.exit_code(), EXIT_NOT_EXECUTABLE);
        let err = prepare("/nonexistent/x", &[], "", &fs).expect_err("missing");
        assert_eq!(err.exit_code(), EXIT_NOT_FOUND);
    }
}
