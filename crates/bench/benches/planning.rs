//! (a) One compaction planning pass (token accounting, overflow, select, prompt build; no model)
//! on every shared transcript, largest first.
//!
//! `cargo bench -p pith-bench --bench planning`. Each iteration gets its own copy of the view
//! (`iter_batched_ref`: built and dropped outside the timing), so nothing computed by one pass is
//! reused by the next.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use pith_bench::planning::plan_pass;
use pith_compaction::CompactionConfig;
use pith_core::EstimateCounter;

/// The window the passes plan for (a common model window).
const WINDOW: u64 = 128_000;

fn planning(c: &mut Criterion) {
    let Some(transcripts) = pith_bench::transcripts::load_all() else {
        return;
    };
    let config = CompactionConfig::default();
    let mut group = c.benchmark_group("planning");
    group.sample_size(30).measurement_time(Duration::from_secs(3));
    for t in &transcripts {
        let view = t.view().expect("imported logs form a view");
        let figures = plan_pass(&view, WINDOW, &config, &EstimateCounter);
        eprintln!(
            "{}: {} bytes, {} entries, {figures:?}",
            t.name,
            t.bytes,
            t.entries.len()
        );
        if figures.is_err() {
            continue;
        }
        group.throughput(Throughput::Bytes(t.bytes));
        group.bench_function(t.name.as_str(), |b| {
            b.iter_batched_ref(
                || view.clone(),
                |view| plan_pass(view, WINDOW, &config, &EstimateCounter),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, planning);
criterion_main!(benches);
