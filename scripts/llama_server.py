"""Serves a GGUF model over llama.cpp's own OpenAI-compatible HTTP server (via xllamacpp).

Usage: llama_server.py MODEL_GGUF N_CTX PORT

Binds 127.0.0.1:PORT with one slot (n_parallel = 1), so the whole n_ctx belongs to one request,
prints one line "pith-llama ready http://127.0.0.1:PORT" once the server listens, and serves until
it is killed (SIGTERM / SIGINT).
"""

import signal
import sys
import threading


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: llama_server.py MODEL_GGUF N_CTX PORT", file=sys.stderr)
        return 2
    model, n_ctx, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = model
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.hostnames = ["127.0.0.1"]
    params.port = port
    # Small CPU machine: two threads, no warm-up run, quiet logs.
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.warmup = False

    server = xlc.Server(params)
    print(f"pith-llama ready http://127.0.0.1:{port}", flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
