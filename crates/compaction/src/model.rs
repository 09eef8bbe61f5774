//! The model-backed summarizer: summary calls through the router, with recursive chunking.
//!
//! A span that fits the summary model's input budget (window − output reserve − 5% headroom) is
//! summarised in one call. One that does not is packed into chunks that each fit; every chunk is
//! summarised, then the chunk summaries (with the previous summary, if any) are merged by one more
//! call — recursively, when even the chunk summaries do not fit together. A provider overflow on a
//! chunk halves that chunk and retries. Depth and calls are bounded: never more than
//! `max_summary_calls` calls. An empty summary or a non-success finish is a failure.

use std::sync::Arc;

use async_trait::async_trait;
use pith_core::{CompactionStrategy, Message};
use pith_router::{ChatRequest, ModelRouter, ProviderError};
use pith_store::UsagePurpose;

use crate::budget::{request_tokens, RequestBudget};
use crate::error::CompactionError;
use crate::prompt::{render_messages, serialize_messages, PromptInput, PromptMode};
use crate::summary::{Summarizer, SummaryJob, SummaryOutput};

/// Maximum recursion depth of chunk halving and of merge levels.
pub const MAX_DEPTH: u32 = 4;

/// Summaries written by a model, called through the router.
#[derive(Debug, Clone)]
pub struct ModelSummarizer {
    router: Arc<ModelRouter>,
    sampling: Sampling,
}

/// Sampling options of summary requests (the provider's defaults when unset).
#[derive(Debug, Clone, Default)]
struct Sampling {
    temperature: Option<f32>,
    stop: Vec<String>,
}

impl ModelSummarizer {
    /// A summarizer that calls `job.model` through `router`.
    pub fn new(router: Arc<ModelRouter>) -> Self {
        Self {
            router,
            sampling: Sampling::default(),
        }
    }

    /// Sets the sampling temperature of summary requests.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.sampling.temperature = Some(temperature);
        self
    }

    /// Sets stop sequences of summary requests: generation ends (successfully) at the first one.
    /// Small local models that ramble past the output reserve finish cleanly with a stop such as
    /// a blank line.
    pub fn with_stop(mut self, stop: Vec<String>) -> Self {
        self.sampling.stop = stop;
        self
    }
}

enum CallError {
    Overflow(ProviderError),
    Fatal(CompactionError),
}

impl From<CompactionError> for CallError {
    fn from(e: CompactionError) -> Self {
        CallError::Fatal(e)
    }
}

fn fatal(e: CallError) -> CompactionError {
    match e {
        CallError::Overflow(p) => CompactionError::SummaryFailed(p),
        CallError::Fatal(c) => c,
    }
}

struct Run<'a> {
    router: &'a ModelRouter,
    sampling: &'a Sampling,
    job: &'a SummaryJob,
    budget: RequestBudget,
    calls: u32,
}

impl<'a> Run<'a> {
    fn tokens(&self, input: &PromptInput<'_>) -> u64 {
        request_tokens(self.job.counter.as_ref(), &render_messages(input))
    }

    fn input<'b>(
        &self,
        span: &'b [Message],
        kept: &'b [Message],
        previous: Option<&'b str>,
        mode: PromptMode,
    ) -> PromptInput<'b>
    where
        'a: 'b,
    {
        PromptInput {
            span,
            kept,
            previous_summary: previous,
            instructions: self.job.instructions.as_deref(),
            max_summary_tokens: self.job.max_summary_tokens,
            mode,
        }
    }

    async fn call(&mut self, messages: Vec<Message>) -> Result<String, CallError> {
        if self.job.cancel.is_cancelled() {
            return Err(CompactionError::Cancelled.into());
        }
        if self.calls >= self.job.max_calls {
            return Err(CompactionError::DoesNotFit {
                what: "summary calls (max_summary_calls)",
                needed: u64::from(self.calls) + 1,
                available: u64::from(self.job.max_calls),
            }
            .into());
        }
        self.calls += 1;
        let mut request =
            ChatRequest::new(self.job.model.clone(), messages).with_max_tokens(self.budget.max_tokens());
        if let Some(t) = self.sampling.temperature {
            request = request.with_temperature(t);
        }
        if !self.sampling.stop.is_empty() {
            request = request.with_stop(self.sampling.stop.clone());
        }
        let reply = tokio::select! {
            biased;
            _ = self.job.cancel.cancelled() => return Err(CompactionError::Cancelled.into()),
            r = self.router.chat(request, None) => r,
        };
        match reply {
            Ok(resp) => {
                self.job
                    .calls
                    .record(&self.job.model, UsagePurpose::Summary, resp.usage);
                if !resp.finish.is_success() {
                    return Err(
                        CompactionError::SummaryFailed(ProviderError::InvalidResponse(format!(
                            "summary did not finish (finish reason {:?})",
                            resp.finish
                        )))
                        .into(),
                    );
                }
                let text = resp.message.text_content().trim().to_string();
                if text.is_empty() {
                    return Err(CompactionError::SummaryFailed(ProviderError::InvalidResponse(
                        "summary model returned an empty summary".into(),
                    ))
                    .into());
                }
                Ok(text)
            }
            Err(err) => {
                self.job
                    .calls
                    .record(&self.job.model, UsagePurpose::Summary, Default::default());
                if let ProviderError::ContextOverflow {
                    limit: Some(limit), ..
                } = &err
                {
                    if *limit < self.budget.window {
                        self.budget = RequestBudget::for_window(*limit);
                    }
                }
                match err {
                    ProviderError::Cancelled => Err(CompactionError::Cancelled.into()),
                    e if e.is_context_overflow() => Err(CallError::Overflow(e)),
                    e => Err(CompactionError::SummaryFailed(e).into()),
                }
            }
        }
    }

    /// Packs messages into consecutive chunks whose first-mode request fits the budget.
    fn pack(&self, span: &[Message]) -> Result<Vec<std::ops::Range<usize>>, CompactionError> {
        let counter = self.job.counter.as_ref();
        let overhead = self.tokens(&self.input(&[], &[], None, PromptMode::First));
        let available = self.budget.input_budget().saturating_sub(overhead);
        let mut chunks = Vec::new();
        let (mut start, mut used) = (0usize, 0u64);
        for (i, m) in span.iter().enumerate() {
            let t = counter.count_text(&serialize_messages(std::slice::from_ref(m))) + 1;
            if t > available {
                return Err(CompactionError::DoesNotFit {
                    what: "summary request tokens for one message alone",
                    needed: overhead + t,
                    available: self.budget.input_budget(),
                });
            }
            if used + t > available && i > start {
                chunks.push(start..i);
                start = i;
                used = 0;
            }
            used += t;
        }
        if start < span.len() {
            chunks.push(start..span.len());
        }
        Ok(chunks)
    }

    async fn chunk(&mut self, span: &[Message], depth: u32) -> Result<Vec<String>, CompactionError> {
        let messages = render_messages(&self.input(span, &[], None, PromptMode::First));
        match self.call(messages).await {
            Ok(text) => Ok(vec![text]),
            Err(CallError::Overflow(_)) if span.len() > 1 && depth < MAX_DEPTH => {
                let mid = span.len() / 2;
                let mut out = Box::pin(self.chunk(&span[..mid], depth + 1)).await?;
                out.extend(Box::pin(self.chunk(&span[mid..], depth + 1)).await?);
                Ok(out)
            }
            Err(e) => Err(fatal(e)),
        }
    }

    async fn merge(
        &mut self,
        parts: Vec<String>,
        previous: Option<&str>,
        depth: u32,
    ) -> Result<String, CompactionError> {
        let n = parts.len();
        let msgs: Vec<Message> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| Message::assistant(format!("Partial summary {} of {n}:\n{p}", i + 1)))
            .collect();
        let kept = self.job.kept.clone();
        let with_kept = self.input(&msgs, &kept, previous, PromptMode::Merge);
        let input = if self.budget.fits(self.tokens(&with_kept)) {
            with_kept
        } else {
            self.input(&msgs, &[], previous, PromptMode::Merge)
        };
        if self.budget.fits(self.tokens(&input)) {
            match self.call(render_messages(&input)).await {
                Ok(text) => return Ok(text),
                Err(CallError::Overflow(_)) if depth < MAX_DEPTH => {}
                Err(e) => return Err(fatal(e)),
            }
        }
        if depth >= MAX_DEPTH || n < 2 {
            return Err(CompactionError::DoesNotFit {
                what: "summary merge request tokens",
                needed: self.tokens(&input),
                available: self.budget.input_budget(),
            });
        }
        // Merge the parts in groups first, then merge the group summaries.
        let groups = self.pack(&msgs)?;
        let groups = if groups.len() < 2 {
            vec![0..n / 2, n / 2..n]
        } else {
            groups
        };
        let mut merged = Vec::with_capacity(groups.len());
        for g in groups {
            let part: Vec<String> = parts[g].to_vec();
            merged.push(Box::pin(self.merge(part, None, depth + 1)).await?);
        }
        Box::pin(self.merge(merged, previous, depth + 1)).await
    }

    async fn run(&mut self) -> Result<String, CompactionError> {
        let job = self.job;
        let previous = job.previous_summary.as_deref();
        let mode = if previous.is_some() {
            job.mode
        } else {
            PromptMode::First
        };
        let (with_prev, prev_for_merge) = match mode {
            PromptMode::Update | PromptMode::Merge => (previous, previous),
            PromptMode::First => (None, None),
        };
        for kept in [&job.kept[..], &[]] {
            let input = self.input(&job.span, kept, with_prev, mode);
            if self.budget.fits(self.tokens(&input)) {
                match self.call(render_messages(&input)).await {
                    Ok(text) => return Ok(text),
                    Err(CallError::Overflow(_)) => break,
                    Err(e) => return Err(fatal(e)),
                }
            }
        }
        if job.span.is_empty() {
            return Err(CompactionError::DoesNotFit {
                what: "summary update request tokens",
                needed: self.tokens(&self.input(&[], &[], with_prev, mode)),
                available: self.budget.input_budget(),
            });
        }
        let mut parts = Vec::new();
        for range in self.pack(&job.span)? {
            parts.extend(self.chunk(&job.span[range], 0).await?);
        }
        if parts.len() == 1 && prev_for_merge.is_none() {
            return Ok(parts.remove(0));
        }
        self.merge(parts, prev_for_merge, 0).await
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn strategy(&self) -> CompactionStrategy {
        CompactionStrategy::ModelSummary
    }

    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        let mut run = Run {
            router: &self.router,
            sampling: &self.sampling,
            budget: RequestBudget::for_window(job.window),
            job: &job,
            calls: 0,
        };
        let text = run.run().await?;
        Ok(SummaryOutput {
            text,
            strategy: CompactionStrategy::ModelSummary,
            model: Some(job.model.clone()),
        })
    }
}
