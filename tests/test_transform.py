"""hf_judge.Judge, the core as a map transform: Dataset.map, IterableDataset.map and Ray's map_batches take it as
it is, and each writes score_dataset's columns for the same rows (against the loopback judge)."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest
from datasets import Dataset

import hf_judge
from hf_judge import ConfigError, Judge, Panelist, Settings, score_dataset

COLUMNS = {"instruction": "question", "output": "answer"}
METRICS = ["QA_Clarity", "Binary"]
FAST = Settings(model="judge", backoff_base=0.001, backoff_max=0.01)
# a 1x1 PNG as a data URL (sent as an image part, never fetched); each row's differs in its ignored tail
PNG_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVQI12P4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def _data(rows: int = 6) -> Dataset:
    """Rows whose prompts differ; row 2's answer is null: an error in every metric."""
    answers: list[str | None] = [f"t-{i}: it is {2 * i}" for i in range(rows)]
    answers[2] = None
    return Dataset.from_dict(
        {
            "question": [f"t-{i}: is {i} + {i} even?" for i in range(rows)],
            "answer": answers,
            "prediction": [f"{i % 2 == 0}" for i in range(rows)],
            "picture": [f"{PNG_URL}AAA{i}" for i in range(rows)],
        }
    )


def _judge(server, cache, metrics=METRICS, columns=COLUMNS, **kw) -> Judge:
    return Judge(
        metrics, columns=columns, settings=FAST, base_url=server.base_url, api_key="sk-test", cache_dir=cache,
        retries=0, **kw,
    )  # fmt: skip


def _reference(server, cache, metrics=METRICS, columns=COLUMNS, **kw) -> dict[str, list]:
    out = score_dataset(
        _data(), metrics, columns=columns, settings=FAST, base_url=server.base_url, api_key="sk-test",
        cache_dir=cache, progress=False, retries=0, **kw,
    )  # fmt: skip
    return {c: list(out["train"][c]) for c in out["train"].column_names}


def _check(scored, expected: dict[str, list], judge: Judge) -> None:
    """``scored`` has ``expected``'s columns and values, then the errors column: row 2's null answer in each metric."""
    got = {c: list(scored[c]) for c in scored.column_names} if isinstance(scored, Dataset) else scored
    assert list(got) == [*expected, "judge_errors"], "the input columns, score_dataset's, then the errors column"
    errors = got["judge_errors"]
    for c in expected:
        assert got[c] == expected[c], f"column {c!r} (the errors column: {errors})"
    assert [[(e["metric"], e["kind"]) for e in row] for row in errors] == [
        [(m.name, "null_input") for m in judge.metrics] if r == 2 else [] for r in range(len(errors))
    ]
    assert all(e["attempts"] == 0 and "answer" in e["message"] for e in errors[2])


def test_dataset_map_equals_score_dataset_and_a_second_map_sends_nothing(judge, tmp_path):
    expected = _reference(judge, tmp_path / "ref")
    sent = judge.stats()["requests"]
    with _judge(judge, tmp_path / "cache") as jt:
        ds = _data()
        scored = ds.map(jt, batched=True, batch_size=4, features=jt.features(ds.features))
        _check(scored, expected, jt)
        assert judge.stats()["requests"] - sent == 10, "5 rows with an answer x 2 metrics"
        again = ds.map(jt, batched=True, batch_size=4, features=jt.features(ds.features), load_from_cache_file=False)
    assert again.to_dict() == scored.to_dict()
    assert judge.stats()["requests"] - sent == 10, "the reply store: a second map sends 0 requests"
    assert scored.features == jt.features(ds.features)


def test_iterable_dataset_map_equals_score_dataset(judge, tmp_path):
    expected = _reference(judge, tmp_path / "ref")
    jt = _judge(judge, tmp_path / "cache")
    ds = _data()
    stream = ds.to_iterable_dataset(num_shards=2).map(jt, batched=True, batch_size=2, features=jt.features(ds.features))
    rows = list(stream)
    _check({c: [r[c] for r in rows] for c in rows[0]}, expected, jt)
    jt.close()


def test_pickles_without_its_key_before_and_after_a_call(judge, tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORM_TEST_KEY", "sk-transform-secret-1234")
    jt = Judge(
        METRICS, columns=COLUMNS, settings=FAST, base_url=judge.base_url, api_key="env:TRANSFORM_TEST_KEY",
        cache_dir=tmp_path / "cache", retries=0,
    )  # fmt: skip
    before = pickle.dumps(jt)
    assert b"sk-transform-secret" not in before
    batch = {"question": ["t-0: is 0 + 0 even?"], "answer": ["t-0: it is 0"], "prediction": ["True"]}
    first = jt(batch)
    after = pickle.dumps(jt)
    assert b"sk-transform-secret" not in after
    assert len(after) < 20_000, "the configuration only: no loop, session or store"
    again = pickle.loads(after)
    sent = judge.stats()["requests"]
    assert again(batch) == first and first["QA_Clarity"][0] is not None
    assert judge.stats()["requests"] == sent, "the copy judges from the same reply store"
    assert "sk-transform" not in repr(jt)
    jt.close()


def test_dataset_map_with_two_processes(judge, tmp_path):
    """Real processes (datasets' num_proc=2): each builds its own loop, client and store and shares the replies."""
    expected = _reference(judge, tmp_path / "ref")
    jt = _judge(judge, tmp_path / "cache")
    ds = _data()
    scored = ds.map(jt, batched=True, batch_size=2, num_proc=2, features=jt.features(ds.features))
    _check(scored, expected, jt)


@pytest.mark.parametrize(
    "feature",
    [
        {"samples": 3, "temperature": 0.7},
        {"models": "a,b"},
        {"logprobs": True, "models": "a,b"},
        {"logprobs": True, "samples": 3, "temperature": 0.7},
        {"token_columns": True},
        {"metrics": ["Comparative"], "columns": {"response1": "answer", "response2": "prediction"}},
        {
            "metrics": ["VQA"],
            "columns": {**COLUMNS, "picture": "picture"},
            "prompts_dir": str(Path(__file__).parent / "prompts_matrix"),
        },
    ],
    ids=["samples", "panel", "logprobs+panel", "logprobs+samples", "token_columns", "comparative", "images"],
)
def test_every_way_of_judging_through_the_transform_equals_score_dataset(judge, tmp_path, feature):
    expected = _reference(judge, tmp_path / "ref", **feature)
    jt = _judge(judge, tmp_path / "cache", **feature)
    ds = _data()
    _check(ds.map(jt, batched=True, batch_size=3, features=jt.features(ds.features)), expected, jt)
    jt.close()


def test_an_image_column_equals_score_dataset(judge, tmp_path):
    """A datasets.Image column reaches the map decoded (PIL) and is sent encoded again: PIL's own PNG files come
    out byte for byte, so the map sends the requests score_dataset sent (0 new ones). The first row has no
    image: the column is still read as images."""
    from datasets import Features, Image, Value
    from PIL import Image as PILImage

    def png(i: int) -> dict:
        out = io.BytesIO()
        PILImage.new("RGB", (2, 2), (i * 40, 0, 0)).save(out, format="PNG")
        return {"bytes": out.getvalue(), "path": None}

    features = Features({"question": Value("string"), "answer": Value("string"), "picture": Image()})
    ds = Dataset.from_dict(
        {
            "question": ["q0", "q1", "q2", "q3"],
            "answer": ["a0", "a1", "a2", "a3"],
            "picture": [None, png(1), png(2), png(3)],
        },
        features=features,
    )
    kw = {"columns": {**COLUMNS, "picture": "picture"}, "prompts_dir": str(Path(__file__).parent / "prompts_matrix")}
    ref = score_dataset(
        ds, ["VQA"], settings=FAST, base_url=judge.base_url, api_key="sk-test", cache_dir=tmp_path, progress=False, **kw
    )
    sent = judge.stats()["requests"]
    with _judge(judge, tmp_path, ["VQA"], **kw) as jt:
        out = ds.map(jt, batched=True, features=jt.features(ds.features))
    assert list(out["VQA"]) == list(ref["train"]["VQA"]) and len(set(out["VQA"][1:])) > 1
    assert [[e["kind"] for e in row] for row in out["judge_errors"]] == [["null_input"], [], [], []]
    assert judge.stats()["requests"] == sent


def test_one_row_at_a_time(judge, tmp_path):
    expected = _reference(judge, tmp_path / "ref")
    jt = _judge(judge, tmp_path / "cache")
    ds = _data()
    _check(ds.map(jt, features=jt.features(ds.features)), expected, jt)
    jt.close()


def test_judge_without_metrics_points_to_panelist():
    with pytest.raises(TypeError, match="hf_judge.Panelist"):
        Judge(model="meta-llama/Llama-3.1-8B", base_url="http://127.0.0.1:8001/v1")
    assert Panelist(model="gpt-4.1-nano").column_name == "gpt_4_1_nano"
    assert Settings(models=[Panelist(model="a"), "b"]).judges[0] == Panelist(model="a")
    assert hf_judge.Judge is Judge


def test_bad_configuration_is_refused_before_any_request(tmp_path):
    with pytest.raises(TypeError, match=r"Judge\(\) got unexpected keyword argument\(s\) concurrencyy"):
        Judge(METRICS, model="m", base_url="http://127.0.0.1:9/v1", concurrencyy=3)
    with pytest.raises(ConfigError, match="batch is not for a map transform"):
        Judge(METRICS, model="m", base_url="http://127.0.0.1:9/v1", batch=True)
    with pytest.raises(ConfigError, match="already has the columns"):
        jt = Judge(METRICS, model="m", base_url="http://127.0.0.1:9/v1", columns=COLUMNS, cache_dir=tmp_path)
        jt({"question": ["q"], "answer": ["a"], "prediction": ["p"], "QA_Clarity": [3]})


def test_ray_map_batches(judge, tmp_path):
    """Ray Data's map_batches takes the Judge as it is, in its default (numpy) and pyarrow batch formats, and
    as a callable class for actors."""
    ray = pytest.importorskip("ray")

    expected = _reference(judge, tmp_path / "ref")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        if not ray.is_initialized():
            ray.init(
                address="local",
                num_cpus=1,
                include_dashboard=False,
                object_store_memory=80 * 1024 * 1024,
                log_to_driver=False,
            )
        try:
            ray.data.DataContext.get_current().execution_options.preserve_order = True
            jt = _judge(judge, tmp_path / "cache")
            data = ray.data.from_items(_data().to_list(), override_num_blocks=2)
            for fmt in ("default", "pyarrow", "pandas"):
                rows = data.map_batches(jt, batch_format=fmt, batch_size=3).take_all()
                _check({c: [r[c] for r in rows] for c in rows[0]}, expected, jt)
            kwargs = {"metrics": METRICS, "columns": COLUMNS, "settings": FAST, "base_url": judge.base_url,
                      "api_key": "sk-test", "cache_dir": tmp_path / "cache", "retries": 0}  # fmt: skip
            rows = data.map_batches(Judge, fn_constructor_kwargs=kwargs, concurrency=1, batch_size=3).take_all()
            _check({c: [r[c] for r in rows] for c in rows[0]}, expected, jt)
        finally:
            ray.shutdown()
