//! Tool execution: concurrency limit, timeouts, errors, unknown tools, cancellation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pith_core::SessionId;
use pith_runtime::exec::{run_calls, CallSpec, CallStatus, ExecLimits};
use pith_runtime::{CancellationToken, FnTool, Tool, ToolContext, ToolError, ToolRegistry};
use serde_json::{json, Value};

/// Sleeps for `ms` milliseconds and records how many calls ran at once.
struct Sleepy {
    running: AtomicUsize,
    peak: AtomicUsize,
}

#[async_trait]
impl Tool for Sleepy {
    fn name(&self) -> &str {
        "sleep"
    }
    fn description(&self) -> &str {
        "sleeps"
    }
    fn schema(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}})
    }
    async fn execute(&self, args: Value, _ctx: ToolContext) -> Result<String, ToolError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let ms = args["ms"]
            .as_u64()
            .ok_or_else(|| ToolError::InvalidArguments("ms is required".into()))?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Ok(format!("slept {ms}"))
    }
}

fn call(id: &str, name: &str, args: Value) -> CallSpec {
    CallSpec {
        call_id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

fn registry() -> (ToolRegistry, Arc<Sleepy>) {
    let sleepy = Arc::new(Sleepy {
        running: AtomicUsize::new(0),
        peak: AtomicUsize::new(0),
    });
    let mut r = ToolRegistry::new();
    r.register(sleepy.clone()).unwrap();
    r.register(Arc::new(FnTool::new(
        "fail",
        "always fails",
        json!({"type": "object"}),
        |_args: Value, _ctx: ToolContext| async { Err::<String, _>(ToolError::failed("disk is full")) },
    )))
    .unwrap();
    r.register(Arc::new(FnTool::new(
        "boom",
        "panics",
        json!({"type": "object"}),
        |_args: Value, _ctx: ToolContext| async {
            if true {
                panic!("tool bug");
            }
            Ok::<String, ToolError>(String::new())
        },
    )))
    .unwrap();
    (r, sleepy)
}

#[tokio::test(start_paused = true)]
async fn calls_run_concurrently_up_to_the_limit_and_keep_their_order() {
    let (r, sleepy) = registry();
    let calls: Vec<_> = (0..6)
        .map(|i| call(&format!("c{i}"), "sleep", json!({"ms": 100 - i * 10})))
        .collect();
    let limits = ExecLimits {
        concurrency: 2,
        timeout: Duration::from_secs(5),
    };
    let started = tokio::time::Instant::now();
    let results = run_calls(
        &r,
        SessionId::new(),
        &calls,
        limits,
        &CancellationToken::new(),
        |_| {},
    )
    .await;
    assert_eq!(sleepy.peak.load(Ordering::SeqCst), 2);
    let ids: Vec<_> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4", "c5"]);
    assert!(results.iter().all(|r| r.status == CallStatus::Ok));
    assert_eq!(results[5].content, "slept 50");
    // Six calls of 50..100 ms two at a time take well under six times 100 ms.
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn errors_timeouts_panics_and_unknown_tools_become_error_results() {
    let (r, _) = registry();
    let calls = vec![
        call("a", "fail", json!({})),
        call("b", "sleep", json!({"ms": 10_000})),
        call("c", "nope", json!({})),
        call("d", "boom", json!({})),
        call("e", "sleep", json!({})),
        call("f", "sleep", json!({"ms": 1})),
    ];
    let limits = ExecLimits {
        concurrency: 8,
        timeout: Duration::from_secs(1),
    };
    let results = run_calls(
        &r,
        SessionId::new(),
        &calls,
        limits,
        &CancellationToken::new(),
        |_| {},
    )
    .await;
    let statuses: Vec<_> = results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            CallStatus::Failed,
            CallStatus::TimedOut,
            CallStatus::Unknown,
            CallStatus::Failed,
            CallStatus::Failed,
            CallStatus::Ok
        ]
    );
    assert!(results[0].content.contains("disk is full"));
    assert!(results[1].content.contains("timed out after 1000 ms"));
    assert!(results[2].content.contains("unknown tool \"nope\""));
    assert!(results[2].content.contains("boom, fail, sleep"));
    assert!(results[3].content.contains("panicked"));
    assert!(results[4].content.contains("ms is required"));
    assert!(results
        .iter()
        .take(5)
        .all(|r| r.is_error() && r.to_message().tool_results().all(|t| t.2)));
}

#[tokio::test(start_paused = true)]
async fn cancellation_keeps_finished_results_and_marks_the_rest() {
    let (r, _) = registry();
    let calls = vec![
        call("fast", "sleep", json!({"ms": 10})),
        call("slow", "sleep", json!({"ms": 10_000})),
    ];
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let limits = ExecLimits {
        concurrency: 2,
        timeout: Duration::from_secs(60),
    };
    let results = run_calls(&r, SessionId::new(), &calls, limits, &cancel, |_| {}).await;
    assert_eq!(results[0].status, CallStatus::Ok);
    assert_eq!(results[1].status, CallStatus::Cancelled);
    let msg = results[1].to_message();
    assert!(msg.meta.synthetic);
    assert!(msg
        .tool_results()
        .all(|(id, _, is_error)| id == "slow" && is_error));
}
