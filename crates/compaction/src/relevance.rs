//! Opt-in relevance selection (seed 000): a grader picks which groups of the span reach the
//! summarizer.
//!
//! The span is split into groups: an assistant message with its tool calls and every result that
//! answers them is one group, kept or dropped whole; every other message is a group of its own.
//! Groups holding policy — the user's messages, where constraints live — and the latest group are
//! always included, whatever the grader says. Off by default: then no grader request is made.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use pith_core::{Message, Role};
use pith_router::{ChatRequest, ModelRouter, ProviderError};
use pith_store::UsagePurpose;

use crate::prompt::serialize_messages;
use crate::summary::CallLog;

/// One group of the span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Indices into the span, in order.
    pub members: Vec<usize>,
    /// Whether the group holds policy and is always included.
    pub policy: bool,
}

/// Splits a span into groups (a tool call and its outputs form one group).
pub fn groups(span: &[Message]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    let mut group_of_call: HashMap<&str, usize> = HashMap::new();
    for (i, m) in span.iter().enumerate() {
        let owner = m
            .tool_results()
            .find_map(|(id, _, _)| group_of_call.get(id).copied());
        match owner {
            Some(g) if m.role == Role::Tool => out[g].members.push(i),
            _ => {
                let g = out.len();
                out.push(Group {
                    members: vec![i],
                    policy: m.role == Role::User && !m.is_reminder() || m.role.is_instruction(),
                });
                for (id, _, _) in m.tool_calls() {
                    group_of_call.insert(id, g);
                }
            }
        }
    }
    out
}

/// What a grader is asked.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GradeRequest {
    /// Each group serialised, in order.
    pub groups: Vec<String>,
    /// Manual instructions of the compaction, if any.
    pub instructions: Option<String>,
}

/// Scores groups of a span for relevance.
#[async_trait]
pub trait Grader: Send + Sync {
    /// Returns, for each group, whether it is relevant to the rest of the session.
    async fn grade(&self, request: GradeRequest, calls: &CallLog) -> Result<Vec<bool>, ProviderError>;
}

/// A grader that asks a model (through the router) for the numbers of the relevant groups.
#[derive(Debug, Clone)]
pub struct ModelGrader {
    router: Arc<ModelRouter>,
    model: String,
}

impl ModelGrader {
    /// A grader calling `model` through `router`.
    pub fn new(router: Arc<ModelRouter>, model: impl Into<String>) -> Self {
        Self {
            router,
            model: model.into(),
        }
    }
}

/// Parses the numbers (1-based) in a grader reply into a keep mask of `n` groups.
pub fn parse_selection(reply: &str, n: usize) -> Vec<bool> {
    let mut keep = vec![false; n];
    for token in reply.split(|c: char| !c.is_ascii_digit()) {
        if let Ok(k) = token.parse::<usize>() {
            if (1..=n).contains(&k) {
                keep[k - 1] = true;
            }
        }
    }
    keep
}

#[async_trait]
impl Grader for ModelGrader {
    async fn grade(&self, request: GradeRequest, calls: &CallLog) -> Result<Vec<bool>, ProviderError> {
        let mut prompt = String::from(
            "Below are numbered parts of a coding session that is about to be summarised. Reply with \
             the numbers of the parts whose facts still matter for continuing the work, separated by \
             commas, and nothing else.\n\n",
        );
        for (i, g) in request.groups.iter().enumerate() {
            prompt.push_str(&format!("<part {}>\n{g}</part>\n", i + 1));
        }
        if let Some(extra) = &request.instructions {
            prompt.push_str(&format!("\nThe user asked the summary to: {extra}\n"));
        }
        let req = ChatRequest::new(self.model.clone(), vec![Message::user(prompt)]).with_max_tokens(512);
        let reply = self.router.chat(req, None).await;
        let usage = reply.as_ref().map(|r| r.usage).unwrap_or_default();
        calls.record(&self.model, UsagePurpose::Grader, usage);
        Ok(parse_selection(
            &reply?.message.text_content(),
            request.groups.len(),
        ))
    }
}

/// Keeps the groups the grader chose plus every policy group and the latest group; returns the
/// messages that reach the summarizer, in order.
pub fn apply(span: &[Message], groups: &[Group], keep: &[bool]) -> Vec<Message> {
    let last = groups.len().saturating_sub(1);
    groups
        .iter()
        .enumerate()
        .filter(|(i, g)| g.policy || *i == last || keep.get(*i).copied().unwrap_or(true))
        .flat_map(|(_, g)| g.members.iter().map(|&i| span[i].clone()))
        .collect()
}

/// Serialises each group for the grader.
pub fn render_groups(span: &[Message], groups: &[Group]) -> Vec<String> {
    groups
        .iter()
        .map(|g| {
            let members: Vec<Message> = g.members.iter().map(|&i| span[i].clone()).collect();
            serialize_messages(&members)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pith_core::Part;
    use serde_json::json;

    #[test]
    fn a_call_and_its_results_are_one_group_and_policy_is_always_kept() {
        let mut call = Message::assistant("");
        call.parts = vec![
            Part::ToolCall {
                call_id: "a".into(),
                name: "ls".into(),
                arguments: json!({}),
            },
            Part::ToolCall {
                call_id: "b".into(),
                name: "ls".into(),
                arguments: json!({}),
            },
        ];
        let span = vec![
            Message::user("never use unsafe"),
            call,
            Message::tool_result("a", "x", false),
            Message::tool_result("b", "y", false),
            Message::assistant("noise"),
            Message::assistant("latest"),
        ];
        let g = groups(&span);
        assert_eq!(g.len(), 4);
        assert_eq!(g[1].members, vec![1, 2, 3]);
        assert!(g[0].policy);
        let kept = apply(&span, &g, &[false, false, false, false]);
        let texts: Vec<String> = kept.iter().map(Message::text_content).collect();
        assert_eq!(texts, vec!["never use unsafe", "latest"]);
        assert_eq!(parse_selection("2, 3 and 9", 4), vec![false, true, true, false]);
    }
}
