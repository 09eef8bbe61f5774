//! The `Tool` trait: what an embedding program registers so the model can act.

use std::sync::Arc;

use async_trait::async_trait;
use pith_core::{SessionId, ToolDeclaration};
use tokio_util::sync::CancellationToken;

/// What a tool call knows about where it runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolContext {
    /// The session the call belongs to.
    pub session_id: SessionId,
    /// The provider's id of the call.
    pub call_id: String,
    /// Cancelled when the turn is cancelled or the call times out; long-running tools should
    /// watch it and stop early.
    pub cancel: CancellationToken,
}

impl ToolContext {
    /// A context for one call.
    pub fn new(session_id: SessionId, call_id: impl Into<String>, cancel: CancellationToken) -> Self {
        Self {
            session_id,
            call_id: call_id.into(),
            cancel,
        }
    }
}

/// Why a tool call failed. The model receives the message as an error tool result; the turn
/// goes on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not match what the tool accepts.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The tool failed with an underlying error.
    #[error("{0}")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ToolError {
    /// A failure with a message for the model.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }
}

/// A tool the model may call.
///
/// `execute` receives the arguments as the model wrote them (JSON) and returns the text the model
/// sees. An `Err` is not a failed turn: it becomes an error tool result, so the model can react.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The tool's name, unique within a runtime.
    fn name(&self) -> &str;

    /// What the tool does, for the model.
    fn description(&self) -> &str;

    /// JSON schema of the arguments.
    fn schema(&self) -> serde_json::Value;

    /// Runs one call.
    async fn execute(&self, args: serde_json::Value, ctx: ToolContext) -> Result<String, ToolError>;

    /// The declaration sent to the model.
    fn declaration(&self) -> ToolDeclaration {
        ToolDeclaration {
            name: self.name().to_string(),
            description: self.description().to_string(),
            parameters: self.schema(),
        }
    }
}

#[async_trait]
impl<T: Tool + ?Sized> Tool for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn description(&self) -> &str {
        (**self).description()
    }

    fn schema(&self) -> serde_json::Value {
        (**self).schema()
    }

    async fn execute(&self, args: serde_json::Value, ctx: ToolContext) -> Result<String, ToolError> {
        (**self).execute(args, ctx).await
    }

    fn declaration(&self) -> ToolDeclaration {
        (**self).declaration()
    }
}

/// A tool built from a name, a description, a schema and an async closure.
///
/// Handy for examples and small embeddings where a dedicated type would be ceremony.
pub struct FnTool<F> {
    name: String,
    description: String,
    schema: serde_json::Value,
    f: F,
}

impl<F> std::fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

impl<F, Fut> FnTool<F>
where
    F: Fn(serde_json::Value, ToolContext) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, ToolError>> + Send,
{
    /// A tool named `name` that runs `f`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: serde_json::Value,
        f: F,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            schema,
            f,
        }
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(serde_json::Value, ToolContext) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, ToolError>> + Send,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn schema(&self) -> serde_json::Value {
        self.schema.clone()
    }

    async fn execute(&self, args: serde_json::Value, ctx: ToolContext) -> Result<String, ToolError> {
        (self.f)(args, ctx).await
    }
}
