//! The `pith` binary, command by command, including bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn pith(store: &Path) -> Command {
    let mut cmd = Command::cargo_bin("pith").unwrap();
    cmd.arg("--store").arg(format!("sqlite://{}", store.display()));
    cmd
}

fn json_of(output: &std::process::Output) -> Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs a failing command and returns its one-line error.
fn failure(cmd: &mut Command) -> String {
    let output = cmd.output().unwrap();
    assert!(
        !output.status.success(),
        "expected a failure, got: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line expected, got: {stderr}");
    errors[0].to_string()
}

#[test]
fn demo_then_sessions_show_export_compact_circuit_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pith.db");
    let report = json_of(&pith(&db).args(["--json", "demo"]).output().unwrap());
    let compactions = report["compactions"].as_array().unwrap();
    assert!(compactions.len() >= 3, "{report}");
    assert!(
        compactions.iter().any(|c| c["trigger"] == "reactive"),
        "compact-and-retry expected"
    );
    assert_eq!(report["tool_pairs_split"], 0);
    assert!(report["max_request_tokens"].as_u64().unwrap() <= report["window"].as_u64().unwrap());
    let session = report["session_id"].as_str().unwrap().to_string();

    let list = json_of(&pith(&db).args(["--json", "sessions", "list"]).output().unwrap());
    assert!(list
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["id"] == session.as_str()));

    let show = json_of(
        &pith(&db)
            .args(["--json", "sessions", "show", &session])
            .output()
            .unwrap(),
    );
    let generation = show["view"]["generation"].as_u64().unwrap();
    assert_eq!(generation as usize, compactions.len());
    assert_eq!(show["revisions"].as_array().unwrap().len(), compactions.len() + 1);

    // Revision 0 is the original history: it exports with a checksum and holds every message.
    let out = dir.path().join("rev0.json");
    let export = pith(&db)
        .args(["sessions", "export", &session, "--revision", "0", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(export.status.success());
    let bytes = std::fs::read(&out).unwrap();
    let stderr = String::from_utf8_lossy(&export.stderr);
    let sha = stderr.split("sha256 ").nth(1).unwrap().trim();
    assert_eq!(sha, pith_core::sha256_hex(&bytes));
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(doc["generation"], 0);
    assert!(doc["compaction"].is_null());

    let jsonl = pith(&db)
        .args(["sessions", "export", &session, "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(jsonl.status.success());
    let lines = String::from_utf8(jsonl.stdout).unwrap();
    assert!(lines.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()));

    let compact = json_of(
        &pith(&db)
            .args([
                "--json",
                "compact",
                &session,
                "--instructions",
                "keep the file list",
            ])
            .output()
            .unwrap(),
    );
    // Everything the policy would summarise is already summarised: the latest record comes back
    // without a new compaction.
    assert_eq!(compact["noop"], true, "{compact}");
    assert_eq!(compact["record"]["generation"].as_u64().unwrap(), generation);

    let status = json_of(
        &pith(&db)
            .args(["--json", "circuit", "status", &session])
            .output()
            .unwrap(),
    );
    assert_eq!(status["open"], false);
    let reset = json_of(
        &pith(&db)
            .args(["--json", "circuit", "reset", &session])
            .output()
            .unwrap(),
    );
    assert_eq!(reset["consecutive_failures"], 0);

    assert!(pith(&db)
        .args(["sessions", "delete", &session])
        .output()
        .unwrap()
        .status
        .success());
    let err = failure(pith(&db).args(["sessions", "show", &session]));
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn import_stores_a_transcript() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    let (path, _) = files.iter().find(|(_, e)| e.format.starts_with("codex")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pith.db");
    let out = json_of(&pith(&db).args(["--json", "import"]).arg(path).output().unwrap());
    assert_eq!(out["format"], "codex");
    assert!(out["entries"].as_u64().unwrap() > 0);
    let id = out["session_id"].as_str().unwrap();
    let show = json_of(
        &pith(&db)
            .args(["--json", "sessions", "show", id])
            .output()
            .unwrap(),
    );
    assert_eq!(show["view"]["log_len"], out["entries"]);
    // A manual compaction of the imported history under a 32k window commits a new generation.
    let compact = json_of(
        &pith(&db)
            .args([
                "--json",
                "compact",
                id,
                "--window",
                "32000",
                "--instructions",
                "list every file",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(compact["noop"], false, "{compact}");
    assert_eq!(compact["record"]["trigger"], "manual");
    assert_eq!(compact["record"]["generation"], 1);
    assert!(
        compact["record"]["tokens_after"].as_u64().unwrap()
            < compact["record"]["tokens_before"].as_u64().unwrap()
    );
}

#[test]
fn bad_input_is_one_clear_line_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pith.db");

    let missing = failure(pith(&db).args(["replay", "/no/such/file.jsonl"]));
    assert!(missing.contains("/no/such/file.jsonl"), "{missing}");

    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, br#"{"hello": "world", "items": [1, 2, 3]}"#).unwrap();
    let err = failure(pith(&db).arg("replay").arg(&unknown));
    assert!(err.to_lowercase().contains("format"), "{err}");

    let truncated = dir.path().join("truncated.jsonl");
    std::fs::write(
        &truncated,
        b"{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"te",
    )
    .unwrap();
    let err = failure(pith(&db).arg("import").arg(&truncated));
    assert!(err.contains("truncated.jsonl"), "{err}");

    let invalid = dir.path().join("invalid.jsonl");
    let mut bytes = b"{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"2025-01-01T00:00:00Z\",\"cwd\":\"/\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"caf".to_vec();
    bytes.extend([0xff, 0xfe]);
    bytes.extend(b"\"}}\n");
    std::fs::write(&invalid, bytes).unwrap();
    let err = failure(pith(&db).arg("import").arg(&invalid));
    assert!(err.to_lowercase().contains("utf-8"), "{err}");

    let err = failure(pith(&db).args(["sessions", "show", "0190f0a4-7c1e-7b3a-9d2e-1f2a3b4c5d6e"]));
    assert!(err.contains("not found"), "{err}");
    let err = failure(pith(&db).args(["circuit", "status", "../../etc/passwd"]));
    assert!(err.contains("invalid session id"), "{err}");
    let err = failure(
        Command::cargo_bin("pith")
            .unwrap()
            .args(["--store", "mysql://x", "sessions", "list"]),
    );
    assert!(
        err.contains("unknown store URL") || err.contains("mysql"),
        "{err}"
    );

    // Nothing was written by any of the failures.
    let list = json_of(&pith(&db).args(["--json", "sessions", "list"]).output().unwrap());
    assert_eq!(list.as_array().unwrap().len(), 0);
}

#[test]
fn help_is_available_everywhere() {
    for args in [
        vec!["--help"],
        vec!["demo", "--help"],
        vec!["replay", "--help"],
        vec!["sessions", "export", "--help"],
        vec!["circuit", "reset", "--help"],
        vec!["chat", "--help"],
    ] {
        let out = Command::cargo_bin("pith").unwrap().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"), "{args:?}");
    }
}
