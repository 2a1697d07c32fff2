"""Throughput and memory of score_dataset against the floor and the openai SDK.

Starts the loopback judge server (tests/judge_server.py) in its own process,
then runs each client in a fresh subprocess against it, in the same run:

* floor    - a bare aiohttp request loop: N workers posting back to back, same bodies, same event loop
* hf_judge - score_dataset end to end (Dataset in, DatasetDict out, cache on, fresh cache dir)
* openai   - the openai SDK's AsyncOpenAI loop (default transport)

and prints requests/s, client CPU ms per request, peak RSS and the ratios.

    python bench/bench_throughput.py            # every scenario (a)-(e), (r), (h) and (s), ~20 min
    python bench/bench_throughput.py --quick    # a few thousand requests: checks it works
    python bench/bench_throughput.py --only a,c # some scenarios
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "judge_server.py"

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "score": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["reason", "score"],
    "additionalProperties": False,
}


def body_for(i: int) -> dict:
    return {
        "model": "judge",
        "messages": [{"role": "user", "content": f"Rate the clarity of answer {i} to question {i}."}],
        "temperature": 0.1,
        "top_p": 1.0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "QA_Clarity", "schema": SCHEMA, "strict": True},
        },
    }


# -- memory ----------------------------------------------------------------------
# Peak RSS (ru_maxrss) also counts file-backed pages of the memory-mapped Arrow
# files. hf_judge releases the input's as it reads them (hf_judge/pages.py);
# the result file is mapped whole by the Dataset.from_file that ends every
# Dataset.map (pyarrow's stream reader and the kernel's fault-around), ~56 MB
# at 1,000,000 rows of QA_All. Peak anonymous RSS is the memory the process
# itself allocates.
ANON_PEAK = [0]


def watch_anon(every: float = 0.05) -> None:
    """Sample RssAnon (kB) in a daemon thread; the maximum goes to ANON_PEAK."""
    import threading

    def sample():
        while True:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        ANON_PEAK[0] = max(ANON_PEAK[0], int(line.split()[1]))
                        break
            time.sleep(every)

    if os.path.exists("/proc/self/status"):
        threading.Thread(target=sample, daemon=True).start()


# -- clients (each runs in its own process) --------------------------------------
def child_floor(url: str, n: int, concurrency: int) -> None:
    """The floor: `concurrency` workers, each posting requests back to back on one
    aiohttp session, on the same event loop hf_judge uses (uvloop when installed)."""
    import asyncio

    import aiohttp
    import orjson

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def main():
        counter = iter(range(n))
        headers = {"Content-Type": "application/json", "Authorization": "Bearer x"}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:

            async def worker():
                for i in counter:
                    async with s.post(url + "/chat/completions", data=orjson.dumps(body_for(i)), headers=headers) as r:
                        d = orjson.loads(await r.read())
                        assert d["choices"][0]["message"]["content"]

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    asyncio.run(main())


def child_openai(url: str, n: int, concurrency: int) -> None:
    import asyncio

    from openai import AsyncOpenAI

    async def main():
        # the default transport, with a timeout long enough that queueing for its pool is not an error
        client = AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=600.0)
        sem = asyncio.Semaphore(concurrency)

        async def one(i):
            async with sem:
                b = body_for(i)
                r = await client.chat.completions.create(
                    model=b["model"],
                    messages=b["messages"],
                    temperature=0.1,
                    top_p=1.0,
                    response_format=b["response_format"],
                )
                assert r.choices[0].message.content

        await asyncio.gather(*(one(i) for i in range(n)))
        await client.close()

    asyncio.run(main())


def make_dataset(n: int, where: str):
    from datasets import Dataset

    def gen():
        for i in range(n):
            yield {"question": f"question {i}: what is {i} squared?", "answer": f"answer {i}: {i * i}"}

    return Dataset.from_generator(gen, cache_dir=where)


def child_hf_judge(url: str, n: int, concurrency: int, metric: str = "QA_Clarity") -> None:
    import datasets

    if not os.environ.get("HF_JUDGE_BENCH_PROGRESS"):  # =1 measures the cost of the live bar
        datasets.disable_progress_bars()
    from hf_judge import score_dataset

    work = tempfile.mkdtemp(prefix="hfj-bench-")
    ds = make_dataset(n, os.path.join(work, "data"))
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    out = score_dataset(
        ds,
        [metric],
        model="judge",
        base_url=url,
        api_key="x",
        concurrency=concurrency,
        columns={"instruction": "question", "output": "answer"},
        cache_dir=os.path.join(work, "cache"),
    )
    dt = time.perf_counter() - t0
    assert len(out["errors"]) == 0, out["errors"][:3]
    assert len(out["train"]) == n
    print(json.dumps({"inner_s": dt, "inner_cpu": time.process_time() - cpu0}))


def make_parquet(n: int, where: str, shards: int = 4) -> list[str]:
    """``n`` rows as Parquet shards, written in chunks (the benchmark's own memory stays flat)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(where, exist_ok=True)
    paths, per = [], -(-n // shards)
    for s in range(shards):
        paths.append(os.path.join(where, f"train-{s:05d}.parquet"))
        with pq.ParquetWriter(paths[-1], pa.schema({"question": pa.string(), "answer": pa.string()})) as w:
            for lo in range(s * per, min(n, (s + 1) * per), 10_000):
                ids = range(lo, min(n, (s + 1) * per, lo + 10_000))
                w.write_table(
                    pa.table(
                        {
                            "question": [f"question {i}: what is {i} squared?" for i in ids],
                            "answer": [f"answer {i}: {i * i}" for i in ids],
                        }
                    )
                )
    return paths


def child_stream(url: str, n: int, concurrency: int, metric: str = "QA_Clarity") -> None:
    """score_dataset on a streamed Parquet input (load_dataset(..., streaming=True)), saved as Parquet shards."""
    import datasets

    datasets.disable_progress_bars()
    from hf_judge import score_dataset

    work = tempfile.mkdtemp(prefix="hfj-bench-")
    files = make_parquet(n, os.path.join(work, "data"))
    ds = datasets.load_dataset("parquet", data_files={"train": files}, streaming=True)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    out = score_dataset(
        ds,
        [metric],
        model="judge",
        base_url=url,
        api_key="x",
        concurrency=concurrency,
        columns={"instruction": "question", "output": "answer"},
        cache_dir=os.path.join(work, "cache"),
    )
    out.save_to_disk(os.path.join(work, "out"))
    dt = time.perf_counter() - t0
    assert out.summary.rows == {"train": n} and not out.summary.errors, (out.summary.rows, out.summary.errors)
    print(json.dumps({"inner_s": dt, "inner_cpu": time.process_time() - cpu0}))


def child_repeat(url: str, n: int, concurrency: int, metric: str = "QA_Clarity") -> None:
    """Score n rows, then time the identical second call (it must send nothing)."""
    import datasets

    if not os.environ.get("HF_JUDGE_BENCH_PROGRESS"):  # =1 measures the cost of the live bar
        datasets.disable_progress_bars()
    from hf_judge import score_dataset

    work = tempfile.mkdtemp(prefix="hfj-bench-")
    ds = make_dataset(n, os.path.join(work, "data"))
    kw = dict(
        model="judge",
        base_url=url,
        api_key="x",
        concurrency=concurrency,
        columns={"instruction": "question", "output": "answer"},
        cache_dir=os.path.join(work, "cache"),
    )
    first = score_dataset(ds, [metric], **kw)
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    second = score_dataset(ds, [metric], **kw)
    dt = time.perf_counter() - t0
    assert second.summary.requests == 0 and len(second["train"]) == n
    assert second["train"][-1] == first["train"][-1]
    print(json.dumps({"inner_s": dt, "inner_cpu": time.process_time() - cpu0}))


def child_hostile(url: str, n: int, concurrency: int, metric: str = "QA_Clarity") -> None:
    """score_dataset with default settings against whatever the server sends; a stop (the circuit
    breaker, once most replies are over max_reply_bytes) is an outcome here, not a failure."""
    import datasets

    datasets.disable_progress_bars()
    from hf_judge import RunStopped, score_dataset

    work = tempfile.mkdtemp(prefix="hfj-bench-")
    ds = make_dataset(n, os.path.join(work, "data"))
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    try:
        out = score_dataset(
            ds,
            [metric],
            model="judge",
            base_url=url,
            api_key="x",
            concurrency=concurrency,
            columns={"instruction": "question", "output": "answer"},
            cache_dir=os.path.join(work, "cache"),
        )
        outcome = f"finished, {len(out['errors']):,} error rows"
    except RunStopped as e:
        outcome = f"stopped: {type(e).__name__}"
    took = {"inner_s": time.perf_counter() - t0, "inner_cpu": time.process_time() - cpu0}
    print(json.dumps({**took, "outcome": outcome}))


def run_child(kind: str, url: str, n: int, concurrency: int, metric: str = "QA_Clarity") -> dict:
    code = (
        "import resource, sys, time, json; sys.path.insert(0, %r); "  # noqa: UP031 - Python source full of braces
        "import bench_throughput as b; b.watch_anon(); "
        "t=time.perf_counter(); c=time.process_time(); b.child_%s(%r, %d, %d%s); "
        "print(json.dumps({'wall': time.perf_counter()-t, 'cpu': time.process_time()-c, "
        "'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024, 'anon_mb': b.ANON_PEAK[0]/1024}))"
    ) % (
        str(Path(__file__).parent),
        kind,
        url,
        n,
        concurrency,
        f", {metric!r}" if kind in ("hf_judge", "repeat", "hostile", "stream") else "",
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{p.stderr[-3000:]}")
    lines = [json.loads(x) for x in p.stdout.strip().splitlines() if x.startswith("{")]
    res = lines[-1]
    if kind in ("hf_judge", "repeat", "hostile", "stream") and len(lines) > 1:
        # time the scoring itself, not the interpreter start and the dataset build
        res["wall"] = lines[0]["inner_s"]
        res["cpu"] = lines[0]["inner_cpu"]
        res["outcome"] = lines[0].get("outcome")
    res["rps"] = n / res["wall"]
    res["cpu_ms_per_req"] = 1000 * res["cpu"] / n
    return res


# -- the server ---------------------------------------------------------------------
class Server:
    def __init__(self):
        self.p = subprocess.Popen(
            [sys.executable, str(SERVER), "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True
        )
        line = self.p.stdout.readline()
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def admin(self, path: str, cfg: dict | None = None) -> dict:
        data = json.dumps(cfg or {}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/_admin/{path}",
            data=data if path != "stats" else None,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def configure(self, **cfg):
        self.admin("reset", {})
        self.admin("config", cfg)

    def stop(self):
        self.p.terminate()
        self.p.wait(10)


def scenario(
    server: Server,
    _label: str,
    n: int,
    conc: int,
    cfg: dict,
    clients=("floor", "hf_judge", "openai"),
    metric="QA_Clarity",
    n_for: dict | None = None,
) -> dict:
    """Each client against the same server; ``n_for`` gives some client a different number of requests.

    ``_label`` names the scenario at the call site only."""
    out = {}
    for kind in clients:
        server.configure(**cfg)
        out[kind] = run_child(kind, server.url, (n_for or {}).get(kind, n), conc, metric)
        out[kind]["n"] = (n_for or {}).get(kind, n)
        got = server.admin("stats")["requests"]
        out[kind]["server_requests"] = got
    return out


def fmt_row(label: str, r: dict) -> str:
    return (
        f"  {label:<9} {r['rps']:>9,.0f} req/s  {r['cpu_ms_per_req']:>6.3f} CPU ms/req  "
        f"peak RSS {r['rss_mb']:>5,.0f} MB (anonymous {r['anon_mb']:>4,.0f} MB)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few thousand requests per scenario: checks that it works")
    ap.add_argument(
        "--only",
        default="a,b,c,d,e,r,h,s",
        help="comma list of scenarios (r: repeat of an identical call, h: hostile replies, s: streaming input)",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    q = args.quick
    server = Server()
    results = {}

    class _Lines(list):
        def append(self, line):  # print as soon as a scenario is measured
            print(line, flush=True)
            super().append(line)

        def __iadd__(self, more):
            for line in more:
                self.append(line)
            return self

    lines = _Lines()
    if q:
        lines.append(
            "quick mode: a few thousand requests per scenario, to check that every client runs; "
            "start-up and drain dominate, so the ratios below are not the targets' measure"
        )
    try:
        if "a" in only:
            n = 2000 if q else 20000
            r = scenario(server, "a", n, 64, {})
            results["a"] = r
            lines.append(f"(a) zero latency, 64 in flight, {n:,} requests")
            lines += [fmt_row(k, v) for k, v in r.items()]
            lines.append(f"  ratio hf_judge/floor {r['hf_judge']['rps'] / r['floor']['rps']:.2f} (target >= 0.70)")
        for key, conc in (("b", 256), ("c", 1024)):
            if key in only:
                # (c): 100,000 requests, about 100 round trips, so that the first
                # (1,024 connections opening) and the last (the drain) are ~1 %
                # of the run, as in a large job; at 20,000 they were ~5 %. The
                # SDK gets 20,000: at ~240 req/s that is already 80 s.
                n = 2048 if q else (10000 if conc == 256 else 100_000)
                n_for = {"openai": 20_000} if key == "c" and not q else None
                r = scenario(server, key, n, conc, {"latency": 0.2}, n_for=n_for)
                results[key] = r
                ideal = conc / 0.2
                lines.append(f"({key}) 200 ms latency, {conc} in flight, {n:,} requests (ideal {ideal:,.0f} req/s)")
                lines += [fmt_row(k, v) + (f"  ({v['n']:,} requests)" if v["n"] != n else "") for k, v in r.items()]
                lines.append(
                    f"  ratio hf_judge/ideal {r['hf_judge']['rps'] / ideal:.2f} (target >= 0.90), "
                    f"hf_judge/floor {r['hf_judge']['rps'] / r['floor']['rps']:.2f} (target >= 0.90), "
                    f"hf_judge/openai {r['hf_judge']['rps'] / r['openai']['rps']:.1f}x"
                )
        if "d" in only:
            # enough requests that the final drain (the last 5 s requests) is a small part of the run
            n = 2000 if q else 100_000
            base = scenario(server, "d0", n, 256, {"latency": 0.05}, clients=("floor", "hf_judge"))
            tail = scenario(
                server,
                "d",
                n,
                256,
                {"latency": 0.05, "tail": {"rate": 0.01, "seconds": 5.0}},
                clients=("floor", "hf_judge"),
            )
            results["d0"], results["d"] = base, tail
            ideal_tail = 256 / (0.99 * 0.05 + 0.01 * 5.0)
            lines.append(f"(d) heavy tail: 1% of requests take 5 s, the rest 50 ms, 256 in flight, {n:,} requests")
            lines += [fmt_row(k + " notail", v) for k, v in base.items()] + [
                fmt_row(k + " tail", v) for k, v in tail.items()
            ]
            lines.append(
                f"  ratio hf_judge(tail)/hf_judge(no tail) {tail['hf_judge']['rps'] / base['hf_judge']['rps']:.2f}; "
                f"hf_judge(tail)/ideal-with-tail ({ideal_tail:,.0f} req/s by Little's law) "
                f"{tail['hf_judge']['rps'] / ideal_tail:.2f} (target >= 0.80); "
                f"hf_judge(tail)/floor(tail) {tail['hf_judge']['rps'] / tail['floor']['rps']:.2f}"
            )
        if "r" in only:
            n = 5000 if q else 100_000
            server.configure()
            r = run_child("repeat", server.url, n, 256)
            results["r"] = r
            lines.append(
                f"(r) repeat: the identical second call over {n:,} rows sent 0 requests "
                f"and took {r['wall']:.2f} s (target < 2 s)"
            )
        if "e" in only:
            sizes = (2000, 20000) if q else (100_000, 1_000_000)
            mem = {}
            for n in sizes:
                server.configure()
                mem[n] = run_child("hf_judge", server.url, n, 256, "QA_All")
            results["e"] = {str(k): v for k, v in mem.items()}
            small, big = sizes
            lines.append("(e) memory, QA_All at zero latency, 256 in flight")
            lines += [fmt_row(f"{n:,}", mem[n]) for n in sizes]
            lines.append(
                f"  peak RSS ratio {big:,}/{small:,} rows: "
                f"{mem[big]['rss_mb'] / mem[small]['rss_mb']:.2f} (target <= 1.30; "
                "includes datasets' memory-mapped Arrow pages), "
                f"peak anonymous RSS ratio {mem[big]['anon_mb'] / mem[small]['anon_mb']:.2f}"
            )
        if "s" in only:
            sizes = (2000, 20000) if q else (20_000, 200_000)
            mem = {}
            for n in sizes:
                server.configure()
                mem[n] = run_child("stream", server.url, n, 256, "QA_All")
            results["s"] = {str(k): v for k, v in mem.items()}
            small, big = sizes
            lines.append("(s) streaming input: QA_All at zero latency, 256 in flight, Parquet in and out")
            lines += [fmt_row(f"{n:,}", mem[n]) for n in sizes]
            lines.append(
                f"  peak RSS ratio {big:,}/{small:,} rows: {mem[big]['rss_mb'] / mem[small]['rss_mb']:.2f} "
                f"(target <= 1.30), peak anonymous RSS ratio {mem[big]['anon_mb'] / mem[small]['anon_mb']:.2f}"
            )
        if "h" in only:
            # 100 MB replies at 256 in flight would hold 25 GB if read whole; read up to max_reply_bytes, the
            # client's peak should stay near its peak against normal replies
            n = 1000 if q else 5000
            hostile = {
                "normal": {},
                "100 MB, Content-Length": {"faults": [{"fault": "huge_body", "size": 100_000_000}]},
                "100 MB, chunked": {"faults": [{"fault": "huge_body", "size": 100_000_000, "chunked": True}]},
                "1 MB gzip -> 1 GB": {"faults": [{"fault": "gzip_bomb", "size": 1_000_000_000}]},
            }
            mem = {}
            for label, cfg in hostile.items():
                server.configure(**cfg)
                mem[label] = run_child("hostile", server.url, n, 256)
                mem[label]["server_requests"] = server.admin("stats")["requests"]
            results["h"] = mem
            base = mem["normal"]
            lines.append(f"(h) hostile replies, 256 in flight, {n:,} rows, default max_reply_bytes")
            for label, r in mem.items():
                lines.append(
                    f"  {label:<22} peak RSS {r['rss_mb']:>5,.0f} MB (anonymous {r['anon_mb']:>4,.0f} MB), "
                    f"x{r['rss_mb'] / base['rss_mb']:.2f} (anonymous x{r['anon_mb'] / base['anon_mb']:.2f}) "
                    f"of normal; {r['outcome']}, {r['server_requests']:,} requests"
                )
    finally:
        server.stop()
    out = os.environ.get("HF_JUDGE_BENCH_JSON")
    if out:
        Path(out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
