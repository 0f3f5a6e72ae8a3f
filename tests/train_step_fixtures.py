"""The original's three training steps (google_tiny_train) through bert_tf's `TrainStep`, for the
step and optimizer tests.

From google_tiny's weights with the dropout-0 config, `TrainStep` with
`create_optimizer("adamw", 1e-4, num_train_steps=10, num_warmup_steps=2)` takes three steps on
`batch.npz`; the original's run of the same steps wrote `model.ckpt-3` and `train_log.json`.

Tracing and compiling a step costs several seconds of CPU: the run with the default step is made
once per process (`default_three_steps`) and shared by the tests that check it. They only read
it: its model, optimizer and records must not be changed.
"""

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


def three_steps(dtype=None, loss_scale=None, watch=(), **step_args):
    """Three steps on the fixture's batch from google_tiny.

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
