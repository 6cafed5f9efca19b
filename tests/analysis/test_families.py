"""The model-family table: each family's differences from BERT, read by the loader, the reader and the builder."""

from __future__ import annotations

import json

import pytest

from headseg.analysis import families
from headseg.analysis.errors import HeadsegError, ModelError
from headseg.analysis.families import Family, embedding_size, family_names, max_positions, read_config


def test_the_table_holds_the_families_and_their_rules():
    assert family_names() == ("bert", "roberta", "xlm-roberta", "camembert", "electra")
    # RoBERTa's table reserves pad_token_id + 1 rows: 514 rows, 512 usable
    assert max_positions({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert max_positions({"model_type": "bert", "max_position_embeddings": 512}) == 512

    class Tok:
        model_max_length = 256

    assert max_positions({"model_type": "bert", "max_position_embeddings": 512}, Tok()) == 256
    assert embedding_size({"model_type": "electra", "hidden_size": 256, "embedding_size": 128}) == 128
    assert embedding_size({"model_type": "bert", "hidden_size": 256, "embedding_size": 128}) == 256


@pytest.fixture
def own_families():
    """The family table, with whatever a test registers removed after it."""
    with families.FAMILIES.scoped():
        yield


def test_a_registered_family_is_taken_everywhere_the_table_is_read(own_families, tmp_path):
    from headseg.analysis.weights import expected_names
    from headseg.export.builder import check_config

    cfg = {"model_type": "padded-bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
           "max_position_embeddings": 66, "pad_token_id": 1, "embedding_size": 4}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="not a supported BERT-family encoder"):
        read_config(tmp_path, "m")
    with pytest.raises(ModelError, match="not a BERT-family encoder the ONNX builder writes"):
        check_config(cfg, "m")
    families.register_family(Family("padded-bert", "bert.", padded_positions=True, projected_embeddings=True))
    assert read_config(tmp_path, "m") == cfg
    check_config(cfg, "m")
    assert max_positions(cfg) == 64
    assert {"embeddings_project.weight", "embeddings_project.bias"} <= expected_names(cfg)
    with pytest.raises(HeadsegError, match="model type 'padded-bert' is already registered"):
        families.register_family(Family("padded-bert", "bert."))


def test_a_family_added_in_a_test_is_gone_after_it():
    assert "padded-bert" not in families.FAMILIES
    assert families.find_family("padded-bert") is None
