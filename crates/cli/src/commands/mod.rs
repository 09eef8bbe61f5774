//! Command-line definitions and dispatch.

/// Writes a line to standard output, returning the I/O error (a closed pipe ends the command
/// quietly instead of panicking).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// Writes to standard output without a newline; see `outln!`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod chat;
mod demo;
mod replay;
mod sessions;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use crate::replay::Policy;
use crate::store_url::{StoreUrl, DEFAULT_STORE};

/// pith: an agent runtime whose core is context compaction done right.
#[derive(Debug, Parser)]
#[command(name = "pith", version, about, long_about = None)]
pub struct Cli {
    /// Where sessions are stored: sqlite://path, postgres://…, jsonl://dir or memory.
    #[arg(long, global = true, default_value = DEFAULT_STORE, env = "PITH_STORE")]
    pub store: StoreUrl,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a long generated coding-agent session offline and show compaction at work.
    Demo {
        /// Seed of the session generator.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Number of user requests in the session.
        #[arg(long, default_value_t = 12)]
        turns: usize,
        /// Context window of the simulated model.
        #[arg(long, default_value_t = 32_000)]
        window: u64,
    },
    /// Replay a recorded agent session (Claude Code, Codex, pi, SWE-agent, mini-SWE-agent, OpenHands,
    /// aider) through the runtime and report every compaction.
    Replay {
        /// The transcript file.
        file: PathBuf,
        /// Context window to replay under.
        #[arg(long, default_value_t = 128_000)]
        window: u64,
        /// Compaction policy.
        #[arg(long, value_enum, default_value_t = Policy::Pith)]
        policy: Policy,
        /// Summarise with this model (provider/model) instead of the deterministic summarizer.
        #[arg(long)]
        summary_model: Option<String>,
        /// Write the model view right after each compaction into this directory (one JSON file each).
        #[arg(long)]
        dump_views: Option<PathBuf>,
        /// Reject this model call (1-based) once as a context overflow, to exercise compact-and-retry.
        #[arg(long)]
        simulate_overflow_at: Option<u64>,
        /// Turn tiered compaction (masking old tool outputs before summarising) on, whatever the
        /// policy's default.
        #[arg(long, conflicts_with = "no_tiered")]
        tiered: bool,
        /// Turn tiered compaction off (summarise only), whatever the policy's default.
        #[arg(long)]
        no_tiered: bool,
        /// Share of the threshold a committed view may use, instead of the policy's (0.6).
        #[arg(long)]
        target_ratio: Option<f64>,
    },
    /// Import a recorded agent session into the store.
    Import {
        /// The transcript file.
        file: PathBuf,
    },
    /// List, show, export or delete stored sessions.
    Sessions {
        /// What to do.
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// Compact a stored session now.
    Compact {
        /// The session id.
        id: String,
        /// Extra instructions for the summary.
        #[arg(long)]
        instructions: Option<String>,
        /// Summarise with this model (provider/model) instead of the deterministic summarizer.
        #[arg(long)]
        summary_model: Option<String>,
        /// Context window of the session's model (default: the model catalogue's).
        #[arg(long)]
        window: Option<u64>,
    },
    /// Show or reset a session's compaction circuit breaker.
    Circuit {
        /// What to do.
        #[command(subcommand)]
        action: CircuitAction,
    },
    /// Chat with a model, streaming its replies (type /exit or end input to leave).
    Chat {
        /// The model, as provider/model (providers come from OPENAI_* / ANTHROPIC_* variables).
        #[arg(long, default_value = "openai/gpt-4o-mini")]
        model: String,
        /// Continue this session instead of creating one.
        #[arg(long)]
        session: Option<String>,
    },
}

/// `pith sessions …`
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions.
    List,
    /// Show a session: record, generation, revisions, breaker and view.
    Show {
        /// The session id.
        id: String,
    },
    /// Export the view of a revision.
    Export {
        /// The session id.
        id: String,
        /// The generation to export (default: the latest).
        #[arg(long)]
        revision: Option<u64>,
        /// `json`: the exact revision document (its sha256 goes to stderr); `jsonl`: one view
        /// message per line.
        #[arg(long, default_value = "json", value_parser = ["json", "jsonl"])]
        format: String,
        /// Write into this file instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Delete a session with its whole history.
    Delete {
        /// The session id.
        id: String,
    },
}

/// `pith circuit …`
#[derive(Debug, Subcommand)]
pub enum CircuitAction {
    /// Show the breaker.
    Status {
        /// The session id.
        id: String,
    },
    /// Close the breaker so compaction calls the model again.
    Reset {
        /// The session id.
        id: String,
    },
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    let json = cli.json;
    match cli.command {
        Command::Demo { seed, turns, window } => demo::run(&cli.store, seed, turns, window, json).await,
        Command::Replay {
            file,
            window,
            policy,
            summary_model,
            dump_views,
            simulate_overflow_at,
            tiered,
            no_tiered,
            target_ratio,
        } => {
            let args = replay::ReplayArgs {
                file,
                window,
                policy,
                summary_model,
                dump_views,
                simulate_overflow_at,
                tiered: match (tiered, no_tiered) {
                    (true, _) => Some(true),
                    (_, true) => Some(false),
                    _ => None,
                },
                target_ratio,
            };
            replay::run(&cli.store, args, json).await
        }
        Command::Import { file } => replay::import(&cli.store, &file, json).await,
        Command::Sessions { action } => sessions::run(&cli.store, action, json).await,
        Command::Compact {
            id,
            instructions,
            summary_model,
            window,
        } => sessions::compact(&cli.store, &id, instructions, summary_model, window, json).await,
        Command::Circuit { action } => sessions::circuit(&cli.store, action, json).await,
        Command::Chat { model, session } => chat::run(&cli.store, &model, session.as_deref()).await,
    }
}
