"""Reading pretraining TFRecords as a `tf.data.Dataset`, for the trainer."""

import tensorflow as tf

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
    `_decode_record`, since TPUs take int32 only)."""
    features = tf.io.parse_example(serialized, feature_spec(max_seq_length, max_predictions_per_seq))
    return {
        name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
        for name, value in features.items()
    }


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
