"""Issue 35 item 9: numbers that overflow a float (``1e400``) or an integer past 2**53, for every size option.

They were an ``OverflowError`` traceback from the API, exit 1 from the command line and an HTTP 500 from the
service (its rows are in tests/serve/test_app.py's BAD); now an input error naming the option, everywhere.
"""

from __future__ import annotations

import pytest

from headseg.analysis.errors import InputError
from headseg.segmenter.options import SegmentOptions

from cli_helpers import one_line, run

FIELDS = ["max_chars", "min_chars", "max_tokens", "target_tokens", "segments"]
HUGE = [1e400, float("nan"), 10 ** 400, 2 ** 53 + 1]


@pytest.mark.parametrize("value", HUGE, ids=["1e400", "nan", "10**400", "2**53+1"])
@pytest.mark.parametrize("field", FIELDS)
def test_issue35_item9_api_refuses_numbers_past_the_bound(field, value):
    with pytest.raises(InputError, match=rf"^{field} must be a positive integer up to 2\*\*53 \(got "):
        SegmentOptions(**{field: value})


def test_issue35_item9_the_bound_itself_is_taken():
    assert SegmentOptions(max_chars=2 ** 53).max_chars == 2 ** 53


@pytest.mark.parametrize("value", ["1e400", "1" + "0" * 400, "nan", "inf"])
@pytest.mark.parametrize("field", FIELDS)
def test_issue35_item9_cli_refuses_numbers_past_the_bound(tmp_path, capsys, field, value):
    doc = tmp_path / "doc.txt"
    doc.write_text("The committee met on Monday. It approved the budget.\n", encoding="utf-8")
    try:
        rc, err = run(["segment", str(doc), "--" + field.replace("_", "-"), value], capsys)
    except SystemExit as refused:  # argparse refuses a flag's value by exiting 2 with its usage line
        rc, err = refused.code, capsys.readouterr().err
    assert rc == 2, err
    # argparse's own refusal names the flag; headseg's is its one line
    assert one_line(err) or f"argument --{field.replace('_', '-')}" in err.splitlines()[-1], err
    assert "Traceback" not in err and "Overflow" not in err
