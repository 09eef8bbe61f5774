//! Provider implementations.

pub mod scripted;
