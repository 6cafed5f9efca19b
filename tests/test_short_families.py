"""Issue 48's short families (benchmarks/short_families.py) and their evaluator (benchmarks/short_exact.py).

The builder is seeded and deterministic and the committed files are what it builds; every reference is
consistent with its kind (offsets on the units the loaders split, a one-subject text has no boundary,
a multi-subject text one boundary fewer than its subjects); the evaluator's headseg column is what
``Segmenter.segment`` gives.
"""

from __future__ import annotations

import json

import pytest

from benchmarks import short_exact, short_families
from benchmarks.common import DATASETS, data_root
from headseg.segmenter.evaluation.loaders import iter_documents

needs_data = pytest.mark.skipif(not (data_root() / "segmentation" / "wiki50_dev").is_dir(),
                                reason="the shared dev data (../shared/data) is not here")


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in short_families.FAMILIES[name].read_text(encoding="utf-8").splitlines()]


@needs_data
def test_the_builder_is_deterministic_and_the_committed_files_are_what_it_builds():
    first, second = short_families.build(48), short_families.build(48)
    assert first == second
    for name, recs in first.items():
        assert short_families.lines_of(recs) == short_families.FAMILIES[name].read_text(encoding="utf-8"), name
    assert short_families.build(49) != first


@pytest.mark.parametrize("name", list(short_families.FAMILIES))
def test_each_family_is_a_data_set_whose_references_are_consistent(name):
    assert dict(DATASETS)[name] == str(short_families.FAMILIES[name])
    recs = {r["id"]: r for r in records(name)}
    docs = list(iter_documents(short_families.FAMILIES[name]))
    assert len(docs) == len(recs)  # ids unique
    for d in docs:
        r = recs[d.id]
        kind, source, join = short_exact.group_of(d.id)
        assert kind == name.split("_")[1] and join in short_families.JOINS
        # every offset is a unit start of the text as the loaders split it: nothing is snapped
        assert [d.starts[b] for b in d.boundaries] == r["boundaries"]
        subjects = r["origins"]
        assert len(r["boundaries"]) == len(subjects) - 1
        if kind == "one":
            assert r["boundaries"] == [] and join == "blank"
        elif kind == "adjacent":
            assert len(subjects) == 2 and subjects[0].split("#")[0] == subjects[1].split("#")[0]
        else:
            assert 2 <= len(subjects) <= 3 and len(set(subjects)) == len(subjects)
        paragraphs = r["text"].rstrip("\n").split("\n\n")
        if join == "blank":
            assert 2 <= len(paragraphs) <= 4
            assert all(r["text"][b - 2:b] == "\n\n" for b in r["boundaries"])
        else:
            assert "\n" not in r["text"].rstrip("\n")
        assert short_families.size([r["text"]]) <= short_families.MAX_TOKENS + 4  # the separators


def test_each_text_is_there_with_breaks_and_run_together():
    for name in ("short_unrelated_dev", "short_adjacent_dev"):
        by_key: dict[str, dict[str, list[str]]] = {}
        for r in records(name):
            kind, source, join, n = r["id"].split("@")[0].split("/")
            by_key.setdefault(f"{source}/{n}", {})[join] = r["text"].split()
        assert all(set(v) == {"blank", "space"} and v["blank"] == v["space"] for v in by_key.values())


def test_the_families_hold_what_issue_48_asks_for():
    one = [short_exact.group_of(r["id"])[1] for r in records("short_one_dev")]
    assert sum(one.count(s) >= 40 for s in set(one)) >= 3
    unrelated = [short_exact.group_of(r["id"]) for r in records("short_unrelated_dev")]
    assert {s for _, s, _ in unrelated} == {"1para", "2para"}  # "cut every paragraph" is right on one, wrong on the other
    assert all(sum(j == join for _, _, j in unrelated) >= 80 for join in short_families.JOINS)


def test_the_evaluator_reads_a_grid_of_any_option():
    assert short_exact.settings([]) == [{}]
    assert short_exact.settings(["penalty=0.5,1", "structure=auto"]) == [
        {"penalty": 0.5, "structure": "auto"}, {"penalty": 1, "structure": "auto"}]
    with pytest.raises(SystemExit):
        short_exact.settings(["no_such_option=1"])


def test_the_evaluators_headseg_column_is_what_segment_gives(tmp_path):
    from headseg.api import Segmenter
    from headseg.segmenter.evaluation.loaders import snap_offsets

    docs = short_exact.load(list(short_families.FAMILIES), limit=1)[::3]
    seg = Segmenter(quiet=True)
    store = short_exact.Store(tmp_path / "cache.pkl")
    for opts in ({}, {"penalty": 3.0}):
        found = short_exact.headseg_boundaries(seg, docs, opts, store)
        for d in docs:
            direct = [s.start for s in seg.segment(d.text, **opts).segments[1:]]
            assert found[d.id] == snap_offsets(direct, d.starts, len(d.text)), (d.id, opts)


def test_the_evaluator_reads_the_older_short_families_by_family_source_and_join():
    docs = short_exact.load(["short_dev", "short_sections_dev"], limit=1)
    groups = {short_exact.group_of(d.id) for d in docs}
    assert ("short", "everyday", "line") in groups and ("short_sections", "wiki50", "blank") in groups
    assert len({d.id for d in docs}) == len(docs)


def test_run_together_gives_each_one_subject_text_again_as_one_paragraph():
    docs = short_exact.load(["short_one_dev", "short_unrelated_dev"])
    joined = short_exact.run_together(docs)
    one = [d for d in docs if short_exact.group_of(d.id)[0] == "one"]
    assert len(joined) == len(one) == 211  # every one-subject text has breaks; no other text is taken
    for d, j in zip(one, joined):
        assert short_exact.group_of(j.id) == (*short_exact.group_of(d.id)[:2], "space")
        assert j.id.split("@")[1] == d.id.split("@")[1]
        assert "\n\n" not in j.text and j.text == d.text.replace("\n\n", " ")
        assert j.boundaries == [] and j.units == d.units
        # the spans moved with the text: each unit is still exactly its own characters
        assert [j.text[a:b] for a, b in j.spans] == [d.text[a:b] for a, b in d.spans]
        assert len(d.text) - len(j.text) == d.text.count("\n\n")
