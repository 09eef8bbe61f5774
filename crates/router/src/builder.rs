//! Building a [`ModelRouter`] from configuration or the environment.

use std::sync::Arc;

use crate::catalog::ModelInfo;
use crate::config::ProviderConfig;
use crate::error::ProviderError;
use crate::provider::Provider;
use crate::providers::anthropic::Anthropic;
use crate::providers::openai::OpenAiCompatible;
use crate::router::ModelRouter;
use crate::secret::SecretString;

/// Builds a [`ModelRouter`]; configuration errors surface once, from [`RouterBuilder::build`].
#[derive(Debug, Default)]
pub struct RouterBuilder {
    router: ModelRouter,
    error: Option<ProviderError>,
}

impl RouterBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(mut self, name: String, provider: Result<Arc<dyn Provider>, ProviderError>) -> Self {
        match provider {
            Ok(p) => self.router = self.router.with_provider(name, p),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
        self
    }

    /// Registers an OpenAI-compatible provider under `name`, wrapped in its tower stack.
    pub fn openai(self, name: impl Into<String>, config: ProviderConfig) -> Self {
        let name = name.into();
        let provider =
            OpenAiCompatible::stacked(name.clone(), &config).map(|p| Arc::new(p) as Arc<dyn Provider>);
        self.add(name, provider)
    }

    /// Registers an Anthropic provider under `name`, wrapped in its tower stack.
    pub fn anthropic(self, name: impl Into<String>, config: ProviderConfig) -> Self {
        let name = name.into();
        let provider = Anthropic::stacked(name.clone(), &config).map(|p| Arc::new(p) as Arc<dyn Provider>);
        self.add(name, provider)
    }

    /// Registers any provider under `name`.
    pub fn provider(self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.add(name.into(), Ok(provider))
    }

    /// Adds an alias for a `provider/model` name.
    pub fn alias(mut self, alias: impl Into<String>, target: impl Into<String>) -> Self {
        self.router = self.router.with_alias(alias, target);
        self
    }

    /// Sets the fallback chain of a model.
    pub fn fallbacks(mut self, model: impl Into<String>, chain: Vec<String>) -> Self {
        self.router = self.router.with_fallbacks(model, chain);
        self
    }

    /// Overrides a model's limits in the catalogue.
    pub fn model(mut self, model: &str, info: ModelInfo) -> Self {
        self.router = self.router.with_model(model, info);
        self
    }

    /// The router, or the first configuration error.
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] from any provider added.
    pub fn build(self) -> Result<ModelRouter, ProviderError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.router),
        }
    }

    /// Registers the providers the environment configures (see [`ModelRouter::from_env`]),
    /// reading variables through `var`.
    pub fn from_vars(mut self, var: impl Fn(&str) -> Option<String>) -> Self {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let (openai_url, openai_key) = (var("OPENAI_BASE_URL"), var("OPENAI_API_KEY"));
        if openai_url.is_some() || openai_key.is_some() {
            let config = ProviderConfig {
                base_url: openai_url,
                api_key: openai_key.map(SecretString::from),
                ..ProviderConfig::default()
            };
            self = self.openai("openai", config);
        }
        if let Some(key) = var("ANTHROPIC_API_KEY") {
            let config = ProviderConfig {
                base_url: var("ANTHROPIC_BASE_URL"),
                api_key: Some(SecretString::from(key)),
                ..ProviderConfig::default()
            };
            self = self.anthropic("anthropic", config);
        }
        self
    }
}

impl ModelRouter {
    /// A builder.
    pub fn builder() -> RouterBuilder {
        RouterBuilder::new()
    }

    /// A router with the providers the environment configures, each with default limits:
    /// `openai` when `OPENAI_BASE_URL` or `OPENAI_API_KEY` is set (the key is optional for local
    /// servers), `anthropic` when `ANTHROPIC_API_KEY` is set (`ANTHROPIC_BASE_URL` optional).
    ///
    /// # Errors
    /// [`ProviderError::InvalidConfig`] for a malformed URL or key.
    pub fn from_env() -> Result<ModelRouter, ProviderError> {
        RouterBuilder::new().from_vars(|k| std::env::var(k).ok()).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_registers_only_configured_providers() {
        let router = RouterBuilder::new()
            .from_vars(|k| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_string()))
            .build()
            .unwrap();
        let debug = format!("{router:?}");
        assert!(
            debug.contains("openai") && !debug.contains("anthropic"),
            "{debug}"
        );
        let err = RouterBuilder::new()
            .from_vars(|k| (k == "OPENAI_BASE_URL").then(|| "not a url".to_string()))
            .build()
            .unwrap_err();
        assert!(matches!(err, ProviderError::InvalidConfig(_)));
    }

    #[test]
    fn keys_never_appear_in_debug() {
        let config = ProviderConfig::default().with_api_key("sk-secret-value");
        assert!(!format!("{config:?}").contains("sk-secret"));
        let p = OpenAiCompatible::new("openai", &config).unwrap();
        assert!(!format!("{p:?}").contains("sk-secret"));
    }
}
