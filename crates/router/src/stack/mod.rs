//! The per-provider tower stack.
//!
//! Every HTTP provider call goes through, outermost first:
//! [`concurrency`] (calls in flight) → [`rate_limit`] (requests per second and tokens per minute,
//! one limiter shared by all clones) → [`retry`] (exponential backoff with jitter, `Retry-After`,
//! retryable errors only) → [`timeout`] (whole attempt and idle stream) → the wire [`Endpoint`].
//!
//! The stack's request type is a [`ProviderCall`]: the normalised request plus a channel for
//! stream events, because a caller's `&dyn StreamSink` cannot travel through `'static` services.
//! [`StackedProvider`] bridges the two: it implements [`crate::Provider`], sends the call through
//! the stack and forwards the events to the sink while the call runs.
//!
//! Every service reports readiness at once and waits inside its response future instead; that
//! keeps clones independent while they still share the budgets held behind `Arc`s.

pub mod concurrency;
pub mod rate_limit;
pub mod retry;
pub mod timeout;

mod call;
mod endpoint;
mod provider;

pub use call::ProviderCall;
pub use endpoint::{Endpoint, EndpointService};
pub use provider::StackedProvider;

/// The future every stack service returns.
pub type ResponseFuture =
    futures::future::BoxFuture<'static, Result<crate::ChatResponse, crate::ProviderError>>;
