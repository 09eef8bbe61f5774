//! aider chat history (`.aider.chat.history.md`).
//!
//! A markdown log: `# aider chat started at <time>` opens a run, `#### ` lines are the user's
//! input (consecutive ones form one message, a blank line ends it), `> ` lines (and a bare `>`)
//! are aider's own status output (skipped; the log does not say which of it was added to the
//! chat), and everything else is the assistant's reply. A reply ends at the next user or status
//! line, so one user message may be followed by several replies (aider asks again after adding
//! files). There are no structured tool calls. `> Model:` and `> Main model:` status lines name
//! the model.

use std::io::BufRead;
use std::path::Path;

use chrono::{NaiveDateTime, TimeZone, Utc};
use pith_core::{Part, Role};

use crate::assemble::{message, Assembler};
use crate::error::ImportError;
use crate::read::Lines;

/// The prefix of a run header.
pub(crate) const HEADER: &str = "# aider chat started at";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    User,
    Assistant,
}

struct State {
    asm: Assembler,
    block: Block,
    text: String,
    start_line: u64,
    current_model: Option<String>,
}

impl State {
    fn flush(&mut self) {
        let text = std::mem::take(&mut self.text);
        let role = match self.block {
            Block::User => Role::User,
            Block::Assistant => Role::Assistant,
            Block::None => return,
        };
        self.block = Block::None;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        let at = self.asm.time(None);
        let mut m = message(
            role,
            vec![Part::text(trimmed)],
            at,
            format!("line {}", self.start_line),
        );
        if role == Role::Assistant {
            m.meta.model = self.current_model.clone();
        }
        self.asm.push_message(m, None);
    }

    fn append(&mut self, block: Block, line: u64, text: &str) {
        if self.block != block {
            self.flush();
            self.block = block;
            self.start_line = line;
        }
        self.text.push_str(text);
        self.text.push('\n');
    }

    fn status(&mut self, text: &str) {
        self.flush();
        self.asm.report.skip("status line");
        let model = text
            .strip_prefix("Main model: ")
            .or_else(|| text.strip_prefix("Model: "))
            .and_then(|rest| rest.split_whitespace().next());
        if let Some(model) = model {
            if self.current_model.as_deref() != Some(model) {
                if self.current_model.is_some() {
                    let at = self.asm.time(None);
                    self.asm.push_model_change(model.to_string(), at);
                }
                self.asm.model_if_unset(model);
                self.current_model = Some(model.to_string());
            }
        }
    }
}

/// Reads an aider chat history.
pub(crate) fn read(file: &Path, reader: &mut dyn BufRead) -> Result<Assembler, ImportError> {
    let mut lines = Lines::new(reader, file);
    let mut state = State {
        asm: Assembler::new(),
        block: Block::None,
        text: String::new(),
        start_line: 0,
        current_model: None,
    };
    while let Some((line, text)) = lines.next_line()? {
        state.asm.report.records += 1;
        if let Some(stamp) = text.strip_prefix(HEADER) {
            state.flush();
            state.asm.report.skip("run header");
            if let Ok(t) = NaiveDateTime::parse_from_str(stamp.trim(), "%Y-%m-%d %H:%M:%S") {
                state.asm.time(Some(Utc.from_utc_datetime(&t)));
            }
        } else if let Some(input) = text.strip_prefix("#### ") {
            state.append(Block::User, line, input.trim_end());
        } else if text == "####" {
            state.append(Block::User, line, "");
        } else if let Some(status) = text.strip_prefix("> ") {
            state.status(status.trim_end());
        } else if text == ">" {
            state.status("");
        } else if text.trim().is_empty() && state.block == Block::User {
            // A blank line ends the user's input.
            state.flush();
        } else if state.block == Block::Assistant || !text.trim().is_empty() {
            state.append(Block::Assistant, line, text);
        }
    }
    state.flush();
    state.asm.report.max_line_bytes = lines.max_line_bytes();
    Ok(state.asm)
}
