//! CPython's standard library as plain files, out of the pinned module.
//!
//! The CPython build embeds its standard library as a zip in the module's data (wasi-vfs), and
//! `zipimport` parses that zip's whole central directory in interpreted Python on every start:
//! about a quarter of a `print(1)`. Once per guest directory, the zip is cut out of the verified
//! module's memory image, checked against its own pinned SHA-256 and extracted; the runner
//! preopens it read-only at [`GUEST_LIB`] with `PYTHONHOME=`[`GUEST_HOME`], so each import is a
//! plain file read. No new bytes come in: only what the pinned module already held.

use super::guests::{GuestError, check_owner};
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// SHA-256 of `/usr/local/lib/python312.zip` inside the pinned CPython module.
pub const ZIP_SHA256: &str = "8bfdca871d7f94b19eac07787c6d8e72ccc30cda8b2047e4739406da0708589b";
/// `PYTHONHOME` the guest runs with.
pub const GUEST_HOME: &str = "/usr";
/// Where the guest sees the extracted library (`$PYTHONHOME/lib/python3.12`).
pub const GUEST_LIB: &str = "/usr/lib/python3.12";

/// Largest memory image rebuilt from a module's data segments.
const IMAGE_MAX_BYTES: usize = 256 << 20;

/// What stockade adds to the library, and its revision (in the directory's name: a new one
/// extracts anew). `sitecustomize.py` makes a network attempt say that the network is off: the
/// WASI build's `_socket` has no resolver, so `socket.create_connection` would otherwise fail
/// with `AttributeError: module '_socket' has no attribute 'getaddrinfo'`.
const ADDED_REVISION: u32 = 2;
const SITECUSTOMIZE: &str = r#"# Added by stockade: in its jails the network is off, and a network attempt says so.
import _socket


def _network_off(*args, **kwargs):
    raise OSError(101, "Network is unreachable: the network is off in this stockade jail")


for _name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
    if not hasattr(_socket, _name):
        setattr(_socket, _name, _network_off)
del _socket, _name
"#;

/// The extracted library in a guest directory (the hash and what stockade adds in the name: a
/// new pin, or a new addition, extracts anew).
pub fn path(dir: &Path) -> PathBuf {
    dir.join(format!("python-stdlib-{}-{ADDED_REVISION}", &ZIP_SHA256[..16]))
}

/// The extracted library, extracting it from `module` when missing.
pub fn ensure(module: &Path, dir: &Path) -> Result<PathBuf, GuestError> {
    let dest = path(dir);
    if dest.exists() {
        check_owner(&dest)?;
        return Ok(dest);
    }
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| GuestError::Io { path: p.clone(), source }
    };
    let wasm = std::fs::read(module).map_err(io(module))?;
    let image = memory_image(&wasm).ok_or_else(|| GuestError::Unsafe {
        path: module.into(),
        what: "its data segments do not form a memory image".into(),
    })?;
    let zip = find_zip(&image).ok_or_else(|| GuestError::Unsafe {
        path: module.into(),
        what: format!("holds no standard library zip with SHA-256 {ZIP_SHA256}"),
    })?;
    let tmp = dir.join(format!(".python-stdlib.{}.partial", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let added = |()| {
        let site = tmp.join("sitecustomize.py");
        std::fs::write(&site, SITECUSTOMIZE)
            .and_then(|()| std::fs::set_permissions(&site, std::fs::Permissions::from_mode(0o644)))
            .map_err(io(&site))
    };
    let result = extract(zip, &tmp).and_then(added).and_then(|()| std::fs::rename(&tmp, &dest).map_err(io(&dest)));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result.map(|()| dest)
}

/// Linear memory 0 as the module's active data segments initialise it (zeros elsewhere).
fn memory_image(wasm: &[u8]) -> Option<Vec<u8>> {
    use wasmparser::{DataKind, Operator, Parser, Payload};
    let mut image = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        let Payload::DataSection(reader) = payload.ok()? else { continue };
        for data in reader {
            let data = data.ok()?;
            let DataKind::Active { memory_index: 0, offset_expr } = data.kind else { continue };
            let Operator::I32Const { value } = offset_expr.get_operators_reader().read().ok()? else { return None };
            let start = usize::try_from(u32::from_ne_bytes(value.to_ne_bytes())).ok()?;
            let end = start.checked_add(data.data.len())?;
            if end > IMAGE_MAX_BYTES {
                return None;
            }
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data.data);
        }
    }
    Some(image)
}

/// The zip in `image` whose bytes hash to [`ZIP_SHA256`], found from its end record.
fn find_zip(image: &[u8]) -> Option<&[u8]> {
    const EOCD: &[u8; 4] = b"PK\x05\x06";
    let u32_at = |i: usize| image.get(i..i + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let u16_at = |i: usize| image.get(i..i + 2).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    image.windows(4).enumerate().filter(|(_, w)| *w == EOCD).find_map(|(at, _)| {
        let (cd_size, cd_offset, comment) = (u32_at(at + 12)?, u32_at(at + 16)?, u16_at(at + 20)?);
        let start = at.checked_sub(cd_size.checked_add(cd_offset)?)?;
        let zip = image.get(start..at + 22 + comment)?;
        let hex: String = Sha256::digest(zip).iter().map(|b| format!("{b:02x}")).collect();
        (hex == ZIP_SHA256).then_some(zip)
    })
}

/// Extracts every entry under `into` (names that would leave it are refused), 0755 dirs and
/// 0644 files.
fn extract(zip: &[u8], into: &Path) -> Result<(), GuestError> {
    let fail = |path: &Path, source: std::io::Error| GuestError::Io { path: path.to_path_buf(), source };
    let zip_fail = |source: zip::result::ZipError| GuestError::Zip { path: into.to_path_buf(), source };
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).map_err(zip_fail)?;
    let dir_mode = std::fs::Permissions::from_mode(0o755);
    std::fs::create_dir(into).map_err(|e| fail(into, e))?;
    std::fs::set_permissions(into, dir_mode.clone()).map_err(|e| fail(into, e))?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_fail)?;
        let Some(name) = entry.enclosed_name() else {
            let name = entry.name().map(|n| n.into_owned()).unwrap_or_default();
            return Err(GuestError::Unsafe { path: into.join(name), what: "leaves the library".into() });
        };
        let dest = into.join(name);
        if entry.is_dir() {
            std::fs::create_dir_all(&dest).map_err(|e| fail(&dest, e))?;
            continue;
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
        }
        let mut out = std::fs::File::create(&dest).map_err(|e| fail(&dest, e))?;
        std::io::copy(&mut entry, &mut out).map_err(|e| fail(&dest, e))?;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o644)).map_err(|e| fail(&dest, e))?;
    }
    // Directories created on the way get the umask's mode: set them all explicitly.
    let mut stack = vec![into.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::fs::set_permissions(&d, dir_mode.clone()).map_err(|e| fail(&d, e))?;
        for e in std::fs::read_dir(&d).map_err(|e| fail(&d, e))?.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with two data segments apart: the image holds both, zeros between.
    #[test]
    fn the_image_places_segments_at_their_offsets() {
        let wasm = wat_module();
        let image = memory_image(&wasm).expect("image");
        assert_eq!(&image[16..19], b"abc");
        assert_eq!(&image[19..60], &[0u8; 41][..]);
        assert_eq!(&image[60..62], b"de");
    }

    /// Hand-assembled: (memory 1) (data (i32.const 16) "abc") (data (i32.const 60) "de").
    fn wat_module() -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend([5, 3, 1, 0, 1]); // memory section: one memory, min 1 page
        let seg = |off: u8, bytes: &[u8]| {
            let mut s = vec![0, 0x41, off, 0x0b, u8::try_from(bytes.len()).expect("short")];
            s.extend_from_slice(bytes);
            s
        };
        let mut body = vec![2];
        body.extend(seg(16, b"abc"));
        body.extend(seg(60, b"de"));
        m.push(11);
        m.push(u8::try_from(body.len()).expect("short"));
        m.extend(body);
        m
    }

    #[test]
    fn a_zip_is_found_only_by_its_pinned_hash() {
        let mut image = vec![0u8; 64];
        image.extend(b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        assert!(find_zip(&image).is_none());
    }
}
