"""The loopback Hub itself: push_to_hub and load_dataset round trips."""

from __future__ import annotations

import os

from datasets import Dataset, DatasetDict, load_dataset
from huggingface_hub import DatasetCard, HfApi


def test_push_and_load_round_trip(hub):
    dd = DatasetDict(
        {
            "train": Dataset.from_dict({"a": [1, 2, None], "b": ["x", "y", "z"], "c": [0.5, None, 1.5]}),
            "test": Dataset.from_dict({"a": [7], "b": ["w"], "c": [2.0]}),
        }
    )
    dd.push_to_hub("tester/roundtrip")
    back = load_dataset("tester/roundtrip")
    assert set(back) == {"train", "test"}
    assert back["train"].to_list() == dd["train"].to_list() and back["train"].features == dd["train"].features
    dd["train"] = dd["train"].map(lambda r: {"b": r["b"] + "!"})
    dd.push_to_hub("tester/roundtrip")
    again = load_dataset("tester/roundtrip", split="train", download_mode="force_redownload")
    assert again["b"] == ["x!", "y!", "z!"]
    files = HfApi().list_repo_files("tester/roundtrip", repo_type="dataset")
    assert "README.md" in files and any(f.endswith(".parquet") for f in files)


def test_card_private_repo_and_no_token_in_storage(hub):
    Dataset.from_dict({"a": [1]}).push_to_hub("tester/private", private=True)
    assert HfApi().dataset_info("tester/private").private
    card = DatasetCard.load("tester/private", repo_type="dataset")
    card.text += "\nhello card\n"
    # an upload, not card.push_to_hub: before huggingface_hub 1.x that validates at huggingface.co, not HF_ENDPOINT
    HfApi().upload_file(
        path_or_fileobj=str(card).encode(), path_in_repo="README.md", repo_id="tester/private", repo_type="dataset"
    )
    assert "hello card" in DatasetCard.load("tester/private", repo_type="dataset").text
    token = os.environ["HF_TOKEN"].encode()
    for f in hub.uploaded_files():
        assert token not in f.read_bytes()
    assert any(os.environ["HF_TOKEN"] in a for a in hub.auth_headers())
