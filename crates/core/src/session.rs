//! The session record: what a session is, apart from its log.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::SessionId;

/// A tool the model may call, as declared to the provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    /// The tool's name.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON schema of the arguments.
    #[serde(default = "empty_object")]
    pub parameters: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// The record of a session: its model, tools and times.
///
/// The log of messages lives beside it in the store; the record is small and cheap to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's id.
    pub id: SessionId,
    /// The model turns are sent to, as `provider/model` or an alias.
    pub model: String,
    /// Tools declared to the model.
    #[serde(default)]
    pub tools: Vec<ToolDeclaration>,
    /// When the session was created.
    pub created_at: DateTime<Utc>,
    /// When the session was last changed.
    pub updated_at: DateTime<Utc>,
    /// The number of compactions committed so far (0 = the original view). Maintained by the store.
    #[serde(default)]
    pub generation: u64,
}

impl SessionRecord {
    /// A new record with a fresh id, created now.
    pub fn new(model: impl Into<String>, tools: Vec<ToolDeclaration>) -> Self {
        let now = Utc::now();
        Self {
            id: SessionId::new(),
            model: model.into(),
            tools,
            created_at: now,
            updated_at: now,
            generation: 0,
        }
    }
}
