"""What ``headseg`` reads, checked before the model: unreadable files and folders, binary data and PDFs,
encodings that contradict the bytes, lone surrogates, labelled data with bad boundaries.

``NO_MODEL`` shows that a check ran before any model load: reaching the load would exit 3.
"""

from __future__ import annotations

import errno
import json
import os
import sys

import pytest

from headseg.analysis.errors import InputError

from cli_helpers import NO_MODEL, TEXT, one_line, run

SENTS = ["The committee met.", "It approved the budget.", "Rain fell.", "The river rose.", "Farmers moved."]


def test_item8_unreadable_folder_is_permission_denied(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "a.txt").write_text("Text.", encoding="utf-8")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(folder):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # as root, chmod 000 would still be readable
    rc, err = run(["segment", str(folder)] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and f"{folder}: permission denied" in err, err


def test_item8_unreadable_file_is_found_before_the_model(tmp_path, capsys, monkeypatch):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Text.", encoding="utf-8")
    bad.write_text("Secret.", encoding="utf-8")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if os.fspath(p) == str(bad) else real(p, mode, **k))
    rc, err = run(["segment", str(bad)] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and f"{bad}: permission denied" in err, err
    # with other inputs too (issue 35 item 23: every input is checked before the model loads)
    rc, err = run(["segment", str(good), str(bad)] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and f"{bad}: permission denied" in err, err


def test_item12_lone_surrogate(tiny_bert, tmp_path, model_dir, capsys):
    from headseg.api import Segmenter

    seg = Segmenter(model=tiny_bert, backend="torch")
    with pytest.raises(InputError, match=r"lone surrogate U\+D800 at character 1"):
        seg.segment("a\ud800b")
    assert seg.segment("a\u00e9b").text == "a\u00e9b"
    # on the command line (an argument of undecodable bytes arrives with surrogates): exit 2, one line
    rc, err = run(["inspect", "caf\udce9 au lait", "--model", model_dir, "--max-tokens", "32"], capsys)
    assert rc == 2 and one_line(err) and "lone surrogate U+DCE9" in err, err


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_issue35_item13_utf16_on_a_utf8_file(doc, capsys, encoding):
    doc.write_text("Déjà vu. " + TEXT, encoding="utf-8")
    rc, err = run(["segment", str(doc), "--encoding", encoding, *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "UTF-8" in err and encoding in err, err


@pytest.mark.parametrize("bom,encoding", [(b"\xef\xbb\xbf", "latin-1"), (b"\xef\xbb\xbf", "utf-16"),
                                          (b"\xfe\xff", "utf-16-le"), (b"\xff\xfe", "utf-16-be"),
                                          (b"\xff\xfe", "cp1252")])
def test_issue35_item13_bom_contradicts_the_encoding(doc, capsys, bom, encoding):
    body = TEXT.encode("utf-16-be" if bom == b"\xfe\xff" else "utf-16-le" if bom == b"\xff\xfe" else "utf-8")
    doc.write_bytes(bom + body)
    rc, err = run(["segment", str(doc), "--encoding", encoding, *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "byte order mark" in err and encoding in err, err


def test_issue35_item13_mostly_private_use_or_replacement(doc, capsys):
    doc.write_text("\ue000\ue001\ue002 \ufffd\ufffd\ufffd\ufffd a.", encoding="utf-8")
    rc, err = run(["segment", str(doc), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "replacement or private-use" in err, err


@pytest.mark.parametrize("data,encoding,text", [
    ("Déjà vu. 東京".encode("utf-16-le"), "utf-16-le", "Déjà vu. 東京"),
    ("Déjà vu. 東京".encode("utf-16"), "utf-16", "Déjà vu. 東京"),
    (b"\xff\xfe" + "Déjà vu.".encode("utf-16-le"), "auto", "Déjà vu."),  # the default (auto) reads the mark
    (b"\xef\xbb\xbf" + "Déjà vu.".encode("utf-8"), "utf-8-sig", "Déjà vu."),
    ("Déjà vu.".encode("latin-1"), "latin-1", "Déjà vu."),
    ("東京は晴れ。大阪は雨。".encode("utf-16-be"), "utf-16-be", "東京は晴れ。大阪は雨。"),
    ("icons \ue000 \ue001 in a sentence of words.".encode("utf-8"), "utf-8", "icons \ue000 \ue001 in a sentence of words."),
])
def test_issue35_item13_real_text_still_reads(data, encoding, text):
    from headseg.analysis.reading import decode_text

    assert decode_text(data, "x", encoding) == text


def test_issue35_item23_every_input_is_checked_before_the_model(doc, tmp_path, capsys):
    folder = tmp_path / "adir"
    folder.mkdir()
    (folder / "a.txt").write_text(TEXT, encoding="utf-8")
    missing = tmp_path / "missing.txt"
    out = tmp_path / "out.txt"
    rc, err = run(["segment", str(folder), str(missing), "--out", str(out), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"{missing}: no such file" in err, err
    assert not out.exists()
    other = tmp_path / "gone.txt"
    rc, err = run(["segment", str(missing), str(doc), str(other), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and err == (f"headseg: error: {missing}: no such file (and 1 more input that "
                                                 f"cannot be read: {other})\n"), err


def test_issue35_item23_a_pdf_says_it_is_a_pdf(doc, tmp_path, capsys):
    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n\x00\x01stream")
    for argv in ([str(pdf)], [str(doc), str(pdf)]):
        rc, err = run(["segment", *argv, *NO_MODEL], capsys)
        assert rc == 2 and one_line(err) and f"{pdf}: is a PDF file, not text; convert it" in err, err


def test_issue35_item23_binary_and_oversized_files_are_found_before_the_model(doc, tmp_path, capsys):
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\x00\x01\x02")
    rc, err = run(["segment", str(doc), str(binary), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"{binary}: looks like a binary file" in err, err
    rc, err = run(["segment", str(doc), "--max-bytes", "10", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "over the limit of 10" in err, err


def test_issue35_item23_stdin_on_a_terminal_says_it_is_read(capsys, monkeypatch):
    import io
    import sys

    class Terminal(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal(io.BytesIO(TEXT.encode()), encoding="utf-8"))
    rc, err = run(["segment", "-", *NO_MODEL], capsys)
    assert rc == 3 and err.splitlines()[0] == "headseg: reading standard input (end it with Ctrl-D)", err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TEXT.encode()), encoding="utf-8"))
    rc, err = run(["segment", "-", *NO_MODEL], capsys)
    assert rc == 3 and "standard input" not in err  # a pipe: nothing to say


@pytest.mark.parametrize("record,message", [
    ({"sentences": SENTS, "boundaries": [3, 1]}, "increasing"),
    ({"sentences": SENTS, "boundaries": [1, 3, 3]}, "increasing"),
    ({"sentences": SENTS, "boundaries": [2], "labels": [0, 1, 0, 0, 1]}, "both 'boundaries' and 'labels'"),
    ({"text": " ".join(SENTS), "boundaries": [40, 19]}, "increasing"),
    ({"text": " ".join(SENTS), "boundaries": [19, 19]}, "increasing"),
    ({"text": " ".join(SENTS), "boundaries": [19], "labels": [1, 0, 0, 0, 1]}, "both 'boundaries' and 'labels'"),
])
def test_issue35_item14_gold_jsonl_with_bad_boundaries(tmp_path, capsys, record, message):
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"id": "d", **record}) + "\n", encoding="utf-8")
    rc, err = run(["evaluate", str(gold), "--method", "even"], capsys)
    assert rc == 2 and one_line(err) and f"{gold}:1:" in err and message in err, err


def test_issue35_item14_good_gold_jsonl_still_loads():
    from headseg.segmenter.evaluation.loaders import parse_jsonl

    docs = parse_jsonl("\n".join(json.dumps(r) for r in [
        {"id": "a", "sentences": SENTS, "boundaries": [0, 2, 4]},
        {"id": "b", "sentences": SENTS, "labels": [0, 1, 0, 0, 1]},
        {"id": "c", "text": " ".join(SENTS), "boundaries": [19, 44]}]), "gold.jsonl")
    assert [d.boundaries for d in docs] == [[2, 4], [2], [1, 2]]
