//! pith-runtime.
