"""``headseg.cli.main`` called inside a Python program leaves the program as it found it: the command
line quiets third-party libraries for its own run (environment, root logger level, transformers'
verbosity, a stderr handler on the ``headseg`` logger) and undoes all of it when it returns."""

from __future__ import annotations

import logging
import os

import pytest

from headseg.cli import QUIET_ENV, main


def _state() -> dict:
    log = logging.getLogger("headseg")
    return {"env": {k: os.environ.get(k) for k in QUIET_ENV}, "root": logging.getLogger().level,
            "log": log.level, "handlers": list(log.handlers)}


@pytest.mark.parametrize("argv", [
    ["segment", "{doc}", "--quiet"],  # a full run on the embedded model
    ["segment", "{doc}", "--max-tokens", "-3"],  # refused by the argument check (exit 2)
    ["segment", "{missing}"],  # refused: no such file
], ids=["run", "argument-error", "input-error"])
def test_main_in_process_leaves_env_and_logging_as_found(tmp_path, monkeypatch, capsys, argv):
    doc = tmp_path / "doc.txt"
    doc.write_text("Cats purr and sleep in the sun. Dogs bark at the postman.\n", encoding="utf-8")
    for k in QUIET_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")  # one the user set: never overridden, kept
    root, log = logging.getLogger(), logging.getLogger("headseg")
    monkeypatch.setattr(root, "level", logging.DEBUG)
    monkeypatch.setattr(log, "level", logging.NOTSET)
    before = _state()
    rc = main([a.format(doc=doc, missing=tmp_path / "nope.txt") for a in argv])
    out, err = capsys.readouterr()
    assert rc == (0 if argv[-1] == "--quiet" else 2), err
    assert _state() == before
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_transformers_logging_restored_when_imported_before():
    hf = pytest.importorskip("transformers").utils.logging
    verbosity, bars = hf.get_verbosity(), hf.is_progress_bar_enabled()
    hf.set_verbosity_info()
    hf.enable_progress_bar()
    try:
        assert main(["segment", "A few words here.", "--max-tokens", "-3"]) == 2
        assert hf.get_verbosity() == logging.INFO and hf.is_progress_bar_enabled()
    finally:
        hf.set_verbosity(verbosity)
        (hf.enable_progress_bar if bars else hf.disable_progress_bar)()
