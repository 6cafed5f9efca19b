"""What the command-line tests share: running ``headseg`` in-process and the one-line error rule."""

from __future__ import annotations

from pathlib import Path

from headseg.cli import main

#: a model that cannot be loaded: a test that gets its refusal shows the check ran before any model load
#: (reaching the load would exit 3)
NO_MODEL = ["--model", "/nonexistent/model"]
#: a short document (the ``doc`` fixture's text)
TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly.\n"
#: labelled documents for ``headseg evaluate``
EVAL_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "eval" / "docs.jsonl"

SENTENCES = ["The committee met on Monday.", "It approved the budget after a long debate.",
             "Rain fell all night.", "The river rose quickly.", "Farmers moved their cattle.",
             "Prices of grain went up."]


def one_line(err: str) -> bool:
    """``err`` is exactly one ``headseg: error:`` line, no traceback."""
    return err.startswith("headseg: error: ") and err.count("\n") == 1 and "Traceback" not in err


def run(argv: list[str], capsys) -> tuple[int, str]:
    """``headseg ARGV`` in this process: its exit code and what it wrote on stderr."""
    rc = main(argv)
    return rc, capsys.readouterr().err


def interrupted_run(argv: list[str], monkeypatch) -> None:
    """``headseg ARGV`` (a journaled JSONL ``--out``) dying after its first batch is journaled, as a killed run
    would (KeyboardInterrupt: exit 130)."""
    from headseg.cli import journal

    real = journal.JournalSink.write_batch
    calls = []

    def interrupted(self, docs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        real(self, docs)

    with monkeypatch.context() as m:
        m.setattr(journal.JournalSink, "write_batch", interrupted)
        assert main(argv) == 130


def journaled_argv(inputs: list[str], out, model_dir: str) -> list[str]:
    """``segment INPUTS`` into the journaled JSONL ``out``, two documents a batch, with the torch backend."""
    return ["segment", *inputs, "--format", "jsonl", "--docs-per-batch", "2", "--out", str(out),
            "--model", model_dir, "--backend", "torch", "--quiet"]
