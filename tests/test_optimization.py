"""The schedule, AdamWeightDecay and LAMB against NumPy re-derivations of their formulas, through
the plain Keras `optimizer.apply` path (TensorFlow in-process, JAX in a subprocess)."""

import math
import os
import sys

import keras
import numpy as np
import pytest

from bert_tf.training.optimization import AdamWeightDecay, Lamb, WarmupPolynomialDecay, clip_by_global_norm
from bert_tf.training.step import _xla_compiled_update
from tests import tool_runs
from tests import training_reference as ref

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Names that exercise the exclusions: decayed kernels and embeddings, excluded biases and LayerNorm.
NAMES = ("dense/kernel", "dense/bias", "LayerNorm/gamma", "embeddings/word_embeddings")


def _problem(seed=0):
    rng = np.random.RandomState(seed)
    shapes = {
        "dense/kernel": (4, 3),
        "dense/bias": (3,),
        "LayerNorm/gamma": (3,),
        "embeddings/word_embeddings": (5, 3),
    }
    params = {name: rng.normal(size=shapes[name]).astype(np.float32) for name in NAMES}
    grads = [{name: rng.normal(size=shapes[name]).astype(np.float32) for name in NAMES} for _ in range(4)]
    return params, grads


def _keras_run(optimizer, params, grads):
    variables = []
    for name in NAMES:
        scope, _, leaf = name.rpartition("/")
        with keras.name_scope(scope or "root"):
            variables.append(keras.Variable(params[name], name=leaf))
    assert [v.path for v in variables] == list(NAMES)
    for step_grads in grads:
        optimizer.apply([step_grads[name] for name in NAMES], variables)
    return {v.path: np.asarray(v) for v in variables}


def _lr(step):
    return ref.learning_rate(step, 1e-2, 10, 2)


def numpy_adamw(params, grads):
    """The original's update (`tests/training_reference.py`) over every step of `grads`."""
    adam = ref.AdamWeightDecay({k: v.astype(np.float64) for k, v in params.items()})
    params = {k: v.astype(np.float64) for k, v in params.items()}
    for step, step_grads in enumerate(grads):
        params = adam.apply(params, {k: g.astype(np.float64) for k, g in step_grads.items()}, _lr(step))
    return params


def numpy_lamb(params, grads, lr=_lr, weight_decay_rate=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """LAMB (You et al. 2019, Algorithm 2) with bias correction; exclusions as the original's decay."""
    params = {k: v.astype(np.float64) for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in params.items()}
    for t, step_grads in enumerate(grads, start=1):
        for name in NAMES:
            g = step_grads[name].astype(np.float64)
            m[name] = b1 * m[name] + (1 - b1) * g
            v[name] = b2 * v[name] + (1 - b2) * g * g
            r = (m[name] / (1 - b1**t)) / (np.sqrt(v[name] / (1 - b2**t)) + eps)
            excluded = any(x in name for x in ref.EXCLUDED)
            if not excluded:
                r = r + weight_decay_rate * params[name]
            trust = 1.0
            if not excluded:
                w_norm, r_norm = np.linalg.norm(params[name]), np.linalg.norm(r)
                trust = w_norm / r_norm if w_norm > 0 and r_norm > 0 else 1.0
            params[name] = params[name] - lr(t - 1) * trust * r
    return params


def test_schedule_is_warmup_then_linear_decay():
    schedule = WarmupPolynomialDecay(1e-4, num_train_steps=10, num_warmup_steps=2)
    for step in range(14):
        assert float(schedule(step)) == pytest.approx(
            ref.learning_rate(step, 1e-4, 10, 2), rel=1e-6, abs=1e-12
        )
    no_warmup = WarmupPolynomialDecay(3e-5, num_train_steps=100)
    assert float(no_warmup(0)) == pytest.approx(3e-5) and float(no_warmup(50)) == pytest.approx(1.5e-5)
    config = schedule.get_config()
    assert WarmupPolynomialDecay(**config).get_config() == config


def test_clip_by_global_norm_is_tfs():
    import tensorflow as tf

    tensors = [np.full((3,), 2.0, np.float32), np.full((2, 2), -1.0, np.float32)]
    ours, norm = clip_by_global_norm(tensors, 1.0)
    theirs, their_norm = tf.clip_by_global_norm(tensors, 1.0)
    assert float(norm) == pytest.approx(float(their_norm)) == pytest.approx(math.sqrt(16.0))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-7)


def test_adam_weight_decay_against_numpy():
    params, grads = _problem()
    lr = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=2)
    got = _keras_run(AdamWeightDecay(learning_rate=lr), params, grads)
    numpy = ref.AdamWeightDecay({k: v.astype(np.float64) for k, v in params.items()})
    want = {k: v.astype(np.float64) for k, v in params.items()}
    for step, step_grads in enumerate(grads):
        want = numpy.apply(
            want,
            {k: g.astype(np.float64) for k, g in step_grads.items()},
            ref.learning_rate(step, 1e-2, 10, 2),
        )
    for name in NAMES:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6, err_msg=name)
    # The exclusions matter here: an un-decayed kernel would be off by lr * 0.01 * |w| ~ 1e-4.
    optimizer = AdamWeightDecay()
    assert [optimizer.uses_weight_decay(n) for n in NAMES] == [True, False, False, True]


def test_lamb_against_numpy():
    params, grads = _problem(1)
    schedule = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=2)
    got = _keras_run(Lamb(learning_rate=schedule), params, grads)
    want = numpy_lamb(params, grads)
    for name in NAMES:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6, err_msg=name)
    # The trust ratio matters: plain Adam with decay moves the kernel differently.
    adam = _keras_run(AdamWeightDecay(learning_rate=schedule), params, grads)
    assert np.abs(adam["dense/kernel"] - want["dense/kernel"]).max() > 1e-3


@pytest.mark.parametrize("make, numpy_rule", [(AdamWeightDecay, "numpy_adamw"), (Lamb, "numpy_lamb")])
def test_the_xla_compiled_rule_against_numpy(make, numpy_rule):
    """The rule as the training step applies it: one XLA-compiled function per variable shape,
    shared by the variables of that shape (the two 3-vectors here, one decayed and one not)."""
    params, grads = _problem(3)
    optimizer = make(learning_rate=WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=2))
    optimizer.compile_update(_xla_compiled_update)
    got = _keras_run(optimizer, params, grads)
    want = globals()[numpy_rule](params, grads)
    for name in NAMES:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6, err_msg=name)


_JAX_SCRIPT = """
import os, sys
sys.path.insert(0, os.getcwd())
import keras
assert keras.backend.backend() == "jax"
import numpy as np
from bert_tf.training.optimization import AdamWeightDecay, Lamb, WarmupPolynomialDecay
from tests import test_optimization as t
params, grads = t._problem(2)
schedule = WarmupPolynomialDecay(1e-2, num_train_steps=10, num_warmup_steps=2)
worst = 0.0
for make, numpy_rule in ((AdamWeightDecay, t.numpy_adamw), (Lamb, t.numpy_lamb)):
    got = t._keras_run(make(learning_rate=schedule), params, grads)
    want = numpy_rule(params, grads)
    worst = max(worst, max(float(np.abs(got[n] - want[n]).max()) for n in t.NAMES))
print("WORST", worst)
"""


def test_optimizers_on_the_jax_backend():
    # Forked from tool_runs' JAX server: the script imports Keras on JAX, then bert_tf.
    result = tool_runs.run(
        [sys.executable, "-c", _JAX_SCRIPT],
        cwd=REPO,
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        timeout=300,
        server=tool_runs.JAX,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.split("WORST")[-1]) <= 1e-6
