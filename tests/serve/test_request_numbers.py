"""Numbers in a request body of any length are a 422 naming the problem, never a 500.

A JSON integer of over 4,300 digits was a ValueError inside ``json.loads`` (Python's integer-string
limit) and an HTTP 500; a 400-digit ``penalty`` an OverflowError.  Every number's length is bounded
before it is converted, and the options refuse what is out of range by name.
"""

from __future__ import annotations

import json

import pytest

from .conftest import needs_serve_extra

needs_serve_extra()

SAMPLE = "Bees make honey. They live in hives."


@pytest.mark.parametrize("field", ["penalty", "max_chars", "min_chars", "max_tokens", "target_tokens", "segments",
                                   "overlap", "depth"])
@pytest.mark.parametrize("number", ["1" + "0" * 400, "1" + "0" * 5000, "1e400", "-" + "9" * 4400, "1." + "5" * 5000],
                         ids=["400-digits", "5000-digits", "1e400", "minus-4400-digits", "5000-digit-fraction"])
def test_long_numbers_are_422(client, field, number):
    body = ('{"text": %s, "%s": %s}' % (json.dumps(SAMPLE), field, number)).encode()
    r = client.post("/v1/segment", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, (field, number[:12], r.status_code, r.text[:300])
    error = r.json()["error"]
    assert "\n" not in error and len(error) < 300, error


def test_a_long_number_anywhere_in_the_body_is_422(client):
    body = ('{"documents": [{"id": %s, "text": "Bees."}]}' % ("7" * 5000)).encode()
    r = client.post("/v1/segment", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "5000 characters" in r.json()["error"], r.text[:300]


def test_a_400_digit_option_is_refused_by_name(client):
    """Long but convertible: the option's own check names it."""
    r = client.post("/v1/segment", content=b'{"text": "Bees.", "max_tokens": 1' + b"0" * 400 + b"}",
                    headers={"content-type": "application/json"})
    assert r.status_code == 422 and "max_tokens" in r.json()["error"], r.text[:300]


def test_numbers_of_ordinary_length_still_pass(client):
    r = client.post("/v1/segment", json={"text": SAMPLE, "max_chars": 10 ** 6, "penalty": 0.35})
    assert r.status_code == 200, r.text[:300]
