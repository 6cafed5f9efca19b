"""The renamed modules (issue 47: one meaning per name): the new names serve, the old ones warn for one release."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("old, new, name, new_name", [
    ("headseg.export.engine", "headseg.export.onnx_backend", "OnnxBackend", "OnnxBackend"),
    ("headseg.export.engine", "headseg.export.onnx_backend", "plan_chunks", "plan_chunks"),
    ("headseg.serve.engine", "headseg.serve.host", "Engine", "Host"),
    ("headseg.serve.engine", "headseg.serve.host", "default_workers", "default_workers"),
])
def test_an_old_module_name_gives_the_new_object_with_a_deprecation_warning(old, new, name, new_name):
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} is deprecated: use {new}.{new_name}"):
        got = getattr(importlib.import_module(old), name)
    assert got is getattr(importlib.import_module(new), new_name)


def test_an_old_module_name_has_nothing_the_new_one_lacks():
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        importlib.import_module("headseg.serve.engine").Nothing  # noqa: B018


def test_the_artifact_lookup_is_provision_and_the_backends_read_it():
    from headseg.export import backends, provision

    assert backends.onnx_backend is provision.onnx_backend


def test_create_app_takes_its_old_keyword_with_a_warning_and_refuses_both():
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from headseg.analysis.errors import InputError
    from headseg.serve.app import create_app
    from headseg.serve.host import Host, ServeConfig

    cold = Host(ServeConfig())  # never started: nothing is loaded
    with pytest.warns(DeprecationWarning, match=r"create_app\(engine=...\) is deprecated"):
        app = create_app(engine=cold)
    assert app.state.host is cold
    with pytest.raises(InputError, match="not both"), pytest.warns(DeprecationWarning):
        create_app(host=cold, engine=cold)
