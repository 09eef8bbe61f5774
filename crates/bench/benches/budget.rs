//! (b) The per-turn budget check at history sizes of 100, 1k, 10k and 100k entries.
//!
//! `cargo bench -p pith-bench --bench budget`. The view holds the whole history (a session
//! never compacted: the worst case). Each iteration appends one fresh entry — a new reply, as
//! between two model calls — and runs the check on the grown view, with the runtime's
//! ContextPipeline warmed on the history before (its running totals are cached per session).
//! The view is cut back to its size (and the cache re-warmed, untimed) once it grew by a tenth
//! (at least 10 entries), so every size is measured within 10% of its nominal history.
//!
//! Functions:
//! - `prepare`: `ContextPipeline::prepare`, the per-turn check the runtime runs before every
//!   model call (token budget and count signal; no message is copied);
//! - `request_messages`: `ContextPipeline::request_messages`, building the messages of a request
//!   that is actually sent (projection + clipping), from a copy of the view made untimed — what
//!   the driver does right before the model call; it is O(view) by nature, since every message
//!   is sent;
//! - `context_tokens_uncached`: `overflow::context_tokens` + `overflow::view_message_count`, the
//!   same decision by walking the whole view, without the pipeline's cache.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use pith_bench::history;
use pith_compaction::{overflow, ProjectionStyle};
use pith_core::{EstimateCounter, Message, StoredView, TokenCounter, Usage};
use pith_runtime::pipeline::ContextPipeline;

const SIZES: [usize; 4] = [100, 1_000, 10_000, 100_000];
const WINDOW: u64 = 100_000_000;

fn fresh_reply(i: usize) -> pith_core::Entry {
    let mut m = Message::assistant(format!("step {i} finished; the tests pass now"));
    m.usage = Some(Usage::from_openai(3_000 + i as u64 % 1_000, 40, 0));
    m.into()
}

struct Fixture {
    base: usize,
    view: StoredView,
    pipeline: ContextPipeline,
    added: usize,
}

impl Fixture {
    fn new(n: usize) -> Self {
        let counter: Arc<dyn TokenCounter> = Arc::new(EstimateCounter);
        let pipeline = ContextPipeline::new(counter, ProjectionStyle::Reminder, None, 50);
        let view = history::view(n).unwrap();
        pipeline.prepare(&view, &view.session.tools, WINDOW).unwrap();
        Self {
            base: n,
            view,
            pipeline,
            added: 0,
        }
    }

    /// Untimed: the next fresh entry, after cutting the view back when it grew too far.
    fn next_entry(&mut self) -> pith_core::Entry {
        if self.view.tail.len() >= self.base + (self.base / 10).max(10) {
            self.view.tail.truncate(self.base);
            let tools = self.view.session.tools.clone();
            self.pipeline.prepare(&self.view, &tools, WINDOW).unwrap();
        }
        self.added += 1;
        fresh_reply(self.added)
    }
}

fn budget_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("budget_check");
    group.sample_size(30).measurement_time(Duration::from_secs(3));
    for n in SIZES {
        let fixture = RefCell::new(Fixture::new(n));
        group.bench_with_input(BenchmarkId::new("prepare", n), &n, |b, _| {
            b.iter_batched(
                || fixture.borrow_mut().next_entry(),
                |entry| {
                    let mut f = fixture.borrow_mut();
                    f.view.tail.push(entry);
                    let f = &*f;
                    f.pipeline
                        .prepare(&f.view, &f.view.session.tools, WINDOW)
                        .unwrap()
                        .budget
                },
                BatchSize::SmallInput,
            )
        });
        // The copy of the view is made untimed; the built messages are dropped untimed too.
        let batch = if n >= 10_000 {
            BatchSize::PerIteration
        } else {
            BatchSize::SmallInput
        };
        group.bench_with_input(BenchmarkId::new("request_messages", n), &n, |b, _| {
            b.iter_batched(
                || {
                    let mut f = fixture.borrow_mut();
                    let entry = f.next_entry();
                    f.view.tail.push(entry);
                    f.view.clone()
                },
                |view| fixture.borrow().pipeline.request_messages(view),
                batch,
            )
        });
        group.bench_with_input(BenchmarkId::new("context_tokens_uncached", n), &n, |b, _| {
            b.iter_batched(
                || fixture.borrow_mut().next_entry(),
                |entry| {
                    let mut f = fixture.borrow_mut();
                    f.view.tail.push(entry);
                    let tokens = overflow::context_tokens(
                        &f.view,
                        ProjectionStyle::Reminder,
                        &f.view.session.tools,
                        &EstimateCounter,
                    );
                    (tokens, overflow::view_message_count(&f.view))
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, budget_check);
criterion_main!(benches);
