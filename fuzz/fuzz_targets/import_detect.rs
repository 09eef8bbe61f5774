#![no_main]
//! Arbitrary bytes into format detection and whichever importer it picks.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pith_reliability::fuzzing::import(None, data);
});
