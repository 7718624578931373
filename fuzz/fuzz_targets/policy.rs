//! Policy parsing and validation, then explain, lint, score and diff on what parsed; the
//! properties are in `stockade::fuzzing::policy`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| stockade::fuzzing::policy(data));
