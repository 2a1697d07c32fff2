"""Azurite, Microsoft's Azure Storage emulator (Node.js), on loopback for the reply store on ``az://``.

Used through adlfs exactly as a user's storage account is: ``AZURE_STORAGE_CONNECTION_STRING``, with the
emulator's well-known development account. Azurite comes from npm (``.ci/run`` installs it in
``~/.cache/hf_judge/azurite``; the first test that needs it does the same where npm is here);
``HF_JUDGE_AZURITE`` names another ``azurite-blob``. Only where there is no npm are those tests skipped, except
under ``CI=true``, where that is a failure: CI must run them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

# Azurite's development account: public, documented, the same in every installation (not a secret)
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
INSTALL = Path.home() / ".cache" / "hf_judge" / "azurite"


def azurite_executable() -> str | None:
    """``azurite-blob``: ``$HF_JUDGE_AZURITE``, else the one .ci/run installs, else one on the PATH."""
    given = os.environ.get("HF_JUDGE_AZURITE")
    if given:
        return given
    cached = INSTALL / "node_modules" / ".bin" / "azurite-blob"
    return str(cached) if cached.exists() else shutil.which("azurite-blob")


class AzuriteServer:
    """Azurite's blob service in memory, in a process of its own, on a free loopback port."""

    scheme = "az"

    def __init__(self, executable: str) -> None:
        self.home = tempfile.mkdtemp(prefix="hfj-azurite-")  # its working folder (it writes a debug log there)
        self.log = Path(self.home) / "azurite.log"
        args = ["--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence", "--disableTelemetry"]
        # --skipApiVersionCheck, --loose: an Azure SDK newer than this Azurite sends an API version and
        # headers it does not know yet; real Azure accepts them
        args += ["--silent", "--skipApiVersionCheck", "--loose"]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([executable, *args], cwd=self.home, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            m = re.search(r"listens on (http://[\d.:]+)", self.log.read_text())
            if m:
                self.endpoint = f"{m[1]}/{ACCOUNT}"
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Azurite did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def connection_string(self) -> str:
        return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};BlobEndpoint={self.endpoint};"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to reach it: the connection string, as Azure's tools read it."""
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string}

    @property
    def options(self) -> dict[str, str]:
        """The same as ``storage_options`` (for a process whose environment does not point at it)."""
        return {"connection_string": self.connection_string}

    @property
    def cli_options(self) -> list[str]:
        return [f"connection_string={self.connection_string}"]

    def bucket(self) -> str:
        """A new empty container's URL."""
        import adlfs

        name = f"b-{uuid.uuid4().hex[:10]}"
        adlfs.AzureBlobFileSystem(**self.options).mkdir(name)
        return f"az://{name}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def install_azurite() -> str | None:
    """Azurite from npm into the cache folder .ci/run uses (once; one test process at a time), where npm is
    here; None where it is not (Node.js is a system package, outside what pip installs)."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    from filelock import FileLock

    INSTALL.mkdir(parents=True, exist_ok=True)
    with FileLock(str(INSTALL / ".install.lock"), timeout=600):
        if azurite_executable() is None:
            cmd = [npm, "install", "--prefix", str(INSTALL), "--no-audit", "--no-fund", "--silent", "azurite@3"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"npm could not install Azurite: {done.stderr[-2000:]}")
    return azurite_executable()


@pytest.fixture(scope="session")
def azure_server():
    executable = azurite_executable() or install_azurite()
    if executable is None:
        how = "install Node.js and npm (apt-get install nodejs npm), or set HF_JUDGE_AZURITE to an azurite-blob"
        if os.environ.get("CI"):  # CI installs it (.ci/run): there a missing Azurite is a failure, never a skip
            pytest.fail(f"Azurite cannot be installed here: the az:// store tests did not run; {how}")
        pytest.skip(f"no npm to install Azurite, the Azure Storage emulator, with ({how}; CI runs these)")
    server = AzuriteServer(executable)
    yield server
    server.stop()


@pytest.fixture
def azure(azure_server, monkeypatch):
    """Azurite, with this process's Azure Storage configuration pointed at it."""
    for k, v in azure_server.env.items():
        monkeypatch.setenv(k, v)
    for k in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    yield azure_server
