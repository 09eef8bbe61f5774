//! (g) Speculative compaction end to end: past the soft threshold the runtime starts the summary
//! in the background; the turn that crosses the threshold commits it without a summary call of
//! its own, and every later request fits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use pith::compaction::{soft_threshold, CompactionConfig};
use pith::runtime::fsm::CompactKind;
use pith::store::SessionStore;
use pith::{CancellationToken, RuntimeConfig};
use support::*;

#[tokio::test]
async fn the_threshold_turn_commits_the_summary_written_in_the_background() {
    let window = 64_000;
    let env = env(
        window,
        // Tiered masking off: alone it would handle these tool-heavy turns without a summary.
        CompactionConfig::default()
            .with_count_signal(false)
            .with_tiered(false),
        RuntimeConfig::default().with_stream(false),
        vec![Arc::new(read_tool(3_600))],
    )
    .await;
    let rt = &env.runtime;
    let instructions = "You are a coding agent. Read files before answering.";
    let session = rt.create_session(support::MODEL, instructions).await.unwrap();
    let threshold = pith::compaction::threshold(window, None).unwrap();
    let soft = soft_threshold(threshold).unwrap();
    env.script.summary(summary(
        "- The user is reviewing every module.\n- All modules read so far print \"hello\".",
    ));

    let mut turn_requests_before = Vec::new();
    let mut compacted = None;
    for i in 0..80 {
        env.script
            .turn(tool_call(&format!("c{i}"), &format!("src/m{i}.rs")));
        env.script.turn(text(&format!("src/m{i}.rs prints hello.")));
        turn_requests_before.push(env.requests().await.0.len());
        let out = rt
            .run_turn(session, format!("Read src/m{i}.rs."), CancellationToken::new())
            .await
            .unwrap();
        if !out.compactions.is_empty() {
            assert_eq!(out.compactions.len(), 1);
            assert_eq!(out.compactions[0].kind, CompactKind::Proactive);
            assert_eq!(out.compactions[0].summary_calls, 1);
            compacted = Some(i);
            break;
        }
    }
    let crossing = compacted.expect("the session crossed the threshold");

    // The one summary request was sent during an earlier turn, not during the crossing one.
    let all = pith_testkit::wire::openai_requests(&env.server).await;
    let summary_at = all.iter().position(|b| b["model"] == "summarizer").unwrap();
    let turn_requests_before_summary = all[..summary_at]
        .iter()
        .filter(|b| b["model"] != "summarizer")
        .count();
    assert!(
        turn_requests_before_summary < turn_requests_before[crossing],
        "summary requested after {turn_requests_before_summary} turn requests; the crossing turn started after {}",
        turn_requests_before[crossing]
    );
    let (turns, summaries) = env.requests().await;
    assert_eq!(summaries.len(), 1, "no second summary call");
    assert_eq!(env.script.remaining().1, 0);

    // The speculation started past the soft threshold, and only then.
    let sizes = env.check_turn_requests(instructions).await;
    let speculated_after = sizes[..turn_requests_before_summary]
        .iter()
        .copied()
        .max()
        .unwrap();
    assert!(
        speculated_after > soft * 9 / 10,
        "{speculated_after} vs soft threshold {soft}"
    );
    let compacted_at = turns
        .iter()
        .position(|b| b["messages"].to_string().contains("<system-reminder>"))
        .unwrap();
    for (i, size) in sizes.iter().enumerate().skip(compacted_at) {
        assert!(
            *size <= threshold,
            "request {i}: {size} over the threshold {threshold}"
        );
    }
    let usage: Vec<_> = env
        .store
        .usage(session)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.purpose == pith::store::UsagePurpose::Summary)
        .collect();
    assert_eq!(usage.len(), 1);
    assert!(!usage[0].discarded, "the speculative call was used");
    assert_log_pairs(&env.messages(session).await);
}
