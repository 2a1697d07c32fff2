"""A stand-in for ``python -m llama_cpp.server`` that dies like a llama.cpp built for another CPU.

It answers ``GET /v1/models`` as the real server does (so hf-judge's local judge starts it and sees it
ready), answers the first ``DYING_LLAMA_AFTER`` (default 0) ``POST /v1/chat/completions`` with a valid reply
(each integer of the requested schema at its minimum), then, on the next, kills itself with
``DYING_LLAMA_SIGNAL`` (default SIGSEGV: what a general protection fault on an AMX instruction the OS does not
enable delivers; SIGILL for an instruction the CPU lacks). :func:`install` puts it where
``python -m llama_cpp.server`` finds it first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def install(folder: Path) -> Path:
    """A ``llama_cpp`` package in ``folder`` whose ``server`` runs this script, and an empty package for each other
    module the local judge checks for that this environment lacks (the `local` extra need not be installed): put
    ``folder`` first on ``sys.path`` and on the server's ``PYTHONPATH``. Returns ``folder``."""
    import importlib.util

    from hf_judge.transport.local import SERVER_MODULES

    server = folder / "llama_cpp" / "server"
    server.mkdir(parents=True)
    (folder / "llama_cpp" / "__init__.py").write_text("")
    (server / "__init__.py").write_text("")
    (server / "__main__.py").write_text(f"import runpy\nrunpy.run_path({str(Path(__file__))!r}, run_name='__main__')\n")
    for name in SERVER_MODULES[1:]:
        if importlib.util.find_spec(name) is None:
            (folder / name).mkdir()
            (folder / name / "__init__.py").write_text("")
    return folder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_alias", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_known_args()[0]
    alias = args.model_alias
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file left behind
    sig = getattr(signal, os.environ.get("DYING_LLAMA_SIGNAL", "SIGSEGV"))
    left = [int(os.environ.get("DYING_LLAMA_AFTER", "0"))]
    lock = threading.Condition()
    answering = [0]  # replies being written: the crash waits for them, so exactly DYING_LLAMA_AFTER arrive

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self._send({"object": "list", "data": [{"id": alias, "object": "model"}]})

        def _send(self, doc: dict) -> None:
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                answer = left[0] > 0
                left[0] -= 1
                answering[0] += answer
            if answer:
                schema = request["response_format"]["json_schema"]["schema"]["properties"]
                content = {k: v.get("minimum", 1) if v.get("type") == "integer" else "ok" for k, v in schema.items()}
                message = {"role": "assistant", "content": json.dumps(content)}
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                try:
                    self._send({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage})
                finally:
                    with lock:
                        answering[0] -= 1
                        lock.notify_all()
                return
            with lock:  # a reply still being written reaches its client before the crash
                lock.wait_for(lambda: answering[0] == 0, timeout=10)
            print("llama_new_context_with_model: n_ctx = 2048", flush=True)  # and then nothing: the crash
            os.kill(os.getpid(), sig)  # Python leaves SIGSEGV, SIGILL and SIGBUS at their default: death

        def log_message(self, *a) -> None:
            pass

    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    sys.exit(main())
