//! The bodies of the fuzz targets, shared with the proptest coverage that runs in CI.
//!
//! Each function feeds arbitrary bytes to one parser and returns what it made of them; the
//! promise under test is that it returns (a value or a typed error) and never panics. The SSE
//! functions run the bytes through the same event-stream framing the HTTP providers use
//! (`eventsource-stream`), then through the protocol's public stream state
//! ([`pith_router::providers::openai_wire::StreamState`],
//! [`pith_router::providers::anthropic_wire::StreamState`]).

use futures::StreamExt;
use pith_import::{Format, ImportError, ImportedSession};
use pith_router::{ChatResponse, ProviderError};

/// Imports `data` as `format`, or with format detection when `None`.
pub fn import(format: Option<Format>, data: &[u8]) -> Result<ImportedSession, ImportError> {
    pith_import::import_reader(format, "fuzz-input", data)
}

/// The payloads of the SSE events in `data` (`[DONE]` dropped), split into chunks of `chunk`
/// bytes as a network would deliver them.
pub fn sse_payloads(data: &[u8], chunk: usize) -> Vec<Result<serde_json::Value, String>> {
    use eventsource_stream::Eventsource;
    let chunks = data
        .chunks(chunk.max(1))
        .map(|c| Ok::<_, std::convert::Infallible>(bytes::Bytes::copy_from_slice(c)))
        .collect::<Vec<_>>();
    let stream = futures::stream::iter(chunks).eventsource();
    futures::executor::block_on(stream.collect::<Vec<_>>())
        .into_iter()
        .filter_map(|event| match event {
            Ok(e) if e.data == "[DONE]" => None,
            Ok(e) => Some(serde_json::from_str(&e.data).map_err(|err| err.to_string())),
            Err(err) => Some(Err(err.to_string())),
        })
        .collect()
}

/// The outcome of running a body through a stream state.
#[derive(Debug)]
pub enum SseOutcome {
    /// The stream assembled into a reply.
    Reply(ChatResponse),
    /// The stream was rejected with a typed error.
    Rejected(ProviderError),
    /// An event's payload was not JSON (the providers report this as a malformed stream).
    NotJson(String),
}

/// Runs `data` through the OpenAI-compatible stream state.
pub fn sse_openai(data: &[u8], chunk: usize) -> SseOutcome {
    let mut state = pith_router::providers::openai_wire::StreamState::default();
    for payload in sse_payloads(data, chunk) {
        match payload {
            Ok(p) => {
                if let Err(e) = state.apply(&p) {
                    return SseOutcome::Rejected(e);
                }
            }
            Err(e) => return SseOutcome::NotJson(e),
        }
    }
    match state.finish() {
        Ok(r) => SseOutcome::Reply(r),
        Err(e) => SseOutcome::Rejected(e),
    }
}

/// Runs `data` through the Anthropic stream state.
pub fn sse_anthropic(data: &[u8], chunk: usize) -> SseOutcome {
    let mut state = pith_router::providers::anthropic_wire::StreamState::default();
    for payload in sse_payloads(data, chunk) {
        match payload {
            Ok(p) => {
                if let Err(e) = state.apply(&p) {
                    return SseOutcome::Rejected(e);
                }
            }
            Err(e) => return SseOutcome::NotJson(e),
        }
    }
    match state.finish() {
        Ok(r) => SseOutcome::Reply(r),
        Err(e) => SseOutcome::Rejected(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_openai_stream_assembles_whatever_the_chunking() {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n\
                    data: [DONE]\n\n";
        for chunk in [1, 3, 7, 1000] {
            match sse_openai(body.as_bytes(), chunk) {
                SseOutcome::Reply(r) => assert_eq!(r.message.text_content(), "Hello"),
                other => panic!("chunk {chunk}: {other:?}"),
            }
        }
        assert!(matches!(
            sse_openai(b"data: {\"cho\n\n", 4),
            SseOutcome::NotJson(_)
        ));
        assert!(matches!(sse_openai(b"data: {\"cho", 4), SseOutcome::Rejected(_)));
    }
}
