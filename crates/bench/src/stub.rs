//! A loopback OpenAI-compatible Chat Completions server for the load harness.
//!
//! Minimal HTTP/1.1 on a `tokio::net::TcpListener`: keep-alive connections, `Content-Length`
//! bodies, non-streamed replies after a configurable latency. It plays an agent's model: a
//! request whose last message is the user's gets `calls_per_reply` tool calls of the `lookup`
//! tool; a request that ends with tool results gets a final answer; a summary request (it holds
//! a `<conversation>` block) gets a short summary. Decisions scan the raw body, so the stub costs
//! little CPU next to the runtime it loads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use memchr::memmem;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The tool the stub asks for.
pub const TOOL_NAME: &str = "lookup";

/// Pending connections the stub's listener queues (the kernel caps it at `somaxconn`).
const LISTEN_BACKLOG: u32 = 8192;

/// How the stub behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StubConfig {
    /// Time the stub waits before every reply (the model's latency).
    pub latency: Duration,
    /// Tool calls in each tool-calling reply.
    pub calls_per_reply: usize,
}

impl Default for StubConfig {
    fn default() -> Self {
        Self {
            latency: Duration::from_millis(20),
            calls_per_reply: 2,
        }
    }
}

impl StubConfig {
    /// Sets the latency.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Sets the tool calls per reply.
    pub fn with_calls_per_reply(mut self, calls: usize) -> Self {
        self.calls_per_reply = calls.max(1);
        self
    }
}

/// Counters of what the stub served.
#[derive(Debug, Default)]
pub struct StubStats {
    /// Chat requests answered with tool calls.
    pub tool_replies: AtomicU64,
    /// Chat requests answered with a final text.
    pub final_replies: AtomicU64,
    /// Summary requests answered.
    pub summary_replies: AtomicU64,
    /// Requests that could not be parsed (answered 400).
    pub bad_requests: AtomicU64,
    calls: AtomicU64,
}

impl StubStats {
    /// All requests answered with 200.
    pub fn answered(&self) -> u64 {
        self.tool_replies.load(Ordering::Relaxed)
            + self.final_replies.load(Ordering::Relaxed)
            + self.summary_replies.load(Ordering::Relaxed)
    }
}

/// A running stub server; dropping it stops accepting connections.
#[derive(Debug)]
pub struct StubServer {
    addr: std::net::SocketAddr,
    stats: Arc<StubStats>,
    task: JoinHandle<()>,
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StubServer {
    /// Binds 127.0.0.1 on a free port and serves on the current tokio runtime.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn start(config: StubConfig) -> std::io::Result<Self> {
        // A backlog as deep as the kernel allows: thousands of sessions open their connections
        // at once, and a connection refused by a full backlog waits a second for its retry.
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(LISTEN_BACKLOG)?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(StubStats::default());
        let served = stats.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let stats = served.clone();
                tokio::spawn(async move {
                    let _ = serve(socket, config, &stats).await;
                });
            }
        });
        Ok(Self { addr, stats, task })
    }

    /// The base URL to configure an OpenAI-compatible provider with (`http://127.0.0.1:port/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// What the stub served so far.
    pub fn stats(&self) -> &StubStats {
        &self.stats
    }
}

/// Serves one keep-alive connection until the client closes it.
async fn serve(socket: TcpStream, config: StubConfig, stats: &StubStats) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut content_length = 0usize;
        let mut first = true;
        loop {
            line.clear();
            if reader.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            if line == "\r\n" || line == "\n" {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            if let Some((name, value)) = line.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    content_length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        body.resize(content_length, 0);
        reader.read_exact(&mut body).await?;
        let (status, reply) = match respond(&body, config, stats) {
            Some(reply) => ("200 OK", reply),
            None => {
                stats.bad_requests.fetch_add(1, Ordering::Relaxed);
                (
                    "400 Bad Request",
                    r#"{"error":{"message":"bad request","type":"invalid_request_error"}}"#.to_string(),
                )
            }
        };
        if !config.latency.is_zero() {
            tokio::time::sleep(config.latency).await;
        }
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
            reply.len()
        );
        write.write_all(head.as_bytes()).await?;
        write.write_all(reply.as_bytes()).await?;
    }
}

/// The reply body for a request body, or `None` when it is not a chat request.
fn respond(body: &[u8], config: StubConfig, stats: &StubStats) -> Option<String> {
    memmem::find(body, b"\"messages\"")?;
    let prompt_tokens = body.len() as u64 / 4;
    let (message, finish) = if memmem::find(body, b"<conversation>").is_some() {
        stats.summary_replies.fetch_add(1, Ordering::Relaxed);
        (
            json!({"role": "assistant", "content": "## Goal\n- answer the user's lookups\n## Progress\n### Done\n- earlier lookups answered"}),
            "stop",
        )
    } else {
        let last_tool = memmem::rfind(body, b"\"role\":\"tool\"");
        let last_user = memmem::rfind(body, b"\"role\":\"user\"");
        if last_tool > last_user {
            stats.final_replies.fetch_add(1, Ordering::Relaxed);
            (
                json!({"role": "assistant", "content": "Both lookups agree; the value is 42."}),
                "stop",
            )
        } else {
            stats.tool_replies.fetch_add(1, Ordering::Relaxed);
            let calls: Vec<_> = (0..config.calls_per_reply)
                .map(|k| {
                    let n = stats.calls.fetch_add(1, Ordering::Relaxed);
                    json!({"id": format!("call_{n}"), "type": "function",
                        "function": {"name": TOOL_NAME, "arguments": format!("{{\"key\":\"k{k}\"}}")}})
                })
                .collect();
            (
                json!({"role": "assistant", "content": "Looking it up.", "tool_calls": calls}),
                "tool_calls",
            )
        }
    };
    Some(
        json!({
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": "stub-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 24, "total_tokens": prompt_tokens + 24}
        })
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_follow_the_last_message() {
        let stats = StubStats::default();
        let config = StubConfig::default();
        let ask = br#"{"messages":[{"content":"hi","role":"user"}]}"#;
        let reply = respond(ask, config, &stats).unwrap();
        assert!(reply.contains("\"tool_calls\":[{"), "{reply}");
        assert!(reply.contains("call_1"));
        let done = br#"{"messages":[{"content":"hi","role":"user"},{"content":"x","role":"tool"}]}"#;
        assert!(respond(done, config, &stats)
            .unwrap()
            .contains("\"finish_reason\":\"stop\""));
        let summary = br#"{"messages":[{"content":"<conversation>\n[User]: hi","role":"user"}]}"#;
        assert!(respond(summary, config, &stats).unwrap().contains("## Goal"));
        assert!(respond(b"{}", config, &stats).is_none());
        assert_eq!(stats.answered(), 3);
    }
}
