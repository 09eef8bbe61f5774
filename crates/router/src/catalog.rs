//! The model catalogue: context windows and output limits.

use std::collections::HashMap;
use std::sync::RwLock;

/// What pith knows about a model's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelInfo {
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens.
    pub max_output: u64,
}

/// Default window of models the catalogue does not know (low for most current models, so
/// compaction comes early rather than too late).
pub const DEFAULT_WINDOW: u64 = 128_000;
/// Window of Claude models.
pub const CLAUDE_WINDOW: u64 = 200_000;
/// Default output limit.
pub const DEFAULT_MAX_OUTPUT: u64 = 8_192;

/// Context windows by model, with overrides and limits learned from overflow errors.
#[derive(Debug, Default)]
pub struct ModelCatalog {
    overrides: RwLock<HashMap<String, ModelInfo>>,
    learned: RwLock<HashMap<String, u64>>,
}

impl ModelCatalog {
    /// A catalogue with only the built-in families.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a model's limits explicitly (configuration wins over the built-in table).
    pub fn set(&self, model: &str, info: ModelInfo) {
        if let Ok(mut map) = self.overrides.write() {
            map.insert(model.to_string(), info);
        }
    }

    /// Records the real window a provider stated in an overflow error. Only ever lowers it.
    pub fn learn_window(&self, model: &str, window: u64) {
        if window == 0 {
            return;
        }
        if let Ok(mut map) = self.learned.write() {
            let entry = map.entry(model.to_string()).or_insert(window);
            *entry = (*entry).min(window);
        }
    }

    /// The limits of a model.
    pub fn info(&self, model: &str) -> ModelInfo {
        let mut info = self
            .overrides
            .read()
            .ok()
            .and_then(|m| m.get(model).copied())
            .unwrap_or_else(|| builtin(model));
        if let Some(learned) = self.learned.read().ok().and_then(|m| m.get(model).copied()) {
            info.context_window = info.context_window.min(learned);
        }
        info
    }
}

/// Built-in families: (name prefix, context window, max output). The first matching prefix
/// wins, so longer prefixes come before the families they refine. Names are matched after the
/// last `/` and lower-cased, so `openrouter/openai/gpt-4o` finds `gpt-4o`.
const FAMILIES: &[(&str, u64, u64)] = &[
    // OpenAI
    ("gpt-5", 400_000, 128_000),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4o-mini", 128_000, 16_384),
    ("gpt-4o", 128_000, 16_384),
    ("chatgpt-4o", 128_000, 16_384),
    ("gpt-4-turbo", 128_000, 4_096),
    ("gpt-4-32k", 32_768, 4_096),
    ("gpt-4", 8_192, 8_192),
    ("gpt-3.5-turbo", 16_385, 4_096),
    ("o1-mini", 128_000, 65_536),
    ("o1", 200_000, 100_000),
    ("o3", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
    // Google
    ("gemini-1.5-pro", 2_097_152, 8_192),
    ("gemini-1.5-flash", 1_048_576, 8_192),
    ("gemini-2.0", 1_048_576, 8_192),
    ("gemini-2.5", 1_048_576, 65_536),
    // Others served through OpenAI-compatible APIs
    ("grok-4", 256_000, 32_768),
    ("grok-3", 131_072, 16_384),
    ("deepseek", 128_000, 8_192),
    ("mistral-large", 128_000, 8_192),
    ("codestral", 256_000, 8_192),
];

/// Claude families by name fragment: (fragment, max output). Every Claude has a 200k window.
const CLAUDE_OUTPUT: &[(&str, u64)] = &[
    ("opus-4-5", 64_000),
    ("opus-4", 32_000),
    ("sonnet-4", 64_000),
    ("haiku-4", 64_000),
    ("3-7-sonnet", 64_000),
    ("3-5", 8_192),
    ("claude-3", 4_096),
];

fn builtin(model: &str) -> ModelInfo {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    if name.contains("claude") {
        let max_output = CLAUDE_OUTPUT
            .iter()
            .find(|(fragment, _)| name.contains(fragment))
            .map_or(DEFAULT_MAX_OUTPUT, |(_, out)| *out);
        return ModelInfo {
            context_window: CLAUDE_WINDOW,
            max_output,
        };
    }
    FAMILIES
        .iter()
        .find(|(prefix, _, _)| name.starts_with(prefix))
        .map_or(
            ModelInfo {
                context_window: DEFAULT_WINDOW,
                max_output: DEFAULT_MAX_OUTPUT,
            },
            |(_, context_window, max_output)| ModelInfo {
                context_window: *context_window,
                max_output: *max_output,
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_learning() {
        let c = ModelCatalog::new();
        assert_eq!(c.info("anthropic/claude-sonnet-4").context_window, 200_000);
        assert_eq!(c.info("openai/gpt-4o").context_window, 128_000);
        assert_eq!(c.info("openai/gpt-4.1-mini").context_window, 1_047_576);
        assert_eq!(c.info("openai/o3-mini").context_window, 200_000);
        assert_eq!(c.info("openrouter/openai/gpt-4o-mini").max_output, 16_384);
        assert_eq!(
            c.info("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0")
                .max_output,
            8_192
        );
        assert_eq!(c.info("anthropic/claude-opus-4-1").max_output, 32_000);
        assert_eq!(c.info("local/some-model").context_window, DEFAULT_WINDOW);
        c.learn_window("local/tiny", 1_024);
        assert_eq!(c.info("local/tiny").context_window, 1_024);
        c.learn_window("local/tiny", 4_096);
        assert_eq!(c.info("local/tiny").context_window, 1_024);
    }
}
