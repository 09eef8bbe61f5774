//! Draws `docs/budget-check.png` from the criterion results of the `budget` bench.
//!
//! Usage: `plot-budget [CRITERION_DIR] [OUT_PNG]`; defaults: `$CARGO_TARGET_DIR/criterion` (else
//! `target/criterion`) and `docs/budget-check.png`. Prints the medians it drew.

use std::path::PathBuf;
use std::process::ExitCode;

use pith_bench::plot::{self, Series};

/// The bench group and its functions, in the order of the figure's colours.
const GROUP: &str = "budget_check";
const FUNCTIONS: [&str; 3] = ["prepare", "request_messages", "context_tokens_uncached"];
const SIZES: [u64; 4] = [100, 1_000, 10_000, 100_000];

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let criterion = args.next().map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target"))
            .join("criterion")
    });
    let out = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("docs/budget-check.png"));
    let mut series = Vec::new();
    for function in FUNCTIONS {
        let mut points = Vec::new();
        for size in SIZES {
            match plot::median_ns(&criterion, GROUP, function, size) {
                Ok(Some(ns)) => points.push((size, ns)),
                Ok(None) => {}
                Err(e) => {
                    eprintln!("plot-budget: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        println!("{function}: {points:?}");
        series.push(Series {
            name: function.to_string(),
            points,
        });
    }
    match plot::draw(&series, &out, 900, 600) {
        Ok(()) => {
            println!("wrote {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("plot-budget: {e}");
            ExitCode::FAILURE
        }
    }
}
