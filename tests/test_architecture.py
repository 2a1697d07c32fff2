"""The package's import structure: no module imports another's private names, no import cycle.

Every import is read from the source (those inside functions too). What exists today is listed below as debt
(issue 25 pays it off by moving the modules into subpackages whose imports run one way): a new private import
or a new cycle fails, and so does a listed one that is gone, so that the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hf_judge"

# (importing module, module imported from, name): each is a name the importer should not know
PRIVATE_IMPORTS_DEBT = {
    ("batch", "store", "_encode_meta"),
    ("batch_files", "score", "_as_splits"),
    ("batch_files", "score", "_build_plans"),
    ("batch_files", "score", "_requests"),
    ("batch_files", "score", "_settings"),
    ("estimate", "score", "_api_key"),
    ("estimate", "score", "_as_splits"),
    ("estimate", "score", "_build_plans"),
    ("estimate", "score", "_settings"),
    ("fleet", "client", "_endpoint"),
    ("fleet", "client", "_read_limited"),
    ("fleet", "client", "_ReplyTooLarge"),
    ("logprobs", "validate", "_clean_token"),
    ("ray", "score", "_api_key"),
    ("ray", "score", "_preflight"),
    ("ray", "score", "_settings"),
    ("ray", "score", "_RUN_COUNTERS"),
    ("ray", "score", "_as_splits"),
    ("ray", "score", "_column_mapping"),
    ("ray", "score", "_new_summary"),
    ("score", "stream", "_Streams"),
    ("stream", "score", "_SplitContext"),
    ("stream", "score", "_counters"),
    ("stream", "score", "_fill_summary"),
    ("stream", "score", "_record_run"),
    ("stream", "score", "_RunResources"),
}

# the modules of today's one cycle
CYCLE_DEBT = {"card", "estimate", "filter", "hub", "output", "score", "stream"}


def _modules() -> dict[str, Path]:
    """Module name (relative to the package, "" for its __init__) -> file."""
    found = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return found


def _imports() -> tuple[dict[str, set[str]], set[tuple[str, str, str]]]:
    """The import graph between the package's modules, and the private names imported across them."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    private: set[tuple[str, str, str]] = set()
    for mod, path in modules.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                elif node.module and (node.module == "hf_judge" or node.module.startswith("hf_judge.")):
                    base = node.module.split(".")[1:]
                else:
                    continue
                source = ".".join(p for p in base if p)
                for alias in node.names:
                    sub = f"{source}.{alias.name}" if source else alias.name
                    target = sub if sub in modules else source
                    if target != mod:
                        graph[mod].add(target)
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            private.add((mod, source, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("hf_judge."):
                        graph[mod].add(alias.name.removeprefix("hf_judge."))
    return graph, private


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_another_modules_private_names_beyond_the_listed_debt():
    _, private = _imports()
    assert private - PRIVATE_IMPORTS_DEBT == set(), "a new import of another module's private name: make it public"
    assert PRIVATE_IMPORTS_DEBT - private == set(), "paid off: remove these from PRIVATE_IMPORTS_DEBT"


def test_the_import_cycles_do_not_grow():
    """Today one cycle (issue 25 breaks it): a module joining it, or a second cycle, fails."""
    cycles = _cycles(_imports()[0])
    assert len(cycles) <= 1, cycles
    assert all(c <= CYCLE_DEBT for c in cycles), [sorted(c - CYCLE_DEBT) for c in cycles]


def test_the_scanner_finds_a_private_import_and_a_cycle():
    """The checks above can fail: the scanner sees what they look for."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert ("stream", "score", "_RunResources") in _imports()[1]  # one import inside a function body
