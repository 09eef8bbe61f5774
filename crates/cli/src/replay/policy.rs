//! Compaction policies to compare: pith's defaults, pi's and Codex's.

use pith_compaction::CompactionConfig;
use serde::{Deserialize, Serialize};

/// A compaction policy preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// pith's defaults.
    Pith,
    /// pi's: reserve 16,384, keep the newest 20,000 tokens, no message-count signal.
    Pi,
    /// Codex's: compact at 90% of the window, keep user messages up to 20,000 tokens verbatim and
    /// drop the tool history.
    Codex,
}

impl Policy {
    /// The stable lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Pith => "pith",
            Policy::Pi => "pi",
            Policy::Codex => "codex",
        }
    }

    /// The compaction configuration of the preset.
    pub fn config(self) -> CompactionConfig {
        match self {
            Policy::Pith => CompactionConfig::default(),
            Policy::Pi => CompactionConfig::pi(),
            Policy::Codex => CompactionConfig::codex(),
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
