"""Edge export (`bert_tf.export.edge`, `tools/export_edge.py`): LiteRT and ONNX files of
google_tiny and of a fine-tuned classifier (with the exact, erf GELU of Hugging Face's BERTs),
run in their own runtimes and compared with the original's float64 reference
(`bert_tf.checkpoints.reference`), not with the Keras model the tool checks against; google_tiny
as a sentence encoder (a pooling recorded in `model_settings.json`, or given), its
`sentence_embedding` against a NumPy pooling of the file's own last layer and of the reference's;
the tool's own check rules on arrays made in the test; bad input.

`make test` exports google_tiny to LiteRT and the classifier to ONNX, both float32, and a few
sentence encoders (a mode and a pooling each); the whole format x quantisation x model matrix and
the tagger and SQuAD heads are `slow` (`make test-all`). The exports' tests are `onednn_both`:
run with oneDNN on and off, whose traced graphs differ (BUILD_NOTES, Tests).
"""

import dataclasses
import os
import shutil
import sys

import numpy as np
import pytest

from bert_tf import BertConfig, BertModel, load_google_checkpoint
from bert_tf.checkpoints import reference
from bert_tf.export import edge
from bert_tf.export.edge import CLASSES, PER_EXAMPLE, PER_TOKEN, EdgeOptions, Runtime, check_outputs
from bert_tf.model_settings import ModelSettings
from tests import finetuning_fixtures as ff
from tests import model_fixtures as mf
from tests import tool_runs
from tests.pooling_reference import numpy_pooling

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_LABELS = 3
CALIBRATION = (
    "The museum opens at ten and closes at six.",
    "A small model on a phone answers in milliseconds.",
    "Rain is expected over the weekend in the north.",
    "He read the letter twice before he answered it. ||| The answer was short.",
    "Prices rose for the third month in a row.",
    "The children played football in the park after school.",
)


def _options(tmp_path, fmt, quantize, checkpoint=mf.GOOGLE_TINY_CKPT, **changes):
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("\n".join(CALIBRATION) + "\n", encoding="utf-8")
    options = EdgeOptions(
        format=fmt,
        quantize=quantize,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=checkpoint,
        vocab_file=os.path.join(mf.GOOGLE_TINY, "vocab.txt"),
        max_seq_length=32,
        output=str(tmp_path / f"model.{fmt}"),
        calibration_texts=str(calibration) if quantize == "int8" else None,
    )
    return dataclasses.replace(options, **changes)


@pytest.fixture(scope="module")
def classifier_checkpoint(tmp_path_factory):
    """A checkpoint as the original's run_classifier writes it, with the exact (erf) GELU of
    Hugging Face's BERTs in its config: (prefix, its weights, the config file)."""
    directory = tmp_path_factory.mktemp("classifier")
    prefix = str(directory / "model.ckpt-7")
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    config.hidden_act = "gelu_exact"
    config_file = directory / "bert_config.json"
    config_file.write_text(config.to_json_string(), encoding="utf-8")
    return prefix, ff.write_original_finetuned_checkpoint(prefix, NUM_LABELS, 7, seed=11), str(config_file)


@pytest.fixture(scope="module")
def tiny_weights():
    return reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)


def _inputs(seed, batch=3, length=19):
    """Random ids (a ragged mask, both segments), of a batch and length other than the check's."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, (batch, length)).astype(np.int32)
    lengths = rng.integers(4, length + 1, batch)
    lengths[0] = length
    mask = (np.arange(length)[None, :] < lengths[:, None]).astype(np.int32)
    segments = ((np.arange(length)[None, :] >= lengths[:, None] // 2) & (mask > 0)).astype(np.int32)
    return {"input_ids": ids * mask, "input_mask": mask, "segment_ids": segments}


def _reference(weights, inputs, head_weights=None, config_file=mf.GOOGLE_TINY_CONFIG):
    """The float64 outputs of the original on `inputs`: the encoder's, or a classifier's."""
    config = BertConfig.from_json_file(config_file)
    outputs = reference.reference_forward(
        weights, config, inputs["input_ids"], inputs["input_mask"], inputs["segment_ids"]
    )
    if head_weights is None:
        return {name: outputs[name] for name in ("sequence_output", "pooled_output")}
    logits = outputs["pooled_output"] @ head_weights["output_weights"].astype(np.float64).T
    return {"probabilities": reference.softmax(logits + head_weights["output_bias"])}


def _cosines(a, b):
    return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _assert_close_to_reference(fmt, path, quantize, expected_outputs, inputs):
    """The file's outputs in its runtime against the float64 reference, by `quantize`'s rule."""
    got = Runtime(fmt, path, expected_outputs)(inputs)
    mask = inputs["input_mask"] > 0
    for name, want in expected_outputs.items():
        assert got[name].shape == want.shape, name
        if quantize == "none":
            np.testing.assert_allclose(got[name], want, atol=2e-5, err_msg=name)
        elif quantize == "float16":
            np.testing.assert_allclose(got[name], want, atol=1e-2, err_msg=name)
        elif name == "probabilities":
            np.testing.assert_array_equal(got[name].argmax(-1), want.argmax(-1))
        else:
            a, b = want, got[name].astype(np.float64)
            if name == "sequence_output":  # the real tokens of each example together
                a, b = a * mask[..., None], b * mask[..., None]
            assert _cosines(a.reshape(len(a), -1), b.reshape(len(b), -1)).min() >= 0.99, name


@pytest.fixture(scope="module")
def tiny_tflite(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tiny_tflite")
    return tmp_path, edge.export_edge(_options(tmp_path, "tflite", "none"))


@pytest.fixture(scope="module")
def classifier_onnx(tmp_path_factory, classifier_checkpoint):
    tmp_path = tmp_path_factory.mktemp("classifier_onnx")
    prefix, _, config_file = classifier_checkpoint
    options = _options(tmp_path, "onnx", "none", checkpoint=prefix, bert_config_file=config_file)
    return tmp_path, edge.export_edge(options)


def _recording(directory, settings):
    """`directory` holding google_tiny's config beside a `model_settings.json` of `settings`, as
    `convert_checkpoint.py --hf_model` records a sentence encoder's. Returns the config's path."""
    os.makedirs(directory, exist_ok=True)
    shutil.copy(mf.GOOGLE_TINY_CONFIG, os.path.join(directory, "bert_config.json"))
    with open(os.path.join(directory, "model_settings.json"), "w", encoding="utf-8") as f:
        f.write(settings + "\n")
    return os.path.join(directory, "bert_config.json")


@pytest.fixture(scope="module")
def sentence_config(tmp_path_factory):
    """google_tiny's config in a directory that records mean pooling, normalized (the checkpoint
    stays google_tiny's: the settings are read beside --bert_config_file)."""
    return _recording(
        str(tmp_path_factory.mktemp("sentence_encoder")), '{"normalize": true, "pooling": "mean"}'
    )


@pytest.fixture(scope="module")
def sentence_tflite(tmp_path_factory, sentence_config):
    """The sentence encoder's float32 LiteRT file, no pooling flag given."""
    tmp_path = tmp_path_factory.mktemp("sentence_tflite")
    return tmp_path, edge.export_edge(_options(tmp_path, "tflite", "none", bert_config_file=sentence_config))


@pytest.mark.onednn_both
def test_google_tiny_as_litert_matches_the_original_at_another_batch_and_length(tiny_tflite, tiny_weights):
    tmp_path, result = tiny_tflite
    assert result.ok and result.path == str(tmp_path / "model.tflite")
    assert [row.output for row in result.rows] == ["sequence_output", "pooled_output"]
    assert all(row.max_abs_diff <= 1e-4 for row in result.rows)
    assert os.path.getsize(result.path) == result.size
    inputs = _inputs(seed=1)
    _assert_close_to_reference("tflite", result.path, "none", _reference(tiny_weights, inputs), inputs)
    # The batch and the length are dynamic: one row of 7 tokens after 3 of 19.
    one = {name: array[1:2, :7] for name, array in _inputs(seed=2).items()}
    _assert_close_to_reference("tflite", result.path, "none", _reference(tiny_weights, one), one)
    assert sorted(os.listdir(tmp_path)) == ["calibration.txt", "model.tflite"]  # no temporaries left


@pytest.mark.onednn_both
def test_a_finetuned_classifier_as_onnx_returns_the_originals_probabilities(
    classifier_onnx, classifier_checkpoint, tiny_weights
):
    tmp_path, result = classifier_onnx
    prefix, weights, config_file = classifier_checkpoint
    assert result.ok and result.edge.head == f"classifier with {NUM_LABELS} labels"
    assert [row.output for row in result.rows] == ["probabilities"]
    inputs = _inputs(seed=3)
    expected = _reference(weights, inputs, head_weights=weights, config_file=config_file)
    assert expected["probabilities"].shape == (3, NUM_LABELS)
    _assert_close_to_reference("onnx", result.path, "none", expected, inputs)


@pytest.mark.onednn_both
def test_a_recorded_pooling_adds_the_sentence_embedding_of_the_real_tokens(sentence_tflite, tiny_weights):
    """No flag: the recorded mean pooling, normalized; the file's vector is its own last layer's
    real tokens pooled, the Keras model's and the float64 reference's too."""
    tmp_path, result = sentence_tflite
    assert result.ok and result.path == str(tmp_path / "model.tflite")
    assert result.edge.head == "BertModel with mean pooling, normalized"
    assert [row.output for row in result.rows] == ["sequence_output", "pooled_output", "sentence_embedding"]
    assert result.rows[-1].measure == "max abs diff" and result.rows[-1].value <= 1e-4
    inputs = _inputs(seed=6)
    mask = inputs["input_mask"]
    assert mask.min() == 0  # padding, which the pooling must leave out
    got = Runtime("tflite", result.path, result.edge.outputs)(inputs)
    embedding = got["sentence_embedding"]
    assert embedding.shape == (3, 128)
    np.testing.assert_allclose(np.linalg.norm(embedding, axis=1), 1.0, atol=1e-6)
    own = numpy_pooling(got["sequence_output"], mask, "mean", normalize=True)
    np.testing.assert_allclose(embedding, own, atol=1e-6)
    keras_tokens = result.edge.model(inputs)["sequence_output"]
    np.testing.assert_allclose(embedding, numpy_pooling(keras_tokens, mask, "mean", True), atol=1e-5)
    original = _reference(tiny_weights, inputs)["sequence_output"]
    np.testing.assert_allclose(embedding, numpy_pooling(original, mask, "mean", True), atol=2e-5)


def test_the_log_names_the_pooling_and_checks_the_sentence_embedding(sentence_tflite, monkeypatch, capsys):
    tmp_path, result = sentence_tflite
    monkeypatch.setattr(edge, "export_edge", lambda options: result)
    assert edge.run_export_edge(_options(tmp_path, "tflite", "none")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("BertModel with mean pooling, normalized as tflite (none): ")
    (row,) = [line for line in lines if line.startswith("  sentence_embedding: ")]
    assert row.startswith("  sentence_embedding: max abs diff ") and row.endswith("(<= 0.0001) ok")


def test_pooling_none_leaves_out_the_recorded_pooling(tmp_path, sentence_config, caplog):
    options = _options(tmp_path, "tflite", "none", bert_config_file=sentence_config, pooling="none")
    recorded = ModelSettings(pooling="mean", normalize=True)
    with caplog.at_level("INFO", logger="bert_tf.export.bert"):
        model = edge.edge_model(options.open(), options.pooling, options.normalize, recorded)
    assert "no sentence_embedding (--pooling=none)" in caplog.text
    assert model.outputs == edge.ENCODER_OUTPUTS and model.head == "BertModel"
    assert isinstance(model.model, BertModel)


@pytest.mark.onednn_both
@pytest.mark.parametrize(
    "fmt, quantize, pooling", [("onnx", "none", "max"), ("tflite", "dynamic_int8", "cls")]
)
def test_a_pooling_given_for_a_model_that_records_none_exports_it(
    tmp_path, tiny_weights, fmt, quantize, pooling
):
    result = edge.export_edge(_options(tmp_path, fmt, quantize, pooling=pooling))
    assert result.ok and result.edge.head == f"BertModel with {pooling} pooling"
    rows = {row.output: row for row in result.rows}
    inputs = _inputs(seed=7)
    got = Runtime(fmt, result.path, result.edge.outputs)(inputs)
    embedding, mask = got["sentence_embedding"], inputs["input_mask"]
    # The pooling computes in float in a quantized file too: the file's own last layer, pooled.
    np.testing.assert_allclose(embedding, numpy_pooling(got["sequence_output"], mask, pooling), atol=1e-6)
    want = numpy_pooling(_reference(tiny_weights, inputs)["sequence_output"], mask, pooling)
    if quantize == "none":
        assert rows["sentence_embedding"].measure == "max abs diff"
        np.testing.assert_allclose(embedding, want, atol=2e-5)
    else:
        assert rows["sentence_embedding"].measure == "min cosine"
        assert _cosines(embedding.astype(np.float64), want).min() >= edge.MIN_COSINE


@pytest.mark.onednn_both
def test_a_keras_file_pools_as_recorded_in_its_directory(tmp_path, tiny_weights):
    """The settings of a .keras file are those of its directory, as export_saved_model reads them."""
    _recording(str(tmp_path / "model"), '{"pooling": "mean_sqrt_len_tokens"}')
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    model.save(tmp_path / "model" / "bert.keras")
    options = _options(
        tmp_path, "tflite", "none", checkpoint=str(tmp_path / "model" / "bert.keras"), bert_config_file=None
    )
    result = edge.export_edge(options)
    assert result.ok and result.edge.head == "BertModel with mean_sqrt_len_tokens pooling"
    inputs = _inputs(seed=8)
    got = Runtime("tflite", result.path, ["sentence_embedding"])(inputs)["sentence_embedding"]
    original = _reference(tiny_weights, inputs)["sequence_output"]
    np.testing.assert_allclose(
        got, numpy_pooling(original, inputs["input_mask"], "mean_sqrt_len_tokens"), atol=2e-5
    )


@pytest.mark.parametrize(
    "flags, named", [({"pooling": "mean"}, "--pooling"), ({"normalize": False}, "--normalize")]
)
def test_a_finetuned_checkpoint_keeps_its_heads_outputs(
    tmp_path, classifier_checkpoint, caplog, flags, named
):
    """A pooling flag for a checkpoint with a head is one line, nothing written; a pooling only
    recorded beside it is left out (the head's outputs are the file's)."""
    prefix, _, config_file = classifier_checkpoint
    options = _options(tmp_path, "tflite", "none", checkpoint=prefix, bert_config_file=config_file, **flags)
    with pytest.raises(ValueError) as raised:
        edge.export_edge(options)
    message = str(raised.value)
    assert (
        message.startswith(f"{named}: {prefix} holds a fine-tuned head (classifier)") and "\n" not in message
    )
    assert not os.path.exists(options.output)
    recorded = ModelSettings(pooling="mean", normalize=True)
    with caplog.at_level("INFO", logger="bert_tf.export.edge"):
        model = edge.edge_model(options.open(), recorded=recorded)
    assert (
        model.outputs == {"probabilities": CLASSES} and model.head == f"classifier with {NUM_LABELS} labels"
    )
    assert "the recorded mean pooling is not applied: the checkpoint's head (classifier)" in caplog.text


def test_a_file_past_its_tolerance_is_not_written_and_the_tool_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(edge.FLOAT_TOLERANCES, "none", 1e-12)  # float32 in LiteRT is ~1e-6 off
    options = _options(tmp_path, "tflite", "none")
    assert edge.run_export_edge(options) == 1
    out = capsys.readouterr().out
    assert "PAST TOLERANCE" in out and "not written" in out
    assert not os.path.exists(options.output)
    assert sorted(os.listdir(tmp_path)) == ["calibration.txt"]


@pytest.mark.parametrize(
    "quantize, advice",
    [
        ("int8", "try --quantize=dynamic_int8"),
        ("dynamic_int8", "try --quantize=float16"),
        ("float16", "try --quantize=none"),
        ("none", "float32 should match: please report the model"),
    ],
)
def test_a_refused_file_names_the_mode_to_try_next_in_one_line(
    tmp_path, monkeypatch, capsys, quantize, advice
):
    row = edge.CheckRow("pooled_output", 0.5, "min cosine", 0.9, edge.MIN_COSINE, False)
    refused = edge.EdgeExport(None, 100, 400, [row], {}, None, edge.EdgeModel(None, {}, "BertModel"))
    monkeypatch.setattr(edge, "export_edge", lambda options: refused)
    options = _options(tmp_path, "onnx", quantize)
    assert edge.run_export_edge(options) == 1
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("not written")]
    assert line.endswith(f"({options.output}); {advice}")


def test_smoothing_keeps_the_products_and_evens_the_channels_ranges():
    """`smooth_matmul_inputs` on a graph of one input read by a MatMul and a transposed Gemm,
    another MatMul of another width left alone: the outputs as before, the outlier channel's
    range brought near the others'."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w, g, other = rng.normal(size=(4, 3)), rng.normal(size=(5, 4)), rng.normal(size=(3, 2))
    shapes = {"y": [None, 3], "z": [None, 5], "u": [None, 2]}
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in shapes.items()]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul"),
            helper.make_node("Gemm", ["x", "g"], ["z"], name="gemm", transB=1),
            helper.make_node("MatMul", ["y", "other"], ["u"], name="other"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        outputs,
        [numpy_helper.from_array(a.astype(np.float32), n) for a, n in ((w, "w"), (g, "g"), (other, "other"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.normal(size=(64, 4)).astype(np.float32)
    x[:, 2] *= 50  # the outlier channel

    def run(m):
        session = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return dict(zip(("y", "z", "u"), session.run(["y", "z", "u"], {"x": x}), strict=True))

    before = run(model)
    edge.smooth_matmul_inputs(model, {"x": x[:8]}, width=4)
    onnx.checker.check_model(model)
    after = run(model)
    for name in before:
        np.testing.assert_allclose(after[name], before[name], rtol=1e-4, atol=1e-4, err_msg=name)
    assert [n.op_type for n in model.graph.node] == ["Mul", "MatMul", "Gemm", "MatMul"]
    (inverse,) = [t for t in model.graph.initializer if t.name == "x/smoothing"]
    smoothed = np.abs(x[:8] * numpy_helper.to_array(inverse)).max(0)
    assert smoothed.max() / smoothed.min() < np.abs(x[:8]).max(0).max() / np.abs(x[:8]).min(0).min() / 5
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[2]), other.astype(np.float32))


def test_dequantized_weights_are_stored_in_int8_and_multiply_in_float():
    """`dequantized_weights` on a graph of two MatMuls: the named one's weights become int8 with a
    scale per output channel, and its product stays near the float one; the other is unchanged."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    w, other = rng.normal(size=(64, 32)), rng.normal(size=(32, 8))
    w[:, 5] *= 40  # an output channel of its own range
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"], name="feed_forward"),
            helper.make_node("MatMul", ["y", "other"], ["u"], name="other"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, k]) for n, k in (("y", 32), ("u", 8))],
        [numpy_helper.from_array(a.astype(np.float32), n) for a, n in ((w, "w"), (other, "other"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    edge.dequantized_weights(model, ["feed_forward"])
    onnx.checker.check_model(model)
    stored = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert stored["w/int8"].dtype == np.int8 and stored["w/scale"].shape == (32,)
    np.testing.assert_array_equal(stored["other"], other.astype(np.float32))
    assert [n.op_type for n in model.graph.node] == ["DequantizeLinear", "MatMul", "MatMul"]
    x = rng.normal(size=(5, 64)).astype(np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(["y"], {"x": x})
    want = x.astype(np.float64) @ w
    # Each channel's error is within its own scale's rounding, the large channel's too.
    per_channel = np.max(np.abs(y - want), axis=0) / np.max(np.abs(want), axis=0)
    assert 0 < per_channel.max() < 0.02


def test_hybrid_fully_connected_stores_int8_weights_that_compute_the_same(tmp_path):
    import tensorflow as tf

    rng = np.random.default_rng(1)
    kernel = tf.constant(rng.normal(size=(64, 32)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32)])
    def dense(x):
        return {"y": tf.matmul(x, kernel)}

    module = tf.Module()
    module.dense = dense
    tf.saved_model.save(module, str(tmp_path / "saved_model"), signatures={"serving_default": dense})
    float_file = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved_model")).convert()
    hybrid_file = edge.hybrid_fully_connected(float_file)
    assert len(hybrid_file) < len(float_file) - 64 * 32 * 2  # 4 bytes a weight -> 1 (and the scales)
    x = rng.normal(size=(3, 64)).astype(np.float32)
    outputs = {}
    for name, data in (("float", float_file), ("hybrid", hybrid_file)):
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(data)
        runtime = Runtime("tflite", str(path), ["y"])
        outputs[name] = runtime({"x": x})["y"]
        if name == "hybrid":
            assert runtime.float_ops() == {"FULLY_CONNECTED (hybrid)": 1}
    want = x.astype(np.float64) @ kernel.numpy()
    np.testing.assert_allclose(outputs["float"], want, atol=1e-4)
    assert 0 < np.max(np.abs(outputs["hybrid"] - want)) < 0.05 * np.max(np.abs(want))


def test_float_files_are_held_to_the_largest_difference():
    expected = {"pooled_output": np.zeros((2, 4)), "sequence_output": np.zeros((2, 3, 4))}
    actual = {"pooled_output": np.full((2, 4), 5e-3), "sequence_output": np.full((2, 3, 4), 2e-2)}
    kinds = {"sequence_output": PER_TOKEN, "pooled_output": PER_EXAMPLE}
    mask = np.ones((2, 3))
    rows = {row.output: row for row in check_outputs(expected, actual, mask, kinds, "float16")}
    assert rows["pooled_output"].ok and not rows["sequence_output"].ok
    assert rows["sequence_output"].value == pytest.approx(2e-2)
    assert not any(row.ok for row in check_outputs(expected, actual, mask, kinds, "none"))


def test_int8_files_are_held_to_the_cosine_of_each_examples_real_tokens():
    rng = np.random.default_rng(0)
    want = rng.normal(size=(2, 5, 8))
    got = want + rng.normal(scale=0.05, size=want.shape)
    got[1, 3:] = -want[1, 3:] * 100  # the padding of example 1: anything
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    (row,) = check_outputs({"s": want}, {"s": got}, mask, {"s": PER_TOKEN}, "int8")
    real = [want[1, :3].ravel(), got[1, :3].ravel()]
    first = [want[0].ravel(), got[0].ravel()]
    expected = min(
        np.dot(*pair) / np.linalg.norm(pair[0]) / np.linalg.norm(pair[1]) for pair in (real, first)
    )
    assert row.ok and row.value == pytest.approx(expected)
    # Off on a real token, the example fails.
    got[1, 2] = -want[1, 2] * 100
    (row,) = check_outputs({"s": want}, {"s": got}, mask, {"s": PER_TOKEN}, "dynamic_int8")
    assert not row.ok and row.value < 0.99


def test_a_classifier_must_pick_the_same_class_for_every_example():
    want = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    close = np.array([[0.25, 0.45, 0.3], [0.5, 0.4, 0.1]])
    flipped = np.array([[0.2, 0.38, 0.42], [0.6, 0.3, 0.1]])  # cosine 0.97, but another class
    mask = np.ones((2, 4))
    (row,) = check_outputs({"p": want}, {"p": close}, mask, {"p": CLASSES}, "int8")
    assert row.ok and row.value == 1.0
    (row,) = check_outputs({"p": want}, {"p": flipped}, mask, {"p": CLASSES}, "int8")
    assert not row.ok and row.value == 0.5


@pytest.mark.parametrize(
    "quantize, changes, message",
    [
        ("none", {"max_seq_length": 513}, "max_position_embeddings (512)"),
        ("none", {"init_checkpoint": "/nonexistent/bert_model.ckpt"}, "/nonexistent/bert_model.ckpt"),
        ("int8", {"calibration_texts": None}, "--quantize=int8 needs --calibration_texts"),
        (
            "none",
            {"pooling": "sum"},
            "--pooling: expected one of cls, mean, max, mean_sqrt_len_tokens or none",
        ),
        ("none", {"pooling": "none", "normalize": True}, "--normalize needs a pooling, not --pooling=none"),
        ("none", {"normalize": True}, "--normalize needs --pooling (the model records no pooling)"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, quantize, changes, message):
    options = _options(tmp_path, "tflite", quantize, **changes)
    with pytest.raises(ValueError) as raised:
        edge.export_edge(options)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert not os.path.exists(options.output)


def test_a_calibration_file_without_text_is_refused(tmp_path):
    options = _options(tmp_path, "onnx", "int8")
    with open(options.calibration_texts, "w", encoding="utf-8") as f:
        f.write("\n  \n\n")
    with pytest.raises(ValueError, match="--calibration_texts: .* holds no text"):
        edge.export_edge(options)
    assert not os.path.exists(options.output)


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # import raises ImportError
    with pytest.raises(
        ValueError, match=r"--format=tflite needs the `tflite` extra: pip install -e '\.\[tflite\]'"
    ):
        edge.require_format("tflite")


def test_the_tool_reports_bad_input_as_one_line_and_writes_nothing(tmp_path):
    output = tmp_path / "model.onnx"
    result = tool_runs.run(
        [
            sys.executable,
            os.path.join(REPO, "tools", "export_edge.py"),
            "--format=onnx",
            f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
            f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
            f"--vocab_file={os.path.join(mf.GOOGLE_TINY, 'vocab.txt')}",
            "--max_seq_length=600",
            f"--output={output}",
        ],
        timeout=300,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "max_seq_length 600" in lines[-1]
    assert not output.exists() and not list(tmp_path.iterdir())


# The whole matrix (`make test-all`): every format and quantisation, google_tiny, the classifier
# and google_tiny with --pooling=max (a select over the last layer, which LiteRT's int8
# calibration once spread a -inf from), each against the float64 reference; the int8 files at
# most 0.3x the float32 weights (a float32 file holds them and little more: checked on the
# `none` files), so each case stands alone (`-k int8`).
MATRIX = [(fmt, quantize) for fmt in edge.FORMATS for quantize in edge.QUANTIZATIONS]


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("model", ["google_tiny", "classifier", "max_pooling"])
@pytest.mark.parametrize("fmt, quantize", MATRIX)
def test_every_format_and_quantisation_exports_and_passes_its_check(
    tmp_path, fmt, quantize, model, classifier_checkpoint, tiny_weights
):
    prefix, head_weights, config_file = classifier_checkpoint
    if model == "classifier":
        options = _options(tmp_path, fmt, quantize, checkpoint=prefix, bert_config_file=config_file)
    else:
        options = _options(tmp_path, fmt, quantize, pooling="max" if model == "max_pooling" else None)
    result = edge.export_edge(options)
    assert result.ok, [row.line() for row in result.rows]
    inputs = _inputs(seed=4)
    if model == "classifier":
        expected = _reference(tiny_weights, inputs, head_weights, config_file)
    else:
        expected = _reference(tiny_weights, inputs)
    if model == "max_pooling":
        expected["sentence_embedding"] = numpy_pooling(
            expected["sequence_output"], inputs["input_mask"], "max"
        )
    _assert_close_to_reference(fmt, result.path, quantize, expected, inputs)
    if quantize == "none":
        assert result.float32_bytes <= result.size <= 1.1 * result.float32_bytes
    elif quantize in ("int8", "dynamic_int8"):
        assert result.size <= 0.3 * result.float32_bytes
    if quantize == "int8":
        assert result.float_ops, "the float fallback is listed"


def _write_head_checkpoint(prefix, scope, num_outputs, seed):
    """google_tiny's bert/* plus a `<scope>output_weights` [num_outputs, H] and bias, as the
    fine-tuning tools write them. Returns the head's weights by their short names."""
    import tensorflow as tf

    source = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    tensors = {n: source.get_tensor(n) for n in source.get_variable_to_shape_map() if n.startswith("bert/")}
    rng = np.random.default_rng(seed)
    head = {
        "output_weights": rng.normal(0, 0.3, (num_outputs, 128)).astype(np.float32),
        "output_bias": rng.normal(0, 0.3, (num_outputs,)).astype(np.float32),
    }
    tensors.update({f"{scope}{name}": value for name, value in head.items()})
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    return head


@pytest.mark.onednn_both
@pytest.mark.slow
@pytest.mark.parametrize("scope, num_outputs", [("cls/tagging/", 5), ("cls/squad/", 2), ("", 1)])
def test_a_tagger_a_squad_model_and_a_regressor_export_with_their_heads(
    tmp_path, tiny_weights, scope, num_outputs
):
    head = _write_head_checkpoint(str(tmp_path / "model.ckpt-3"), scope, num_outputs, seed=2)
    result = edge.export_edge(_options(tmp_path, "onnx", "none", checkpoint=str(tmp_path / "model.ckpt-3")))
    assert result.ok
    inputs = _inputs(seed=5)
    outputs = _reference(tiny_weights, inputs)
    read = outputs["pooled_output"] if scope == "" else outputs["sequence_output"]
    logits = read @ head["output_weights"].astype(np.float64).T + head["output_bias"]
    if scope == "":  # one top-level output: a regression (STS-B's)
        assert result.edge.head == "regressor"
        expected = {"scores": logits[..., 0]}
    elif scope == "cls/tagging/":
        assert result.edge.head == "tagger with 5 labels"
        expected = {"probabilities": reference.softmax(logits)}
    else:
        assert result.edge.head == "SQuAD span head"
        expected = {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
    got = Runtime("onnx", result.path, expected)(inputs)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, atol=2e-5, err_msg=name)
