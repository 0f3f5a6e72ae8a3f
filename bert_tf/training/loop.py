"""The outer training and evaluation loops: restore or initialise, run blocks of steps, log, save.

`train` resumes automatically: with a checkpoint in the output directory it continues from it
(weights, optimizer slots, step, input position), else it initialises the weights from
`init_checkpoint` (weights only, as the original: slots and step start afresh). It runs blocks
of up to `iterations_per_loop` steps, each in calls of a `tf.function` that runs N steps (on one
worker N grows to about 5 s of steps once a compiled step is timed; several workers run a block
in one call), logs a progress line after each block and, on one worker, at least every 30 s of
wall time (its rate leaves out the first call, which compiles), writes TensorBoard scalars
after each block, saves every `save_checkpoints_steps` steps
and at the end, and stops with a one-line error naming the step if a loss is not finite (the
last checkpoint on disk stays the latest). Running again with a larger `num_train_steps`
continues to the new total, as the original's Estimator does. SIGTERM or SIGINT ends a
single-worker run after the step in progress, with a checkpoint of that step
(`bert_tf.training.interruption`). With several workers, a lost worker stops the others with a
one-line error naming it (`bert_tf.training.distribution.LostWorker`).
"""

import dataclasses
import logging
import os
import sys
import time

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import load_google_checkpoint
from bert_tf.checkpoints.google import POOLER_SCOPE, open_checkpoint
from bert_tf.checkpoints.pretrained import load_weights
from bert_tf.errors import JobError
from bert_tf.files import atomic_output, open_file
from bert_tf.training.checkpointing import (
    INPUT_POSITION,
    RANDOM_STATE,
    TrainingCheckpoints,
    latest_checkpoint,
)
from bert_tf.training.interruption import StopOnSignal
from bert_tf.training.step import EvalStep, TrainStep

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class LoopConfig:
    """What the loops need besides the task, the optimizer and the input.

    Attributes:
      output_dir: Checkpoints, `eval_results.txt` and TensorBoard events go here.
      num_train_steps: Total optimizer steps (a resumed run continues to this total).
      global_batch_size: Examples per step over all replicas (for examples/s).
      init_checkpoint: Weights to start from when `output_dir` has no checkpoint.
      save_checkpoints_steps: Save every this many steps (and at the end).
      iterations_per_loop: Steps per block (the original's TPU loop): the metrics are logged
        and written after each block.
      keep_checkpoint_max: Checkpoints kept; 0 keeps all.
      gradient_reduction: "global" or "tpu_original" (`bert_tf.training.step`).
      gradient_accumulation_steps: Micro-batches per step.
      jit_compile: XLA for the forward and backward pass.
      num_train_steps_source: What set `num_train_steps`, as the log names it when a resumed
        run has nothing left to train; "" for `--num_train_steps=<num_train_steps>`.
    """

    output_dir: str
    num_train_steps: int
    global_batch_size: int
    init_checkpoint: str = None
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    keep_checkpoint_max: int = 5
    gradient_reduction: str = "global"
    gradient_accumulation_steps: int = 1
    jit_compile: bool = False
    num_train_steps_source: str = ""


class TrainingStopped(JobError):
    """Training stopped on a non-finite loss or gradient."""


def _format_duration(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _ProgressLog:
    """`step 200/1,000 | loss 6.4123 | lr 8.00e-05 | 1,234 examples/s | ETA 0:01:05` on stderr."""

    def __init__(self, total_steps, global_batch_size, stream=None):
        self.total_steps = total_steps
        self.global_batch_size = global_batch_size
        self.stream = stream or sys.stderr

    def line(self, step, loss, learning_rate, examples_per_second):
        remaining = (self.total_steps - step) * self.global_batch_size / max(examples_per_second, 1e-9)
        return (
            f"step {step:,}/{self.total_steps:,} | loss {loss:.4f} | lr {learning_rate:.2e} | "
            f"{examples_per_second:,.0f} examples/s | ETA {_format_duration(remaining)}"
        )

    def show(self, step, loss, optimizer, examples_per_second):
        """Prints the line of `step` (the learning rate of its update, from `optimizer`).

        Returns:
          That learning rate.
        """
        learning_rate = optimizer.learning_rate_of_update(step)
        self.stream.write(self.line(step, loss, learning_rate, examples_per_second) + "\n")
        self.stream.flush()
        return learning_rate


# A progress line at least this often (seconds of wall time) while training.
PROGRESS_SECONDS = 30.0
# About how long one call of the step function runs, once the step's time is known.
CALL_SECONDS = 5.0


class _Pace:
    """How many steps the next call of the step function runs, the rate, and when a progress
    line is due.

    The first call runs one step: it traces and compiles the step, so it is timed apart and
    left out of the rate. The next runs one step too, to time a compiled step; after that a
    call runs about `CALL_SECONDS` of steps, and a progress line is due every `PROGRESS_SECONDS`.
    The rate is that of the block's calls (the compiling one aside, unless it is all there is).

    With several workers (`adaptive` False) every call runs the rest of the block: each worker
    must cut its steps into the same calls (the workers' collective ops are matched call by
    call), and reading the metrics is a collective too, so the progress line comes after each
    block, as the block's metrics do.

    Args:
      adaptive: Whether calls are cut to time and progress is shown within a block.
      clock: The time in seconds (`time.monotonic`; a test's own clock).
    """

    def __init__(self, adaptive=True, clock=time.monotonic):
        self.adaptive = adaptive
        self.clock = clock
        self.first_call = None  # (steps, seconds) of the compiling call
        self.step_seconds = None  # a compiled step's time, from the latest call
        self.block = [0, 0.0]  # this block's steps and seconds, the compiling call aside
        self.last_line = clock()

    def next_call(self, steps_left):
        """The steps of the next call, at most `steps_left`."""
        if not self.adaptive:
            return steps_left
        if self.step_seconds is None:
            return 1
        return max(1, min(steps_left, int(CALL_SECONDS / max(self.step_seconds, 1e-9))))

    def add(self, steps, seconds):
        """Records a call that ran `steps` steps in `seconds`."""
        if self.first_call is None:
            self.first_call = (steps, seconds)
            return
        self.block[0] += steps
        self.block[1] += seconds
        if steps:
            self.step_seconds = seconds / steps

    def rate(self, config):
        """Examples per second of this block's calls after the compiling one (of that call alone
        where it is all there is)."""
        steps, seconds = self.block if self.block[0] else self.first_call
        return steps * config.global_batch_size / max(seconds, 1e-9)

    def progress_due(self):
        """Whether a line is due within the block: `PROGRESS_SECONDS` since the last one, and a
        rate without the compiling call to show."""
        return self.adaptive and self.block[0] > 0 and self.clock() - self.last_line >= PROGRESS_SECONDS

    def block_shown(self, end_of_block):
        """A progress line was shown: the next is due `PROGRESS_SECONDS` from now; at the end of
        a block, the next block's rate starts afresh."""
        self.last_line = self.clock()
        if end_of_block:
            self.block = [0, 0.0]


def initialise_weights(model, init_checkpoint):
    """Loads `init_checkpoint`'s weights into `model` (those it has; heads it lacks stay random):
    a Google checkpoint or a `.keras` file (`bert_tf.checkpoints.pretrained`).

    Raises:
      ValueError: The checkpoint does not fit the config (names the variable and shapes).
    """
    report = load_weights(model, init_checkpoint, strict=False)
    for line in str(report).splitlines():
        logger.info("%s", line)
    return report


# TensorFlow's switch that has oneDNN treat every weight as a constant: the fused matmuls then
# reorder a weight once and keep that copy, so a weight updated afterwards is never read again.
FROZEN_WEIGHTS_SETTING = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def check_weights_can_change():
    """Raises ValueError if the environment tells TensorFlow that weights never change."""
    value = os.environ.get(FROZEN_WEIGHTS_SETTING, "")
    if value.strip().lower() in ("1", "true"):
        raise ValueError(
            f"{FROZEN_WEIGHTS_SETTING}={value} is set: TensorFlow's oneDNN matmuls would keep "
            "computing with the weights of their first call and training would not see its "
            f"updates. Unset {FROZEN_WEIGHTS_SETTING} to train (it is for serving fixed weights)."
        )


def train(task, optimizer, distribution, dataset, config, loss_scale=None, input_description=""):
    """Trains `task.model` to `config.num_train_steps` steps.

    Args:
      task: The task (see `bert_tf.training.step.TrainStep`); its model and `optimizer` were
        built under `distribution.strategy.scope()`.
      optimizer: The Keras optimizer (its `iterations` is the global step).
      distribution: A `bert_tf.training.distribution.Distribution`.
      dataset: This worker's `tf.data.Dataset` of worker batches (repeating).
      config: A `LoopConfig`.
      loss_scale: A `DynamicLossScale` for mixed_float16, else None.
      input_description: What `dataset` reads (files, batch size, seed, ...): a resumed run
        continues the saved input position only if it reads the same.

    Returns:
      The metrics of the last block of steps (`{name: float}`), plus `global_step`.

    Raises:
      TrainingStopped: A loss or gradient was not finite; the message names the step.
      LostWorker: Another worker stopped; the message names it and the checkpoint a rerun
        continues from.
      ValueError: `TF_ONEDNN_ASSUME_FROZEN_WEIGHTS` is set (`check_weights_can_change`).
    """
    check_weights_can_change()
    strategy = distribution.strategy
    iterator = iter(dataset)
    step_fn = TrainStep(
        task,
        optimizer,
        strategy,
        distribution.num_local_replicas,
        config.gradient_reduction,
        config.gradient_accumulation_steps,
        loss_scale=loss_scale,
        jit_compile=config.jit_compile,
    )
    input_state = {INPUT_POSITION: iterator}
    # Keras' `variables` are the weights and the seed generators' states (dropout's).
    weights = {id(weight) for weight in task.model.weights}
    random_state = [variable.value for variable in task.model.variables if id(variable) not in weights]
    if random_state:
        input_state[RANDOM_STATE] = random_state
    if loss_scale is not None:
        input_state.update(loss_scale=loss_scale.scale, loss_scale_good_steps=loss_scale.good_steps)
    checkpoints = TrainingCheckpoints(
        config.output_dir,
        task.model,
        optimizer,
        config.keep_checkpoint_max,
        input_state,
        input_description,
        distribution.worker_index,
        distribution.is_chief,
        distribution.barrier,
    )
    latest = checkpoints.latest()
    if latest:
        step = checkpoints.restore(latest)
    else:
        if config.init_checkpoint:
            initialise_weights(task.model, config.init_checkpoint)
        step = 0
    results = {"global_step": step}
    if step >= config.num_train_steps:
        source = config.num_train_steps_source or f"--num_train_steps={config.num_train_steps}"
        logger.info("Step %d already reaches %s: nothing to train", step, source)
        return results

    writer = tf.summary.create_file_writer(config.output_dir) if distribution.is_chief else None
    progress = _ProgressLog(config.num_train_steps, config.global_batch_size)
    logger.info(
        "Training from step %d to %d, %d examples per step on %d replicas",
        step,
        config.num_train_steps,
        config.global_batch_size,
        distribution.num_replicas,
    )
    saved_step = step
    pace = _Pace(adaptive=distribution.num_workers == 1)

    def continues_from():
        # Read again: a worker past the save's barrier may not see the chief's checkpoint.
        found = checkpoints.latest()
        return f"training continues from {found}" if found else "training starts again from step 0"

    with (
        distribution.lost_worker_stops(continues_from),
        StopOnSignal(step_fn.stop_requested, enabled=distribution.num_workers == 1) as stop,
    ):
        while step < config.num_train_steps and stop.signum is None:
            next_save = (step // config.save_checkpoints_steps + 1) * config.save_checkpoints_steps
            block_end = min(step + config.iterations_per_loop, config.num_train_steps, next_save)
            block_start = step
            # On one worker the block runs in calls of a few seconds each, so that a progress
            # line can be printed every PROGRESS_SECONDS whatever --iterations_per_loop is.
            while step < block_end and stop.signum is None:
                calls_from = step
                start = time.monotonic()
                step_fn.train(iterator, tf.constant(pace.next_call(block_end - step), tf.int32))
                failed = int(step_fn.nonfinite_step.numpy())
                if failed >= 0:
                    saved = latest or "none (no checkpoint was saved yet)"
                    raise TrainingStopped(
                        f"step {failed + 1}: the loss or its gradient is NaN or infinite; training "
                        f"stopped. The latest checkpoint is {saved}; check the input data and the "
                        "learning rate"
                    )
                step = int(optimizer.iterations.numpy())
                pace.add(step - calls_from, time.monotonic() - start)
                if step < block_end and pace.progress_due():  # one worker alone (`_Pace`)
                    progress.show(step, step_fn.metrics.result()["loss"], optimizer, pace.rate(config))
                    pace.block_shown(end_of_block=False)
            if step == block_start:  # a signal came before the block's first step
                continue
            results = dict(step_fn.metrics.result(), global_step=step)
            step_fn.metrics.reset()
            if distribution.is_chief:
                _log_block(writer, progress, results, optimizer, loss_scale, pace.rate(config))
            pace.block_shown(end_of_block=True)
            if step % config.save_checkpoints_steps == 0 or step == config.num_train_steps:
                latest, saved_step = checkpoints.save(step), step
                logger.info("Saved %s", latest)
        if stop.signum is not None and step != saved_step:
            latest, saved_step = checkpoints.save(step), step
            logger.info("Saved %s", latest)
    # Out of the context only now: a second signal during that save did not cut it short.
    stop.exit_if_stopped(
        f"training stopped at step {step}, the latest checkpoint is {latest or 'none'}: run the same "
        "command again to continue from there"
    )
    return results


def _log_block(writer, progress, results, optimizer, loss_scale, examples_per_second):
    """The progress line and the TensorBoard scalars at the end of a block of steps."""
    step = results["global_step"]
    learning_rate = progress.show(step, results["loss"], optimizer, examples_per_second)
    scalars = dict(results, learning_rate=learning_rate, examples_per_second=examples_per_second)
    if loss_scale is not None:
        scalars["loss_scale"] = float(loss_scale.scale.numpy())
    _write_scalars(writer, step, scalars)


def _write_scalars(writer, step, scalars):
    """TensorBoard scalars `{name: value}` (but `global_step`) at `step`, written out now."""
    with writer.as_default(step=step):
        for name, value in scalars.items():
            if name != "global_step":
                tf.summary.scalar(name, value)
    writer.flush()


def restore_for_inference(model, output_dir, init_checkpoint=None):
    """Loads the latest checkpoint in `output_dir` into `model`, else `init_checkpoint`, as the
    original's Estimator evaluates and predicts (its initialisation when `output_dir` has none).

    Args:
      model: The model (its weight paths are Google names).
      output_dir: The training output directory.
      init_checkpoint: Used when `output_dir` has no checkpoint (weights it lacks, e.g. a new
        head, keep their initial values).

    Returns:
      The global step: the `global_step` of the checkpoint in `output_dir` (0 if it has none),
      else 0, as the Estimator's initialisation (which takes only weights from
      `init_checkpoint`).

    Raises:
      ValueError: The checkpoint does not fit the model (names the variable and shapes).
    """
    prefix = latest_checkpoint(output_dir)
    if prefix:
        load_google_checkpoint(model, prefix)
        reader = open_checkpoint(prefix)
        step = int(reader.get_tensor("global_step")) if reader.has_tensor("global_step") else 0
        logger.info("Restored %s (step %d)", prefix, step)
        return step
    if init_checkpoint:
        logger.info("No checkpoint in %s: starting from %s", output_dir, init_checkpoint)
        report = initialise_weights(model, init_checkpoint)
        # A pooler left out is the loader's warning; a missing head is this one.
        missing = [name for name in report.missing if not name.startswith(POOLER_SCOPE)]
        if missing:
            # The original predicts from such heads as silently; its Estimator draws them afresh
            # on every run, as this does.
            logger.warning(
                "No checkpoint in %s, and %s has no %s: %s random, and so are the outputs that "
                "depend on them. Train first (--do_train), or point --init_checkpoint at a "
                "fine-tuned checkpoint.",
                output_dir,
                init_checkpoint,
                ", ".join(missing),
                "it is" if len(missing) == 1 else "they are",
            )
    else:
        logger.warning("No checkpoint in %s and no --init_checkpoint: using random weights", output_dir)
    return 0


def evaluate(
    task,
    distribution,
    dataset,
    output_dir,
    max_eval_steps,
    init_checkpoint=None,
    results_file="eval_results.txt",
):
    """Evaluates the latest checkpoint in `output_dir` (else `init_checkpoint`) on `max_eval_steps`
    batches and writes `eval_results.txt` as the original (`key = value`, keys sorted).

    Args:
      task: The task; its model was built under the strategy's scope.
      distribution: A `Distribution`.
      dataset: This worker's `tf.data.Dataset` of eval batches (at least `max_eval_steps`).
      output_dir: Where the checkpoints are and the results go.
      max_eval_steps: Batches to evaluate.
      init_checkpoint: Used when `output_dir` has no checkpoint, as the original's Estimator
        evaluates its initialisation then.
      results_file: The file in `output_dir` the results are written to; None writes none
        (the caller adds to the results and writes them itself).

    Returns:
      `{"global_step": int, "loss": float, <task metrics>: float}`.

    Raises:
      LostWorker: Another worker stopped (the message names it).
    """
    global_step = restore_for_inference(task.model, output_dir, init_checkpoint)
    eval_step = EvalStep(task, distribution.strategy, distribution.num_local_replicas)
    logger.info("Evaluating %d batches", max_eval_steps)
    with distribution.lost_worker_stops(lambda: "the evaluation starts again"):
        with StopOnSignal(eval_step.stop_requested, enabled=distribution.num_workers == 1) as stop:
            eval_step.evaluate(iter(dataset), tf.constant(max_eval_steps, tf.int32))
        stop.exit_if_stopped("evaluation stopped before its end; no results were written")
        results = dict(eval_step.metrics.result(), global_step=global_step)
    if results_file and distribution.is_chief:
        write_eval_results(results, os.path.join(output_dir, results_file))
        write_eval_scalars(results, output_dir)
    return results


def write_eval_scalars(results, output_dir):
    """Writes `results` (with its `global_step`) as TensorBoard scalars in `<output_dir>/eval`, at
    the global step, as the original's Estimator does."""
    writer = tf.summary.create_file_writer(os.path.join(output_dir, "eval"))
    _write_scalars(writer, results["global_step"], results)
    writer.close()


def write_eval_results(results, path):
    """Writes `key = value` lines, keys sorted, values as the original's estimator prints them."""
    with atomic_output(path) as tmp, open_file(tmp, "w") as writer:
        for key in sorted(results):
            value = results[key]
            value = value if isinstance(value, int) else np.float32(value)
            writer.write(f"{key} = {value!s}\n")  # str(): a float32 prints its shortest digits
            logger.info("  %s = %s", key, value)
    logger.info("Wrote %s", path)
