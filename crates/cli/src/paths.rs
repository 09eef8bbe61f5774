//! File paths named by tool calls, for the retention figures of the replay report.
//!
//! A path counts as *read* when a read-like call names it (read/view tools, `cat`/`sed -n`/`head`/
//! `tail`/`nl` in a shell command) and as *modified* when a modify-like call names it (edit/write
//! tools, `apply_patch` file headers, shell output redirection). The shapes covered are the common
//! tool shapes and the tool names found in Claude Code, Codex, pi, SWE-agent and OpenHands sessions.

use std::collections::BTreeSet;

use serde_json::Value;

/// Whether a call reads or modifies a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// The call reads the file.
    Read,
    /// The call creates or changes the file.
    Modify,
}

const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "notebook_path",
];

/// The paths a tool call names, with how it uses them.
pub fn paths_of_call(name: &str, arguments: &Value) -> BTreeSet<(Access, String)> {
    let mut out = BTreeSet::new();
    let lower = name.to_ascii_lowercase();
    let args = match arguments {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    };
    let command = args.get("command").and_then(|c| match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            // `["bash", "-lc", "<script>"]`: the script is what runs.
            match words.as_slice() {
                [shell, flag, script] if is_shell(shell) && flag.starts_with('-') => Some(script.to_string()),
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    });
    let sub = args.get("command").and_then(Value::as_str).unwrap_or_default();
    let named = PATH_KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let access = if matches!(
        lower.as_str(),
        "read" | "read_file" | "view" | "open" | "cat" | "view_file"
    ) || (lower == "str_replace_editor" && sub == "view")
    {
        Some(Access::Read)
    } else if matches!(
        lower.as_str(),
        "edit"
            | "write"
            | "multiedit"
            | "edit_file"
            | "write_file"
            | "create"
            | "create_file"
            | "notebookedit"
    ) || (lower == "str_replace_editor" && sub != "view")
    {
        Some(Access::Modify)
    } else {
        None
    };
    if let (Some(access), Some(path)) = (access, named) {
        out.insert((access, path));
    }
    if let Some(cmd) = command {
        if matches!(
            lower.as_str(),
            "bash" | "shell" | "exec_command" | "local_shell" | "execute_bash" | "run"
        ) {
            shell_paths(&cmd, &mut out);
        }
    }
    if lower == "apply_patch" {
        if let Some(patch) = args.get("input").and_then(Value::as_str).or(args.as_str()) {
            patch_paths(patch, &mut out);
        }
    }
    out
}

fn is_shell(word: &str) -> bool {
    matches!(word.rsplit('/').next().unwrap_or(word), "bash" | "sh" | "zsh")
}

fn looks_like_path(token: &str) -> bool {
    let t = token.trim_matches(|c| c == '"' || c == '\'');
    !t.is_empty()
        && !t.starts_with('-')
        && (t.contains('/') || t.contains('.'))
        && t.chars().all(|c| c.is_alphanumeric() || "/._-~+@".contains(c))
        && t.chars().any(char::is_alphabetic)
}

fn shell_paths(cmd: &str, out: &mut BTreeSet<(Access, String)>) {
    patch_paths(cmd, out);
    for segment in cmd.split(['|', ';', '&', '\n']) {
        let tokens: Vec<&str> = segment.split_whitespace().collect();
        for (i, tok) in tokens.iter().enumerate() {
            if matches!(*tok, ">" | ">>") {
                if let Some(next) = tokens.get(i + 1).filter(|t| looks_like_path(t)) {
                    out.insert((Access::Modify, clean(next)));
                }
            }
        }
        let Some(first) = tokens.iter().position(|t| !t.contains('=')) else {
            continue;
        };
        let prog = tokens[first].rsplit('/').next().unwrap_or(tokens[first]);
        if matches!(prog, "cat" | "head" | "tail" | "nl" | "less" | "sed" | "bat") {
            let in_place = prog == "sed" && tokens.iter().any(|t| t.starts_with("-i"));
            let access = if in_place { Access::Modify } else { Access::Read };
            for tok in &tokens[first + 1..] {
                if matches!(*tok, ">" | ">>" | "<") {
                    break;
                }
                if looks_like_path(tok) && !tok.starts_with("s/") && !tok.contains(",") {
                    out.insert((access, clean(tok)));
                }
            }
        }
    }
}

fn patch_paths(text: &str, out: &mut BTreeSet<(Access, String)>) {
    for line in text.lines() {
        for prefix in ["*** Update File: ", "*** Add File: ", "*** Delete File: "] {
            if let Some(rest) = line.trim_start().strip_prefix(prefix) {
                out.insert((Access::Modify, rest.trim().to_string()));
            }
        }
    }
}

fn clean(token: &str) -> String {
    token.trim_matches(|c| c == '"' || c == '\'').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn common_tool_shapes() {
        let r = paths_of_call("Read", &json!({"file_path": "/repo/src/a.rs"}));
        assert!(r.contains(&(Access::Read, "/repo/src/a.rs".into())));
        let e = paths_of_call(
            "edit",
            &json!({"path": "src/b.rs", "oldText": "x", "newText": "y"}),
        );
        assert!(e.contains(&(Access::Modify, "src/b.rs".into())));
        let s = paths_of_call(
            "shell",
            &json!({"command": ["bash", "-lc", "sed -n 1,200p src/lib.rs"]}),
        );
        assert!(s.contains(&(Access::Read, "src/lib.rs".into())));
        let p = paths_of_call(
            "shell",
            &json!({"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/x.rs\n@@\n-a\n+b\n*** End Patch"]}),
        );
        assert!(p.contains(&(Access::Modify, "src/x.rs".into())));
        let w = paths_of_call(
            "bash",
            &json!({"command": "echo hi > notes/out.txt && cat README.md"}),
        );
        assert!(w.contains(&(Access::Modify, "notes/out.txt".into())));
        assert!(w.contains(&(Access::Read, "README.md".into())));
        assert!(paths_of_call("Grep", &json!({"pattern": "x", "path": "src"})).is_empty());
    }
}
