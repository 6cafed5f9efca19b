"""The HTTP service in-process: answers equal the library's, refusals are one line with their status."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

from .conftest import TOPICS, documents, needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()


@pytest.fixture(scope="module")
def reference():
    """A plain Segmenter of the same model and precision, not going through the service."""
    from headseg.api import Segmenter

    return Segmenter(quiet=True)


def test_one_text_answers_the_library_record(client, reference):
    r = client.post("/v1/segment", json={"text": TOPICS, "max_chars": 400})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json() == reference.segment(TOPICS, max_chars=400).to_dict()
    assert "".join(s["text"] for s in r.json()["segments"]) == TOPICS


def test_documents_answer_ndjson_in_order(client, reference):
    texts = documents(5)
    body = {"documents": [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)], "level": "unit"}
    r = client.post("/v1/segment", json=body)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert lines == [reference.segment(t, level="unit").to_dict(document=f"d{i}") for i, t in enumerate(texts)]


def test_health_ready_and_docs(client, host):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["precision"] == host.describe()["precision"]
    assert "/v1/segment" in client.get("/openapi.json").json()["paths"]
    assert client.get("/docs").status_code == 200


def test_metrics_count_requests_documents_and_batches(client):
    def value(text: str, name: str) -> float:
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))

    before = client.get("/metrics").text
    client.post("/v1/segment", json={"documents": [{"text": "One. Two."}, {"text": "Three four."}]})
    client.post("/v1/segment", json={"text": 5})
    after = client.get("/metrics").text
    assert value(after, 'headseg_requests_total{status="200"}') - value(before, 'headseg_requests_total{status="200"}') == 1
    assert value(after, 'headseg_requests_total{status="422"}') - value(before, 'headseg_requests_total{status="422"}') == 1
    assert value(after, "headseg_documents_total") - value(before, "headseg_documents_total") == 2
    assert value(after, "headseg_characters_total") - value(before, "headseg_characters_total") == 9 + 11
    assert value(after, "headseg_batch_tokens_count") > value(before, "headseg_batch_tokens_count")
    assert "headseg_request_seconds_bucket" in after and "headseg_queue_documents 0.0" in after


BAD = [
    (b"", 422, "empty body"),
    (b"{", 422, "not valid JSON"),
    (b'{"text": "caf\xe9"}', 422, "not valid UTF-8"),
    (b'{"text": 12}', 422, "text must be a string"),
    (b'{"documents": "abc"}', 422, "non-empty list"),
    (b'{"documents": [{"id": [1], "text": "a"}]}', 422, "documents[0].id"),
    (b'{"text": "a", "token_counter": "/etc/passwd"}', 422, "unknown field(s): token_counter"),
    (b'{"text": "a", "colour": 1}', 422, "unknown field(s): colour"),
    # overlapped chunks are the topic level's (issue 49: accepted over HTTP, refused with another level)
    (b'{"text": "a", "overlap": 1, "level": "unit"}', 422, "overlap goes with level topic"),
    (b'{"text": "a", "overlap": -1}', 422, "overlap must be a non-negative integer"),
    (b'{"text": "a", "max_tokens": 10, "target_tokens": 20}', 422, "target_tokens (20) is larger than"),
    (b'{"text": "a", "max_chars": "9"}', 422, "max_chars must be a positive integer"),
    (b'{"text": "a", "level": "chapter"}', 422, "level must be one of"),
    (b'{"text": "a", "penalty": -1}', 422, "penalty"),
    (b'{"text": "a", "documents": []}', 422, "not both"),
    (b'{"level": "unit"}', 422, "'text' (one document) or 'documents' (a list) is required"),
    (b'{"text": "a", "max_chars": 1e400}', 422, "max_chars must be a positive integer"),
    # issue 35 item 9: every size option (an HTTP 500 before)
    (b'{"text": "a", "min_chars": 1e400}', 422, "min_chars must be a positive integer up to 2**53"),
    (b'{"text": "a", "max_tokens": 1e400}', 422, "max_tokens must be a positive integer up to 2**53"),
    (b'{"text": "a", "target_tokens": 1e400}', 422, "target_tokens must be a positive integer up to 2**53"),
    (b'{"text": "a", "segments": 1e400}', 422, "segments must be a positive integer up to 2**53"),
    (b'{"text": "a", "max_tokens": 1' + b"0" * 400 + b'}', 422, "max_tokens"),
    (b'{"text": "a", "penalty": 1e400}', 422, "penalty must be a number"),
    (b'{"text": "\\ud800"}', 422, "lone surrogate"),
    (b"[" * 100000 + b"]" * 100000, 422, "JSON"),
]


@pytest.mark.parametrize("body,status,reason", BAD, ids=[r for _, _, r in BAD])
def test_bad_requests_are_one_line_without_traceback(client, caplog, capfd, body, status, reason):
    with caplog.at_level(logging.DEBUG):
        r = client.post("/v1/segment", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    message = r.json()["error"]
    assert reason in message and "\n" not in message
    assert not [rec for rec in caplog.records if rec.exc_info or rec.levelno >= logging.ERROR]
    assert "Traceback" not in capfd.readouterr().err


def test_too_large_body_is_413_before_it_is_read(host):
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host

    small = Host(host.config.__class__(max_request_bytes=1000))
    small.runner = host.runner  # the same loaded model, a smaller body limit
    with TestClient(create_app(host=small)) as c:
        big = json.dumps({"text": "x" * (10 * 1024 * 1024)}).encode()
        r = c.post("/v1/segment", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "over the limit of 1000" in r.json()["error"]

        def chunks():  # no Content-Length: counted while read
            for _ in range(20):
                yield b"x" * 100

        r = c.post("/v1/segment", content=chunks())
        assert r.status_code == 413
        assert c.post("/v1/segment", json={"text": "Short. Text."}).status_code == 200


def test_a_request_over_the_token_bound_is_413_before_any_model_work(host, monkeypatch):
    """Issue 35 item 7: bytes do not bound the work ('.' is one token per byte, prose one per five); tokens do."""
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host

    small = Host(host.config.__class__(max_request_tokens=1000))
    small.runner = host.runner
    calls = []
    real = host.runner.segment
    monkeypatch.setattr(host.runner, "segment", lambda *a, **k: calls.append(a) or real(*a, **k))
    with TestClient(create_app(host=small)) as c:
        r = c.post("/v1/segment", json={"text": "." * 1001})
        assert r.status_code == 413 and "1,001 model tokens, over the limit of 1,000" in r.json()["error"], r.text
        docs = [{"id": str(i), "text": "?!" * 300} for i in range(2)]  # 1,200 tokens together
        r = c.post("/v1/segment", json={"documents": docs})
        assert r.status_code == 413 and "1,200 model tokens" in r.json()["error"], r.text
        assert calls == []  # refused before any document reached the runner
        # 2,000 characters of prose are under 1,000 tokens: served
        prose = "The river rose quickly after the rain. " * 50
        assert len(host.runner.pipeline.encoder.tokenizer.encode(prose)[0]) < 1000
        assert c.post("/v1/segment", json={"text": prose}).status_code == 200 and len(calls) == 1


def test_each_text_of_a_request_is_tokenized_once(host, monkeypatch):
    """Issue 47: the token bound's count is what the pipeline reads; the text is not tokenized again.

    Before, a text long enough to be counted was tokenized at admission and again by the pipeline
    (2 calls per text); a short one (never counted) once.  The records are the runner's own."""
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host

    small = Host(host.config.__class__(max_request_tokens=1000))
    small.runner = host.runner
    tokenizer = host.runner.pipeline.encoder.tokenizer
    encoded: list[str] = []
    real = tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda text: encoded.append(text) or real(text))
    long = TOPICS  # over 250 characters: counted against the bound of 1,000 tokens
    short = "Short. Text."  # 4 tokens a character at most: under the bound, never counted
    with TestClient(create_app(host=small)) as c:
        for text in (long, short):
            encoded.clear()
            r = c.post("/v1/segment", json={"text": text})
            assert r.status_code == 200, r.text
            assert encoded == [text]
            expected = asyncio.run(host.runner.segment(text, {})).to_dict()
            assert r.json() == expected
        encoded.clear()
        docs = [{"id": str(i), "text": f"Part {i}. " + long[:300]} for i in range(3)]
        r = c.post("/v1/segment", json={"documents": docs})
        assert r.status_code == 200, r.text
        assert sorted(encoded) == sorted(d["text"] for d in docs)
        assert [json.loads(line)["document"] for line in r.text.splitlines()] == ["0", "1", "2"]


def test_full_queue_is_429_with_retry_after(client, host):
    assert host.admit(host.config.max_queue)  # every place taken, as by requests in flight
    try:
        r = client.post("/v1/segment", json={"text": "One. Two."})
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert "queue full" in r.json()["error"]
    finally:
        host.release(host.config.max_queue)
    assert client.post("/v1/segment", json={"text": "One. Two."}).status_code == 200
    over = {"documents": [{"text": "a"}] * (host.config.max_queue + 1)}
    assert client.post("/v1/segment", json=over).status_code == 422


def test_api_key_is_required_when_set(host):
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host

    keyed = Host(host.config.__class__(api_key="s3cret"))
    keyed.runner = host.runner
    with TestClient(create_app(host=keyed)) as c:
        body = {"text": "One. Two."}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "s3cre"}):
            r = c.post("/v1/segment", json=body, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert "API key" in r.json()["error"]
        assert c.get("/metrics").status_code == 401
        assert c.post("/v1/segment", json=body, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.post("/v1/segment", json=body, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert c.get("/healthz").status_code == 200  # probes stay open


def test_not_ready_is_503(host):
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import Host

    cold = Host(host.config)  # never started
    with TestClient(create_app(host=cold)) as c:
        assert c.get("/readyz").status_code == 503
        r = c.post("/v1/segment", json={"text": "One."})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_viewer_page_is_served(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'fetch("/v1/segment"' in r.text and '"needsKey": false' in r.text and "{{CONFIG}}" not in r.text


def test_query_string_options_are_refused_not_ignored(client):
    r = client.post("/v1/segment?max_chars=100", json={"text": "One. Two."})
    assert r.status_code == 422
    assert r.json() == {"error": "options go in the JSON body, not the query string (got ?max_chars)"}


@pytest.mark.parametrize("method,path,status,reason", [
    ("get", "/nowhere", 404, "no such endpoint: GET /nowhere (see /docs)"),
    ("get", "/v1/segment", 405, "GET is not allowed on /v1/segment (use POST)"),
    ("post", "/healthz", 405, "POST is not allowed on /healthz (use GET)"),
])
def test_framework_refusals_are_one_line_errors_too(client, method, path, status, reason):
    r = getattr(client, method)(path)
    assert r.status_code == status
    assert r.json() == {"error": reason}


def _request_schema(client) -> dict:
    """The body's schema in /openapi.json, its reference to the named schema followed."""
    spec = client.get("/openapi.json").json()
    schema = spec["paths"]["/v1/segment"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]


def test_request_schema_and_page_form_are_made_from_the_options(client):
    from headseg.segmenter.levels import level_names
    from headseg.segmenter.options import SegmentOptions, option_schema
    from headseg.segmenter.topics import TopicParams
    from headseg.serve.requests import HTTP_OPTIONS

    schema = _request_schema(client)
    props = schema["properties"]
    assert list(props) == ["text", "documents", *HTTP_OPTIONS]
    assert "target_tokens" in props and "overlap" in props  # every option with a flag (issue 49: overlap too)
    assert props["level"]["enum"] == list(level_names()) and props["level"]["default"] == "topic"
    assert props["penalty"]["default"] == TopicParams.penalty == 0.35
    assert props == {**props, **option_schema(HTTP_OPTIONS)}
    # every bound the schema states is the one the options check: the minimum passes, one below fails
    for name, spec in props.items():
        if spec.get("type") == "integer" and name in HTTP_OPTIONS:
            lo, hi = int(spec["minimum"]), int(spec["maximum"])  # OpenAPI's JSON writes bounds as floats
            # an option that goes with one level (depth: tree) is checked with that level
            taker = {"depth": {"level": "tree"}}.get(name, {})
            SegmentOptions.of({**taker, name: lo})
            SegmentOptions.of({**taker, name: hi})
            for bad in (lo - 1, hi + 1):
                with pytest.raises(Exception, match=name):
                    SegmentOptions.of({**taker, name: bad})
    with pytest.raises(Exception, match="penalty"):
        SegmentOptions.of({"penalty": props["penalty"]["maximum"] * 2})
    page = client.get("/").text
    config = json.loads(page.split('<script id="config" type="application/json">')[1].split("</script>")[0])
    assert config["options"] == option_schema(HTTP_OPTIONS)


def test_a_registered_level_reaches_the_schema_the_page_and_the_requests(host, monkeypatch, request):
    from fastapi.testclient import TestClient

    from headseg.segmenter import levels
    from headseg.serve.app import create_app

    scope = levels.LEVELS.scoped()  # the test's own level is gone after it
    scope.__enter__()
    request.addfinalizer(lambda: scope.__exit__(None, None, None))

    from headseg.analysis.segments import Segmentation

    @levels.register_level("pairs", "units two by two", search=False)
    def pairs(d, x, request, ctx):
        starts = [a for a, _ in d.units[2::2]]
        return d.finish(Segmentation.from_boundaries(d.text, starts, [1.0] * len(starts), level="pairs"))

    text = "One is here. Two is here. Three is here. Four is here. Five."
    with TestClient(create_app(host=host)) as c:
        assert "pairs" in _request_schema(c)["properties"]["level"]["enum"]
        assert '"pairs"' in c.get("/").text
        r = c.post("/v1/segment", json={"text": text, "level": "pairs"})
        assert r.status_code == 200, r.text
        units = c.post("/v1/segment", json={"text": text, "level": "unit"}).json()["segments"]
        assert [s["start"] for s in r.json()["segments"]] == [s["start"] for s in units[::2]]


def test_issue35_item25_the_page_offers_the_size_limits_and_says_what_a_score_is(client):
    """The viewer page had no fields for max_tokens and target_tokens (what a RAG user tries first) and did
    not say what a boundary's score means."""
    page = client.get("/").text
    assert '<script id="config" type="application/json">' in page, "the page's fields come from its config"
    config = json.loads(page.split('<script id="config" type="application/json">')[1].split("</script>")[0])
    assert {"max_tokens", "target_tokens"} <= set(config["options"])
    assert config["options"]["max_tokens"]["description"] and config["options"]["target_tokens"]["description"]
    legend = " ".join(re.sub(r"<[^>]+>", "", page.split('<p id="legend">')[1].split("</p>")[0]).split())
    assert "boundary's score: how much scatter the segmentation saves" in legend


def test_unknown_fields_are_named_briefly_however_many_or_long(client):
    many = {"text": "One. Two.", **{f"stray{i:03d}": 1 for i in range(100)}}
    r = client.post("/v1/segment", json=many)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error.startswith("unknown field(s): stray000, stray001, stray002, stray003, stray004 and 95 more (options: ")
    long = client.post("/v1/segment", json={"text": "One. Two.", "n" * 5000: 1})
    assert long.status_code == 422 and "unknown field(s): str of 5002 characters (options: " in long.json()["error"]
    level = client.post("/v1/segment", json={"text": "One. Two.", "level": "y" * 5000})
    assert level.status_code == 422 and "(got str of 5002 characters)" in level.json()["error"]
    assert max(len(x.text) for x in (r, long, level)) < 1000
