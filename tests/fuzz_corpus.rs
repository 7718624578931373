//! Replays the fuzz seed corpora and every input a fuzzer ever crashed on (`fuzz/regressions/`)
//! through the fuzz targets' properties, on stable Rust, in every `cargo test`.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for dir in [root.join("corpus").join(target), root.join("regressions").join(target)] {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let data = std::fs::read(e.path()).expect("read input");
            let path = e.path();
            if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
                panic!("{}: {:?}", path.display(), panic.downcast_ref::<String>());
            }
            n += 1;
        }
    }
    n
}

#[test]
fn policy_corpus_and_regressions_hold() {
    assert!(replay("policy", stockade::fuzzing::policy) >= 10, "the policy seed corpus is missing");
}

#[test]
fn report_corpus_and_regressions_hold() {
    assert!(replay("report", stockade::fuzzing::report) >= 9, "the report seed corpus is missing");
}

#[test]
fn run_request_corpus_and_regressions_hold() {
    assert!(replay("run_request", stockade::fuzzing::run_request) >= 14, "the request seed corpus is missing");
}
