"""The dependency floors pyproject.toml states are the ones CI tests (.ci/lowest.txt), and they hold here."""

from __future__ import annotations

import re
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 has no tomllib; pyproject is read as text below
    tomllib = None

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _floors() -> dict[str, str]:
    if tomllib is None:
        pytest.fail("reading pyproject.toml needs Python 3.11+ (tomllib)")
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for dep in deps:
        m = REQUIREMENT.match(dep)
        assert m, f"{dep!r}: every direct dependency states its floor (name>=version)"
        floors[_norm(m[1])] = m[2]
    return floors


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / ".ci" / "lowest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            pins[_norm(name)] = pinned.strip()
    return pins


def test_ci_installs_exactly_the_floors_pyproject_states():
    assert _pins() == _floors()


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def test_the_installed_versions_are_at_or_above_the_floors():
    """An installed version below its floor: the floors in pyproject.toml are not what this environment runs."""
    for name, floor in _floors().items():
        assert _key(version(name)) >= _key(floor), f"{name} {version(name)} is below its floor {floor}"
