"""hf-judge on vLLM against vLLM's own offline `LLM.chat`: the same prompts, requests/s and tokens/s, their ratio.

    python bench/bench_vllm.py --model-path /tmp/tiny-llama --vllm-python /work/vllm-venv/bin/python   # CPU
    python bench/bench_vllm.py --model Qwen/Qwen2.5-1.5B-Instruct --rows 2000                        # a GPU

The prompts are a judge metric's (`--metric`, default QA_All: integers only, so that even a random-weight model's
replies end and validate; QA_Correctness, reasoning first, suits a real model), rendered by hf-judge itself over
`--rows` rows of a generated dataset; both sides ask for the metric's JSON schema as structured output (vLLM's own, with
compact JSON), at temperature 0 with the same `--max-tokens`, one request per row (hf-judge runs with
`retries=0`, so an invalid reply is an error row, not a second request). In the same run, one after the other:

* offline  - `vllm.LLM(...)` and `LLM.chat(all prompts)`, in a subprocess of the vLLM interpreter (the baseline);
* hf_judge - `score_dataset(...)` of the same rows against vLLM's OpenAI server started by hf-judge's own
  `vllm_judge` (what `--model vllm:MODEL` runs: `python -m vllm.entrypoints.openai.api_server` on a loopback port,
  the same engine arguments, each prompt's length checked with the server's tokenizer before it is sent), no reply
  cache (`use_cache=False`), so every round sends every row.

Both sides load once, answer one warm-up prompt, then run `--rounds` measured rounds of every row; the median round
is reported. The server gets the scheduler limits the offline engine ran with (`max_num_batched_tokens`,
`max_num_seqs`: vLLM's `LLM` and its server default to different ones), unless `--vllm-arg` sets them, so the
ratio measures hf-judge, not vLLM's defaults. Load times are shown, not part of the ratio. The goal: >= 0.95.

`--vllm-python` (default: `HF_JUDGE_VLLM_PYTHON`, else this interpreter) is the Python that has vLLM; this script
itself runs in hf-judge's environment. `--model-path DIR` that does not exist yet is built there as the tiny
random-weight Llama of tests/vllm_tiny_model.py (CPU: a few seconds). Engine arguments go to both sides:
`--vllm-arg KEY=VALUE`, repeatable, a bare KEY a switch (`tensor_parallel_size=2`, `dtype=float32`,
`enforce_eager`), as `--model vllm:MODEL` reads them. `--model-path` runs get `dtype=float32` and
`max_model_len=2048` unless set (a CPU: bf16 runs 2x slower without AVX-512 bf16).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
GOAL = 0.95
# compact JSON from vLLM's own structured output: the same engine option on both sides
STRUCTURED = {"backend": "xgrammar", "disable_any_whitespace": True}
SCHEDULER = ("max_num_batched_tokens", "max_num_seqs")

_QA = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("How many legs does a spider have?", "Spiders have six legs."),
    ("What is 12 times 12?", "12 x 12 = 144, since 12 x 10 = 120 and 12 x 2 = 24."),
    ("Who wrote Hamlet?", "Hamlet was written by Christopher Marlowe in 1620."),
    ("What gas do plants absorb from the air?", "Plants take in carbon dioxide and release oxygen."),
    ("At what temperature does water boil at sea level?", "Water boils at 90 degrees Celsius at sea level."),
    ("Which planet is the largest?", "Jupiter is the largest planet in the solar system."),
    ("What is the square root of 81?", "The square root of 81 is 9, because 9 x 9 = 81."),
]


# -- the vLLM side (runs in the vLLM interpreter: nothing of hf_judge is imported there) -----------------------
def child_offline(job_path: str, out_path: str) -> int:
    """vLLM's own offline path: load `LLM`, one warm-up prompt, then `rounds` x `LLM.chat(every prompt)`."""
    job = json.loads(Path(job_path).read_text())
    t0 = time.perf_counter()
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    t_import = time.perf_counter() - t0
    llm = LLM(model=job["model"], seed=0, **job["engine_args"])
    t_load = time.perf_counter() - t0 - t_import
    sched = llm.llm_engine.vllm_config.scheduler_config
    params = SamplingParams(
        temperature=0.0, top_p=1.0, max_tokens=job["max_tokens"],
        structured_outputs=StructuredOutputsParams(json=job["schema"]),
    )  # fmt: skip
    messages = job["messages"]
    llm.chat(messages[:1], params, use_tqdm=False)
    walls, outs = [], []
    for _ in range(job["rounds"]):
        t = time.perf_counter()
        outs = llm.chat(messages, params, use_tqdm=False)
        walls.append(time.perf_counter() - t)
    finish: dict[str, int] = {}
    for o in outs:
        reason = str(o.outputs[0].finish_reason)
        finish[reason] = finish.get(reason, 0) + 1
    result = {
        "import_s": round(t_import, 1),
        "load_s": round(t_load, 1),
        "walls_s": [round(w, 3) for w in walls],
        "requests": len(outs),
        "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
        "completion_tokens": sum(len(o.outputs[0].token_ids) for o in outs),
        "finish_reasons": finish,
        "scheduler": {k: getattr(sched, k) for k in SCHEDULER},
        "vllm": __import__("vllm").__version__,
    }
    Path(out_path).write_text(json.dumps(result))
    del llm
    return 0


# -- the hf-judge side -----------------------------------------------------------------------------------------
def dataset(rows: int):
    from datasets import Dataset

    qa = [(f"{q} (case {i})", a) for i, (q, a) in ((i, _QA[i % len(_QA)]) for i in range(rows))]
    return Dataset.from_dict({"question": [q for q, _ in qa], "answer": [a for _, a in qa]})


COLUMNS = {"instruction": "question", "output": "answer"}


def rendered(metric_name: str, ds) -> tuple[list[list[dict]], dict]:
    """Each row's messages as hf-judge renders them for the metric, and the metric's JSON schema."""
    from hf_judge.judging.catalogue import load_metric
    from hf_judge.judging.prompt import prompt_values, request_messages

    metric = load_metric(metric_name)
    columns = metric.resolve_columns(COLUMNS, ds.column_names)
    batch = ds.to_dict()
    messages = [m for i in range(len(ds)) for m in request_messages(metric, prompt_values(metric, columns, batch, i))]
    return messages, metric.json_schema


def engine_value(value: str):
    """A `--vllm-arg` value as `LLM(...)` takes it: a number, a bool, JSON, else the string."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return json.loads(value)
    except ValueError:
        return value


def hf_judge_rounds(ds, a, base_url: str, name: str) -> dict:
    """score_dataset of every row, `rounds` times (no reply cache), after one warm-up row."""
    from hf_judge import score_dataset

    kw = dict(
        model=name, base_url=base_url, api_key="EMPTY", columns=COLUMNS, temperature=0.0, max_tokens=a.max_tokens,
        retries=0, use_cache=False, progress=False,
    )  # fmt: skip
    score_dataset(ds.select([0]), [a.metric], **kw)
    walls, summary = [], None
    for _ in range(a.rounds):
        t = time.perf_counter()
        result = score_dataset(ds, [a.metric], **kw)
        walls.append(time.perf_counter() - t)
        summary = result.summary
    return {
        "walls_s": [round(w, 3) for w in walls],
        "requests": summary.requests,
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "error_rows": len(result["errors"]),
        # what the error rows were (a reply hf-judge refused: out of range, invalid JSON, cut off, ...)
        "error_kinds": {k: result["errors"]["kind"].count(k) for k in set(result["errors"]["kind"])},
        "error_sample": result["errors"]["message"][:1],
    }


def rates(side: dict) -> dict:
    wall = statistics.median(side["walls_s"])
    return {
        "wall_s": round(wall, 3),
        "requests_per_s": side["requests"] / wall,
        "tokens_per_s": (side["prompt_tokens"] + side["completion_tokens"]) / wall,
        "output_tokens_per_s": side["completion_tokens"] / wall,
    }


def report(off: dict, hf: dict, a) -> int:
    ro, rh = rates(off), rates(hf)
    print(f"\n{a.rows} rows of {a.metric}, {a.rounds} rounds (median), max_tokens {a.max_tokens}, model {a.model}")
    head = ("path", "load s", "wall s", "req/s", "tok/s", "out tok/s", "requests", "tokens in/out")
    print("{:<26} {:>7} {:>7} {:>8} {:>9} {:>9} {:>9}  {}".format(*head))
    for label, side, r in (("vLLM LLM.chat (offline)", off, ro), ("hf-judge -> vLLM server", hf, rh)):
        tokens = f"{side['prompt_tokens']}/{side['completion_tokens']}"
        print(
            f"{label:<26} {side['load_s']:7.1f} {r['wall_s']:7.2f} {r['requests_per_s']:8.2f}"
            f" {r['tokens_per_s']:9.1f} {r['output_tokens_per_s']:9.1f} {side['requests']:9d}  {tokens}"
        )
    if "unchecked" in hf:  # a diagnostic: what the pre-send length check costs
        ru = rates(hf["unchecked"])
        label, ratio = "  same, no length check", ru["requests_per_s"] / ro["requests_per_s"]
        print(f"{label:<26} {'':>7} {ru['wall_s']:7.2f} {ru['requests_per_s']:8.2f} {ru['tokens_per_s']:9.1f}"
              f" {ru['output_tokens_per_s']:9.1f}   (ratio {ratio:.2f})")  # fmt: skip
    ratio_req = rh["requests_per_s"] / ro["requests_per_s"]
    ratio_tok = rh["tokens_per_s"] / ro["tokens_per_s"]
    print(f"ratio hf-judge / offline: requests/s {ratio_req:.2f}, tokens/s {ratio_tok:.2f} (goal >= {GOAL})")
    print(f"walls s: offline {off['walls_s']}, hf-judge {hf['walls_s']}; scheduler {off['scheduler']}; "
          f"finish reasons (offline) {off['finish_reasons']}; hf-judge error rows {hf['error_rows']} "
          f"{hf['error_kinds']} {hf['error_sample']}")  # fmt: skip
    if a.json:
        numbers = {"offline": off, "hf_judge": hf, "ratio_requests": ratio_req, "ratio_tokens": ratio_tok}
        Path(a.json).write_text(json.dumps({**numbers, "args": vars(a)}, indent=2, default=str))
    return 1 if a.check and min(ratio_req, ratio_tok) < GOAL else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a Hub id or a folder vLLM loads (a GPU machine: Qwen/Qwen2.5-1.5B-Instruct)")
    which.add_argument("--model-path", help="a model folder; built as the tiny random Llama when it does not exist")
    ap.add_argument("--vllm-python", default=os.environ.get("HF_JUDGE_VLLM_PYTHON", sys.executable),
                    help="the Python that has vLLM (default: HF_JUDGE_VLLM_PYTHON, else this one)")  # fmt: skip
    ap.add_argument("--vllm-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="an engine argument for both sides, repeatable (dtype=float32)")  # fmt: skip
    ap.add_argument("--metric", default="QA_All", help="the judge metric whose prompts are sent (default QA_All)")
    ap.add_argument("--rows", type=int, default=256, help="rows of the generated dataset (default 256)")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds of every row; the median is reported")
    ap.add_argument("--max-tokens", type=int, default=128, help="max completion tokens per reply (default 128)")
    ap.add_argument("--start-timeout", type=float, default=1800, help="seconds a vLLM load may take (default 1800)")
    ap.add_argument("--unchecked", action="store_true",
                    help="also score via the same server as an ordinary one: no /tokenize length check")  # fmt: skip
    ap.add_argument("--json", metavar="PATH", help="write every number to this file as well")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when a ratio is under {GOAL}")
    ap.add_argument("--child", nargs=2, metavar=("JOB", "OUT"), help=argparse.SUPPRESS)
    if argv is not None and argv[:1] == ["--child"]:
        return argparse.Namespace(child=argv[1:3])
    a = ap.parse_args(argv)
    bad = [kv for kv in a.vllm_arg if not kv.partition("=")[0].strip()]
    if bad:
        ap.error(f"--vllm-arg takes KEY=VALUE (or a bare KEY: a switch), got {bad[0]!r}; e.g. --vllm-arg dtype=float32")
    return a


def vllm_env() -> dict[str, str]:
    """The children's environment: no phone-home; on the CPU build, 1 GiB of KV cache unless set."""
    env = dict(os.environ, VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return env


def measure(a, args: dict[str, str], messages: list, schema: dict, ds, tmp: str) -> tuple[dict, dict]:
    """The offline baseline, then hf-judge through the server with the same engine and scheduler arguments."""
    # the offline engine gets what --model vllm: gives the server: prefix caching, compact JSON by xgrammar
    offline_args = {"enable_prefix_caching": "true", "structured_outputs_config": json.dumps(STRUCTURED), **args}
    job = {"model": a.model, "messages": messages, "schema": schema, "max_tokens": a.max_tokens,
           "rounds": a.rounds, "engine_args": {k: engine_value(v) for k, v in offline_args.items()}}  # fmt: skip
    Path(tmp, "job.json").write_text(json.dumps(job))
    print(f"offline: loading {a.model} with vLLM's LLM ...", flush=True)
    subprocess.run([a.vllm_python, __file__, "--child", f"{tmp}/job.json", f"{tmp}/offline.json"], check=True)
    off = json.loads(Path(tmp, "offline.json").read_text())
    for k in SCHEDULER:  # the server runs with the offline engine's scheduler limits
        args.setdefault(k, str(off["scheduler"][k]))
    from hf_judge.transport.served import SERVED_ENV
    from hf_judge.transport.vllm import vllm_judge

    print(f"hf-judge: starting vLLM's server ({' '.join(f'{k}={v}' for k, v in args.items())}) ...", flush=True)
    t = time.perf_counter()
    log = Path(tmp, "server.log")
    with vllm_judge(a.model, vllm_args=args, python=a.vllm_python, log_path=log, start_timeout=a.start_timeout) as j:
        load_s = time.perf_counter() - t
        hf = hf_judge_rounds(ds, a, j.base_url, j.model)
        if a.unchecked:  # the same server as any other (not listed as managed): no /tokenize before each prompt
            listed = os.environ.pop(SERVED_ENV)
            try:
                hf["unchecked"] = hf_judge_rounds(ds, a, j.base_url, j.model)
            finally:
                os.environ[SERVED_ENV] = listed
    hf["load_s"] = load_s
    return off, hf


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    a = parse_args(argv)
    if a.child:
        return child_offline(*a.child)
    os.environ.update(vllm_env())
    if a.model_path:
        a.model = a.model_path
        if not Path(a.model_path).exists():
            print(f"building the tiny model in {a.model_path} ...", flush=True)
            subprocess.run([a.vllm_python, str(ROOT.parent / "tests" / "vllm_tiny_model.py"), a.model_path], check=True)
    # as --model vllm:MODEL reads them: KEY=VALUE, a bare KEY is a switch (enforce_eager)
    args = {k.strip(): v.strip() if sep else "true" for k, sep, v in (kv.partition("=") for kv in a.vllm_arg)}
    if a.model_path:  # a CPU run: float32 (bf16 runs 2x slower on CPUs without it), the tiny model's 2048 positions
        args.setdefault("dtype", "float32")
        args.setdefault("max_model_len", "2048")
    ds = dataset(a.rows)
    messages, schema = rendered(a.metric, ds)
    tmp = tempfile.mkdtemp(prefix="bench-vllm-")  # kept when a side fails: the server's log is there
    off, hf = measure(a, args, messages, schema, ds, tmp)
    shutil.rmtree(tmp)
    return report(off, hf, a)


if __name__ == "__main__":
    sys.exit(main())
