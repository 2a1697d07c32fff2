"""Ctrl-C stops a push to the Hub: at once, with exit 130, saying what reached the repo and where the result is
kept, and nothing is sent to the Hub after it (results/stoppable.py). Before, two Ctrl-C did nothing: huggingface_hub
uploads a commit's files on threads, which the process waited for, and the commit went ahead."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import until

HUB_SERVER = Path(__file__).with_name("hub_server.py")


class SlowHub:
    """A Hub server of its own whose every upload (an LFS object, a commit) is held ``delay`` seconds."""

    def __init__(self, data_dir: Path, delay: float):
        self.data_dir = data_dir
        args = [sys.executable, str(HUB_SERVER), "--port", "0", "--data-dir", str(data_dir)]
        self.proc = subprocess.Popen([*args, "--upload-delay", str(delay)], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("PORT "), line
        self.endpoint = f"http://127.0.0.1:{int(line.split()[1])}"

    def requests(self) -> list[str]:
        with urllib.request.urlopen(f"{self.endpoint}/_admin/requests", timeout=10) as r:
            return json.loads(r.read())

    def files(self, repo: str) -> dict:
        state = self.data_dir / "repos" / "dataset" / (repo.replace("/", "__") + ".json")
        return json.loads(state.read_text())["files"] if state.exists() else {}

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def slow_hub(tmp_path):
    hub = SlowHub(tmp_path / "slow-hub", delay=120)
    yield hub
    hub.stop()


@pytest.mark.parametrize("streaming", [False, True])
def test_ctrl_c_stops_a_push_at_once_and_says_what_was_pushed_and_what_is_kept(judge, slow_hub, tmp_path, streaming):
    """A real process (Ctrl-C): `python -m hf_judge.cli score ... --push-to-hub`, SIGINT while its files upload."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"a{i}"}) + "\n" for i in range(20)))
    out, repo = tmp_path / "out", "tester/the-wrong-repo"
    args = ["score", str(data), "--metrics", "QA_Clarity", "-m", "judge", "--base-url", judge.base_url]
    args += ["--column", "instruction=question", "--column", "output=answer", "--api-key-env", "PUSH_KEY"]
    args += ["--cache-dir", str(tmp_path / "cache"), "-o", str(out), "--push-to-hub", repo]
    args += ["--streaming"] if streaming else []
    env = {**os.environ, "HF_ENDPOINT": slow_hub.endpoint, "PUSH_KEY": "sk-test"}
    p = subprocess.Popen(
        [sys.executable, "-m", "hf_judge.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: p.poll() is not None or any("/_lfs/upload/" in r for r in slow_hub.requests()))
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, stderr = p.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        p.kill()
    assert p.returncode == 130, stderr
    # before: after the uploads. Each is held 120 s, so ending within 60 s is stopping at once, with room for a
    # loaded machine (typically ~1 s; a bound of 10 s was too tight under load)
    assert took < 60, f"the process ended {took:.1f} s after the Ctrl-C"
    assert f"the push to {repo} was interrupted before its first commit: the repo is as it was" in stderr
    assert f"The scored result is saved in {out} and every reply in the reply cache" in stderr
    assert "nothing paid for is lost" in stderr
    assert slow_hub.files(repo) == {}  # no commit reached the repo
    assert (out / "summary.json").is_file()


def test_nothing_is_sent_to_the_hub_after_the_ctrl_c(hub):
    """The push goes on in its thread after a Ctrl-C until what it had in flight ends; its next request (here the
    commit of the card) is refused: nothing reaches the repo after the Ctrl-C, and the message says what did."""
    from huggingface_hub import HfApi

    from hf_judge import PushInterrupted
    from hf_judge.results.stoppable import stoppable_push, stopped_push_in_flight

    repo, started, release = "tester/stopped-push", threading.Event(), threading.Event()
    api = HfApi()

    def push(steps):
        api.create_repo(repo, repo_type="dataset", exist_ok=True)
        api.upload_file(path_or_fileobj=b"rows", path_in_repo="data.txt", repo_id=repo, repo_type="dataset")
        steps.done("the data")
        started.set()
        release.wait(30)  # a request in flight when Ctrl-C comes
        api.upload_file(path_or_fileobj=b"card", path_in_repo="README.md", repo_id=repo, repo_type="dataset")
        steps.done("the card")

    def ctrl_c():
        started.wait(30)
        signal.raise_signal(signal.SIGINT)  # handled in the main thread, waiting for the push

    threading.Thread(target=ctrl_c, daemon=True).start()
    with pytest.raises(PushInterrupted) as e:
        stoppable_push(repo, ["the data", "the card"], push)
    assert str(e.value) == f"the push to {repo} was interrupted: the data reached the repo; the card did not"
    assert stopped_push_in_flight()
    commits = sum("/commit/" in r for r in hub.requests())
    release.set()
    until(lambda: not stopped_push_in_flight())
    assert sum("/commit/" in r for r in hub.requests()) == commits  # the card's commit was never sent
    files = api.list_repo_files(repo, repo_type="dataset")
    assert "data.txt" in files and "README.md" not in files
