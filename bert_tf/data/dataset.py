"""Reading pretraining TFRecords as a `tf.data.Dataset`, for the trainer."""

import numpy as np
import tensorflow as tf

from bert_tf import errors
from bert_tf.files import expand_input_patterns


def feature_spec(max_seq_length, max_predictions_per_seq):
    """The records' schema, as `tf.io.parse_example` takes it."""
    ints = lambda n: tf.io.FixedLenFeature([n], tf.int64)  # noqa: E731
    return {
        "input_ids": ints(max_seq_length),
        "input_mask": ints(max_seq_length),
        "segment_ids": ints(max_seq_length),
        "masked_lm_positions": ints(max_predictions_per_seq),
        "masked_lm_ids": ints(max_predictions_per_seq),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": ints(1),
    }


def decode_records(serialized, max_seq_length, max_predictions_per_seq):
    """Parses a batch of serialized examples; int64 features become int32 (as the original's
    `_decode_record`, since TPUs take int32 only).

    A masked position beyond the sequence is an error (InvalidArgumentError): the masked-LM
    head gathers rows of the flattened batch, where it would read another sequence's token.
    """
    features = tf.io.parse_example(serialized, feature_spec(max_seq_length, max_predictions_per_seq))
    positions = features["masked_lm_positions"]
    message = f"a record has a masked_lm_position outside [0, --max_seq_length={max_seq_length})"
    checks = [
        tf.debugging.assert_less(positions, tf.constant(max_seq_length, tf.int64), message=message),
        tf.debugging.assert_non_negative(positions, message=message),
    ]
    with tf.control_dependencies(checks):
        return {
            name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else tf.identity(value)
            for name, value in features.items()
        }


def first_bad_record(path, max_seq_length, max_predictions_per_seq, vocab_size, type_vocab_size):
    """What is wrong with the first record of TFRecord file `path` that the trainer cannot take.

    Each record's features must have the lengths of `feature_spec`, its token ids must lie in
    [0, vocab_size), its segment ids in [0, type_vocab_size) and its masked positions in
    [0, max_seq_length).

    Returns:
      None if every record fits, else a message naming the record (1-based) and the feature.
    """
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    ragged = {name: tf.io.RaggedFeature(feature.dtype) for name, feature in spec.items()}
    bounds = {
        "input_ids": (vocab_size, "the config's vocab_size"),
        "masked_lm_ids": (vocab_size, "the config's vocab_size"),
        "segment_ids": (type_vocab_size, "the config's type_vocab_size"),
        "masked_lm_positions": (max_seq_length, "--max_seq_length"),
    }
    first = 0
    for records in tf.data.TFRecordDataset(path).batch(1024):
        try:
            batch = tf.io.parse_example(records, ragged)
        except tf.errors.InvalidArgumentError:  # a feature of another type: find the record
            for index in range(len(records)):
                try:
                    tf.io.parse_example(records[index : index + 1], ragged)
                except tf.errors.InvalidArgumentError as e:
                    return f"record {first + index + 1}: cannot be parsed ({errors.reason(e)})"
            raise
        problems = []  # (index in the batch, message)
        for name, values in batch.items():
            lengths = values.row_lengths().numpy()
            expected = spec[name].shape[0]
            for i in np.flatnonzero(lengths != expected)[:1]:
                problems.append((i, f"{name} has {lengths[i]} values, not {expected}"))
            if name in bounds:
                bound, what = bounds[name]
                smallest = tf.reduce_min(values, axis=1).numpy()
                largest = tf.reduce_max(values, axis=1).numpy()
                for i in np.flatnonzero((lengths > 0) & ((smallest < 0) | (largest >= bound)))[:1]:
                    value = smallest[i] if smallest[i] < 0 else largest[i]
                    problems.append((i, f"{name} holds {value}, outside [0, {bound}) ({what})"))
        if problems:
            index, message = min(problems)
            return f"record {first + index + 1}: {message}"
        first += len(records)
    return None


def make_pretraining_dataset(
    input_patterns,
    batch_size,
    max_seq_length,
    max_predictions_per_seq,
    is_training=True,
    input_context=None,
    num_parallel_reads=4,
    shuffle_buffer_size=100,
    drop_remainder=True,
    seed=None,
    repeat=None,
):
    """Batches of pretraining features from TFRecord files.

    Training: the files are sharded over input pipelines (`input_context`), shuffled and
    repeated, read `num_parallel_reads` at a time interleaved, and the records shuffled.
    Evaluation: the files in the order of `bert_tf.files.expand_input_patterns` (pattern by
    pattern, each pattern's matches sorted; `run_pretraining` passes the files in the
    original's order), repeated if `repeat`. With fewer files than input pipelines, the
    records are sharded instead of the files.

    Args:
      input_patterns: A glob pattern, a comma-separated string of them, or a list (of
        patterns or of files).
      batch_size: Examples per batch of this input pipeline (per worker).
      max_seq_length, max_predictions_per_seq: As the records were written.
      is_training: Shuffle and repeat.
      input_context: A `tf.distribute.InputContext`; each pipeline reads its share of files.
      num_parallel_reads: Files read at once.
      shuffle_buffer_size: Records shuffle buffer (training).
      drop_remainder: Drop a last partial batch (static shapes, as TPUs need).
      seed: Shuffle seed, for reproducible order.
      repeat: Repeat the input forever; None means `is_training` (the original's evaluation
        repeats too, and stops after `--max_eval_steps` batches).

    Returns:
      A `tf.data.Dataset` of dicts: int32 `input_ids`, `input_mask`, `segment_ids` [B, S],
      `masked_lm_positions`, `masked_lm_ids` [B, P], float32 `masked_lm_weights` [B, P],
      int32 `next_sentence_labels` [B, 1].

    Raises:
      ValueError: A pattern matches no file; the message names it.
    """
    files = expand_input_patterns(input_patterns, name="input_patterns")

    repeat = is_training if repeat is None else repeat
    pipelines = input_context.num_input_pipelines if input_context is not None else 1
    shard = input_context.input_pipeline_id if input_context is not None else 0
    shard_files = pipelines > 1 and len(files) >= pipelines
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shard_files:
        dataset = dataset.shard(pipelines, shard)
    if is_training:
        dataset = dataset.shuffle(len(files), seed=seed)
    if repeat:
        dataset = dataset.repeat()
    if is_training:
        dataset = dataset.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(num_parallel_reads, len(files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=seed is not None,
        )
    else:
        dataset = dataset.flat_map(tf.data.TFRecordDataset)
    if pipelines > 1 and not shard_files:
        dataset = dataset.shard(pipelines, shard)
    if is_training:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(
        lambda records: decode_records(records, max_seq_length, max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)
