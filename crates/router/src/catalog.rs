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

fn builtin(model: &str) -> ModelInfo {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let context_window = if name.contains("claude") {
        CLAUDE_WINDOW
    } else {
        DEFAULT_WINDOW
    };
    ModelInfo {
        context_window,
        max_output: DEFAULT_MAX_OUTPUT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_learning() {
        let c = ModelCatalog::new();
        assert_eq!(c.info("anthropic/claude-sonnet-4").context_window, 200_000);
        assert_eq!(c.info("openai/gpt-4o").context_window, 128_000);
        c.learn_window("local/tiny", 1_024);
        assert_eq!(c.info("local/tiny").context_window, 1_024);
        c.learn_window("local/tiny", 4_096);
        assert_eq!(c.info("local/tiny").context_window, 1_024);
    }
}
