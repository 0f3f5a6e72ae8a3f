"""The hand-written tf.train.Example encoder, checked by TensorFlow's own parser."""

import numpy as np
import tensorflow as tf

from bert_tf.data.examples import ExampleEncoder


def test_encoded_examples_parse_to_the_intended_values():
    encoder = ExampleEncoder(max_seq_length=12, max_predictions_per_seq=4, max_value=30521)
    ids = [101, 7, 300, 16384, 102, 30521, 2097151 % 30522, 102]
    serialized = encoder.encode(ids, 5, [1, 5], [7, 30521], True)
    spec = {
        "input_ids": tf.io.FixedLenFeature([12], tf.int64),
        "input_mask": tf.io.FixedLenFeature([12], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([12], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([4], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([4], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([4], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = {k: v.numpy().tolist() for k, v in tf.io.parse_single_example(serialized, spec).items()}
    assert parsed == {
        "input_ids": ids + [0] * 4,
        "input_mask": [1] * 8 + [0] * 4,
        "segment_ids": [0] * 5 + [1] * 3 + [0] * 4,
        "masked_lm_positions": [1, 5, 0, 0],
        "masked_lm_ids": [7, 30521, 0, 0],
        "masked_lm_weights": [1.0, 1.0, 0.0, 0.0],
        "next_sentence_labels": [1],
    }
    # The features are serialised in the original's order (a map's parsed order is not).
    names = [
        b"input_ids",
        b"input_mask",
        b"segment_ids",
        b"masked_lm_positions",
        b"masked_lm_ids",
        b"masked_lm_weights",
        b"next_sentence_labels",
    ]
    offsets = [serialized.index(name) for name in names]
    assert offsets == sorted(offsets)
    example = tf.train.Example.FromString(serialized)
    assert np.allclose(example.features.feature["masked_lm_weights"].float_list.value, [1, 1, 0, 0])
