//! Exec of listed programs only (`process.exec-allow`): the files a run may exec after its
//! program starts, resolved on the host before fork. Whatever path, link or fd names one, a file
//! is its device and inode (a bind shows the host's inode). Two layers hold the list:
//!
//! - Landlock grants the execute right on these files alone, with each one's ELF interpreter
//!   (the kernel opens it for exec too) and the program's own; the read-only grants lose it. This
//!   is the kernel's check, on the file the exec opens: no race can move it.
//! - The seccomp listener, which sees every exec after the first, lets one through only when the
//!   file it names is listed (an ELF interpreter named as the program is not), and refuses the
//!   rest with EPERM, saying which (the report's notes). It reads the path from the caller's
//!   memory, which another of its threads can change after the check: that race can reach only
//!   what Landlock allows, so the residue is the interpreter run as a program, which can load any
//!   file the jail can read as one (`ld.so FILE`).
//!
//! Imports (layers): `policy`.

use crate::policy::{Policy, PolicyError};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The files of `process.exec-allow`, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecAllow {
    /// Each listed file as resolved on the host (links followed), with its device and inode.
    pub files: Vec<(PathBuf, (u64, u64))>,
    /// Their ELF interpreters (executable by Landlock, not by the listener).
    pub interpreters: Vec<PathBuf>,
}

/// Resolves the policy's list (`None`: it has none). Each entry must be a regular, executable
/// file on the host; refused naming `process.exec-allow[i]` otherwise.
pub fn prepare(policy: &Policy) -> Result<Option<ExecAllow>, PolicyError> {
    if policy.exec_allow.is_empty() {
        return Ok(None);
    }
    let mut out = ExecAllow::default();
    for (i, p) in policy.exec_allow.iter().enumerate() {
        let refuse = |why: String| PolicyError::Override { flag: format!("process.exec-allow[{i}]"), message: why };
        let real = std::fs::canonicalize(p).map_err(|e| refuse(format!("{}: {e}", p.display())))?;
        let m = std::fs::metadata(&real).map_err(|e| refuse(format!("{}: {e}", p.display())))?;
        if !m.is_file() || m.permissions().mode() & 0o111 == 0 {
            return Err(refuse(format!("{} is not an executable file", p.display())));
        }
        if let Some(interp) = elf_interpreter(&real) {
            let interp = std::fs::canonicalize(&interp).unwrap_or(interp);
            if !out.interpreters.contains(&interp) {
                out.interpreters.push(interp);
            }
        }
        out.files.push((real, (m.dev(), m.ino())));
    }
    Ok(Some(out))
}

impl ExecAllow {
    /// Whether the file of device and inode `id` is listed.
    pub fn allows(&self, id: (u64, u64)) -> bool {
        self.files.iter().any(|(_, f)| *f == id)
    }

    /// The files Landlock lets the run execute: the listed ones, their interpreters, and the
    /// program (`program`, with its own interpreter).
    pub fn executable(&self, program: Option<&Path>) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.files.iter().map(|(p, _)| p.clone()).collect();
        out.extend(self.interpreters.iter().cloned());
        if let Some(p) = program {
            out.push(p.to_path_buf());
            out.extend(elf_interpreter(p));
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The ELF interpreter (`PT_INTERP`) a 64-bit little-endian ELF file names, if it is one.
pub fn elf_interpreter(path: &Path) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let mut head = [0u8; 64];
    f.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let (phoff, phentsize, phnum) = (u64_at(&head, 32), usize::from(u16_at(&head, 54)), u16_at(&head, 56));
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * usize::from(phnum)];
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut ph).ok()?;
    let interp = ph.chunks(phentsize).find(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == 3)?;
    let (offset, size) = (u64_at(interp, 8), u64_at(interp, 32));
    if size == 0 || size > 4096 {
        return None;
    }
    let mut name = vec![0u8; usize::try_from(size).ok()?];
    f.seek(SeekFrom::Start(offset)).ok()?;
    f.read_exact(&mut name).ok()?;
    let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
    let text = std::str::from_utf8(&name[..end]).ok()?;
    Some(PathBuf::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elf_names_its_interpreter_and_a_script_none() {
        let sh = Path::new("/bin/sh");
        if sh.exists() {
            let interp = elf_interpreter(&std::fs::canonicalize(sh).unwrap());
            assert!(interp.is_some_and(|i| i.to_string_lossy().contains("ld-")), "/bin/sh is dynamic");
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(elf_interpreter(&script), None);
        assert_eq!(elf_interpreter(Path::new("/nonexistent")), None);
    }
}
