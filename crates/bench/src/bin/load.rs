//! The load harness: N concurrent sessions × T turns through the full runtime against the
//! loopback stub server; prints throughput, overhead percentiles, peak RSS and the log check,
//! and exits non-zero when any entry was lost or duplicated or any turn failed.
//!
//! ```text
//! load --store memory --sessions 10000 --turns 20
//! load --store sqlite --sessions 100 --turns 20
//! load --store postgres --sessions 1000 --turns 20     # feature `postgres`, PITH_TEST_POSTGRES_URL
//! load --short                                         # CI: 50 × 3 on the memory store
//! ```
//!
//! The stub runs in a process of its own (this executable, started with `--serve-stub`), so the
//! peak RSS and CPU per turn are the runtime's; `--in-process-stub` serves it inside instead.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use pith_bench::load::{self, LoadConfig, LoadReport};
use pith_bench::stub::StubConfig;
use pith_bench::stub_process::{serve_until_stdin_closes, SERVE_STUB_FLAG};
use pith_store::{MemoryStore, SessionStore, SqliteStore};

/// The process's allocator: mimalloc (the default feature), as a service running thousands of
/// sessions would choose; build with `--no-default-features` to measure glibc's malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator's name, for the report.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system malloc"
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    Memory,
    Sqlite,
    Postgres,
}

/// Load harness of the pith runtime.
#[derive(Debug, Parser)]
#[command(name = "load")]
struct Args {
    /// The session store.
    #[arg(long, value_enum, default_value = "memory")]
    store: StoreKind,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 1_000)]
    sessions: usize,
    /// Turns per session.
    #[arg(long, default_value_t = 20)]
    turns: usize,
    /// The stub's latency per model call, in milliseconds.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// Tool calls in each tool-calling reply.
    #[arg(long, default_value_t = 2)]
    calls: usize,
    /// Model calls in flight at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Postgres URL (default: PITH_TEST_POSTGRES_URL).
    #[arg(long, env = "PITH_TEST_POSTGRES_URL")]
    postgres_url: Option<String>,
    /// CI mode: 50 sessions × 3 turns, 1 ms latency (overrides --sessions, --turns, --latency-ms).
    #[arg(long)]
    short: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Serve the stub inside this process (its memory and CPU then count in the report).
    #[arg(long)]
    in_process_stub: bool,
}

/// Stub mode: `load --serve-stub <latency µs> <tool calls per reply>` (started by the harness).
async fn serve_stub(args: &[String]) -> ExitCode {
    let parsed = match args {
        [latency_us, calls] => latency_us.parse::<u64>().ok().zip(calls.parse::<usize>().ok()),
        _ => None,
    };
    let Some((latency_us, calls)) = parsed else {
        eprintln!("load: usage: load {SERVE_STUB_FLAG} <latency µs> <tool calls per reply>");
        return ExitCode::FAILURE;
    };
    let config = StubConfig::default()
        .with_latency(Duration::from_micros(latency_us))
        .with_calls_per_reply(calls);
    match serve_until_stdin_closes(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load: the stub failed: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn open_store(
    args: &Args,
    dir: &tempfile::TempDir,
) -> Result<Arc<dyn SessionStore>, Box<dyn std::error::Error>> {
    Ok(match args.store {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Sqlite => Arc::new(SqliteStore::open(dir.path().join("load.db")).await?),
        StoreKind::Postgres => postgres(args).await?,
    })
}

#[cfg(feature = "postgres")]
async fn postgres(args: &Args) -> Result<Arc<dyn SessionStore>, Box<dyn std::error::Error>> {
    let url = args
        .postgres_url
        .as_deref()
        .ok_or("the postgres store needs --postgres-url or PITH_TEST_POSTGRES_URL")?;
    let pool = args.concurrency.clamp(4, 32);
    Ok(Arc::new(
        pith_store::PostgresStore::connect_with_pool_size(url, pool).await?,
    ))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_args: &Args) -> Result<Arc<dyn SessionStore>, Box<dyn std::error::Error>> {
    Err("this build has no postgres store: build with `--features postgres`".into())
}

fn print(report: &LoadReport) {
    let p = |x: &load::Percentiles| {
        format!(
            "p50 {:.0} µs  p99 {:.0} µs  max {:.0} µs",
            x.p50_us, x.p99_us, x.max_us
        )
    };
    println!(
        "store {}: {} sessions × {} turns, stub latency {} ms, {} model-call slots, {ALLOCATOR_NAME}",
        report.store,
        report.sessions,
        report.turns_per_session,
        report.stub_latency_ms,
        report.provider_concurrency
    );
    println!(
        "turns ok {}  failed {}  in {:.2} s: {:.0} turns/s, {:.0} model calls/s",
        report.turns_ok, report.turns_failed, report.elapsed_s, report.turns_per_s, report.model_calls_per_s
    );
    println!(
        "model-call slot wait per turn:                   {}",
        p(&report.slot_wait)
    );
    println!(
        "overhead per turn (wall − stub latency × calls − slot wait): {}",
        p(&report.overhead)
    );
    println!(
        "runtime per turn (wall − time in model calls − slot wait):    {}",
        p(&report.runtime_only)
    );
    println!(
        "store append latency:                            {}",
        p(&report.append_latency)
    );
    println!(
        "compaction commit latency:                       {}",
        p(&report.commit_latency)
    );
    println!(
        "stub replies: {} tool calls, {} final, {} summaries; unattributed calls {}",
        report.stub_replies[0], report.stub_replies[1], report.stub_replies[2], report.unattributed_calls
    );
    match &report.stub_usage {
        Some(stub) => {
            println!(
                "CPU {:.1} s during the turns: {:.0} µs per turn (runtime and HTTP client; the stub process {:.1} s)",
                report.cpu_s, report.cpu_per_turn_us, stub.cpu_s
            );
            println!(
                "peak RSS {:.1} MiB (runtime process; the stub process {:.1} MiB)",
                report.peak_rss_mib, stub.peak_rss_mib
            );
        }
        None => {
            println!(
                "CPU {:.1} s during the turns: {:.0} µs per turn (runtime, HTTP client and stub together)",
                report.cpu_s, report.cpu_per_turn_us
            );
            println!(
                "peak RSS {:.1} MiB (runtime and stub in one process)",
                report.peak_rss_mib
            );
        }
    }
    println!(
        "log check: {} sessions, {} entries, {} compactions, lost {}, duplicated {}",
        report.check.sessions,
        report.check.entries,
        report.check.compactions,
        report.check.lost,
        report.check.duplicated
    );
    for e in &report.first_errors {
        println!("error: {e}");
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some(SERVE_STUB_FLAG) {
        return serve_stub(&raw[2..]).await;
    }
    let mut args = Args::parse();
    if args.short {
        args.sessions = 50;
        args.turns = 3;
        args.latency_ms = 1;
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("load: cannot create a temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let store = match open_store(&args, &dir).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("load: cannot open the {:?} store: {e}", args.store);
            return ExitCode::FAILURE;
        }
    };
    let mut config = LoadConfig::default()
        .with_sessions(args.sessions)
        .with_turns(args.turns)
        .with_provider_concurrency(args.concurrency)
        .with_stub(
            StubConfig::default()
                .with_latency(Duration::from_millis(args.latency_ms))
                .with_calls_per_reply(args.calls),
        );
    if !args.in_process_stub {
        match std::env::current_exe() {
            Ok(exe) => config = config.with_stub_process(exe),
            Err(e) => {
                eprintln!("load: cannot find this executable to run the stub: {e} (try --in-process-stub)");
                return ExitCode::FAILURE;
            }
        }
    }
    let report = match load::run(&config, store).await {
        Ok(r) => r,
        Err(e) => {
            let mut msg = format!("load: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{msg}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("load: cannot serialise the report: {e}"),
        }
    } else {
        print(&report);
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        eprintln!("load: FAILED — lost or duplicated entries, or failed turns");
        ExitCode::FAILURE
    }
}
