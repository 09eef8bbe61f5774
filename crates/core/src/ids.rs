//! Identifier newtypes.
//!
//! Session and entry ids are UUID v7: time-ordered, so sorting ids sorts by creation time, and
//! unique without coordination between processes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A string that is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {input:?}: expected a UUID such as 0190f0a4-7c1e-7b3a-9d2e-1f2a3b4c5d6e")]
pub struct IdParseError {
    /// Which kind of id was expected ("session" or "entry").
    pub kind: &'static str,
    /// The rejected input (truncated to 64 characters).
    pub input: String,
}

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// Creates a fresh, time-ordered (UUID v7) id.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID.
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The underlying UUID.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdParseError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s.trim()).map(Self).map_err(|_| IdParseError {
                    kind: $kind,
                    input: s.chars().take(64).collect(),
                })
            }
        }
    };
}

id_newtype!(
    /// Identifies a session: one conversation with its append-only log.
    SessionId,
    "session"
);
id_newtype!(
    /// Identifies one entry of a session log. Unique across the log, unlike provider tool-call ids.
    EntryId,
    "entry"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_display_and_serde() {
        let id = SessionId::new();
        let parsed: SessionId = id.to_string().parse().unwrap();
        assert_eq!(id, parsed);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        let back: SessionId = serde_json::from_str(&json).unwrap();
        assert_eq!(back, id);
    }

    #[test]
    fn ids_are_v7_and_time_ordered() {
        let a = EntryId::new();
        let b = EntryId::new();
        assert_eq!(a.as_uuid().get_version_num(), 7);
        assert!(a < b);
    }

    #[test]
    fn invalid_id_is_a_typed_error() {
        let err = "../../etc/passwd".parse::<SessionId>().unwrap_err();
        assert_eq!(err.kind, "session");
        assert!(err.to_string().contains("invalid session id"));
    }
}
