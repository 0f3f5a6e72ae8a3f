"""The pretraining task of the original's `run_pretraining.py`: model, losses, metrics, input.

The loss is the original's `total_loss = masked_lm_loss + next_sentence_loss`, with
`masked_lm_loss = sum(w * nll) / (sum(w) + 1e-5)` over the masked positions and
`next_sentence_loss` the mean over the batch. The step (`bert_tf.training.step`) needs it as
terms `numerator / (denominator + epsilon)` to normalise over the global batch; the eval metrics
are the original's `metric_fn`: masked-LM accuracy and mean loss weighted by `masked_lm_weights`,
next-sentence accuracy and mean loss.

The losses and metrics are written in `keras.ops` (they run on the JAX backend too); the input
side (`pretraining_dataset`, `check_records`) is TensorFlow.
"""

import contextlib
import dataclasses
import json
import logging
import re

from keras import ops

from bert_tf import errors, files
from bert_tf.modeling import BertPretrainer, masked_lm_loss, next_sentence_loss
from bert_tf.training.options import TrainingOptions, option

logger = logging.getLogger(__name__)

METRIC_NAMES = ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy")


class PretrainingTask:
    """The masked-LM and next-sentence task on a `BertPretrainer` (with `heads_only`: the model
    computes what the losses read).

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy (e.g. "mixed_bfloat16"); None for the global policy.
    """

    metric_names = METRIC_NAMES
    # Added to each global denominator: the original's 1e-5 for the masked LM, none for the mean.
    loss_epsilons = (1e-5, 0.0)

    def __init__(self, config, dtype=None):
        self.config = config
        self.model = BertPretrainer(config, heads_only=True, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(masked_lm_weights), rows]`: what the loss terms are divided by."""
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        rows = ops.cast(ops.shape(batch["next_sentence_labels"])[0], "float32")
        return [ops.sum(weights), rows]

    @staticmethod
    def loss_terms(outputs, batch):
        """The loss numerators and the metric terms of one batch.

        Args:
          outputs: `BertPretrainer` outputs.
          batch: The features of `bert_tf.data.make_pretraining_dataset`.

        Returns:
          (`[sum(w * mlm_nll), sum(nsp_nll)]`, `{metric: (numerator, denominator)}`).
        """
        weights = ops.cast(ops.reshape(batch["masked_lm_weights"], (-1,)), "float32")
        mlm_logits, nsp_logits = outputs["masked_lm_logits"], outputs["next_sentence_logits"]
        _, mlm_nll = masked_lm_loss(mlm_logits, batch["masked_lm_ids"], weights, from_logits=True)
        _, nsp_nll = next_sentence_loss(nsp_logits, batch["next_sentence_labels"], from_logits=True)

        mlm_correct = _is_top_prediction(mlm_logits, batch["masked_lm_ids"])
        nsp_correct = _is_top_prediction(nsp_logits, batch["next_sentence_labels"])
        rows = ops.cast(ops.shape(nsp_nll)[0], "float32")

        mlm_sum, nsp_sum = ops.sum(weights * mlm_nll), ops.sum(nsp_nll)
        metrics = {
            "masked_lm_loss": (mlm_sum, ops.sum(weights)),
            "masked_lm_accuracy": (ops.sum(weights * mlm_correct), ops.sum(weights)),
            "next_sentence_loss": (nsp_sum, rows),
            "next_sentence_accuracy": (ops.sum(nsp_correct), rows),
        }
        return [mlm_sum, nsp_sum], metrics


def _is_top_prediction(logits, labels):
    """1.0 where the label's logit is the largest of its row (the original's `argmax == label`).

    Comparing with the row's maximum is a single reduction; `keras.ops.argmax` on TensorFlow
    first rewrites negative zeros over the whole [batch * P, vocab] tensor, which made it as
    costly as the loss. They differ only when another logit exactly equals the label's.
    """
    labels = ops.expand_dims(ops.reshape(ops.cast(labels, "int32"), (-1,)), -1)
    label_logits = ops.take_along_axis(logits, labels, axis=-1)[:, 0]
    return ops.cast(label_logits >= ops.max(logits, axis=-1), "float32")


def check_records(input_files, max_seq_length, max_predictions_per_seq, vocab_size=None):
    """Checks that the first record of every input file has the lengths the flags say, and token
    ids the model's embedding table has rows for. The first records are read in parallel (one
    small read per file). A file may be empty: the original's `create_pretraining_data.py` leaves
    one so when it writes fewer examples than output files.

    Every file, not only the first: data of two `--max_seq_length`s (BERT's 128 then 512
    phases) mixed in one `--input_file` would otherwise fail in the middle of training, at the
    first batch that reads the other file, with a parse error naming neither.

    Raises:
      ValueError: A record's `input_ids` or `masked_lm_positions` length differs from
        `--max_seq_length` / `--max_predictions_per_seq` (the message names the file and both
        values), a token id is `vocab_size` or more, a file cannot be read, or no file holds a
        record.
    """
    import tensorflow as tf

    names = tf.data.Dataset.from_tensor_slices(list(input_files))
    first_records = names.interleave(
        lambda name: tf.data.TFRecordDataset(name).take(1).map(lambda record: (name, record)),
        cycle_length=16,
        num_parallel_calls=16,
        deterministic=True,
    )
    found = 0
    try:
        for name, record in first_records:
            _check_record(
                name.numpy().decode(), record.numpy(), max_seq_length, max_predictions_per_seq, vocab_size
            )
            found += 1
    except tf.errors.OpError:
        # Which file: the first that cannot be opened or read alone.
        for path in input_files:
            try:
                next(iter(tf.data.TFRecordDataset(path).take(1)), None)
            except tf.errors.OpError as e:
                raise ValueError(f"{path}: cannot read TFRecords ({errors.reason(e)})") from None
        raise
    if found:
        return
    if len(input_files) == 1:
        raise ValueError(f"{input_files[0]}: the file holds no record")
    raise ValueError(
        f"--input_file: none of its {len(input_files)} files holds a record ({input_files[0]}, ...)"
    )


def _check_record(path, record, max_seq_length, max_predictions_per_seq, vocab_size):
    """`check_records` on one serialized record of the file `path`."""
    import tensorflow as tf

    features = tf.train.Example.FromString(record).features.feature
    for name, flag, expected in (
        ("input_ids", "max_seq_length", max_seq_length),
        ("masked_lm_positions", "max_predictions_per_seq", max_predictions_per_seq),
    ):
        if name not in features:
            raise ValueError(f"{path}: not pretraining data (its records have no {name!r} feature)")
        found = len(features[name].int64_list.value)
        if found != expected:
            raise ValueError(
                f"{path}: records have {name} of length {found} but --{flag}={expected}; "
                f"pass --{flag}={found} (the value the data was created with)"
            )
    largest = max(max(features[name].int64_list.value, default=0) for name in ("input_ids", "masked_lm_ids"))
    if vocab_size is not None and largest >= vocab_size:
        raise ValueError(
            f"{path}: records hold token id {largest} but --bert_config_file's vocab_size is "
            f"{vocab_size}; was the data made with this model's vocab.txt?"
        )


# The InvalidArgumentErrors a record can cause: a parse error (`Key: input_ids.  ...`), a gather
# of an id the embedding has no row for (`indices[3,7] = 40000 is not in [0, 30522)`), and the
# reader's check of the masked positions.
_RECORD_ERROR = re.compile(r"Key: \w+|indices\[[\d,]*\] = -?\d+ is not in|masked_lm_position")


@contextlib.contextmanager
def naming_bad_input(input_files, options, config):
    """Turns an error that a record met in the block can cause (tf.data's messages name no
    file) into a one-line ValueError naming the first file, and record, to blame:
    - a `tf.errors.DataLossError`: the first file whose records cannot all be read;
    - a `tf.errors.InvalidArgumentError` (a parse error, a token id the embedding has no row
      for (on a CPU: a GPU's gather gives zeros for it, in the original too), a masked
      position outside the sequence): the first record that does not fit the
      flags and the config (`bert_tf.data.dataset.first_bad_record`); if none, or for
      another error, the error as it was.
    Finding it reads the files in order up to that one: a failed run's last work. (The first
    record of every file was checked before the first step: `check_records`.)

    Args:
      input_files: The files read in the block.
      options: The `PretrainingOptions` (`max_seq_length`, `max_predictions_per_seq`).
      config: The model's `BertConfig` (`vocab_size`, `type_vocab_size`).
    """
    import tensorflow as tf

    from bert_tf.data.dataset import first_bad_record

    try:
        yield
    except tf.errors.DataLossError as error:
        reason = errors.reason(error)
        logger.info("A record cannot be read (%s); looking for the file", reason)
        for path in input_files:
            try:
                tf.data.TFRecordDataset(path).reduce(tf.constant(0, tf.int64), lambda count, _: count + 1)
            except tf.errors.DataLossError as e:
                reason = errors.reason(e)
                raise ValueError(
                    f"{path}: corrupt TFRecord file ({reason}); checkpoints so far are kept"
                ) from None
        raise ValueError(f"--input_file: a record cannot be read ({reason})") from None
    except tf.errors.InvalidArgumentError as error:
        if not _RECORD_ERROR.search(error.message):
            raise
        logger.info("A batch does not fit the model (%s); looking for the record", errors.reason(error))
        for path in input_files:
            problem = first_bad_record(
                path,
                options.max_seq_length,
                options.max_predictions_per_seq,
                config.vocab_size,
                config.type_vocab_size,
            )
            if problem:
                raise ValueError(f"{path}: {problem}; checkpoints so far are kept") from None
        raise


@dataclasses.dataclass
class PretrainingOptions(TrainingOptions):
    """The flags of `tools/run_pretraining.py`: the original's, then bert_tf's own."""

    bert_config_file: str = option(None, "The bert_config.json of the model to train.")
    input_file: str = option(None, "Input TFRecord files (comma-separated globs).")
    max_seq_length: int = option(128, "Sequence length of the records (must match data generation).")
    max_predictions_per_seq: int = option(20, "Masked LM predictions per record (must match the data).")
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run evaluation.")
    train_batch_size: int = option(32, "Total (global) batch size for training.")
    eval_batch_size: int = option(8, "Total (global) batch size for evaluation.")
    num_train_steps: int = option(100000, "Number of training steps (a total: resumed runs continue to it).")
    num_warmup_steps: int = option(10000, "Number of linear warm-up steps.")
    max_eval_steps: int = option(100, "Number of evaluation batches.")
    gradient_accumulation_steps: int = option(1, "Micro-batches per step (same update as the whole batch).")
    gradient_reduction: str = option(
        "global",
        "global: one step equals one device's on the global batch; tpu_original: each replica clips "
        "its own gradient and the clipped gradients are summed, as the original on TPU.",
        ("global", "tpu_original"),
    )
    optimizer: str = option("adamw", "adamw: the original's AdamWeightDecay; lamb: LAMB.", ("adamw", "lamb"))

    def validate(self):
        super().validate()
        for flag in ("bert_config_file", "input_file"):
            if not getattr(self, flag):
                raise ValueError(f"--{flag} is required")
        if not (self.do_train or self.do_eval):
            raise ValueError("at least one of --do_train or --do_eval must be True")
        # As in the original, the training flags are read only to train, the eval flag to evaluate.
        flags = ("num_train_steps", "gradient_accumulation_steps") if self.do_train else ()
        for flag in flags + (("max_eval_steps",) if self.do_eval else ()):
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag} must be at least 1, got {getattr(self, flag)}")
        if self.do_train and self.num_warmup_steps < 0:
            raise ValueError(f"--num_warmup_steps must be >= 0, got {self.num_warmup_steps}")
        if self.jit_compile and self.gradient_accumulation_steps > 1:
            # XLA compiling the accumulation loop around the layers' own compiled training
            # forms gave other gradients than the step without XLA, and dropout's draws inside
            # it do not compile (BUILD_NOTES.md).
            raise ValueError("--jit_compile does not work with --gradient_accumulation_steps above 1")


def run_pretraining(options):
    """Trains and/or evaluates as the original's `run_pretraining.py` (`tools/run_pretraining.py`).

    Every check of the input (files, record lengths, config against the checkpoint, batch
    sizes) runs before the first step.

    Returns:
      `{"train": metrics or None, "eval": metrics or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag or file.
      bert_tf.training.loop.TrainingStopped: A non-finite loss.
    """
    import keras

    from bert_tf.config import BertConfig
    from bert_tf.data import make_pretraining_dataset
    from bert_tf.training import loop
    from bert_tf.training.optimization import create_optimizer

    options.validate()
    config = BertConfig.from_json_file(options.bert_config_file)
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={options.max_seq_length} is longer than the config's "
            f"max_position_embeddings ({config.max_position_embeddings})"
        )
    input_files = files.expand_input_patterns(options.input_file)
    # Evaluation reads a glob's files in the filesystem's order, as the original's (with
    # --max_eval_steps, the order decides which records are scored); training sorts them, so
    # that every worker shards one list.
    eval_files = files.expand_input_patterns(options.input_file, sort=False) if options.do_eval else None
    shown = ", ".join(input_files[:2]) + (f", ..., {input_files[-1]}" if len(input_files) > 2 else "")
    logger.info("--input_file: %d file%s (%s)", len(input_files), "s"[: len(input_files) > 1], shown)
    # The strategy first: MultiWorkerMirroredStrategy must exist before any TensorFlow op runs.
    distribution = options.distribution()
    check_records(input_files, options.max_seq_length, options.max_predictions_per_seq, config.vocab_size)
    if options.do_train:
        distribution.check_batch_size(
            "train_batch_size", options.train_batch_size, options.gradient_accumulation_steps
        )
    if options.do_eval:
        distribution.check_batch_size("eval_batch_size", options.eval_batch_size)
    if options.seed is not None:
        keras.utils.set_random_seed(options.seed)

    def dataset(batch_size, is_training):
        return make_pretraining_dataset(
            input_files if is_training else eval_files,
            batch_size // distribution.num_workers,
            options.max_seq_length,
            options.max_predictions_per_seq,
            is_training=is_training,
            input_context=distribution.input_context(),
            seed=options.seed,
            repeat=True,
        )

    results = {"train": None, "eval": None}
    strategy = distribution.strategy
    if options.do_train:
        with strategy.scope():
            task = PretrainingTask(config, dtype=options.dtype)
            optimizer = create_optimizer(
                options.optimizer, options.learning_rate, options.num_train_steps, options.num_warmup_steps
            )
            loss_scale = options.loss_scale()
        loop_config = options.loop_config(
            options.num_train_steps,
            options.train_batch_size,
            gradient_reduction=options.gradient_reduction,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
        )
        description = json.dumps(
            {
                "input_files": [files.absolute(path) for path in input_files],
                "batch_size": options.train_batch_size // distribution.num_workers,
                "max_seq_length": options.max_seq_length,
                "max_predictions_per_seq": options.max_predictions_per_seq,
                "seed": options.seed,
                "worker": [distribution.worker_index, distribution.num_workers],
            },
            sort_keys=True,
        )
        with naming_bad_input(input_files, options, config):
            results["train"] = loop.train(
                task,
                optimizer,
                distribution,
                dataset(options.train_batch_size, True),
                loop_config,
                loss_scale,
                description,
            )
    if options.do_eval:
        with strategy.scope():
            task = PretrainingTask(config, dtype=options.dtype)
        with naming_bad_input(input_files, options, config):
            results["eval"] = loop.evaluate(
                task,
                distribution,
                dataset(options.eval_batch_size, False),
                options.output_dir,
                options.max_eval_steps,
                options.init_checkpoint,
            )
    return results
