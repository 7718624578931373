//! The languages a service runs as Wasm guests, one entry each ([`LANGUAGES`]): what the
//! engine and the recipes need to know of one, so that none of them asks "is it Python?".
//! Adding a language is an entry here, its guest (`guests.rs`, its artifact checked by
//! [`super::check_installed`]) and its bootstraps in [`crate::handover`] (its code framed on
//! stdin, its live loop, its host-call import and its exit-status rule). Imports its parent's
//! `GuestCode` and what a guest's install is checked with.

use super::engine::EngineKind;
use super::guests::{self, GuestError};
use super::{GuestCode, snapshot, usable};
use std::path::Path;

/// A managed Wasm guest's language, each an entry of [`LANGUAGES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Guest {
    Python,
    JavaScript,
}

/// What a service needs to know of a language it runs: one entry of [`LANGUAGES`]. Adding a
/// language is an entry there, its guest (`wasm::guests`, its artifact checked by
/// [`super::check_installed`]) and its bootstraps in [`crate::handover`] (its code framed on stdin, its
/// live loop, its host-call import and its exit-status rule).
#[derive(Debug)]
pub struct Language {
    pub guest: Guest,
    /// Its name: a configuration's `guest = "..."`, `/v1/info`'s.
    pub name: &'static str,
    /// How its code makes a host call (what an MCP client's model is told).
    pub host_call: &'static str,
    /// Its guest waiting for its code framed on stdin ([`crate::handover::frame`]).
    pub from_stdin: fn() -> GuestCode,
    /// Its live interpreter, serving turns ([`crate::runtime::Recipe::build_live`]).
    pub turns: fn() -> GuestCode,
    /// A live interpreter's turn gets the run's stdin (Python's loop gives it as `sys.stdin`;
    /// QuickJS's stdin is the turn's frame).
    pub turn_stdin: bool,
    /// A warm jail's first run (a runtime's proof) is an empty frame; else an empty stdin.
    pub probe_framed: bool,
}

/// Every language a runtime may run as a Wasm guest.
pub const LANGUAGES: &[Language] = &[
    Language {
        guest: Guest::Python,
        name: "python",
        host_call: "Python: `import stockade_host; stockade_host.call(name, args)`, a failed call raising \
                    stockade_host.ToolError",
        from_stdin: || GuestCode::PythonFromStdin,
        turns: || GuestCode::PythonTurns,
        turn_stdin: true,
        probe_framed: true,
    },
    Language {
        guest: Guest::JavaScript,
        name: "javascript",
        host_call: "JavaScript: `host.call(name, args)`, a failed call throwing host.ToolError",
        from_stdin: || GuestCode::JsFromStdin,
        turns: || GuestCode::JsTurns,
        turn_stdin: false,
        probe_framed: false,
    },
];

impl Guest {
    /// The language of this name (a configuration's `guest`).
    pub fn named(name: &str) -> Option<Guest> {
        LANGUAGES.iter().find(|l| l.name == name).map(|l| l.guest)
    }

    /// Its entry of [`LANGUAGES`].
    pub fn language(self) -> &'static Language {
        // Every guest has its entry (a test holds it): the first is the fallback of none.
        LANGUAGES.iter().find(|l| l.guest == self).unwrap_or(&LANGUAGES[0])
    }

    pub fn name(self) -> &'static str {
        self.language().name
    }
}

/// Whether a language's guest is installed in `dir` with an artifact for
/// every engine configuration, each made by this stockade's engine (and Python's standard
/// library beside it): what a server, which never compiles a guest, checks when it starts.
/// `Err` names what is missing and `stockade guest install`.
pub fn check_installed(guest: Guest, dir: &Path) -> Result<(), GuestError> {
    let (name, stem) = match guest {
        Guest::Python => ("python", snapshot::artifact_stem()),
        Guest::JavaScript => (guests::QUICKJS.name, guests::QUICKJS.name),
    };
    for kind in EngineKind::ALL {
        let path = guests::artifact_path(dir, stem, kind);
        if let Err(why) = usable(&path, kind)? {
            return Err(GuestError::NotPrecompiled { name: name.into(), path, why });
        }
    }
    let lib = snapshot::stdlib_path(dir);
    if guest == Guest::Python && !lib.exists() {
        let why = "its standard library is not extracted (or is of an older stockade)".to_string();
        return Err(GuestError::NotPrecompiled { name: name.into(), path: lib, why });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guest_has_one_entry_found_by_its_name() {
        for g in [Guest::Python, Guest::JavaScript] {
            assert_eq!(LANGUAGES.iter().filter(|l| l.guest == g).count(), 1, "{g:?}");
            assert_eq!(g.language().guest, g);
            assert_eq!(Guest::named(g.name()), Some(g));
        }
        assert_eq!(Guest::named("ruby"), None);
    }
}
