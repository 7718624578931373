//! The service's request decoder and checks: refusals are 4xx naming a field, what is accepted
//! is bounded and never looser than its policy; the properties are in
//! `stockade::fuzzing::run_request`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| stockade::fuzzing::run_request(data));
