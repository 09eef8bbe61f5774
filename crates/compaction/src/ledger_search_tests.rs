//! The ledger's in-place searches (failure markers, decision markers, sentences) against the
//! copying forms they replaced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::{decisions_in, failed, sentences, DECISION_MARKERS};

/// The failure test as first written: markers searched in a lower-cased copy.
fn failed_reference(content: &str, is_error: bool) -> bool {
    if is_error {
        return true;
    }
    let lower = content.to_ascii_lowercase();
    ["exit code: ", "exited with code ", "exit status "]
        .iter()
        .any(|marker| {
            lower.match_indices(marker).any(|(i, _)| {
                let rest = &lower[i + marker.len()..];
                rest.starts_with(|c: char| c.is_ascii_digit()) && !rest.starts_with("0")
            })
        })
}

proptest::proptest! {
    #[test]
    fn failures_are_found_as_in_a_lower_cased_copy(
        words in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("Exit Code: ".to_string()),
                proptest::strategy::Just("exited with code ".to_string()),
                proptest::strategy::Just("EXIT STATUS ".to_string()),
                proptest::strategy::Just("exit code:".to_string()),
                proptest::strategy::Just("eXit status".to_string()),
                "[0-9]{1,3}",
                "[a-zA-Zé x\n]{0,8}",
            ],
            0..8,
        ),
        is_error in proptest::bool::weighted(0.1),
    ) {
        let content = words.concat();
        proptest::prop_assert_eq!(failed(&content, is_error), failed_reference(&content, is_error), "{:?}", content);
    }
}

/// Decisions as first found: each sentence lower-cased and searched.
fn decisions_reference(text: &str) -> Vec<String> {
    text.split(['.', '!', '\n', '?'])
        .map(str::trim)
        .filter(|s| s.len() >= 12 && s.len() <= 300)
        .filter(|s| {
            let lower = s.to_ascii_lowercase();
            DECISION_MARKERS.iter().any(|m| lower.contains(m))
        })
        .map(str::to_string)
        .collect()
}

proptest::proptest! {
    #[test]
    fn decisions_are_the_sentences_holding_a_marker(
        words in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("We Should ".to_string()),
                proptest::strategy::Just("decidedecided".to_string()),
                proptest::strategy::Just("DON'T ".to_string()),
                proptest::strategy::Just("go with".to_string()),
                proptest::strategy::Just("instead".to_string()),
                "[a-zé .!?\n]{0,30}",
            ],
            0..10,
        ),
    ) {
        let text = words.concat();
        proptest::prop_assert_eq!(decisions_in(&text), decisions_reference(&text));
    }
}

#[test]
fn decisions_are_found_in_any_case() {
    let text = "We Should keep the parser. ok. GO WITH the second option! instead of a rewrite";
    assert_eq!(
        decisions_in(text),
        vec![
            "We Should keep the parser",
            "GO WITH the second option",
            "instead of a rewrite"
        ]
    );
    let marked = "Then we decided. We must keep it small? Prefer tabs, always. Nothing here";
    assert_eq!(decisions_in(marked).len(), 3, "{:?}", decisions_in(marked));
}

proptest::proptest! {
    #[test]
    fn sentences_split_as_str_split(text in "[a-z .!?\né😀]{0,40}") {
        let split: Vec<&str> = text.split(['.', '!', '\n', '?']).collect();
        proptest::prop_assert_eq!(sentences(&text).collect::<Vec<_>>(), split);
    }
}

#[test]
fn exit_codes_mark_failures_in_any_case() {
    assert!(failed("build\nExit Code: 2", false));
    assert!(failed("Process exited with code 1\n", false));
    assert!(!failed("exit status 0", false));
    assert!(!failed("exit code: ", false));
    assert!(!failed("xexit code: x", false));
    assert!(failed("ok", true));
}
