//! (d) The deterministic summarizer on a 150k-token span.
//!
//! `cargo bench -p pith-bench --bench summarizer`. The span is cut from the largest shared
//! transcript (its messages from the first user request on, repeated if it is shorter), or from
//! a synthetic history when the transcripts are absent. Each iteration summarises its own copy.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pith_bench::history;
use pith_compaction::deterministic::summarize_span;
use pith_core::{EstimateCounter, Message, Role, TokenCounter};

const SPAN_TOKENS: u64 = 150_000;
const MAX_SUMMARY_TOKENS: u64 = 1_000;

fn conversation(messages: impl Iterator<Item = Message>) -> Vec<Message> {
    let all: Vec<Message> = messages.filter(|m| !m.role.is_instruction()).collect();
    let first_user = all.iter().position(|m| m.role == Role::User).unwrap_or(0);
    all[first_user..].to_vec()
}

fn source() -> (String, Vec<Message>) {
    if let Some(largest) = pith_bench::transcripts::load_all().and_then(|t| t.into_iter().next()) {
        let msgs = conversation(largest.entries.iter().filter_map(|e| e.as_message().cloned()));
        return (largest.name, msgs);
    }
    let msgs = conversation(
        history::log(4_000)
            .into_iter()
            .filter_map(|e| e.as_message().cloned()),
    );
    ("synthetic".to_string(), msgs)
}

fn summarizer(c: &mut Criterion) {
    let (name, source) = source();
    let span = history::span_of_tokens(&source, SPAN_TOKENS, &EstimateCounter);
    let tokens: u64 = span.iter().map(|m| EstimateCounter.count_message(m)).sum();
    let bytes: u64 = span.iter().map(|m| m.text_content().len() as u64).sum();
    let summary = summarize_span(&span, None, None, MAX_SUMMARY_TOKENS, &EstimateCounter);
    eprintln!(
        "span from {name}: {} messages, {tokens} tokens; summary {} tokens",
        span.len(),
        EstimateCounter.count_text(&summary)
    );
    let mut group = c.benchmark_group("summarizer");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("deterministic_150k_tokens", |b| {
        b.iter_batched_ref(
            || span.clone(),
            |span| summarize_span(span, None, None, MAX_SUMMARY_TOKENS, &EstimateCounter),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, summarizer);
criterion_main!(benches);
