//! Property tests of invariants 1, 2, 3, 7 and 8 over generated sessions: mixed roles, parallel
//! tool calls, huge tool outputs, images, reminders, interleaved instructions and earlier
//! compactions. The case count follows `PROPTEST_CASES` (proptest's default is 256).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use pith_compaction::prompt::serialize_messages;
use pith_compaction::{
    overflow, project, prune, CompactionConfig, CompactionError, CompactionTrigger, ProjectionStyle,
};
use pith_core::{EstimateCounter, Message, Part, Role};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Step {
    User(usize),
    Reminder,
    Instruction,
    Tools(Vec<(usize, usize)>),
    Image,
    Text(usize),
    Compact,
}

fn step() -> impl Strategy<Value = Step> {
    let output = prop_oneof![6 => 1usize..3_000, 1 => 20_000usize..60_000];
    let call = (output, 0usize..1_500);
    prop_oneof![
        3 => (1usize..1_500).prop_map(Step::User),
        1 => Just(Step::Reminder),
        1 => Just(Step::Instruction),
        5 => prop::collection::vec(call, 1..4).prop_map(Step::Tools),
        1 => Just(Step::Image),
        2 => (1usize..800).prop_map(Step::Text),
        1 => Just(Step::Compact),
    ]
}

/// Messages of one step (empty for `Compact`).
fn messages(step: &Step, n: usize) -> Vec<Message> {
    match step {
        Step::User(len) => vec![Message::user(format!("u{n} {}", "r".repeat(*len)))],
        Step::Reminder => vec![Message::user(format!(
            "<system-reminder>note {n}</system-reminder>"
        ))],
        Step::Instruction => vec![Message::new(
            if n & 1 == 0 { Role::System } else { Role::Developer },
            vec![Part::text(format!("rule {n}"))],
        )],
        Step::Tools(calls) => {
            let mut assistant = Message::assistant(format!("step {n}"));
            for (i, (_, arg_len)) in calls.iter().enumerate() {
                assistant.parts.push(Part::ToolCall {
                    call_id: format!("c{n}-{i}"),
                    name: "edit".into(),
                    arguments: json!({"path": format!("f{n}.rs"), "text": "a".repeat(*arg_len)}),
                });
            }
            let mut out = vec![assistant];
            for (i, (len, _)) in calls.iter().enumerate() {
                out.push(Message::tool_result(
                    format!("c{n}-{i}"),
                    "o".repeat(*len),
                    i % 3 == 2,
                ));
            }
            out
        }
        Step::Image => vec![Message::new(
            Role::User,
            vec![
                Part::text(format!("look {n}")),
                Part::Image {
                    media_type: "image/png".into(),
                    source: "data:image/png;base64,AAAA".into(),
                },
            ],
        )],
        Step::Text(len) => vec![Message::assistant(format!("a{n} {}", "t".repeat(*len)))],
        Step::Compact => vec![],
    }
}

fn window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(8_192u64), Just(16_384), Just(32_768)]
}

/// Runs a generated session, compacting at every `Compact` step and at the end, and checks the
/// invariants after every commit and every failure.
fn run(window: u64, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let h = Harness::new(window);
        let id = h.session(vec![]).await;
        let config = CompactionConfig::default().with_deterministic_summarizer();
        let service = h.service(config.clone());
        let threshold = overflow::threshold(window, None).unwrap();
        let target = prune::target(threshold, config.target_ratio);
        let last = steps.len();
        for (n, step) in steps.iter().enumerate() {
            append(h.store.as_ref(), id, messages(step, n)).await;
            if !matches!(step, Step::Compact) && n + 1 != last {
                continue;
            }
            let trigger = if n & 1 == 0 {
                CompactionTrigger::Proactive
            } else {
                CompactionTrigger::Manual { instructions: None }
            };
            let log_before = h.store.load_log(id).await.unwrap();
            match service.compact(id, trigger).await {
                Ok(result) => {
                    let log = h.store.load_log(id).await.unwrap();
                    let view = h.store.load_view(id).await.unwrap();
                    let projected = project(&view, ProjectionStyle::Reminder);
                    assert_no_split_tool_pair(&projected);
                    assert_instructions_intact(&log, &projected);
                    assert_user_text_and_arguments_intact(&log, &projected);
                    let tokens =
                        overflow::context_tokens(&view, ProjectionStyle::Reminder, &[], &EstimateCounter);
                    prop_assert!(tokens <= threshold, "invariant 7: {} > {}", tokens, threshold);
                    if !result.noop {
                        prop_assert!(
                            result.tokens_after <= target,
                            "invariant 8: {} > {}",
                            result.tokens_after,
                            target
                        );
                        prop_assert_eq!(tokens, result.tokens_after);
                    }
                }
                Err(e) => {
                    prop_assert!(
                        matches!(
                            e,
                            CompactionError::NoProgress { .. }
                                | CompactionError::DoesNotFit { .. }
                                | CompactionError::NotNeeded { .. }
                                | CompactionError::NoMessagesToCompact
                                | CompactionError::CircuitOpen
                        ),
                        "unexpected failure {}",
                        e
                    );
                    prop_assert_eq!(&h.store.load_log(id).await.unwrap(), &log_before, "invariant 4");
                }
            }
        }
        Ok(())
    })
}

proptest! {
    #[test]
    fn invariants_1_2_3_7_8_hold_over_generated_sessions(window in window(), steps in prop::collection::vec(step(), 1..60)) {
        run(window, steps)?;
    }

    #[test]
    fn invariant_3_summary_requests_keep_user_text_and_arguments_whole(steps in prop::collection::vec(step(), 1..30)) {
        let msgs: Vec<Message> = steps.iter().enumerate().flat_map(|(n, s)| messages(s, n)).collect();
        let text = serialize_messages(&msgs);
        for m in &msgs {
            if m.role == Role::User {
                for part in &m.parts {
                    if let Part::Text { text: t } = part {
                        prop_assert!(text.contains(t.as_str()));
                    }
                }
            }
            for (_, _, args) in m.tool_calls() {
                prop_assert!(text.contains(&args.to_string()));
            }
            for (_, content, _) in m.tool_results() {
                prop_assert!(content.chars().count() <= 4_000 || !text.contains(content));
            }
        }
    }
}
