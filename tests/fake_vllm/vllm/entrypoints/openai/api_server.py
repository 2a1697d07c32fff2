"""vLLM's API server's command line over the loopback judge server (see the package's docstring)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # tests/: judge_server
import judge_server  # noqa: E402


def _log(line: str) -> None:
    with open(os.environ["FAKE_VLLM_LOG"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


async def _serve(host: str, port: int, name: str) -> None:
    from aiohttp import web

    config = Path(os.environ["FAKE_VLLM_LOG"]).with_name("config.json")  # faults a test asks for
    given = json.loads(config.read_text()) if config.exists() else {}
    judge = judge_server.make_server({**given, "models": [name]})
    runner = web.ServerRunner(judge, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    _log(f"start {name}")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"http://{host}:{port}/_admin/stats") as r:
        requests = (await r.json())["requests"]
    _log(f"stop {name} {requests}")
    await runner.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--served-model-name")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    args, _ = ap.parse_known_args()
    asyncio.run(_serve(args.host, args.port, args.served_model_name or args.model))


if __name__ == "__main__":
    main()
