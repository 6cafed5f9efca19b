"""``headseg segment`` on an ``.mdx`` page (issue 49, item 12): ``--structure auto`` reads it as MDX (the same
records as ``--structure mdx``), so no record ends inside a fence a ``<TabItem>`` wraps."""

from __future__ import annotations

import json
from pathlib import Path

from headseg.segmenter.structure import read_markdown

from cli_helpers import run

PAGE = Path(__file__).resolve().parents[1] / "fixtures" / "mdx" / "install.mdx"


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_mdx_file_is_read_as_mdx_under_auto(model_dir, tmp_path, capsys):
    text = PAGE.read_text(encoding="utf-8")
    common = ["--model", model_dir, "--backend", "torch", "--device", "cpu", "--quiet", "--format", "jsonl",
              "--max-tokens", "96"]
    (tmp_path / "page.mdx").write_text(text, encoding="utf-8")
    (tmp_path / "page.txt").write_text(text, encoding="utf-8")
    got = {}
    for name, extra in (("auto", []), ("mdx", ["--structure", "mdx"]), ("markdown", ["--structure", "markdown"])):
        src = tmp_path / ("page.mdx" if name == "auto" else "page.txt")
        rc, err = run(["segment", str(src), "--out", str(tmp_path / f"{name}.jsonl"), *extra, *common], capsys)
        assert rc == 0, err
        got[name] = [(r["start"], r["end"], r["headings"]) for r in _records(tmp_path / f"{name}.jsonl")]
    assert got["auto"] == got["mdx"]
    assert "".join(text[a:b] for a, b, _ in got["auto"]) == text
    code = [(b.start, b.end) for b in read_markdown(text, mdx=True).blocks if b.kind == "code"]
    ends = {b for _, b, _ in got["auto"]}
    assert not [c for c in code if any(c[0] < e < c[1] for e in ends)]
    # read as CommonMark, the page's code comments are headings of some record
    comments = {"then install the tool and its helper", "run from an elevated prompt"}
    assert not comments & {h for *_, hs in got["auto"] for h in hs}
    assert comments & {h for *_, hs in got["markdown"] for h in hs}
