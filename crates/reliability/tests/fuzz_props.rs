//! The CI counterpart of the cargo-fuzz targets in `fuzz/`: random and mutated bytes into every
//! importer and both SSE parsers. Whatever the bytes, the result is a value or a typed error —
//! never a panic. Seeds are the real transcripts of `/work/shared/transcripts` and well-formed
//! streams; the fuzz targets run the same functions for as long as one likes (see
//! docs/RELIABILITY.md).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;
use std::time::Duration;

use pith_core::Message;
use pith_import::Format;
use pith_reliability::fuzzing::{import, sse_anthropic, sse_openai, SseOutcome};
use pith_router::{Anthropic, ChatRequest, OpenAiCompatible, Provider, ProviderConfig, ProviderLimits};
use pith_testkit::wire::{sse_response, AnthropicStream, OpenAiStream};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

/// The first ~8 KB of every real transcript (cut at a line end), and its format.
fn seeds() -> &'static [(Format, Vec<u8>)] {
    static SEEDS: OnceLock<Vec<(Format, Vec<u8>)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let Some(manifest) = pith_testkit::transcripts::manifest() else {
            return Vec::new();
        };
        manifest
            .into_iter()
            .filter_map(|(path, _)| {
                let bytes = std::fs::read(&path).ok()?;
                let format = import(None, &bytes).ok()?.format;
                let head = if bytes.len() <= 8_192 {
                    bytes
                } else {
                    let end = bytes[..8_192]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(8_192, |i| i + 1);
                    bytes[..end].to_vec()
                };
                Some((format, head))
            })
            .collect()
    })
}

fn openai_streams() -> Vec<String> {
    vec![
        OpenAiStream::new()
            .text("Hel")
            .text("lo")
            .finish("stop")
            .usage(10, 2, 0)
            .done()
            .body(),
        OpenAiStream::new()
            .tool_call(0, "call_1", "read")
            .tool_args(0, "{\"pa")
            .tool_args(0, "th\":\"a\"}")
            .finish("tool_calls")
            .done()
            .body(),
    ]
}

fn anthropic_streams() -> Vec<String> {
    vec![
        AnthropicStream::new()
            .message_start(10, 0, 0)
            .text_block(&["Hel", "lo"])
            .message_delta("end_turn", 2)
            .message_stop()
            .body(),
        AnthropicStream::new()
            .message_start(10, 0, 0)
            .thinking_block(&["hmm"], "sig")
            .tool_use_block("toolu_1", "read", &["{\"path\":", "\"a\"}"])
            .message_delta("tool_use", 5)
            .message_stop()
            .body(),
    ]
}

/// One edit of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Delete(usize, usize),
    Insert(usize, Vec<u8>),
    Duplicate(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0usize..64).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..256).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len();
        let at = |i: usize| if len == 0 { 0 } else { i % (len + 1) };
        match m {
            Mutation::Flip(i, b) if len > 0 => bytes[i % len] ^= b | 1,
            Mutation::Flip(..) => {}
            Mutation::Delete(i, n) => {
                let start = at(*i);
                let end = (start + n).min(len);
                bytes.drain(start..end);
            }
            Mutation::Insert(i, b) => {
                let start = at(*i);
                bytes.splice(start..start, b.iter().copied());
            }
            Mutation::Duplicate(i, n) => {
                let start = at(*i);
                let end = (start + n).min(len);
                let piece = bytes[start..end].to_vec();
                bytes.splice(end..end, piece);
            }
            Mutation::Truncate(i) => bytes.truncate(at(*i)),
        }
    }
    bytes
}

fn check_import(format: Option<Format>, bytes: &[u8]) {
    if let Err(e) = import(format, bytes) {
        assert!(!e.to_string().is_empty(), "an error names its problem");
    }
}

fn check_sse(outcome: SseOutcome) {
    match outcome {
        SseOutcome::Reply(r) => assert_eq!(r.message.role, pith_core::Role::Assistant),
        SseOutcome::Rejected(e) => assert!(!e.to_string().is_empty()),
        SseOutcome::NotJson(e) => assert!(!e.is_empty()),
    }
}

/// One structural edit of a JSON value: the `n`th node (depth first) loses a key, or becomes a
/// value of another type.
fn mutate_json(value: &mut serde_json::Value, n: &mut usize, kind: u8) -> bool {
    use serde_json::Value;
    if *n == 0 {
        *value = match kind % 5 {
            0 => Value::Null,
            1 => Value::from(-1),
            2 => Value::from("x"),
            3 => Value::Array(vec![]),
            _ => Value::Object(Default::default()),
        };
        return true;
    }
    *n -= 1;
    match value {
        Value::Object(map) => {
            if kind.is_multiple_of(2) && *n == 0 && !map.is_empty() {
                let key = map
                    .keys()
                    .nth(usize::from(kind / 2) % map.len())
                    .cloned()
                    .unwrap_or_default();
                map.remove(&key);
                return true;
            }
            map.values_mut().any(|v| mutate_json(v, n, kind))
        }
        Value::Array(items) => items.iter_mut().any(|v| mutate_json(v, n, kind)),
        _ => false,
    }
}

/// Field names every transcript format uses; a record missing one is a classic importer crash.
const KEYS: &[&str] = &[
    "role",
    "type",
    "content",
    "message",
    "id",
    "uuid",
    "call_id",
    "tool_call_id",
    "name",
    "arguments",
    "payload",
    "text",
    "history",
    "messages",
    "usage",
    "timestamp",
];

/// Removes the first `key` found depth first, or retypes it when `retype`.
fn drop_key(value: &mut serde_json::Value, key: &str, retype: bool) -> bool {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            if map.contains_key(key) {
                if retype {
                    map.insert(key.to_string(), Value::from(7));
                } else {
                    map.remove(key);
                }
                return true;
            }
            map.values_mut().any(|v| drop_key(v, key, retype))
        }
        Value::Array(items) => items.iter_mut().any(|v| drop_key(v, key, retype)),
        _ => false,
    }
}

/// A well-formed stream whose event payloads got structural JSON edits.
fn json_mutated(body: &str, edits: &[(usize, u8)]) -> String {
    let mut out = String::new();
    let mut k = 0;
    for block in body.split("\n\n").filter(|b| !b.is_empty()) {
        let mut lines = Vec::new();
        for line in block.lines() {
            match line
                .strip_prefix("data: ")
                .map(serde_json::from_str::<serde_json::Value>)
            {
                Some(Ok(mut v)) => {
                    if let Some(&(node, kind)) = edits.get(k) {
                        let mut n = node;
                        mutate_json(&mut v, &mut n, kind);
                    }
                    k += 1;
                    lines.push(format!("data: {v}"));
                }
                _ => lines.push(line.to_string()),
            }
        }
        out.push_str(&lines.join("\n"));
        out.push_str("\n\n");
    }
    out
}

proptest! {
    #[test]
    fn random_bytes_into_every_importer_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..4_096),
        which in 0usize..=Format::ALL.len(),
    ) {
        check_import(Format::ALL.get(which).copied(), &bytes);
    }

    #[test]
    fn json_shaped_random_lines_never_panic(
        lines in proptest::collection::vec("\\{\"(type|role|message|content|history|messages)\":[ -~]{0,60}\\}", 1..20),
        which in 0usize..=Format::ALL.len(),
    ) {
        let text = lines.join("\n");
        check_import(Format::ALL.get(which).copied(), text.as_bytes());
    }

    #[test]
    fn mutated_real_transcripts_never_panic(
        pick in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..8),
        detect in any::<bool>(),
    ) {
        let seeds = seeds();
        if !seeds.is_empty() {
            let (format, seed) = &seeds[pick % seeds.len()];
            let bytes = apply(seed.clone(), &mutations);
            check_import(if detect { None } else { Some(*format) }, &bytes);
        }
    }

    #[test]
    fn structurally_mutated_real_transcripts_never_panic(
        pick in any::<usize>(),
        edits in proptest::collection::vec((0usize..64, 0usize..40, any::<u8>()), 1..12),
    ) {
        let seeds = seeds();
        if !seeds.is_empty() {
            let (format, seed) = &seeds[pick % seeds.len()];
            let text = String::from_utf8_lossy(seed);
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            for &(line, node, kind) in &edits {
                let i = line % lines.len().max(1);
                if let Some(Ok(mut v)) = lines.get(i).map(|l| serde_json::from_str::<serde_json::Value>(l)) {
                    if kind.is_multiple_of(3) {
                        let mut n = node;
                        mutate_json(&mut v, &mut n, kind);
                    } else {
                        drop_key(&mut v, KEYS[node % KEYS.len()], kind % 3 == 2);
                    }
                    lines[i] = v.to_string();
                }
            }
            check_import(Some(*format), lines.join("\n").as_bytes());
        }
    }

    #[test]
    fn random_bytes_into_both_sse_parsers_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2_048),
        chunk in 1usize..200,
    ) {
        check_sse(sse_openai(&bytes, chunk));
        check_sse(sse_anthropic(&bytes, chunk));
        let framed: Vec<u8> = [b"data: ".as_slice(), &bytes, b"\n\n"].concat();
        check_sse(sse_openai(&framed, chunk));
        check_sse(sse_anthropic(&framed, chunk));
    }

    #[test]
    fn mutated_sse_streams_never_panic(
        pick in any::<usize>(),
        mutations in proptest::collection::vec(mutation(), 1..6),
        chunk in 1usize..120,
    ) {
        let openai = openai_streams();
        let anthropic = anthropic_streams();
        let o = apply(openai[pick % openai.len()].clone().into_bytes(), &mutations);
        let a = apply(anthropic[pick % anthropic.len()].clone().into_bytes(), &mutations);
        check_sse(sse_openai(&o, chunk));
        check_sse(sse_anthropic(&a, chunk));
    }

    #[test]
    fn structurally_mutated_sse_payloads_never_panic(
        pick in any::<usize>(),
        edits in proptest::collection::vec((0usize..12, any::<u8>()), 1..10),
    ) {
        let openai = openai_streams();
        let anthropic = anthropic_streams();
        let o = json_mutated(&openai[pick % openai.len()], &edits);
        let a = json_mutated(&anthropic[pick % anthropic.len()], &edits);
        check_sse(sse_openai(o.as_bytes(), 4096));
        check_sse(sse_anthropic(a.as_bytes(), 4096));
    }

    #[test]
    fn well_formed_streams_assemble_the_same_whatever_the_chunking(chunk in 1usize..64) {
        for body in openai_streams() {
            let whole = sse_openai(body.as_bytes(), usize::MAX);
            let split = sse_openai(body.as_bytes(), chunk);
            match (whole, split) {
                (SseOutcome::Reply(a), SseOutcome::Reply(b)) => prop_assert_eq!(same(&a), same(&b)),
                other => prop_assert!(false, "{:?}", other),
            }
        }
        for body in anthropic_streams() {
            match (sse_anthropic(body.as_bytes(), usize::MAX), sse_anthropic(body.as_bytes(), chunk)) {
                (SseOutcome::Reply(a), SseOutcome::Reply(b)) => prop_assert_eq!(same(&a), same(&b)),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}

/// What a reply says, without its fresh id and timestamp.
fn same(
    r: &pith_router::ChatResponse,
) -> (
    String,
    Vec<pith_core::Part>,
    pith_core::FinishReason,
    pith_core::Usage,
) {
    (r.model.clone(), r.message.parts.clone(), r.finish, r.usage)
}

#[test]
fn every_real_transcript_is_a_seed() {
    // A transcript that does not import whole would not be a seed; the mutations start from
    // all of them.
    if let Some(manifest) = pith_testkit::transcripts::manifest() {
        assert_eq!(
            seeds().len(),
            manifest.len(),
            "every transcript imports and is a seed"
        );
        assert!(seeds().iter().all(|(_, s)| !s.is_empty()));
    }
}

/// Mutated streams through the real providers over loopback HTTP: a reply or a typed error.
#[tokio::test]
async fn fuzzed_sse_bodies_through_the_real_providers_end_to_end() {
    let server = MockServer::start().await;
    let limits = ProviderLimits::default()
        .with_max_retries(0)
        .with_backoff(Duration::from_millis(1), Duration::from_millis(1));
    let config = ProviderConfig::default()
        .with_base_url(format!("{}/v1", server.uri()))
        .with_api_key("sk-fuzz")
        .with_limits(limits);
    let openai = OpenAiCompatible::stacked("openai", &config).unwrap();
    let anthropic = Anthropic::stacked("anthropic", &config).unwrap();
    let cases: usize = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let (mut ok, mut rejected) = (0, 0);
    for case in 0..cases {
        let (bodies, provider): (Vec<String>, &dyn Provider) = if case % 2 == 0 {
            (openai_streams(), &openai)
        } else {
            (anthropic_streams(), &anthropic)
        };
        let mut bytes = bodies[rng.gen_range(0..bodies.len())].clone().into_bytes();
        for _ in 0..rng.gen_range(1..5) {
            let len = bytes.len().max(1);
            match rng.gen_range(0..3) {
                0 => {
                    let i = rng.gen_range(0..len).min(bytes.len().saturating_sub(1));
                    if !bytes.is_empty() {
                        bytes[i] = rng.gen();
                    }
                }
                1 => bytes.truncate(rng.gen_range(0..len)),
                _ => {
                    let i = rng.gen_range(0..=bytes.len());
                    bytes.splice(i..i, (0..rng.gen_range(1..8)).map(|_| rng.gen::<u8>()));
                }
            }
        }
        server.reset().await;
        Mock::given(method("POST"))
            .respond_with(sse_response(String::from_utf8_lossy(&bytes).into_owned()))
            .mount(&server)
            .await;
        let request = ChatRequest::new("m", vec![Message::user("hi")]).streaming(true);
        match provider.chat(request, None).await {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                rejected += 1;
            }
        }
    }
    eprintln!("{cases} fuzzed streams: {ok} replies, {rejected} typed errors");
    assert_eq!(ok + rejected, cases);
}
