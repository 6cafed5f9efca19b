"""Inputs that can be read once, how text is decoded, and how the command line refuses: one line each.

A pipe (``/dev/stdin``, process substitution's ``/dev/fd/N``) or a FIFO is read exactly once: before, the
input check sniffed its first bytes, so the reading proper found the pipe empty (exit 0, no segments) or
waited for a FIFO's next writer forever.  Text piped in with no input named is read, not answered with the
usage; a byte order mark that contradicts an ``--encoding`` given is refused while the default reads it;
an argument argparse rejects is one line, not its usage.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cli_helpers import one_line

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "examples" / "sample.txt").read_text(encoding="utf-8")


def headseg(args: list[str], stdin=None, input: str | None = None, shell: str | None = None):
    """``headseg ARGS`` in a child process (a pipe must be a real one), with a deadline: a hang fails."""
    cmd = ["bash", "-c", shell] if shell else [sys.executable, "-m", "headseg", *args]
    return subprocess.run(cmd, stdin=stdin, input=input, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HEADSEG_PY": sys.executable})


def joined(stdout: str) -> str:
    """The input given back by the JSONL records: their texts, in order."""
    return "".join(json.loads(line)["text"] for line in stdout.splitlines())


@pytest.mark.slow
def test_dev_stdin_pipe_is_read_once():
    proc = headseg(["segment", "/dev/stdin", "--format", "jsonl", "--quiet"], input=TEXT)
    assert proc.returncode == 0, proc.stderr
    assert joined(proc.stdout) == TEXT


@pytest.mark.slow
def test_process_substitution_is_read_once(tmp_path):
    src = tmp_path / "sample.txt"
    src.write_text(TEXT, encoding="utf-8")
    proc = headseg([], shell=f'"$HEADSEG_PY" -m headseg segment <(cat {src}) --format jsonl --quiet')
    assert proc.returncode == 0, proc.stderr
    assert joined(proc.stdout) == TEXT


@pytest.mark.slow
def test_fifo_is_read_once_and_does_not_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write():  # one writer, as `echo ... > pipe &`: a second open by headseg would wait for another
        with open(fifo, "w", encoding="utf-8") as fh:
            fh.write(TEXT)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    proc = headseg(["segment", str(fifo), "--format", "jsonl", "--quiet"])
    writer.join(timeout=5)
    assert proc.returncode == 0, proc.stderr
    assert joined(proc.stdout) == TEXT


@pytest.mark.slow
def test_no_input_named_reads_piped_stdin():
    proc = headseg(["segment", "--format", "jsonl", "--quiet"], input=TEXT)
    assert proc.returncode == 0, proc.stderr
    assert joined(proc.stdout) == TEXT


def test_no_input_named_from_a_terminal_is_one_line():
    """stdin a terminal and no input named: one line (exit 2) saying what to give, not 22 lines of usage."""
    controller, terminal = pty.openpty()
    try:
        proc = headseg(["segment"], stdin=terminal)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 2
    assert one_line(proc.stderr) and "no input" in proc.stderr, proc.stderr


def test_argparse_errors_are_one_line():
    for argv in (["segment", "x.txt", "--max-chars", "1e400"], ["segment", "x.txt", "--level", "nope"],
                 ["segmnt"], ["segment", "x.txt", "--no-such-flag"]):
        proc = headseg(argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert one_line(proc.stderr) and "--help" in proc.stderr, (argv, proc.stderr)


@pytest.mark.slow
def test_byte_order_mark_read_by_default_and_refused_against_an_encoding_given(tmp_path):
    sentence = "Bees make honey. They live in hives."
    path = tmp_path / "utf16.txt"
    path.write_bytes(b"\xff\xfe" + sentence.encode("utf-16-le"))
    auto = headseg(["segment", str(path), "--format", "jsonl", "--quiet"])
    assert auto.returncode == 0 and joined(auto.stdout) == sentence, auto.stderr
    said = headseg(["segment", str(path), "--format", "jsonl", "--quiet", "--encoding", "utf-16"])
    assert said.returncode == 0 and joined(said.stdout) == sentence, said.stderr
    refused = headseg(["segment", str(path), "--encoding", "utf-8"])
    assert refused.returncode == 2 and one_line(refused.stderr), refused.stderr
    assert "UTF-16-LE byte order mark" in refused.stderr and "--encoding utf-8" in refused.stderr


def test_decode_text_auto_and_utf8_given():
    """The rule itself: ``auto`` takes the mark's encoding; UTF-8 given takes its own mark but refuses
    another's; the UTF-8 mark is dropped either way."""
    from headseg.analysis.errors import InputError
    from headseg.analysis.reading import decode_text

    utf16 = b"\xfe\xff" + "Hi there.".encode("utf-16-be")
    assert decode_text(utf16, "x") == "Hi there."
    with pytest.raises(InputError, match="contradicts --encoding utf-8"):
        decode_text(utf16, "x", "utf-8")
    assert decode_text(b"\xef\xbb\xbfHi.", "x", "utf-8") == decode_text(b"\xef\xbb\xbfHi.", "x") == "Hi."
