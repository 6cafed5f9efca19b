"""``headseg serve``'s own flags: ``--doc-threads`` (threads) is not ``--workers`` (Ray actors elsewhere).

``--workers`` was the service's name for its document threads, while ``headseg segment`` and ``study``
use it for Ray actors and shards; the service's is ``--doc-threads`` now, and ``--workers`` stays one
release as its deprecated alias.  Parsed and validated only: nothing is served or loaded.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from headseg.analysis.errors import HeadsegError, InputError
from headseg.cli import build_parser
from headseg.cli.serve import config_of
from headseg.serve.config import ServeConfig


def _config(*argv: str) -> ServeConfig:
    return config_of(build_parser().parse_args(["serve", *argv]))


def test_doc_threads_sets_the_services_threads():
    assert _config().doc_threads is None  # the host's default_workers(threads) decides
    assert _config("--doc-threads", "3").doc_threads == 3
    with pytest.raises(InputError, match="^--doc-threads must be a positive integer"):
        _config("--doc-threads", "0")


def test_the_old_workers_flag_is_a_deprecated_alias(caplog):
    with caplog.at_level(logging.WARNING, logger="headseg"):
        config = _config("--workers", "5")
    assert config.doc_threads == 5 and config == _config("--doc-threads", "5")
    assert [r.getMessage() for r in caplog.records] == [
        "note: --workers is now --doc-threads (the old name goes in the next release)"]
    with pytest.raises(InputError, match="give --doc-threads alone"):
        _config("--workers", "5", "--doc-threads", "2")


def test_only_the_new_name_is_offered_in_the_help(capsys):
    parser = build_parser()
    for command, offered, hidden in (("serve", "--doc-threads", "--workers"), ("segment", "--workers", "--doc-threads")):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        out = capsys.readouterr().out
        assert offered in out and hidden not in out, command


def test_serve_config_of_takes_the_old_keyword_with_a_warning():
    with pytest.warns(DeprecationWarning, match="workers is now doc_threads"):
        config = ServeConfig.of(workers=4, threads=1)
    assert config == ServeConfig.of(doc_threads=4, threads=1)
    with warnings.catch_warnings(), pytest.raises(HeadsegError, match="give doc_threads alone"):
        warnings.simplefilter("ignore", DeprecationWarning)
        ServeConfig.of(workers=4, doc_threads=2)
