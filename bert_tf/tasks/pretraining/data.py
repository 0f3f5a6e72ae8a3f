"""The pretraining job's input: the records of `create_pretraining_data.py`, checked against
the flags and the model before the first step, and a bad record named when one stops a run.

The reader itself is `bert_tf.data.make_pretraining_dataset` (the data package owns the format).
"""

import contextlib
import logging
import re

from bert_tf import errors

logger = logging.getLogger(__name__)


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
