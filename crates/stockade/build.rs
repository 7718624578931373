//! Records the resolved wasmtime version (from Cargo.lock) for the artifact cache key.
fn main() {
    println!("cargo::rerun-if-changed=../../Cargo.lock");
    // The workspace's lock, two directories up (crates/stockade).
    let lock = std::fs::read_to_string("../../Cargo.lock").unwrap_or_default();
    let mut lines = lock.lines();
    let mut version = String::from("unknown");
    while let Some(l) = lines.next() {
        if l == "name = \"wasmtime\"" {
            if let Some(v) = lines.next().and_then(|v| v.strip_prefix("version = \"")) {
                version = v.trim_end_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo::rustc-env=STOCKADE_WASMTIME_VERSION={version}");
}
