//! File paths a tool call reads, modifies or creates, for the artifact ledger.
//!
//! Covers the common tool shapes and the tool names of Claude Code (Read, Edit, Write, MultiEdit,
//! NotebookEdit, Bash), pi (read, edit, write, bash), Codex (shell with a command array such as
//! `["bash", "-lc", "sed -n 1,200p f"]`, apply_patch bodies with `*** Update File: p`), SWE-agent
//! (str_replace_editor, open, edit, create) and OpenHands actions (read, edit, write, run). Shell
//! commands are scanned for reading programs (`cat`, `sed -n`, `head`, `tail`, `nl`, …), in-place
//! edits (`sed -i`), output redirections and patch headers. Glob and Grep name directories and
//! patterns, not files, and are not counted.

use std::borrow::Cow;

use serde_json::Value;

/// How a call uses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// The file is read.
    Read,
    /// The file is changed.
    Modify,
    /// The file is written whole or added (it may be new).
    Create,
}

const PATH_KEYS: &[&str] = &[
    "file_path",
    "path",
    "filePath",
    "file",
    "filename",
    "notebook_path",
    "target_file",
];

const READ_TOOLS: &[&str] = &[
    "read",
    "read_file",
    "view",
    "open",
    "cat",
    "view_file",
    "fileread",
];
const MODIFY_TOOLS: &[&str] = &[
    "edit",
    "multiedit",
    "edit_file",
    "str_replace",
    "notebookedit",
    "fileedit",
    "str_replace_based_edit_tool",
];
const CREATE_TOOLS: &[&str] = &["write", "write_file", "create", "create_file", "filewrite"];
const SHELL_TOOLS: &[&str] = &[
    "bash",
    "shell",
    "exec_command",
    "local_shell",
    "execute_bash",
    "run",
    "cmdrun",
    "terminal",
];
const READ_PROGRAMS: &[&str] = &["cat", "head", "tail", "nl", "less", "more", "sed", "bat", "wc"];

/// Arguments as an object (providers sometimes send them as a JSON string); borrowed when they
/// already are one, since arguments can hold whole file bodies.
fn parsed(arguments: &Value) -> Cow<'_, Value> {
    match arguments {
        Value::String(s) => Cow::Owned(serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))),
        other => Cow::Borrowed(other),
    }
}

/// The shell script a call runs, if it is one: a `command`/`cmd` string, or a command array
/// (`["bash", "-lc", script]` runs `script`).
pub fn command_of(arguments: &Value) -> Option<String> {
    let args = parsed(arguments);
    let command = args.get("command").or_else(|| args.get("cmd"))?;
    match command {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, script] if is_shell(shell) && flag.starts_with('-') => Some(script.to_string()),
                _ => Some(words.join(" ")),
            }
        }
        _ => None,
    }
}

/// The path a call names under one of the usual argument keys.
pub fn named_path(arguments: &Value) -> Option<String> {
    let args = parsed(arguments);
    PATH_KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(str::to_string)
}

fn is_shell(word: &str) -> bool {
    matches!(word.rsplit('/').next().unwrap_or(word), "bash" | "sh" | "zsh")
}

/// The paths a tool call names, with how it uses them (deduplicated, in a stable order).
pub fn paths_of_call(name: &str, arguments: &Value) -> Vec<(Access, String)> {
    let mut out: Vec<(Access, String)> = Vec::new();
    let mut add = |access: Access, path: String| {
        if !path.is_empty() && !out.iter().any(|(a, p)| *a == access && *p == path) {
            out.push((access, path));
        }
    };
    let lower = name.to_ascii_lowercase();
    let args = parsed(arguments);
    let sub = args.get("command").and_then(Value::as_str).unwrap_or_default();
    let editor = lower == "str_replace_editor" || lower == "str_replace_based_edit_tool";
    let access = if READ_TOOLS.contains(&lower.as_str()) || (editor && sub == "view") {
        Some(Access::Read)
    } else if editor && sub == "create" || CREATE_TOOLS.contains(&lower.as_str()) {
        Some(Access::Create)
    } else if editor || MODIFY_TOOLS.contains(&lower.as_str()) {
        Some(Access::Modify)
    } else {
        None
    };
    if let (Some(access), Some(path)) = (access, named_path(&args)) {
        add(access, path);
    }
    if SHELL_TOOLS.contains(&lower.as_str()) {
        if let Some(script) = command_of(&args) {
            for (a, p) in shell_paths(&script) {
                add(a, p);
            }
        }
    }
    if lower == "apply_patch" {
        let body = args.get("input").and_then(Value::as_str).or(args.as_str());
        if let Some(body) = body {
            for (a, p) in patch_paths(body) {
                add(a, p);
            }
        }
    }
    out
}

/// Whether `name` is one of `list`, ignoring ASCII case (the lists are lower case).
fn named(name: &str, list: &[&str]) -> bool {
    list.iter().any(|t| name.eq_ignore_ascii_case(t))
}

/// [`paths_of_call`] into `out` (cleared first), borrowing the paths from `arguments` wherever
/// they are slices of it: the ledger touches every call's paths, and most are.
pub(crate) fn call_paths<'v>(name: &str, arguments: &'v Value, out: &mut Vec<(Access, Cow<'v, str>)>) {
    out.clear();
    if arguments.is_string() {
        // Arguments sent as JSON text are parsed into a value of their own: copied paths.
        out.extend(
            paths_of_call(name, arguments)
                .into_iter()
                .map(|(a, p)| (a, Cow::Owned(p))),
        );
        return;
    }
    let mut add = |access: Access, path: Cow<'v, str>| {
        if !path.is_empty() && !out.iter().any(|(a, p)| *a == access && *p == path) {
            out.push((access, path));
        }
    };
    let args = arguments;
    let sub = args.get("command").and_then(Value::as_str).unwrap_or_default();
    let editor = name.eq_ignore_ascii_case("str_replace_editor")
        || name.eq_ignore_ascii_case("str_replace_based_edit_tool");
    let access = if named(name, READ_TOOLS) || (editor && sub == "view") {
        Some(Access::Read)
    } else if editor && sub == "create" || named(name, CREATE_TOOLS) {
        Some(Access::Create)
    } else if editor || named(name, MODIFY_TOOLS) {
        Some(Access::Modify)
    } else {
        None
    };
    if let Some(access) = access {
        if let Some(path) = PATH_KEYS
            .iter()
            .find_map(|k| args.get(*k).and_then(Value::as_str))
        {
            add(access, Cow::Borrowed(path));
        }
    }
    if named(name, SHELL_TOOLS) {
        match borrowed_command(args) {
            Some(Cow::Borrowed(script)) => {
                for (a, p) in shell_paths_of(script) {
                    add(a, Cow::Borrowed(p));
                }
            }
            Some(Cow::Owned(script)) => {
                for (a, p) in shell_paths_of(&script) {
                    add(a, Cow::Owned(p.to_string()));
                }
            }
            None => {}
        }
    }
    if name.eq_ignore_ascii_case("apply_patch") {
        if let Some(body) = args.get("input").and_then(Value::as_str) {
            for (a, p) in patch_paths_of(body) {
                add(a, Cow::Borrowed(p));
            }
        }
    }
}

/// [`command_of`] of arguments that are not JSON text, borrowed when the script is one string.
fn borrowed_command(args: &Value) -> Option<Cow<'_, str>> {
    let command = args.get("command").or_else(|| args.get("cmd"))?;
    match command {
        Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        Value::Array(items) => {
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, script] if is_shell(shell) && flag.starts_with('-') => {
                    Some(Cow::Borrowed(script))
                }
                _ => Some(Cow::Owned(words.join(" "))),
            }
        }
        _ => None,
    }
}

fn unquote(token: &str) -> &str {
    token.trim_matches(|c| c == '"' || c == '\'')
}

fn is_path_like(token: &str) -> bool {
    let t = unquote(token);
    !t.is_empty()
        && !t.starts_with('-')
        && (t.contains('/') || t.contains('.'))
        && t.chars().all(|c| c.is_alphanumeric() || "/._-~+@".contains(c))
        && t.chars().any(char::is_alphabetic)
}

/// Paths in a shell script: read programs' file operands, `sed -i` targets, redirections and
/// patch headers.
fn shell_paths(script: &str) -> Vec<(Access, String)> {
    shell_paths_of(script)
        .into_iter()
        .map(|(a, p)| (a, p.to_string()))
        .collect()
}

/// [`shell_paths`], borrowed from the script.
fn shell_paths_of<'s>(script: &'s str) -> Vec<(Access, &'s str)> {
    let mut out = patch_paths_of(script);
    let mut words: Vec<&str> = Vec::new();
    // Words as `split_whitespace` finds them; on ASCII text without a vertical tab (the one ASCII
    // character `char::is_whitespace` accepts and `u8::is_ascii_whitespace` does not) the bytes
    // can be split without decoding characters.
    let ascii = script.is_ascii() && memchr::memchr(0x0b, script.as_bytes()).is_none();
    let split = move |segment: &'s str| {
        if ascii {
            Words::Ascii(segment.split_ascii_whitespace())
        } else {
            Words::Any(segment.split_whitespace())
        }
    };
    for segment in split_ascii(script, |b| matches!(b, b'|' | b';' | b'&' | b'\n')) {
        // Only a redirection (which needs a '>') or a reading program makes a segment name a
        // path: most segments are passed over after their first word.
        let redirects = memchr::memchr(b'>', segment.as_bytes()).is_some();
        let reads = split(segment)
            .find(|w| !w.contains('='))
            .is_some_and(|w| READ_PROGRAMS.contains(&w.rsplit('/').next().unwrap_or(w)));
        if !redirects && !reads {
            continue;
        }
        words.clear();
        words.extend(split(segment));
        for pair in words.windows(2) {
            if matches!(pair[0], ">" | ">>") && is_path_like(pair[1]) {
                out.push((Access::Modify, unquote(pair[1])));
            }
        }
        let Some(start) = words.iter().position(|w| !w.contains('=')) else {
            continue;
        };
        let program = words[start].rsplit('/').next().unwrap_or(words[start]);
        if !READ_PROGRAMS.contains(&program) {
            continue;
        }
        let in_place = program == "sed" && words.iter().any(|w| w.starts_with("-i"));
        let access = if in_place { Access::Modify } else { Access::Read };
        for w in &words[start + 1..] {
            if matches!(*w, ">" | ">>" | "<") {
                break;
            }
            if is_path_like(w) && !w.starts_with("s/") && !w.contains(',') {
                out.push((access, unquote(w)));
            }
        }
    }
    out
}

/// The words of a shell segment, split on ASCII whitespace when that is the same.
enum Words<'s> {
    /// Split on ASCII whitespace bytes.
    Ascii(std::str::SplitAsciiWhitespace<'s>),
    /// Split on any whitespace character.
    Any(std::str::SplitWhitespace<'s>),
}

impl<'s> Iterator for Words<'s> {
    type Item = &'s str;

    fn next(&mut self) -> Option<&'s str> {
        match self {
            Words::Ascii(words) => words.next(),
            Words::Any(words) => words.next(),
        }
    }
}

/// `text` split at every byte `is_separator` accepts: `str::split` with ASCII separator
/// characters, searching the bytes without decoding characters (an ASCII byte never occurs
/// inside a multi-byte character).
pub(crate) fn split_ascii(text: &str, is_separator: impl Fn(u8) -> bool) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.bytes().position(|b| b.is_ascii() && is_separator(b)) {
            Some(i) => {
                rest = current.get(i + 1..);
                current.get(..i)
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Files named by `*** Update File:`, `*** Add File:` and `*** Delete File:` patch headers.
fn patch_paths(text: &str) -> Vec<(Access, String)> {
    patch_paths_of(text)
        .into_iter()
        .map(|(a, p)| (a, p.to_string()))
        .collect()
}

/// [`patch_paths`], borrowed from the text.
fn patch_paths_of(text: &str) -> Vec<(Access, &str)> {
    let mut out = Vec::new();
    // Every header holds "*** ": most scripts hold none and need no line-by-line look.
    let bytes = text.as_bytes();
    if !memchr::memchr_iter(b'*', bytes).any(|i| bytes.get(i..i + 4) == Some(b"*** ")) {
        return out;
    }
    for line in text.lines() {
        let line = line.trim_start();
        for (prefix, access) in [
            ("*** Update File: ", Access::Modify),
            ("*** Add File: ", Access::Create),
            ("*** Delete File: ", Access::Modify),
        ] {
            if let Some(rest) = line.strip_prefix(prefix) {
                out.push((access, rest.trim()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn has(out: &[(Access, String)], access: Access, path: &str) -> bool {
        out.iter().any(|(a, p)| *a == access && p == path)
    }

    proptest::proptest! {
        #[test]
        fn ascii_split_is_str_split(text in "[a-z |;&\né😀]{0,40}") {
            let split: Vec<&str> = text.split(['|', ';', '&', '\n']).collect();
            let ascii: Vec<&str> = split_ascii(&text, |b| matches!(b, b'|' | b';' | b'&' | b'\n')).collect();
            proptest::prop_assert_eq!(ascii, split);
        }
    }

    /// The script scan as first written: every segment split into words with `split_whitespace`.
    fn shell_paths_reference(script: &str) -> Vec<(Access, String)> {
        let mut out = patch_paths(script);
        for segment in script.split(['|', ';', '&', '\n']) {
            let words: Vec<&str> = segment.split_whitespace().collect();
            for pair in words.windows(2) {
                if matches!(pair[0], ">" | ">>") && is_path_like(pair[1]) {
                    out.push((Access::Modify, unquote(pair[1]).to_string()));
                }
            }
            let Some(start) = words.iter().position(|w| !w.contains('=')) else {
                continue;
            };
            let program = words[start].rsplit('/').next().unwrap_or(words[start]);
            if !READ_PROGRAMS.contains(&program) {
                continue;
            }
            let in_place = program == "sed" && words.iter().any(|w| w.starts_with("-i"));
            let access = if in_place { Access::Modify } else { Access::Read };
            for w in &words[start + 1..] {
                if matches!(*w, ">" | ">>" | "<") {
                    break;
                }
                if is_path_like(w) && !w.starts_with("s/") && !w.contains(',') {
                    out.push((access, unquote(w).to_string()));
                }
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn scripts_are_scanned_as_first_written(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("cat "), proptest::strategy::Just("sed -i "),
                    proptest::strategy::Just("sed -n 1,2p "), proptest::strategy::Just("/bin/head "),
                    proptest::strategy::Just("a.rs"), proptest::strategy::Just("'src/b.py'"),
                    proptest::strategy::Just(" > "), proptest::strategy::Just(" >> "),
                    proptest::strategy::Just(" 2>&1 "), proptest::strategy::Just("\u{b}"),
                    proptest::strategy::Just("\u{a0}"), proptest::strategy::Just("\t"),
                    proptest::strategy::Just(" | "), proptest::strategy::Just(";"),
                    proptest::strategy::Just("\n"), proptest::strategy::Just("X=1 "),
                    proptest::strategy::Just("é.rs "), proptest::strategy::Just("s/a/b/ "),
                    proptest::strategy::Just("*** Update File: p.rs\n"), proptest::strategy::Just("echo "),
                ],
                0..14,
            ),
        ) {
            let script = pieces.concat();
            proptest::prop_assert_eq!(shell_paths(&script), shell_paths_reference(&script), "{:?}", script);
        }
    }

    #[test]
    fn tool_shapes_of_the_common_agents() {
        assert!(has(
            &paths_of_call("Read", &json!({"file_path": "/r/a.rs"})),
            Access::Read,
            "/r/a.rs"
        ));
        assert!(has(
            &paths_of_call("edit", &json!({"path": "b.rs"})),
            Access::Modify,
            "b.rs"
        ));
        assert!(has(
            &paths_of_call("Write", &json!({"file_path": "c.rs"})),
            Access::Create,
            "c.rs"
        ));
        let sed = paths_of_call(
            "shell",
            &json!({"command": ["bash", "-lc", "sed -n 1,200p src/lib.rs"]}),
        );
        assert!(has(&sed, Access::Read, "src/lib.rs"));
        let patch = paths_of_call(
            "shell",
            &json!({"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/x.rs\n*** End Patch"]}),
        );
        assert!(has(&patch, Access::Modify, "src/x.rs"));
        let swe = paths_of_call(
            "str_replace_editor",
            &json!({"command": "create", "path": "/testbed/t.py"}),
        );
        assert!(has(&swe, Access::Create, "/testbed/t.py"));
        let redirect = paths_of_call("bash", &json!({"command": "echo hi > out.txt && cat README.md"}));
        assert!(has(&redirect, Access::Modify, "out.txt"));
        assert!(has(&redirect, Access::Read, "README.md"));
        assert!(paths_of_call("Grep", &json!({"pattern": "x", "path": "src"})).is_empty());
        let string_args = paths_of_call("read", &json!("{\"path\": \"s.rs\"}"));
        assert!(has(&string_args, Access::Read, "s.rs"));
    }
}
