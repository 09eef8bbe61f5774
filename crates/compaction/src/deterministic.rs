//! The deterministic summarizer: structured facts of the span, no model.
//!
//! For offline use and tests. It extracts what a model summary is asked to keep — the user's
//! requests (verbatim up to a budget), files read and modified, commands and the errors they
//! produced, and the assistant's stated decisions — in the same headings as the model prompt, then
//! truncates to `max_summary_tokens`. It never stands in for a failed model summary: it is used
//! only when configured, and every record it produces says so in its strategy.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use async_trait::async_trait;
use pith_core::{CompactionStrategy, Message, Role, TokenCounter};

use crate::error::CompactionError;
use crate::summary::{truncate_to_tokens, Summarizer, SummaryJob, SummaryOutput};

/// Characters of one user request quoted verbatim.
pub const USER_QUOTE_CHARS: usize = 600;
/// Characters of one error quoted.
pub const ERROR_QUOTE_CHARS: usize = 200;

const READ_TOOLS: &[&str] = &["read", "view", "cat", "open", "glob", "grep", "ls", "search"];
const WRITE_TOOLS: &[&str] = &[
    "write",
    "edit",
    "create",
    "patch",
    "replace",
    "insert",
    "apply",
    "str_replace",
];
const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "notebook_path",
];
const COMMAND_KEYS: &[&str] = &["command", "cmd", "script"];
const DECISION_CUES: &[&str] = &[
    "i'll ",
    "i will ",
    "let's ",
    "decided",
    "instead",
    "because",
    "the fix is",
    "the issue is",
];

/// A summarizer that needs no model.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeterministicSummarizer;

impl DeterministicSummarizer {
    /// The summarizer.
    pub fn new() -> Self {
        Self
    }
}

fn quote(text: &str, max_chars: usize) -> String {
    let one_line = text.trim();
    match one_line.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line.to_string(),
    }
}

fn string_arg<'a>(args: &'a serde_json::Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(*k).and_then(|v| v.as_str()))
}

#[derive(Default)]
struct Facts {
    requests: Vec<String>,
    read: BTreeSet<String>,
    modified: BTreeSet<String>,
    commands: Vec<String>,
    errors: Vec<String>,
    decisions: Vec<String>,
}

fn collect(span: &[Message]) -> Facts {
    let mut f = Facts::default();
    let mut call_names: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    for m in span {
        match m.role {
            Role::User if !m.is_reminder() && m.tool_results().next().is_none() => {
                let text = m.text_content();
                if !text.trim().is_empty() {
                    f.requests.push(quote(&text, USER_QUOTE_CHARS));
                }
            }
            Role::Assistant => {
                for line in m.text_content().lines() {
                    let lower = line.to_lowercase();
                    if DECISION_CUES.iter().any(|c| lower.contains(c)) && f.decisions.len() < 12 {
                        f.decisions.push(quote(line, 240));
                    }
                }
            }
            _ => {}
        }
        for (id, name, args) in m.tool_calls() {
            let lower = name.to_lowercase();
            let label = if let Some(path) = string_arg(args, PATH_KEYS) {
                if WRITE_TOOLS.iter().any(|t| lower.contains(t)) {
                    f.modified.insert(path.to_string());
                } else if READ_TOOLS.iter().any(|t| lower.contains(t)) {
                    f.read.insert(path.to_string());
                }
                format!("{name} {path}")
            } else if let Some(cmd) = string_arg(args, COMMAND_KEYS) {
                f.commands.push(quote(cmd, 200));
                quote(cmd, 120)
            } else {
                name.to_string()
            };
            call_names.insert(id, label);
        }
        for (id, content, is_error) in m.tool_results() {
            let looks_failed =
                is_error || content.trim_start().starts_with("Error") || content.contains("Traceback");
            if looks_failed && f.errors.len() < 12 {
                let what = call_names.get(id).cloned().unwrap_or_else(|| "a tool".into());
                f.errors
                    .push(format!("{what}: {}", quote(content, ERROR_QUOTE_CHARS)));
            }
        }
    }
    f
}

fn section(out: &mut String, title: &str, items: impl IntoIterator<Item = String>) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_none() {
        return;
    }
    let _ = writeln!(out, "{title}");
    for item in items {
        let _ = writeln!(out, "- {item}");
    }
}

/// Renders the deterministic summary of a span (before truncation).
pub fn render(span: &[Message], previous: Option<&str>, instructions: Option<&str>) -> String {
    let f = collect(span);
    let mut out = String::new();
    if let Some(prev) = previous.map(str::trim).filter(|p| !p.is_empty()) {
        let _ = writeln!(out, "## Earlier summary\n{prev}\n");
    }
    if let Some(extra) = instructions {
        let _ = writeln!(out, "## Compaction instructions\n{}\n", extra.trim());
    }
    section(
        &mut out,
        "## User requests",
        f.requests.iter().map(|r| format!("\"{r}\"")),
    );
    section(&mut out, "## Files read", f.read);
    section(&mut out, "## Files modified", f.modified);
    let commands = f.commands.len();
    section(
        &mut out,
        "## Commands",
        f.commands
            .into_iter()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev(),
    );
    if commands > 15 {
        let _ = writeln!(out, "- ({} earlier commands not listed)", commands - 15);
    }
    section(&mut out, "## Errors", f.errors);
    section(&mut out, "## Decisions", f.decisions);
    if out.trim().is_empty() {
        let _ = writeln!(
            out,
            "## Earlier conversation\n- {} messages without extractable facts",
            span.len()
        );
    }
    out.trim_end().to_string()
}

/// Renders and truncates to `max_tokens`; a long previous summary is shortened first, so the
/// facts of the new span survive.
pub fn summarize_span(
    span: &[Message],
    previous: Option<&str>,
    instructions: Option<&str>,
    max_tokens: u64,
    counter: &dyn TokenCounter,
) -> String {
    let full = render(span, previous, instructions);
    if counter.count_text(&full) <= max_tokens {
        return full;
    }
    // Drop the previous summary's detail first, then truncate.
    let without_previous = render(
        span,
        previous.map(|p| first_chars(p, 1_000)).as_deref(),
        instructions,
    );
    truncate_to_tokens(&without_previous, max_tokens, counter)
}

fn first_chars(text: &str, n: usize) -> String {
    quote(text, n)
}

#[async_trait]
impl Summarizer for DeterministicSummarizer {
    fn strategy(&self) -> CompactionStrategy {
        CompactionStrategy::Deterministic
    }

    async fn summarize(&self, job: SummaryJob) -> Result<SummaryOutput, CompactionError> {
        if job.cancel.is_cancelled() {
            return Err(CompactionError::Cancelled);
        }
        let text = summarize_span(
            &job.span,
            job.previous_summary.as_deref(),
            job.instructions.as_deref(),
            job.max_summary_tokens,
            job.counter.as_ref(),
        );
        Ok(SummaryOutput {
            text,
            strategy: CompactionStrategy::Deterministic,
            model: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, Part};
    use serde_json::json;

    fn call(id: &str, name: &str, args: serde_json::Value) -> Message {
        let mut m = Message::assistant("I'll read the config first because it names the port.");
        m.parts.push(Part::ToolCall {
            call_id: id.into(),
            name: name.into(),
            arguments: args,
        });
        m
    }

    #[test]
    fn extracts_requests_files_commands_errors_and_decisions() {
        let span = vec![
            Message::user("Fix the port bug in server.rs; do not touch the tests."),
            call("1", "Read", json!({"file_path": "src/server.rs"})),
            Message::tool_result("1", "fn main() {}", false),
            call(
                "2",
                "Edit",
                json!({"file_path": "src/server.rs", "old": "a", "new": "b"}),
            ),
            Message::tool_result("2", "ok", false),
            call("3", "Bash", json!({"command": "cargo test"})),
            Message::tool_result("3", "Error: 2 tests failed", true),
        ];
        let s = render(&span, Some("earlier facts"), None);
        assert!(s.contains("\"Fix the port bug in server.rs; do not touch the tests.\""));
        assert!(s.contains("## Files read\n- src/server.rs"));
        assert!(s.contains("## Files modified\n- src/server.rs"));
        assert!(s.contains("- cargo test"));
        assert!(s.contains("cargo test: Error: 2 tests failed"));
        assert!(s.contains("because it names the port"));
        assert!(s.starts_with("## Earlier summary\nearlier facts"));
    }

    #[test]
    fn output_is_bounded_by_max_summary_tokens() {
        let span: Vec<Message> = (0..200)
            .map(|i| Message::user(format!("request {i} {}", "w".repeat(500))))
            .collect();
        let s = summarize_span(&span, None, None, 300, &EstimateCounter);
        assert!(EstimateCounter.count_text(&s) <= 300);
    }
}
