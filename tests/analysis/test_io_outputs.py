"""Output path checks, ``-`` for stdout, streamed atomic outputs, and decoding (issue 15)."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest

from headseg.analysis.errors import InputError
from headseg.analysis.outputs import check_output_dir, check_output_path
from headseg.analysis.reading import decode_text, read_text
from headseg.analysis.writing import open_output, write_output

TEXT = "Grüße aus Köln. 😀 Второе предложение.\n"


# ----------------------------------------------------------------- decoding
@pytest.mark.parametrize("codec, bom", [
    ("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),
    ("utf-32-le", b"\xff\xfe\x00\x00"), ("utf-32-be", b"\x00\x00\xfe\xff"),
])
def test_utf16_utf32_with_bom_are_decoded(tmp_path, codec, bom):
    data = bom + TEXT.encode(codec)
    assert decode_text(data, "x") == TEXT
    (tmp_path / "f.txt").write_bytes(data)
    assert read_text(tmp_path / "f.txt") == TEXT


def test_explicit_utf16_without_bom():
    assert decode_text(TEXT.encode("utf-16-le"), "x", encoding="utf-16-le") == TEXT
    with pytest.raises(InputError, match="pass --encoding utf-16"):
        decode_text(TEXT.encode("utf-16-le"), "x")


def test_nul_after_the_first_64_kib_is_binary():
    data = b"a line of text\n" * 10_000 + b"\x00\x01\x02" + b"more\n"
    assert len(data) > 65536 * 2
    with pytest.raises(InputError, match="binary"):
        decode_text(data, "x")
    # the same in latin-1, which decodes every byte: the check is on the decoded text
    with pytest.raises(InputError, match="binary"):
        decode_text(data, "x", encoding="latin-1")


def test_control_heavy_content_is_binary_but_some_controls_are_text():
    binary = bytes(range(1, 32)) * 100
    with pytest.raises(InputError, match="control characters"):
        decode_text(binary, "x")
    # a form feed, an escape sequence and a stray control in real text stay text
    text = "page one\f\x1b[1mbold\x1b[0m and a bell\x07 here\n" * 20
    assert decode_text(text.encode(), "x") == text


def test_empty_and_whitespace_files_read_as_text_when_allowed(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "ws").write_bytes(b" \n\t")
    assert read_text(tmp_path / "empty", allow_empty=True) == ""
    assert read_text(tmp_path / "ws", allow_empty=True) == " \n\t"
    with pytest.raises(InputError, match="empty"):
        read_text(tmp_path / "empty")


# ------------------------------------------------------------ output checks
def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_output_equal_to_an_input_is_refused(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("keep me")
    os.link(src, tmp_path / "hard.txt")
    (tmp_path / "sym.txt").symlink_to(src)
    for out in (src, tmp_path / "hard.txt", tmp_path / "sym.txt", tmp_path / "." / "in.txt"):
        with pytest.raises(InputError, match="same file"):
            check_output_path(out, [str(src)])
    # and the other way round: the input named through a link
    with pytest.raises(InputError, match="same file"):
        check_output_path(src, [str(tmp_path / "sym.txt")])
    assert src.read_text() == "keep me"
    assert check_output_path(tmp_path / "other.txt", [str(src), "-"]) == tmp_path / "other.txt"
    assert _listing(tmp_path) == ["hard.txt", "in.txt", "sym.txt"]


def test_output_inside_an_input_folder_is_refused(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("x")
    with pytest.raises(InputError, match="inside the input folder"):
        check_output_path(tmp_path / "corpus" / "results.json", [str(tmp_path / "corpus")])
    with pytest.raises(InputError, match="inside the input folder"):
        check_output_dir(tmp_path / "corpus" / "study", [str(tmp_path / "corpus")], files=["report.md"])


def test_directories_pseudo_files_and_stdout(tmp_path):
    assert check_output_path(None) is None
    assert check_output_path("-", ["-"]) is None
    with pytest.raises(InputError, match="is a directory"):
        check_output_path(tmp_path)
    for bad in ("/proc/self/status", "/proc/nothing/here.json", "/sys/x.json", "/dev/null"):
        with pytest.raises(InputError, match="not a place for output"):
            check_output_path(bad)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        check_output_path(fifo)
    with pytest.raises(InputError, match="exists and is not a directory"):
        check_output_dir(tmp_path / "fifo")


def test_unwritable_location_is_found_by_a_probe_file(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        check_output_path(tmp_path / "file" / "out.json")
    # a missing folder is fine (the write creates it) and is not created by the check
    assert check_output_path(tmp_path / "new" / "deeper" / "out.json") is not None
    assert not (tmp_path / "new").exists()
    assert _listing(tmp_path) == ["file"]

    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(InputError, match=r"cannot write in .* \(Permission denied\)"):
        check_output_path(tmp_path / "out.json")
    with pytest.raises(InputError, match="cannot write"):
        check_output_dir(tmp_path / "study")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(InputError, match="cannot write"):
            check_output_path(ro / "out.json")
    finally:
        ro.chmod(0o700)


# ------------------------------------------------------------------ writing
def test_write_output_dash_is_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_output("-", "héllo\n")
    write_output(None, "again\n")
    assert capsys.readouterr().out == "héllo\nagain\n"
    assert _listing(tmp_path) == []
    write_output(tmp_path / "f.txt", "héllo\n")
    assert (tmp_path / "f.txt").read_text(encoding="utf-8") == "héllo\n"
    write_output(tmp_path / "f.bin", b"\x00\x01")
    assert (tmp_path / "f.bin").read_bytes() == b"\x00\x01"


def test_open_output_streams_atomically(tmp_path, capsys):
    target = tmp_path / "out.jsonl"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with open_output(target) as fh:
            fh.write("partial\n")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old\n"
    assert _listing(tmp_path) == ["out.jsonl"]
    with open_output(target) as fh:
        for i in range(3):
            fh.write(f"line {i}\r\n")
    assert target.read_bytes() == b"line 0\r\nline 1\r\nline 2\r\n"
    assert _listing(tmp_path) == ["out.jsonl"]
    with open_output("-") as fh:
        fh.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
