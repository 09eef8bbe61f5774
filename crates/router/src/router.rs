//! The model router.

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::{ModelCatalog, ModelInfo};
use crate::error::ProviderError;
use crate::overflow;
use crate::provider::{Provider, StreamSink};
use crate::request::{ChatRequest, ChatResponse};

/// Routes requests by model name to providers.
///
/// Model names are `provider/model` (the part before the first `/` names a registered provider)
/// or an alias that resolves to one. The router owns the model catalogue; when a provider's
/// overflow error states the real window, the catalogue learns it.
#[derive(Clone, Default)]
pub struct ModelRouter {
    providers: HashMap<String, Arc<dyn Provider>>,
    aliases: HashMap<String, String>,
    fallbacks: HashMap<String, Vec<String>>,
    catalog: Arc<ModelCatalog>,
}

impl std::fmt::Debug for ModelRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.providers.keys().collect();
        names.sort();
        f.debug_struct("ModelRouter")
            .field("providers", &names)
            .field("aliases", &self.aliases)
            .finish()
    }
}

impl ModelRouter {
    /// A router with no providers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a provider under `name` (the prefix of `name/model`).
    pub fn with_provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(name.into(), provider);
        self
    }

    /// Adds an alias that resolves to a `provider/model` name.
    pub fn with_alias(mut self, alias: impl Into<String>, target: impl Into<String>) -> Self {
        self.aliases.insert(alias.into(), target.into());
        self
    }

    /// Sets the models tried, in order, when `model` fails with a retryable error.
    pub fn with_fallbacks(mut self, model: impl Into<String>, chain: Vec<String>) -> Self {
        self.fallbacks.insert(model.into(), chain);
        self
    }

    /// Sets a model's limits (overrides the built-in table).
    pub fn with_model(self, model: &str, info: ModelInfo) -> Self {
        self.catalog.set(&self.resolve_name(model), info);
        self
    }

    /// The catalogue.
    pub fn catalog(&self) -> &ModelCatalog {
        &self.catalog
    }

    /// The limits of a model.
    pub fn model_info(&self, model: &str) -> ModelInfo {
        self.catalog.info(&self.resolve_name(model))
    }

    /// The context window of a model, in tokens.
    pub fn context_window(&self, model: &str) -> u64 {
        self.model_info(model).context_window
    }

    /// Records the window a provider stated for a model.
    pub fn learn_window(&self, model: &str, window: u64) {
        self.catalog.learn_window(&self.resolve_name(model), window);
    }

    /// The full `provider/model` name of a model or alias.
    pub fn resolve_name(&self, model: &str) -> String {
        let mut name = model.to_string();
        // Aliases may chain; bound the walk so a cycle cannot hang.
        for _ in 0..8 {
            match self.aliases.get(&name) {
                Some(target) => name = target.clone(),
                None => break,
            }
        }
        name
    }

    fn provider_for(&self, model: &str) -> Result<(Arc<dyn Provider>, String), ProviderError> {
        let full = self.resolve_name(model);
        let (prefix, bare) = full
            .split_once('/')
            .ok_or_else(|| ProviderError::UnknownModel(full.clone()))?;
        let provider = self
            .providers
            .get(prefix)
            .ok_or_else(|| ProviderError::UnknownModel(full.clone()))?;
        Ok((provider.clone(), bare.to_string()))
    }

    /// Sends a request to the provider of `request.model`; learns the window from overflow
    /// errors that state it; tries the fallback chain on retryable failures.
    ///
    /// A successful reply that reports more input than the catalogue's window, or that stopped
    /// for length with no output after filling 99% of it, is returned as
    /// [`ProviderError::ContextOverflow`] (see [`overflow::response_overflow`]).
    pub async fn chat(
        &self,
        request: ChatRequest,
        sink: Option<&dyn StreamSink>,
    ) -> Result<ChatResponse, ProviderError> {
        let primary = self.resolve_name(&request.model);
        let mut chain = vec![primary.clone()];
        chain.extend(self.fallbacks.get(&primary).cloned().unwrap_or_default());
        let mut last_err = None;
        let last = chain.len() - 1;
        // The last model of the chain (the only one without fallbacks) gets the request itself;
        // earlier ones a copy, kept in case the next model needs it.
        let mut request = Some(request);
        for (i, model) in chain.into_iter().enumerate() {
            let (provider, bare) = self.provider_for(&model)?;
            let next = if i == last {
                request.take()
            } else {
                request.clone()
            };
            let Some(mut req) = next else { break };
            req.model = bare;
            let result = provider.chat(req, sink).await.and_then(|resp| {
                // Providers that accept an oversized request say so only through usage.
                let window = self.catalog.info(&model).context_window;
                match overflow::response_overflow(&resp, window) {
                    Some(err) => Err(err),
                    None => Ok(resp),
                }
            });
            match result {
                Ok(resp) => return Ok(resp),
                Err(err) => {
                    if let ProviderError::ContextOverflow {
                        limit: Some(limit), ..
                    } = &err
                    {
                        self.catalog.learn_window(&model, *limit);
                    }
                    if !err.is_retryable() {
                        return Err(err);
                    }
                    last_err = Some(err);
                }
            }
        }
        Err(last_err.unwrap_or(ProviderError::UnknownModel(primary)))
    }
}
