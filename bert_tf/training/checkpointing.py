"""Training checkpoints in the original's layout, with the input position kept beside them.

`<output_dir>/model.ckpt-<step>` is what the original's Estimator writes: every weight under its
Google name, `<weight>/adam_m` and `<weight>/adam_v` for every trainable weight, and int64
`global_step`, with the `checkpoint` state file naming the latest. The original's code, and
`tf.train.load_checkpoint`, read it as they read their own.

Beside it, `<output_dir>/input_state/model.ckpt-<step>.worker-<k>` holds what exact resumption
needs beyond the original's state, per worker: the tf.data iterator position (shuffle buffers
included), the state of dropout's seed generators and the dynamic loss scale.

A checkpoint becomes the latest only when the state file names it, and the state file is
rewritten (atomically) after every file of the checkpoint is in place: a process killed at any
moment leaves `tf.train.latest_checkpoint` naming a complete checkpoint (or none). Every worker's
input state is written before the chief writes the model checkpoint, so a `model.ckpt-<step>.index`
(which `latest_checkpoint` falls back on without a state file) has every worker's state beside it.
"""

import json
import logging
import os
import re

import tensorflow as tf

from bert_tf import errors
from bert_tf.checkpoints import load_google_checkpoint
from bert_tf.checkpoints.google import open_checkpoint, write_checkpoint, write_checkpoint_state
from bert_tf.files import (
    absolute,
    exists,
    glob,
    makedirs,
    remove,
    rename,
    temporary_path,
)

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "model.ckpt"
INPUT_STATE_DIR = "input_state"
_DESCRIPTION = "input_description"
# The keys of the input position and of the random state (dropout's seed generators) in
# `TrainingCheckpoints`' `input_state`: restored only for the same input (and seed), so that a
# resumed run draws the batches and the dropout masks an uninterrupted run would; the other
# parts (the loss scale) whatever the input.
INPUT_POSITION = "iterator"
RANDOM_STATE = "random_state"
_SAME_INPUT_ONLY = (INPUT_POSITION, RANDOM_STATE)


def checkpoint_step(prefix):
    """The step in a `.../model.ckpt-<step>` prefix, or None (also for a temporary's
    `model.ckpt-<step>.tmp-<pid>`, whose number is a process id)."""
    match = re.search(r"(?<!\.tmp)-(\d+)$", prefix)
    return int(match.group(1)) if match else None


def latest_checkpoint(directory):
    """The latest checkpoint in `directory`: the one its `checkpoint` state file names; where
    that file is missing or names a checkpoint that is gone, the complete `model.ckpt-<step>`
    of the highest step, with a warning (training would otherwise start again from step 0 and
    write over the checkpoints there).

    Returns:
      The checkpoint prefix, or None if there is none.
    """
    # The state file read here, not by `tf.train.latest_checkpoint`, which logs an error twice
    # when the checkpoint it names is gone.
    state = tf.train.get_checkpoint_state(directory)
    named = state.model_checkpoint_path if state else None
    if named and exists(named + ".index"):
        return named
    indexes = glob(os.path.join(directory, f"{CHECKPOINT_NAME}-*.index"))
    prefixes = (index[: -len(".index")] for index in indexes)
    # `checkpoint_step` is None for a killed save's temporary (`model.ckpt-<step>.tmp-<pid>`).
    complete = [p for p in prefixes if checkpoint_step(p) is not None and glob(p + ".data-*")]
    if not complete:
        return None
    newest = max(complete, key=checkpoint_step)
    logger.warning(
        "%s: its checkpoint state file is missing or names a checkpoint that is gone; using the "
        "newest complete checkpoint, %s",
        directory,
        os.path.basename(newest),
    )
    return newest


def _same_input(saved, current):
    """Whether two input descriptions (JSON objects) describe the same input: a description
    written with relative paths (by older versions of bert_tf) names the files as seen from here."""
    try:
        saved, current = json.loads(saved), json.loads(current)
    except ValueError:
        return saved == current
    if not isinstance(saved, dict) or not isinstance(current, dict):
        return saved == current
    for description in (saved, current):
        if isinstance(description.get("input_files"), list):
            description["input_files"] = [absolute(path) for path in description["input_files"]]
        if isinstance(description.get("train_file"), str):
            description["train_file"] = absolute(description["train_file"])
    return saved == current


class TrainingCheckpoints:
    """Saves and restores the training state of a model and its optimizer in `directory`.

    Args:
      directory: The output directory.
      model: The Keras model (weights under their Google names).
      optimizer: An optimizer with `slots(variable)` and `slot_names` (e.g. `AdamWeightDecay`),
        built on `model.trainable_variables`.
      keep_checkpoint_max: Checkpoints kept (older ones deleted); 0 keeps all.
      input_state: Trackables saved per worker beside each checkpoint (e.g.
        `{INPUT_POSITION: iterator}`); restored when present.
      input_description: What the input is (its files, batch size, seed, ...), saved with the
        input state: a later run restores the input position only if its description is the
        same (an iterator cannot take the position of another pipeline).
      worker_index: This worker's index (its input state file).
      is_chief: Whether this worker writes the model checkpoint and the state file.
      barrier: Called between the per-worker input states and the chief's model checkpoint,
        so that every worker's input state exists before the checkpoint does, and again once the
        checkpoint is named latest, so that no worker returns before.
    """

    def __init__(
        self,
        directory,
        model,
        optimizer,
        keep_checkpoint_max=5,
        input_state=None,
        input_description="",
        worker_index=0,
        is_chief=True,
        barrier=None,
    ):
        self.directory = directory
        self.model = model
        self.optimizer = optimizer
        self.keep_checkpoint_max = keep_checkpoint_max
        self.input_state = input_state or {}
        self.input_description = input_description
        self.worker_index = worker_index
        self.is_chief = is_chief
        self.barrier = barrier or (lambda: None)

    def latest(self):
        """The prefix of the latest checkpoint in the directory (`latest_checkpoint`), or None."""
        return latest_checkpoint(self.directory)

    def _input_state_prefix(self, prefix):
        name = f"{os.path.basename(prefix)}.worker-{self.worker_index}"
        return os.path.join(self.directory, INPUT_STATE_DIR, name)

    def _named_tensors(self, step):
        tensors = [(w.path, w.value) for w in self.model.weights]
        for variable in self.model.trainable_variables:
            for slot_name, slot in zip(
                self.optimizer.slot_names, self.optimizer.slots(variable), strict=True
            ):
                tensors.append((f"{variable.path}/{slot_name}", slot.value))
        tensors.append(("global_step", tf.constant(step, tf.int64)))
        return tensors

    def save(self, step):
        """Writes this worker's input state, then (chief) `model.ckpt-<step>` once every worker's
        is written, and names it latest.

        Returns:
          The checkpoint prefix.
        """
        prefix = os.path.join(self.directory, f"{CHECKPOINT_NAME}-{step}")
        if self.input_state:
            state_prefix = self._input_state_prefix(prefix)
            makedirs(os.path.dirname(state_prefix))
            tmp = temporary_path(state_prefix)
            description = tf.Variable(self.input_description, name=_DESCRIPTION)
            written = tf.train.Checkpoint(**self.input_state, **{_DESCRIPTION: description}).write(tmp)
            # Data files first, the index last: the state exists once its index does.
            for path in sorted(glob(written + ".*"), key=lambda p: p.endswith(".index")):
                rename(path, state_prefix + path[len(written) :])
        self.barrier()
        if self.is_chief:
            write_checkpoint(prefix, self._named_tensors(step))
            self._update_state_file(prefix)
        self.barrier()  # no worker goes on (to an evaluation, say) before the checkpoint is the latest
        return prefix

    def _update_state_file(self, prefix):
        state = tf.train.get_checkpoint_state(self.directory)
        names = [os.path.basename(p) for p in (state.all_model_checkpoint_paths if state else [])]
        name = os.path.basename(prefix)
        names = [n for n in names if n != name] + [name]
        kept = names[-self.keep_checkpoint_max :] if self.keep_checkpoint_max else names
        write_checkpoint_state(self.directory, kept)
        for old in names:
            if old not in kept:
                for path in glob(os.path.join(self.directory, old + ".*")) + glob(
                    os.path.join(self.directory, INPUT_STATE_DIR, old + ".worker-*")
                ):
                    remove(path)

    def restore(self, prefix):
        """Restores weights, optimizer slots, the step and (if saved) this worker's input state.

        A checkpoint without slots (a released one copied into the output directory) starts
        the slots at zero; one without input state (the original's own) starts the input afresh.

        Returns:
          The restored step.

        Raises:
          ValueError: The checkpoint does not fit the model (names the variable and shapes), or
            it has weights the model lacks: a checkpoint written by another model (another
            `--bert_config_file`), whose extra weights the next checkpoints would leave out.
        """
        load_google_checkpoint(self.model, prefix, allow_unused=False)
        reader = open_checkpoint(prefix)
        names = reader.get_variable_to_shape_map()
        missing = []
        for variable in self.model.trainable_variables:
            for slot_name, slot in zip(
                self.optimizer.slot_names, self.optimizer.slots(variable), strict=True
            ):
                name = f"{variable.path}/{slot_name}"
                if name in names:
                    slot.assign(reader.get_tensor(name))
                else:
                    slot.assign(tf.zeros_like(slot))
                    missing.append(name)
        if missing:
            logger.warning(
                "%s has no optimizer slots for %d variables; they start at zero", prefix, len(missing)
            )
        step = (
            int(reader.get_tensor("global_step")) if "global_step" in names else checkpoint_step(prefix) or 0
        )
        self.optimizer.iterations.assign(step)
        logger.info("Resuming from %s (step %d)", prefix, step)
        if self.input_state:
            self._restore_input_state(prefix)
        return step

    def _restore_input_state(self, prefix):
        """Restores this worker's state saved beside checkpoint `prefix`: the input position if
        it was saved for the same input, the other parts (the loss scale) in any case; what is
        not restored (a state that cannot be read: nothing) starts afresh, as the log says."""
        state_prefix = self._input_state_prefix(prefix)
        if not exists(state_prefix + ".index"):
            logger.info("%s has no input state: the input starts afresh", prefix)
            return
        try:
            state = open_checkpoint(state_prefix)
            description = state.get_tensor(f"{_DESCRIPTION}/.ATTRIBUTES/VARIABLE_VALUE").decode()
            # A state saved without some of today's parts (the loss scale of a run switched to
            # mixed_float16) restores the rest; those parts start afresh.
            saved_parts = {name.split("/")[0] for name in state.get_variable_to_shape_map()}
            restored = {key: value for key, value in self.input_state.items() if key in saved_parts}
            same_input = _same_input(description, self.input_description)
            if not same_input:
                for key in _SAME_INPUT_ONLY:
                    restored.pop(key, None)
                logger.warning(
                    "The input differs from the one %s was saved with (%s, now %s): the input starts afresh",
                    prefix,
                    description,
                    self.input_description,
                )
            if afresh := sorted(self.input_state.keys() - saved_parts):
                logger.info("%s has no saved %s: started afresh", prefix, ", ".join(afresh))
            random_state = restored.pop(RANDOM_STATE, None)
            # expect_partial: the saved description is read above, not restored into an object.
            checkpoint = tf.train.Checkpoint(**restored)
            checkpoint.read(state_prefix).assert_existing_objects_matched().expect_partial()
        except (tf.errors.OpError, IndexError, ValueError) as e:  # a truncated or corrupt file
            logger.warning("%s: cannot read it (%s): the input starts afresh", state_prefix, errors.reason(e))
            return
        if same_input and INPUT_POSITION in restored:
            logger.info("Resumed the input where %s left it", prefix)
        if random_state is not None:
            # On its own: a model with other dropout layers (another config) has other seeds.
            try:
                checkpoint = tf.train.Checkpoint(**{RANDOM_STATE: random_state})
                checkpoint.read(state_prefix).assert_existing_objects_matched().expect_partial()
            except (tf.errors.OpError, ValueError, AssertionError) as e:
                logger.warning(
                    "%s: dropout's random state does not fit this model (%s): drawn afresh",
                    state_prefix,
                    errors.reason(e),
                )
