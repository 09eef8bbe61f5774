//! Builders of entries and compaction records for the conformance checks.

use chrono::{TimeZone, Utc};
use pith_core::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, Entry, EntryId, EntryRange, Marker,
    MarkerKind, MaskedEntry, Message, MessageMeta, ModelChange, Part, Role, Usage,
};
use pith_store::types::{BreakerState, UsagePurpose, UsageRecord};

/// A user message with some text.
pub fn user(text: &str) -> Entry {
    Entry::Message(Message::user(text))
}

/// A message holding every kind of part, with usage, finish reason and metadata set.
pub fn every_part() -> Message {
    let mut m = Message::new(
        Role::Assistant,
        vec![
            Part::text("héllo wörld — \"quoted\" \\ backslash\nnew line \u{1F600}"),
            Part::Image {
                media_type: "image/png".into(),
                source: "data:image/png;base64,iVBORw0KGgo=".into(),
            },
            Part::Document {
                media_type: "application/pdf".into(),
                pages: 12,
                source: "https://example.com/spec.pdf".into(),
                title: Some("Spec".into()),
            },
            Part::Document {
                media_type: "application/pdf".into(),
                pages: 1,
                source: "JVBERi0=".into(),
                title: None,
            },
            Part::ToolCall {
                call_id: "call_1".into(),
                name: "bash".into(),
                arguments: serde_json::json!({"cmd": "ls -la", "n": [1, 2.5, -3], "nested": {"a": null, "b": true}}),
            },
            Part::Reasoning {
                text: "thinking".into(),
                signature: Some("sig==".into()),
            },
            Part::Reasoning {
                text: String::new(),
                signature: None,
            },
        ],
    );
    m.usage = Some(Usage::from_anthropic(100, 20, 30, 40));
    m.finish = Some(pith_core::FinishReason::ToolCalls);
    m.meta = MessageMeta {
        external_summary: false,
        synthetic: true,
        source: Some("line 42".into()),
        model: Some("anthropic/claude".into()),
    };
    m
}

/// A tool message answering `call_1`, failed.
pub fn tool_result() -> Message {
    Message::tool_result("call_1", "permission denied\n", true)
}

/// A model change entry.
pub fn model_change() -> Entry {
    Entry::ModelChange(ModelChange {
        id: EntryId::new(),
        model: "openai/gpt-4o".into(),
        created_at: Utc::now(),
    })
}

/// A marker entry with every field set.
pub fn marker() -> Entry {
    Entry::Marker(Marker {
        id: EntryId::new(),
        kind: MarkerKind::ExternalCompaction {
            tool: "claude-code".into(),
            tokens_before: Some(150_000),
            trigger: Some("auto".into()),
            summary: Some("earlier work".into()),
        },
        created_at: Utc::now(),
        source: Some("line 7".into()),
    })
}

/// A compaction record creating `generation`, keeping the tail from `tail_start`.
pub fn compaction(
    generation: u64,
    key: &str,
    tail_start: Option<EntryId>,
    instructions: Vec<EntryId>,
    reminders: Vec<EntryId>,
) -> CompactionMeta {
    CompactionMeta {
        id: EntryId::new(),
        generation,
        summary: format!("summary of generation {generation}"),
        summarized: tail_start.map(|t| EntryRange {
            first: t,
            last: t,
            messages: 1,
        }),
        tail_start,
        retained_instructions: instructions,
        retained_reminders: reminders,
        masked: vec![MaskedEntry {
            entry_id: EntryId::new(),
            call_id: "call_9".into(),
            tool: "read".into(),
            tokens: 1234,
        }],
        tokens_before: 90_000,
        tokens_after: 12_000,
        strategy: CompactionStrategy::ModelSummary,
        summary_model: Some("openai/gpt-4o-mini".into()),
        trigger: CompactionTriggerKind::Proactive,
        usage: Usage::from_openai(5000, 300, 1000),
        summary_calls: 2,
        idempotency_key: key.to_string(),
        created_at: Utc::now(),
        extra: Some(serde_json::json!({"ledger": ["a.rs", "b.rs"], "ratio": 0.25})),
    }
}

/// A breaker that is open.
pub fn open_breaker() -> BreakerState {
    BreakerState {
        consecutive_failures: 3,
        open: true,
        opened_at: Some(
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5)
                .single()
                .unwrap_or_else(Utc::now),
        ),
        last_error: Some("summary failed: empty summary".into()),
    }
}

/// Three usage records of different purposes.
pub fn usage_records() -> Vec<UsageRecord> {
    vec![
        UsageRecord {
            at: Utc::now(),
            model: "openai/gpt-4o".into(),
            purpose: UsagePurpose::Turn,
            usage: Usage::from_openai(1000, 100, 200),
            discarded: false,
        },
        UsageRecord {
            at: Utc::now(),
            model: "openai/gpt-4o-mini".into(),
            purpose: UsagePurpose::Summary,
            usage: Usage::from_anthropic(10, 20, 30, 40),
            discarded: true,
        },
        UsageRecord {
            at: Utc::now(),
            model: "local/grader".into(),
            purpose: UsagePurpose::Grader,
            usage: Usage::default(),
            discarded: false,
        },
    ]
}
