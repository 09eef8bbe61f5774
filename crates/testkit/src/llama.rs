//! The local llama.cpp server for tests.
//!
//! `scripts/test` (through `scripts/lib/llama.sh`) prepares a Python venv with the prebuilt
//! `xllamacpp` wheel and a 135M GGUF model, and exports `PITH_LLAMA_PYTHON` and
//! `PITH_LLAMA_MODEL`. [`LlamaServer::start`] runs `scripts/llama_server.py` with them on a free
//! loopback port: llama.cpp's own OpenAI-compatible HTTP server, one slot, the given `n_ctx`.
//! Outside CI, missing variables skip the test with a message; under CI they fail it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::transcripts::is_ci;

/// A running llama.cpp server; the process is killed when this is dropped.
#[derive(Debug)]
pub struct LlamaServer {
    child: Child,
    port: u16,
    n_ctx: u32,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

fn health_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.1 200")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/llama_server.py")
}

impl LlamaServer {
    /// Starts a server whose single slot holds `n_ctx` tokens and waits until `/health`
    /// answers 200. Returns `None` (after printing "SKIP: ...") when the runtime is not set up
    /// and this is not CI.
    ///
    /// # Panics
    /// Under CI when the runtime is missing, and whenever the server does not come up within
    /// 60 seconds.
    pub fn start(n_ctx: u32) -> Option<LlamaServer> {
        let python = std::env::var_os("PITH_LLAMA_PYTHON");
        let model = std::env::var_os("PITH_LLAMA_MODEL");
        let (Some(python), Some(model)) = (python, model) else {
            if is_ci() {
                panic!("CI=true but PITH_LLAMA_PYTHON / PITH_LLAMA_MODEL are unset: run the tests through scripts/test");
            }
            eprintln!(
                "SKIP: local llama.cpp server not set up — run `source scripts/lib/llama.sh && pith_llama_setup` \
                 (or scripts/test) to export PITH_LLAMA_PYTHON and PITH_LLAMA_MODEL"
            );
            return None;
        };
        let port = free_port();
        let child = Command::new(&python)
            .arg(script())
            .arg(&model)
            .arg(n_ctx.to_string())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.to_string_lossy()));
        let mut server = LlamaServer { child, port, n_ctx };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !health_ok(port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("llama server exited early with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "llama server did not become healthy within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(server)
    }

    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// The context size of the server's slot.
    pub fn n_ctx(&self) -> u32 {
        self.n_ctx
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process-wide lock for tests that use a llama server: the machine has few cores and the
/// model answers one request at a time, so such tests run one after another. Hold the guard
/// (`let _guard = llama::serial().lock().await;`) for the whole test.
pub fn serial() -> &'static tokio::sync::Mutex<()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// The same lock for synchronous tests (`blocking_lock` must not be called inside a runtime).
pub fn serial_blocking() -> tokio::sync::MutexGuard<'static, ()> {
    serial().blocking_lock()
}
