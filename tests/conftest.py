"""Shared fixtures: the embedded model (loaded once) and tiny random BERT/RoBERTa models."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest

SAMPLE = (
    "The committee met on Monday. It approved the budget, after a long debate! "
    "Rain fell all night; the river rose quickly. Farmers moved their cattle to higher ground."
)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Tests never touch the user's cache: exported artifacts and records go to one folder per session."""
    path = tmp_path_factory.mktemp("headseg-cache")
    os.environ["HEADSEG_CACHE"] = str(path)
    return path


@pytest.fixture(scope="session")
def embedded():
    from headseg.analysis import load_model

    return load_model(None)


def embedded_tokenizer():
    """The embedded model's tokenizer alone: tiny random models need its ids, not its weights."""
    from transformers import AutoTokenizer

    from headseg.analysis.model import embedded_model_path

    return AutoTokenizer.from_pretrained(str(embedded_model_path()), use_fast=True, local_files_only=True)


@pytest.fixture(scope="session")
def tokenizer():
    return embedded_tokenizer()


def _tiny(kind: str, tokenizer, seed: int = 0):
    import torch
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    from headseg.analysis import wrap_model

    torch.manual_seed(seed)
    common = dict(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=160,
        attn_implementation="eager",
    )
    if kind == "bert":
        model = BertModel(BertConfig(**common), add_pooling_layer=False)
    else:
        # pad_token_id matches the BERT tokenizer used for ids, so RoBERTa's
        # position ids (computed from padding) treat padding correctly.
        model = RobertaModel(RobertaConfig(pad_token_id=tokenizer.pad_token_id, **common), add_pooling_layer=False)
    return wrap_model(model, tokenizer, name=f"tiny-{kind}")


@pytest.fixture(scope="session")
def tiny_bert(tokenizer):
    return _tiny("bert", tokenizer)


@pytest.fixture(scope="session")
def tiny_roberta(tokenizer):
    return _tiny("roberta", tokenizer)


@pytest.fixture(scope="session")
def tiny_bert_dir(tiny_bert, tmp_path_factory):
    """The tiny BERT saved as a model directory (weights + tokenizer.json), for subprocesses and --model PATH.

    Shared by the whole session: tests copy it before changing anything in it.
    """
    d = tmp_path_factory.mktemp("tiny-bert-dir")
    tiny_bert.model.save_pretrained(d)
    tiny_bert.tokenizer.save(d)
    return d


@pytest.fixture
def sample_text():
    return SAMPLE
