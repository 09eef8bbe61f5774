//! pith-compaction.
