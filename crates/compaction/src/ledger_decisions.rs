//! The decisions a user states: sentences of their messages holding a decision marker.
//!
//! A sentence is a piece of the message between `.`, `!`, `?` and line ends, trimmed, of 12 to
//! 300 bytes; it states a decision when it holds one of
//! [`DECISION_MARKERS`](crate::ledger::DECISION_MARKERS), ignoring ASCII case. All markers are
//! looked for in one multi-pattern search of a lower-cased copy of the message (the searcher is
//! built once per process: it depends only on the constant marker list); most messages hold none
//! and are passed over after that one search, only the sentences of the others are looked at.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, MatchKind};

use crate::ledger::DECISION_MARKERS;

/// All decision markers, lower case, searched as plain patterns in a lower-cased copy of the
/// text: without case folding the searcher can use its vectorised multi-pattern prefilter.
static MARKERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(DECISION_MARKERS)
        .ok()
});

/// Whether `lower` (lower-cased) holds a decision marker.
fn holds_marker(lower: &[u8]) -> bool {
    match MARKERS.as_ref() {
        Some(markers) => markers.is_match(lower),
        // The searcher of a constant list always builds; this keeps the search total anyway.
        None => DECISION_MARKERS
            .iter()
            .any(|m| memchr::memmem::find(lower, m.as_bytes()).is_some()),
    }
}

/// Calls `found` with each sentence of `text` that states a decision, in order; `lower` is
/// scratch space for the lower-cased text (reused across messages).
pub(crate) fn for_each_decision<'t>(text: &'t str, lower: &mut Vec<u8>, mut found: impl FnMut(&'t str)) {
    lower.clear();
    lower.extend(text.bytes().map(|b| b.to_ascii_lowercase()));
    if !holds_marker(lower) {
        return;
    }
    let base = text.as_ptr() as usize;
    for sentence in crate::artifacts::split_ascii(text, |b| matches!(b, b'.' | b'!' | b'\n' | b'?')) {
        let sentence = sentence.trim();
        if sentence.len() < 12 || sentence.len() > 300 {
            continue;
        }
        // The sentence's bytes in the lower-cased copy (same offsets: ASCII folding keeps lengths).
        let start = (sentence.as_ptr() as usize).wrapping_sub(base);
        if lower.get(start..start + sentence.len()).is_some_and(holds_marker) {
            found(sentence);
        }
    }
}
