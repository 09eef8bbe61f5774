//! `pith replay` and `pith import`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use pith_store::{AppendRequest, CreateSession};

use crate::replay::{self, Policy, ReplayInput, ReplayOptions, ReplayReport};
use crate::store_url::StoreUrl;

/// Arguments of `pith replay`.
#[derive(Debug)]
pub struct ReplayArgs {
    pub file: PathBuf,
    pub window: u64,
    pub policy: Policy,
    pub summary_model: Option<String>,
    pub dump_views: Option<PathBuf>,
    pub simulate_overflow_at: Option<u64>,
    pub tiered: Option<bool>,
    pub target_ratio: Option<f64>,
}

/// A progress bar on standard error, hidden for JSON output or when stderr is not a terminal.
pub(super) fn progress_bar(json: bool, label: &str) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} turns ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    bar
}

/// Prints a report as JSON or as a table.
pub(super) fn print_report(report: &ReplayReport, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(report)?);
    } else {
        out!("{}", report.render());
    }
    Ok(())
}

fn import_file(file: &Path) -> Result<pith_import::ImportedSession> {
    pith_import::import_file(file).with_context(|| format!("cannot import {}", file.display()))
}

pub(super) async fn replay_with_progress(
    store: &StoreUrl,
    input: ReplayInput,
    options: ReplayOptions,
    json: bool,
    label: &str,
) -> Result<ReplayReport> {
    let store = store.open().await?;
    let bar = progress_bar(json, label);
    let progress_bar = bar.clone();
    let options = options.with_progress(Arc::new(move |done, total| {
        progress_bar.set_length(total);
        progress_bar.set_position(done);
    }));
    let report = replay::replay(input, store, options).await;
    bar.finish_and_clear();
    report
}

pub async fn run(store: &StoreUrl, args: ReplayArgs, json: bool) -> Result<()> {
    let imported = import_file(&args.file)?;
    let input = ReplayInput {
        format: imported.format.as_str().to_string(),
        record: imported.record,
        entries: imported.entries,
    };
    let options = ReplayOptions::new(args.window)
        .with_policy(args.policy)
        .with_summary_model(args.summary_model)
        .with_dump_views(args.dump_views)
        .with_overflow_at(args.simulate_overflow_at)
        .with_tiered(args.tiered)
        .with_target_ratio(args.target_ratio);
    let label = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let report = replay_with_progress(store, input, options, json, &label).await?;
    print_report(&report, json)
}

pub async fn import(store: &StoreUrl, file: &Path, json: bool) -> Result<()> {
    let imported = import_file(file)?;
    let store = store.open().await?;
    let mut create = CreateSession::new(if imported.record.model.is_empty() {
        "imported/unknown".to_string()
    } else {
        imported.record.model.clone()
    })
    .with_tools(imported.record.tools.clone());
    create.id = pith_core::SessionId::new();
    let record = store
        .create_session(create)
        .await
        .context("cannot create the session")?;
    let entries = imported.entries.len();
    if !imported.entries.is_empty() {
        store
            .append(record.id, AppendRequest::new(imported.entries))
            .await
            .context("cannot store the imported entries")?;
    }
    if json {
        let out = serde_json::json!({
            "session_id": record.id.to_string(),
            "format": imported.format.as_str(),
            "entries": entries,
            "skipped": imported.report.skipped,
            "synthesized_results": imported.report.synthesized_results,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!(
            "imported {} entries from {} ({}) into session {}",
            entries,
            file.display(),
            imported.format.as_str(),
            record.id
        );
    }
    Ok(())
}
