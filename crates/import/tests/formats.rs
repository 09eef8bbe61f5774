//! How each format maps to pith entries, on small hand-written inputs and on facts of the
//! shared transcripts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pith_core::{Entry, FinishReason, MarkerKind, Message, Part, Role};
use pith_import::{import_reader, Format, ImportedSession, UNANSWERED_RESULT};
use serde_json::json;

fn import(format: Option<Format>, name: &str, text: &str) -> ImportedSession {
    let s = import_reader(format, name, text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    pith_import::validate(&s.entries).unwrap();
    s
}

fn messages(s: &ImportedSession) -> Vec<&Message> {
    s.messages().collect()
}

#[test]
fn claude_code_merges_streamed_blocks_and_splits_user_records() {
    let text = [
        r#"{"type":"user","sessionId":"s","uuid":"1","timestamp":"2026-02-12T15:36:09Z","message":{"role":"user","content":"fix the bug"}}"#,
        r#"{"type":"assistant","sessionId":"s","uuid":"2","message":{"id":"m1","model":"claude-opus-4-6","content":[{"type":"text","text":"\n\n"}],"usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":50}}}"#,
        r#"{"type":"assistant","sessionId":"s","uuid":"3","message":{"id":"m1","content":[{"type":"thinking","thinking":"look first","signature":"sig"}]}}"#,
        r#"{"type":"assistant","sessionId":"s","uuid":"4","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
        r#"{"type":"progress","sessionId":"s","uuid":"5","data":{}}"#,
        r#"{"type":"user","sessionId":"s","uuid":"6","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.rs"}]}}"#,
        r#"{"type":"assistant","sessionId":"s","uuid":"7","message":{"id":"m1","content":[{"type":"tool_use","id":"t2","name":"Read","input":{"path":"a.rs"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":40,"cache_read_input_tokens":100,"cache_creation_input_tokens":50}}}"#,
        r#"{"type":"user","sessionId":"s","uuid":"8","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"fn main() {}"}],"is_error":false},{"type":"text","text":"<system-reminder>todo list is empty</system-reminder>"},{"type":"text","text":"also add tests"}]}}"#,
        r#"{"type":"system","subtype":"compact_boundary","sessionId":"s","uuid":"9","compactMetadata":{"trigger":"auto","preTokens":167117}}"#,
        r#"{"type":"user","sessionId":"s","uuid":"10","isCompactSummary":true,"message":{"role":"user","content":"This session is being continued from a previous conversation."}}"#,
    ]
    .join("\n");
    let s = import(None, "s.jsonl", &text);
    assert_eq!(s.format, Format::ClaudeCode);
    assert_eq!(s.model(), Some("claude-opus-4-6"));
    assert_eq!(s.report.skipped.get("progress"), Some(&1));
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::User,
            Role::User,
            Role::User
        ]
    );
    // One assistant message: thinking, both calls; the whitespace-only block is dropped.
    let a = m[1];
    assert_eq!(a.parts.len(), 3);
    assert!(
        matches!(&a.parts[0], Part::Reasoning { text, signature: Some(sig) } if text == "look first" && sig == "sig")
    );
    assert_eq!(a.tool_calls().map(|c| c.0).collect::<Vec<_>>(), ["t1", "t2"]);
    assert_eq!(a.finish, Some(FinishReason::ToolCalls));
    assert_eq!(a.usage.unwrap().output, 40, "the last usage of the response wins");
    assert_eq!(a.usage.unwrap().cache_read, 100);
    assert_eq!(m[3].tool_results().next().unwrap().1, "fn main() {}");
    // The reminder and the request of one record are separate user messages after the results.
    assert!(m[4].is_reminder());
    assert_eq!(m[5].text_content(), "also add tests");
    assert!(!m[5].is_reminder());
    // The compaction marker, then the summary flagged as external.
    let marker = s.entries.iter().find_map(|e| match e {
        Entry::Marker(m) => Some(m),
        _ => None,
    });
    #[allow(unreachable_patterns)] // MarkerKind may gain kinds
    match &marker.unwrap().kind {
        MarkerKind::ExternalCompaction {
            tool,
            tokens_before,
            trigger,
            ..
        } => {
            assert_eq!(tool, "claude-code");
            assert_eq!(*tokens_before, Some(167_117));
            assert_eq!(trigger.as_deref(), Some("auto"));
        }
        other => panic!("{other:?}"),
    }
    assert!(m[6].meta.external_summary);
    assert!(m
        .iter()
        .all(|m| m.meta.source.as_deref().is_some_and(|s| s.starts_with("line "))));
}

#[test]
fn codex_decodes_arguments_and_outputs_and_attaches_usage() {
    let lines = [
        json!({"timestamp":"2025-09-25T02:12:23Z","type":"session_meta","payload":{"id":"x"}}),
        json!({"timestamp":"2025-09-25T02:12:23Z","type":"turn_context","payload":{"model":"gpt-5-codex"}}),
        json!({"timestamp":"2025-09-25T02:12:23Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"be brief"}]}}),
        json!({"timestamp":"2025-09-25T02:12:23Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"list files"}]}}),
        json!({"timestamp":"2025-09-25T02:12:24Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":3587,"cached_input_tokens":2560,"output_tokens":229}}}}),
        json!({"timestamp":"2025-09-25T02:12:24Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Listing**"}],"encrypted_content":"enc"}}),
        json!({"timestamp":"2025-09-25T02:12:24Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}),
        json!({"timestamp":"2025-09-25T02:12:25Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"{\"output\":\"ls: x: No such file\\n\",\"metadata\":{\"exit_code\":1}}"}}),
        json!({"timestamp":"2025-09-25T02:12:26Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}),
        json!({"timestamp":"2025-09-25T02:12:26Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":4000,"cached_input_tokens":0,"output_tokens":5}}}}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let s = import(None, "rollout.jsonl", &text.join("\n"));
    assert_eq!(s.format, Format::Codex);
    assert_eq!(s.model(), Some("gpt-5-codex"));
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::Developer,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    let call = m[2].tool_calls().next().unwrap();
    assert_eq!(call.2, &json!({"command": ["ls"]}));
    assert!(
        matches!(&m[2].parts[0], Part::Reasoning { text, signature: Some(s) } if text == "**Listing**" && s == "enc")
    );
    let usage = m[2].usage.unwrap();
    assert_eq!((usage.input, usage.cache_read, usage.output), (1027, 2560, 229));
    let (_, content, is_error) = m[3].tool_results().next().unwrap();
    assert_eq!(content, "ls: x: No such file\n");
    assert!(is_error);
    assert_eq!(
        m[4].usage.unwrap().input,
        4000,
        "a usage after the items attaches to their message"
    );
    assert_eq!(s.report.unattached_usage, 0);
}

#[test]
fn pi_reads_two_objects_on_a_line_bash_executions_and_aborted_calls() {
    let text = [
        r#"{"type":"session","id":"x","timestamp":"2025-12-09T00:53:29.825Z","cwd":"/","provider":"anthropic","modelId":"claude-opus-4-5"}"#,
        r#"{"type":"message","timestamp":"2025-12-09T00:54:00Z","message":{"role":"user","content":[{"type":"text","text":"read it"}]}}"#,
        r#"{"type":"message","timestamp":"2025-12-09T00:54:01Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"a","name":"read","arguments":{"path":"x"}},{"type":"toolCall","id":"b","name":"read","arguments":{"path":"y"}}],"provider":"anthropic","model":"claude-opus-4-5","usage":{"input":1,"output":114,"cacheRead":10,"cacheWrite":33637},"stopReason":"aborted"}}"#,
        r#"{"type":"message","timestamp":"2025-12-09T00:54:02Z","message":{"role":"toolResult","toolCallId":"a","toolName":"read","content":[{"type":"text","text":"x body"}],"isError":false}}{"type":"compaction","timestamp":"2025-12-09T00:55:00Z","summary":"checkpoint","firstKeptEntryIndex":2,"tokensBefore":178000}"#,
        r#"{"type":"message","timestamp":"2025-12-09T00:56:00Z","message":{"role":"assistant","content":[],"stopReason":"aborted"}}"#,
        r#"{"type":"message","timestamp":"2025-12-09T00:57:00Z","message":{"role":"bashExecution","command":"ls","output":"README.md\n","exitCode":0,"cancelled":false}}"#,
        r#"{"type":"model_change","timestamp":"2025-12-09T00:58:00Z","provider":"openai","modelId":"gpt-5.1-codex"}"#,
        r#"{"type":"thinking_level_change","timestamp":"2025-12-09T00:58:01Z","thinkingLevel":"minimal"}"#,
    ]
    .join("\n");
    let s = import(None, "pi.jsonl", &text);
    assert_eq!(s.format, Format::Pi);
    assert_eq!(s.model(), Some("anthropic/claude-opus-4-5"));
    let kinds: Vec<&str> = s.entries.iter().map(Entry::kind).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "message",
            "message",
            "marker",
            "message",
            "message",
            "model_change"
        ]
    );
    let m = messages(&s);
    // The aborted call "b" is answered by a synthetic error right after "a"'s result.
    let synth = m[3];
    assert!(synth.meta.synthetic);
    assert_eq!(
        synth.tool_results().next().unwrap(),
        ("b", UNANSWERED_RESULT, true)
    );
    assert_eq!(m[1].finish, Some(FinishReason::Cancelled));
    assert_eq!(m[1].usage.unwrap().cache_write, 33_637);
    // bashExecution: a synthetic assistant call of bash and its result.
    assert!(m[4].meta.synthetic && m[4].role == Role::Assistant);
    assert_eq!(m[4].tool_calls().next().unwrap().2, &json!({"command": "ls"}));
    assert_eq!(m[5].tool_results().next().unwrap().1, "README.md\n");
    assert!(!m[5].meta.synthetic);
    match &s.entries[4] {
        Entry::Marker(marker) => {
            assert_eq!(
                marker.kind,
                MarkerKind::ExternalCompaction {
                    tool: "pi".into(),
                    tokens_before: Some(178_000),
                    trigger: None,
                    summary: Some("checkpoint".into())
                }
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&s.entries[7], Entry::ModelChange(c) if c.model == "openai/gpt-5.1-codex"));
    assert_eq!(s.report.skipped.get("message/assistant (empty)"), Some(&1));
    assert_eq!(s.report.skipped.get("thinking_level_change"), Some(&1));
    assert_eq!((s.report.synthesized_results, s.report.synthesized_calls), (1, 1));
}

#[test]
fn swe_agent_pairs_a_reused_call_id_by_position_and_reads_text_actions() {
    let doc = json!({"trajectory": [], "history": [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "solve it"},
        {"role": "assistant", "content": "run", "action": "python r.py", "tool_calls": [{"id": "call_5", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"python r.py\"}"}}]},
        {"role": "tool", "content": "344", "tool_call_ids": ["call_5"]},
        {"role": "assistant", "content": "again", "action": "ls", "tool_calls": [{"id": "call_5", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
        {"role": "tool", "content": "a.py", "tool_call_ids": ["call_5"]}
    ]});
    let s = import(None, "x.traj", &doc.to_string());
    assert_eq!(s.format, Format::SweAgent);
    let m = messages(&s);
    assert_eq!(
        m[2].tool_calls().next().unwrap().2,
        &json!({"command": "python r.py"})
    );
    assert_eq!(m[3].tool_results().next().unwrap().1, "344");
    assert_eq!(m[5].tool_results().next().unwrap().1, "a.py");

    let text_mode = json!({"environment": "swe_main", "trajectory": [], "history": [
        {"role": "system", "content": "SETTING"},
        {"role": "user", "content": "demo", "is_demo": true},
        {"role": "user", "content": "issue"},
        {"role": "assistant", "content": "Make a script.\n\n```\ncreate r.py\n```", "thought": "Make a script.", "action": "create r.py\n"},
        {"role": "user", "content": "[File: r.py (1 lines total)]"},
        {"role": "assistant", "content": "Submit.\n\n```\nsubmit\n```", "thought": "Submit.", "action": "submit\n"}
    ]});
    let s = import(None, "y.traj", &text_mode.to_string());
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool
        ]
    );
    assert_eq!(
        m[3].text_content(),
        "Make a script.\n\n```\ncreate r.py\n```",
        "the text is kept"
    );
    assert_eq!(m[3].tool_calls().next().unwrap().1, "bash");
    assert_eq!(
        m[3].tool_calls().next().unwrap().2,
        &json!({"command": "create r.py"})
    );
    assert!(m[6].meta.synthetic, "the last action never got an observation");
    assert_eq!(s.report.text_actions, 2);
}

#[test]
fn mini_swe_agent_turns_single_bash_blocks_into_calls() {
    let doc = json!({"info": {"config": {"model": {"model_name": "google/gemini-3-pro-preview"}}}, "messages": [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "<pr_description>fix</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls -la\n```", "extra": {"response": {"usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 40}}}}},
        {"role": "user", "content": "<returncode>2</returncode>\n<output>\nls: cannot access\n</output>"},
        {"role": "assistant", "content": "THOUGHT: two\n\n```bash\na\n```\n\n```bash\nb\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."}
    ], "trajectory_format": "mini-swe-agent-1"});
    let s = import(None, "t.traj.json", &doc.to_string());
    assert_eq!(s.format, Format::MiniSweAgent);
    assert_eq!(s.model(), Some("google/gemini-3-pro-preview"));
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::User
        ]
    );
    assert_eq!(m[2].tool_calls().next().unwrap().2, &json!({"command": "ls -la"}));
    assert!(m[3].tool_results().next().unwrap().2, "return code 2 is an error");
    assert_eq!(m[2].usage.unwrap().cache_read, 40);
    assert!(!m[4].has_tool_calls(), "two blocks ran nothing");
}

#[test]
fn openhands_links_observations_by_cause() {
    let doc = json!([
        {"id": 0, "timestamp": "2025-01-20T20:29:13.519638", "source": "environment", "observation": "agent_state_changed", "content": "", "extras": {}},
        {"id": 4, "timestamp": "2025-01-20T20:29:32.262843", "source": "user", "action": "message", "args": {"content": "make an app"}},
        {"id": 7, "timestamp": "2025-01-20T20:29:35.040676", "source": "agent", "action": "run", "args": {"command": "mkdir app", "thought": "First a folder."},
         "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "toolu_1", "model_response": {"id": "r1", "model": "claude-3-5-sonnet-20241022", "choices": [{"message": {"tool_calls": [{"id": "toolu_1", "function": {"name": "execute_bash", "arguments": "{\"command\": \"mkdir app\"}"}}]}}]}}},
        {"id": 8, "timestamp": "2025-01-20T20:29:35.699033", "source": "agent", "cause": 7, "observation": "run", "success": true, "content": "", "message": "Command `mkdir app` executed with exit code 0."},
        {"id": 9, "timestamp": "2025-01-20T20:30:35.414886", "source": "agent", "action": "message", "args": {"content": "Done."}},
        {"id": 10, "timestamp": "2025-01-20T20:30:35.421080", "source": "agent", "cause": 9, "observation": "null", "content": ""}
    ]);
    let s = import(None, "events.json", &doc.to_string());
    assert_eq!(s.format, Format::OpenHands);
    assert_eq!(s.model(), Some("claude-3-5-sonnet-20241022"));
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Assistant]);
    assert_eq!(m[1].text_content(), "First a folder.");
    assert_eq!(
        m[1].tool_calls().next().unwrap(),
        ("toolu_1", "execute_bash", &json!({"command": "mkdir app"}))
    );
    assert_eq!(
        m[2].tool_results().next().unwrap().1,
        "Command `mkdir app` executed with exit code 0."
    );
    assert_eq!(s.report.skipped.get("observation/null"), Some(&1));
}

#[test]
fn aider_splits_user_status_and_assistant_text() {
    let text = "\n# aider chat started at 2025-07-15 11:38:37\n\n> Aider v0.85.1\n> Main model: gpt-4o with diff edit format\n\n#### add a comment  \n#### at the top  \n\nPlease add `a.ts` to the chat.\n\n> Tokens: 3.2k sent, 21 received.\n> a.ts\n> Add file to the chat? (Y)es/(N)o [Yes]: y\n\nHere is the edit:\n\n```ts\n// comment\n```\n\n# aider chat started at 2025-07-16 09:00:00\n\n> Model: o3-mini with diff edit format\n\n#### hi\n";
    let s = import(None, "history.md", text);
    assert_eq!(s.format, Format::Aider);
    assert_eq!(s.model(), Some("gpt-4o"));
    let m = messages(&s);
    let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Assistant, Role::User]);
    assert_eq!(m[0].text_content(), "add a comment\nat the top");
    assert!(m[2].text_content().ends_with("```ts\n// comment\n```"));
    assert!(s
        .entries
        .iter()
        .any(|e| matches!(e, Entry::ModelChange(c) if c.model == "o3-mini")));
    assert_eq!(s.record.created_at.to_rfc3339(), "2025-07-15T11:38:37+00:00");
}

#[test]
fn the_real_claude_code_session_keeps_its_compaction() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    let (path, _) = files
        .iter()
        .find(|(_, e)| e.file == "claude-code-session/fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl")
        .unwrap();
    let s = pith_import::import_file(path).unwrap();
    let at = s
        .entries
        .iter()
        .position(|e| matches!(e, Entry::Marker(_)))
        .unwrap();
    match &s.entries[at] {
        Entry::Marker(m) => assert!(matches!(
            &m.kind,
            MarkerKind::ExternalCompaction { tokens_before: Some(167_117), trigger: Some(t), .. } if t == "auto"
        )),
        _ => unreachable!(),
    }
    let summary = s.entries[at + 1].as_message().unwrap();
    assert!(summary.meta.external_summary && summary.role == Role::User);
    assert!(!summary.is_reminder());
    assert!(summary
        .text_content()
        .contains("continued from a previous conversation"));
    // Entry ids are unique and the file's timestamps bound the record.
    assert!(s.record.created_at < s.record.updated_at);
}
