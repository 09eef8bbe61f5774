//! Secrets such as API keys.
//!
//! A [`SecretString`] never shows its value in `Debug` or `Display`, so a key cannot leak through
//! a logged config, a tracing field or a panic message. The only way to read it is
//! [`SecretString::expose`], which the HTTP providers call when they set the request header.

use std::fmt;

/// A string whose value is redacted wherever it is formatted.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is empty (an unset key in a config file).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString(\"[redacted]\")")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for SecretString {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for SecretString {
    fn from(value: &str) -> Self {
        Self(value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let key = SecretString::new("sk-live-123456");
        assert!(!format!("{key:?}").contains("sk-live"));
        assert!(!format!("{key}").contains("sk-live"));
        assert_eq!(key.expose(), "sk-live-123456");
        assert!(!key.is_empty());
    }
}
