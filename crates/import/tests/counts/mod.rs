//! Independent, minimal counts of the raw shared transcripts (no importer code is used).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;

use regex::Regex;
use serde_json::Value;

/// Counts of one transcript.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub user: u64,
    pub reminders: u64,
    pub assistant: u64,
    pub calls: u64,
    pub results: u64,
    pub synthesized_results: u64,
    pub dropped_results: u64,
    pub markers: u64,
    pub external_summaries: u64,
}

/// Tracks calls of the last assistant message until the next non-tool message.
#[derive(Default)]
struct Pairing {
    pending: Vec<String>,
}

impl Pairing {
    fn open(&mut self, c: &mut Counts, calls: Vec<String>) {
        self.close(c);
        c.calls += calls.len() as u64;
        self.pending = calls;
    }
    fn add_calls(&mut self, c: &mut Counts, calls: Vec<String>) {
        c.calls += calls.len() as u64;
        self.pending.extend(calls);
    }
    fn result(&mut self, c: &mut Counts, id: &str) {
        if let Some(i) = self.pending.iter().position(|p| p == id) {
            self.pending.remove(i);
            c.results += 1;
        } else {
            c.dropped_results += 1;
        }
    }
    fn close(&mut self, c: &mut Counts) {
        c.synthesized_results += self.pending.len() as u64;
        self.pending.clear();
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        for v in serde_json::Deserializer::from_str(line).into_iter::<Value>() {
            out.push(v.unwrap());
        }
    }
    out
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn is_reminder(text: &str) -> bool {
    text.trim_start().starts_with("<system-reminder>")
}

pub fn count_claude(path: &Path) -> Counts {
    let mut c = Counts::default();
    let mut p = Pairing::default();
    let mut open_id: Option<String> = None;
    let mut after_boundary = false;
    for r in jsonl(path) {
        match s(&r, "type") {
            "assistant" => {
                let m = &r["message"];
                let id = m.get("id").and_then(Value::as_str).map(str::to_string);
                let calls: Vec<String> = arr(m, "content")
                    .iter()
                    .filter(|b| s(b, "type") == "tool_use")
                    .map(|b| s(b, "id").to_string())
                    .collect();
                if id.is_some() && id == open_id {
                    p.add_calls(&mut c, calls);
                } else {
                    c.assistant += 1;
                    p.open(&mut c, calls);
                    open_id = id;
                }
            }
            "user" => {
                let content = &r["message"]["content"];
                let mut groups: Vec<bool> = Vec::new(); // one per user message: is it a reminder?
                if let Some(text) = content.as_str() {
                    groups.push(is_reminder(text));
                } else {
                    let mut plain_run = false;
                    for b in content.as_array().unwrap() {
                        match s(b, "type") {
                            "tool_result" => p.result(&mut c, s(b, "tool_use_id")),
                            "text" if is_reminder(s(b, "text")) => {
                                groups.push(true);
                                plain_run = false;
                            }
                            "text" | "image" if !plain_run => {
                                groups.push(false);
                                plain_run = true;
                            }
                            _ => {}
                        }
                    }
                }
                for reminder in groups {
                    p.close(&mut c);
                    open_id = None;
                    c.user += 1;
                    if after_boundary || r.get("isCompactSummary") == Some(&Value::Bool(true)) {
                        c.external_summaries += 1;
                        after_boundary = false;
                    } else if reminder {
                        c.reminders += 1;
                    }
                }
            }
            "system" if s(&r, "subtype") == "compact_boundary" => {
                p.close(&mut c);
                open_id = None;
                c.markers += 1;
                after_boundary = true;
            }
            _ => {}
        }
    }
    p.close(&mut c);
    c
}

pub fn count_codex(path: &Path) -> Counts {
    let mut c = Counts::default();
    let mut p = Pairing::default();
    let mut in_run = false;
    for r in jsonl(path) {
        if s(&r, "type") != "response_item" {
            continue;
        }
        let item = &r["payload"];
        let kind = s(item, "type");
        let assistant_side = matches!(
            kind,
            "reasoning" | "function_call" | "custom_tool_call" | "local_shell_call"
        ) || (kind == "message" && s(item, "role") == "assistant");
        if assistant_side {
            let calls = if kind.ends_with("call") {
                vec![s(item, "call_id").to_string()]
            } else {
                vec![]
            };
            if in_run {
                p.add_calls(&mut c, calls);
            } else {
                c.assistant += 1;
                p.open(&mut c, calls);
                in_run = true;
            }
        } else if kind.ends_with("_output") {
            in_run = false;
            p.result(&mut c, s(item, "call_id"));
        } else if kind == "message" {
            in_run = false;
            p.close(&mut c);
            if s(item, "role") == "user" {
                c.user += 1;
            }
        }
    }
    p.close(&mut c);
    c
}

pub fn count_pi(path: &Path) -> Counts {
    let mut c = Counts::default();
    let mut p = Pairing::default();
    for r in jsonl(path) {
        match s(&r, "type") {
            "message" => {
                let m = &r["message"];
                match s(m, "role") {
                    "user" => {
                        p.close(&mut c);
                        c.user += 1;
                    }
                    "assistant" if !arr(m, "content").is_empty() => {
                        c.assistant += 1;
                        let calls = arr(m, "content")
                            .iter()
                            .filter(|b| s(b, "type") == "toolCall")
                            .map(|b| s(b, "id").to_string())
                            .collect();
                        p.open(&mut c, calls);
                    }
                    "toolResult" => p.result(&mut c, s(m, "toolCallId")),
                    "bashExecution" => {
                        c.assistant += 1;
                        p.open(&mut c, vec!["bash".into()]);
                        p.result(&mut c, "bash");
                    }
                    _ => {}
                }
            }
            "compaction" => {
                p.close(&mut c);
                c.markers += 1;
            }
            "model_change" => p.close(&mut c),
            _ => {}
        }
    }
    p.close(&mut c);
    c
}

pub fn count_swe_agent(path: &Path) -> Counts {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut c = Counts::default();
    let mut p = Pairing::default();
    let mut waiting_observation = false;
    for m in arr(&doc, "history") {
        match s(m, "role") {
            "assistant" => {
                let calls: Vec<String> = arr(m, "tool_calls")
                    .iter()
                    .map(|t| s(t, "id").to_string())
                    .collect();
                c.assistant += 1;
                waiting_observation = calls.is_empty() && !s(m, "action").trim().is_empty();
                if waiting_observation {
                    p.open(&mut c, vec!["text-action".into()]);
                } else {
                    p.open(&mut c, calls);
                }
            }
            "tool" => {
                waiting_observation = false;
                for id in arr(m, "tool_call_ids") {
                    p.result(&mut c, id.as_str().unwrap());
                }
            }
            "user" if waiting_observation => {
                waiting_observation = false;
                p.result(&mut c, "text-action");
            }
            "user" => {
                p.close(&mut c);
                c.user += 1;
            }
            _ => {
                waiting_observation = false;
                p.close(&mut c);
            }
        }
    }
    p.close(&mut c);
    c
}

pub fn count_mini(path: &Path) -> Counts {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let block = Regex::new(r"(?s)```bash\s*\n(.*?)\n```").unwrap();
    let mut c = Counts::default();
    let mut p = Pairing::default();
    let mut waiting = false;
    for m in arr(&doc, "messages") {
        match s(m, "role") {
            "assistant" => {
                c.assistant += 1;
                waiting = block.find_iter(s(m, "content")).count() == 1;
                p.open(&mut c, if waiting { vec!["action".into()] } else { vec![] });
            }
            "user" if waiting => {
                waiting = false;
                p.result(&mut c, "action");
            }
            "user" => {
                p.close(&mut c);
                c.user += 1;
            }
            _ => {
                waiting = false;
                p.close(&mut c);
            }
        }
    }
    p.close(&mut c);
    c
}

pub fn count_openhands(path: &Path) -> Counts {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut c = Counts::default();
    let mut p = Pairing::default();
    let mut open_response: Option<String> = None;
    let mut call_of_action: HashMap<i64, String> = HashMap::new();
    for e in doc.as_array().unwrap() {
        let source = s(e, "source");
        if let Some(action) = e.get("action").and_then(Value::as_str) {
            let metadata = e.get("tool_call_metadata");
            if action == "message" && source == "user" {
                p.close(&mut c);
                open_response = None;
                c.user += 1;
            } else if source == "agent" && metadata.is_some() {
                let m = metadata.unwrap();
                let call = s(m, "tool_call_id").to_string();
                call_of_action.insert(e["id"].as_i64().unwrap(), call.clone());
                let response = m["model_response"]
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if response.is_some() && response == open_response {
                    p.add_calls(&mut c, vec![call]);
                } else {
                    c.assistant += 1;
                    p.open(&mut c, vec![call]);
                    open_response = response;
                }
            } else if source == "agent" && matches!(action, "message" | "finish") {
                p.close(&mut c);
                open_response = None;
                c.assistant += 1;
            }
        } else if let Some(obs) = e.get("observation").and_then(Value::as_str) {
            let call = e
                .get("cause")
                .and_then(Value::as_i64)
                .and_then(|id| call_of_action.remove(&id));
            if let (Some(call), false) = (call, obs == "null") {
                p.result(&mut c, &call);
            }
        }
    }
    p.close(&mut c);
    c
}

pub fn count_aider(path: &Path) -> Counts {
    #[derive(PartialEq)]
    enum B {
        None,
        User,
        Assistant(bool),
    }
    let text = std::fs::read_to_string(path).unwrap();
    let mut c = Counts::default();
    let mut block = B::None;
    let end = |block: &mut B, c: &mut Counts| {
        match block {
            B::User => c.user += 1,
            B::Assistant(true) => c.assistant += 1,
            _ => {}
        }
        *block = B::None;
    };
    for line in text.lines() {
        if line.starts_with("# aider chat started at") || line.starts_with("> ") || line == ">" {
            end(&mut block, &mut c);
        } else if line.starts_with("#### ") || line == "####" {
            if block != B::User {
                end(&mut block, &mut c);
                block = B::User;
            }
        } else if line.trim().is_empty() {
            if block == B::User {
                end(&mut block, &mut c);
            }
        } else {
            match block {
                B::Assistant(_) => block = B::Assistant(true),
                _ => {
                    end(&mut block, &mut c);
                    block = B::Assistant(true);
                }
            }
        }
    }
    end(&mut block, &mut c);
    c
}
