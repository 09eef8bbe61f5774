//! Token counting.
//!
//! Decisions about the window need a token count before the provider has seen the request. The
//! default [`EstimateCounter`] is cheap and deterministic: UTF-8 bytes / 4 rounded up, 1,200 tokens
//! a picture and 2,000 a document page. [`TiktokenCounter`] counts exactly for OpenAI model
//! families, whose tokenizers are public (the vocabularies are embedded; nothing is downloaded).

use std::sync::Arc;

use crate::message::{Message, Part};
use crate::session::ToolDeclaration;

mod json_text;

use json_text::{json_len, push_json};

/// Estimated tokens of one picture.
pub const IMAGE_TOKENS: u64 = 1_200;
/// Estimated tokens of one document page.
pub const DOCUMENT_PAGE_TOKENS: u64 = 2_000;

/// Counts tokens of text and of the parts built from it.
pub trait TokenCounter: Send + Sync {
    /// Tokens of a piece of text.
    fn count_text(&self, text: &str) -> u64;

    /// Tokens of tool arguments as a provider receives them: the count of
    /// [`arguments_text`]`(value)`.
    ///
    /// The default serialises the value; a counter that depends on the length only overrides it to
    /// measure the JSON without building it (tool arguments are counted on every planning pass).
    fn count_json(&self, value: &serde_json::Value) -> u64 {
        self.count_text(&arguments_text(value))
    }

    /// Tokens of any text of `bytes` UTF-8 bytes, when the count depends on the length only
    /// (`None` otherwise, the default).
    ///
    /// Lets callers measure text they would otherwise have to build first, such as a clipped tool
    /// output, from its length alone.
    fn count_len(&self, bytes: usize) -> Option<u64> {
        let _ = bytes;
        None
    }

    /// Tokens of one part.
    fn count_part(&self, part: &Part) -> u64 {
        match part {
            Part::Text { text } => self.count_text(text),
            Part::Image { .. } => IMAGE_TOKENS,
            Part::Document { pages, .. } => u64::from(*pages).max(1) * DOCUMENT_PAGE_TOKENS,
            Part::ToolCall { name, arguments, .. } => self.count_text(name) + self.count_json(arguments),
            Part::ToolResult { content, .. } => self.count_text(content),
            Part::Reasoning { text, .. } => self.count_text(text),
        }
    }

    /// Tokens of one message.
    fn count_message(&self, message: &Message) -> u64 {
        message.parts.iter().map(|p| self.count_part(p)).sum()
    }

    /// Tokens of a list of messages.
    fn count_messages(&self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.count_message(m)).sum()
    }

    /// Tokens of the tool declarations sent with a request.
    fn count_tools(&self, tools: &[ToolDeclaration]) -> u64 {
        tools
            .iter()
            .map(|t| {
                self.count_text(&t.name) + self.count_text(&t.description) + self.count_json(&t.parameters)
            })
            .sum()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn count_text(&self, text: &str) -> u64 {
        (**self).count_text(text)
    }
    fn count_part(&self, part: &Part) -> u64 {
        (**self).count_part(part)
    }
    fn count_message(&self, message: &Message) -> u64 {
        (**self).count_message(message)
    }
    fn count_json(&self, value: &serde_json::Value) -> u64 {
        (**self).count_json(value)
    }
    fn count_len(&self, bytes: usize) -> Option<u64> {
        (**self).count_len(bytes)
    }
}

/// The JSON text of tool arguments as a provider receives it (a string stays as is).
pub fn arguments_text(arguments: &serde_json::Value) -> String {
    match arguments {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Bytes of [`arguments_text`]`(arguments)`, measured without building the text.
pub fn arguments_len(arguments: &serde_json::Value) -> usize {
    match arguments {
        serde_json::Value::String(s) => s.len(),
        other => json_len(other),
    }
}

/// Appends [`arguments_text`]`(arguments)` to `out` without an intermediate string.
pub fn push_arguments_text(out: &mut String, arguments: &serde_json::Value) {
    match arguments {
        serde_json::Value::String(s) => out.push_str(s),
        other => push_json(out, other),
    }
}

/// The default estimate: UTF-8 bytes / 4, rounded up.
#[derive(Debug, Clone, Copy, Default)]
pub struct EstimateCounter;

impl EstimateCounter {
    /// Tokens of `bytes` bytes of text.
    pub const fn bytes_to_tokens(bytes: u64) -> u64 {
        bytes.div_ceil(4)
    }
}

impl TokenCounter for EstimateCounter {
    fn count_text(&self, text: &str) -> u64 {
        Self::bytes_to_tokens(text.len() as u64)
    }
    fn count_json(&self, value: &serde_json::Value) -> u64 {
        Self::bytes_to_tokens(arguments_len(value) as u64)
    }
    fn count_len(&self, bytes: usize) -> Option<u64> {
        Some(Self::bytes_to_tokens(bytes as u64))
    }
}

/// An exact counter for OpenAI model families (cl100k, o200k, ...).
#[derive(Clone)]
pub struct TiktokenCounter {
    bpe: Arc<tiktoken_rs::CoreBPE>,
    encoding: &'static str,
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl TiktokenCounter {
    /// The counter for a model name (`gpt-4o`, `openai/gpt-4.1`, ...), or `None` when the model's
    /// tokenizer is not public.
    pub fn for_model(model: &str) -> Option<Self> {
        let name = model.rsplit('/').next().unwrap_or(model);
        let tokenizer = tiktoken_rs::tokenizer::get_tokenizer(name)?;
        use tiktoken_rs::tokenizer::Tokenizer;
        let (bpe, encoding) = match tokenizer {
            Tokenizer::O200kBase => (tiktoken_rs::o200k_base().ok()?, "o200k_base"),
            Tokenizer::Cl100kBase => (tiktoken_rs::cl100k_base().ok()?, "cl100k_base"),
            Tokenizer::P50kBase => (tiktoken_rs::p50k_base().ok()?, "p50k_base"),
            Tokenizer::P50kEdit => (tiktoken_rs::p50k_edit().ok()?, "p50k_edit"),
            Tokenizer::R50kBase | Tokenizer::Gpt2 => (tiktoken_rs::r50k_base().ok()?, "r50k_base"),
            #[allow(unreachable_patterns)]
            _ => return None,
        };
        Some(Self {
            bpe: Arc::new(bpe),
            encoding,
        })
    }

    /// The name of the encoding in use.
    pub fn encoding(&self) -> &'static str {
        self.encoding
    }
}

impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> u64 {
        self.bpe.encode_with_special_tokens(text).len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Role;

    #[test]
    fn estimate_is_bytes_over_four_rounded_up() {
        let c = EstimateCounter;
        assert_eq!(c.count_text(""), 0);
        assert_eq!(c.count_text("abc"), 1);
        assert_eq!(c.count_text("abcd"), 1);
        assert_eq!(c.count_text("abcde"), 2);
        // UTF-8 bytes, not characters: "é" is two bytes.
        assert_eq!(c.count_text("éééé"), 2);
    }

    #[test]
    fn pictures_and_pages_have_fixed_costs() {
        let c = EstimateCounter;
        let m = Message::new(
            Role::User,
            vec![
                Part::Image {
                    media_type: "image/png".into(),
                    source: "x".into(),
                },
                Part::Document {
                    media_type: "application/pdf".into(),
                    pages: 3,
                    source: "y".into(),
                    title: None,
                },
            ],
        );
        assert_eq!(c.count_message(&m), 1_200 + 6_000);
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\\\\\"\\n\\t\\x00-\\x1fa-zé😀]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn json_is_counted_exactly_as_its_text(value in json_value()) {
            let text = arguments_text(&value);
            proptest::prop_assert_eq!(arguments_len(&value), text.len());
            let mut pushed = String::from("x");
            push_arguments_text(&mut pushed, &value);
            proptest::prop_assert_eq!(&pushed[1..], text.as_str());
            proptest::prop_assert_eq!(EstimateCounter.count_json(&value), EstimateCounter.count_text(&text));
            let shared: Arc<dyn TokenCounter> = Arc::new(EstimateCounter);
            proptest::prop_assert_eq!(shared.count_json(&value), EstimateCounter.count_text(&text));
        }

        #[test]
        fn long_strings_are_escaped_as_serde_escapes_them(
            pieces in proptest::collection::vec("[a-z\"\\\\\n\t\x00-\x1fé😀€ ]{0,24}", 0..300),
        ) {
            let value = serde_json::json!({ "content": pieces.concat(), "n": 1 });
            let mut pushed = String::new();
            push_arguments_text(&mut pushed, &value);
            proptest::prop_assert_eq!(pushed, value.to_string());
        }

        #[test]
        fn length_only_counts_match_the_text(text in proptest::arbitrary::any::<String>()) {
            proptest::prop_assert_eq!(EstimateCounter.count_len(text.len()), Some(EstimateCounter.count_text(&text)));
        }
    }

    #[test]
    fn a_counter_without_a_length_rule_serialises_arguments() {
        struct Chars;
        impl TokenCounter for Chars {
            fn count_text(&self, text: &str) -> u64 {
                text.chars().count() as u64
            }
        }
        let args = serde_json::json!({"path": "é/a.rs", "n": [1, 2.5, null]});
        assert_eq!(
            Chars.count_json(&args),
            arguments_text(&args).chars().count() as u64
        );
        assert_eq!(Chars.count_len(10), None);
        let string_args = serde_json::Value::String("{\"a\":1}".into());
        assert_eq!(EstimateCounter.count_json(&string_args), 2);
    }

    #[test]
    fn tiktoken_counts_openai_models_exactly() {
        let c = TiktokenCounter::for_model("openai/gpt-4o").unwrap();
        assert_eq!(c.encoding(), "o200k_base");
        assert_eq!(c.count_text("hello world"), 2);
        assert!(TiktokenCounter::for_model("claude-sonnet-4").is_none());
    }
}
