"""Adapters sent to other processes (Ray, LlamaIndex's IngestionPipeline(num_workers=N)) or copied."""

from __future__ import annotations

import asyncio
import copy
import logging
import pickle
import threading

import pytest

from test_adapter_options import ADAPTERS

from adapter_support import ECHO, REPEATED, assert_tiles


def _runner(adapter):
    return adapter._runner if hasattr(adapter, "_runner") else adapter.runner


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_adapter_built_from_names_pickles_after_loading_its_model(adapter, tiny_bert_dir, monkeypatch):
    """The loaded model stays behind and is built again from the names on the other side.  Before, the
    LangChain and Haystack adapters failed ("cannot pickle 'module' object") once used, and LlamaIndex's
    parser lost its options holder with a warning through the root logger (which set up its handler)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    made, spans = adapter(None, model=str(tiny_bert_dir), backend="torch", max_chars=120)
    assert _runner(made).loaded
    again = pickle.loads(pickle.dumps(made))
    assert not _runner(again).loaded and _runner(again).options == _runner(made).options
    assert _runner(again).config == _runner(made).config
    assert root.handlers == []
    assert adapter(None, model=str(tiny_bert_dir), backend="torch", max_chars=120)[1] == spans
    assert _segment(again) == _segment(made)


def _segment(made) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in _runner(made).segment_many([REPEATED])[0]]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_adapter_over_a_given_segmenter_refuses_pickling_rather_than_change_model(adapter, tiny_segmenter):
    """LlamaIndex's pickling dropped the unpicklable part, and the copy segmented with the default model."""
    made, _ = adapter(tiny_segmenter, max_chars=120)
    with pytest.raises(TypeError, match="built from a Segmenter object cannot be pickled"):
        pickle.dumps(made)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_deep_copy_shares_the_model_and_keeps_the_options(adapter, tiny_segmenter):
    made, spans = adapter(tiny_segmenter, max_chars=120)
    twin = copy.deepcopy(made)
    assert _runner(twin).segmenter is tiny_segmenter and _runner(twin).options == _runner(made).options
    assert _segment(twin) == _segment(made)
    assert spans and all(b - a <= 120 for a, b in spans)


@pytest.mark.parametrize("metadatas", [[None], ["source.txt"], [[("k", 1)]]])
def test_langchain_bad_metadata_is_refused_before_the_model_runs(tiny_segmenter, metadatas, monkeypatch):
    pytest.importorskip("langchain_text_splitters")
    from headseg.integrations.langchain import HeadsegTextSplitter

    splitter = HeadsegTextSplitter(tiny_segmenter, max_chars=120)
    ran = []
    monkeypatch.setattr(splitter.runner, "segment_many", lambda texts: ran.append(texts))
    with pytest.raises(TypeError, match=r"metadatas\[0\] must be a dict"):
        splitter.create_documents([ECHO], metadatas=metadatas)
    assert ran == []
    monkeypatch.undo()
    docs = splitter.create_documents([ECHO], metadatas=[{"k": 1}])
    assert_tiles(ECHO, [(d.metadata["start_index"], d.metadata["end_index"]) for d in docs],
                 [d.page_content for d in docs])


def _slow_builds(monkeypatch, wait):
    """Segmenter construction in the adapters replaced by one that calls ``wait()`` and counts itself."""
    from headseg.integrations import _common

    built = []

    def build(**kwargs):
        built.append(threading.current_thread())
        wait()
        return "segmenter"

    monkeypatch.setattr(_common, "Segmenter", build)
    return _common.SegmenterRunner(model="some-model"), built


def test_threads_that_use_an_adapter_first_at_once_load_its_model_once(monkeypatch):
    gate = threading.Event()
    runner, built = _slow_builds(monkeypatch, lambda: gate.wait(0.5))
    threads = [threading.Thread(target=lambda: runner.segmenter) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert len(built) == 1 and runner.segmenter == "segmenter"


def test_the_first_async_use_loads_the_model_off_the_event_loop(monkeypatch):
    """The model load of a first ``asegment_many`` blocked the loop: here the build waits for a
    coroutine of the same loop, which could never run (the guard's timeout would end the wait unset)."""
    ran = threading.Event()
    runner, built = _slow_builds(monkeypatch, lambda: ran.wait(10) or pytest.fail("the event loop was blocked"))

    async def ticker():
        await asyncio.sleep(0)
        ran.set()

    async def main():
        tick = asyncio.ensure_future(ticker())
        with pytest.raises(AttributeError):  # the stand-in "segmenter" has no asegment_many
            await runner.asegment_many(["One text."])
        await tick

    asyncio.run(main())
    assert built and built[0] is not threading.main_thread()
