"""The Keras model against the original: variable layout, outputs on the google_tiny fixture."""

import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import (
    BertConfig,
    BertModel,
    BertPretrainer,
    load_google_checkpoint,
    masked_lm_loss,
    next_sentence_loss,
)
from bert_tf.checkpoints import reference as ref
from bert_tf.config import ACTIVATIONS
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.attention import SelfAttention
from bert_tf.modeling.layer_norm import LayerNorm
from bert_tf.modeling.losses import sparse_softmax_cross_entropy
from bert_tf.modeling.pooler import Pooler
from bert_tf.modeling.transformer_layer import Intermediate, TransformerLayer
from tests import model_fixtures as mf
from tests import tool_runs
from tests.op_trace import onednn_rewrites, op_types_run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def reference():
    return mf.reference_arrays()


@pytest.fixture(scope="module")
def pretrainer():
    model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    return model


def all_outputs(model, batch, training=False):
    """Every fixture key computed by `model` (a BertPretrainer) on `batch`."""
    out = model(mf.model_inputs(batch), training=training)
    mlm, mlm_example = masked_lm_loss(
        out["masked_lm_log_probs"], batch["masked_lm_ids"], batch["masked_lm_weights"]
    )
    nsp, nsp_example = next_sentence_loss(out["next_sentence_log_probs"], batch["next_sentence_labels"])
    values = {
        "embedding_output": out["embedding_output"],
        "sequence_output": out["sequence_output"],
        "pooled_output": out["pooled_output"],
        "masked_lm_log_probs": out["masked_lm_log_probs"],
        "masked_lm_example_loss": mlm_example,
        "masked_lm_loss": mlm,
        "next_sentence_log_probs": out["next_sentence_log_probs"],
        "next_sentence_example_loss": nsp_example,
        "next_sentence_loss": nsp,
        "total_loss": mlm + nsp,
    }
    for i, layer in enumerate(out["all_encoder_layers"]):
        values[f"encoder_layer_{i}"] = layer
    return {key: np.asarray(value) for key, value in values.items()}


def test_variable_paths_and_order_equal_the_original(fixtures_dir):
    with open(os.path.join(mf.GOOGLE_TINY, "variables.json")) as f:
        expected = json.load(f)["trainable_variables"]
    model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    assert [(w.path, list(w.shape)) for w in model.weights] == [(name, shape) for name, shape, _ in expected]
    assert [w.path for w in model.trainable_weights] == [name for name, _, _ in expected]


def test_bert_model_alone_has_the_bert_scope_only(fixtures_dir):
    with open(os.path.join(mf.GOOGLE_TINY, "variables.json")) as f:
        expected = [name for name, _, _ in json.load(f)["trainable_variables"]]
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    assert [w.path for w in model.weights] == [n for n in expected if n.startswith("bert/")]


def test_initialisation_follows_the_original():
    config = BertConfig(
        vocab_size=300,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=128,
        initializer_range=0.02,
    )
    weights = {w.path: np.asarray(w) for w in BertPretrainer(config).weights}
    table = weights["bert/embeddings/word_embeddings"]
    assert abs(table.std() - 0.02 * 0.88) < 0.002  # truncated at 2 stddev: std 0.88 * 0.02
    assert np.abs(table).max() <= 0.04 + 1e-7
    for name, value in weights.items():
        if name.endswith(("bias", "beta")):
            assert not value.any(), name
        if name.endswith("gamma"):
            assert (value == 1).all(), name


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("batch_name", mf.BATCHES)
def test_outputs_match_the_original(pretrainer, reference, batch_name, traced):
    """Eagerly and traced: a traced inference pass on TensorFlow's oneDNN (the CPU here) runs
    the LayerNorms as oneDNN's kernel (`bert_tf.onednn`)."""
    batch = reference[batch_name]
    got = all_outputs(tf.function(pretrainer) if traced else pretrainer, batch)
    for key in mf.OUTPUT_KEYS:
        np.testing.assert_allclose(got[key], batch[key], rtol=0, atol=1e-5, err_msg=f"{batch_name}/{key}")


@pytest.mark.parametrize("batch_name", mf.BATCHES)
def test_heads_only_outputs_are_the_originals(pretrainer, reference, batch_name):
    """With `heads_only` (the pretraining task's model) the last layer runs at [CLS] and the
    masked positions alone; the heads' outputs are still the original's."""
    model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG), heads_only=True)
    model.set_weights(pretrainer.get_weights())
    batch = reference[batch_name]
    out = model(mf.model_inputs(batch))
    assert sorted(out) == sorted(
        ["masked_lm_logits", "masked_lm_log_probs", "next_sentence_logits", "next_sentence_log_probs"]
    )
    for key in ("masked_lm_log_probs", "next_sentence_log_probs"):
        np.testing.assert_allclose(np.asarray(out[key]), batch[key], rtol=0, atol=1e-5, err_msg=key)
    mlm, _ = masked_lm_loss(out["masked_lm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"], True)
    assert abs(float(mlm) - float(batch["masked_lm_loss"])) <= 1e-5


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "tf_function"])
@pytest.mark.parametrize("heads_only", [False, True], ids=["whole", "heads_only"])
def test_an_empty_batch_gives_empty_outputs(pretrainer, heads_only, traced, training):
    """A server may pass a batch of 0 rows: every output is empty, in its shape."""
    config = pretrainer.config
    model = BertPretrainer(config, heads_only=heads_only)
    seq, predictions = 8, 3
    inputs = {name: np.zeros((0, seq), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}
    inputs["masked_lm_positions"] = np.zeros((0, predictions), np.int32)
    out = (tf.function(model) if traced else model)(inputs, training=training)
    expected = {
        "masked_lm_log_probs": (0, config.vocab_size),
        "next_sentence_log_probs": (0, 2),
    }
    if not heads_only:
        expected.update(sequence_output=(0, seq, config.hidden_size), pooled_output=(0, config.hidden_size))
    for key, shape in expected.items():
        assert tuple(out[key].shape) == shape, key


def test_a_sequence_longer_than_the_position_table_is_a_clear_error(pretrainer):
    config = pretrainer.config
    ids = np.zeros((1, config.max_position_embeddings + 1), np.int32)
    message = rf"input_ids has {ids.shape[1]} tokens per row, more than max_position_embeddings="
    with pytest.raises(ValueError, match=message):
        BertModel(config)({"input_ids": ids, "input_mask": ids, "segment_ids": ids})


@pytest.mark.parametrize("batch_name", mf.BATCHES)
def test_losses_from_logits_are_the_originals(pretrainer, reference, batch_name):
    """The fused softmax cross-entropy on the heads' logits gives the original's losses."""
    batch = reference[batch_name]
    out = pretrainer(mf.model_inputs(batch))
    np.testing.assert_allclose(
        np.asarray(out["masked_lm_log_probs"]),
        np.asarray(keras.ops.log_softmax(out["masked_lm_logits"], axis=-1)),
        rtol=0,
        atol=1e-6,
    )
    mlm, mlm_example = masked_lm_loss(
        out["masked_lm_logits"], batch["masked_lm_ids"], batch["masked_lm_weights"], from_logits=True
    )
    nsp, nsp_example = next_sentence_loss(
        out["next_sentence_logits"], batch["next_sentence_labels"], from_logits=True
    )
    for key, value in (
        ("masked_lm_loss", mlm),
        ("masked_lm_example_loss", mlm_example),
        ("next_sentence_loss", nsp),
        ("next_sentence_example_loss", nsp_example),
    ):
        np.testing.assert_allclose(
            np.asarray(value), batch[key], rtol=0, atol=1e-5, err_msg=f"{batch_name}/{key}"
        )


@pytest.mark.parametrize("scale", [1.0, 100.0, 1e4])
def test_cross_entropy_from_logits_against_float64(scale):
    """`sparse_softmax_cross_entropy`'s value and gradient (`softmax - one_hot`) against float64,
    with logits far apart (probabilities that underflow in float32)."""
    rng = np.random.RandomState(0)
    logits = (rng.randn(8, 300) * scale).astype(np.float32)
    labels = rng.randint(0, 300, size=8).astype(np.int32)
    upstream = rng.rand(8).astype(np.float32)
    x = logits.astype(np.float64)
    top = x.max(-1, keepdims=True)
    log_normaliser = top + np.log(np.exp(x - top).sum(-1, keepdims=True))
    want = log_normaliser[:, 0] - x[np.arange(8), labels]
    want_gradient = (np.exp(x - log_normaliser) - np.eye(300)[labels]) * upstream[:, None]
    tensor = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(tensor)
        got = sparse_softmax_cross_entropy(tensor, labels)
        total = tf.reduce_sum(got * upstream)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, tensor).numpy(), want_gradient, rtol=0, atol=1e-7)


def test_dropout_only_in_training(pretrainer, reference):
    batch = reference["b1"]
    inputs = mf.model_inputs(batch)
    first = np.asarray(pretrainer(inputs)["sequence_output"])
    again = np.asarray(pretrainer(inputs, training=False)["sequence_output"])
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, batch["sequence_output"], atol=1e-5)
    trained = np.asarray(pretrainer(inputs, training=True)["sequence_output"])
    assert np.abs(trained - first).max() > 1e-2


def test_padding_does_not_change_real_positions(pretrainer, reference):
    batch = reference["b0"]
    inputs = mf.model_inputs(batch)
    row, real = 2, int(batch["input_mask"][2].sum())  # row 2 has 12 real tokens of 32
    changed = dict(inputs, input_ids=inputs["input_ids"].copy())
    changed["input_ids"][row, real:] = 1000
    a = np.asarray(pretrainer(inputs)["sequence_output"])[row, :real]
    b = np.asarray(pretrainer(changed)["sequence_output"])[row, :real]
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_layer_norm_computes_in_float32_under_mixed_precision():
    layer = LayerNorm(8, dtype="mixed_float16")
    layer.build()
    assert layer.beta.dtype == "float32" and layer.gamma.dtype == "float32"
    x = np.linspace(-2000.0, 3000.0, 16).reshape(2, 8).astype("float16")
    got = np.asarray(layer(x), dtype=np.float64)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    want = (x64 - mean) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12)
    assert np.isfinite(got).all()  # x**2 overflows float16 (max 65504)
    # float32 out: the residual stream stays in float32 under mixed precision.
    assert keras.backend.standardize_dtype(got_dtype := layer(x).dtype) == "float32", got_dtype
    np.testing.assert_allclose(got, want, atol=1e-5)


def _numeric_gradient(f, value, step=1e-6):
    """d f / d value by central differences, one coordinate at a time (float64)."""
    gradient = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        bump = np.zeros_like(value)
        bump[index] = step
        gradient[index] = (f(value + bump) - f(value - bump)) / (2 * step)
    return gradient


@pytest.mark.parametrize("residual_dtype", [None, "float32", "bfloat16"], ids=["x", "x+f32", "x+bf16"])
@pytest.mark.parametrize("compiled", [False, True], ids=["keras_ops", "xla"])
def test_layer_norm_training_form_has_the_values_and_gradients_of_the_reference(compiled, residual_dtype):
    rng = np.random.default_rng(0)
    shape = (2, 3, 16)
    x = rng.standard_normal(shape) * 3.0 + 1.0
    # A bfloat16 residual is exactly representable: the reference starts from the same numbers.
    residual = (
        None
        if residual_dtype is None
        else rng.standard_normal(shape).astype(residual_dtype).astype(np.float64)
    )
    gamma, beta, upstream = rng.standard_normal(16), rng.standard_normal(16), rng.standard_normal(shape)
    summed = x if residual is None else x + residual

    def loss(x=summed, gamma=gamma, beta=beta):  # float64: sum(upstream * LayerNorm(x))
        return float((upstream * ref.layer_norm(x, gamma, beta)).sum())

    want_d_x = _numeric_gradient(lambda v: loss(x=v), summed)
    want_d_gamma = _numeric_gradient(lambda v: loss(gamma=v), gamma)
    want_d_beta = _numeric_gradient(lambda v: loss(beta=v), beta)
    compile_fn = (lambda f: tf.function(f, jit_compile=True)) if compiled else None
    layer = LayerNorm(16)
    layer.build()
    layer.gamma.assign(gamma.astype("float32"))
    layer.beta.assign(beta.astype("float32"))
    if compiled:
        layer.compile_training_form(compile_fn)
    inputs = [tf.constant(x, "float32")]
    if residual is not None:
        inputs.append(tf.constant(residual, residual_dtype))
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = layer(*inputs, training=True)
        total = tf.reduce_sum(tf.constant(upstream, "float32") * y)
    d_inputs, (d_beta, d_gamma) = tape.gradient(total, [inputs, [layer.beta, layer.gamma]])
    np.testing.assert_allclose(np.asarray(y), ref.layer_norm(summed, gamma, beta), rtol=0, atol=2e-6)
    np.testing.assert_allclose(np.asarray(layer(*inputs)), np.asarray(y), rtol=0, atol=1e-6)
    for d_input, tensor in zip(d_inputs, inputs, strict=True):
        assert d_input.dtype == tensor.dtype
        tolerance = 2e-2 if tensor.dtype == tf.bfloat16 else 2e-5  # bfloat16's own rounding (2^-9)
        np.testing.assert_allclose(
            np.asarray(tf.cast(d_input, "float64")), want_d_x, rtol=tolerance, atol=tolerance
        )
    np.testing.assert_allclose(np.asarray(d_gamma), want_d_gamma, rtol=0, atol=2e-5)
    np.testing.assert_allclose(np.asarray(d_beta), want_d_beta, rtol=0, atol=2e-5)


def test_attention_with_large_logits_under_mixed_precision():
    """Q K^T beyond float16's range (65504), Q K^T / sqrt(d) within it: the attention must not overflow."""
    config = BertConfig(
        vocab_size=10, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    layer = SelfAttention(config, dtype="mixed_float16")
    layer.build()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 32)).astype("float16")
    input_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    weights = {}
    for name, scale in (("query", 300.0), ("key", 1.0), ("value", 1.0)):
        projection = getattr(layer, name)
        # float16 values, so that the float64 computation starts from the layer's own operands
        kernel = (rng.standard_normal((32, 32)) * scale).astype("float16").astype("float32")
        bias = rng.standard_normal(32).astype("float16").astype("float32")
        projection.kernel.assign(kernel)
        projection.bias.assign(bias)
        weights[f"self/{name}/kernel"], weights[f"self/{name}/bias"] = kernel, bias
    x64 = x.astype(np.float64)

    # The case is the one meant: some products overflow float16, the scaled scores do not, and
    # each query's best key leads by far more than float16 rounding of the operands can move.
    def heads(name):
        y = x64 @ weights[f"self/{name}/kernel"] + weights[f"self/{name}/bias"]
        return y.reshape(2, 6, 2, 16).transpose(0, 2, 1, 3)

    products = heads("query") @ heads("key").transpose(0, 1, 3, 2)
    assert np.abs(products).max() > 65504 > np.abs(products).max() / 4
    scores = np.sort(products / 4 + (1 - input_mask[:, None, None, :]) * -10000.0, axis=-1)
    assert (scores[..., -1] - scores[..., -2]).min() > 100

    want = ref.self_attention(ref._Weights(weights), "self", x64, input_mask, num_heads=2)
    got = layer(x, input_mask)
    assert keras.backend.standardize_dtype(got.dtype) == "float16"
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=2e-3, atol=5e-3)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_the_float64_reference(name):
    x = np.concatenate([np.linspace(-12.0, 12.0, 4801), [-1e4, -300.0, -40.0, 40.0, 300.0, 1e4]])
    want = ref.ACTIVATIONS[name](x)
    # The check tells every activation from every other, the two GELUs included (4.7e-4 apart).
    for other in ACTIVATIONS:
        if other != name:
            assert np.abs(ref.ACTIVATIONS[other](x) - want).max() > 1e-4, other
    activation = get_activation(name)
    got64 = np.asarray(activation(keras.ops.convert_to_tensor(x, "float64")))
    # The GELUs are the backends' own kernels (fused into the matmul before them), which agree
    # with the formulas to 9e-10 (tanh form) and 5e-9 (erf form) in float64: far below
    # float32's resolution, and 4e-4 below the gap between the two forms.
    np.testing.assert_allclose(got64, want, rtol=0, atol=1e-8)
    got32 = np.asarray(activation(keras.ops.convert_to_tensor(x, "float32")), dtype=np.float64)
    np.testing.assert_allclose(got32, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_intermediate_gelu_is_fused_into_its_matmul_for_inference(dtype):
    """oneDNN's rewrite fuses GELU into the matmul only when GELU is applied inside the Dense
    layer's name scope; applied after the layer it ran as 8 element-wise ops (BERT-base forward
    on the CPU: 17.0 -> 18.4 seq/s float32, 24.5 -> 28.3 bfloat16 once fused)."""
    config = mf.tiny_config(hidden_size=32, intermediate_size=128)
    layer = Intermediate(config, dtype=dtype)
    layer.build()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype("float32")
    inference = tf.function(lambda x: layer(x))
    op_types = op_types_run(lambda: inference(x).numpy())
    if not onednn_rewrites("bfloat16" if dtype == "mixed_bfloat16" else "float32"):
        # TensorFlow's own matmul, bias and GELU ops (no oneDNN, or bfloat16 without AVX-512).
        assert "_MklNativeFusedMatMul" not in op_types and "Tanh" in op_types, sorted(op_types)
    else:
        assert "_MklNativeFusedMatMul" in op_types, f"oneDNN's fused matmul did not run: {sorted(op_types)}"
        assert "Tanh" not in op_types, f"GELU ran outside the matmul: {sorted(op_types)}"
    kernel, bias = (np.asarray(w, np.float64) for w in (layer.dense.kernel, layer.dense.bias))
    if dtype == "float32":  # the fused kernel computes the reference's function
        want = ref.gelu_tanh(x.astype(np.float64) @ kernel + bias)
        np.testing.assert_allclose(np.asarray(inference(x), np.float64), want, rtol=0, atol=1e-5)
    # The training pass (matmul, bias, GELU's training form) computes the same function.
    got = np.asarray(tf.cast(inference(x), "float32"))
    tolerance = 1e-5 if dtype == "float32" else 3e-2  # bfloat16: 8 bits of mantissa
    np.testing.assert_allclose(np.asarray(tf.cast(layer(x, training=True), "float32")), got, atol=tolerance)


@pytest.mark.parametrize("compiled", [False, True], ids=["autodiff", "kernel_transpose"])
def test_intermediate_training_gradients_are_the_references(compiled):
    """The training pass's gradients against central differences of the float64 layer, and, as
    the trainer compiles it, its input gradient a product with the kernel's transpose made by
    the compile function (`matmul_with_kernel_transpose`)."""
    config = mf.tiny_config(hidden_size=16, intermediate_size=48)
    layer = Intermediate(config)
    layer.build()
    rng = np.random.default_rng(0)
    x, kernel = rng.standard_normal((2, 5, 16)), rng.standard_normal((16, 48)) * 0.5
    bias, upstream = rng.standard_normal(48), rng.standard_normal((2, 5, 48))
    x, kernel, bias = (v.astype("float32").astype(np.float64) for v in (x, kernel, bias))
    layer.dense.kernel.assign(kernel.astype("float32"))
    layer.dense.bias.assign(bias.astype("float32"))
    transposed = []
    if compiled:

        def compile_fn(f):
            compiled_f = tf.function(f, jit_compile=True)

            def call(*args):
                transposed.extend(tuple(a.shape) for a in args if f is keras.ops.transpose)
                return compiled_f(*args)

            return call

        layer.compile_training_form(compile_fn)

    def loss(x=x, kernel=kernel, bias=bias):  # float64: sum(upstream * GELU(x @ kernel + bias))
        return float((upstream * ref.gelu_tanh(x @ kernel + bias)).sum())

    inputs = tf.constant(x, "float32")
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        total = tf.reduce_sum(tf.constant(upstream, "float32") * layer(inputs, training=True))
    d_x, d_kernel, d_bias = tape.gradient(total, [inputs, layer.dense.kernel, layer.dense.bias])
    for got, want in (
        (d_x, _numeric_gradient(lambda v: loss(x=v), x)),
        (d_kernel, _numeric_gradient(lambda v: loss(kernel=v), kernel)),
        (d_bias, _numeric_gradient(lambda v: loss(bias=v), bias)),
    ):
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=3e-5)
    assert transposed == ([(16, 48)] if compiled else [])


def _transformer_layer_with_large_biases(dtype=None):
    """A hidden-32 `TransformerLayer` without dropout whose biases and LayerNorm betas are
    N(0, 1) (the original's start at zero), and its weights by their Google names."""
    config = mf.tiny_config(
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    layer = TransformerLayer(config, name="layer_0", dtype=dtype)
    layer.build()
    rng = np.random.default_rng(3)
    for weight in layer.weights:
        values = rng.standard_normal(weight.shape)
        if weight.path.endswith("gamma"):
            values = 1.0 + 0.2 * values
        elif not weight.path.endswith(("bias", "beta")):
            values = 0.2 * values
        weight.assign(values.astype("float32"))
    return layer, config, {weight.path: np.asarray(weight) for weight in layer.weights}


@pytest.mark.parametrize("rows", [None, 3], ids=["all_rows", "from_states"])
@pytest.mark.parametrize("fused", [False, True], ids=["explicit", "fused"])
@pytest.mark.parametrize(
    "fold_attention, fold_outputs",
    [(True, True), (True, False), (False, False)],
    ids=["folded", "attention_folded", "dense_layers"],
)
def test_inference_with_folded_biases_is_the_reference_layer(rows, fused, fold_attention, fold_outputs):
    """In inference the projections run without the biases they need not add: the key bias is
    dropped (the softmax does not see it), the query bias becomes a per-key term of the scores
    (the explicit form only), and the value and output biases join the LayerNorm's float32 sum.
    With large biases, where a dropped term would show, the layer is the float64 reference's,
    folded or not, through either attention, and also with `from_states` (the heads-only last
    layer). An output block that keeps its dense layer adds the deferred value bias to its
    input."""
    layer, config, weights = _transformer_layer_with_large_biases()
    assert layer.attention.self_attention.fold_biases and layer.output_block.fold_bias  # the default
    layer.attention.self_attention.fused_attention = fused
    layer.attention.self_attention.fold_biases = fold_attention
    layer.attention.output_block.fold_bias = layer.output_block.fold_bias = fold_outputs
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 32)).astype("float32")
    input_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    want = ref.transformer_layer(ref._Weights(weights), "layer_0", x.astype(np.float64), input_mask, config)
    from_states = None if rows is None else x[:, :rows]
    got = np.asarray(layer(x, input_mask, from_states=from_states), np.float64)
    np.testing.assert_allclose(got, want[:, :rows], rtol=0, atol=1e-5)
    # Training keeps the dense layers (dropout on the probabilities breaks the rows' sum of one).
    trained = np.asarray(layer(x, input_mask, training=True, from_states=from_states), np.float64)
    np.testing.assert_allclose(trained, want[:, :rows], rtol=0, atol=1e-5)


def test_inference_runs_the_projections_as_plain_matmuls():
    """In a bfloat16 inference pass TensorFlow's oneDNN rewrite runs a matmul fused with its bias
    as an inner product on the kernel as stored (gemm:jit), a plain matmul on its brgemm kernels
    (AMX where the CPU has it):
    of a layer's matmuls only `intermediate/dense` is fused (GELU with it); `query`, `key`,
    `value`, both output denses and the value bias through the output kernel are plain."""
    layer, _, _ = _transformer_layer_with_large_biases("mixed_bfloat16")
    # [batch * seq, H], the encoder's layout: a Dense on a 3-D input is a reshaped matmul.
    x = np.random.default_rng(5).standard_normal((2 * 6, 32)).astype("float32")
    input_mask = np.ones((2, 6), "int32")
    inference = tf.function(lambda x: layer(x, input_mask))
    op_types = op_types_run(lambda: inference(x).numpy())
    if not onednn_rewrites("bfloat16"):
        # No oneDNN, or bfloat16 without AVX-512: the seven matmuls stay TensorFlow's own.
        assert op_types["MatMul"] == 7 and "_MklMatMul" not in op_types, sorted(op_types.items())
        return
    assert op_types["_MklNativeFusedMatMul"] == 1, f"fused matmuls: {sorted(op_types.items())}"
    assert op_types["_MklMatMul"] == 6, f"plain matmuls: {sorted(op_types.items())}"
    assert "BiasAdd" not in op_types and "Tanh" not in op_types, sorted(op_types.items())


# float32's derivative: near x = 5, 1 - sigmoid(2u) is below float32's resolution at 1 (2e-6
# off); automatic differentiation through the backend's tanh form is 4.1e-6 off on these points.
@pytest.mark.parametrize(
    "dtype, tolerance, slope_tolerance", [("float64", 1e-8, 1e-8), ("float32", 1e-6, 2.5e-6)]
)
@pytest.mark.parametrize("compiled", [False, True], ids=["keras_ops", "xla"])
def test_gelu_training_form_has_the_values_and_derivative_of_the_tanh_form(
    dtype, tolerance, slope_tolerance, compiled
):
    x = np.concatenate([np.linspace(-12.0, 12.0, 4801), [-1e4, -300.0, -40.0, 40.0, 300.0, 1e4]])
    # The derivative by central differences of the float64 reference, not from the formula the
    # training form's gradient writes out.
    step = 1e-6 * np.maximum(1.0, np.abs(x))
    want_slope = (ref.gelu_tanh(x + step) - ref.gelu_tanh(x - step)) / (2 * step)
    # Compiled as the trainer compiles it (XLA's own element-wise kernels).
    compile_fn = (lambda f: tf.function(f, jit_compile=True)) if compiled else None
    training_form = get_activation("gelu", training=True, compile_fn=compile_fn)
    assert training_form is not get_activation("gelu")
    assert get_activation("relu", training=True) is get_activation("relu")
    x_tensor = tf.constant(x, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x_tensor)
        y = training_form(x_tensor)
    slope = tape.gradient(y, x_tensor)
    np.testing.assert_allclose(np.asarray(y, np.float64), ref.gelu_tanh(x), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(np.asarray(slope, np.float64), want_slope, rtol=0, atol=slope_tolerance)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_every_activation_on_the_fixture_weights_matches_the_reference(fixtures_dir, reference, name):
    config = mf.tiny_config(hidden_act=name)
    model = BertPretrainer(config)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    weights = ref.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    for batch_name, batch in reference.items():
        inputs = {key: batch[key] for key in mf.INPUT_KEYS + mf.LABEL_KEYS}
        want = ref.reference_forward(weights, config, **inputs)
        got = all_outputs(model, batch)
        for key in mf.OUTPUT_KEYS:
            np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-5, err_msg=f"{batch_name}/{key}")
        if name == "gelu_exact":  # the tanh form ("gelu") would be further off than the tolerance
            tanh_form = ref.reference_forward(weights, mf.tiny_config(hidden_act="gelu"), **inputs)
            assert np.abs(tanh_form["sequence_output"] - want["sequence_output"]).max() > 5e-5


# The relative L2 error of sequence_output against the original's float32 output. Measured on
# this fixture: mixed_float16 1.1e-4, mixed_bfloat16 7.6e-4; with the residual stream rounded to
# the compute dtype at every layer (LayerNorm's output and the residual sum in float16 or
# bfloat16) it was 6.5e-4 and 5.2e-3.
@pytest.mark.parametrize("dtype, sequence_error", [("mixed_float16", 2e-4), ("mixed_bfloat16", 1.5e-3)])
def test_mixed_precision_model_is_close_to_float32(reference, fixtures_dir, dtype, sequence_error):
    batch = reference["b1"]
    model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG), dtype=dtype)
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    assert all(w.dtype == "float32" for w in model.weights)
    out = model(mf.model_inputs(batch))
    # The residual stream, and so each layer's output, stays in float32 (see LayerNorm).
    for key in ("sequence_output", "masked_lm_log_probs"):
        assert keras.backend.standardize_dtype(out[key].dtype) == "float32", key
    got, want = np.asarray(out["sequence_output"], np.float64), batch["sequence_output"].astype(np.float64)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < sequence_error
    np.testing.assert_allclose(
        np.asarray(out["masked_lm_log_probs"]), batch["masked_lm_log_probs"], atol=2e-2
    )


_JAX_SCRIPT = """
import os, sys
import jax
import keras
assert keras.backend.backend() == "jax", keras.backend.backend()
import numpy as np
sys.path.insert(0, {repo!r})
from bert_tf import BertConfig, BertPretrainer, load_google_checkpoint
from tests import model_fixtures as mf
model = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
heads_only = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG), heads_only=True)
heads_only.set_weights(model.get_weights())


def jitted(pretrainer, training=False):
    # The path Keras' fit and predict take on JAX: one trace of stateless_call, compiled by
    # XLA (eager JAX compiles each op anew for every shape). The seed generator's state is
    # among the non-trainable variables, so dropout draws under jit too.
    variables = ([v.value for v in pretrainer.trainable_variables],
                 [v.value for v in pretrainer.non_trainable_variables])
    call = jax.jit(lambda v, x: pretrainer.stateless_call(*v, x, training=training)[0])
    return lambda x: call(variables, x)


calls = {{model: jitted(model), heads_only: jitted(heads_only)}}
keys = {{model: ("embedding_output", "sequence_output", "pooled_output",
                 "masked_lm_log_probs", "next_sentence_log_probs"),
        heads_only: ("masked_lm_log_probs", "next_sentence_log_probs")}}
worst = 0.0
batches = mf.reference_arrays()
smallest = min(batches, key=lambda name: batches[name]["input_ids"].size)
for name, batch in batches.items():
    for pretrainer in (model, heads_only):
        # One eager call (the smallest batch) keeps Keras' eager path on JAX covered.
        eager = pretrainer is model and name == smallest
        out = pretrainer(mf.model_inputs(batch)) if eager else calls[pretrainer](mf.model_inputs(batch))
        for key in keys[pretrainer]:
            worst = max(worst, float(np.abs(np.asarray(out[key]) - batch[key]).max()))
# Token packing (an export's inference pass), eager: the original's outputs at the real tokens,
# zeros at the padding.
from bert_tf.modeling.token_packing import token_packing
batch = batches[smallest]
real = (batch["input_mask"] > 0)[..., None]
assert not real.all()
with token_packing([model]) as count:
    assert count == 1
    packed = model.bert({{k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}})
difference = np.asarray(packed["sequence_output"]) - batch["sequence_output"] * real
worst = max(worst, float(np.abs(difference).max()))
# A batch of 0 rows in training (dropout's draws and masks of an empty batch).
empty = {{name: np.zeros((0, 8), np.int32) for name in ("input_ids", "input_mask", "segment_ids")}}
empty["masked_lm_positions"] = np.zeros((0, 3), np.int32)
for pretrainer in (model, heads_only):
    out = jitted(pretrainer, training=True)(empty)
    assert out["masked_lm_log_probs"].shape == (0, model.config.vocab_size), out["masked_lm_log_probs"].shape
# mixed_float16 compiled by jax.jit on a CPU: XLA's CPU dot has no float16 operands with a
# float32 result, which JAX's fused attention asks for (a compile error Keras cannot catch).
f16 = BertPretrainer(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG), dtype="mixed_float16")
f16.set_weights(model.get_weights())
# Against the original's float32 output (the float32 model's is within 1e-5 of it, WORST).
sequence = jitted(f16)(mf.model_inputs(batch))["sequence_output"]
want = batch["sequence_output"]
print("FLOAT16", float(np.abs(np.asarray(sequence, np.float32) - want).max() / np.abs(want).max()))
print("WORST", worst)
"""


def test_same_outputs_on_the_jax_backend(fixtures_dir):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    # Forked from tool_runs' JAX server: the script imports Keras on JAX, then bert_tf.
    result = tool_runs.run(
        [sys.executable, "-c", _JAX_SCRIPT.format(repo=REPO)],
        env=env,
        cwd=REPO,
        timeout=600,
        server=tool_runs.JAX,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    worst = float(result.stdout.split("WORST")[-1])
    assert worst <= 1e-5, worst
    float16 = float(result.stdout.split("FLOAT16")[-1].split()[0])
    assert float16 <= 1e-2, float16


def test_keras_format_round_trip(pretrainer, reference, tmp_path):
    path = str(tmp_path / "model.keras")
    pretrainer.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded) is BertPretrainer
    assert [w.path for w in loaded.weights] == [w.path for w in pretrainer.weights]
    batch = reference["b0"]
    np.testing.assert_allclose(
        np.asarray(loaded(mf.model_inputs(batch))["masked_lm_log_probs"]),
        batch["masked_lm_log_probs"],
        atol=1e-5,
    )


@pytest.mark.parametrize("model_class, casts", [(BertModel, 0), (BertPretrainer, 1)])
def test_mixed_precision_casts_the_word_table_at_most_once(model_class, casts):
    """Autocasting the [V, H] table on every read costs a V x H cast each time: the lookup
    gathers float32 rows, and only the tied MLM projection casts the table, once."""
    import tensorflow as tf

    config = BertConfig(
        vocab_size=97, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    model = model_class(config, dtype="mixed_bfloat16")
    inputs = {
        "input_ids": tf.TensorSpec([2, 8], tf.int32),
        "input_mask": tf.TensorSpec([2, 8], tf.int32),
        "segment_ids": tf.TensorSpec([2, 8], tf.int32),
    }
    if model_class is BertPretrainer:
        inputs["masked_lm_positions"] = tf.TensorSpec([2, 3], tf.int32)
    graph = tf.function(lambda x: model(x)).get_concrete_function(inputs).graph
    table_casts = [
        op for op in graph.get_operations() if op.type == "Cast" and op.outputs[0].shape.as_list() == [97, 16]
    ]
    assert len(table_casts) == casts


def test_mixed_precision_pooler_casts_the_cls_rows_only():
    """The pooler reads one row per sequence: under mixed precision it casts those [batch, H]
    rows, not the float32 [batch, seq, H] sequence output they are sliced from."""
    config = mf.tiny_config()
    pooler = Pooler(config, dtype="mixed_bfloat16")
    pooler.build()
    spec = tf.TensorSpec([2, 8, config.hidden_size], tf.float32)
    graph = tf.function(pooler).get_concrete_function(spec).graph
    cast_shapes = [op.inputs[0].shape.as_list() for op in graph.get_operations() if op.type == "Cast"]
    assert [2, 8, config.hidden_size] not in cast_shapes
    assert [2, config.hidden_size] in cast_shapes
    sequence = np.random.default_rng(0).normal(size=(2, 8, config.hidden_size)).astype(np.float32)
    kernel, bias = (np.asarray(w, np.float64) for w in pooler.dense.get_weights())
    want = np.tanh(sequence[:, 0].astype(np.float64) @ kernel + bias)
    np.testing.assert_allclose(np.asarray(pooler(sequence), np.float64), want, atol=5e-3)


def fused_attention_calls(monkeypatch, length, rows, training):
    """Runs a `SelfAttention` as on JAX (the fused attention), attention dropout 0, over 2
    sequences of `length` positions (the first padded after 3), `rows` of them attending (None:
    all); returns the keyword arguments of each `dot_product_attention` call, with the bias given
    as its shape."""
    config = BertConfig(
        vocab_size=10,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=16,
        attention_probs_dropout_prob=0.0,
    )
    layer = SelfAttention(config)
    layer.fused_attention = True  # JAX's default; TensorFlow's is the explicit form
    layer.build()
    fused = keras.ops.dot_product_attention
    calls = []

    def recording(query, key, value, bias=None, **kwargs):
        calls.append(dict(kwargs, bias=tuple(keras.ops.shape(bias))))
        return fused(query, key, value, bias=bias, **kwargs)

    monkeypatch.setattr(keras.ops, "dot_product_attention", recording)
    states = keras.ops.convert_to_tensor(np.random.RandomState(0).normal(size=(2, length, 32)), "float32")
    from_states = None if rows is None else states[:, :rows]
    mask = keras.ops.convert_to_tensor(np.array([[1] * 3 + [0] * (length - 3), [1] * length]), "int32")
    layer(states, mask, from_states=from_states, training=training)
    return calls


@pytest.mark.parametrize("rows", [None, 3])
def test_fused_attention_gets_a_bias_as_long_as_the_queries(monkeypatch, rows):
    """cuDNN's fused attention (JAX on a GPU) takes a bias of [batch or 1, heads or 1, from_seq,
    seq] only; the [batch, 1, 1, seq] mask would send JAX to its unfused attention."""
    calls = fused_attention_calls(monkeypatch, 5, rows, training=False)
    assert [call["bias"] for call in calls] == [(2, 1, rows or 5, 5)]


@pytest.mark.parametrize("rows, fused", [(3, False), (4, True), (None, True)])
def test_training_takes_the_fused_attention_for_even_lengths_only(monkeypatch, rows, fused):
    """cuDNN's fused attention with a bias has no backward pass for odd lengths (Keras would log
    the failure and fall back): training with attention dropout 0 computes those explicitly."""
    calls = fused_attention_calls(monkeypatch, 6, rows, training=True)
    # The fused attention scales the scores itself: the query reaches it unscaled.
    assert [call["scale"] for call in calls] == ([1 / np.sqrt(8)] if fused else [])


@pytest.mark.parametrize(
    "dtype, rtol, atol",
    [("float32", 0, 1e-6), ("mixed_float16", 5e-3, 2e-3), ("mixed_bfloat16", 2e-2, 2e-2)],
)
def test_attention_paths_agree(dtype, rtol, atol):
    """The step-by-step attention (with dropout, and TensorFlow's choice) and the backend's fused
    attention give the same context with the dropout off; in bfloat16 the step-by-step softmax
    outside training runs on the bfloat16 scores, the fused one in float32."""
    from bert_tf.modeling.attention import SelfAttention

    config = BertConfig(
        vocab_size=10,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=16,
        attention_probs_dropout_prob=0.3,
    )
    layer = SelfAttention(config, dtype=dtype)
    layer.build()
    rng = np.random.RandomState(0)
    q, k, v = (
        keras.ops.convert_to_tensor(rng.normal(size=(2, 5, 4, 8)), layer.compute_dtype) for _ in range(3)
    )
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "float32")
    adder = keras.ops.convert_to_tensor((1.0 - mask[:, None, None, :]) * -10000.0)
    explicit = layer.explicit_attention(q, k, v, adder, training=False)
    fused = keras.ops.dot_product_attention(q, k, v, bias=adder, scale=1.0)
    # Half-precision contexts may differ in their last bits (a few ulps: 2^-10 relative each in
    # float16, 2^-7 in bfloat16).
    np.testing.assert_allclose(
        np.asarray(explicit, "float32"), np.asarray(fused, "float32"), rtol=rtol, atol=atol
    )
    # Padding is ignored: changing the padded keys' values changes nothing on either path.
    v2 = keras.ops.where(keras.ops.convert_to_tensor(mask[:, :, None, None] == 0), 100.0, v)
    np.testing.assert_allclose(
        np.asarray(
            layer.explicit_attention(q, k, keras.ops.cast(v2, layer.compute_dtype), adder, False),
            "float32",
        ),
        np.asarray(explicit, "float32"),
        rtol=rtol,
        atol=atol,
    )
