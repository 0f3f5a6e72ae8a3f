"""Google's name-based (TF1) checkpoints in and out, by identity of names.

A bert_tf model's `variable.path` is the variable's name in a Google checkpoint, so loading is
`variable.assign(reader.get_tensor(variable.path))` for every weight and saving writes each
weight under its path: no rename table. Paths may be local or not (`gs://...`): the files go
through `bert_tf.files` and TensorFlow's filesystems. `write_checkpoint` and `open_checkpoint`
are the lower level: any list of named tensors out, any name-based checkpoint in.
"""

import collections
import dataclasses
import logging
import os
import re

import numpy as np
import tensorflow as tf

from bert_tf import errors, files

logger = logging.getLogger(__name__)

# What follows a checkpoint's prefix in the names of its files.
_DATA_OR_INDEX_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")

# The pooler's variables: the one part of the encoder a checkpoint may lack (Hugging Face builds its
# token classification, QA and masked LM models without it).
POOLER_SCOPE = "bert/pooler/"


@dataclasses.dataclass
class LoadReport:
    """What `load_google_checkpoint` did.

    Attributes:
      checkpoint: The checkpoint prefix that was read.
      loaded: Names of the model variables assigned, in the model's order.
      unused: Checkpoint variables the model does not have (heads it lacks, optimizer
        slots, `global_step`), sorted.
      missing: Model variables the checkpoint lacks (a task's head with `strict=False`, or the
        pooler); they keep their initial values.
    """

    checkpoint: str
    loaded: list
    unused: list
    missing: list = dataclasses.field(default_factory=list)

    @property
    def unused_optimizer_state(self):
        """The unused names that are optimizer slots, named below the variable they belong to
        (the original's `<weight>/adam_m` and `/adam_v`, TF1 Adam's `/Adam` and `/Adam_1`, ...),
        or the step counter."""
        names = set(self.loaded) | set(self.unused)
        return [
            name
            for name in self.unused
            if name == "global_step" or ("/" in name and name.rsplit("/", 1)[0] in names)
        ]

    @property
    def unused_weights(self):
        """The unused names that are weights (e.g. heads the model does not have)."""
        state = set(self.unused_optimizer_state)
        return [name for name in self.unused if name not in state]

    def __str__(self):
        lines = [f"Loaded {len(self.loaded)} variables from {self.checkpoint}."]
        if self.missing:
            lines.append(
                f"{len(self.missing)} model variables were not in the checkpoint and keep "
                "their initial values: " + ", ".join(self.missing)
            )
        if self.unused_weights:
            lines.append(
                f"{len(self.unused_weights)} checkpoint weights are not used by the model: "
                + ", ".join(self.unused_weights)
            )
        if self.unused_optimizer_state:
            lines.append(f"{len(self.unused_optimizer_state)} optimizer/step entries were skipped.")
        return "\n".join(lines)


def resolve_checkpoint_prefix(path):
    """Turns a checkpoint prefix or a directory holding one into the prefix.

    Args:
      path: `.../bert_model.ckpt` (the prefix; `.index` and `.data-*` files beside it), the
        `.index` file or a `.data-00000-of-00001` file itself, or a directory with exactly one
        checkpoint (or a `checkpoint` state file naming the latest); local or not (`gs://...`).

    Returns:
      The prefix, to pass to `open_checkpoint`.

    Raises:
      ValueError: Nothing there is a checkpoint; the message says what was looked for.
    """
    path = _DATA_OR_INDEX_SUFFIX.sub("", path)
    # The index first: on some filesystems (ram://) any prefix of a file counts as a directory.
    if not files.exists(path + ".index") and files.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        prefixes = [index[: -len(".index")] for index in files.glob(os.path.join(path, "*.index"))]
        # A write's temporary (`files.temporary_path`) left by a killed run is no checkpoint.
        prefixes = [prefix for prefix in prefixes if not files.is_temporary(prefix)]
        if len(prefixes) == 1:
            return prefixes[0]
        if not prefixes:
            raise ValueError(f"{path}: directory has no checkpoint (no *.index file)")
        raise ValueError(
            f"{path}: directory has {len(prefixes)} checkpoints "
            f"({', '.join(os.path.basename(p) for p in prefixes)}); pass the prefix of one"
        )
    if not files.exists(path + ".index"):
        raise ValueError(f"{path}: no checkpoint here ({path}.index does not exist)")
    if not files.glob(path + ".data-*"):
        raise ValueError(f"{path}: checkpoint has an index but no {os.path.basename(path)}.data-* file")
    return path


def open_checkpoint(prefix):
    """Opens a name-based checkpoint for reading, local or not.

    `tf.compat.v1.train.NewCheckpointReader` on the prefix itself, not `tf.train.load_checkpoint`,
    which first asks whether the prefix is a directory (on ram:// any prefix of a file is).

    Args:
      prefix: The checkpoint prefix, e.g. `.../bert_model.ckpt` (see `resolve_checkpoint_prefix`).

    Returns:
      A `CheckpointReader` (`get_tensor`, `get_variable_to_shape_map`, ...).

    Raises:
      ValueError: The checkpoint cannot be read; the message names the prefix.
    """
    try:
        return tf.compat.v1.train.NewCheckpointReader(prefix)
    except (tf.errors.OpError, ValueError) as e:
        message = (getattr(e, "message", str(e)).strip().splitlines() or ["unreadable"])[0]
        raise ValueError(f"{prefix}: cannot read checkpoint ({message})") from None


def check_complete(prefix, reader=None):
    """Raises unless the checkpoint's data files hold every byte its index lists: a copy cut
    short (a download stopped, a disk filled) opens, and fails only when a missing tensor is
    read, after whatever ran before it.

    Args:
      prefix: The checkpoint prefix.
      reader: Its `open_checkpoint` reader, if open already.

    Raises:
      ValueError: The data files are shorter than the index's tensors; the message names them.
    """
    reader = reader or open_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    # Numeric tensors are stored as their raw bytes, one after the other (string tensors,
    # which BERT's checkpoints have none of, are left out of the sum).
    needed = sum(
        int(np.prod(shapes[name], dtype=np.int64)) * dtypes[name].size
        for name in shapes
        if dtypes[name] != tf.string
    )
    data_files = [
        path for path in files.glob(prefix + ".data-*") if _DATA_OR_INDEX_SUFFIX.search(path[len(prefix) :])
    ]
    held = sum(files.size(path) for path in data_files)
    if held < needed:
        raise ValueError(
            f"{prefix}: checkpoint is truncated: its data files hold {held:,} bytes, its index lists "
            f"{needed:,} ({', '.join(os.path.basename(path) for path in sorted(data_files))}); "
            "copy or download it again"
        )


def _left_out(side, other, names):
    """The problem of `bert/` weights of one side that the other lacks."""
    listed = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (
        f"{len(names)} of the {side}'s encoder weights are not in the {other} ({listed}); is the "
        "bert_config.json that of this checkpoint (num_hidden_layers)?"
    )


def load_google_checkpoint(model, path, strict=True, allow_unused=True):
    """Loads a Google (TF1 name-based) checkpoint into a bert_tf model.

    All checks run before anything is assigned: if one variable cannot be loaded, the model
    is left as it was.

    Args:
      model: A `BertModel`, `BertPretrainer` or any model whose weight paths are Google names.
      path: The checkpoint prefix (e.g. `.../bert_model.ckpt`) or a directory holding one.
      strict: If True, every model weight must be in the checkpoint. If False, missing weights
        outside `bert/` (a task's head) keep their initial values and are listed in the
        report's `missing`.
      allow_unused: If False, every weight of the checkpoint must be in the model (optimizer
        slots and `global_step` aside): a training run resuming its own checkpoint, whose
        later checkpoints would leave the others out. If True, only weights outside `bert/`
        (heads the model lacks) may be left over.

    Either way the model and the checkpoint hold the same `bert/` weights: one left out on
    either side means a `bert_config.json` of another depth (or another model) than the
    checkpoint's, which no setting loads into a working encoder. The one exception is the
    pooler: a checkpoint without any `bert/pooler/*` (a Hugging Face model built without it)
    loads whatever `strict` says; the pooler keeps its initial values, listed in `missing`, and
    a warning says the pooled output is untrained.

    Returns:
      A `LoadReport`.

    Raises:
      ValueError: The path holds no readable checkpoint, the checkpoint is not a BERT one, a
        weight is missing (strict) or left over (not `allow_unused`), or a shape differs; the
        message names the variables and both shapes.
    """
    prefix = resolve_checkpoint_prefix(path)
    reader = open_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    return assign_named_values(model, prefix, shapes, reader.get_tensor, strict, allow_unused)


def assign_named_values(model, source, shapes, read, strict=True, allow_unused=True):
    """Assigns to each weight of `model` the value named by its path: the checks and the
    assignment of `load_google_checkpoint`, for any source of named values.

    Args:
      model: The model (its weight paths are Google names).
      source: What the values come from, as messages and the report name it (a prefix, a file).
      shapes: `{name: shape}` of every value the source holds.
      read: `read(name)` returns the value named `name`.
      strict, allow_unused: As `load_google_checkpoint`'s.

    Returns:
      A `LoadReport`.

    Raises:
      ValueError: As `load_google_checkpoint`; nothing is assigned then.
    """
    weights = model.weights

    names = [weight.path for weight in weights]
    present = [name for name in names if name in shapes]
    if not present:
        sample = ", ".join(sorted(shapes)[:3]) or "no variables"
        raise ValueError(
            f"{source}: not a BERT checkpoint for this model: none of its {len(names)} "
            f"variables (e.g. {names[0]}) is in it; it holds {sample}"
        )
    missing = [name for name in names if name not in shapes]
    # The pooler alone may be left out (`load_google_checkpoint`), only as a whole.
    pooler = [name for name in names if name.startswith(POOLER_SCOPE)]
    untrained_pooler = bool(pooler) and all(name in missing for name in pooler)
    required = [name for name in missing if not (untrained_pooler and name.startswith(POOLER_SCOPE))]
    mismatched = [
        (weight.path, list(shapes[weight.path]), list(weight.shape))
        for weight in weights
        if weight.path in shapes and list(shapes[weight.path]) != list(weight.shape)
    ]
    problems = []
    if mismatched:
        problems.append(
            "shape mismatch for "
            + "; ".join(f"{name}: checkpoint {ck}, model {md}" for name, ck, md in mismatched[:5])
            + (f" (and {len(mismatched) - 5} more)" if len(mismatched) > 5 else "")
            + ". Does the bert_config.json match this checkpoint?"
        )
    if required and strict:
        problems.append(
            f"{len(required)} model variables are not in the checkpoint: "
            + ", ".join(required[:5])
            + (" ..." if len(required) > 5 else "")
        )
    used = set(present)
    report = LoadReport(
        checkpoint=source,
        loaded=present,
        unused=sorted(name for name in shapes if name not in used),
        missing=missing,
    )
    unused = report.unused_weights
    # The encoder is all or nothing (see the docstring). Under `strict` every missing weight is
    # named above, and without `allow_unused` every left-over one below.
    model_only = [name for name in required if name.startswith("bert/")]
    checkpoint_only = [name for name in unused if name.startswith("bert/")]
    if model_only and not strict:
        problems.append(_left_out("model", "checkpoint", model_only))
    if checkpoint_only and allow_unused:
        problems.append(_left_out("checkpoint", "model", checkpoint_only))
    if unused and not allow_unused:
        problems.append(
            f"{len(unused)} of its weights are not in the model ({', '.join(unused[:3])}"
            + (", ..." if len(unused) > 3 else "")
            + "); was it written for another bert_config.json?"
        )
    if problems:
        raise ValueError(f"{source}: " + " ".join(problems) + " Nothing was loaded.")

    def value_of(weight):
        try:
            return np.asarray(read(weight.path), dtype=weight.dtype)
        except (tf.errors.OpError, IndexError, ValueError) as e:
            raise ValueError(
                f"{source}: cannot read {weight.path} ({errors.reason(e)}); "
                "the data file is truncated or corrupt. Nothing was loaded."
            ) from None

    # Every value is read before the first is assigned, and read again to assign it, so that
    # the checkpoint's values and the model's weights are never both held whole (a BERT-Large
    # loads within its own size and one tensor).
    loaded = [weight for weight in weights if weight.path in shapes]
    for weight in loaded:
        value_of(weight)
    for weight in loaded:
        weight.assign(value_of(weight))
    if untrained_pooler:
        logger.warning(
            "%s: no %s* (a model built without a pooler): the pooler keeps its initial values, so "
            "the pooled output is untrained (tagging and SQuAD do not use it; a classifier does)",
            source,
            POOLER_SCOPE,
        )
    return report


def write_checkpoint(prefix, named_tensors):
    """Writes `(name, value)` pairs as a TF1 name-based checkpoint, complete or not at all.

    The checkpoint is one data file, `prefix.data-00000-of-00001`, and its index, as Google's
    released checkpoints. The files are written under a temporary prefix beside `prefix`, then
    renamed into place, the data file first: a prefix is only a checkpoint once its index exists,
    so a reader never sees a half-written one (on GCS, where a rename is a copy, the index still
    comes last). A checkpoint already at `prefix` loses its index before its data is replaced (a
    reader finds it whole, or no checkpoint, or the new one whole), and its other data shards
    (a sharded training checkpoint's) after.

    Args:
      prefix: The checkpoint prefix, local or not (`gs://...`); writes `prefix.index` and
        `prefix.data-00000-of-00001`, replacing a checkpoint already there.
      named_tensors: An iterable of `(name, value)` pairs; each value is anything
        `tf.convert_to_tensor` takes (a NumPy array keeps its dtype). Each is converted to a
        tensor (TensorFlow copies a NumPy array) as it is reached and not referenced after:
        values an iterator gives up as it goes (popped from a dict, read from a file) are in
        memory once, as tensors, not twice.

    Returns:
      `prefix`.

    Raises:
      ValueError: Two values have the same name; the message names them.
    """
    names, tensors = [], []
    for name, value in named_tensors:
        names.append(name)
        tensors.append(tf.convert_to_tensor(value))
        del value
    duplicates = sorted(name for name, count in collections.Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(f"{prefix}: duplicate variable names {duplicates}")
    directory = os.path.dirname(prefix)
    if directory:
        files.makedirs(directory)
    tmp_prefix = files.temporary_path(prefix)
    try:
        tf.raw_ops.SaveV2(  # one call, one data file
            prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
        )
        del tensors[:]
        data = [path[len(tmp_prefix) :] for path in files.glob(tmp_prefix + ".data-*-of-*")]
        index = ".index"
        if files.exists(prefix + index):
            files.remove(prefix + index)
        for suffix in [*data, index]:
            files.rename(tmp_prefix + suffix, prefix + suffix)
        for stale in files.glob(prefix + ".data-*-of-*"):
            if stale[len(prefix) :] not in data:
                files.remove(stale)
    finally:
        for leftover in files.glob(tmp_prefix + ".*"):
            files.remove(leftover)
    return prefix


def write_checkpoint_state(directory, names):
    """Writes `directory/checkpoint`, the state file that names the latest checkpoint there (what
    `tf.train.latest_checkpoint` and `resolve_checkpoint_prefix` read), through a temporary name.

    Args:
      directory: The checkpoints' directory, local or not.
      names: The checkpoint prefixes' base names, oldest first: the last is the latest. They are
        written relative to the directory, so it can be moved.
    """
    # The CheckpointState text proto.
    lines = [f'model_checkpoint_path: "{names[-1]}"'] + [f'all_model_checkpoint_paths: "{n}"' for n in names]
    state_file = os.path.join(directory, "checkpoint")
    with files.atomic_output(state_file) as tmp, files.open_file(tmp, "w") as writer:
        writer.write("\n".join(lines) + "\n")


def checkpoint_value(weight):
    """A weight's value as a Google checkpoint holds it: NumPy, floats as float32."""
    value = np.asarray(weight.numpy())
    return value.astype(np.float32) if tf.as_dtype(value.dtype).is_floating else value


def checkpoint_output_prefix(path):
    """The prefix a checkpoint written to `path` gets: `path` itself, without a trailing
    `.index`, or `<path>/bert_model.ckpt` for a directory (an existing one, or a path ending in
    "/"), as `resolve_checkpoint_prefix` reads them back."""
    if path.endswith(".index"):
        return path[: -len(".index")]
    # A checkpoint's own prefix first: on some filesystems (ram://) any prefix of a file is a
    # directory.
    if path.endswith("/") or (not files.exists(path + ".index") and files.isdir(path)):
        return os.path.join(path, "bert_model.ckpt")
    return path


def save_google_checkpoint(model, path, global_step=None):
    """Writes a model's weights as a Google (TF1 name-based) checkpoint (`write_checkpoint`).

    Floating-point weights are written as float32, as Google's checkpoints hold them (a model
    under a 16-bit policy has 16-bit weights, which the original could not restore).

    Args:
      model: A bert_tf model (its weight paths are the names written).
      path: The checkpoint prefix, e.g. `.../bert_model.ckpt`, local or not, or a directory
        (`checkpoint_output_prefix`); writes `<prefix>.index` and `<prefix>.data-00000-of-00001`.
      global_step: If given, also writes `global_step` (int64), as training checkpoints have.

    Returns:
      The prefix written.

    Raises:
      ValueError: Two weights have the same path.
    """
    path = checkpoint_output_prefix(path)
    named_tensors = [(weight.path, checkpoint_value(weight)) for weight in model.weights]
    if global_step is not None:
        named_tensors.append(("global_step", np.int64(global_step)))
    try:
        return write_checkpoint(path, named_tensors)
    except ValueError as e:
        raise ValueError(f"cannot save {model.name}: {e}") from None
