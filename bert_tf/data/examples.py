"""Pretraining examples as serialized `tf.train.Example` protos, and the files that hold them.

The schema is the original's, features in its order: `input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids` (int64 lists), `masked_lm_weights` (float list),
`next_sentence_labels` (one int64). The proto is encoded here directly, which is faster
than building `tf.train.Example` objects; `tests/test_pretraining_examples.py`
checks the bytes with `tf.io.parse_single_example`.
"""

import contextlib
import struct

from bert_tf.files import atomic_output

FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


def _varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _VarintCache(dict):
    """The varints of the integers looked up so far, each computed on first use."""

    def __missing__(self, value):
        encoded = self[value] = _varint(value)
        return encoded


def _length_delimited(field_tag, payload):
    """One length-delimited protobuf field: tag byte, varint length, payload."""
    return bytes([field_tag]) + _varint(len(payload)) + payload


class ExampleEncoder:
    """Encodes pretraining instances as serialized `tf.train.Example` bytes.

    The features that depend only on lengths (`input_mask`, `segment_ids`,
    `masked_lm_weights`, `next_sentence_labels`) are encoded once per distinct length and
    reused.

    Args:
      max_seq_length: Length of `input_ids`, `input_mask`, `segment_ids`.
      max_predictions_per_seq: Length of the three `masked_lm_*` lists.
      max_value: Largest id to encode (the vocabulary's largest id at least); the varints of
        0 to `max(max_value, max_seq_length)` (every id, position and label) are precomputed.
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_value):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._varints = [_varint(v) for v in range(max(max_value, max_seq_length) + 1)]
        self._lengths = _VarintCache()  # payload lengths: any size, whatever the vocabulary
        # Map entries are `key` (field 1) and `value` (field 2, a Feature).
        self._keys = {name: _length_delimited(0x0A, name.encode()) for name in FEATURE_NAMES}
        self._cache = {}

    def _field(self, tag, payload):
        """`_length_delimited` with the length's varint from a cache."""
        return tag + self._lengths[len(payload)] + payload

    def _entry(self, name, feature_tag, packed):
        """A `features` map entry holding one packed int64 (0x1A) or float (0x12) list.

        An empty list (`max_predictions_per_seq` 0) is an empty list message, as protobuf
        writes it: no packed field at all.
        """
        values = self._field(b"\x0a", packed) if packed else b""
        feature = self._field(feature_tag, values)
        return self._field(b"\x0a", self._keys[name] + self._field(b"\x12", feature))

    def _int64_feature(self, name, values, length):
        varints = self._varints
        packed = b"".join([varints[v] for v in values]) + varints[0] * (length - len(values))
        return self._entry(name, b"\x1a", packed)

    def _cached(self, key, make):
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = make()
        return value

    def encode(self, input_ids, num_segment_a, masked_lm_positions, masked_lm_ids, is_random_next):
        """Serializes one instance.

        Args:
          input_ids: The ids of `[CLS] a [SEP] b [SEP]` (unpadded).
          num_segment_a: Length of `[CLS] a [SEP]` (those tokens have segment 0, the rest 1).
          masked_lm_positions: Sorted masked positions.
          masked_lm_ids: The original ids at those positions.
          is_random_next: Whether b is a random segment (label 1) or the real next one (0).

        Returns:
          The serialized `tf.train.Example`.
        """
        n, seq, preds = len(input_ids), self.max_seq_length, self.max_predictions_per_seq
        k = len(masked_lm_positions)
        if n > seq or k > preds:
            raise ValueError(
                f"instance of {n} tokens and {k} predictions does not fit "
                f"max_seq_length {seq} / max_predictions_per_seq {preds}"
            )
        features = b"".join(
            (
                self._int64_feature("input_ids", input_ids, seq),
                self._cached(("mask", n), lambda: self._int64_feature("input_mask", [1] * n, seq)),
                self._cached(
                    ("segments", num_segment_a, n),
                    lambda: self._int64_feature(
                        "segment_ids", [0] * num_segment_a + [1] * (n - num_segment_a), seq
                    ),
                ),
                self._int64_feature("masked_lm_positions", masked_lm_positions, preds),
                self._int64_feature("masked_lm_ids", masked_lm_ids, preds),
                self._cached(
                    ("weights", k),
                    lambda: self._entry(
                        "masked_lm_weights",
                        b"\x12",
                        struct.pack(f"<{preds}f", *([1.0] * k + [0.0] * (preds - k))),
                    ),
                ),
                self._cached(
                    ("label", is_random_next),
                    lambda: self._int64_feature("next_sentence_labels", [int(is_random_next)], 1),
                ),
            )
        )
        return _length_delimited(0x0A, features)  # Example.features (may exceed the table)


class RecordWriter:
    """Writes records round-robin over several TFRecord files, each under a temporary name
    until the `with` block ends and renames it into place (or deletes it after an error), so an
    interrupted run leaves no finished-looking file.

    Args:
      output_files: Paths of the TFRecord files to write.
    """

    def __init__(self, output_files):
        import tensorflow as tf  # TFRecord framing (length, CRC32C) comes from TensorFlow

        with contextlib.ExitStack() as files:  # undone if a writer cannot be opened
            tmp_files = [files.enter_context(atomic_output(path)) for path in output_files]
            self._writers = [tf.io.TFRecordWriter(tmp) for tmp in tmp_files]
            self._files = files.pop_all()
        self._next = 0

    def write(self, record):
        self._writers[self._next].write(record)
        self._next = (self._next + 1) % len(self._writers)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        """Flushes every file, then renames each into place, or deletes them after an error."""
        for writer in self._writers:
            writer.close()
        return self._files.__exit__(exc_type, exc, tb)
