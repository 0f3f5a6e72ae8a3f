"""The original's three training steps (google_tiny_train) through bert_tf's `TrainStep`, for the
step and optimizer tests.

From google_tiny's weights with the dropout-0 config, `TrainStep` with
`create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)` takes three steps on
`batch.npz`; the original's run of the same steps wrote `model.ckpt-3` and `train_log.json`.

Tracing and compiling a step costs several seconds of CPU: the run with the default step is made
once per process (`default_three_steps`) and shared by the tests that check it. They only read
it: its model, optimizer and records must not be changed.

A `mixed_float16` run's step is optimised without Grappler's remapper (`remapper_off`): on a CPU
with TensorFlow's oneDNN, the remapper fuses each float16 dense layer's matmul and bias into
oneDNN's reference kernel, about 0.5 s for one 512 x 128 x 128 product (BUILD_NOTES.md, "Mixed
precision"), where the same product and bias as two kernels take milliseconds. The step computes
the same thing either way, as it does with oneDNN off, which fuses nothing in float16.
"""

import contextlib
import functools
import os

import numpy as np
import tensorflow as tf

from bert_tf import BertConfig, load_google_checkpoint
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.training.optimization import create_optimizer
from bert_tf.training.step import TrainStep
from tests import model_fixtures as mf

TRAIN = mf.GOOGLE_TINY_TRAIN
NSP_WEIGHTS = "cls/seq_relationship/output_weights"


def batch():
    return dict(np.load(os.path.join(TRAIN, "batch.npz")))


@contextlib.contextmanager
def remapper_off():
    """Grappler's remapper off for the functions first run in the block (the option is the
    process's; its setting before the block is restored after it)."""
    before = tf.config.optimizer.get_experimental_options().get("remapping")
    tf.config.optimizer.set_experimental_options({"remapping": False})
    try:
        yield
    finally:  # None: unset, TensorFlow's default
        tf.config.optimizer.set_experimental_options({"remapping": before})


def three_steps(dtype=None, loss_scale=None, watch=(), **step_args):
    """Three steps on the fixture's batch from google_tiny (under `mixed_float16`, with the
    remapper off: module doc).

    Args:
      dtype: The model's dtype policy (None: float32).
      loss_scale: A `DynamicLossScale`, or None.
      watch: Paths of trainable variables whose optimizer slots are recorded after each step.
      **step_args: `TrainStep`'s other arguments.

    Returns:
      `(task, optimizer, records)`: a record per step, its metrics, the learning rate the
      optimizer held before it (`learning_rate`) and, under `slots`, `{path: [slot values]}` of
      the watched variables after it.
    """
    config = BertConfig.from_json_file(os.path.join(TRAIN, "bert_config.json"))
    task = PretrainingTask(config, dtype=dtype)
    load_google_checkpoint(task.model, mf.GOOGLE_TINY_CKPT)
    optimizer = create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)
    step = TrainStep(task, optimizer, tf.distribute.get_strategy(), loss_scale=loss_scale, **step_args)
    iterator = iter(tf.data.Dataset.from_tensors(batch()).repeat())
    watched = [v for v in task.model.trainable_variables if v.path in watch]
    records = []
    with remapper_off() if dtype == "mixed_float16" else contextlib.nullcontext():
        for _ in range(3):
            learning_rate = float(optimizer.learning_rate.numpy())
            step.train(iterator, tf.constant(1))
            slots = {v.path: [slot.numpy() for slot in optimizer.slots(v)] for v in watched}
            records.append(dict(step.metrics.result(), learning_rate=learning_rate, slots=slots))
            step.metrics.reset()
    return task, optimizer, records


@functools.cache
def default_three_steps():
    """`three_steps()` of the default step (the NSP weights' slots watched), run once per process
    and shared: read it, never change it."""
    return three_steps(watch=(NSP_WEIGHTS,))
