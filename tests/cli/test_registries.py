"""Levels and output formats are registries: one added in a test module is offered by the command line
(choices and help), validated by the options, and served end to end, with no other file touched."""

from __future__ import annotations

import json

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.segments import Segmentation
from headseg.cli import build_parser, main
from headseg.formats import FORMATS, Encoder, dumps, register_format
from headseg.segmenter import levels
from headseg.segmenter.options import SegmentOptions

TEXT = ("The committee met on Monday. It approved the budget after a long debate. Rain fell all night. "
        "The river rose quickly. Farmers moved their cattle. The market opened late.\n")


@pytest.fixture
def pairs_level(monkeypatch, request):
    """A level of its own: units two by two, registered for this test only."""
    scope = levels.LEVELS.scoped()  # the test's own level is gone after it
    scope.__enter__()
    request.addfinalizer(lambda: scope.__exit__(None, None, None))

    @levels.register_level("pairs", "units two by two", search=False)
    def pairs(d, x, request, ctx):
        starts = [a for a, _ in d.units[2::2]]
        return d.finish(Segmentation.from_boundaries(d.text, starts, [1.0] * len(starts), level="pairs"))

    return pairs


@pytest.fixture
def lines_format():
    """An output format of its own: one line per segment, 'start end', registered for this test only
    (in the library's registry: the command line, the service and a program all see it)."""
    with FORMATS.scoped():
        @register_format("spans", "'start end' per segment", recognise=lambda path, head: False)
        class Spans(Encoder):
            def documents(self, docs):
                return "".join(f"{s.start} {s.end}\n" for _, seg in docs for s in seg)

        yield Spans


def _choices(command: str, flag: str) -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return list(next(a for a in sub._actions if flag in a.option_strings).choices)


def test_a_registered_level_is_offered_validated_and_served(pairs_level, model_dir, tmp_path, capsys):
    assert _choices("segment", "--level") == ["topic", "unit", "tree", "pairs"]
    assert SegmentOptions(level="pairs").level == "pairs"
    # what the level does not take is refused by the options, naming the levels that take it
    with pytest.raises(InputError, match="--segments goes with --level topic, not pairs"):
        SegmentOptions.from_args(type("A", (), {"level": "pairs", "segments": 2})())
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    assert main(["segment", str(doc), "--model", model_dir, "--backend", "torch", "--level", "pairs",
                 "--format", "json", "--quiet"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["level"] == "pairs" and len(record["segments"]) == 3
    assert "".join(s["text"] for s in record["segments"]) == TEXT


def test_an_unregistered_level_is_refused(model_dir):
    assert "pairs" not in levels.level_names()
    with pytest.raises(InputError, match="level must be one of topic, unit, tree"):
        SegmentOptions(level="pairs")
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal of a choice it does not offer
        main(["segment", TEXT, "--level", "pairs"])
    assert exit_.value.code == 2


def test_a_registered_output_format_is_offered_and_written(lines_format, model_dir, tmp_path, capsys):
    assert _choices("segment", "--format") == ["text", "jsonl", "json", "parquet", "spans"]
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT, encoding="utf-8")
    assert main(["segment", str(doc), "--model", model_dir, "--backend", "torch", "--level", "unit",
                 "--format", "spans", "--quiet"]) == 0
    spans = [tuple(map(int, line.split())) for line in capsys.readouterr().out.splitlines()]
    assert spans[0][0] == 0 and spans[-1][1] == len(TEXT) and len(spans) == 6
    assert all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))
    # the registry's flags decide what the engines accept: a format without records is no Ray output
    assert main(["segment", str(doc), "--format", "spans", "--engine", "ray", "--out", str(tmp_path / "o")]) == 2
    assert "--engine ray needs --format jsonl or parquet" in capsys.readouterr().err
    # the library writes it too, the same bytes
    seg = Segmentation.from_boundaries(TEXT, [29, 97])
    assert dumps("spans", [("d", seg)]) == f"0 29\n29 97\n97 {len(TEXT)}\n"


def test_a_format_registered_in_a_test_is_gone_after_it():
    assert "spans" not in FORMATS and _choices("segment", "--format") == ["text", "jsonl", "json", "parquet"]
