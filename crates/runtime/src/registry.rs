//! The tool registry: the tools of a runtime, by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use pith_core::ToolDeclaration;

use crate::tool::Tool;

/// Two tools were registered under one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tool named {0:?} is already registered")]
pub struct DuplicateTool(pub String);

/// The tools a runtime offers the model, keyed by name.
///
/// Declarations come out sorted by name, so the tool block of every request is byte-identical
/// from turn to turn (which keeps provider prompt caches warm).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool; a second tool with the same name is an error.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), DuplicateTool> {
        let name = tool.name().to_string();
        if self.tools.contains_key(&name) {
            return Err(DuplicateTool(name));
        }
        self.tools.insert(name, tool);
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The declarations sent to the model, sorted by name.
    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.tools.values().map(|t| t.declaration()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{FnTool, ToolContext, ToolError};

    fn echo(name: &str) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(
            name,
            "echoes",
            serde_json::json!({"type": "object"}),
            |args: serde_json::Value, _ctx: ToolContext| async move { Ok::<_, ToolError>(args.to_string()) },
        ))
    }

    #[test]
    fn names_are_unique_and_declarations_sorted() {
        let mut r = ToolRegistry::new();
        r.register(echo("zeta")).unwrap();
        r.register(echo("alpha")).unwrap();
        assert_eq!(r.register(echo("alpha")), Err(DuplicateTool("alpha".into())));
        let names: Vec<String> = r.declarations().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert_eq!(r.len(), 2);
        assert!(r.get("zeta").is_some());
        assert!(r.get("nope").is_none());
    }
}
