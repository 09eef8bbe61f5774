//! Running the tool calls of one reply: concurrently, bounded, with timeouts.
//!
//! Every call ends with a result the model can read. A tool error, a timeout, a panic or an
//! unknown tool name becomes an error result; cancellation stops waiting and marks the calls that
//! had not finished, so the caller can persist the reply together with a result for every call.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use pith_core::{Message, SessionId};
use tokio_util::sync::CancellationToken;

use crate::registry::ToolRegistry;
use crate::tool::ToolContext;

/// One tool call to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    /// The provider's call id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments the model wrote.
    pub arguments: serde_json::Value,
}

impl CallSpec {
    /// The tool calls of a reply, in order.
    pub fn all_in(message: &Message) -> Vec<CallSpec> {
        message
            .tool_calls()
            .map(|(call_id, name, arguments)| CallSpec {
                call_id: call_id.to_string(),
                name: name.to_string(),
                arguments: arguments.clone(),
            })
            .collect()
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The tool returned a result.
    Ok,
    /// The tool returned an error (or panicked).
    Failed,
    /// The tool did not finish in time.
    TimedOut,
    /// No tool has this name.
    Unknown,
    /// The turn was cancelled before the call finished.
    Cancelled,
}

/// The result of one call, in the order of the calls.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model will read.
    pub content: String,
    /// How the call ended.
    pub status: CallStatus,
}

impl CallResult {
    /// Whether the model sees this as an error result.
    pub fn is_error(&self) -> bool {
        self.status != CallStatus::Ok
    }

    /// The tool message carrying this result; results pith made up (cancelled calls) are marked
    /// synthetic.
    pub fn to_message(&self) -> Message {
        let mut m = Message::tool_result(&self.call_id, &self.content, self.is_error());
        m.meta.synthetic = self.status == CallStatus::Cancelled;
        m
    }
}

/// Limits of one batch of calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Calls running at the same time.
    pub concurrency: usize,
    /// Time one call may take.
    pub timeout: Duration,
}

/// Runs `calls` with at most `limits.concurrency` at a time and returns one result per call, in
/// call order; `on_done` sees each result as soon as its call finishes. Returns early when
/// `cancel` fires; unfinished calls are then `Cancelled` (and not passed to `on_done`).
pub async fn run_calls(
    registry: &ToolRegistry,
    session_id: SessionId,
    calls: &[CallSpec],
    limits: ExecLimits,
    cancel: &CancellationToken,
    mut on_done: impl FnMut(&CallResult),
) -> Vec<CallResult> {
    let mut results: Vec<Option<CallResult>> = vec![None; calls.len()];
    let mut queue = calls.iter().enumerate();
    let mut running = FuturesUnordered::new();
    let concurrency = limits.concurrency.max(1);
    let call_cancel = cancel.child_token();
    loop {
        while running.len() < concurrency {
            let Some((i, call)) = queue.next() else { break };
            let ctx = ToolContext::new(session_id, call.call_id.clone(), call_cancel.child_token());
            running.push(run_one(registry, call, ctx, limits.timeout).map(move |r| (i, r)));
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                call_cancel.cancel();
                break;
            }
            Some((i, r)) = running.next() => {
                on_done(&r);
                if let Some(slot) = results.get_mut(i) {
                    *slot = Some(r);
                }
            }
        }
    }
    results
        .into_iter()
        .zip(calls)
        .map(|(r, call)| {
            r.unwrap_or_else(|| CallResult {
                call_id: call.call_id.clone(),
                name: call.name.clone(),
                content: format!("tool call {} was cancelled before it finished", call.name),
                status: CallStatus::Cancelled,
            })
        })
        .collect()
}

async fn run_one(
    registry: &ToolRegistry,
    call: &CallSpec,
    ctx: ToolContext,
    timeout: Duration,
) -> CallResult {
    let result = |content: String, status| CallResult {
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        content,
        status,
    };
    let Some(tool) = registry.get(&call.name) else {
        let known = registry.names().join(", ");
        return result(
            format!("unknown tool {:?}; available tools: [{known}]", call.name),
            CallStatus::Unknown,
        );
    };
    let token = ctx.cancel.clone();
    let fut = AssertUnwindSafe(tool.execute(call.arguments.clone(), ctx)).catch_unwind();
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(Ok(text))) => result(text, CallStatus::Ok),
        Ok(Ok(Err(e))) => result(format!("tool {} failed: {e}", call.name), CallStatus::Failed),
        Ok(Err(_panic)) => result(format!("tool {} panicked", call.name), CallStatus::Failed),
        Err(_) => {
            token.cancel();
            result(
                format!("tool {} timed out after {} ms", call.name, timeout.as_millis()),
                CallStatus::TimedOut,
            )
        }
    }
}
