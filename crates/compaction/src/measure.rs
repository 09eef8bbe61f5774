//! Token accounting of one planning pass, done once.
//!
//! A planning pass asks the size of the same messages many times: the overflow decision (the
//! local estimate and the provider-reported size), the calibration, the cut, and the size of every
//! layout it tries. [`PassTokens`] counts every message of the view once with
//! [`message_tokens`] — the measure all of those questions use — and [`LayoutSizes`] answers the
//! size of any layout from prefix sums in O(1), so a pass costs one count of the view however
//! many cuts it tries. The answers are the same numbers the per-question functions
//! ([`overflow::context_tokens`](crate::overflow::context_tokens),
//! [`prune::tokens_after`](crate::prune::tokens_after), ...) compute from scratch.

use pith_core::{Message, StoredView, TokenCounter, ToolDeclaration};

use crate::config::ProjectionStyle;
use crate::overflow::{self, message_tokens};
use crate::projection::{recent_reminders, MAX_RETAINED_REMINDERS};

/// Every token count a planning pass needs of one view, counted once.
#[derive(Debug, Clone)]
pub struct PassTokens {
    /// Tokens of the tool declarations.
    tools: u64,
    /// Tools, instructions, recent reminders and the projected summary: the request outside the tail.
    fixed: u64,
    /// Tokens of the view's instructions.
    instructions: u64,
    /// Tokens of each of the view's reminders, in order.
    reminders: Vec<u64>,
    /// `entry_prefix[i]`: tokens of the messages among `view.tail[..i]`.
    entry_prefix: Vec<u64>,
    /// Tokens of each tail message, in order (`view.tail_messages()`).
    messages: Vec<u64>,
    /// The last reply after the latest compaction that reported usage.
    last_measured: Option<(usize, u64, u64)>,
}

impl PassTokens {
    /// Counts `view` (with `tools`, its summary projected in `style`) once.
    pub fn new(
        view: &StoredView,
        style: ProjectionStyle,
        tools: &[ToolDeclaration],
        counter: &dyn TokenCounter,
    ) -> Self {
        let tools_tokens = counter.count_tools(tools);
        let instructions: u64 = view.instructions.iter().map(|m| message_tokens(counter, m)).sum();
        let reminders: Vec<u64> = view
            .reminders
            .iter()
            .map(|m| message_tokens(counter, m))
            .collect();
        let recent: u64 = recent_reminders(&view.reminders)
            .iter()
            .map(|m| message_tokens(counter, m))
            .sum();
        let fixed = tools_tokens + instructions + recent + overflow::summary_tokens(view, style, counter);
        let mut entry_prefix = Vec::with_capacity(view.tail.len() + 1);
        let mut messages = Vec::with_capacity(view.tail.len());
        let mut sum = 0u64;
        entry_prefix.push(0);
        for entry in &view.tail {
            if let Some(m) = entry.as_message() {
                let t = message_tokens(counter, m);
                messages.push(t);
                sum += t;
            }
            entry_prefix.push(sum);
        }
        Self {
            tools: tools_tokens,
            fixed,
            instructions,
            reminders,
            entry_prefix,
            messages,
            last_measured: overflow::last_measured_reply(view),
        }
    }

    /// Tokens of the tool declarations.
    pub fn tools(&self) -> u64 {
        self.tools
    }

    /// Tokens of the request outside the tail: tools, instructions, recent reminders, summary.
    pub fn fixed(&self) -> u64 {
        self.fixed
    }

    /// Tokens of each tail message, in the order of `view.tail_messages()`.
    pub fn message_tokens(&self) -> &[u64] {
        &self.messages
    }

    /// Tokens of the messages among the tail entries `from..to` (bounds clamped to the tail).
    pub fn entries(&self, from: usize, to: usize) -> u64 {
        let last = self.entry_prefix.len() - 1;
        let (from, to) = (from.min(last), to.min(last));
        self.entry_prefix[to].saturating_sub(self.entry_prefix[from])
    }

    /// The local estimate of the whole request: [`overflow::estimate_view`].
    pub fn estimate(&self) -> u64 {
        self.fixed + self.entries(0, usize::MAX)
    }

    /// The last reply after the latest compaction that reported usage:
    /// [`overflow::last_measured_reply`].
    pub fn last_measured(&self) -> Option<(usize, u64, u64)> {
        self.last_measured
    }

    /// The context size to decide on: [`overflow::context_tokens`].
    pub fn context_tokens(&self) -> u64 {
        let reported = self
            .last_measured
            .map(|(pos, measured, _)| measured + self.entries(pos + 1, usize::MAX));
        self.estimate().max(reported.unwrap_or(0))
    }

    /// How many times more tokens the provider counted than the local estimate:
    /// [`plan::calibration`](crate::plan::calibration).
    pub fn calibration(&self, requested: Option<u64>) -> f64 {
        let estimate = self.estimate().max(1);
        if let Some(requested) = requested {
            return (requested as f64 / estimate as f64).max(1.0);
        }
        let Some((pos, _, prompt)) = self.last_measured else {
            return 1.0;
        };
        (prompt as f64 / (self.fixed + self.entries(0, pos)).max(1) as f64).max(1.0)
    }

    /// Tokens of each of `msgs`: the counted ones when `msgs` are this view's tail messages (the
    /// usual case), else a fresh count.
    pub fn tokens_of<'m>(
        &'m self,
        view: &StoredView,
        msgs: &[&Message],
        counter: &dyn TokenCounter,
    ) -> std::borrow::Cow<'m, [u64]> {
        let same = msgs.len() == self.messages.len()
            && view.tail_messages().zip(msgs).all(|(a, b)| std::ptr::eq(a, *b));
        if same {
            std::borrow::Cow::Borrowed(&self.messages)
        } else {
            std::borrow::Cow::Owned(msgs.iter().map(|m| message_tokens(counter, m)).collect())
        }
    }
}

/// The size of every layout of one view in O(1): [`prune::tokens_after`](crate::prune::tokens_after)
/// of [`prune::layout`](crate::prune::layout) without building the layout.
#[derive(Debug, Clone)]
pub struct LayoutSizes {
    /// Tools plus the view's own instructions.
    base: u64,
    /// `all[k]`: tokens of `msgs[..k]`.
    all: Vec<u64>,
    /// `instructions[k]`: tokens of the instruction messages among `msgs[..k]`.
    instructions: Vec<u64>,
    /// Prefix sums over the reminder sequence: the view's reminders, then the reminder messages
    /// of `msgs` in order.
    reminder_prefix: Vec<u64>,
    /// `reminders_before[k]`: reminders (the view's included) before the cut `k`.
    reminders_before: Vec<usize>,
}

impl LayoutSizes {
    /// Prepares the sizes of the layouts of `msgs` (the view's tail messages, `tokens` each) under
    /// the view counted in `pass`.
    pub fn new(pass: &PassTokens, msgs: &[&Message], tokens: &[u64]) -> Self {
        let n = msgs.len();
        let mut all = Vec::with_capacity(n + 1);
        let mut instructions = Vec::with_capacity(n + 1);
        let mut reminders_before = Vec::with_capacity(n + 1);
        let mut reminder_prefix = Vec::with_capacity(pass.reminders.len() + 1);
        reminder_prefix.push(0);
        for t in &pass.reminders {
            let last = reminder_prefix.last().copied().unwrap_or(0);
            reminder_prefix.push(last + t);
        }
        let (mut a, mut i) = (0u64, 0u64);
        all.push(0);
        instructions.push(0);
        reminders_before.push(pass.reminders.len());
        for (m, t) in msgs.iter().zip(tokens) {
            a += t;
            if m.role.is_instruction() {
                i += t;
            } else if m.is_reminder() {
                let last = reminder_prefix.last().copied().unwrap_or(0);
                reminder_prefix.push(last + t);
            }
            all.push(a);
            instructions.push(i);
            reminders_before.push(reminder_prefix.len() - 1);
        }
        Self {
            base: pass.tools + pass.instructions,
            all,
            instructions,
            reminder_prefix,
            reminders_before,
        }
    }

    /// Context size of the view cut before `cut` keeping at most `reminder_limit` reminders, with
    /// a projected summary of `summary_tokens`.
    pub fn tokens_after(&self, cut: usize, reminder_limit: usize, summary_tokens: u64) -> u64 {
        let n = self.all.len() - 1;
        let cut = cut.min(n);
        let before = self.reminders_before[cut];
        let kept_reminders = before.min(reminder_limit.min(MAX_RETAINED_REMINDERS));
        let reminders = self.reminder_prefix[before] - self.reminder_prefix[before - kept_reminders];
        let kept = self.all[n] - self.all[cut];
        self.base + self.instructions[cut] + reminders + kept + summary_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::{layout, tokens_after};
    use pith_core::{EstimateCounter, SessionRecord, Usage};

    fn view() -> StoredView {
        let mut log: Vec<pith_core::Entry> = vec![Message::system("rules of the house").into()];
        for i in 0..14 {
            log.push(
                Message::user(format!(
                    "<system-reminder>r{i} {}</system-reminder>",
                    "z".repeat(i)
                ))
                .into(),
            );
            log.push(Message::user(format!("q{i} {}", "x".repeat(i * 37))).into());
            if i == 5 {
                log.push(
                    Message::new(
                        pith_core::Role::Developer,
                        vec![pith_core::Part::Text {
                            text: "more rules".into(),
                        }],
                    )
                    .into(),
                );
            }
            let mut reply = Message::assistant(format!("a{i}"));
            reply.usage = (i == 9).then(|| Usage::from_openai(90_000, 10, 0));
            log.push(reply.into());
            log.push(Message::tool_result(format!("c{i}"), "y".repeat(i * 700), false).into());
        }
        StoredView::from_log(SessionRecord::new("m", vec![]), &log).unwrap()
    }

    #[test]
    fn every_answer_equals_the_count_from_scratch() {
        let view = view();
        let c = EstimateCounter;
        let style = ProjectionStyle::Reminder;
        let pass = PassTokens::new(&view, style, &[], &c);
        assert_eq!(pass.estimate(), overflow::estimate_view(&view, style, &[], &c));
        assert_eq!(
            pass.context_tokens(),
            overflow::context_tokens(&view, style, &[], &c)
        );
        let msgs: Vec<&Message> = view.tail_messages().collect();
        let tokens = pass.tokens_of(&view, &msgs, &c);
        assert!(matches!(tokens, std::borrow::Cow::Borrowed(_)));
        let sizes = LayoutSizes::new(&pass, &msgs, &tokens);
        for cut in 0..=msgs.len() {
            for limit in 0..=MAX_RETAINED_REMINDERS + 1 {
                let l = layout(&view, &msgs, cut, limit);
                assert_eq!(
                    sizes.tokens_after(cut, limit, 77),
                    tokens_after(&l, 77, &[], &c),
                    "cut {cut} limit {limit}"
                );
            }
        }
        let config = crate::CompactionConfig::default();
        for requested in [None, Some(50_000)] {
            let input = crate::plan::PlanInput {
                view: &view,
                msgs: &msgs,
                tools: &[],
                counter: &c,
                config: &config,
                threshold: 10_000,
                count_fired: false,
                requested,
            };
            assert_eq!(pass.calibration(requested), crate::plan::calibration(&input));
        }
        assert!(pass.calibration(None) > 1.0, "the measured reply calibrates");
        let fewer = &msgs[1..];
        assert!(matches!(
            pass.tokens_of(&view, fewer, &c),
            std::borrow::Cow::Owned(_)
        ));
    }
}
