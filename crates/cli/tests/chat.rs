//! `pith chat` against an OpenAI-compatible server on loopback: streamed output, session kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use pith_testkit::wire::{sse_response, OpenAiStream};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

#[tokio::test(flavor = "multi_thread")]
async fn chat_streams_the_reply_and_keeps_the_session() {
    let server = MockServer::start().await;
    let stream = OpenAiStream::new()
        .text("Hello")
        .text(", Ada")
        .finish("stop")
        .usage(30, 4, 0);
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_response(stream.body()))
        .expect(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pith.db");
    let base = format!("{}/v1", server.uri());
    let store = format!("sqlite://{}", db.display());
    let output = tokio::task::spawn_blocking(move || {
        Command::cargo_bin("pith")
            .unwrap()
            .env("OPENAI_BASE_URL", base)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .args(["--store", &store, "chat", "--model", "openai/test-model"])
            .write_stdin("hi, I am Ada\n/exit\n")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Hello, Ada"), "{stdout}");
    // The request carried the instruction first and the user's line.
    let requests = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(
        body["messages"].as_array().unwrap().last().unwrap()["content"],
        "hi, I am Ada"
    );
    // The conversation is a stored session.
    let list = Command::cargo_bin("pith")
        .unwrap()
        .args([
            "--store",
            &format!("sqlite://{}", db.display()),
            "--json",
            "sessions",
            "list",
        ])
        .output()
        .unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    assert_eq!(sessions[0]["model"], "openai/test-model");
}
