"""The segmenter's configuration is declared once (:class:`SegmenterConfig`): the commands' flags, the
service's settings and defaults, the adapters and the resume journal are made from it."""

from __future__ import annotations

import dataclasses

import pytest

from headseg.analysis.errors import ArtifactError, DeviceError, HeadsegError
from headseg.analysis.settings import cli_fields, resume_names
from headseg.cli import build_parser
from headseg.config import SegmenterConfig


def _flags(command: str) -> dict:
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return {a.dest: a for a in sub._actions if a.option_strings}


def test_segment_offers_every_setting_with_its_declared_default():
    flags = _flags("segment")
    for f in cli_fields(SegmenterConfig):
        action = flags[f.name]
        assert action.option_strings == [f.metadata["cli"]["flag"]]
        assert action.default == f.default, f.name
        choices = f.metadata["cli"].get("choices")
        if choices is not None:
            assert list(action.choices) == list(choices() if callable(choices) else choices)


def test_serve_takes_its_settings_and_limits_from_the_declarations():
    from headseg.serve.config import ServeConfig

    flags = _flags("serve")
    offered = {f.name for f in cli_fields(SegmenterConfig)
               if "serve" in f.metadata["cli"].get("commands", ("serve",))}
    assert offered == {"model", "profile", "artifact", "backend", "precision", "device", "threads"}
    assert offered <= set(flags) and "batch_size" not in flags and "unit_mode" not in flags
    # the service's limits: flags and defaults from ServeConfig's fields (they were restated as literals)
    for f in cli_fields(ServeConfig):
        assert flags[f.name].default == f.default == getattr(ServeConfig(), f.name)


def test_the_resume_journal_records_the_declared_settings():
    config = SegmenterConfig(model="m", unit_mode="rules", precision="fp32")
    settings = config.resume_settings()
    assert tuple(settings) == resume_names(SegmenterConfig) == (
        "model", "profile", "artifact", "backend", "precision", "unit_mode")
    assert settings["unit_mode"] == "rules" and settings["precision"] == "fp32"
    # what does not change the segments (where and how fast the model runs) is not recorded
    assert "threads" not in settings and "device" not in settings


@pytest.mark.parametrize("kwargs, error, message", [
    ({"backend": "tpu"}, HeadsegError, "unknown backend 'tpu'"),
    ({"device": "gpu"}, DeviceError, "unknown device 'gpu'"),
    ({"precision": "int4"}, ArtifactError, "unknown precision 'int4'"),
    ({"unit_mode": "words"}, HeadsegError, "unit_mode must be auto, rules or heads"),
    ({"batch_size": 0}, HeadsegError, "batch_size must be a positive integer"),
    ({"threads": True}, HeadsegError, "threads must be a positive integer"),
    ({"window_tokens": 4}, HeadsegError, "window_tokens must be an integer of at least 8"),
    ({"model": 5}, HeadsegError, "model must be a path or a name"),
    ({"artifact": "x", "backend": "torch"}, HeadsegError, "artifact is served by the onnx backend"),
])
def test_bad_settings_are_refused_on_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        SegmenterConfig(**kwargs)


def test_of_applies_overrides_and_refuses_unknown_names():
    base = SegmenterConfig(model="m")
    assert SegmenterConfig.of(base, threads=2) == dataclasses.replace(base, threads=2)
    assert SegmenterConfig.of({"model": "m"}) == base and SegmenterConfig.of() == SegmenterConfig()
    with pytest.raises(HeadsegError, match="unknown setting"):
        SegmenterConfig.of(base, treads=2)


def test_the_service_and_the_adapters_build_from_one_config():
    from headseg.integrations._common import SegmenterRunner
    from headseg.serve.config import SERVE_BATCH_SIZE, ServeConfig

    serve = ServeConfig.of(threads=1, max_queue=8)
    assert serve.segmenter == SegmenterConfig(threads=1, batch_size=SERVE_BATCH_SIZE) and serve.max_queue == 8
    runner = SegmenterRunner(model="m", backend="torch", device="cpu", max_chars=100)
    assert runner.config == SegmenterConfig(model="m", backend="torch", device="cpu")
    assert not runner.loaded  # nothing is built until first use


def test_the_command_line_builds_its_flags_without_the_extras():
    """Every command's flags come from the declarations, which import no optional extra: ``headseg
    segment`` on the core install must not need the serve extra to build ``headseg serve``'s flags."""
    import subprocess
    import sys

    code = ("import sys; from headseg.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'prometheus_client', 'torch', "
            "'transformers', 'ray', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
