"""The layout rules of the code: one-way imports (no cycle, not even inside functions) and files of one job.

Reads the sources with :mod:`ast` (nothing is imported), resolves the
``headseg.*`` names through ``pyproject.toml``'s ``package-dir`` mapping, and
walks every import statement, including those inside functions: an import
that runs late is still a dependency, and two modules that import each other
late are one module in two files.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 450
#: folders whose files must stay under MAX_LINES (the evaluation baselines' registry aside)
SIZE_RULED = ("segmenter", "export", "headseg")
SIZE_EXEMPT = ("segmenter/evaluation",)


def package_dirs() -> dict[str, Path]:
    """``headseg.*`` package name -> its folder, from pyproject.toml."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        tomllib = pytest.importorskip("tomli")
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: REPO / folder for name, folder in cfg["tool"]["setuptools"]["package-dir"].items()}


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its ``__init__``)."""
    roots = package_dirs()
    out: dict[str, Path] = {}
    for pkg, folder in roots.items():
        for f in folder.rglob("*.py"):
            if folder.resolve() not in f.resolve().parents:
                continue  # reached through a link to another mapped folder: that root lists it
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
    return out


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (file ``path``) imports anywhere in its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the module pkg.mod when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_the_whole_package():
    graph = import_graph()
    # the front door, the floor and a late import inside a function are all seen
    assert "headseg" in graph and "headseg.analysis.errors" in graph
    assert "headseg.segmenter.topics" in graph["headseg.segmenter.api"]
    assert "headseg.segmenter.api" in graph["headseg.segmenter.distributed"]  # imported inside __init__


def test_cycle_finder_finds_a_late_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_analysis_is_the_floor():
    graph = import_graph()
    up = {m: sorted(t for t in deps if not t.startswith("headseg.analysis"))
          for m, deps in graph.items() if m.startswith("headseg.analysis")}
    assert not {m: d for m, d in up.items() if d}


def test_files_have_one_job():
    over = []
    for folder in SIZE_RULED:
        for f in (REPO / folder).rglob("*.py"):
            rel = f.relative_to(REPO).as_posix()
            if rel.startswith(SIZE_EXEMPT):
                continue
            n = len(f.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                over.append(f"{rel}: {n} lines")
    assert not over, f"files over {MAX_LINES} lines: {over}"


#: a comment line that only separates parts of a file ("# ------ outputs", "# ===== main")
BANNER = re.compile(r"^\s*#\s*[-=#*~]{5,}")


def banners(source: str) -> list[int]:
    """Line numbers (1-based) of the banner comments in ``source``."""
    return [i for i, line in enumerate(source.splitlines(), 1) if BANNER.match(line)]


def test_banner_finder():
    assert banners("x = 1\n# -------------------------------- outputs\ny = 2\n    # ===== inner\n") == [2, 4]
    assert banners("# a comment with -- dashes\n#: a constant's doc\n") == []


def test_no_file_needs_a_banner():
    # a file that separates its parts with banner comments does two jobs: it wants to be two files
    found = [f"{f.relative_to(REPO).as_posix()}:{n}" for f in sorted(modules().values())
             for n in banners(f.read_text(encoding="utf-8"))]
    assert not found, f"banner comments in package modules: {found}"
