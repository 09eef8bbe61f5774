//! Cost of the decisions the runtime makes before every model call: `overflow::decide` on a
//! large uncompacted view, and `clip_tool_output` on a large tool output.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pith_compaction::{clip_tool_output, overflow, CompactionConfig};
use pith_core::{Entry, EstimateCounter, Message, Part, SessionRecord, StoredView};
use serde_json::json;

fn view(turns: usize) -> StoredView {
    let mut log: Vec<Entry> = vec![Message::system("You are a careful engineer.").into()];
    for i in 0..turns {
        log.push(Message::user(format!("Turn {i}: look at src/file_{i}.rs")).into());
        let mut call = Message::assistant("checking");
        call.parts.push(Part::ToolCall {
            call_id: format!("c{i}"),
            name: "read".into(),
            arguments: json!({ "path": format!("src/file_{i}.rs") }),
        });
        log.push(call.into());
        log.push(
            Message::tool_result(
                format!("c{i}"),
                "x".repeat(if i % 50 == 0 { 50_000 } else { 1_500 }),
                false,
            )
            .into(),
        );
        log.push(Message::assistant(format!("Answer {i}")).into());
    }
    StoredView::from_log(SessionRecord::new("openai/gpt-4o", vec![]), &log).unwrap()
}

fn bench(c: &mut Criterion) {
    let config = CompactionConfig::default();
    let big = view(500);
    c.bench_function("decide/2000_messages", |b| {
        b.iter(|| overflow::decide(black_box(&big), &[], &EstimateCounter, 128_000, &config).unwrap())
    });
    let output = "y".repeat(868_000);
    c.bench_function("clip_tool_output/868KB", |b| {
        b.iter(|| clip_tool_output(black_box(&output)).len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
