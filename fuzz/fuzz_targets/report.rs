//! The report reader and writer: whatever reads, writes and reads back unchanged; the
//! properties are in `stockade::fuzzing::report`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| stockade::fuzzing::report(data));
