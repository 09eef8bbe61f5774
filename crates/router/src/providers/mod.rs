//! Provider implementations: the two wire protocols and the scripted provider.

pub mod anthropic;
pub mod anthropic_wire;
mod http;
pub mod openai;
pub mod openai_wire;
pub mod scripted;

pub use http::{IncompleteStream, MalformedStream};
