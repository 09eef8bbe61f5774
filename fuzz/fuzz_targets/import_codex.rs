#![no_main]
//! Arbitrary bytes into the Codex importer: a value or a typed error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pith_reliability::fuzzing::import(Some(pith_import::Format::Codex), data);
});
