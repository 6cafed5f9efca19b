"""Segmentation.to_dict is the CLI's JSON record: the same input gives the same record both ways."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.errors import HeadsegError
from headseg.analysis.segments import Segmentation
from headseg.cli import main
from headseg.api import Segmenter

TEXT = ("The committee met on Monday. It approved the budget, after a long debate! "
        "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground.\n\n"
        "Stock markets fell sharply. « Investors » worried about rates — again. 中文 😀\n")


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return tiny_bert_dir


@pytest.mark.parametrize("options", [[], ["--max-tokens", "9"], ["--level", "unit"], ["--segments", "2"]])
def test_to_dict_equals_the_cli_json_record(model_dir, tmp_path, options):
    src = tmp_path / "doc.txt"
    src.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "out.json"
    common = ["--model", str(model_dir), "--backend", "torch", "--device", "cpu", "--quiet"]
    assert main(["segment", str(src), "--format", "json", "--out", str(out), *common, *options]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))

    kwargs = {"max_tokens": 9} if "--max-tokens" in options else {}
    kwargs.update({"level": "unit"} if "--level" in options else {})
    kwargs.update({"segments": 2} if "--segments" in options else {})
    result = Segmenter(model=str(model_dir), backend="torch", device="cpu").segment(TEXT, **kwargs)
    assert result.to_dict(document=str(src)) == record
    assert json.loads(result.to_json(document=str(src))) == record
    # the options force several segments; without any, this short text may be one topic
    assert len(record["segments"]) > 1 or not options
    assert all(r["token_count"] is not None for r in record["segments"])

    # jsonl: the same segment records, one a line
    assert main(["segment", str(src), "--format", "jsonl", "--out", str(out), *common, *options]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"document": str(src), **r} for r in record["segments"]]

    # and back: the record rebuilds the segmentation, text included
    back = Segmentation.from_dict(record)
    assert back.text == TEXT and back.level == result.level
    assert [(s.start, s.end, s.text, s.token_count) for s in back] == \
           [(s.start, s.end, s.text, s.token_count) for s in result]
    assert back.to_dict(document=str(src)) == record


def test_from_dict_rejects_what_does_not_tile():
    good = Segmentation.from_boundaries("abc def", [4]).to_dict()
    with pytest.raises(HeadsegError):
        Segmentation.from_dict({"segments": [{"index": 0}]})
    bad = json.loads(json.dumps(good))
    bad["segments"][1]["start"] = 5
    with pytest.raises(HeadsegError, match="tile"):
        Segmentation.from_dict(bad)
