//! The token cost of a ledger's rendering, measured without writing it.
//!
//! The planner reserves room for the ledger a compaction would carry: the tokens
//! [`Ledger::render_with_cost`](crate::ledger::Ledger::render_with_cost) charges for it. Only that
//! number is needed, so [`LedgerLists::rendered_cost`] follows the same budget arithmetic line by
//! line over borrowed lists and measures each line from its length when the counter allows
//! ([`TokenCounter::count_len`]), instead of formatting every line and the sections around them.

use pith_core::TokenCounter;

use crate::ledger::{LEDGER_CLOSE, LEDGER_OPEN};

/// A ledger's lists, borrowed, oldest first (the fields of [`Ledger`](crate::ledger::Ledger)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LedgerLists<'a> {
    /// Paths read.
    pub(crate) read: Vec<&'a str>,
    /// Paths modified.
    pub(crate) modified: Vec<&'a str>,
    /// Paths created.
    pub(crate) created: Vec<&'a str>,
    /// User messages verbatim.
    pub(crate) user_messages: Vec<&'a str>,
    /// The last error of each failing command: (command, tail).
    pub(crate) errors: Vec<(&'a str, &'a str)>,
    /// Decisions the user stated.
    pub(crate) decisions: Vec<&'a str>,
}

/// Measures lines as the rendering counts them: each on its own.
struct Meter<'c> {
    counter: &'c dyn TokenCounter,
    /// Whether the counter depends on the length only (lines need not be written).
    by_len: bool,
    /// Tokens left of the whole budget.
    left: u64,
    /// Whether any section got a line.
    any: bool,
}

impl Meter<'_> {
    /// Tokens of `- {item}\n`.
    fn item(&self, item: &str) -> u64 {
        if self.by_len {
            if let Some(t) = self.counter.count_len(item.len() + 3) {
                return t;
            }
        }
        self.counter.count_text(&format!("- {item}\n"))
    }

    /// Tokens of `- {command}\n  {tail}\n`, every line end of the tail indented by two spaces.
    fn error(&self, command: &str, tail: &str) -> u64 {
        if self.by_len {
            let breaks = memchr::memchr_iter(b'\n', tail.as_bytes()).count();
            if let Some(t) = self
                .counter
                .count_len(2 + command.len() + 3 + tail.len() + 2 * breaks + 1)
            {
                return t;
            }
        }
        self.item(&format!("{command}\n  {}", tail.replace('\n', "\n  ")))
    }

    /// One section of items (their line costs, in rendering order) under `cap`: the rendering's
    /// `section` closure, charging `left` what it writes.
    fn section(&mut self, title: &str, costs: impl IntoIterator<Item = u64>, cap: u64) {
        let mut costs = costs.into_iter().peekable();
        let mut cap = cap.min(self.left);
        let head = self.counter.count_text(&format!("{title}:\n"));
        if costs.peek().is_none() || head >= cap {
            return;
        }
        cap -= head;
        let mut used = head;
        let mut lines = false;
        for t in costs {
            if t > cap {
                continue;
            }
            cap -= t;
            used += t;
            lines = true;
        }
        if lines {
            self.left = self.left.saturating_sub(used);
            self.any = true;
        }
    }
}

impl LedgerLists<'_> {
    /// Whether the lists hold nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.read.is_empty()
            && self.modified.is_empty()
            && self.created.is_empty()
            && self.user_messages.is_empty()
            && self.errors.is_empty()
            && self.decisions.is_empty()
    }

    /// The tokens [`Ledger::render_with_cost`](crate::ledger::Ledger::render_with_cost) charges
    /// for these lists (the same arithmetic, without the text).
    pub(crate) fn rendered_cost(
        &self,
        summary: &str,
        budget: u64,
        user_budget: u64,
        counter: &dyn TokenCounter,
    ) -> u64 {
        let frame = format!("\n\n{LEDGER_OPEN}\n{LEDGER_CLOSE}");
        let frame_cost = counter.count_text(&frame) + 2;
        let start = budget.saturating_sub(frame_cost);
        let mut meter = Meter {
            counter,
            by_len: counter.count_len(0).is_some(),
            left: start,
            any: false,
        };
        let missing = |list: &[&str], meter: &Meter<'_>| -> Vec<u64> {
            list.iter()
                .rev()
                .filter(|p| !summary.contains(**p))
                .map(|p| meter.item(p))
                .collect()
        };
        let costs = missing(&self.modified, &meter);
        meter.section("Files modified", costs, u64::MAX);
        let costs = missing(&self.created, &meter);
        meter.section("Files created", costs, u64::MAX);
        let costs = missing(&self.read, &meter);
        meter.section("Files read", costs, u64::MAX);
        // User messages: newest first within the budget, charged in their order.
        let user_title = "User messages (verbatim)";
        let mut user_left = user_budget
            .min(meter.left)
            .saturating_sub(counter.count_text(&format!("{user_title}:\n")));
        let mut users = Vec::new();
        for u in self.user_messages.iter().rev() {
            let t = meter.item(u);
            if t > user_left {
                continue;
            }
            if !summary.contains(*u) {
                user_left -= t;
                users.push(t);
            }
        }
        users.reverse();
        meter.section(user_title, users, user_budget);
        let errors: Vec<u64> = self
            .errors
            .iter()
            .rev()
            .map(|(command, tail)| meter.error(command, tail))
            .collect();
        meter.section("Last error of failing commands", errors, u64::MAX);
        let costs = missing(&self.decisions, &meter);
        meter.section("Decisions the user stated", costs, u64::MAX);
        if !meter.any {
            return 0;
        }
        start - meter.left + frame_cost
    }
}
