"""Convert Gemma 3 270M (the Q4_K_M GGUF of the ``local`` extra) to a safetensors folder vLLM loads.

    VLLM_PYTHON tests/vllm_gemma.py GGUF OUT_DIR [--dtype float32]

Run by ``tests/vllm_fixture.py::gemma_model`` in vLLM's interpreter (it has torch and transformers; the conversion
also needs ``gguf`` and ``accelerate``, which ``.ci/run`` installs there). No network.
The GGUF is the *base* model (google/gemma-3-270m) and carries no chat template: this adds Gemma 3's (the one of
google/gemma-3-270m-it: the system prompt folded into the first user turn, roles user/model, ``<end_of_turn>``) and
makes ``<end_of_turn>`` an eos in generation_config.json, so a finished turn stops. The weights are dequantized to
dense float32 (a CPU without bf16 runs bf16 at half the speed): a ~1 GB folder for 268 M parameters.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}"
    "{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    '{%- set first_user_prefix = "" -%}'
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    '{{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}'
    "{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] | trim }}"
    "{%- elif message['content'] is iterable -%}"
    "{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}"
    "{%- endfor -%}"
    '{%- else -%}{{ raise_exception("Invalid content type") }}{%- endif -%}'
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def convert(gguf: Path, out: Path, dtype: str = "float32") -> dict:
    """Write the model, its tokenizer (with the chat template) and its configs into ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils.quantization_config import GgufConfig

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True),
        dtype=getattr(torch, dtype),
    )  # fmt: skip
    tok.chat_template = GEMMA3_CHAT_TEMPLATE
    eot = tok.convert_tokens_to_ids("<end_of_turn>")
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=[tok.eos_token_id, eot], pad_token_id=tok.pad_token_id
    )
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # a dequantized folder must not say it is quantized: vLLM would look for a GGUF loader
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("quantization_config", None)
    cfg["torch_dtype"] = cfg["dtype"] = dtype
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return {"seconds": round(time.perf_counter() - t0, 1), "eos_ids": [tok.eos_token_id, eot]}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("gguf", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args()
    print(json.dumps(convert(a.gguf.absolute(), a.out.absolute(), a.dtype)))
    sys.exit(0)
