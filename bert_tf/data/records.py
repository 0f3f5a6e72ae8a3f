"""The fine-tuning tasks' feature files: one `tf.train.Example` per feature dict, and their reader.

The original's `run_classifier.py` and `run_squad.py` write their features to TFRecord files
(`train.tf_record`, ...) and train, evaluate and predict from them; the tasks here do the same,
with `write_records` and `records_dataset`.
"""

# The original's input_fn shuffles the repeated training records with this buffer.
SHUFFLE_BUFFER = 100


def _example(features):
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        values = list(values)
        if values and isinstance(values[0], float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_records(path, features):
    """Writes one `tf.train.Example` per feature dict to the TFRecord file `path`, atomically.

    Args:
      path: The output file; written under a temporary name and renamed when complete.
      features: An iterable of dicts `name -> list` (ints are written as an int64 list, floats
        as a float list), e.g. the original's `input_ids`, `input_mask`, `segment_ids`,
        `label_ids`, `is_real_example`.

    Returns:
      The number of records written.
    """
    from bert_tf.data.examples import RecordWriter

    count = 0
    with RecordWriter([path]) as writer:
        for feature in features:
            writer.write(_example(feature).SerializeToString(deterministic=True))
            count += 1
    return count


def _cast_ints(features):
    import tensorflow as tf

    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in features.items()}


def records_dataset(
    input_file,
    name_to_features,
    batch_size,
    is_training,
    input_context=None,
    seed=None,
    num_batches=None,
):
    """Batches of features from a TFRecord file of `write_records`.

    Training (the original's `input_fn`): the records repeated, shuffled in a buffer of 100 and
    batched, dropping the remainder. Otherwise: the records in file order, then all-zero rows up
    to exactly `num_batches` full batches, so a finite set is covered once with static shapes;
    the zero rows have `is_real_example` (and every other feature) 0.

    Args:
      input_file: The TFRecord file.
      name_to_features: Name -> `tf.io.FixedLenFeature` of the records.
      batch_size: Rows per batch (this worker's).
      is_training: Repeat and shuffle.
      input_context: A `tf.distribute.InputContext`; with several input pipelines each reads
        every n-th record. None reads every record.
      seed: The shuffle seed.
      num_batches: The number of batches (not training); the file must not hold more rows.

    Returns:
      A `tf.data.Dataset` of dicts of int32 (and float32) [batch, ...] tensors.
    """
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(input_file)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(
            lambda records: _cast_ints(tf.io.parse_example(records, name_to_features)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)
    dataset = dataset.map(lambda record: _cast_ints(tf.io.parse_single_example(record, name_to_features)))
    zeros = {
        name: tf.zeros(spec.shape, tf.int32 if spec.dtype == tf.int64 else spec.dtype)
        for name, spec in name_to_features.items()
    }
    dataset = dataset.concatenate(tf.data.Dataset.from_tensors(zeros).repeat())
    dataset = dataset.take(num_batches * batch_size).batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)
