"""``--structure`` on the command line: a ``.md`` file read as Markdown under auto, headings in every record,
and a bad value refused in one line (exit 2)."""

from __future__ import annotations

import json

from headseg.api import Segmenter

from cli_helpers import interrupted_run, journaled_argv, run

#: one ATX heading and a setext one: not Markdown by its looks (looks_like_markdown), only by its suffix
MD = ("# Install\n\nRun the installer. It takes a minute.\n\n- one item\n- two items\n\nGPU\n---\n\n"
      "Pick the CUDA build. It is larger.\n")


def _records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_md_file_is_markdown_under_auto(model_dir, tmp_path, capsys):
    common = ["--model", model_dir, "--backend", "torch", "--device", "cpu", "--quiet", "--format", "jsonl",
              "--max-tokens", "16"]
    for suffix in ("md", "txt"):
        (tmp_path / f"doc.{suffix}").write_text(MD, encoding="utf-8")
        rc, err = run(["segment", str(tmp_path / f"doc.{suffix}"), "--out", str(tmp_path / f"{suffix}.jsonl"),
                       *common], capsys)
        assert rc == 0, err
    md, txt = _records(tmp_path / "md.jsonl"), _records(tmp_path / "txt.jsonl")
    seg = Segmenter(model=model_dir, backend="torch", device="cpu")
    want = seg.segment(MD, max_tokens=16, structure="markdown").to_records(str(tmp_path / "doc.md"))
    assert [(r["start"], r["end"], r["headings"]) for r in md] == [(r["start"], r["end"], r["headings"])
                                                                   for r in want]
    assert md[0]["headings"] == ["Install"] and md[-1]["headings"] == ["Install", "GPU"]
    assert all(r["headings"] == [] for r in txt)
    # --structure markdown reads the .txt as Markdown too
    rc, err = run(["segment", str(tmp_path / "doc.txt"), "--out", str(tmp_path / "forced.jsonl"), "--structure",
                   "markdown", *common], capsys)
    assert rc == 0, err
    assert [r["headings"] for r in _records(tmp_path / "forced.jsonl")] == [r["headings"] for r in md]


def test_bad_structure_is_one_line(model_dir, tmp_path, capsys):
    (tmp_path / "doc.md").write_text(MD, encoding="utf-8")
    try:
        rc, err = run(["segment", str(tmp_path / "doc.md"), "--structure", "rst", "--model", model_dir], capsys)
    except SystemExit as exc:  # argparse refuses a choice itself
        rc, err = exc.code, capsys.readouterr().err
    assert rc == 2
    assert "structure" in err and "rst" in err


def test_md_files_stay_markdown_through_batches_and_resume(model_dir, tmp_path, capsys, monkeypatch):
    """A ``.md`` file's hint (a :class:`SourceText`) goes through the batches, the resume check of its
    digest and the pipeline: the resumed output is the uninterrupted one, read as Markdown."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"doc{i}.md").write_text(MD.replace("Install", f"Install {i}"), encoding="utf-8")
    out, full = tmp_path / "out.jsonl", tmp_path / "full.jsonl"
    argv = journaled_argv([str(folder)], out, model_dir) + ["--max-tokens", "16"]
    interrupted_run(argv, monkeypatch)
    rc, err = run(argv + ["--resume"], capsys)
    assert rc == 0, err
    rc, err = run(argv[:argv.index("--out") + 1] + [str(full)] + argv[argv.index("--out") + 2:], capsys)
    assert rc == 0, err
    assert out.read_bytes() == full.read_bytes()
    records = _records(out)
    assert {r["document"] for r in records} == {str(folder / f"doc{i}.md") for i in range(3)}
    assert [r["headings"] for r in records if r["document"].endswith("doc2.md")][-1] == ["Install 2", "GPU"]
