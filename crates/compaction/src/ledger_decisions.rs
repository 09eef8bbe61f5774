//! The decisions a user states: sentences of their messages holding a decision marker.
//!
//! A sentence is a piece of the message between `.`, `!`, `?` and line ends, trimmed, of 12 to
//! 300 bytes; it states a decision when it holds one of
//! [`DECISION_MARKERS`](crate::ledger::DECISION_MARKERS), ignoring ASCII case. All markers are
//! looked for in one pass of a case-folding automaton, built once per process (it depends only
//! on the constant marker list): most messages hold none and are passed over in that one scan;
//! only the sentences of the others are looked at.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::ledger::DECISION_MARKERS;

/// All decision markers, matched ignoring ASCII case.
static MARKERS: LazyLock<Option<AhoCorasick>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .match_kind(MatchKind::Standard)
        .kind(Some(AhoCorasickKind::DFA))
        .build(DECISION_MARKERS)
        .ok()
});

/// Whether `text` holds a decision marker, ignoring ASCII case.
fn holds_marker(text: &str) -> bool {
    match MARKERS.as_ref() {
        Some(markers) => markers.is_match(text),
        // The automaton of a constant list always builds; this keeps the search total anyway.
        None => {
            let lower = text.to_ascii_lowercase();
            DECISION_MARKERS.iter().any(|m| lower.contains(m))
        }
    }
}

/// Calls `found` with each sentence of `text` that states a decision, in order.
pub(crate) fn for_each_decision<'t>(text: &'t str, mut found: impl FnMut(&'t str)) {
    if !holds_marker(text) {
        return;
    }
    for sentence in crate::artifacts::split_ascii(text, |b| matches!(b, b'.' | b'!' | b'\n' | b'?')) {
        let sentence = sentence.trim();
        if sentence.len() >= 12 && sentence.len() <= 300 && holds_marker(sentence) {
            found(sentence);
        }
    }
}
