//! wiremock builders for the two wire protocols.
