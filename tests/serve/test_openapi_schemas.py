"""Issue 49 item 20: ``/openapi.json`` says the package's version and names the schemas of the body and the
answer, and real answers of the service are valid under them (the request schema agrees with the parser)."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from .conftest import TOPICS, needs_serve_extra

pytestmark = pytest.mark.slow

needs_serve_extra()
jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def spec():
    from fastapi.testclient import TestClient

    from headseg.serve.app import create_app
    from headseg.serve.host import ServeConfig

    return TestClient(create_app(ServeConfig())).get("/openapi.json").json()  # no lifespan: no model loads


def validator(spec: dict, schema: dict):
    """A validator of ``schema`` whose ``#/components/schemas/...`` references resolve in ``spec``."""
    return jsonschema.Draft202012Validator({**schema, "components": spec["components"]})


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def test_the_version_is_the_package_s(spec):
    assert spec["info"]["version"] == version("headseg")


def test_the_operation_refers_to_named_schemas(spec):
    from headseg.serve.requests import request_schema

    schemas = spec["components"]["schemas"]
    assert schemas["SegmentRequest"] == request_schema()  # the one schema the form and the table are made from
    op = spec["paths"]["/v1/segment"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"] == ref("SegmentRequest")
    answers = op["responses"]["200"]["content"]
    assert answers["application/json"]["schema"] == ref("Segmentation")
    assert answers["application/x-ndjson"]["schema"]["oneOf"] == [ref("Segmentation"), ref("DocumentError")]
    for status in ("400", "401", "413", "422", "429", "503"):
        assert op["responses"][status]["content"]["application/json"]["schema"] == ref("Refusal")
    for schema in schemas.values():  # every reference points at a schema that is there
        for target in json.dumps(schema).split('"$ref": "#/components/schemas/')[1:]:
            assert target.split('"')[0] in schemas


def _answers(client):
    from sample_texts import PARAGRAPHS

    md = "# Kitchen\n\nBread needs flour and yeast. Knead it.\n\n## Oven\n\nBake it hot.\n\n# Sky\n\nJupiter rose.\n"
    yield client.post("/v1/segment", json={"text": TOPICS}).json()
    yield client.post("/v1/segment", json={"text": TOPICS, "level": "unit"}).json()
    yield client.post("/v1/segment", json={"text": "\n\n".join(PARAGRAPHS), "level": "tree", "max_tokens": 60}).json()
    yield client.post("/v1/segment", json={"text": md, "structure": "markdown"}).json()


def test_real_answers_are_valid_and_every_field_is_described(spec, client):
    records = list(_answers(client))
    check = validator(spec, ref("Segmentation"))
    for record in records:
        check.validate(record)
    tree = records[2]
    assert "tree" in tree and any(n["children"] for n in tree["tree"])
    assert any(s["headings"] for s in records[3]["segments"])
    schemas = spec["components"]["schemas"]
    # both ways: the schemas' fields are exactly the records' (a field added to records must be described)
    assert set(schemas["Segment"]["properties"]) == set(records[0]["segments"][0])
    assert set(schemas["TreeNode"]["properties"]) == set(tree["tree"][0])
    assert set(schemas["Segmentation"]["properties"]) == set(tree)
    for name in ("Segment", "TreeNode", "Segmentation"):  # and says what it means
        assert all(p.get("description") for p in schemas[name]["properties"].values()), name
    with pytest.raises(jsonschema.ValidationError):
        check.validate({**records[0], "segments": [{**records[0]["segments"][0], "colour": "red"}]})


def test_ndjson_lines_and_refusals_are_valid(spec, client):
    r = client.post("/v1/segment", json={"documents": [{"id": "a", "text": TOPICS}, {"id": 2, "text": "Bees."}]})
    lines = [json.loads(line) for line in r.text.splitlines()]
    line_check = validator(spec, spec["paths"]["/v1/segment"]["post"]["responses"]["200"]["content"]
                           ["application/x-ndjson"]["schema"])
    assert [line["document"] for line in lines] == ["a", "2"]
    for line in lines:
        line_check.validate(line)
    line_check.validate({"document": "x", "error": "segmentation failed"})
    refusal = validator(spec, ref("Refusal"))
    for bad in (client.post("/v1/segment", json={"text": 1}), client.get("/nowhere"), client.get("/v1/segment")):
        assert bad.status_code >= 400
        refusal.validate(bad.json())


#: bodies the parser accepts or refuses; the schema must say the same of each
BODIES = [
    {"text": "a"}, {"documents": [{"text": "a"}]}, {"documents": [{"id": 1, "text": "b"}], "level": "unit"},
    {"text": "a", "penalty": 0.5, "level": "tree", "depth": 8, "structure": "plain"}, {"text": "a", "max_tokens": 1},
    {}, {"text": "a", "documents": [{"text": "b"}]}, {"text": "a", "colour": 1}, {"text": "a", "level": "chapter"},
    {"text": "a", "max_chars": 0}, {"text": "a", "depth": 9}, {"text": 3}, {"documents": []},
    {"documents": [{"id": "x", "text": "b", "more": 1}]}, {"documents": [{"id": None, "text": "b"}]},
    {"text": "a", "structure": "html"}, {"text": "a", "penalty": -1},
]


@pytest.mark.parametrize("body", BODIES, ids=[json.dumps(b)[:60] for b in BODIES])
def test_the_request_schema_accepts_what_the_parser_accepts(spec, body):
    from headseg.serve.requests import RequestError, parse_request

    try:
        parse_request(json.dumps(body).encode(), max_documents=10)
        accepted = True
    except RequestError:
        accepted = False
    assert validator(spec, ref("SegmentRequest")).is_valid(body) == accepted


#: rules between fields, which the schema (one property at a time) does not state: the parser's alone
CROSS_FIELD = [{"text": "a", "depth": 2}, {"text": "a", "max_tokens": 10, "target_tokens": 20}]


@pytest.mark.parametrize("body", CROSS_FIELD, ids=[json.dumps(b) for b in CROSS_FIELD])
def test_rules_between_fields_are_the_parser_s(spec, body):
    from headseg.serve.requests import RequestError, parse_request

    assert validator(spec, ref("SegmentRequest")).is_valid(body)
    with pytest.raises(RequestError):
        parse_request(json.dumps(body).encode(), max_documents=10)
