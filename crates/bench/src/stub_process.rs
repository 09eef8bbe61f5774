//! The stub server in a process of its own, so that the load harness measures the runtime alone.
//!
//! A provider's memory and CPU are not the runtime's: with the stub in the harness's process,
//! its connection buffers and request copies (one per call in flight) would count in the peak
//! RSS and the CPU per turn. The harness starts its own executable in stub mode
//! ([`serve_until_stdin_closes`]); the child prints the URL it listens on, serves until its
//! standard input closes, then prints what it served, its CPU time and its peak RSS as one JSON
//! line, which [`StubProcess::finish`] reads.

use std::path::Path;
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

use crate::stub::{StubConfig, StubServer, StubStats};

/// The argument that starts an executable in stub mode.
pub const SERVE_STUB_FLAG: &str = "--serve-stub";

/// What the stub served and spent, as its process reports it on exit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StubReport {
    /// Chat requests answered with tool calls.
    pub tool_replies: u64,
    /// Chat requests answered with a final text.
    pub final_replies: u64,
    /// Summary requests answered.
    pub summary_replies: u64,
    /// Requests answered 400.
    pub bad_requests: u64,
    /// CPU time (user + system) of the stub process, in seconds.
    pub cpu_s: f64,
    /// Peak resident set size of the stub process, in MiB.
    pub peak_rss_mib: f64,
}

impl StubReport {
    /// The counts of an in-process stub (its CPU and memory are its host's, so they stay 0).
    pub fn of_stats(stats: &StubStats) -> Self {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Self {
            tool_replies: load(&stats.tool_replies),
            final_replies: load(&stats.final_replies),
            summary_replies: load(&stats.summary_replies),
            bad_requests: load(&stats.bad_requests),
            cpu_s: 0.0,
            peak_rss_mib: 0.0,
        }
    }

    /// All requests answered with 200.
    pub fn answered(&self) -> u64 {
        self.tool_replies + self.final_replies + self.summary_replies
    }
}

/// Why the stub process failed.
#[derive(Debug, thiserror::Error)]
pub enum StubProcessError {
    /// Starting, talking to or waiting for the child failed.
    #[error("stub process I/O")]
    Io(#[from] std::io::Error),
    /// The child did not say where it listens, or said something else.
    #[error("the stub process did not report its URL (it printed {0:?})")]
    NoUrl(String),
    /// The child's final report was missing or malformed.
    #[error("the stub process did not report what it served (it printed {0:?})")]
    NoReport(String),
}

/// A running stub process.
#[derive(Debug)]
pub struct StubProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
    base_url: String,
}

impl StubProcess {
    /// Starts `exe` with [`SERVE_STUB_FLAG`] and the stub's behaviour, and waits for its URL.
    ///
    /// # Errors
    /// [`StubProcessError`] when the child cannot start or does not report its URL.
    pub async fn spawn(exe: &Path, config: StubConfig) -> Result<Self, StubProcessError> {
        let mut child = Command::new(exe)
            .arg(SERVE_STUB_FLAG)
            .arg(config.latency.as_micros().to_string())
            .arg(config.calls_per_reply.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| StubProcessError::NoUrl(String::new()))?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).await?;
        let base_url = line
            .trim()
            .strip_prefix("listening ")
            .ok_or_else(|| StubProcessError::NoUrl(line.clone()))?
            .to_string();
        Ok(Self {
            child,
            stdout,
            base_url,
        })
    }

    /// The base URL to configure an OpenAI-compatible provider with.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Closes the child's standard input, reads its report and waits for it to exit.
    ///
    /// # Errors
    /// [`StubProcessError`] when the report is missing or malformed.
    pub async fn finish(mut self) -> Result<StubReport, StubProcessError> {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).await?;
        self.child.wait().await?;
        serde_json::from_str(rest.trim()).map_err(|_| StubProcessError::NoReport(rest))
    }
}

/// The child's side: serves `config` on a loopback port, prints `listening <url>`, and when its
/// standard input closes prints its [`StubReport`] as JSON.
///
/// # Errors
/// When the port cannot be bound or standard input cannot be read.
pub async fn serve_until_stdin_closes(config: StubConfig) -> std::io::Result<()> {
    let stub = StubServer::start(config).await?;
    println!("listening {}", stub.base_url());
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    let report = StubReport {
        cpu_s: crate::rss::cpu_seconds().unwrap_or(0.0),
        peak_rss_mib: crate::rss::peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0),
        ..StubReport::of_stats(stub.stats())
    };
    println!(
        "{}",
        serde_json::to_string(&report).map_err(std::io::Error::other)?
    );
    Ok(())
}
