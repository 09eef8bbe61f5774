//! One pass over a span collecting the ledger's items, borrowed from the messages.
//!
//! [`Ledger::extract`](crate::ledger::Ledger::extract) keeps each list as "distinct items, most
//! recently touched last, the newest `max`". A [`Scan`] records every touch in order (borrowing
//! paths, user messages, decisions and error tails from the messages wherever they are slices of
//! them) and resolves the lists once at the end, so a span costs one pass over its messages plus
//! one hash lookup per touch, instead of a search of the list on every touch and a copy of every
//! item. The resolved lists are the ledger's: [`Scan::lists`] equals the extracted ledger item for
//! item, and [`merge_lists`] equals [`Ledger::merge`](crate::ledger::Ledger::merge).

use rustc_hash::FxHashSet as HashSet;
use std::borrow::Cow;

use pith_core::{Message, Part, Role};

use crate::artifacts::{call_paths, Access};
use crate::ledger::{
    describe_call, failed, tail_chars, Ledger, ERROR_TAIL_CHARS, MAX_DECISIONS, MAX_ERRORS, MAX_PATHS,
    MAX_USER_MESSAGES,
};
use crate::ledger_cost::LedgerLists;
use crate::ledger_decisions::for_each_decision;

/// Every touch of a span's ledger lists, in order.
#[derive(Debug, Default)]
pub(crate) struct Scan<'a> {
    read: Vec<Cow<'a, str>>,
    modified: Vec<Cow<'a, str>>,
    created: Vec<Cow<'a, str>>,
    user_messages: Vec<Cow<'a, str>>,
    decisions: Vec<Cow<'a, str>>,
    /// (command, tail) of every failed result.
    errors: Vec<(Cow<'a, str>, &'a str)>,
}

/// The trimmed text of a user-authored message ([`crate::ledger::is_user_authored`]), borrowed
/// when the message has one text part.
fn user_text(m: &Message) -> Option<Cow<'_, str>> {
    if m.role != Role::User || m.meta.external_summary || m.meta.synthetic || m.is_reminder() {
        return None;
    }
    let mut texts = m.parts.iter().filter_map(Part::as_text);
    let first = texts.next()?;
    let text = match texts.next() {
        None => Cow::Borrowed(first.trim()),
        Some(_) => Cow::Owned(m.text_content().trim().to_string()),
    };
    let has_results = m.parts.iter().any(|p| matches!(p, Part::ToolResult { .. }));
    (!has_results && !text.is_empty()).then_some(text)
}

impl<'a> Scan<'a> {
    /// Records the touches of `span`, in order.
    pub(crate) fn of(span: impl IntoIterator<Item = &'a Message>) -> Self {
        let mut scan = Scan::default();
        // Every call seen, in order; a failed result is described by the latest call of its id.
        let mut calls: Vec<(&'a str, &'a str, &'a serde_json::Value)> = Vec::new();
        let mut paths: Vec<(Access, Cow<'a, str>)> = Vec::new();
        // Scratch space for the lower-cased text of each user message.
        let mut lower = Vec::new();
        for m in span {
            for part in &m.parts {
                match part {
                    Part::ToolCall {
                        call_id,
                        name,
                        arguments,
                    } => {
                        call_paths(name, arguments, &mut paths);
                        for (access, path) in paths.drain(..) {
                            match access {
                                Access::Read => scan.read.push(path),
                                Access::Modify => scan.modified.push(path),
                                Access::Create => scan.created.push(path),
                            }
                        }
                        calls.push((call_id.as_str(), name.as_str(), arguments));
                    }
                    Part::ToolResult {
                        call_id,
                        content,
                        is_error,
                    } if failed(content, *is_error) => {
                        let command = calls
                            .iter()
                            .rev()
                            .find(|(id, _, _)| *id == call_id.as_str())
                            .map(|(_, name, arguments)| Cow::Owned(describe_call(name, arguments)))
                            .unwrap_or(Cow::Borrowed(call_id.as_str()));
                        let tail = tail_chars(content.trim_end(), ERROR_TAIL_CHARS).trim();
                        scan.errors.push((command, tail));
                    }
                    _ => {}
                }
            }
            if let Some(text) = user_text(m) {
                let decisions = &mut scan.decisions;
                match &text {
                    Cow::Borrowed(t) => {
                        for_each_decision(t, &mut lower, |d| decisions.push(Cow::Borrowed(d)))
                    }
                    Cow::Owned(t) => {
                        for_each_decision(t, &mut lower, |d| decisions.push(Cow::Owned(d.to_string())))
                    }
                }
                scan.user_messages.push(text);
            }
        }
        scan
    }

    /// The resolved lists: each distinct item at its latest touch, the newest `max` of each.
    pub(crate) fn lists(&self) -> LedgerLists<'_> {
        let mut seen = HashSet::default();
        let mut errors = Vec::new();
        for (command, tail) in self.errors.iter().rev() {
            if errors.len() == MAX_ERRORS {
                break;
            }
            if seen.insert(command.as_ref()) {
                errors.push((command.as_ref(), *tail));
            }
        }
        errors.reverse();
        LedgerLists {
            read: latest(&self.read, MAX_PATHS),
            modified: latest(&self.modified, MAX_PATHS),
            created: latest(&self.created, MAX_PATHS),
            user_messages: latest(&self.user_messages, MAX_USER_MESSAGES),
            errors,
            decisions: latest(&self.decisions, MAX_DECISIONS),
        }
    }
}

/// The distinct items of `touches` ordered by their latest touch, the newest `max`.
fn latest<'s>(touches: &'s [Cow<'_, str>], max: usize) -> Vec<&'s str> {
    let mut seen: HashSet<&str> =
        HashSet::with_capacity_and_hasher(touches.len().min(max), Default::default());
    let mut out = Vec::with_capacity(touches.len().min(max));
    for item in touches.iter().rev() {
        if out.len() == max {
            break;
        }
        if seen.insert(item.as_ref()) {
            out.push(item.as_ref());
        }
    }
    out.reverse();
    out
}

/// `older` (as stored) with the distinct `newer` items touched in, oldest first, keeping `max`:
/// [`Ledger::merge`](crate::ledger::Ledger::merge) of one list.
fn merge_list<'s>(older: &'s [String], newer: Vec<&'s str>, max: usize) -> Vec<&'s str> {
    if newer.is_empty() {
        return older.iter().map(String::as_str).collect();
    }
    let mut distinct = HashSet::with_capacity_and_hasher(older.len(), Default::default());
    if older.iter().all(|x| distinct.insert(x.as_str())) {
        // Older items are distinct: every touch moves its item to the end, so the result is the
        // older items not touched, then the touched ones, the newest `max` of them.
        let touched: HashSet<&str> = newer.iter().copied().collect();
        let mut out: Vec<&str> = older
            .iter()
            .map(String::as_str)
            .filter(|x| !touched.contains(x))
            .chain(newer)
            .collect();
        if out.len() > max {
            out.drain(..out.len() - max);
        }
        return out;
    }
    // A stored list with repeats: touch item by item, as the merge does.
    let mut out: Vec<&str> = older.iter().map(String::as_str).collect();
    for item in newer {
        out.retain(|x| *x != item);
        out.push(item);
        if out.len() > max {
            out.drain(..out.len() - max);
        }
    }
    out
}

/// `older` with `newer` merged in: the lists of `older.merge(newer)`.
pub(crate) fn merge_lists<'s>(older: &'s Ledger, newer: LedgerLists<'s>) -> LedgerLists<'s> {
    let commands: HashSet<&str> = newer.errors.iter().map(|(c, _)| *c).collect();
    let mut errors: Vec<(&str, &str)> = older
        .errors
        .iter()
        .filter(|e| !commands.contains(e.command.as_str()))
        .map(|e| (e.command.as_str(), e.tail.as_str()))
        .chain(newer.errors)
        .collect();
    if errors.len() > MAX_ERRORS {
        errors.drain(..errors.len() - MAX_ERRORS);
    }
    LedgerLists {
        read: merge_list(&older.read, newer.read, MAX_PATHS),
        modified: merge_list(&older.modified, newer.modified, MAX_PATHS),
        created: merge_list(&older.created, newer.created, MAX_PATHS),
        user_messages: merge_list(&older.user_messages, newer.user_messages, MAX_USER_MESSAGES),
        errors,
        decisions: merge_list(&older.decisions, newer.decisions, MAX_DECISIONS),
    }
}
