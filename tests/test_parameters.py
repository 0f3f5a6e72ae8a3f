"""Variable shapes and parameter counts: BUILD_NOTES.md ("Parameter counts") and variables.json."""

import json
import os

import pytest

from bert_tf import BertConfig, BertPretrainer
from bert_tf.checkpoints.parameters import format_parameter_table, parameter_counts, variable_shapes
from tests import model_fixtures as mf


def totals(config, **kwargs):
    return dict(parameter_counts(config, **kwargs))


@pytest.mark.parametrize(
    "sizes, seq_length, bert_total, with_heads",
    [
        # The configuration of the paper in BUILD_NOTES.md ("Parameter counts"); its formula gives 35,945,786.
        (
            dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, intermediate_size=2048),
            128,
            41_176_576,
            41_471_804,
        ),
        (dict(), None, 109_482_240, 110_106_428),  # BERT-Base
        (
            dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
            None,
            335_141_888,
            336_226_108,
        ),  # BERT-Large
    ],
)
def test_counts_of_spec_section_7(sizes, seq_length, bert_total, with_heads):
    config = BertConfig(vocab_size=30522, type_vocab_size=2, **sizes)
    counts = totals(config, seq_length=seq_length)
    assert counts["total (encoder + pooler)"] == bert_total
    assert counts["total (with heads)"] == with_heads


def test_google_tiny_variables_and_count(fixtures_dir):
    with open(os.path.join(mf.GOOGLE_TINY, "variables.json")) as f:
        fixture = json.load(f)
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    assert variable_shapes(config) == [(n, tuple(s)) for n, s, _ in fixture["trainable_variables"]]
    assert totals(config)["total (with heads)"] == fixture["num_parameters"] == 4_433_468
    table = format_parameter_table(parameter_counts(config))
    assert "bert/encoder/layer_1" in table and "4,433,468" in table


@pytest.mark.parametrize("layers, act", [(1, "relu"), (3, "gelu_exact")])
def test_keras_model_has_exactly_these_variables(layers, act):
    config = BertConfig(
        vocab_size=97,
        hidden_size=24,
        num_hidden_layers=layers,
        num_attention_heads=3,
        intermediate_size=40,
        type_vocab_size=3,
        max_position_embeddings=33,
        hidden_act=act,
    )
    model = BertPretrainer(config)
    assert [(w.path, tuple(w.shape)) for w in model.weights] == variable_shapes(config)
    assert model.count_params() == totals(config)["total (with heads)"]
