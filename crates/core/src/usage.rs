//! Token usage as reported by providers, normalised.
//!
//! Providers disagree on what "input tokens" means: OpenAI's `prompt_tokens` includes the cached
//! tokens it also reports as `cached_tokens`, while Anthropic's `input_tokens` excludes the cache
//! read and cache write counts it reports beside it. [`Usage`] stores four counts that never
//! overlap, so sums and context sizes are right whichever provider produced them.

use serde::{Deserialize, Serialize};

/// Token counts of one model call; the four fields never overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens that were neither read from nor written to a prompt cache.
    #[serde(default)]
    pub input: u64,
    /// Generated tokens (including reasoning tokens where the provider counts them as output).
    #[serde(default)]
    pub output: u64,
    /// Input tokens served from the provider's prompt cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Input tokens written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write: u64,
}

impl Usage {
    /// Builds usage from OpenAI-style counts, where `prompt_tokens` includes `cached_tokens`.
    pub fn from_openai(prompt_tokens: u64, completion_tokens: u64, cached_tokens: u64) -> Self {
        Self {
            input: prompt_tokens.saturating_sub(cached_tokens),
            output: completion_tokens,
            cache_read: cached_tokens.min(prompt_tokens),
            cache_write: 0,
        }
    }

    /// Builds usage from Anthropic-style counts, where the input excludes both cache counts.
    pub fn from_anthropic(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Self {
        Self {
            input,
            output,
            cache_read,
            cache_write,
        }
    }

    /// All prompt tokens the provider processed: uncached input plus cache read and write.
    pub fn prompt_tokens(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }

    /// The size of the context this reply measured: everything sent plus everything generated.
    pub fn context_tokens(&self) -> u64 {
        self.prompt_tokens() + self.output
    }

    /// Whether every count is zero (the provider reported nothing).
    pub fn is_zero(&self) -> bool {
        self.context_tokens() == 0
    }

    /// Adds another call's usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(mut self, rhs: Usage) -> Usage {
        Usage::add(&mut self, &rhs);
        self
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_prompt_tokens_include_cached_ones() {
        let u = Usage::from_openai(1_000, 50, 600);
        assert_eq!(u.input, 400);
        assert_eq!(u.cache_read, 600);
        assert_eq!(u.prompt_tokens(), 1_000);
        assert_eq!(u.context_tokens(), 1_050);
    }

    #[test]
    fn anthropic_input_excludes_cache_counts() {
        let u = Usage::from_anthropic(10, 20, 3_000, 500);
        assert_eq!(u.prompt_tokens(), 3_510);
        assert_eq!(u.context_tokens(), 3_530);
    }

    #[test]
    fn openai_cached_larger_than_prompt_is_clamped() {
        let u = Usage::from_openai(100, 1, 500);
        assert_eq!(u.input, 0);
        assert_eq!(u.cache_read, 100);
    }

    #[test]
    fn sums_add_each_field() {
        let total: Usage = [Usage::from_openai(10, 1, 0), Usage::from_anthropic(1, 2, 3, 4)]
            .into_iter()
            .sum();
        assert_eq!(
            total,
            Usage {
                input: 11,
                output: 3,
                cache_read: 3,
                cache_write: 4
            }
        );
    }
}
