//! The artifact ledger: what a summary must never lose, extracted without a model.
//!
//! From every summarised span the ledger collects the files read, modified and created (from the
//! arguments of the common tool shapes, see [`crate::artifacts`]), the user's messages verbatim,
//! the last error of each failing command (the tail of its output, where the error is) and the
//! decisions the user stated. It is stored in [`CompactionMeta::extra`] under
//! [`EXTRA_LEDGER`], merged into the next compaction's ledger (deduplicated, most recent last,
//! bounded) and rendered after the summary: whatever the summary already names is skipped, the
//! rest is appended. The rendering is bounded by a token budget, filled in priority order
//! (modified and created paths, read paths, user messages, errors, decisions), so a view with a
//! ledger still fits its target.

use pith_core::{CompactionMeta, Message, Role, StoredView, TokenCounter};
use serde::{Deserialize, Serialize};

use crate::ledger_scan::{merge_lists, Scan};

/// Key of [`CompactionMeta::extra`] holding the ledger.
pub const EXTRA_LEDGER: &str = "ledger";
/// The line that opens the ledger in a handoff; everything from it on is the ledger.
pub const LEDGER_OPEN: &str = "<artifact-ledger>";
/// The line that closes the ledger in a handoff.
pub const LEDGER_CLOSE: &str = "</artifact-ledger>";
/// Paths of each kind carried at most.
pub const MAX_PATHS: usize = 1_000;
/// User messages carried at most (the rendering is bounded by tokens).
pub const MAX_USER_MESSAGES: usize = 200;
/// Failing commands carried at most.
pub const MAX_ERRORS: usize = 12;
/// Decisions carried at most.
pub const MAX_DECISIONS: usize = 30;
/// Characters of a failing command's output kept (its tail).
pub const ERROR_TAIL_CHARS: usize = 400;
/// Characters of a command kept in the ledger.
const COMMAND_CHARS: usize = 160;
/// Upper bound of the user-message budget, in tokens.
pub const USER_MESSAGE_TOKENS: u64 = 20_000;

/// The last error of a failing command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandError {
    /// The command (or tool name with its main argument), shortened.
    pub command: String,
    /// The tail of its output.
    pub tail: String,
}

/// Artifacts of the summarised history, carried from compaction to compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Paths read, oldest first.
    #[serde(default)]
    pub read: Vec<String>,
    /// Paths modified, oldest first.
    #[serde(default)]
    pub modified: Vec<String>,
    /// Paths created, oldest first.
    #[serde(default)]
    pub created: Vec<String>,
    /// User messages verbatim, oldest first.
    #[serde(default)]
    pub user_messages: Vec<String>,
    /// The last error of each failing command, oldest first.
    #[serde(default)]
    pub errors: Vec<CommandError>,
    /// Decisions the user stated, oldest first.
    #[serde(default)]
    pub decisions: Vec<String>,
}

/// Pushes `item` as the most recent entry of `list`, removing an older copy, keeping `max`.
fn touch(list: &mut Vec<String>, item: String, max: usize) {
    list.retain(|x| *x != item);
    list.push(item);
    if list.len() > max {
        list.drain(..list.len() - max);
    }
}

/// Whether a message was written by the user (not a reminder, another tool's summary or pith).
pub fn is_user_authored(m: &Message) -> bool {
    m.role == Role::User
        && !m.is_reminder()
        && !m.meta.external_summary
        && !m.meta.synthetic
        && m.tool_results().next().is_none()
        && !m.text_content().trim().is_empty()
}

/// The last `chars` characters of `text`, on a character boundary.
pub(crate) fn tail_chars(text: &str, chars: usize) -> &str {
    let count = text.chars().count();
    if count <= chars {
        return text;
    }
    let skip = count - chars;
    match text.char_indices().nth(skip) {
        Some((i, _)) => &text[i..],
        None => text,
    }
}

fn head_chars(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// Whether a tool result reports a failure: flagged as an error, or a non-zero exit code.
///
/// The markers are matched ignoring ASCII case, in place: outputs can be megabytes, and this runs
/// over every summarised output in each planning pass.
pub(crate) fn failed(content: &str, is_error: bool) -> bool {
    if is_error {
        return true;
    }
    let bytes = content.as_bytes();
    let marked_at = |start: usize| {
        FAILURE_MARKERS.iter().any(|marker| {
            bytes
                .get(start..start + marker.len())
                .is_some_and(|window| window.eq_ignore_ascii_case(marker))
                && bytes
                    .get(start + marker.len())
                    .is_some_and(|d| d.is_ascii_digit() && *d != b'0')
        })
    };
    // "exit" cannot overlap itself: looking at every occurrence finds every marker.
    exit_positions(bytes, marked_at)
}

/// What a failed command's output says, matched ignoring ASCII case, followed by a non-zero digit.
const FAILURE_MARKERS: [&[u8]; 3] = [b"exit code: ", b"exited with code ", b"exit status "];

/// Whether "exit" occurs in `bytes` (ignoring ASCII case) at a position `at` for which
/// `marked(at)` holds; positions are tried in order.
///
/// Every failure marker starts with "exit", which is rare in tool outputs (unlike its letters):
/// blocks of thirty-two positions are first tested for any match at all with a branch-free
/// reduction that compiles to vector compares, and only a block with a match is looked at
/// position by position. Setting bit 0x20 folds exactly the two cases of a letter.
fn exit_positions(bytes: &[u8], mut marked: impl FnMut(usize) -> bool) -> bool {
    const BLOCK: usize = 32;
    let is = |b: u8, letter: u8| u8::from((b | 0x20) == letter);
    let starts = bytes.len().saturating_sub(3);
    let exit_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"exit"))
    };
    let mut at = 0;
    while at + BLOCK <= starts {
        let window: Option<&[u8; BLOCK + 3]> = bytes.get(at..at + BLOCK + 3).and_then(|w| w.try_into().ok());
        let Some(window) = window else { break };
        let mut any = 0u8;
        for j in 0..BLOCK {
            any |= is(window[j], b'e')
                & is(window[j + 1], b'x')
                & is(window[j + 2], b'i')
                & is(window[j + 3], b't');
        }
        if any != 0 && (at..at + BLOCK).any(|p| exit_at(p) && marked(p)) {
            return true;
        }
        at += BLOCK;
    }
    (at..starts).any(|p| exit_at(p) && marked(p))
}

/// A short description of a call for the error list.
pub(crate) fn describe_call(name: &str, arguments: &serde_json::Value) -> String {
    let text = crate::artifacts::command_of(arguments)
        .or_else(|| crate::artifacts::named_path(arguments))
        .map(|c| format!("{name}: {c}"))
        .unwrap_or_else(|| name.to_string());
    head_chars(text.trim(), COMMAND_CHARS)
}

/// `text` split at `.`, `!`, `?` and line ends (as `str::split` with those characters; the
/// separators are ASCII, so the bytes can be searched without decoding characters).
#[cfg(test)]
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    crate::artifacts::split_ascii(text, |b| matches!(b, b'.' | b'!' | b'\n' | b'?'))
}

/// Words that mark a sentence of a user message as a decision (matched ignoring ASCII case).
pub(crate) const DECISION_MARKERS: &[&str] = &[
    "let's ",
    "lets ",
    "we should ",
    "we will ",
    "we'll ",
    "don't ",
    "do not ",
    "never ",
    "always ",
    "instead",
    "prefer ",
    "must ",
    "decided",
    "go with ",
];

/// Sentences of a user message that state a decision.
#[cfg(test)]
fn decisions_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    crate::ledger_decisions::for_each_decision(text, &mut Vec::new(), |d| found.push(d.to_string()));
    found
}

impl Ledger {
    /// Extracts the ledger of a span of messages, in order.
    pub fn extract<'a>(span: impl IntoIterator<Item = &'a Message>) -> Self {
        let scan = Scan::of(span);
        let lists = scan.lists();
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        Ledger {
            read: owned(&lists.read),
            modified: owned(&lists.modified),
            created: owned(&lists.created),
            user_messages: owned(&lists.user_messages),
            errors: lists
                .errors
                .iter()
                .map(|(command, tail)| CommandError {
                    command: command.to_string(),
                    tail: tail.to_string(),
                })
                .collect(),
            decisions: owned(&lists.decisions),
        }
    }

    /// The ledger a compaction record carries, if any.
    pub fn from_meta(meta: &CompactionMeta) -> Option<Self> {
        let value = meta.extra.as_ref()?.get(EXTRA_LEDGER)?;
        Ledger::deserialize(value).ok()
    }

    /// Folds a newer ledger in: its entries become the most recent ones; bounds are kept.
    pub fn merge(&mut self, newer: Ledger) {
        for p in newer.read {
            touch(&mut self.read, p, MAX_PATHS);
        }
        for p in newer.modified {
            touch(&mut self.modified, p, MAX_PATHS);
        }
        for p in newer.created {
            touch(&mut self.created, p, MAX_PATHS);
        }
        for u in newer.user_messages {
            touch(&mut self.user_messages, u, MAX_USER_MESSAGES);
        }
        for d in newer.decisions {
            touch(&mut self.decisions, d, MAX_DECISIONS);
        }
        for e in newer.errors {
            self.errors.retain(|x| x.command != e.command);
            self.errors.push(e);
        }
        if self.errors.len() > MAX_ERRORS {
            self.errors.drain(..self.errors.len() - MAX_ERRORS);
        }
    }

    /// Whether the ledger holds nothing.
    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
            && self.modified.is_empty()
            && self.created.is_empty()
            && self.user_messages.is_empty()
            && self.errors.is_empty()
            && self.decisions.is_empty()
    }

    /// Renders what `summary` does not already name, within `budget` tokens (of which user
    /// messages take at most `user_budget`). Empty when nothing is missing or nothing fits.
    pub fn render(&self, summary: &str, budget: u64, user_budget: u64, counter: &dyn TokenCounter) -> String {
        self.render_with_cost(summary, budget, user_budget, counter).0
    }

    /// [`Ledger::render`], with the tokens it was charged (each line counted on its own, an upper
    /// bound of the whole text's count).
    pub fn render_with_cost(
        &self,
        summary: &str,
        budget: u64,
        user_budget: u64,
        counter: &dyn TokenCounter,
    ) -> (String, u64) {
        let frame = format!("\n\n{LEDGER_OPEN}\n{LEDGER_CLOSE}");
        let frame_cost = counter.count_text(&frame) + 2;
        let mut left = budget.saturating_sub(frame_cost);
        let start = left;
        let mut sections: Vec<String> = Vec::new();
        let mut section = |title: &str, items: Vec<String>, cap: u64, left: &mut u64| {
            let mut cap = cap.min(*left);
            let mut lines = Vec::new();
            let head = format!("{title}:\n");
            let head_tokens = counter.count_text(&head);
            if items.is_empty() || head_tokens >= cap {
                return;
            }
            cap -= head_tokens;
            let mut used = head_tokens;
            for item in items {
                let line = format!("- {item}\n");
                let t = counter.count_text(&line);
                if t > cap {
                    continue;
                }
                cap -= t;
                used += t;
                lines.push(line);
            }
            if !lines.is_empty() {
                *left = left.saturating_sub(used);
                sections.push(format!("{head}{}", lines.concat()));
            }
        };
        let missing = |list: &[String]| -> Vec<String> {
            list.iter()
                .rev()
                .filter(|p| !summary.contains(p.as_str()))
                .cloned()
                .collect()
        };
        section("Files modified", missing(&self.modified), u64::MAX, &mut left);
        section("Files created", missing(&self.created), u64::MAX, &mut left);
        section("Files read", missing(&self.read), u64::MAX, &mut left);
        // User messages: newest first within the budget, shown in their order.
        let mut users = Vec::new();
        let user_title = "User messages (verbatim)";
        let mut user_left = user_budget
            .min(left)
            .saturating_sub(counter.count_text(&format!("{user_title}:\n")));
        for u in self.user_messages.iter().rev() {
            let t = counter.count_text(&format!("- {u}\n"));
            if t > user_left {
                continue;
            }
            if !summary.contains(u.as_str()) {
                user_left -= t;
                users.push(u.clone());
            }
        }
        users.reverse();
        section(user_title, users, user_budget, &mut left);
        let errors = self
            .errors
            .iter()
            .rev()
            .map(|e| format!("{}\n  {}", e.command, e.tail.replace('\n', "\n  ")))
            .collect();
        section("Last error of failing commands", errors, u64::MAX, &mut left);
        section(
            "Decisions the user stated",
            missing(&self.decisions),
            u64::MAX,
            &mut left,
        );
        if sections.is_empty() {
            return (String::new(), 0);
        }
        let text = format!("\n\n{LEDGER_OPEN}\n{}{LEDGER_CLOSE}", sections.concat());
        (text, start - left + frame_cost)
    }
}

/// The ledger a compaction of `view` would carry when it summarises the conversation messages
/// of `before` (the previous record's ledger with theirs merged in).
pub fn carried(view: &StoredView, before: &[&Message]) -> Ledger {
    let mut ledger = view
        .compaction
        .as_ref()
        .and_then(Ledger::from_meta)
        .unwrap_or_default();
    ledger.merge(Ledger::extract(
        before
            .iter()
            .copied()
            .filter(|m| !m.role.is_instruction() && !m.is_reminder()),
    ));
    ledger
}

/// Tokens to reserve for the ledger of a compaction that summarises at most `before`: its full
/// rendering, an upper bound for any later cut.
///
/// The same number as `carried(view, before).render_with_cost("", u64::MAX / 2, ..).1`, measured
/// over the items borrowed from the messages, without copying them or writing the rendering.
pub fn reserve(view: &StoredView, before: &[&Message], threshold: u64, counter: &dyn TokenCounter) -> u64 {
    let previous = view.compaction.as_ref().and_then(Ledger::from_meta);
    let scan = Scan::of(
        before
            .iter()
            .copied()
            .filter(|m| !m.role.is_instruction() && !m.is_reminder()),
    );
    let lists = match &previous {
        Some(previous) => merge_lists(previous, scan.lists()),
        None => scan.lists(),
    };
    if lists.is_empty() {
        return 0;
    }
    lists.rendered_cost("", u64::MAX / 2, user_budget(threshold), counter)
}

/// Stores `ledger` in the record's extra data (nothing when there is none).
pub fn attach(meta: &mut CompactionMeta, ledger: Option<&Ledger>) {
    let Some(ledger) = ledger else { return };
    let Ok(value) = serde_json::to_value(ledger) else {
        return;
    };
    match meta.extra.as_mut().and_then(serde_json::Value::as_object_mut) {
        Some(map) => {
            map.insert(EXTRA_LEDGER.to_string(), value);
        }
        None => meta.extra = Some(serde_json::json!({ EXTRA_LEDGER: value })),
    }
}

/// The user-message budget of a ledger under `threshold`: min(20,000, 25% of the threshold).
pub fn user_budget(threshold: u64) -> u64 {
    USER_MESSAGE_TOKENS.min(threshold / 4)
}

/// A summary without the ledger or user-message block a previous compaction appended.
pub fn strip_appendix(summary: &str) -> &str {
    let cut = [LEDGER_OPEN, crate::policy::USER_MESSAGES_OPEN]
        .iter()
        .filter_map(|m| summary.find(m))
        .min()
        .unwrap_or(summary.len());
    summary[..cut].trim_end()
}

#[cfg(test)]
#[path = "ledger_search_tests.rs"]
mod search_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{EstimateCounter, Part};
    use serde_json::json;

    fn call(id: &str, name: &str, args: serde_json::Value) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: id.into(),
                name: name.into(),
                arguments: args,
            }],
        )
    }

    #[test]
    fn extracts_paths_users_errors_and_decisions() {
        let span = [
            Message::user("Fix the parser. Let's keep the old API stable."),
            call("a", "Read", json!({"file_path": "src/parse.rs"})),
            Message::tool_result("a", "fn parse() {}", false),
            call(
                "b",
                "Edit",
                json!({"file_path": "src/parse.rs", "old_string": "a", "new_string": "b"}),
            ),
            Message::tool_result("b", "ok", false),
            call("c", "Bash", json!({"command": "cargo test"})),
            Message::tool_result(
                "c",
                format!(
                    "{}\nerror[E0308]: mismatched types\nexit code: 101",
                    "compiling\n".repeat(100)
                ),
                false,
            ),
            call("d", "Write", json!({"file_path": "src/new.rs", "content": "x"})),
        ];
        let l = Ledger::extract(&span);
        assert_eq!(l.read, vec!["src/parse.rs"]);
        assert_eq!(l.modified, vec!["src/parse.rs"]);
        assert_eq!(l.created, vec!["src/new.rs"]);
        assert_eq!(l.user_messages.len(), 1);
        assert_eq!(l.decisions, vec!["Let's keep the old API stable"]);
        assert_eq!(l.errors.len(), 1);
        assert!(l.errors[0].tail.contains("mismatched types"), "{:?}", l.errors);
        assert!(l.errors[0].command.contains("cargo test"));

        let text = l.render(
            "The parser in src/parse.rs was fixed.",
            10_000,
            5_000,
            &EstimateCounter,
        );
        assert!(text.contains("src/new.rs"));
        assert!(text.contains("Fix the parser. Let's keep the old API stable."));
        assert!(!text.contains("Files read"), "named in the summary: {text}");
        assert!(strip_appendix(&format!("summary{text}")) == "summary");
    }

    #[test]
    fn merging_dedupes_and_bounds_and_rendering_respects_the_budget() {
        let mut old = Ledger::extract(&[Message::user("first request")]);
        old.read = (0..MAX_PATHS).map(|i| format!("f{i}.rs")).collect();
        let newer = Ledger::extract(&[
            Message::user("first request"),
            call("a", "read", json!({"path": "f3.rs"})),
        ]);
        old.merge(newer);
        assert_eq!(old.read.len(), MAX_PATHS);
        assert_eq!(old.read.last().map(String::as_str), Some("f3.rs"));
        assert_eq!(old.user_messages, vec!["first request"]);
        let small = old.render("", 50, 20, &EstimateCounter);
        assert!(EstimateCounter.count_text(&small) <= 50, "{small}");
        assert!(old.render("", 0, 0, &EstimateCounter).is_empty());
    }
}
