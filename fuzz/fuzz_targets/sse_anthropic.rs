#![no_main]
//! Arbitrary bytes as an Anthropic SSE body: events or a typed error, never a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pith_reliability::fuzzing::sse_anthropic(data, 61);
});
