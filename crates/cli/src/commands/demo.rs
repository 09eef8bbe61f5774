//! `pith demo`: the main job, fully offline.

use anyhow::{bail, Result};

use super::replay::{print_report, replay_with_progress};
use crate::demo_session;
use crate::replay::{ReplayInput, ReplayOptions};
use crate::store_url::StoreUrl;

/// The model call the demo's simulated provider rejects once as too long.
pub const DEMO_OVERFLOW_CALL: u64 = 20;

pub async fn run(store: &StoreUrl, seed: u64, turns: usize, window: u64, json: bool) -> Result<()> {
    if turns == 0 {
        bail!("--turns must be at least 1");
    }
    let generated = demo_session::generate(seed, turns, "demo/coding-agent");
    let input = ReplayInput {
        format: "demo".into(),
        record: generated.record,
        entries: generated.entries,
    };
    let options = ReplayOptions::new(window).with_overflow_at(Some(DEMO_OVERFLOW_CALL));
    let report = replay_with_progress(store, input, options, json, "demo").await?;
    print_report(&report, json)?;
    if !json {
        outln!(
            "\n{} compactions ({} after a provider overflow: compacted and retried); the full history stays \
             in the store — try `pith sessions show {}`",
            report.compactions.len(),
            report.count_trigger("reactive"),
            report.session_id
        );
    }
    Ok(())
}
