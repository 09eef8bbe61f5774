//! pith-import.
