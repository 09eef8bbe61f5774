//! Added latency at the threshold crossing: speculative against synchronous compaction, with a
//! summary model that takes `--summary-ms` (2 s by default). Runs both modes `--runs` times,
//! alternating, and prints each run and the medians (JSON with `--json`).
//!
//! ```text
//! speculative                 # 5 runs per mode, 2 s summaries
//! speculative --short         # CI: 1 run per mode, 300 ms summaries
//! ```

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use pith_bench::speculative::{run, LatencyConfig, LatencyRun};

/// Added latency of a compaction at the threshold crossing.
#[derive(Debug, Parser)]
#[command(name = "speculative")]
struct Args {
    /// Runs per mode.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The summary model's latency, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    summary_ms: u64,
    /// One run per mode with 300 ms summaries (for CI).
    #[arg(long)]
    short: bool,
    /// Prints the runs as JSON.
    #[arg(long)]
    json: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let (runs, summary_ms) = if args.short {
        (1, 300)
    } else {
        (args.runs.max(1), args.summary_ms)
    };
    let mut all: Vec<LatencyRun> = Vec::new();
    for _ in 0..runs {
        for speculative in [false, true] {
            let config = LatencyConfig::default()
                .with_summary_latency(Duration::from_millis(summary_ms))
                .with_speculative(speculative);
            match run(config).await {
                Ok(r) => {
                    if !args.json {
                        println!(
                            "{:<11} turns {:>2}  crossing turn {:>8.1} ms  typical {:>6.1} ms  added {:>8.1} ms  summary calls {}  tokens {} -> {}",
                            if speculative { "speculative" } else { "synchronous" },
                            r.turns,
                            r.crossing_turn_ms,
                            r.typical_turn_ms,
                            r.added_ms,
                            r.summary_calls,
                            r.tokens_before,
                            r.tokens_after
                        );
                    }
                    all.push(r);
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let added = |spec: bool| {
        median(
            all.iter()
                .filter(|r| r.speculative == spec)
                .map(|r| r.added_ms)
                .collect(),
        )
    };
    let (sync, spec) = (added(false), added(true));
    if args.json {
        let out = serde_json::json!({
            "summary_ms": summary_ms,
            "runs": all,
            "median_added_ms": { "synchronous": sync, "speculative": spec },
        });
        println!("{out:#}");
    } else {
        println!("median added latency ({summary_ms} ms summaries, {runs} runs per mode): synchronous {sync:.1} ms, speculative {spec:.1} ms");
    }
    // Speculation must have removed most of the summary's latency from the crossing turn.
    if spec > sync / 2.0 {
        eprintln!("error: speculative compaction did not hide the summary latency");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
