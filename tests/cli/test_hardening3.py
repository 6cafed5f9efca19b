"""Issue 35 (hardening, third round), the command-line side: one regression test per item.

``NO_MODEL`` shows that a check ran before any model load: reaching the load would exit 3.
"""

from __future__ import annotations


import contextlib
import json
import os
import socket
import threading

import pytest

from headseg.cli import main

from cli_helpers import interrupted_run, journaled_argv, one_line, run

NO_MODEL = ["--model", "/nonexistent/model"]
TEXT = "The committee met on Monday. It approved the budget. Rain fell all night. The river rose quickly.\n"


@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


# ------------------------------------------------------------------ item 2
@pytest.fixture
def cache_slot(tmp_path, monkeypatch):
    """A cached artifact's folder in a cache of this test's own, with a graph in it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HEADSEG_CACHE", str(cache))
    slot = cache / "onnx" / "bert-6x12-0123456789abcdef-0123456789ab-0123456789abcdef-int8"
    slot.mkdir(parents=True, mode=0o700)
    (slot / "model.onnx").write_bytes(b"the cached graph")
    return slot


@pytest.mark.parametrize("name", ["model.onnx", "new.txt", "../../out.txt"])
@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_issue35_item2_out_inside_the_cache_is_refused(doc, cache_slot, capsys, name, fmt):
    out = cache_slot / name
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(out), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"
    assert sorted(p.name for p in cache_slot.parent.parent.rglob("*")) == ["bert-6x12-0123456789abcdef-0123456789ab-"
                                                                           "0123456789abcdef-int8", "model.onnx",
                                                                           "onnx"]


def test_issue35_item2_a_link_into_the_cache_is_refused(doc, cache_slot, tmp_path, capsys):
    link = tmp_path / "innocent.txt"
    link.symlink_to(cache_slot / "model.onnx")
    rc, err = run(["segment", str(doc), "--out", str(link), "--force", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err, err
    assert (cache_slot / "model.onnx").read_bytes() == b"the cached graph"


def test_issue35_item2_export_out_inside_the_cache_is_refused(cache_slot, capsys):
    """An artifact written by name into a cache slot would be served as the cache's: only --cache writes there."""
    slot = cache_slot.parent / "bert-6x12-fedcba9876543210-ba9876543210-fedcba9876543210-fp32"
    rc, err = run(["export", *NO_MODEL, "--out", str(slot), "--force"], capsys)
    assert rc == 2 and one_line(err) and "headseg's cache" in err and "--cache" in err, err
    assert not slot.exists()


# ------------------------------------------------------------------ item 3
def _snapshot(*paths) -> list[tuple[bytes, int]]:
    return [(p.read_bytes(), p.stat().st_mtime_ns) for p in paths]


@pytest.mark.parametrize("change", [["--penalty", "0.5"], ["--level", "unit"], ["--encoding", "latin-1"],
                                    ["--max-chars", "90"], ["--model", "MODEL2"], ["EXTRA"]])
def test_issue35_item3_refused_resume_changes_nothing(tmp_path, corpus, model_dir, capsys, monkeypatch, change):
    import shutil

    out = tmp_path / "out.jsonl"
    argv = journaled_argv([str(corpus)], out, model_dir)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()
    jpath = tmp_path / "out.jsonl.journal"
    before = _snapshot(out, jpath)
    if change == ["--model", "MODEL2"]:
        other = tmp_path / "model2"
        shutil.copytree(model_dir, other)
        change = ["--model", str(other)]
    if change == ["EXTRA"]:
        extra = tmp_path / "extra.txt"
        extra.write_text(TEXT, encoding="utf-8")
        argv, change = argv[:2] + [str(extra)] + argv[2:], []
    rc, err = run(argv + change + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "--resume" in err, err
    assert _snapshot(out, jpath) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_issue35_item3_refused_resume_from_stdin_changes_nothing(tmp_path, corpus, model_dir, capsys, monkeypatch):
    """Standard input is read once, so its journaled documents are checked as they come: the output (with the
    tail a killed run left after its last journaled batch) and the journal stay as they were until they pass."""
    import io
    import sys

    out = tmp_path / "out.jsonl"
    argv = journaled_argv(["-", "--input-format", "jsonl"], out, model_dir)
    data = corpus.read_bytes()

    def stdin(raw: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))

    stdin(data)
    interrupted_run(argv, monkeypatch)
    capsys.readouterr()
    with out.open("ab") as fh:
        fh.write(b'{"document": "doc-2", "ind')  # torn by the kill
    jpath = tmp_path / "out.jsonl.journal"
    before = _snapshot(out, jpath)
    stdin(data.replace(b"Monday", b"Tuesday"))
    rc, err = run(argv + ["--resume"], capsys)
    assert rc == 2 and one_line(err) and "changed since the interrupted run" in err, err
    assert _snapshot(out, jpath) == before
    stdin(data)  # the same input resumes to the uninterrupted output
    assert main(argv + ["--resume"]) == 0
    full = tmp_path / "full.jsonl"
    stdin(data)
    assert main(argv[:argv.index("--out") + 1] + [str(full)] + argv[argv.index("--out") + 2:]) == 0
    assert out.read_bytes() == full.read_bytes() and not jpath.exists()


def test_issue35_item3_documents_before_the_last_journaled_wait_for_its_check():
    from headseg.analysis.errors import InputError
    from headseg.cli.segment import _pending, resume_skip
    from headseg.cli.journal import document_digest

    done = {0: ("a", document_digest("A")), 2: ("c", document_digest("C"))}  # "b" failed in the interrupted run
    docs = [(0, "a", "A"), (1, "b", "B"), (2, "c", "C changed"), (3, "d", "D")]
    got = []
    with pytest.raises(InputError, match="c changed since"):
        for doc in _pending(iter(docs), resume_skip(done), last=2):
            got.append(doc)
    assert got == []
    docs[2] = (2, "c", "C")
    assert list(_pending(iter(docs), resume_skip(done), last=2)) == [(1, "b", "B"), (3, "d", "D")]


# ------------------------------------------------------------------ item 12
def _name_max(folder) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
@pytest.mark.parametrize("extra", [1, -5])  # over the limit; under it, but too long for the lock beside it
def test_issue35_item12_out_name_too_long(doc, tmp_path, capsys, fmt, extra):
    out = tmp_path / ("a" * (_name_max(tmp_path) + extra))
    rc, err = run(["segment", str(doc), "--format", fmt, "--out", str(out), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "too long" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt"]


def test_issue35_item12_out_path_too_long(doc, tmp_path, capsys):
    out = tmp_path.joinpath(*["d"] * 2100, "x.txt")  # longer than PATH_MAX, each name short
    rc, err = run(["segment", str(doc), "--out", str(out), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and "too long" in err and len(err) < 400, err


@pytest.mark.parametrize("command", [["export", "--out", "{long}"], ["evaluate", "{doc}", "--out", "{long}"],
                                     ["inspect", "{doc}", "--save", "{long}"]])
def test_issue35_item12_other_outputs_name_too_long(doc, tmp_path, capsys, command):
    long = str(tmp_path / ("a" * (_name_max(tmp_path) + 1)))
    rc, err = run([a.format(long=long, doc=doc) for a in command] + NO_MODEL, capsys)
    assert rc == 2 and one_line(err) and "too long" in err, err


def test_issue35_item12_closed_stdout(doc, tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "headseg", "segment", str(doc), *NO_MODEL], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 2 and one_line(r.stderr) and "standard output is closed" in r.stderr, r.stderr


def test_issue35_item12_closed_stdout_any_command(monkeypatch, capsys):
    """A command that finds out only when it writes: the output cannot be written (exit 1), in one line."""
    import argparse
    import sys

    from headseg.cli import _run

    monkeypatch.setattr(sys, "stdout", None)
    rc = _run(argparse.Namespace(command="inspect", func=lambda args: print("a table")))
    assert sys.stdout is None
    err = capsys.readouterr().err
    assert rc == 1 and one_line(err) and "standard output is closed" in err, err


# ------------------------------------------------------------------ item 13
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
    (b"\xff\xfe" + "Déjà vu.".encode("utf-16-le"), "utf-8", "Déjà vu."),  # the default reads the mark
    (b"\xef\xbb\xbf" + "Déjà vu.".encode("utf-8"), "utf-8-sig", "Déjà vu."),
    ("Déjà vu.".encode("latin-1"), "latin-1", "Déjà vu."),
    ("東京は晴れ。大阪は雨。".encode("utf-16-be"), "utf-16-be", "東京は晴れ。大阪は雨。"),
    ("icons \ue000 \ue001 in a sentence of words.".encode("utf-8"), "utf-8", "icons \ue000 \ue001 in a sentence of words."),
])
def test_issue35_item13_real_text_still_reads(data, encoding, text):
    from headseg.analysis.reading import decode_text

    assert decode_text(data, "x", encoding) == text


# ------------------------------------------------------------------ item 23
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


# ------------------------------------------------------------------ item 14
SENTS = ["The committee met.", "It approved the budget.", "Rain fell.", "The river rose.", "Farmers moved."]


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


# ------------------------------------------------------------------ item 15
def test_issue35_item15_tui_missing_profile_is_exit_4(doc, tmp_path, capsys):
    from headseg.analysis.errors import ProfileError

    missing = tmp_path / "missing.json"
    rc, err = run(["tui", str(doc), "--profile", str(missing)], capsys)
    assert rc == ProfileError.exit_code == 4 and one_line(err) and f"{missing}: no such file" in err, err
    rc, err = run(["segment", str(doc), "--profile", str(missing)], capsys)  # as elsewhere
    assert rc == 4 and one_line(err), err


@pytest.mark.parametrize("heads", ["99:0", "0:99", "L99H0"])
def test_issue35_item15_export_heads_the_model_lacks_is_exit_2(model_dir, tmp_path, capsys, heads):
    rc, err = run(["export", "--model", model_dir, "--heads", heads, "--out", str(tmp_path / "art")], capsys)
    assert rc == 2 and one_line(err) and err.startswith("headseg: error: --heads"), err
    assert not (tmp_path / "art").exists()


# ------------------------------------------------------------------ item 10
@pytest.fixture
def busy_port():
    """A loopback port something already listens on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_issue35_item10_serve_on_a_port_in_use(busy_port, capsys, engine):
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    rc, err = run(["serve", "--port", str(busy_port), "--engine", engine, *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"127.0.0.1:{busy_port}" in err and "in use" in err, err


@pytest.mark.parametrize("host, says", [("no-such-host.invalid", "does not resolve"),
                                        ("192.0.2.1", "cannot listen on 192.0.2.1:")])
def test_issue35_item10_serve_on_a_host_it_cannot_bind(capsys, host, says):
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    rc, err = run(["serve", "--host", host, "--port", "0", *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and says in err and "INFO" not in err, err


def test_issue35_item10_serve_hands_uvicorn_the_socket_it_bound(monkeypatch):
    """The check is the bind itself: the socket bound before the model loads is the one served."""
    pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    from headseg.cli import serve

    sock = serve.bind_listener("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
        import socket

        with socket.create_connection(sock.getsockname(), timeout=5):
            pass  # listening already: nothing else can take the port before uvicorn serves it
    finally:
        sock.close()


# ------------------------------------------------------------------ item 6
@contextlib.contextmanager
def _listener(answer: bytes | None):
    """A loopback TCP listener whose every connection gets ``answer`` (None: it is accepted and never answered;
    ``b""``: it is closed at once)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if answer is not None:
                conn.sendall(answer)
                if not answer:
                    conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()
        for conn in held:
            conn.close()


#: what gRPC's HTTP/2 server sends first: a SETTINGS frame (type 4) on stream 0
SETTINGS_FRAME = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])


def test_issue35_item6_a_silent_listener_is_given_up_on(tmp_path, corpus, capsys):
    """Before: the listener accepted, Ray waited for an answer for minutes.  The bound is CONNECT_TIMEOUT."""
    from headseg.analysis.ray import CONNECT_TIMEOUT

    assert CONNECT_TIMEOUT <= 30
    with _listener(None) as address:
        rc, err = run(["segment", str(corpus), "--engine", "ray", "--address", address, "--format", "jsonl",
                       "--out", str(tmp_path / "r.jsonl"), *NO_MODEL], capsys)
    assert rc == 2 and one_line(err) and f"--address {address}: no Ray cluster answers there" in err, err
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("answer", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"+PONG\r\n", b""])
def test_issue35_item6_a_listener_of_another_protocol_is_refused(answer):
    from headseg.analysis.errors import InputError
    from headseg.analysis.ray import probe_address

    with _listener(answer) as address:
        with pytest.raises(InputError, match="not a Ray cluster|cannot reach a Ray cluster"):
            probe_address(address, timeout=2)
        with pytest.raises(InputError, match="not a Ray cluster|cannot reach a Ray cluster"):
            probe_address(f"ray://{address}", timeout=2)


def test_issue35_item6_an_http2_server_is_left_to_ray(monkeypatch):
    from headseg.analysis.ray import probe_address

    with _listener(SETTINGS_FRAME) as address:
        probe_address(address, timeout=5)
    with _listener(None) as address:  # a TLS cluster answers only a TLS hello: the connection is checked alone
        monkeypatch.setenv("RAY_USE_TLS", "1")
        probe_address(address, timeout=2)


def test_issue35_item6_a_real_ray_cluster_passes_the_probe():
    """The probe against the GCS of a Ray started for the test (in a child: this process's Ray is left alone)."""
    pytest.importorskip("ray")
    import subprocess
    import sys

    code = ("import ray\nfrom headseg.analysis.ray import probe_address\n"
            "ctx = ray.init(include_dashboard=False, log_to_driver=False, num_cpus=1, logging_level='ERROR')\n"
            "try:\n    probe_address(ctx.address_info['gcs_address'])\nfinally:\n    ray.shutdown()\nprint('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


# ------------------------------------------------------------------ item 4
def test_issue35_item4_fp16_on_cpu_is_served_like_fp32(doc, model_dir, tmp_path, capsys, monkeypatch):
    """fp16 asked of the CPU is served (the probe once saw no answer; today it is an export and a run
    like fp32's, docs/performance.md): its cached artifact is fp16 and its segments are fp32's."""
    monkeypatch.setenv("HEADSEG_CACHE", str(tmp_path / "cache"))
    got = {}
    for precision in ("fp32", "fp16"):
        rc = main(["segment", str(doc), "--model", model_dir, "--backend", "onnx", "--device", "cpu",
                   "--precision", precision, "--format", "jsonl", "--quiet"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        got[precision] = [(r["start"], r["end"]) for r in map(json.loads, out.splitlines())]
    manifests = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("manifest.json")]
    assert sorted(m["precision"] for m in manifests) == ["fp16", "fp32"]
    assert got["fp16"] == got["fp32"]
