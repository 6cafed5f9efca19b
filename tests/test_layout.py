"""The layout rules of the code: one-way imports (no cycle, not even inside functions) and files of one job.

Reads the sources with :mod:`ast` (nothing is imported), resolves the
``headseg.*`` names through ``pyproject.toml``'s ``package-dir`` mapping, and
walks every import statement, including those inside functions and under
``if TYPE_CHECKING:``: an import that runs late is still a dependency, two
modules that import each other late are one module in two files, and a type
one module names from another is a dependency of its design even when Python
never runs the import.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Sequence

import pytest

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 450
#: folders whose files must stay under MAX_LINES: every product folder
SIZE_RULED = ("analysis", "segmenter", "export", "headseg", "tui")
#: the modules that share one backend between callers: they read its traits from the capture
#: protocol (``analysis.capture.CaptureBackend``), never by ``getattr``
BACKEND_SHARERS = ("export/batcher.py", "export/runner.py", "headseg/serve")


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


#: the segmentation strategies and the search: they take a ``SearchRequest``, never the options
#: (``segmenter/options.py`` reads the levels' registry, so a strategy reading the options is a circle)
STRATEGY_MODULES = tuple(f"headseg.segmenter.{m}" for m in (
    "levels", "topics", "tree", "search", "cuts", "blocks", "lines", "limits", "penalty", "document", "request"))


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules that module ``name`` (file ``path``) imports anywhere in its code (inside
    functions and under ``if TYPE_CHECKING:`` too)."""
    return {t for t, _ in imported(name, path, known)}


def imported(name: str, path: Path, known: set[str]) -> set[tuple[str, str]]:
    """``(module, name)`` for every package module that module ``name`` (file ``path``) imports, and each
    name it imports from it (``"*"`` for the module itself), anywhere in its code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            targets = [(a.name, "*") for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the module pkg.mod when there is one
            targets = [(f"{base}.{a.name}", "*") if f"{base}.{a.name}" in known else (base, a.name)
                       for a in node.names]
        for t, what in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add((t, what))
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
    assert "headseg.segmenter.topics" in graph["headseg.segmenter.levels"]
    assert "headseg.api" in graph["headseg.distributed"]  # imported inside __init__


def test_cycle_finder_finds_a_late_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_walk_sees_type_checking_imports_and_the_names_imported(tmp_path):
    src = tmp_path / "a.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import Thing\n"
                   "def f():\n    from . import c\n", encoding="utf-8")
    known = {"p", "p.a", "p.b", "p.c"}
    assert imported("p.a", src, known) == {("p.b", "Thing"), ("p.c", "*")}
    # a cycle made only through a TYPE_CHECKING import is a cycle
    other = tmp_path / "b.py"
    other.write_text("from . import a\n", encoding="utf-8")
    graph = {"p.a": imports_of("p.a", src, known), "p.b": imports_of("p.b", other, known)}
    assert cycles(graph) == [["p.a", "p.b"]]


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_analysis_is_the_floor():
    graph = import_graph()
    up = {m: sorted(t for t in deps if not t.startswith("headseg.analysis"))
          for m, deps in graph.items() if m.startswith("headseg.analysis")}
    assert not {m: d for m, d in up.items() if d}


def _leaves(graph: dict[str, set[str]], package: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules of ``package`` that import a package module outside ``allowed`` (prefixes), with what."""
    out = {}
    for m, deps in graph.items():
        if m == package or m.startswith(package + "."):
            bad = sorted(t for t in deps if not any(t == a or t.startswith(a + ".") for a in allowed))
            if bad:
                out[m] = bad
    return out


def test_the_segmenter_depends_on_a_contract_not_on_the_engine():
    # the algorithm imports the floor (the capture protocol, the types) and itself: never the
    # serving engine (export) nor the front door (headseg.*, which chooses and builds the engine)
    graph = import_graph()
    assert not _leaves(graph, "headseg.segmenter", ("headseg.analysis", "headseg.segmenter"))


def options_readers(mods: dict[str, Path], strategies: Sequence[str]) -> dict[str, list[str]]:
    """The ``strategies`` (module names) that import the options module or ``SegmentOptions``, with what."""
    known = set(mods)
    out = {}
    for m in strategies:
        bad = sorted(f"{t}:{what}" for t, what in imported(m, mods[m], known)
                     if t == "headseg.segmenter.options" or what == "SegmentOptions")
        if bad:
            out[m] = bad
    return out


def test_strategies_take_a_request_not_the_options():
    # a strategy or the search reads a SearchRequest and its level's declared options: never the whole
    # SegmentOptions (that was options.py <-> levels.py <-> topics.py / tree.py, through TYPE_CHECKING)
    mods = modules()
    assert set(STRATEGY_MODULES) <= set(mods), sorted(set(STRATEGY_MODULES) - set(mods))
    assert not options_readers(mods, STRATEGY_MODULES)


def test_the_options_rule_can_fail(tmp_path):
    f = tmp_path / "s.py"
    f.write_text("if TYPE_CHECKING:\n    from .options import SegmentOptions\n", encoding="utf-8")
    g = tmp_path / "t.py"
    g.write_text("from headseg.segmenter import SegmentOptions\n", encoding="utf-8")
    mods = {"headseg.segmenter.s": f, "headseg.segmenter.t": g, "headseg.segmenter.options": f,
            "headseg.segmenter": g}
    assert options_readers(mods, ("headseg.segmenter.s", "headseg.segmenter.t")) == {
        "headseg.segmenter.s": ["headseg.segmenter.options:SegmentOptions"],
        "headseg.segmenter.t": ["headseg.segmenter:SegmentOptions"]}


def test_the_engine_room_stands_on_the_floor_alone():
    graph = import_graph()
    assert not _leaves(graph, "headseg.export", ("headseg.analysis", "headseg.export"))


def test_the_layering_rules_can_fail():
    graph = {"headseg.segmenter.a": {"headseg.export.b", "headseg.analysis.c"}, "headseg.segmenter": set(),
             "headseg.export.b": {"headseg.segmenter.a"}}
    assert _leaves(graph, "headseg.segmenter", ("headseg.analysis", "headseg.segmenter")) == {
        "headseg.segmenter.a": ["headseg.export.b"]}
    assert _leaves(graph, "headseg.export", ("headseg.analysis", "headseg.export")) == {
        "headseg.export.b": ["headseg.segmenter.a"]}


def backend_getattrs(source: str) -> list[int]:
    """Lines of ``source`` that read an attribute of a backend (or its session) with ``getattr``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and node.args and re.search(r"backend|session|inner", ast.unparse(node.args[0])):
            out.append(node.lineno)
    return out


def test_backend_getattr_finder():
    assert backend_getattrs("x = getattr(backend, 'per_window', False)\ny = getattr(self, 'n')\n"
                            "z = getattr(getattr(b.backend, 'session', None), 'parallel_calls', 1)\n") == [1, 3, 3]


def test_the_batcher_and_the_service_read_backend_traits_from_the_protocol():
    found = []
    for rel in BACKEND_SHARERS:
        path = REPO / rel
        for f in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            found += [f"{f.relative_to(REPO).as_posix()}:{n}" for n in backend_getattrs(f.read_text(encoding="utf-8"))]
    assert not found, f"backend attributes read with getattr (declare them on CaptureBackend): {found}"


def test_files_have_one_job():
    over = []
    for folder in SIZE_RULED:
        for f in (REPO / folder).rglob("*.py"):
            rel = f.relative_to(REPO).as_posix()
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


#: docs/layout.md's "Modules" section: one heading per folder, one line per module
LAYOUT_DOC = REPO / "docs" / "layout.md"
FOLDERS = {
    "headseg": "`headseg/` → `headseg`: the front door: public API and configuration, command line, framework "
               "adapters, the HTTP service",
    "analysis": "`analysis/` → `headseg.analysis`: the floor: imports nothing above it",
    "segmenter": "`segmenter/` → `headseg.segmenter`: the algorithm: segments from unit vectors, over the capture "
                 "contract (imports only the floor)",
    "export": "`export/` → `headseg.export`: the engine room: ONNX sessions and artifacts, the backend registry, "
              "the batcher and the async runner (imports only the floor)",
    "tui": "`tui/` → `headseg.tui`: the terminal inspector",
}


def first_doc_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def module_section() -> str:
    """The "Modules" section of docs/layout.md as the sources say it: ``path``: first docstring line."""
    parts = ["## Modules\n"]
    for folder, title in FOLDERS.items():
        parts.append(f"\n### {title}\n\n")
        for f in sorted((REPO / folder).rglob("*.py")):
            parts.append(f"- `{f.relative_to(REPO).as_posix()}`: {first_doc_line(f)}\n")
    return "".join(parts)


def test_the_layout_doc_lists_every_module_as_its_docstring_says():
    text = LAYOUT_DOC.read_text(encoding="utf-8")
    assert "## Modules\n" in text
    assert text[text.index("## Modules\n"):] == module_section(), (
        "docs/layout.md's module list is stale: python tests/test_layout.py --write-doc")


def test_every_module_says_its_job_in_its_first_line():
    missing = [f.relative_to(REPO).as_posix() for folder in FOLDERS for f in (REPO / folder).rglob("*.py")
               if not first_doc_line(f)]
    assert not missing, f"modules without a docstring: {missing}"


if __name__ == "__main__" and sys.argv[1:] == ["--write-doc"]:
    text = LAYOUT_DOC.read_text(encoding="utf-8")
    LAYOUT_DOC.write_text(text[:text.index("## Modules\n")] + module_section(), encoding="utf-8")


#: the benchmark scripts: a package run from the repository root (``python -m benchmarks.NAME``)
BENCHMARKS = REPO / "benchmarks"


def sys_path_edits(source: str) -> list[int]:
    """Lines of ``source`` that change the import path: a call on ``sys.path`` (``insert``, ``append``,
    ...), an assignment to it or to a slice of it, or ``site.addsitedir``."""
    def is_sys_path(node: ast.AST) -> bool:
        return ast.unparse(node.value if isinstance(node, ast.Subscript) else node) == "sys.path"

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if is_sys_path(node.func.value) or ast.unparse(node.func) == "site.addsitedir":
                out.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if any(is_sys_path(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
                out.append(node.lineno)
    return sorted(out)


def test_sys_path_edit_finder():
    assert sys_path_edits("import sys\nsys.path.insert(0, 'x')\nsys.path.append('y')\nsys.path[:0] = ['z']\n"
                          "sys.path = []\nsys.path += ['w']\nimport site\nsite.addsitedir('v')\n") == [2, 3, 4, 5, 6, 8]
    assert sys_path_edits("import sys, os\nprint(sys.path)\nx = list(sys.path)\nos.path.join('a')\n"
                          "env = {'PYTHONPATH': 'x'}\n") == []


def test_no_benchmark_edits_sys_path():
    # the scripts import each other and benchmarks/common.py as a package: a script that puts a folder on
    # sys.path imports a second copy of a module under another name, and works only from where it was written
    found = [f"{f.relative_to(REPO).as_posix()}:{n}" for f in sorted(BENCHMARKS.glob("*.py"))
             for n in sys_path_edits(f.read_text(encoding="utf-8"))]
    assert not found, f"benchmark scripts that edit sys.path (import from the benchmarks package instead): {found}"
