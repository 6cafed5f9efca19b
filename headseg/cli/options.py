"""Options that several commands share, declared once so they mean the same everywhere."""

from __future__ import annotations

import argparse

from headseg.analysis.io import DEFAULT_MAX_BYTES

#: ``--device`` has one meaning in every command: where the model runs.
DEVICES = ("auto", "cpu", "cuda")


def add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, metavar="PATH",
                   help="local Hugging Face model directory or cached hub id (default: embedded all-MiniLM-L6-v2)")


def add_profile(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--profile", default=None, metavar="HEADS.json",
                   help=help or "head profile from `headseg study` (default: the one shipped for the embedded model)")


def add_device(p: argparse.ArgumentParser, default: str = "auto") -> None:
    p.add_argument("--device", choices=DEVICES, default=default,
                   help=f"where the model runs: cuda when a GPU is usable (auto), cpu or cuda (default {default})")


def add_input(p: argparse.ArgumentParser) -> None:
    p.add_argument("--encoding", default="utf-8", help="text encoding of the inputs (default utf-8)")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="refuse larger inputs")


def add_quiet(p: argparse.ArgumentParser, help: str = "no progress bar or notes on stderr") -> None:
    p.add_argument("--quiet", action="store_true", help=help)
