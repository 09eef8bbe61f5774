//! Every shared real transcript, imported and compacted repeatedly as it grows under an 8k, a
//! 32k and a 128k window with the deterministic summarizer.
//!
//! After every commit: the view fits `window − reserve`, no tool pair is split, the instructions
//! are intact, and the view is at most `target_ratio` × threshold. A compaction may only fail when
//! the newest messages that must stay verbatim (user text, assistant text, tool arguments — never
//! shortened) cannot fit next to a summary; the test recomputes that independently.
//!
//! Usage reported in the files is removed before the replay: it was measured by another harness,
//! with its own system prompt and tools, against another window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use pith_compaction::overflow::{self, message_tokens};
use pith_compaction::select::{latest_cut, valid_cuts};
use pith_compaction::{
    project, prune, CompactionConfig, CompactionError, CompactionTrigger, ProjectionStyle,
};
use pith_core::{Entry, EstimateCounter, Message, TokenCounter};
use pith_store::{AppendRequest, CreateSession, MemoryStore, SessionStore};

const WINDOWS: [u64; 3] = [8_192, 32_768, 128_000];

#[derive(Default, Debug)]
struct Tally {
    commits: u32,
    unshrinkable: u32,
}

async fn replay(entries: &[Entry], window: u64, tools: Vec<pith_core::ToolDeclaration>) -> Tally {
    let h = Harness::with_store(window, Arc::new(MemoryStore::new()));
    let record = h
        .store
        .create_session(CreateSession::new(MODEL).with_tools(tools.clone()))
        .await
        .unwrap();
    let id = record.id;
    let config = CompactionConfig::default()
        .with_deterministic_summarizer()
        .with_max_failures(u32::MAX);
    let service = h.service(config.clone());
    let counter = EstimateCounter;
    let threshold = overflow::threshold(window, None).unwrap();
    let target = prune::target(threshold, config.target_ratio);
    let mut tally = Tally::default();
    for entry in entries {
        let mut entry = entry.clone();
        if let Entry::Message(m) = &mut entry {
            m.usage = None;
        }
        h.store.append(id, AppendRequest::new(vec![entry])).await.unwrap();
        let view = h.store.load_view(id).await.unwrap();
        let decision = overflow::decide(&view, &tools, &counter, window, &config).unwrap();
        if !decision.is_needed() {
            continue;
        }
        let log_before = h.store.load_log(id).await.unwrap();
        match service.compact(id, CompactionTrigger::Proactive).await {
            Ok(result) => {
                assert!(!result.noop, "a needed compaction is never a no-op");
                tally.commits += 1;
                let view = h.store.load_view(id).await.unwrap();
                let log = h.store.load_log(id).await.unwrap();
                let projected = project(&view, ProjectionStyle::Reminder);
                assert_no_split_tool_pair(&projected);
                assert_instructions_intact(&log, &projected);
                assert_user_text_and_arguments_intact(&log, &projected);
                let tokens = overflow::context_tokens(&view, ProjectionStyle::Reminder, &tools, &counter);
                assert!(
                    tokens <= threshold,
                    "view of {tokens} tokens over threshold {threshold}"
                );
                assert!(
                    result.tokens_after <= target,
                    "{} > target {target}",
                    result.tokens_after
                );
                assert_eq!(tokens, result.tokens_after);
            }
            Err(e @ (CompactionError::DoesNotFit { .. } | CompactionError::NoProgress { .. })) => {
                assert_eq!(h.store.load_log(id).await.unwrap(), log_before);
                assert_unshrinkable(&view, &tools, &counter, &config, target, &e);
                tally.unshrinkable += 1;
            }
            Err(e) => panic!("unexpected failure under {window}: {e}"),
        }
    }
    tally
}

/// The newest messages that must stay verbatim are, with instructions and a full-size summary,
/// over the target on their own: the failure is legitimate.
fn assert_unshrinkable(
    view: &pith_core::StoredView,
    tools: &[pith_core::ToolDeclaration],
    counter: &dyn TokenCounter,
    config: &CompactionConfig,
    target: u64,
    error: &CompactionError,
) {
    let msgs: Vec<&Message> = view.tail_messages().collect();
    let valid = valid_cuts(&msgs);
    let newest = &msgs[latest_cut(&valid)..];
    let kept: u64 = newest.iter().map(|m| message_tokens(counter, m)).sum();
    let instructions: u64 = view
        .instructions
        .iter()
        .chain(msgs.iter().copied().filter(|m| m.role.is_instruction()))
        .map(|m| message_tokens(counter, m))
        .sum();
    let floor = kept + instructions + counter.count_tools(tools);
    assert!(
        floor + config.max_summary_tokens > target,
        "{error}: but the newest group ({kept} tokens) and instructions ({instructions}) fit the target {target}"
    );
}

#[tokio::test]
async fn every_transcript_compacts_within_every_window() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    let mut total = Tally::default();
    for (path, entry) in files {
        let imported =
            pith_import::import_file(&path).unwrap_or_else(|e| panic!("import {}: {e}", path.display()));
        for window in WINDOWS {
            let tally = replay(&imported.entries, window, imported.record.tools.clone()).await;
            eprintln!("{} @ {window}: {tally:?}", entry.file);
            total.commits += tally.commits;
            total.unshrinkable += tally.unshrinkable;
        }
    }
    eprintln!("total: {total:?}");
    assert!(total.commits > 100, "{total:?}");
}
