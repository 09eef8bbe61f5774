//! Snapshots of the rendered summary prompts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pith_compaction::prompt::{render_messages, PromptInput, PromptMode};
use pith_core::{Message, Part};
use serde_json::json;

fn span() -> Vec<Message> {
    let mut call = Message::assistant("I'll check the failing test first.");
    call.parts.push(Part::ToolCall {
        call_id: "c1".into(),
        name: "bash".into(),
        arguments: json!({ "command": "cargo test -p parser" }),
    });
    vec![
        Message::user("The parser rejects trailing commas. Fix it, and do not change the public API."),
        call,
        Message::tool_result(
            "c1",
            format!(
                "running 12 tests\n{}\ntest trailing_comma ... FAILED",
                "ok\n".repeat(2_000)
            ),
            true,
        ),
        Message::assistant("The fix is in src/list.rs: accept an optional comma before `]`."),
    ]
}

fn kept() -> Vec<Message> {
    vec![
        Message::user("Also add a test for nested lists."),
        Message::assistant("Added tests/nested.rs."),
    ]
}

fn render(input: PromptInput<'_>) -> String {
    render_messages(&input)
        .iter()
        .map(|m| format!("=== {} ===\n{}", m.role.as_str(), m.text_content()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn first_summary_prompt() {
    let (span, kept) = (span(), kept());
    insta::assert_snapshot!(render(PromptInput {
        span: &span,
        kept: &kept,
        previous_summary: None,
        instructions: None,
        max_summary_tokens: 1_000,
        mode: PromptMode::First,
    }));
}

#[test]
fn update_prompt_with_a_manual_instruction() {
    let (span, kept) = (span(), kept());
    insta::assert_snapshot!(render(PromptInput {
        span: &span,
        kept: &kept,
        previous_summary: Some("## Goal\n- Make the parser accept trailing commas"),
        instructions: Some("Keep the exact failing test names."),
        max_summary_tokens: 1_000,
        mode: PromptMode::Update,
    }));
}
