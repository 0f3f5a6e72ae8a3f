"""Keras serialisation of every layer and model: config round trips, frozen layers, `.keras` files."""

import json

import keras
import numpy as np
import pytest

from bert_tf import BertConfig, BertModel, BertPretrainer
from bert_tf.modeling.attention import Attention, SelfAttention
from bert_tf.modeling.dense_output import DenseOutput
from bert_tf.modeling.embeddings import Embeddings
from bert_tf.modeling.encoder import Encoder
from bert_tf.modeling.heads import (
    MaskedLMHead,
    MaskedLMTransform,
    NextSentenceHead,
    PretrainingHeads,
    TiedOutputLogits,
)
from bert_tf.modeling.layer_norm import LayerNorm
from bert_tf.modeling.pooler import Pooler
from bert_tf.modeling.transformer_layer import Intermediate, TransformerLayer

# Values away from the defaults, so that a config that loses one gives other outputs or shapes.
CONFIG = BertConfig(
    vocab_size=40,
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=12,
    hidden_act="gelu_exact",
    max_position_embeddings=10,
    type_vocab_size=3,
    initializer_range=0.5,
)

_rng = np.random.default_rng(7)
IDS = _rng.integers(0, CONFIG.vocab_size, (2, 5)).astype("int32")
SEGMENTS = np.array([[0, 0, 1, 1, 2], [0, 1, 1, 2, 2]], "int32")
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")
HIDDEN = _rng.standard_normal((2, 5, 8)).astype("float32")
WIDE = _rng.standard_normal((2, 5, 12)).astype("float32")
POSITIONS = np.array([[1, 3], [0, 4]], "int32")
TABLE = _rng.standard_normal((40, 8)).astype("float32")

# Each layer: how to make it (with extra Keras arguments) and the inputs of a call.
LAYERS = {
    "Embeddings": (lambda **kw: Embeddings(CONFIG, **kw), (IDS, SEGMENTS)),
    "SelfAttention": (lambda **kw: SelfAttention(CONFIG, **kw), (HIDDEN, MASK)),
    "Attention": (lambda **kw: Attention(CONFIG, **kw), (HIDDEN, MASK)),
    "DenseOutput": (lambda **kw: DenseOutput(CONFIG, CONFIG.intermediate_size, **kw), (WIDE, HIDDEN)),
    "TransformerLayer": (lambda **kw: TransformerLayer(CONFIG, name="layer_3", **kw), (HIDDEN, MASK)),
    "Intermediate": (lambda **kw: Intermediate(CONFIG, **kw), (HIDDEN,)),
    "Encoder": (lambda **kw: Encoder(CONFIG, **kw), (HIDDEN, MASK)),
    "Pooler": (lambda **kw: Pooler(CONFIG, **kw), (HIDDEN,)),
    "LayerNorm": (lambda **kw: LayerNorm(8, epsilon=0.5, **kw), (HIDDEN,)),
    "MaskedLMTransform": (lambda **kw: MaskedLMTransform(CONFIG, **kw), (HIDDEN,)),
    "TiedOutputLogits": (lambda **kw: TiedOutputLogits(CONFIG.vocab_size, **kw), (HIDDEN[0], TABLE)),
    "MaskedLMHead": (lambda **kw: MaskedLMHead(CONFIG, **kw), (HIDDEN, POSITIONS, TABLE)),
    "NextSentenceHead": (lambda **kw: NextSentenceHead(CONFIG, **kw), (HIDDEN[:, 0],)),
    "PretrainingHeads": (
        lambda **kw: PretrainingHeads(CONFIG, **kw),
        (HIDDEN, HIDDEN[:, 0], POSITIONS, TABLE),
    ),
}


def built(name, **kwargs):
    make, _ = LAYERS[name]
    layer = make(**kwargs)
    if not layer.built:  # TiedOutputLogits is complete when constructed
        layer.build()
    return layer


def round_trip(layer):
    """The layer Keras makes from `layer`'s serialised config, through JSON."""
    serialized = json.loads(json.dumps(keras.saving.serialize_keras_object(layer)))
    assert serialized["registered_name"] == f"bert_tf>{type(layer).__name__}"
    return keras.saving.deserialize_keras_object(serialized)


def layout(layer):
    return [(w.path, tuple(w.shape), w.dtype, w.trainable) for w in layer.weights]


def outputs(layer, args):
    return [np.asarray(x) for x in keras.tree.flatten(layer(*args))]


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
@pytest.mark.parametrize("name", LAYERS)
def test_layer_round_trips_through_its_config(name, dtype):
    layer = built(name, dtype=dtype)
    restored = round_trip(layer)
    assert type(restored) is type(layer)
    assert restored.name == layer.name
    assert restored.dtype_policy.name == dtype
    assert layout(restored) == layout(layer)
    if hasattr(layer, "config"):
        assert restored.get_config()["config"] == CONFIG.to_dict()

    restored.set_weights(layer.get_weights())
    args = LAYERS[name][1]
    want, got = outputs(layer, args), outputs(restored, args)
    assert [x.dtype for x in got] == [x.dtype for x in want]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", LAYERS)
def test_frozen_layer_stays_frozen(name):
    layer = built(name, trainable=False)
    restored = round_trip(layer)
    assert restored.trainable is False
    assert restored.trainable_weights == []
    assert [w.path for w in restored.non_trainable_weights] == [w.path for w in layer.weights]
    assert layout(restored) == layout(layer)


@pytest.mark.parametrize(
    "name, frozen",
    [
        ("Encoder", lambda layer: layer.transformer_layers[1].attention),
        ("Embeddings", lambda layer: layer.layer_norm),
        ("MaskedLMHead", lambda layer: layer.output_logits),  # created in its parent's build
        ("PretrainingHeads", lambda layer: layer.predictions),
    ],
    ids=["Encoder", "Embeddings", "MaskedLMHead", "PretrainingHeads"],
)
def test_frozen_sublayer_stays_frozen(name, frozen):
    layer = built(name)
    frozen(layer).trainable = False
    restored = round_trip(layer)
    assert frozen(restored).trainable is False
    assert restored.trainable is True
    assert layout(restored) == layout(layer)
    assert [w.path for w in restored.trainable_weights] == [w.path for w in layer.trainable_weights]


def test_a_sublayer_unfrozen_inside_a_frozen_one_is_restored():
    layer = built("Encoder")
    layer.trainable = False
    layer.transformer_layers[0].intermediate.trainable = True
    restored = round_trip(layer)
    assert layout(restored) == layout(layer)
    assert restored.transformer_layers[0].intermediate.trainable is True
    assert restored.transformer_layers[0].trainable is False


def model_inputs(with_positions):
    inputs = {"input_ids": IDS, "input_mask": MASK, "segment_ids": SEGMENTS}
    if with_positions:
        inputs["masked_lm_positions"] = POSITIONS
    return inputs


@pytest.mark.parametrize(
    "model_class, frozen",
    [
        (BertModel, lambda m: m.embeddings),
        (BertModel, lambda m: m.encoder.transformer_layers[0].attention.self_attention),
        (BertPretrainer, lambda m: m.bert.encoder.transformer_layers[1]),
        (BertPretrainer, lambda m: m.cls.predictions.output_logits),
    ],
    ids=["bert-embeddings", "bert-self_attention", "pretrainer-layer_1", "pretrainer-output_logits"],
)
@pytest.mark.parametrize("dtype", ["float32", "mixed_float16"])
def test_keras_file_keeps_frozen_sublayers(tmp_path, model_class, frozen, dtype):
    model = model_class(CONFIG, dtype=dtype)
    frozen(model).trainable = False
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)

    assert type(loaded) is model_class
    assert loaded.dtype_policy.name == dtype
    assert frozen(loaded).trainable is False
    assert layout(loaded) == layout(model)
    assert [w.path for w in loaded.trainable_weights] == [w.path for w in model.trainable_weights]
    inputs = model_inputs(model_class is BertPretrainer)
    for a, b in zip(outputs(loaded, (inputs,)), outputs(model, (inputs,)), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_flag_for_a_missing_sublayer_is_a_clear_error():
    config = dict(built("Encoder").get_config(), sublayers_trainable={"layer_1/attention/selff": False})
    with pytest.raises(ValueError, match="attention has no sub-layer 'selff'"):
        Encoder.from_config(config)


def test_heads_only_pretrainer_round_trips():
    model = BertPretrainer(CONFIG, heads_only=True)
    restored = BertPretrainer.from_config(model.get_config())
    assert restored.heads_only is True
    restored.set_weights(model.get_weights())
    inputs = model_inputs(True)
    want, got = model(inputs), restored(inputs)
    assert sorted(got) == sorted(want) and "sequence_output" not in got
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))


@pytest.mark.parametrize("task", ["classifier", "squad", "tagger"])
def test_task_models_round_trip_through_a_keras_file(tmp_path, task):
    """The fine-tuning models were plain Keras models: `get_config` and `.save` failed. Their
    weights, outputs and the untrained pooler's frozen flag survive a `.keras` file."""
    from bert_tf.modeling import BertClassifier, BertSquad, BertTagger

    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    make = {
        "classifier": lambda: BertClassifier(config.to_dict(), 3),
        "squad": lambda: BertSquad(config),
        "tagger": lambda: BertTagger(config, 5, dtype="mixed_bfloat16"),
    }[task]
    model = make()
    inputs = {
        "input_ids": np.array([[2, 7, 9, 3, 0]], "int32"),
        "input_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
    }
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is type(model)
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    assert [w.path for w in loaded.trainable_weights] == [w.path for w in model.trainable_weights]
    for name, value in model(inputs).items():
        np.testing.assert_array_equal(np.asarray(loaded(inputs)[name]), np.asarray(value))


_LOAD_OLD_FILES = """
import json, os, sys
# No fine-tuning job imported (a process forked by tool_runs has imported other modules).
assert not [m for m in sys.modules if m.startswith(("bert_tf.tasks.classifier", "bert_tf.tasks.squad",
                                                    "bert_tf.tasks.tagging"))]
import keras
import numpy as np
import bert_tf.modeling  # the package only
directory = sys.argv[1]
with open(os.path.join(directory, "outputs.json")) as f:
    expected = json.load(f)
ids = np.array([[2, 5, 7, 3]], np.int32)
inputs = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)}
worst = {}
for name, outputs in expected.items():
    model = keras.models.load_model(os.path.join(directory, name + ".keras"))
    got = model(inputs)
    worst[name] = max(float(np.max(np.abs(np.asarray(got[k]) - np.asarray(v)))) for k, v in outputs.items())
print(json.dumps(worst))
"""


def test_keras_files_saved_before_the_models_moved_still_load():
    """The fine-tuned models moved from `bert_tf.tasks.<job>` to `bert_tf.tasks.<job>.task`, then
    to `bert_tf.modeling.finetuning` on one base class; their registered names stayed, and
    importing `bert_tf.modeling` registers them all."""
    import os
    import sys

    from tests import tool_runs

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = tool_runs.run(
        [sys.executable, "-c", _LOAD_OLD_FILES, os.path.join(repo, "tests", "data", "keras_v0")],
        cwd=repo,
        timeout=300,
        server=tool_runs.TENSORFLOW,  # the script imports TensorFlow's Keras first
    )
    assert result.returncode == 0, result.stderr[-3000:]
    worst = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(worst) == ["classifier", "squad", "tagger"]
    assert max(worst.values()) <= 1e-6, worst
