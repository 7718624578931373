//! The properties the fuzz targets (`fuzz/`) check, callable from stable Rust too: the corpus and
//! every crash ever found replay through them in `tests/fuzz_corpus.rs` on each `cargo test`.
//! Each function panics when a property breaks; that panic is what the fuzzer reports.
//!
//! Imports (layers): `api`, `audit`, `policy`, `report`.

use crate::audit;
use crate::policy::{Policy, PolicyError};
use crate::report::Report;

/// The name the fuzzed policy is parsed under; every error must name it.
const FILE: &str = "fuzz.toml";

/// Policy parsing and validation, then every review tool on what parsed.
///
/// Properties: no panic; an invalid policy yields at least one problem, each naming the file with
/// a key or a position; a valid one explains, lints, scores within 0-10 and diffs against itself
/// with no change. Input with a NUL byte is two policies: they diff both ways consistently.
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (a, b) = match text.split_once('\0') {
        Some((a, b)) => (a, Some(b)),
        None => (text, None),
    };
    let Some(pa) = parse(a) else { return };
    let _ = audit::explain::explain(&pa, false).to_text();
    let _ = audit::lint::lint(&pa);
    let s = audit::score(&pa);
    assert!((0.0..=10.0).contains(&s.score), "score out of range: {}", s.score);
    let same = audit::diff(&pa, &pa);
    assert!(same.rows.iter().all(|r| r.change == audit::Change::Unchanged), "a policy differs from itself");
    if let Some(pb) = b.and_then(parse) {
        let (ab, ba) = (audit::diff(&pa, &pb), audit::diff(&pb, &pa));
        for (x, y) in ab.rows.iter().zip(&ba.rows) {
            let mirrored = match x.change {
                audit::Change::Tightened => audit::Change::Loosened,
                audit::Change::Loosened => audit::Change::Tightened,
                c => c,
            };
            assert_eq!(mirrored, y.change, "diff is not symmetric for {}", x.key);
        }
    }
}

fn parse(text: &str) -> Option<Policy> {
    match Policy::from_toml(text, FILE) {
        Ok(p) => Some(p),
        Err(PolicyError::Invalid { problems }) => {
            assert!(!problems.is_empty(), "an invalid policy with no problem listed");
            for p in &problems {
                assert_eq!(p.file, FILE, "a problem that does not name the file: {p:?}");
                assert!(!p.message.is_empty(), "a problem with no message: {p:?}");
            }
            None
        }
        Err(e) => panic!("from_toml returned a non-parse error: {e}"),
    }
}

/// The report reader and writer.
///
/// Properties: no panic; any report the reader accepts is written and read back unchanged, and
/// writing is deterministic.
pub fn report(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(r) = Report::from_json(text) else { return };
    let json = r.to_json();
    let back = Report::from_json(&json).unwrap_or_else(|e| panic!("a written report does not read back: {e}\n{json}"));
    assert_eq!(back, r, "a report changed through write and read");
    assert_eq!(back.to_json(), json, "writing is not deterministic");
}

/// The service's request decoder and checks (`stockade serve`, `stockade mcp`), against a catalog
/// of the shipped policies and the default runtimes.
///
/// Properties: no panic; a refusal is a 4xx with a code and a message, naming a field when the
/// body parsed as JSON; what is accepted stays within the caps, and its limits are never looser
/// than its policy's.
pub fn run_request(data: &[u8]) {
    use crate::api::{self, Catalog, RequestCaps, RuntimeSpec};
    // Made once: parsing the shipped policies for every input would be most of the fuzzer's time.
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    let catalog = CATALOG.get_or_init(|| {
        let spec = |framed: bool, policies: &[&str]| RuntimeSpec {
            framed,
            host_calls: framed,
            policies: policies.iter().map(|p| p.to_string()).collect(),
        };
        Catalog {
            runtimes: [
                ("python".to_string(), spec(true, &["default", "wrap-python"])),
                ("javascript".to_string(), spec(true, &["default"])),
                ("sh".to_string(), spec(false, &["default"])),
            ]
            .into_iter()
            .collect(),
            policies: crate::policy::SHIPPED
                .iter()
                .filter_map(|(n, t)| Some((n.to_string(), Policy::from_toml(t, n).ok()?)))
                .collect(),
            caps: RequestCaps { body_max_bytes: 1 << 20, ..RequestCaps::default() },
            wasm_modules: true,
        }
    });
    let caps = &catalog.caps;
    let refused = |e: &api::ApiError| {
        assert!((400..500).contains(&e.status()), "input refused with {}: {e:?}", e.status());
        assert!(!e.message.is_empty(), "a refusal without words: {e:?}");
    };
    let body = match api::decode(data, caps) {
        Ok(b) => b,
        Err(e) => return refused(&e),
    };
    // The lists stopped at their caps while they were parsed.
    assert!(body.argv.len() <= caps.argv_max_count as usize, "argv decoded past its cap");
    assert!(body.files.len() <= caps.files_max_count as usize, "files decoded past their cap");
    assert!(body.return_files.len() <= caps.return_patterns_max as usize, "patterns decoded past their cap");
    let asked_wall = body.limits.wall_timeout_ms;
    match api::check(body, catalog) {
        Err(e) => {
            refused(&e);
            assert!(e.field.is_some(), "a refusal of parsed JSON names no field: {e:?}");
        }
        Ok(r) => {
            assert!(r.code.len() as u64 <= caps.code_max_bytes);
            assert!(r.stdin.len() as u64 <= caps.stdin_max_bytes);
            assert!(r.files.len() <= caps.files_max_count as usize);
            assert!(r.files.iter().map(|f| f.bytes.len() as u64).sum::<u64>() <= caps.files_max_bytes);
            let named = &catalog.policies[&r.policy_name];
            if let api::Target::Runtime(rt) = &r.target {
                assert!(catalog.runtimes[rt].policies.contains(&r.policy_name), "a policy its runtime does not name");
            }
            let l = &r.limits;
            let floor = |v: Option<u64>, f: u64| v.is_none_or(|v| v >= f);
            assert!(floor(l.memory_max_bytes, crate::policy::MEMORY_MAX_FLOOR), "memory below the floor");
            assert!(floor(l.pids_max, crate::policy::PIDS_MAX_FLOOR), "pids below the floor");
            let ceiling = crate::policy::Limits::of(named);
            if let Some(ms) = asked_wall {
                assert_eq!(l.wall_timeout_ms, Some(ms));
            }
            let le = |a: Option<u64>, b: Option<u64>| b.is_none_or(|b| a.is_some_and(|a| a <= b));
            assert!(le(l.wall_timeout_ms, ceiling.wall_timeout_ms), "a looser wall-clock limit was taken");
            assert!(le(l.memory_max_bytes, ceiling.memory_max_bytes), "looser memory");
            assert!(le(l.pids_max, ceiling.pids_max), "looser pids");
            assert!(le(l.stdout_max_bytes, ceiling.stdout_max_bytes), "looser stdout cap");
            assert!(le(l.wasm_memory_max_bytes, ceiling.wasm_memory_max_bytes), "looser wasm memory");
            let policy = r.policy(catalog).expect("its policy");
            assert_eq!(crate::policy::Limits::of(&policy), *l, "the run's policy holds its limits");
        }
    }
}
