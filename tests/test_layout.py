"""The layering docs/design/layout.md states: no import cycle, values at the bottom."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "streamfilter"


def _imports() -> dict[str, set[str]]:
    """Module -> the streamfilter modules it imports, at the top, inside
    functions and for type checking alike (its own packages left out: a
    submodule is always imported after them)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in modules]
                targets = found or [target]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name and not name.startswith(t + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    path: list[str] = []

    def walk(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := walk(target)) is not None:
                return found
        state[module] = 2
        path.pop()
        return None

    for module in sorted(graph):
        if module not in state and (found := walk(module)) is not None:
            return found
    return None


def test_no_module_imports_another_that_imports_it_back() -> None:
    graph = _imports()
    assert len(graph) > 60 and "streamfilter._judge" in graph["streamfilter.stores.lmdb._store"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_values_sit_below_the_judge_and_the_stores() -> None:
    graph = _imports()
    assert graph["streamfilter._values"] <= {"streamfilter._compiled"}
    assert "streamfilter._judge" not in graph["streamfilter.stores._base"]
    assert not any(target.startswith("streamfilter.stores.") for target in graph["streamfilter.redis_streams"])


def test_a_cycle_is_found_where_there_is_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
