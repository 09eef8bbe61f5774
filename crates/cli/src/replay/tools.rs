//! The tools of a replay: each answers with the recorded result of the call it receives.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use pith_runtime::{Tool, ToolContext, ToolError};

/// Recorded results by call id; repeated ids are served in recorded order.
#[derive(Debug, Default)]
pub struct RecordedResults {
    by_call: Mutex<HashMap<String, VecDeque<(String, bool)>>>,
}

impl RecordedResults {
    /// Results from the script.
    pub fn new(results: HashMap<String, Vec<(String, bool)>>) -> Self {
        Self {
            by_call: Mutex::new(results.into_iter().map(|(k, v)| (k, v.into())).collect()),
        }
    }

    fn take(&self, call_id: &str) -> Option<(String, bool)> {
        let mut map = match self.by_call.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        map.get_mut(call_id).and_then(VecDeque::pop_front)
    }
}

/// A tool named like a recorded one that answers from the recording.
#[derive(Debug, Clone)]
pub struct ReplayTool {
    name: String,
    results: Arc<RecordedResults>,
}

impl ReplayTool {
    /// The tool `name`, answering from `results`.
    pub fn new(name: impl Into<String>, results: Arc<RecordedResults>) -> Self {
        Self {
            name: name.into(),
            results,
        }
    }
}

#[async_trait]
impl Tool for ReplayTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        "Answers with the result recorded in the replayed session."
    }

    fn schema(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }

    async fn execute(&self, _args: serde_json::Value, ctx: ToolContext) -> Result<String, ToolError> {
        match self.results.take(&ctx.call_id) {
            Some((content, false)) => Ok(content),
            Some((content, true)) => Err(ToolError::failed(content)),
            None => Err(ToolError::failed(format!(
                "the recording has no result for call {}",
                ctx.call_id
            ))),
        }
    }
}
