//! The transcript formats pith reads.

use std::fmt;
use std::str::FromStr;

use crate::error::ImportError;

/// A transcript format.
///
/// [`Format::as_str`] is a stable short name (used on the command line and in reports);
/// [`FromStr`] accepts it, and also the longer names of the shared transcript manifest
/// (`claude-code-session-jsonl`, `codex-rollout-jsonl`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Format {
    /// Claude Code session JSONL (`~/.claude/projects/*/<session>.jsonl`).
    ClaudeCode,
    /// Codex CLI rollout JSONL (`~/.codex/sessions/**/rollout-*.jsonl`).
    Codex,
    /// pi coding-agent session JSONL.
    Pi,
    /// SWE-agent trajectory (`*.traj`).
    SweAgent,
    /// mini-SWE-agent trajectory (`*.traj.json`).
    MiniSweAgent,
    /// OpenHands event list (JSON array of actions and observations).
    OpenHands,
    /// aider chat history (`.aider.chat.history.md`).
    Aider,
}

impl Format {
    /// Every format, in a stable order.
    pub const ALL: [Format; 7] = [
        Format::ClaudeCode,
        Format::Codex,
        Format::Pi,
        Format::SweAgent,
        Format::MiniSweAgent,
        Format::OpenHands,
        Format::Aider,
    ];

    /// The stable short name (`claude-code`, `codex`, `pi`, `swe-agent`, `mini-swe-agent`,
    /// `openhands`, `aider`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::Pi => "pi",
            Format::SweAgent => "swe-agent",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::OpenHands => "openhands",
            Format::Aider => "aider",
        }
    }

    /// Whether the format is read line by line (JSONL or markdown) rather than as one document.
    pub fn is_streaming(self) -> bool {
        matches!(
            self,
            Format::ClaudeCode | Format::Codex | Format::Pi | Format::Aider
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = ImportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        let format = match name.as_str() {
            "claude-code" | "claude" | "claude-code-session-jsonl" => Format::ClaudeCode,
            "codex" | "codex-rollout" | "codex-rollout-jsonl" => Format::Codex,
            "pi" | "pi-session" | "pi-session-jsonl" => Format::Pi,
            "swe-agent" | "swe-agent-traj" => Format::SweAgent,
            "mini-swe-agent" | "mini-swe-agent-traj-json" => Format::MiniSweAgent,
            "openhands" | "openhands-event-list-json" => Format::OpenHands,
            "aider" | "aider-chat-history-md" => Format::Aider,
            _ => {
                return Err(ImportError::UnknownFormatName {
                    name: s.chars().take(64).collect(),
                })
            }
        };
        Ok(format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), f.as_str());
        }
    }

    #[test]
    fn manifest_names_parse() {
        assert_eq!(
            "claude-code-session-jsonl".parse::<Format>().unwrap(),
            Format::ClaudeCode
        );
        assert_eq!(
            "openhands-event-list-json".parse::<Format>().unwrap(),
            Format::OpenHands
        );
        let err = "word-doc".parse::<Format>().unwrap_err();
        assert!(err.to_string().contains("unknown format name"));
    }
}
