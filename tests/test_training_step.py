"""The train step: gradient accumulation, XLA and mixed precision against the original's three
steps (google_tiny_train); dynamic loss scaling; checkpoints that an interrupted save cannot
corrupt."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig
from bert_tf.modeling.activations import get_activation
from bert_tf.modeling.transformer_layer import Intermediate
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.training import checkpointing
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.step import DynamicLossScale
from tests import model_fixtures as mf
from tests.conftest import FIXTURES_DIR
from tests.train_step_fixtures import default_three_steps, three_steps

TRAIN = os.path.join(FIXTURES_DIR, "google_tiny_train")


def _three_steps(dtype=None, loss_scale=None, log=None, **step_args):
    """Three steps on the fixture's batch from google_tiny (`tests.train_step_fixtures`): (task,
    optimizer, the losses); each step's metrics are appended to `log` if given."""
    task, optimizer, records = three_steps(dtype, loss_scale, **step_args)
    return task, optimizer, _losses(records, log)


def _losses(records, log=None):
    if log is not None:
        log.extend(records)
    return [record["loss"] for record in records]


@pytest.fixture(scope="module")
def default_steps(fixtures_dir):
    """The default step's three steps (compile_elementwise=True), shared: (task, optimizer,
    records). The tests only read them."""
    return default_three_steps()


def _max_weight_difference(model):
    reader = tf.train.load_checkpoint(os.path.join(TRAIN, "model.ckpt-3"))
    return max(float(np.abs(w.numpy() - reader.get_tensor(w.path)).max()) for w in model.weights)


@pytest.mark.parametrize("micro_batches", [2, 4])
def test_gradient_accumulation_gives_the_large_batch_update(fixtures_dir, micro_batches):
    """The original took these steps on batches of 4; 2 or 4 micro-batches reach its checkpoint."""
    task, _, losses = _three_steps(gradient_accumulation_steps=micro_batches)
    assert _max_weight_difference(task.model) <= 1e-6
    assert losses == pytest.approx([11.098242, 11.098242, 10.987811], abs=1e-5)


def test_xla_step_reaches_the_originals_checkpoint(fixtures_dir):
    log = []
    task, _, losses = _three_steps(jit_compile=True, log=log)
    assert _max_weight_difference(task.model) <= 1e-6
    assert all(0.0 < metrics["grad_norm"] < float("inf") for metrics in log)
    assert losses == pytest.approx([11.098242, 11.098242, 10.987811], abs=1e-5)


@pytest.mark.parametrize("compile_elementwise", [True, False])
def test_step_reaches_the_originals_checkpoint_with_and_without_xla_elementwise_ops(
    request, compile_elementwise
):
    """By default the step runs GELU's training form (and the update) XLA-compiled; either way
    it takes the original's three steps."""
    if compile_elementwise:  # the default step's run, shared
        task, _, records = request.getfixturevalue("default_steps")
        losses = _losses(records)
    else:
        task, _, losses = _three_steps(compile_elementwise=False)
    assert _max_weight_difference(task.model) <= 1e-6
    assert losses == pytest.approx([11.098242, 11.098242, 10.987811], abs=1e-5)
    intermediates = [layer for layer in task.model._flatten_layers() if isinstance(layer, Intermediate)]
    plain = get_activation(task.config.hidden_act, training=True)
    assert len(intermediates) == task.config.num_hidden_layers
    assert all((layer.training_activation is not plain) == compile_elementwise for layer in intermediates)


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_steps_stay_close_to_float32(fixtures_dir, dtype):
    loss_scale = DynamicLossScale() if dtype == "mixed_float16" else None
    task, optimizer, losses = _three_steps(dtype=dtype, loss_scale=loss_scale)
    assert all(w.dtype == "float32" for w in task.model.weights)
    assert int(optimizer.iterations.numpy()) == 3
    tolerance = 0.05 if dtype == "mixed_bfloat16" else 0.01
    assert losses == pytest.approx([11.098242, 11.098242, 10.987811], abs=tolerance)
    # The updates happened (a skipped step would leave the weights of step 2's lr of 0 in place).
    assert _max_weight_difference(task.model) <= 2e-3


def test_dynamic_loss_scale_halves_on_overflow_and_grows_after_finite_steps():
    scale = DynamicLossScale(initial_scale=8.0, growth_interval=3)
    history = []
    for finite in (True, True, False, True, True, True, True):
        scale.update(tf.constant(finite))
        history.append((float(scale.scale.numpy()), int(scale.good_steps.numpy())))
    assert history == [(8.0, 1), (8.0, 2), (4.0, 0), (4.0, 1), (4.0, 2), (8.0, 0), (8.0, 1)]
    floor = DynamicLossScale(initial_scale=1.0)
    floor.update(tf.constant(False))
    assert float(floor.scale.numpy()) == 1.0


def test_overflowing_float16_step_is_skipped_not_applied(fixtures_dir):
    """A loss scale so large that every float16 gradient overflows: the first step changes
    nothing (weights and slots) and halves the scale; training goes on."""
    log = []
    task, optimizer, losses = _three_steps(
        dtype="mixed_float16", loss_scale=DynamicLossScale(initial_scale=2.0**80), log=log
    )
    assert losses[0] == pytest.approx(11.098242, abs=0.01)  # the loss itself is finite
    assert [metrics["grad_norm"] for metrics in log] == [0.0, 0.0, 0.0]  # no update, no norm (not inf)
    assert int(optimizer.iterations.numpy()) == 3
    reader = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    assert all(np.array_equal(w.numpy(), reader.get_tensor(w.path)) for w in task.model.weights)
    assert all(not optimizer.slots(v)[0].numpy().any() for v in task.model.trainable_variables)


def test_an_interrupted_save_leaves_the_previous_checkpoint_latest(default_steps, tmp_path, monkeypatch):
    task, optimizer, _ = default_steps
    saver = checkpointing.TrainingCheckpoints(str(tmp_path), task.model, optimizer)
    saver.save(3)
    monkeypatch.setattr(checkpointing, "write_checkpoint", _crashing_write)
    with pytest.raises(KeyboardInterrupt):
        saver.save(4)
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest.endswith("model.ckpt-3")
    reader = tf.train.load_checkpoint(latest)
    assert int(reader.get_tensor("global_step")) == 3
    assert len(reader.get_variable_to_shape_map()) == 46 * 3 + 1


def _crashing_write(prefix, named_tensors):
    """`write_checkpoint` killed after its data file is in place, before its index."""
    tmp = prefix + ".tmp-test"
    names = [name for name, _ in named_tensors]
    tf.raw_ops.SaveV2(
        prefix=tmp,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[t for _, t in named_tensors],
    )
    os.replace(tmp + ".data-00000-of-00001", prefix + ".data-00000-of-00001")
    raise KeyboardInterrupt("killed before the index")


def test_training_checkpoints_round_trip_on_a_remote_filesystem(default_steps):
    """Save, name latest, keep the newest two and restore (weights, slots, step, input position)
    on TensorFlow's in-memory filesystem, the non-local code path gs:// takes."""
    task, optimizer, _ = default_steps
    directory = "ram://training_checkpoints"
    iterator = iter(tf.data.Dataset.range(100))
    saver = checkpointing.TrainingCheckpoints(directory, task.model, optimizer, 2, {"iterator": iterator})
    for step in (1, 2, 3):
        next(iterator)
        saver.save(step)
    assert tf.train.latest_checkpoint(directory) == f"{directory}/model.ckpt-3"
    assert sorted(tf.io.gfile.listdir(directory)) == [
        "checkpoint",
        "input_state",
        *(f"model.ckpt-{s}.{ext}" for s in (2, 3) for ext in ("data-00000-of-00001", "index")),
    ]

    # A new model and optimizer: other weights, zero slots, step 0.
    fresh = PretrainingTask(BertConfig.from_json_file(os.path.join(TRAIN, "bert_config.json")))
    fresh_optimizer = create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)
    fresh_optimizer.build(fresh.model.trainable_variables)
    fresh_iterator = iter(tf.data.Dataset.range(100))
    restorer = checkpointing.TrainingCheckpoints(
        directory, fresh.model, fresh_optimizer, 2, {"iterator": fresh_iterator}
    )
    assert restorer.restore(tf.train.latest_checkpoint(directory)) == 3
    assert int(next(fresh_iterator)) == 3
    for a, b in zip(task.model.trainable_variables, fresh.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        for slot_a, slot_b in zip(optimizer.slots(a), fresh_optimizer.slots(b), strict=True):
            np.testing.assert_array_equal(slot_a.numpy(), slot_b.numpy())


def test_a_changed_input_starts_afresh_with_a_warning(tmp_path, caplog):
    """Weights, slots and step resume; the input position only with the same input."""
    config = BertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    task = PretrainingTask(config)
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)
    optimizer.build(task.model.trainable_variables)

    def resume(description):
        iterator = iter(tf.data.Dataset.range(10))
        checkpoints = checkpointing.TrainingCheckpoints(
            str(tmp_path),
            task.model,
            optimizer,
            input_state={"iterator": iterator},
            input_description=description,
        )
        assert checkpoints.restore(str(tmp_path / "model.ckpt-5")) == 5
        return int(next(iterator))

    iterator = iter(tf.data.Dataset.range(10))
    next(iterator)
    checkpointing.TrainingCheckpoints(
        str(tmp_path), task.model, optimizer, input_state={"iterator": iterator}, input_description="files a"
    ).save(5)
    assert resume("files a") == 1
    assert resume("files b") == 0
    assert "The input differs from the one" in caplog.text and "files a, now files b" in caplog.text
