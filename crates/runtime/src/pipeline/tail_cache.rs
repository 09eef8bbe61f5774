//! Running totals of one session's view, updated with the entries appended since the last check.
//!
//! The budget check must agree exactly with `pith_compaction::overflow::context_tokens` and
//! `view_message_count`, which walk the whole view. Everything they compute is a sum over the
//! tail or a property of its newest reply, so it can be carried forward: per-entry token prefix
//! sums, a running count of conversation messages, the position of the newest reply that
//! reported usage, and the tokens of the parts that only change with a compaction (instructions,
//! retained reminders, the summary as projected). A check then costs the entries appended since
//! the previous one, not the length of the history.
//!
//! The cache is valid for one generation and one tail: when the generation, the compaction
//! record or the first cached entry differ, or the tail no longer holds the last cached entry at
//! its position, it is rebuilt from the view (O(view) once). It assumes that an entry's content
//! does not change within a generation (the log is append-only): a step that rewrites loaded
//! views, such as masking tool outputs in place, must rewrite every load of that generation.

use pith_compaction::{overflow, projection, ProjectionStyle};
use pith_core::{EntryId, Role, StoredView, TokenCounter};

/// What identifies the parts of a view that only a compaction changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FixedKey {
    generation: u64,
    compaction: Option<EntryId>,
    instructions: usize,
    reminders: usize,
}

impl FixedKey {
    fn of(view: &StoredView) -> Self {
        Self {
            generation: view.generation,
            compaction: view.compaction.as_ref().map(|m| m.id),
            instructions: view.instructions.len(),
            reminders: view.reminders.len(),
        }
    }
}

/// Cached estimates and counts of one session's view.
#[derive(Debug)]
pub(super) struct TailCache {
    key: FixedKey,
    /// Instructions, recent reminders and the projected summary, in tokens.
    fixed: u64,
    /// Id of the first tail entry covered.
    first: Option<EntryId>,
    /// Id of the last tail entry covered.
    last: Option<EntryId>,
    /// `prefix[i]` = tokens of the first `i` tail entries (`prefix[0] = 0`).
    prefix: Vec<u64>,
    /// Conversation messages (instructions excluded) among the covered entries.
    messages: usize,
    /// Newest assistant reply with non-zero usage among the covered entries: (position, the
    /// context it measured).
    last_reply: Option<(usize, u64)>,
    /// Index of the first tail entry written after the latest compaction, once it is settled.
    after_compaction: Option<usize>,
    /// Logical time of the last use, for eviction.
    pub(super) used: u64,
}

/// The totals a budget check needs, in O(1) once the cache is up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    /// Instructions, reminders, summary and tail, in tokens (tools excluded).
    pub(super) view_tokens: u64,
    /// The newest measured reply after the latest compaction: its measured context plus the
    /// estimate of the tail entries after it.
    pub(super) reported: Option<u64>,
    /// Conversation messages in the tail (the count signal).
    pub(super) messages: usize,
}

impl TailCache {
    /// An up-to-date cache for `view`.
    pub(super) fn build(view: &StoredView, style: ProjectionStyle, counter: &dyn TokenCounter) -> Self {
        let mut cache = Self::empty(view, style, counter);
        cache.extend(view, counter);
        cache
    }

    fn empty(view: &StoredView, style: ProjectionStyle, counter: &dyn TokenCounter) -> Self {
        let fixed = view
            .instructions
            .iter()
            .map(|m| overflow::message_tokens(counter, m))
            .sum::<u64>()
            + projection::recent_reminders(&view.reminders)
                .iter()
                .map(|m| overflow::message_tokens(counter, m))
                .sum::<u64>()
            + overflow::summary_tokens(view, style, counter);
        Self {
            key: FixedKey::of(view),
            fixed,
            first: None,
            last: None,
            prefix: vec![0],
            messages: 0,
            last_reply: None,
            after_compaction: None,
            used: 0,
        }
    }

    fn covered(&self) -> usize {
        self.prefix.len() - 1
    }

    /// Whether the cache describes a prefix of `view`'s tail under the same compaction.
    fn matches(&self, view: &StoredView) -> bool {
        let n = self.covered();
        self.key == FixedKey::of(view)
            && n <= view.tail.len()
            && self.first == view.tail.first().filter(|_| n > 0).map(|e| e.id())
            && self.last == n.checked_sub(1).map(|i| view.tail[i].id())
    }

    /// Brings the cache up to date with `view`: O(new entries) when it only grew, O(view) when
    /// the cache had to be rebuilt.
    pub(super) fn update(&mut self, view: &StoredView, style: ProjectionStyle, counter: &dyn TokenCounter) {
        if !self.matches(view) {
            let used = self.used;
            *self = Self::empty(view, style, counter);
            self.used = used;
        }
        self.extend(view, counter);
    }

    fn extend(&mut self, view: &StoredView, counter: &dyn TokenCounter) {
        let start = self.covered();
        if start == view.tail.len() {
            return;
        }
        self.prefix.reserve(view.tail.len() - start);
        let mut total = self.total();
        for (pos, entry) in view.tail.iter().enumerate().skip(start) {
            if let Some(m) = entry.as_message() {
                total += overflow::message_tokens(counter, m);
                if !m.role.is_instruction() {
                    self.messages += 1;
                }
                if let Some(u) = m.usage.filter(|u| m.role == Role::Assistant && !u.is_zero()) {
                    self.last_reply = Some((pos, u.context_tokens()));
                }
            }
            self.prefix.push(total);
        }
        if self.first.is_none() {
            self.first = view.tail.first().map(|e| e.id());
        }
        self.last = view.tail.last().map(|e| e.id());
    }

    fn total(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Index of the first tail entry written after the latest compaction (as
    /// `overflow::first_entry_after_compaction`): computed once it no longer depends on the
    /// tail's length, recomputed until then.
    fn boundary(&mut self, view: &StoredView) -> usize {
        if let Some(at) = self.after_compaction {
            return at;
        }
        let at = overflow::first_entry_after_compaction(view);
        if at < view.tail.len() {
            self.after_compaction = Some(at);
        }
        at
    }

    /// The totals of the view the cache was last updated with (which must be `view`).
    pub(super) fn totals(&mut self, view: &StoredView) -> Totals {
        let boundary = self.boundary(view);
        let total = self.total();
        let reported = self
            .last_reply
            .filter(|(pos, _)| *pos >= boundary)
            .map(|(pos, measured)| measured + (total - self.prefix[pos + 1]));
        Totals {
            view_tokens: self.fixed + total,
            reported,
            messages: self.messages,
        }
    }

    /// Heap bytes held, roughly (for sizing the cache bound).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        self.prefix.capacity() * std::mem::size_of::<u64>()
    }
}
