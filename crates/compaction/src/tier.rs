//! Tiered compaction: mask old tool outputs before summarising.
//!
//! Tool outputs are most of a coding session's context, and an old one is rarely needed verbatim:
//! the call that produced it (its arguments) stays in view, and the agent can run it again. So
//! before a summary is written, the outputs of old tool results are replaced by a one-line
//! placeholder naming the tool, the call and the size. Only what lies outside a protected recent
//! window is touched: walking the tool results from the newest to the oldest, the first
//! min(40,000, 50% of the threshold) tokens of tool output stay as they are. Older results of at
//! least 50 tokens are the candidates, and masking acts only when it frees at least
//! min(20,000, 25% of the threshold) tokens — a smaller gain is not worth a new view generation.
//!
//! Masking never rewrites the log. A compaction record lists the masked entries
//! ([`MaskedEntry`]); [`apply_masks`] replaces their outputs with the placeholders in a loaded
//! view, in memory only, so that every estimate, cut and projection made from that view measures
//! what the model is sent. The originals stay in the log (and are returned by [`apply_masks`]), so
//! a later summary still reads them.

use std::collections::{HashMap, HashSet};

use pith_core::{EntryId, MaskedEntry, Message, Part, StoredView, TokenCounter};

use crate::prompt::clip_tool_output;

/// Tool outputs smaller than this (estimated tokens) are never masked: the placeholder would save
/// next to nothing.
pub const MIN_MASKABLE_TOKENS: u64 = 50;

/// The newest tool output protected from masking, at most (tokens; see [`protected_tokens`]).
pub const MAX_PROTECTED_TOKENS: u64 = 40_000;

/// The least a masking must free to be done, at most (tokens; see [`min_freed_tokens`]).
pub const MAX_MIN_FREED_TOKENS: u64 = 20_000;

/// Tokens of the newest tool output that are never masked: min(40,000, 50% of the threshold).
pub fn protected_tokens(threshold: u64) -> u64 {
    MAX_PROTECTED_TOKENS.min(threshold / 2)
}

/// Tokens a masking must free to be done at all: min(20,000, 25% of the threshold).
pub fn min_freed_tokens(threshold: u64) -> u64 {
    MAX_MIN_FREED_TOKENS.min(threshold / 4)
}

/// The text that stands in for a masked tool output: it names the tool, the call and the size of
/// the output, so the model knows what is missing and how to get it back.
pub fn placeholder(mask: &MaskedEntry) -> String {
    format!(
        "[output of {} (call {}) omitted from the context: about {} tokens]",
        mask.tool, mask.call_id, mask.tokens
    )
}

/// The masks chosen for a view, and what they free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskChoice {
    /// The new masks, oldest first.
    pub masks: Vec<MaskedEntry>,
    /// Tokens they free in the view (output as sent minus placeholder).
    pub freed: u64,
}

/// One tool result of the tail, as the chooser sees it.
struct ResultRef<'a> {
    entry_id: EntryId,
    call_id: &'a str,
    tool: &'a str,
    content: &'a str,
}

/// The tool results of the view's tail, oldest first, each with the name of the tool whose call it
/// answers (the nearest preceding call with its id; `tool` when no call is in view).
fn tool_results(view: &StoredView) -> Vec<ResultRef<'_>> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::new();
    for m in view.tail_messages() {
        for part in &m.parts {
            match part {
                Part::ToolCall { call_id, name, .. } => {
                    names.insert(call_id.as_str(), name.as_str());
                }
                Part::ToolResult { call_id, content, .. } => out.push(ResultRef {
                    entry_id: m.id,
                    call_id: call_id.as_str(),
                    tool: names.get(call_id.as_str()).copied().unwrap_or("tool"),
                    content: content.as_str(),
                }),
                _ => {}
            }
        }
    }
    out
}

/// Chooses the tool outputs of `view` to mask under `threshold`, or `None` when masking would free
/// less than [`min_freed_tokens`].
///
/// Walks the tool results from the newest to the oldest: those within the first
/// [`protected_tokens`] of tool output (as sent, after clipping) are protected, the one that
/// crosses the boundary included; every older result of at least [`MIN_MASKABLE_TOKENS`] that is
/// not masked yet and whose placeholder is smaller than it becomes a mask. Pure: the same view
/// gives the same masks.
pub fn choose(view: &StoredView, counter: &dyn TokenCounter, threshold: u64) -> Option<MaskChoice> {
    let already: HashSet<(EntryId, &str)> = view
        .compaction
        .iter()
        .flat_map(|meta| &meta.masked)
        .map(|m| (m.entry_id, m.call_id.as_str()))
        .collect();
    let protect = protected_tokens(threshold);
    let mut seen = 0u64;
    let mut masks = Vec::new();
    let mut freed = 0u64;
    for r in tool_results(view).iter().rev() {
        let sent = counter.count_text(&clip_tool_output(r.content));
        let protected = seen < protect;
        seen = seen.saturating_add(sent);
        if protected || already.contains(&(r.entry_id, r.call_id)) {
            continue;
        }
        let tokens = counter.count_text(r.content);
        if tokens < MIN_MASKABLE_TOKENS {
            continue;
        }
        let mask = MaskedEntry {
            entry_id: r.entry_id,
            call_id: r.call_id.to_string(),
            tool: r.tool.to_string(),
            tokens,
        };
        let after = counter.count_text(&placeholder(&mask));
        if after >= sent {
            continue;
        }
        freed += sent - after;
        masks.push(mask);
    }
    masks.reverse();
    (freed >= min_freed_tokens(threshold) && !masks.is_empty()).then_some(MaskChoice { masks, freed })
}

/// Replaces the outputs listed in `masks` with their placeholders in `message`; `true` when one
/// was replaced.
fn mask_message(message: &mut Message, masks: &[&MaskedEntry]) -> bool {
    let mut changed = false;
    for part in &mut message.parts {
        if let Part::ToolResult { call_id, content, .. } = part {
            if let Some(mask) = masks.iter().find(|x| &x.call_id == call_id) {
                *content = placeholder(mask);
                changed = true;
            }
        }
    }
    changed
}

/// Replaces the outputs listed in `masks` with their placeholders in the tail of `view` (in
/// memory only: the log is untouched) and returns the original messages that changed, by id.
pub fn mask_in_place(view: &mut StoredView, masks: &[MaskedEntry]) -> HashMap<EntryId, Message> {
    let mut originals = HashMap::new();
    if masks.is_empty() {
        return originals;
    }
    let mut by_entry: HashMap<EntryId, Vec<&MaskedEntry>> = HashMap::new();
    for m in masks {
        by_entry.entry(m.entry_id).or_default().push(m);
    }
    for entry in &mut view.tail {
        let pith_core::Entry::Message(message) = entry else {
            continue;
        };
        let Some(list) = by_entry.get(&message.id) else {
            continue;
        };
        let original = message.clone();
        if mask_message(message, list) {
            originals.insert(original.id, original);
        }
    }
    originals
}

/// Applies the masks of the view's compaction record to its tail (see [`mask_in_place`]).
///
/// Call it right after every `load_view` whose result is measured, cut or projected, so that the
/// token accounting counts each masked output as its placeholder — exactly what is sent.
pub fn apply_masks(view: &mut StoredView) -> HashMap<EntryId, Message> {
    let masks = match &view.compaction {
        Some(meta) if !meta.masked.is_empty() => meta.masked.clone(),
        _ => return HashMap::new(),
    };
    mask_in_place(view, &masks)
}

/// The view with its record's masks applied (see [`apply_masks`]), for callers that only measure
/// and project it.
pub fn masked_view(mut view: StoredView) -> StoredView {
    apply_masks(&mut view);
    view
}

/// The masks of `masks` whose entries are among `kept`: those a new record carries forward, so
/// that a later summary does not bring masked outputs back into the view.
pub fn carried(masks: &[MaskedEntry], kept: &[&Message]) -> Vec<MaskedEntry> {
    if masks.is_empty() {
        return Vec::new();
    }
    let ids: HashSet<EntryId> = kept.iter().map(|m| m.id).collect();
    masks
        .iter()
        .filter(|m| ids.contains(&m.entry_id))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::{Entry, EstimateCounter, SessionRecord};

    fn call(id: &str, tool: &str) -> Message {
        let mut m = Message::assistant("");
        m.parts = vec![Part::ToolCall {
            call_id: id.into(),
            name: tool.into(),
            arguments: serde_json::json!({}),
        }];
        m
    }

    /// `n` read calls, each answered by an output of `chars` characters.
    fn view(n: usize, chars: usize) -> StoredView {
        let mut log: Vec<Entry> = vec![Message::user("go").into()];
        for i in 0..n {
            log.push(call(&format!("c{i}"), "read").into());
            log.push(Message::tool_result(format!("c{i}"), "z".repeat(chars), false).into());
        }
        StoredView::from_log(SessionRecord::new("m", vec![]), &log).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_placeholder_names_tool_call_and_size() {
        let mask = MaskedEntry {
            entry_id: EntryId::new(),
            call_id: "toolu_01".into(),
            tool: "Bash".into(),
            tokens: 1234,
        };
        assert_eq!(
            placeholder(&mask),
            "[output of Bash (call toolu_01) omitted from the context: about 1234 tokens]"
        );
    }

    #[test]
    fn nothing_is_chosen_below_the_minimum_gain() {
        // Threshold 20,000: 10,000 protected, at least 5,000 to free. 12 outputs of 1,000 tokens
        // leave two unprotected: too little.
        assert!(choose(&view(12, 4_000), &EstimateCounter, 20_000).is_none());
        // 20 outputs leave ten: enough.
        let chosen = choose(&view(20, 4_000), &EstimateCounter, 20_000).unwrap_or_else(|| panic!("masks"));
        assert_eq!(chosen.masks.len(), 10);
        assert_eq!(chosen.masks[0].call_id, "c0", "oldest first");
        assert_eq!(chosen.masks[0].tool, "read");
        assert!(chosen.freed >= min_freed_tokens(20_000));
    }

    #[test]
    fn masking_in_place_keeps_the_originals_and_carrying_keeps_only_kept_entries() {
        let mut v = view(20, 4_000);
        let chosen = choose(&v, &EstimateCounter, 20_000).unwrap_or_else(|| panic!("masks"));
        let originals = mask_in_place(&mut v, &chosen.masks);
        assert_eq!(originals.len(), 10);
        let masked: Vec<&Message> = v
            .tail_messages()
            .filter(|m| originals.contains_key(&m.id))
            .collect();
        for m in &masked {
            let (_, content, _) = m.tool_results().next().unwrap_or_else(|| panic!("result"));
            assert!(content.starts_with("[output of read (call c"));
            let (_, original, _) = originals[&m.id]
                .tool_results()
                .next()
                .unwrap_or_else(|| panic!("result"));
            assert_eq!(original.len(), 4_000);
        }
        let kept = &masked[5..];
        let carried = carried(&chosen.masks, kept);
        assert_eq!(carried.len(), 5);
        assert!(carried.iter().all(|c| kept.iter().any(|m| m.id == c.entry_id)));
    }
}
