"""Build a tiny random-weight Llama that vLLM (CPU build) can load: no network, a few seconds, deterministic.

    VLLM_PYTHON tests/vllm_tiny_model.py OUT_DIR [--seed 0] [--vocab 1024] [--layers 2] [--max-len 2048]

Writes OUT_DIR/{config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
chat_template.jinja, special_tokens_map.json}. Same seed + same args -> byte-identical model.safetensors and
tokenizer.json (checked: `--check` builds twice into temp dirs and compares sha256 of every file).

Choices forced by the CPU build of vLLM 0.32:
- head_dim 64 (hidden 128, 2 heads): the CPU attention kernels refuse small head sizes such as 16 (reported in
  issue 42; not re-run in this spike);
- dtype float32 in config.json: this machine's CPU (AMD EPYC, AVX2, no AVX-512) has no bf16 path; vLLM
  picks the dtype from config.json when dtype="auto".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

# A small built-in corpus: judge-like English, JSON punctuation and digits, so that the prompts and the
# structured replies tokenize into a sane number of tokens. Byte-level BPE: every byte is in the alphabet,
# so any text (any language, any byte) tokenizes; unknown tokens never happen.
_CORPUS = """
You are a careful judge. Read the question, the reference answer and the candidate answer, then grade the
candidate. Reply with JSON only: {"reasoning": "...", "score": 4}. The score is an integer from 1 to 5.
Question: What is the capital of France? Reference: Paris. Candidate: The capital of France is Paris.
Question: How many legs does a spider have? Reference: eight. Candidate: Spiders have six legs.
The answer is correct, complete and concise. The answer is wrong. The answer is partly correct but misses a step.
{"score": 1} {"score": 2} {"score": 3} {"score": 4} {"score": 5} {"verdict": "A"} {"verdict": "B"} {"verdict": "tie"}
{"reasoning": "The candidate matches the reference.", "score": 5, "label": "correct"}
Compare response A and response B. Which one is more helpful, honest and harmless? Output [[A]], [[B]] or [[C]].
system user assistant model The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 100 1000 true false null
Is the response faithful to the context? Does it contain hallucinations? Rate relevance, coherence, fluency.
"""

SPECIAL = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]

# A plain chat template (Jinja, the Hugging Face convention): roles as special tokens, one <|end|> per turn,
# the generation prompt opens the assistant turn. The model's eos is <|end|>, so a finished reply stops there.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def build_tokenizer(vocab_size: int, out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [line for line in _CORPUS.splitlines() if line.strip()]
    tok.train_from_iterator(lines * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|end|>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<|user|>", "<|assistant|>", "<|system|>", "</s>"],
        model_max_length=10**6,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def build(out: Path, seed: int = 0, vocab: int = 1024, layers: int = 2, max_len: int = 2048) -> Path:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    fast = build_tokenizer(vocab, out)
    # the real vocabulary can be smaller than asked (a small corpus runs out of merges): size the embedding to it,
    # rounded up to a multiple of 64
    n_vocab = (len(fast) + 63) // 64 * 64
    config = LlamaConfig(
        vocab_size=n_vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=max_len,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id
    )
    model.save_pretrained(out, safe_serialization=True)
    # pin dtype in config.json whatever transformers' version writes ("dtype" in 5.x, "torch_dtype" before)
    cfg = json.loads((out / "config.json").read_text())
    cfg["torch_dtype"] = cfg["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return out


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(folder.iterdir()) if p.is_file()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--check", action="store_true", help="build twice in temp dirs, compare every file's sha256")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.check:
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            h1 = digest(build(Path(d1), a.seed, a.vocab, a.layers, a.max_len))
            h2 = digest(build(Path(d2), a.seed, a.vocab, a.layers, a.max_len))
        same = h1 == h2
        print(json.dumps({"deterministic": same, "files": h1, "seconds": round(time.perf_counter() - t0, 2)}))
        return 0 if same else 1
    out = build(Path(a.out), a.seed, a.vocab, a.layers, a.max_len)
    print(json.dumps({"out": str(out), "files": digest(out), "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
