"""Issue 35 (hardening, third round), the command-line side: one regression test per item.

``NO_MODEL`` shows that a check ran before any model load: reaching the load would exit 3.
"""

from __future__ import annotations


import pytest


from cli_helpers import one_line, run

NO_MODEL = ["--model", "/nonexistent/model"]
TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly.\n"


@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


# ------------------------------------------------------------------ item 2
@pytest.fixture
def cache_slot(tmp_path, monkeypatch):
    """A cached artifact's folder in a cache of this test's own, with a graph in it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HEADSEG_CACHE", str(cache))
    slot = cache / "onnx" / "bert-6x12-0123456789abcdef-0123456789ab-0123456789abcdef-int8"
    slot.mkdir(parents=True, mode=0o700)
    (slot / "model.onnx").write_bytes(b"the cached graph")
    return slot


@pytest.mark.parametrize("name", ["model.onnx", "new.txt", "../../out.txt"])
@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_issue35_item2_out_inside_the_cache_is_refused(doc, cache_slot, capsys, name, fmt):
    out = cache_slot / name
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(out), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"
    assert sorted(p.name for p in cache_slot.parent.parent.rglob("*")) == ["bert-6x12-0123456789abcdef-0123456789ab-"
                                                                           "0123456789abcdef-int8", "model.onnx",
                                                                           "onnx"]


def test_issue35_item2_a_link_into_the_cache_is_refused(doc, cache_slot, tmp_path, capsys):
    link = tmp_path / "innocent.txt"
    link.symlink_to(cache_slot / "model.onnx")
    rc, err = run(["segment", str(doc), "--out", str(link), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"


def test_issue35_item2_export_out_inside_the_cache_is_refused(cache_slot, capsys):
    """An artifact written by name into a cache slot would be served as the cache's: only --cache writes there."""
    slot = cache_slot.parent / "bert-6x12-fedcba9876543210-ba9876543210-fedcba9876543210-fp32"
    rc, err = run(["export", *NO_MODEL, "--out", str(slot), "--force"], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err and "--cache" in err, err
    assert not slot.exists()
