"""BertConfig: Google's JSON in and out, extra keys kept, invalid values rejected."""

import json
import pathlib

import pytest

from bert_tf import BertConfig
from bert_tf.checkpoints import reference
from bert_tf.config import ACTIVATIONS
from bert_tf.modeling.activations import get_activation
from tests import model_fixtures as mf

MULTILINGUAL_EXTRA = {
    "directionality": "bidi",
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
}


def test_reads_the_fixture_config(fixtures_dir):
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    with open(mf.GOOGLE_TINY_CONFIG) as f:
        assert config.to_dict() == json.load(f)
    assert config.attention_head_size == 64


def test_json_round_trip_keeps_extra_keys(tmp_path):
    values = dict(
        vocab_size=119547,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=2,
        initializer_range=0.02,
        **MULTILINGUAL_EXTRA,
    )
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    config = BertConfig.from_json_file(str(path))
    assert config.extra == MULTILINGUAL_EXTRA
    out = tmp_path / "out.json"
    config.to_json_file(str(out))
    assert json.loads(out.read_text()) == values
    assert BertConfig.from_config(config.get_config()) == config


def test_released_configs_read_without_warnings_and_odd_keys_are_warned_of(fixtures_dir, tmp_path, caplog):
    BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    multilingual = tmp_path / "multilingual.json"
    released = json.loads(pathlib.Path(mf.GOOGLE_TINY_CONFIG).read_text())
    multilingual.write_text(json.dumps(dict(released, **MULTILINGUAL_EXTRA)))
    BertConfig.from_json_file(str(multilingual))
    assert caplog.records == []

    # A hand-written config: a misspelt key, and one of Google's left out.
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"vocab_size": 100, "num_hiden_layers": 2, "type_vocab_size": 2}))
    config = BertConfig.from_json_file(str(path))
    assert config.num_hidden_layers == 12  # the original's default, as the original reads it
    messages = [record.getMessage() for record in caplog.records]
    assert (
        f"{path}: unknown key 'num_hiden_layers': kept, but no model reads it (is it 'num_hidden_layers'?)"
        in messages
    )
    assert f"{path}: no 'num_hidden_layers'; the original's default 12 is used" in messages
    assert len(messages) == 1 + 9  # the typo, and the 9 Google keys other than vocab_size and type_vocab_size


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"hidden_size": 100, "num_attention_heads": 3}, "not a multiple of num_attention_heads"),
        ({"hidden_act": "swish"}, "unknown hidden_act 'swish'"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
        ({"vocab_size": "30522"}, "vocab_size must be a positive integer"),
        ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob must be in \[0, 1\)"),
        # A string passed the range check as float("0.1") and failed when the model was built.
        ({"hidden_dropout_prob": "0.1"}, r"hidden_dropout_prob must be a number, got '0.1'"),
        ({"initializer_range": "0.02"}, r"initializer_range must be a number, got '0.02'"),
        ({"initializer_range": float("nan")}, r"initializer_range must be positive and finite, got nan"),
        ({"attention_probs_dropout_prob": float("nan")}, r"attention_probs_dropout_prob must be in"),
    ],
)
def test_invalid_values_are_clear_errors(overrides, message):
    values = dict(vocab_size=100, hidden_size=64, num_attention_heads=4, **{})
    values.update(overrides)
    with pytest.raises(ValueError, match=message):
        BertConfig.from_dict(values)


@pytest.mark.parametrize("written, act", [("GELU", "gelu"), ("Relu", "relu"), ("", "linear")])
def test_activation_names_are_read_as_the_original_reads_them(written, act):
    """The original's `get_activation` lower-cases the name and takes "" for linear."""
    assert BertConfig.from_dict(dict(vocab_size=10, hidden_act=written)).hidden_act == act


@pytest.mark.parametrize("act", ["gelu", "gelu_exact", "relu", "tanh", "linear"])
def test_every_activation_is_accepted_and_written_back(act, tmp_path):
    config = BertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2, hidden_act=act)
    path = tmp_path / "bert_config.json"
    config.to_json_file(str(path))
    assert json.loads(path.read_text())["hidden_act"] == act
    assert BertConfig.from_json_file(str(path)).hidden_act == act


def test_every_accepted_activation_has_an_implementation_and_a_reference():
    # What each computes is checked against the float64 reference in test_modeling.py.
    assert ACTIVATIONS == ("gelu", "gelu_exact", "relu", "tanh", "linear")
    for act in ACTIVATIONS:
        assert callable(get_activation(act)), act
        assert callable(reference.ACTIVATIONS[act]), act
    assert set(reference.ACTIVATIONS) == set(ACTIVATIONS)
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        get_activation("swish")


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"missing\.json: no such BERT config file"):
        BertConfig.from_json_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        BertConfig.from_json_file(str(bad))
    bad.write_text('{"hidden_size": 8}')
    with pytest.raises(ValueError, match=r"bad\.json: .*no 'vocab_size'"):
        BertConfig.from_json_file(str(bad))
    bad.write_text('{"vocab_size": 8, "hidden_sise": 8}')
    config = BertConfig.from_json_file(str(bad))  # unknown keys are kept, not fatal
    assert config.extra == {"hidden_sise": 8}
