#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use chrono::Utc;
use pith_core::{
    CompactionMeta, CompactionStrategy, CompactionTriggerKind, EntryId, EstimateCounter, MaskedEntry, Role,
    SessionRecord, Usage,
};

fn view(log: &[Entry], record: &SessionRecord) -> StoredView {
    StoredView::from_log(record.clone(), log).unwrap()
}

fn tools() -> Vec<ToolDeclaration> {
    vec![ToolDeclaration {
        name: "read".into(),
        description: "reads a file".into(),
        parameters: serde_json::json!({"type": "object"}),
    }]
}

/// Asserts that the pipeline's cached check equals the compaction crate's full walk of `v`.
fn assert_agrees(pipeline: &ContextPipeline, v: &StoredView, style: ProjectionStyle, what: &str) -> Prepared {
    let counter = EstimateCounter;
    let tools = tools();
    let prepared = pipeline.prepare(v, &tools, 1_000_000).unwrap();
    assert_eq!(
        prepared.context_tokens,
        overflow::context_tokens(v, style, &tools, &counter),
        "context tokens {what}"
    );
    assert_eq!(
        prepared.estimate,
        overflow::estimate_view(v, style, &tools, &counter),
        "estimate {what}"
    );
    assert_eq!(
        prepared.message_count,
        overflow::view_message_count(v),
        "count {what}"
    );
    prepared
}

/// One round: a user request, a reply with a tool call (usage on every other one), its result
/// (long every third round), and an answer.
fn round(i: u64) -> Vec<Entry> {
    let mut call = Message::assistant(format!("checking {i}"));
    call.parts.push(Part::ToolCall {
        call_id: format!("c{i}"),
        name: "read".into(),
        arguments: serde_json::json!({"path": format!("src/f{i}.rs")}),
    });
    if i.is_multiple_of(2) {
        call.usage = Some(Usage::from_openai(900 + 300 * i, 20, 0));
    }
    let body = if i.is_multiple_of(3) {
        "y".repeat(9_000)
    } else {
        format!("line {i}\n").repeat(20)
    };
    vec![
        Message::user(format!("question {i} {}", "x".repeat(i as usize * 50))).into(),
        call.into(),
        Message::tool_result(format!("c{i}"), body, false).into(),
        Message::assistant(format!("answer {i}")).into(),
    ]
}

fn meta(
    generation: u64,
    tail_start: EntryId,
    retained: Vec<EntryId>,
    reminders: Vec<EntryId>,
) -> CompactionMeta {
    CompactionMeta {
        id: EntryId::new(),
        generation,
        summary: format!("summary of generation {generation}: {}", "s".repeat(300)),
        summarized: None,
        tail_start: Some(tail_start),
        retained_instructions: retained,
        retained_reminders: reminders,
        masked: vec![],
        tokens_before: 0,
        tokens_after: 0,
        strategy: CompactionStrategy::Deterministic,
        summary_model: None,
        trigger: CompactionTriggerKind::Proactive,
        usage: Usage::default(),
        summary_calls: 0,
        idempotency_key: format!("k{generation}"),
        created_at: Utc::now(),
        extra: None,
    }
}

/// The masks of `meta` applied to the view in place, as a store-side masking step would.
fn apply_masks(v: &mut StoredView) {
    let Some(meta) = v.compaction.clone() else { return };
    for entry in &mut v.tail {
        if let Entry::Message(m) = entry {
            for part in &mut m.parts {
                if let Part::ToolResult { call_id, content, .. } = part {
                    if let Some(mask) = meta
                        .masked
                        .iter()
                        .find(|x| x.entry_id == m.id && &x.call_id == call_id)
                    {
                        *content = format!("[output of {} omitted: about {} tokens]", mask.tool, mask.tokens);
                    }
                }
            }
        }
    }
}

#[test]
fn the_cached_estimate_agrees_with_the_compaction_crate_as_the_log_grows() {
    let counter: Arc<dyn TokenCounter> = Arc::new(EstimateCounter);
    let pipeline = ContextPipeline::new(counter, ProjectionStyle::Reminder, None, 50);
    let tools = tools();
    let record = SessionRecord::new("scripted/m", tools.clone());
    let mut log: Vec<Entry> = vec![Message::system("rules").into()];
    for i in 0..20u64 {
        log.push(Message::user(format!("question {i} {}", "x".repeat(i as usize * 50))).into());
        let mut reply = Message::assistant(format!("answer {i}"));
        if i % 3 == 0 {
            reply.usage = Some(Usage::from_openai(400 * (i + 1), 20, 0));
        }
        log.push(reply.into());
        log.push(Message::tool_result(format!("c{i}"), "y".repeat(9_000), false).into());
        let v = view(&log, &record);
        let prepared = pipeline.prepare(&v, &tools, 8_192).unwrap();
        let expected = overflow::context_tokens(&v, ProjectionStyle::Reminder, &tools, &EstimateCounter);
        assert_eq!(prepared.context_tokens, expected, "after {} entries", log.len());
        assert_eq!(
            prepared.estimate,
            overflow::estimate_view(&v, ProjectionStyle::Reminder, &tools, &EstimateCounter)
        );
        assert_eq!(prepared.message_count, overflow::view_message_count(&v));
    }
    let v = view(&log, &record);
    let prepared = pipeline.prepare(&v, &tools, 8_192).unwrap();
    assert_eq!(prepared.budget, Budget::OverWindow);
    // Tool-result bodies are clipped; user text is not.
    let messages = pipeline.request_messages(v);
    let longest_tool = messages
        .iter()
        .flat_map(|m| m.tool_results().map(|(_, c, _)| c.len()))
        .max()
        .unwrap();
    assert!(longest_tool < 4_200, "{longest_tool}");
    assert!(messages.iter().any(|m| m.text_content().len() > 950));
    let small = pipeline
        .prepare(&view(&log[..4], &record), &tools, 128_000)
        .unwrap();
    assert_eq!(small.budget, Budget::Fits);
}

#[test]
fn the_cached_check_agrees_across_compactions_and_masked_entries() {
    for style in [
        ProjectionStyle::Reminder,
        ProjectionStyle::Handoff,
        ProjectionStyle::SummaryMessage,
    ] {
        for recorded_tail in [false, true] {
            let pipeline = ContextPipeline::new(Arc::new(EstimateCounter), style, None, 50);
            let record = SessionRecord::new("scripted/m", tools());
            let system = Message::system("rules");
            let reminder = Message::user("<system-reminder>keep the tests green</system-reminder>");
            let (system_id, reminder_id) = (system.id, reminder.id);
            let mut log: Vec<Entry> = vec![system.into(), reminder.into()];
            for i in 0..6 {
                log.extend(round(i));
                assert_agrees(
                    &pipeline,
                    &view(&log, &record),
                    style,
                    &format!("gen 0, round {i}"),
                );
            }
            // A compaction keeps the last two rounds and masks the long result of round 3.
            let tail_start = log[log.len() - 8].id();
            let masked_result = log[log.len() - 6].id();
            let mut m = meta(1, tail_start, vec![system_id], vec![reminder_id]);
            m.masked.push(MaskedEntry {
                entry_id: masked_result,
                call_id: "c4".into(),
                tool: "read".into(),
                tokens: 2_250,
            });
            if recorded_tail {
                m.extra = Some(serde_json::json!({ "tail_entries": 8 }));
            }
            log.push(Entry::Compaction(Box::new(m)));
            // Right after it, round 4's usage predates the compaction and must be ignored.
            let after = assert_agrees(&pipeline, &view(&log, &record), style, "right after gen 1");
            assert_eq!(after.context_tokens, after.estimate);
            for i in 6..10 {
                log.extend(round(i));
                let what = format!("gen 1, round {i}, recorded {recorded_tail}, {style:?}");
                let v = view(&log, &record);
                assert_eq!(v.generation, 1);
                let prepared = assert_agrees(&pipeline, &v, style, &what);
                // The same view with its masks applied in place (as a masking step after the
                // load would): measured by a pipeline of its own, since one pipeline sees a
                // session's views of a generation either always masked or never.
                let mut masked = v.clone();
                apply_masks(&mut masked);
                masked.generation = 1;
                let fresh = ContextPipeline::new(Arc::new(EstimateCounter), style, None, 50);
                let expected = assert_agrees(&fresh, &masked, style, &format!("{what}, masked"));
                assert!(expected.estimate < prepared.estimate, "{what}");
            }
            // A second compaction in between: the cache is rebuilt for generation 2.
            let tail_start = log[log.len() - 4].id();
            let mut m = meta(2, tail_start, vec![system_id], vec![reminder_id]);
            if recorded_tail {
                m.extra = Some(serde_json::json!({ "tail_entries": 4 }));
            }
            log.push(Entry::Compaction(Box::new(m)));
            assert_agrees(&pipeline, &view(&log, &record), style, "right after gen 2");
            for i in 10..13 {
                log.extend(round(i));
                let v = view(&log, &record);
                assert_eq!(v.generation, 2);
                assert_agrees(&pipeline, &v, style, &format!("gen 2, round {i}"));
            }
        }
    }
}

#[test]
fn request_messages_are_the_trimmed_projection() {
    for style in [
        ProjectionStyle::Reminder,
        ProjectionStyle::Handoff,
        ProjectionStyle::SummaryMessage,
    ] {
        let pipeline = ContextPipeline::new(Arc::new(EstimateCounter), style, None, 50);
        let record = SessionRecord::new("scripted/m", tools());
        let system = Message::system("rules");
        let system_id = system.id;
        let mut log: Vec<Entry> = vec![system.into()];
        let mut reminders = Vec::new();
        for i in 0..14 {
            let r = Message::user(format!("<system-reminder>note {i}</system-reminder>"));
            reminders.push(r.id);
            log.push(r.into());
            log.extend(round(i));
        }
        let plain = view(&log, &record);
        assert_eq!(
            pipeline.request_messages(plain.clone()),
            trim(projection::project(&plain, style))
        );
        let tail_start = log[log.len() - 8].id();
        let masked_result = log[log.len() - 2].id();
        // Reminders 0..=12 are before the tail (round 12 on); 13 is in it.
        let mut m = meta(1, tail_start, vec![system_id], reminders[..13].to_vec());
        log.push(Entry::Compaction(Box::new(m.clone())));
        log.extend(round(20));
        let compacted = view(&log, &record);
        assert_eq!(compacted.reminders.len(), 13);
        let sent = pipeline.request_messages(compacted.clone());
        assert_eq!(sent, trim(projection::project(&compacted, style)), "{style:?}");
        assert_eq!(sent[0].role, Role::System);
        assert!(sent
            .iter()
            .all(|m| m.tool_results().all(|(_, c, _)| c.len() < 4_200)));
        // With a masked entry the projection's placeholder is sent.
        m.id = EntryId::new();
        m.generation = 2;
        m.masked.push(MaskedEntry {
            entry_id: masked_result,
            call_id: "c13".into(),
            tool: "read".into(),
            tokens: 40,
        });
        log.push(Entry::Compaction(Box::new(m)));
        let masked = view(&log, &record);
        let sent = pipeline.request_messages(masked.clone());
        assert_eq!(sent, trim(projection::project(&masked, style)));
        let placeholder = sent.iter().find(|x| x.id == masked_result).unwrap();
        assert!(placeholder
            .tool_results()
            .all(|(_, c, _)| c.starts_with("[output of read")));
    }
}

#[test]
fn a_view_that_does_not_continue_the_cache_rebuilds_it_and_caches_are_bounded() {
    let pipeline = ContextPipeline::new(Arc::new(EstimateCounter), ProjectionStyle::Reminder, None, 6)
        .with_max_cached_sessions(4);
    let record = SessionRecord::new("scripted/m", tools());
    let mut log: Vec<Entry> = vec![Message::system("rules").into()];
    for i in 0..4 {
        log.extend(round(i));
    }
    let full = assert_agrees(&pipeline, &view(&log, &record), ProjectionStyle::Reminder, "full");
    assert_eq!(full.budget, Budget::OverThreshold, "16 messages > 6");
    // A shorter view of the same session (another branch of the log, or a stale copy).
    let short = assert_agrees(
        &pipeline,
        &view(&log[..5], &record),
        ProjectionStyle::Reminder,
        "short",
    );
    assert!(short.estimate < full.estimate);
    assert_eq!(short.message_count, 4);
    // Same length, a different last entry.
    let mut other = log.clone();
    other.pop();
    other.push(Message::assistant("a different answer").into());
    assert_agrees(
        &pipeline,
        &view(&other, &record),
        ProjectionStyle::Reminder,
        "replaced",
    );
    // Many sessions: at most the bound stays cached, and every check is still exact.
    for s in 0..10 {
        let record = SessionRecord::new("scripted/m", tools());
        let v = view(&log[..(5 + s)], &record);
        assert_agrees(&pipeline, &v, ProjectionStyle::Reminder, &format!("session {s}"));
        assert!(pipeline.cached_sessions() <= 4, "{}", pipeline.cached_sessions());
    }
    pipeline.forget(record.id);
    let tools_changed = vec![];
    let v = view(&log, &record);
    let bare = pipeline.prepare(&v, &tools_changed, 1_000_000).unwrap();
    assert_eq!(
        bare.estimate,
        overflow::estimate_view(&v, ProjectionStyle::Reminder, &[], &EstimateCounter)
    );
}

#[test]
fn a_cache_holds_eight_bytes_per_entry() {
    let record = SessionRecord::new("scripted/m", tools());
    let mut log: Vec<Entry> = Vec::new();
    for i in 0..50 {
        log.extend(round(i));
    }
    let cache = TailCache::build(&view(&log, &record), ProjectionStyle::Reminder, &EstimateCounter);
    assert!(
        cache.heap_bytes() <= 8 * 2 * (log.len() + 1),
        "{}",
        cache.heap_bytes()
    );
}
