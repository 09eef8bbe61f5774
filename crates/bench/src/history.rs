//! Synthetic agent histories of any length, for the scaling benches.
//!
//! The shapes follow the shared transcripts: a user request, an assistant message with a tool
//! call (a file read or a shell command), its result (every seventh one longer than the clipping
//! limit), and an assistant reply that carries the provider's usage. Sizes vary with the index
//! so no two entries are alike, but the same index always gives the same entry.

use pith_core::{Entry, Message, Part, SessionRecord, StoredView, TokenCounter, ToolDeclaration, Usage};
use serde_json::json;

/// Entries in one synthetic round (request, call, result, reply).
pub const ROUND: usize = 4;

/// The tools the synthetic sessions declare.
pub fn tools() -> Vec<ToolDeclaration> {
    vec![
        ToolDeclaration {
            name: "read".into(),
            description: "Reads a file of the workspace.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
        ToolDeclaration {
            name: "bash".into(),
            description: "Runs a shell command.".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        },
    ]
}

fn filler(i: usize, bytes: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "parser",
        "returns",
        "an",
        "error",
        "when",
        "config",
        "value",
        "is",
        "missing",
        "so",
        "we",
        "check",
        "src/lib.rs",
        "before",
        "running",
        "tests",
        "again",
    ];
    let mut out = String::with_capacity(bytes + 16);
    let mut k = i;
    while out.len() < bytes {
        out.push_str(WORDS[k % WORDS.len()]);
        out.push(' ');
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    out
}

/// Entry `i` of the synthetic history (deterministic in `i`).
pub fn entry(i: usize) -> Entry {
    let round = i / ROUND;
    let call_id = format!("call_{round}");
    let message = match i % ROUND {
        0 => Message::user(format!("step {round}: {}", filler(i, 120 + i % 200))),
        1 => {
            let mut m = Message::assistant(format!("I'll look at it. {}", filler(i, 40 + i % 80)));
            let (name, args) = if round.is_multiple_of(2) {
                ("read", json!({"path": format!("src/module_{}.rs", round % 97)}))
            } else {
                (
                    "bash",
                    json!({"command": format!("cargo test -p crate{} -- case_{round}", round % 13)}),
                )
            };
            m.parts.push(Part::ToolCall {
                call_id: call_id.clone(),
                name: name.into(),
                arguments: args,
            });
            m
        }
        2 => {
            let len = if round.is_multiple_of(7) {
                6_000
            } else {
                200 + (i * 37) % 900
            };
            Message::tool_result(call_id, filler(i, len), round.is_multiple_of(11))
        }
        _ => {
            let mut m = Message::assistant(format!("Done with step {round}. {}", filler(i, 60 + i % 150)));
            let prompt = 2_000 + (round as u64 % 50) * 100;
            m.usage = Some(Usage::from_openai(prompt, 80, 0));
            m
        }
    };
    Entry::Message(message)
}

/// A history of `n` entries after one system instruction.
pub fn log(n: usize) -> Vec<Entry> {
    let mut out = Vec::with_capacity(n + 1);
    out.push(Entry::Message(Message::system(
        "You are a careful coding agent. Run the tests before you say a change is done.",
    )));
    out.extend((0..n).map(entry));
    out
}

/// The view of a never-compacted session of `n` entries: the worst case for a per-turn check,
/// since the whole history is the tail.
///
/// # Errors
/// Never for the histories built here; the store's view rules are checked anyway.
pub fn view(n: usize) -> Result<StoredView, pith_core::ViewError> {
    StoredView::from_log(SessionRecord::new("bench/model", tools()), &log(n))
}

/// Messages from `source` (cycled, with fresh ids) until they hold at least `tokens` tokens by
/// `counter`; a span must start at a user message and keep tool calls with their results, which
/// cycling whole rounds preserves when `source` is made of whole rounds.
pub fn span_of_tokens(source: &[Message], tokens: u64, counter: &dyn TokenCounter) -> Vec<Message> {
    let mut out = Vec::new();
    let mut total = 0u64;
    if source.is_empty() {
        return out;
    }
    for m in source.iter().cycle() {
        if total >= tokens {
            break;
        }
        total += counter.count_message(m);
        let mut copy = m.clone();
        copy.id = pith_core::EntryId::new();
        out.push(copy);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::EstimateCounter;

    #[test]
    fn histories_are_deterministic_and_valid_views() {
        let a = view(400).unwrap();
        // The instruction stays in its place in the tail as well.
        assert_eq!(a.tail.len(), 401);
        assert!(a.tail[0].as_message().unwrap().role.is_instruction());
        let texts = |v: &StoredView| v.tail_messages().map(|m| m.text_content()).collect::<Vec<_>>();
        assert_eq!(texts(&a), texts(&view(400).unwrap()));
        let calls = a
            .tail_messages()
            .filter(|m| m.tool_calls().next().is_some())
            .count();
        assert_eq!(calls, 100);
    }

    #[test]
    fn spans_reach_the_token_count() {
        let source: Vec<Message> = log(40)
            .into_iter()
            .filter_map(|e| e.as_message().cloned())
            .collect();
        let span = span_of_tokens(&source[1..], 150_000, &EstimateCounter);
        let total: u64 = span.iter().map(|m| EstimateCounter.count_message(m)).sum();
        assert!(total >= 150_000);
        assert!(total < 160_000);
    }
}
