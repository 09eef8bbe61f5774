//! The replay report: what the CLI prints and `--json` emits (documented in docs/CLI.md).

use serde::{Deserialize, Serialize};

use super::retention::Retention;

/// One compaction of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRow {
    /// The model call it fired at (1-based): the call it preceded (proactive) or the rejected call
    /// it answered (reactive).
    pub at_call: u64,
    /// `proactive`, `reactive` or `manual`.
    pub trigger: String,
    /// The generation it created.
    pub generation: u64,
    /// Context size before.
    pub tokens_before: u64,
    /// Context size after.
    pub tokens_after: u64,
    /// Position in the log of the first entry kept verbatim.
    pub kept_from_entry: u64,
    /// `model_summary`, `deterministic` or `mask_only`.
    pub strategy: String,
    /// Summary calls made.
    pub summary_calls: u32,
    /// What of the summarised span the view right after it still holds.
    pub retention: Retention,
}

/// The report of one replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The transcript format (`claude-code`, `codex`, ...), or `demo`.
    pub format: String,
    /// The context window replayed under.
    pub window: u64,
    /// Compaction threshold (window − reserve).
    pub threshold: u64,
    /// `pith`, `pi` or `codex`.
    pub policy: String,
    /// Model calls sent (a rejected request included).
    pub model_calls: u64,
    /// Compactions, in order.
    pub compactions: Vec<CompactionRow>,
    /// Largest request sent to the model, in estimated tokens.
    pub max_request_tokens: u64,
    /// Sum over model calls of the request size.
    pub input_tokens_total: u64,
    /// Input and output tokens of every summary call.
    pub summary_tokens_total: u64,
    /// The same sum as `input_tokens_total` with the full history sent every time.
    pub input_tokens_no_compaction: u64,
    /// Each model call's request size and the size it would have had with no compaction, in
    /// order: where a replay's tokens go (their sums are the two totals above).
    #[serde(default)]
    pub per_call: Vec<CallTokens>,
    /// Requests in which a tool call and its result were separated (must be 0).
    pub tool_pairs_split: u64,
    /// Turns replayed.
    pub turns: u64,
    /// Summary calls across all compactions.
    pub summary_calls: u64,
    /// Whether tiered compaction (masking old tool outputs before summarising) was on.
    #[serde(default)]
    pub tiered: bool,
    /// Compactions that only masked tool outputs and made no summary call.
    #[serde(default)]
    pub mask_only_compactions: u64,
    /// Tool outputs masked across the replay (each counted once, when it was first masked).
    #[serde(default)]
    pub masked_outputs: u64,
    /// Tool outputs longer than 4,000 characters, sent clipped to their first and last 2,000.
    pub tool_outputs_clipped: u64,
    /// Requests rejected as overflow by the simulated provider limit.
    pub simulated_overflows: u64,
    /// The session the replay wrote to the store.
    pub session_id: String,
}

/// One model call of a replay, in estimated tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTokens {
    /// The request as sent (the compacted view).
    pub request_tokens: u64,
    /// The request the full, uncompacted history would have made.
    pub no_compaction_tokens: u64,
}

impl ReplayReport {
    /// Compactions with the given trigger.
    pub fn count_trigger(&self, trigger: &str) -> usize {
        self.compactions.iter().filter(|c| c.trigger == trigger).count()
    }

    /// `input_tokens_total + summary_tokens_total` over `input_tokens_no_compaction`.
    pub fn cost_ratio(&self) -> f64 {
        if self.input_tokens_no_compaction == 0 {
            return 1.0;
        }
        (self.input_tokens_total + self.summary_tokens_total) as f64 / self.input_tokens_no_compaction as f64
    }

    /// A human-readable table.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} under a {}-token window (threshold {}), policy {}",
            self.format, self.window, self.threshold, self.policy
        );
        let _ = writeln!(
            out,
            "turns {}  model calls {}  compactions {} ({} reactive, {} mask-only)  summary calls {}",
            self.turns,
            self.model_calls,
            self.compactions.len(),
            self.count_trigger("reactive"),
            self.mask_only_compactions,
            self.summary_calls
        );
        if !self.compactions.is_empty() {
            let _ = writeln!(
                out,
                "\n{:>4} {:>6} {:<10} {:>9} {:>9} {:>6} {:<13} {:>11} {:>11} {:>11}",
                "gen",
                "call",
                "trigger",
                "before",
                "after",
                "keep@",
                "strategy",
                "read",
                "modified",
                "user msgs"
            );
            for c in &self.compactions {
                let f = |k: [u64; 2]| format!("{}/{}", k[0], k[1]);
                let _ = writeln!(
                    out,
                    "{:>4} {:>6} {:<10} {:>9} {:>9} {:>6} {:<13} {:>11} {:>11} {:>11}",
                    c.generation,
                    c.at_call,
                    c.trigger,
                    c.tokens_before,
                    c.tokens_after,
                    c.kept_from_entry,
                    c.strategy,
                    f(c.retention.read_paths),
                    f(c.retention.modified_paths),
                    f(c.retention.user_messages)
                );
            }
        }
        let _ = writeln!(
            out,
            "\nlargest request {} tokens  tool pairs split {}",
            self.max_request_tokens, self.tool_pairs_split
        );
        let _ = writeln!(
            out,
            "tokens sent {} + summaries {} vs {} without compaction ({:.2}x)",
            self.input_tokens_total,
            self.summary_tokens_total,
            self.input_tokens_no_compaction,
            self.cost_ratio()
        );
        if self.tool_outputs_clipped > 0 {
            let _ = writeln!(
                out,
                "{} tool output(s) over 4,000 characters were sent clipped (first and last 2,000 kept)",
                self.tool_outputs_clipped
            );
        }
        if self.simulated_overflows > 0 {
            let _ = writeln!(
                out,
                "{} request(s) rejected by the simulated provider limit were compacted and retried",
                self.simulated_overflows
            );
        }
        let _ = writeln!(out, "session {}", self.session_id);
        out
    }
}
