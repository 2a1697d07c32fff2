"""Image variables: sent as OpenAI image content parts, cached by the image bytes, never as a repr."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import orjson
import pytest
from datasets import Dataset, Image, List
from helpers import qa_dataset, score

from hf_judge import ConfigError, PromptFileError, Settings, TemplateError, load_metric

HERE = Path(__file__).parent
OUTPUTS = "outputs:\n  score: {type: integer, minimum: 1, maximum: 10}\n"


def png(rgb: tuple[int, int, int], size: int = 2) -> bytes:
    """A tiny RGB PNG, written by hand (Pillow is not a dependency)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


COLORS = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # docs/how-to/images.md's limit: OpenAI's, 20 MB an image
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20 + b"\xff\xd9"


def image_dataset() -> Dataset:
    """Three rows with a ``datasets.Image`` column, built without Pillow."""
    ds = Dataset.from_dict(
        {
            "image": [{"bytes": png(c), "path": None} for c in COLORS],
            "question": [f"what colour is {i}?" for i in range(3)],
        }
    )
    return ds.cast_column("image", Image())


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def prompt(tmp_path: Path, name: str, body: str, front: str = "") -> Path:
    pdir = tmp_path / "prompts"
    pdir.mkdir(exist_ok=True)
    (pdir / f"{name}.jinja").write_text(f"---\n{front}{OUTPUTS}---\n{body}")
    return pdir


VQA = "Look at the picture.\n{{ image }}\nQuestion: {{ question }}\n"

# A fresh process scores the same images read back from parquet: a new dataset
# fingerprint (so the results cache cannot answer) and freshly read image values.
FRESH = """
import json, sys
import datasets
datasets.disable_progress_bars()
from hf_judge import score_dataset
ds = datasets.load_dataset("parquet", data_files=sys.argv[1], split="train", cache_dir=sys.argv[2] + "/hf")
out = score_dataset(ds, ["VQA"], model="judge", base_url=sys.argv[3], api_key="sk-test", cache_dir=sys.argv[2],
                    prompts_dir=sys.argv[4])
print(json.dumps({"requests": out.summary.requests, "cache_hits": out.summary.cache_hits,
                  "cached_splits": out.summary.cached_splits, "scores": list(out["train"]["VQA"])}))
"""


def test_image_column_goes_as_content_parts_and_is_cached_by_its_bytes(judge, tmp_path):
    judge.configure(record=True)
    pdir = prompt(tmp_path, "VQA", VQA)
    ds = image_dataset()
    first = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    st = judge.stats()
    assert st["requests"] == 3 and st["image_parts"] == 3
    assert not first["errors"].num_rows and None not in first["train"]["VQA"]
    # requests are concurrent: take them in row order by their question, not in arrival order
    bodies = sorted(st["bodies"], key=lambda b: b["messages"][0]["content"][-1]["text"])
    for i, body in enumerate(bodies):
        assert body["messages"] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at the picture.\n"},
                    {"type": "image_url", "image_url": {"url": data_url(png(COLORS[i]))}},
                    {"type": "text", "text": f"\nQuestion: what colour is {i}?"},
                ],
            }
        ]
        raw = json.dumps(body)
        assert "PIL" not in raw and " at 0x" not in raw and "{'bytes'" not in raw

    # a second run in a fresh process, on a dataset read back from disk: every reply comes from the store
    ds.to_parquet(str(tmp_path / "images.parquet"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH,
            str(tmp_path / "images.parquet"),
            str(tmp_path / "cache"),
            judge.base_url,
            str(pdir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert again == {"requests": 0, "cache_hits": 3, "cached_splits": [], "scores": list(first["train"]["VQA"])}
    # shuffled: each row's image still goes with its own question (else the prompts would be new)
    shuffled = score(ds.shuffle(seed=1), ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 3 and shuffled.summary.cache_hits == 3
    by_question = dict(zip(first["train"]["question"], first["train"]["VQA"], strict=True))
    assert list(shuffled["train"]["VQA"]) == [by_question[q] for q in shuffled["train"]["question"]]


def test_declared_image_variable_on_a_url_column_sends_the_url(judge, tmp_path):
    judge.configure(record=True)
    pdir = prompt(tmp_path, "VQA", "{{ question }}\n{{ picture }}", front="images: [picture]\n")
    urls = ["https://example.org/a.png", "http://example.org/b.jpg"]
    ds = Dataset.from_dict({"picture": urls, "question": ["q0", "q1"]})
    score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    bodies = sorted(judge.stats()["bodies"], key=lambda b: b["messages"][0]["content"][0]["text"])  # not arrival order
    assert [b["messages"][0]["content"] for b in bodies] == [
        [{"type": "text", "text": q + "\n"}, {"type": "image_url", "image_url": {"url": u}}]
        for q, u in zip(["q0", "q1"], urls, strict=True)
    ]


def test_path_only_image_list_of_images_and_jpeg(judge, tmp_path):
    judge.configure(record=True)
    f = tmp_path / "photo.jpg"
    f.write_bytes(JPEG)
    pdir = prompt(tmp_path, "VQA", "{{ image }}{{ question }}")
    ds = Dataset.from_dict({"image": [{"bytes": None, "path": str(f)}], "question": ["q"]})
    ds = ds.cast_column("image", Image())
    score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    many = Dataset.from_dict({"image": [[{"bytes": png(c), "path": None} for c in COLORS]], "question": ["q"]})
    many = many.cast_column("image", List(Image()))
    score(many, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    contents = [b["messages"][0]["content"] for b in judge.stats()["bodies"]]
    jpeg = {"type": "image_url", "image_url": {"url": data_url(JPEG, "image/jpeg")}}
    assert contents[0] == [jpeg, {"type": "text", "text": "q"}]
    assert contents[1] == [{"type": "image_url", "image_url": {"url": data_url(png(c))}} for c in COLORS] + [
        {"type": "text", "text": "q"}
    ]


def test_a_row_without_a_readable_image_is_an_error_row_and_nothing_else_stops(judge, tmp_path):
    pdir = prompt(tmp_path, "VQA", VQA)
    rows = [
        {"bytes": png(COLORS[0]), "path": None},
        {"bytes": None, "path": str(tmp_path / "gone.png")},
        {"bytes": b"BM not an image we can send", "path": None},
    ]
    ds = Dataset.from_dict({"image": rows, "question": ["a", "b", "c"]}).cast_column("image", Image())
    out = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 1
    assert out["train"]["VQA"][0] is not None and out["train"]["VQA"][1:] == [None, None]
    errors = out["errors"].to_list()
    assert [(e["row"], e["kind"]) for e in errors] == [(1, "bad_image"), (2, "bad_image")]
    assert "gone.png" in errors[0]["message"] and "PNG, JPEG, GIF, WebP" in errors[1]["message"]


def test_image_variable_on_a_text_or_number_column_is_a_config_error(judge, tmp_path):
    pdir = prompt(tmp_path, "VQA", "{{ question }}\n{{ picture }}", front="images: [picture]\n")
    with pytest.raises(ConfigError, match=r"'picture'.*column 'n'.*int64"):
        numbers = Dataset.from_dict({"n": [1], "question": ["q"]})
        score(numbers, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={"picture": "n"})
    with pytest.raises(ConfigError, match=r"'picture'.*column 'question'.*not an http\(s\) or data: URL"):
        score(qa_dataset(2), ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={"picture": "question"})
    assert judge.stats()["requests"] == 0


def test_image_inside_an_expression_is_refused_before_any_request(judge, tmp_path):
    pdir = prompt(tmp_path, "VQA", "{{ question }} {{ image | upper }}")
    with pytest.raises(TemplateError, match=r"image variable 'image'.*line 1.*\{\{ image \}\}"):
        score(image_dataset(), ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    pdir = prompt(tmp_path, "VQA2", "{{ question }}", front="system: '{% raw %}see {{ image }}{% endraw %}'\n")
    with pytest.raises(TemplateError, match=r"image variable 'image'.*system prompt"):
        score(image_dataset(), ["VQA2"], judge, tmp_path, prompts_dir=pdir, columns={})
    pdir = prompt(tmp_path, "VQA5", "{% filter upper %}{{ question }} {{ image }}{% endfilter %}")
    with pytest.raises(TemplateError, match=r"image variable was changed by the template"):
        score(image_dataset(), ["VQA5"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 0
    # a declared image used in an expression is refused when the file is loaded
    bad = prompt(tmp_path, "VQA3", "{{ picture | truncate(5) }}", front="images: [picture]\n")
    with pytest.raises(PromptFileError, match="picture"):
        load_metric("VQA3", prompts_dir=bad)
    bad = prompt(tmp_path, "VQA4", "{{ question }}", front="images: [picture]\n")
    with pytest.raises(PromptFileError, match=r"images.*'picture'.*not a variable"):
        load_metric("VQA4", prompts_dir=bad)


def test_conditional_image_and_if_test_are_allowed(judge, tmp_path):
    judge.configure(record=True)
    pdir = prompt(
        tmp_path,
        "VQA",
        "{% if image %}{{ image }}{% else %}no picture{% endif %} {{ question }}",
        front="optional: [image]\n",
    )
    ds = Dataset.from_dict({"image": [{"bytes": png(COLORS[0]), "path": None}, None], "question": ["a", "b"]})
    score(ds.cast_column("image", Image()), ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    contents = [b["messages"][0]["content"] for b in judge.stats()["bodies"]]
    red = {"type": "image_url", "image_url": {"url": data_url(png(COLORS[0]))}}
    assert sorted(contents, key=str) == sorted([[red, {"type": "text", "text": " a"}], "no picture b"], key=str)


def test_text_only_request_bodies_are_unchanged(tmp_path):
    """Cache keys of text-only metrics must not move: the body is byte-identical to the one before images."""
    from hf_judge.transport.client import JudgeClient

    pdir = prompt(tmp_path, "Q_Text", "Question: {{ instruction }}\nAnswer: {{ output }}", front="system: Be strict.\n")
    client = JudgeClient(Settings(model="judge", base_url="http://127.0.0.1:9/v1"), api_key=None)
    m = load_metric("Q_Text", prompts_dir=pdir)
    values = {"instruction": "What is $\\frac{1}{2}$ + {x}?", "output": "a half"}
    body = client.body(m, m.messages(values), 0.1, "json_schema")
    assert hashlib.sha256(body).hexdigest() == TEXT_BODY_SHA256, body


def test_token_estimate_counts_an_image_as_image_tokens_not_its_base64():
    """max_tokens_per_minute: a 300 KB photo is ~1,000 tokens, not 100,000 (which held every request a second)."""
    from hf_judge.judging.images import IMAGE_TOKENS, image_urls, prompt_tokens_estimate

    photo = b"\x89PNG\r\n\x1a\n" + os.urandom(300_000)
    parts = [{"type": "text", "text": "x" * 400}, {"type": "image_url", "image_url": {"url": image_urls(photo)[0]}}]
    body = orjson.dumps({"model": "judge", "messages": [{"role": "user", "content": parts}]})
    text_only = orjson.dumps({"model": "judge", "messages": [{"role": "user", "content": "x" * 400}]})
    assert len(body) > 400_000
    assert prompt_tokens_estimate(text_only) == len(text_only) / 4
    assert IMAGE_TOKENS + 100 < prompt_tokens_estimate(body) < IMAGE_TOKENS + 200


# sha256 of the body above, taken on main before image variables existed
TEXT_BODY_SHA256 = "2b16cf90b6e8a1615facbdd913007208dee536e1eb900200ae9a4e09d48ce0cd"


def test_mime_type_from_magic_bytes_only():
    from hf_judge.judging.images import mime_type

    webp = b"RIFF\x10\x00\x00\x00WEBPVP8 "
    assert [mime_type(png(COLORS[0])), mime_type(JPEG), mime_type(b"GIF87a.."), mime_type(webp)] == [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    ]
    assert mime_type(b"BM\x00\x00") is None and mime_type(b"\x00") is None and mime_type(b"not a png") is None


def test_a_file_named_png_that_is_not_an_image_is_bad_image_not_sent(judge, tmp_path):
    """The name is no evidence: `pics/bad.png` holding `not a png` was sent as data:image/png."""
    judge.configure(record=True)
    pdir = prompt(tmp_path, "VQA", VQA)
    (tmp_path / "good.png").write_bytes(png(COLORS[0]))
    (tmp_path / "bad.png").write_bytes(b"not a png")
    (tmp_path / "scan.webp").write_bytes(b"BM\x00\x00 a bitmap")
    rows = [{"bytes": None, "path": str(tmp_path / n)} for n in ("good.png", "bad.png", "scan.webp")]
    rows.append({"bytes": b"not a png", "path": "inline.png"})
    ds = Dataset.from_dict({"image": rows, "question": list("abcd")}).cast_column("image", Image())
    out = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    st = judge.stats()
    assert st["requests"] == 1 and st["image_parts"] == 1
    assert st["bodies"][0]["messages"][0]["content"][1]["image_url"]["url"] == data_url(png(COLORS[0]))
    assert out["train"]["VQA"][0] is not None and out["train"]["VQA"][1:] == [None, None, None]
    errors = out["errors"].to_list()
    assert [(e["row"], e["kind"]) for e in errors] == [(1, "bad_image"), (2, "bad_image"), (3, "bad_image")]
    assert "bad.png" in errors[0]["message"] and "not a recognised image (PNG, JPEG, GIF, WebP)" in errors[0]["message"]
    assert "not a pn" not in errors[0]["message"] and "scan.webp" in errors[1]["message"]


def test_huge_unreadable_and_non_image_files_are_bad_image_and_never_echoed(judge, tmp_path):
    """A path is read no further than MAX_IMAGE_BYTES: /dev/zero read until MemoryError, a 200 MB file took
    1 GB; a text file's first bytes (b'root:x:0') went into the error message, and so to the Hub."""
    pdir = prompt(tmp_path, "VQA", VQA)
    (tmp_path / "good.png").write_bytes(png(COLORS[0]))
    with open(tmp_path / "huge.png", "wb") as f:  # sparse: 21 MiB that take no disk
        f.write(png(COLORS[1]))
        f.truncate(21 * 1024 * 1024)
    (tmp_path / "passwd.png").write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    paths = ["good.png", "/dev/zero", "huge.png", "passwd.png"]
    rows = [{"bytes": None, "path": str(tmp_path / p)} for p in paths]
    rows.append({"bytes": png(COLORS[2]) + bytes(MAX_IMAGE_BYTES), "path": None})  # inline, over the limit
    ds = Dataset.from_dict({"image": rows, "question": list("abcde")}).cast_column("image", Image())
    out = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 1 and out["train"]["VQA"][0] is not None
    errors = out["errors"].to_list()
    assert [(e["row"], e["kind"]) for e in errors] == [(r, "bad_image") for r in (1, 2, 3, 4)]
    messages = [e["message"] for e in errors]
    assert "'/dev/zero' is not a regular file" in messages[0]
    assert "huge.png" in messages[1] and f"over {MAX_IMAGE_BYTES:,} bytes" in messages[1]
    assert "passwd.png" in messages[2] and "not a recognised image (PNG, JPEG, GIF, WebP)" in messages[2]
    assert f"over {MAX_IMAGE_BYTES:,} bytes" in messages[3]
    assert not any("root:x" in m or "/bin/bash" in m or e["raw"] for m, e in zip(messages, errors, strict=True))


def test_a_data_url_of_svg_is_bad_image(judge, tmp_path):
    """data:image/svg+xml was sent as it came (SVG bytes are refused; a judge takes no SVG either)."""
    pdir = prompt(tmp_path, "VQA", "{{ question }}\n{{ picture }}", front="images: [picture]\n")
    svg = "data:image/svg+xml;base64," + base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()
    ds = Dataset.from_dict({"picture": [data_url(png(COLORS[0])), svg], "question": ["q0", "q1"]})
    out = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 1 and out["train"]["VQA"][0] is not None
    [error] = out["errors"].to_list()
    assert (error["row"], error["kind"]) == (1, "bad_image")
    assert "image/svg+xml is not a recognised image (PNG, JPEG, GIF, WebP)" in error["message"]


def path_only_parquet(tmp_path: Path) -> Path:
    """The stranger's file: a parquet whose Image column holds relative paths only, and pics/tmp.png is gone."""
    (tmp_path / "pics").mkdir()
    (tmp_path / "pics" / "a.png").write_bytes(png(COLORS[0]))
    (tmp_path / "pics" / "c.png").write_bytes(png(COLORS[2]))
    (tmp_path / "pics" / "tmp.png").write_bytes(png(COLORS[1]))  # to_parquet reads the files' sizes
    rows = [{"bytes": None, "path": f"pics/{n}.png"} for n in ("a", "tmp", "c")]
    ds = Dataset.from_dict({"image": rows, "question": ["a?", "b?", "c?"]}).cast_column("image", Image())
    ds.to_parquet(str(tmp_path / "v.parquet"))
    os.remove(tmp_path / "pics" / "tmp.png")
    return tmp_path / "v.parquet"


def test_a_missing_image_file_does_not_lose_the_saved_result(judge, tmp_path, monkeypatch, caplog):
    """save_to_disk embeds path-only images; a deleted file failed it (FileNotFoundError) after the run was paid."""
    from datasets import load_dataset, load_from_disk

    monkeypatch.chdir(tmp_path)
    pdir = prompt(tmp_path, "VQA", VQA)
    ds = load_dataset("parquet", data_files=str(path_only_parquet(tmp_path)), split="train", cache_dir=str(tmp_path))
    out = score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={})
    assert judge.stats()["requests"] == 2 and [e["kind"] for e in out["errors"].to_list()] == ["bad_image"]
    out.save_to_disk(str(tmp_path / "saved"))
    assert "pics/tmp.png" in caplog.text and "1 image file(s)" in caplog.text
    back = load_from_disk(str(tmp_path / "saved"))
    assert back["train"]["VQA"] == out["train"]["VQA"] and back["train"]["VQA"][1] is None
    images = back["train"].cast_column("image", Image(decode=False))["image"]
    assert [i and i["bytes"] for i in images] == [png(COLORS[0]), None, png(COLORS[2])]  # the others are embedded
    assert back["errors"].to_list() == out["errors"].to_list()
    assert "pics/tmp.png" in back["errors"][0]["message"]


def test_cli_saves_the_result_when_an_image_file_is_missing(judge, tmp_path, monkeypatch, capsys, caplog):
    """`hf-judge score v.parquet -o vp2`: printed the summary, then exit 1 with no vp2/ (issue: stranger's trial)."""
    from datasets import load_from_disk

    from hf_judge.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    path_only_parquet(tmp_path)
    prompt(tmp_path, "VQA_Fit", VQA)
    args = [
        "score",
        "v.parquet",
        "--metrics",
        "VQA_Fit",
        "--prompts-dir",
        "prompts",
        "--base-url",
        judge.base_url,
        "-m",
        "judge",
        "-o",
        "vp2",
    ]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err[-3000:]
    assert "FileNotFoundError" not in err and "pics/tmp.png" in err + caplog.text
    saved = load_from_disk(str(tmp_path / "vp2"))
    assert saved["train"].num_rows == 3 and saved["train"]["question"] == ["a?", "b?", "c?"]
    assert [s is None for s in saved["train"]["VQA_Fit"]] == [False, True, False]
    assert [(e["row"], e["kind"]) for e in saved["errors"].to_list()] == [(1, "bad_image")]
    assert judge.stats()["requests"] == 2
    # a rerun reuses what was paid for, and saves again
    assert main(args + ["--overwrite"]) == 0 and judge.stats()["requests"] == 2


def test_push_with_a_missing_image_file_pushes_the_result(judge, hub, tmp_path, monkeypatch):
    """push_to_hub embeds path-only images as save_to_disk does: a gone file failed the push the same way."""
    from datasets import load_dataset

    monkeypatch.chdir(tmp_path)
    pdir = prompt(tmp_path, "VQA", VQA)
    ds = load_dataset("parquet", data_files=str(path_only_parquet(tmp_path)), split="train", cache_dir=str(tmp_path))
    score(ds, ["VQA"], judge, tmp_path, prompts_dir=pdir, columns={}).push_to_hub("tester/vqa-missing")
    back = load_dataset("tester/vqa-missing", split="train", cache_dir=str(tmp_path / "back"))
    assert [s is None for s in back["VQA"]] == [False, True, False]
    images = back.cast_column("image", Image(decode=False))["image"]
    assert [i and i["bytes"] for i in images] == [png(COLORS[0]), None, png(COLORS[2])]
    assert load_dataset("tester/vqa-missing", "errors", split="errors", cache_dir=str(tmp_path / "back"))["row"] == [1]


def test_saveable_nulls_only_gone_files_in_lists_and_selections(tmp_path, caplog):
    from datasets import load_from_disk

    from hf_judge.judging.images import missing_image_files, saveable

    (tmp_path / "a.png").write_bytes(png(COLORS[0]))
    a, gone = {"bytes": None, "path": str(tmp_path / "a.png")}, {"bytes": None, "path": str(tmp_path / "gone.png")}
    inline = {"bytes": png(COLORS[1]), "path": "nowhere.png"}  # has its bytes: nothing to read
    ds = Dataset.from_dict({"pics": [[a, gone], None, [inline, gone, None]], "one": [a, inline, gone], "n": [0, 1, 2]})
    ds = ds.cast_column("pics", List(Image())).cast_column("one", Image())
    assert missing_image_files(ds) == {str(tmp_path / "gone.png")}
    assert saveable(ds.select([0, 1])).num_rows == 2
    picked = ds.select([2, 0])  # indices over the table: the scan and the copy follow them
    saveable(picked).save_to_disk(str(tmp_path / "x"))
    back = load_from_disk(str(tmp_path / "x")).cast_column("one", Image(decode=False))
    back = back.cast_column("pics", List(Image(decode=False)))
    assert back["n"] == [2, 0] and "gone.png" in caplog.text
    assert back["one"] == [None, {"bytes": png(COLORS[0]), "path": "a.png"}]
    assert back["pics"] == [[inline, None, None], [{"bytes": png(COLORS[0]), "path": "a.png"}, None]]
    whole = image_dataset()  # every image has its bytes: returned as it is, nothing copied
    assert saveable(whole) is whole and missing_image_files(whole) == set()
