//! The ledger's one-pass extraction and its measured reserve against the forms they replaced, on
//! every shared transcript: the ledger extracted item by item (each touch searching its list,
//! every path copied) and the reserve as the cost of the full rendering of the carried ledger.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use pith_compaction::artifacts::{command_of, named_path, paths_of_call, Access};
use pith_compaction::ledger::{
    attach, is_user_authored, reserve, user_budget, CommandError, Ledger, ERROR_TAIL_CHARS, MAX_DECISIONS,
    MAX_ERRORS, MAX_PATHS, MAX_USER_MESSAGES,
};
use pith_core::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, EntryId, EstimateCounter, Message, Part,
    StoredView, TokenCounter, Usage,
};

const MARKERS: &[&str] = &[
    "let's ",
    "lets ",
    "we should ",
    "we will ",
    "we'll ",
    "don't ",
    "do not ",
    "never ",
    "always ",
    "instead",
    "prefer ",
    "must ",
    "decided",
    "go with ",
];

fn touch(list: &mut Vec<String>, item: String, max: usize) {
    list.retain(|x| *x != item);
    list.push(item);
    if list.len() > max {
        list.drain(..list.len() - max);
    }
}

fn failed(content: &str, is_error: bool) -> bool {
    let lower = content.to_ascii_lowercase();
    is_error
        || ["exit code: ", "exited with code ", "exit status "]
            .iter()
            .any(|marker| {
                lower.match_indices(marker).any(|(i, _)| {
                    let rest = &lower[i + marker.len()..];
                    rest.starts_with(|c: char| c.is_ascii_digit()) && !rest.starts_with('0')
                })
            })
}

fn tail_chars(text: &str, chars: usize) -> String {
    let all: Vec<char> = text.chars().collect();
    all[all.len().saturating_sub(chars)..].iter().collect()
}

fn describe_call(name: &str, arguments: &serde_json::Value) -> String {
    let text = command_of(arguments)
        .or_else(|| named_path(arguments))
        .map(|c| format!("{name}: {c}"))
        .unwrap_or_else(|| name.to_string());
    text.trim().chars().take(160).collect()
}

fn decisions(text: &str) -> Vec<String> {
    text.split(['.', '!', '\n', '?'])
        .map(str::trim)
        .filter(|s| s.len() >= 12 && s.len() <= 300)
        .filter(|s| {
            let lower = s.to_ascii_lowercase();
            MARKERS.iter().any(|m| lower.contains(m))
        })
        .map(str::to_string)
        .collect()
}

/// The extraction as first written.
fn reference_extract(span: &[&Message]) -> Ledger {
    let mut ledger = Ledger::default();
    let mut calls: HashMap<&str, (&str, &serde_json::Value)> = HashMap::new();
    for m in span {
        for part in &m.parts {
            match part {
                Part::ToolCall {
                    call_id,
                    name,
                    arguments,
                } => {
                    for (access, path) in paths_of_call(name, arguments) {
                        let list = match access {
                            Access::Read => &mut ledger.read,
                            Access::Modify => &mut ledger.modified,
                            Access::Create => &mut ledger.created,
                        };
                        touch(list, path, MAX_PATHS);
                    }
                    calls.insert(call_id.as_str(), (name.as_str(), arguments));
                }
                Part::ToolResult {
                    call_id,
                    content,
                    is_error,
                } if failed(content, *is_error) => {
                    let command = calls
                        .get(call_id.as_str())
                        .map(|(name, arguments)| describe_call(name, arguments))
                        .unwrap_or_else(|| call_id.clone());
                    let tail = tail_chars(content.trim_end(), ERROR_TAIL_CHARS)
                        .trim()
                        .to_string();
                    ledger.errors.retain(|e| e.command != command);
                    ledger.errors.push(CommandError { command, tail });
                }
                _ => {}
            }
        }
        if is_user_authored(m) {
            let text = m.text_content().trim().to_string();
            for d in decisions(&text) {
                touch(&mut ledger.decisions, d, MAX_DECISIONS);
            }
            touch(&mut ledger.user_messages, text, MAX_USER_MESSAGES);
        }
    }
    if ledger.errors.len() > MAX_ERRORS {
        ledger.errors.drain(..ledger.errors.len() - MAX_ERRORS);
    }
    ledger
}

/// The reserve as first written: the cost of rendering the whole carried ledger.
fn reference_reserve(
    view: &StoredView,
    before: &[&Message],
    threshold: u64,
    counter: &dyn TokenCounter,
) -> u64 {
    let mut ledger = view
        .compaction
        .as_ref()
        .and_then(Ledger::from_meta)
        .unwrap_or_default();
    let span: Vec<&Message> = before
        .iter()
        .copied()
        .filter(|m| !m.role.is_instruction() && !m.is_reminder())
        .collect();
    ledger.merge(reference_extract(&span));
    if ledger.is_empty() {
        return 0;
    }
    ledger
        .render_with_cost("", u64::MAX / 2, user_budget(threshold), counter)
        .1
}

/// Counts characters: a counter without a length rule, so every line is written and counted.
struct Chars;

impl TokenCounter for Chars {
    fn count_text(&self, text: &str) -> u64 {
        text.chars().count() as u64
    }
}

fn views() -> Vec<(String, StoredView)> {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return Vec::new();
    };
    files
        .into_iter()
        .filter_map(|(path, entry)| {
            let imported = pith_import::import_file(&path).ok()?;
            let view = StoredView::from_log(imported.record, &imported.entries).ok()?;
            Some((entry.file, view))
        })
        .collect()
}

/// A compaction record without a ledger.
fn record() -> CompactionMeta {
    CompactionMeta {
        id: EntryId::new(),
        generation: 1,
        summary: "earlier work".into(),
        summarized: None,
        tail_start: None,
        retained_instructions: vec![],
        retained_reminders: vec![],
        masked: vec![],
        tokens_before: 0,
        tokens_after: 0,
        strategy: CompactionStrategy::Deterministic,
        summary_model: None,
        trigger: CompactionTriggerKind::Manual,
        usage: Usage::default(),
        summary_calls: 0,
        idempotency_key: "k".into(),
        created_at: chrono::Utc::now(),
        extra: None,
    }
}

fn prefixes(msgs: &[&Message]) -> Vec<usize> {
    let n = msgs.len();
    vec![0, 1, n / 4, n / 2, 3 * n / 4, n.saturating_sub(1), n]
}

#[test]
fn extraction_equals_the_reference_on_every_transcript() {
    let views = views();
    let found = pith_testkit::transcripts::manifest().map_or(0, |files| files.len());
    assert_eq!(views.len(), found, "every transcript imports into a view");
    for (name, view) in &views {
        let msgs: Vec<&Message> = view
            .tail_messages()
            .filter(|m| !m.role.is_instruction() && !m.is_reminder())
            .collect();
        for k in prefixes(&msgs) {
            let span = &msgs[..k];
            assert_eq!(
                Ledger::extract(span.iter().copied()),
                reference_extract(span),
                "{name}, first {k} messages"
            );
        }
    }
}

#[test]
fn reserve_equals_the_rendered_cost_on_every_transcript() {
    for (name, view) in &views() {
        let msgs: Vec<&Message> = view.tail_messages().collect();
        for k in prefixes(&msgs) {
            for threshold in [6_000, 100_000] {
                let before = &msgs[..k];
                for counter in [&EstimateCounter as &dyn TokenCounter, &Chars] {
                    assert_eq!(
                        reserve(view, before, threshold, counter),
                        reference_reserve(view, before, threshold, counter),
                        "{name}, first {k} messages, threshold {threshold}"
                    );
                }
            }
        }
    }
}

#[test]
fn reserve_merges_a_carried_ledger_as_the_merge_does() {
    for (name, view) in &views() {
        let meta = view.compaction.clone().unwrap_or_else(record);
        let msgs: Vec<&Message> = view.tail_messages().collect();
        let half = msgs.len() / 2;
        let older = reference_extract(&msgs[..half]);
        // A stored ledger as extracted, one with repeats and over its bounds, and an empty one.
        let mut repeated = older.clone();
        repeated.read = (0..MAX_PATHS + 5).map(|i| format!("f{}.rs", i % 7)).collect();
        repeated.user_messages.extend(older.user_messages.iter().cloned());
        repeated.errors.extend(older.errors.iter().cloned());
        for stored in [older, repeated, Ledger::default()] {
            let mut with = view.clone();
            let mut meta = meta.clone();
            attach(&mut meta, Some(&stored));
            with.compaction = Some(meta);
            for k in [half, msgs.len()] {
                let before = &msgs[..k];
                assert_eq!(
                    reserve(&with, before, 100_000, &EstimateCounter),
                    reference_reserve(&with, before, 100_000, &EstimateCounter),
                    "{name}, first {k} messages"
                );
            }
        }
    }
}
