//! Reading what a caller names (a policy file, a code file, a Wasm module): regular files only,
//! read once, with a size cap. A FIFO, a device or `/proc/self/fd/0` named as a policy would
//! otherwise block the open or read until memory runs out.
//!
//! Imports (layers): none.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a caller's file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{}: {}", path.display(), crate::sys::describe_errno(source.raw_os_error().unwrap_or(libc::EIO)))]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: is {kind}, not a regular file", path.display())]
    NotRegular { path: std::path::PathBuf, kind: &'static str },
    #[error("{}: larger than {max} bytes, the most stockade reads for {what}", path.display())]
    TooLarge { path: std::path::PathBuf, max: u64, what: &'static str },
}

/// Reads a regular file of at most `max` bytes. Opened non-blocking (a FIFO's open would wait for
/// a writer), checked on the open file (no path race), read once.
pub fn read_regular(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, InputError> {
    let io = |source: std::io::Error| InputError::Io { path: path.to_path_buf(), source };
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { path: path.to_path_buf(), kind: kind_of(&meta) });
    }
    if meta.len() > max {
        return Err(InputError::TooLarge { path: path.to_path_buf(), max, what });
    }
    // A buffer of the file's size: read without growing (no copy left behind: a secret's reader
    // can wipe the one buffer).
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).saturating_add(1));
    file.take(max.saturating_add(1)).read_to_end(&mut buf).map_err(io)?;
    Some(buf).filter(|b| b.len() as u64 <= max).ok_or_else(|| InputError::TooLarge {
        path: path.to_path_buf(),
        max,
        what,
    })
}

/// Reads at most `max` bytes; `None` when there is more (a file that grew while being read).
pub fn read_capped(reader: impl Read, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::new();
    reader.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    Ok((buf.len() as u64 <= max).then_some(buf))
}

/// Reads a regular UTF-8 text file of at most `max` bytes.
pub fn read_text(path: &Path, max: u64, what: &'static str) -> Result<String, InputError> {
    let bytes = read_regular(path, max, what)?;
    String::from_utf8(bytes).map_err(|_| InputError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(libc::EILSEQ),
    })
}

/// Words for a file type, for messages.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let ft = meta.file_type();
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a fifo"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "a device"
    } else if ft.is_symlink() {
        "a symlink"
    } else if ft.is_file() {
        "a regular file"
    } else {
        "not a file"
    }
}

/// Opens a regular file for reading, refusing anything else (for callers that stream it).
pub fn open_regular(path: &Path) -> Result<File, InputError> {
    let io = |source: std::io::Error| InputError::Io { path: path.to_path_buf(), source };
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular { path: path.to_path_buf(), kind: kind_of(&meta) });
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_large_files_are_refused() {
        let err = read_regular(Path::new("/dev/zero"), 1 << 20, "a policy").expect_err("device");
        assert_eq!(err.to_string(), "/dev/zero: is a device, not a regular file");
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
        let err = read_regular(&fifo, 10, "a policy").expect_err("fifo");
        assert!(err.to_string().ends_with("is a fifo, not a regular file"), "{err}");
        let big = dir.path().join("big");
        std::fs::write(&big, [b'x'; 11]).expect("write");
        let err = read_regular(&big, 10, "a policy").expect_err("large");
        assert!(err.to_string().ends_with("larger than 10 bytes, the most stockade reads for a policy"), "{err}");
        assert_eq!(read_regular(&big, 11, "a policy").expect("fits").len(), 11);
    }
}
