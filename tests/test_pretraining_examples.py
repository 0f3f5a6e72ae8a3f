"""The hand-written tf.train.Example encoder, checked by TensorFlow's own parser and against
examples built with the protobuf API."""

import random

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.data import PretrainingDataOptions, create_pretraining_data, pipeline, shards
from bert_tf.data.examples import ExampleEncoder, _varint


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


# --- Every vocabulary size, sequence length and prediction count, end to end ---------------------

LETTERS = "abc"


def vocab_tokens(vocab_size):
    """Special tokens, fillers, and the six pieces of the corpus at ids that need one varint
    byte (5, 6), two (from 128) and, in a vocabulary of more than 16,384 entries, three."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"[unused{i}]" for i in range(vocab_size - 5)]
    pieces = [*LETTERS, *(f"##{letter}" for letter in LETTERS)]
    ids = [5, 6, min(200, vocab_size - 4), min(300, vocab_size - 3), vocab_size - 2, vocab_size - 1]
    for piece, index in zip(pieces, ids, strict=True):
        tokens[index] = piece
    return tokens


def write_corpus(path):
    """Six documents of words over `LETTERS`, one of them longer than 1,024 WordPieces."""
    rng = random.Random(0)
    documents = []
    for num_lines in (100, 5, 12, 20, 30, 8):
        lines = [
            " ".join("".join(rng.choices(LETTERS, k=rng.randint(1, 4))) for _ in range(rng.randint(2, 12)))
            for _ in range(num_lines)
        ]
        documents.append("\n".join(lines))
    path.write_text("\n\n".join(documents) + "\n")


def original_example(values, max_seq_length, max_predictions_per_seq):
    """The original's `tf.train.Example` for an instance, built with the protobuf API."""
    input_ids, num_segment_a, positions, label_ids, is_random_next = values
    n, k = len(input_ids), len(positions)
    pad, pad_predictions = [0] * (max_seq_length - n), [0] * (max_predictions_per_seq - k)

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    features = {
        "input_ids": int_feature(list(input_ids) + pad),
        "input_mask": int_feature([1] * n + pad),
        "segment_ids": int_feature([0] * num_segment_a + [1] * (n - num_segment_a) + pad),
        "masked_lm_positions": int_feature(list(positions) + pad_predictions),
        "masked_lm_ids": int_feature(list(label_ids) + pad_predictions),
        "masked_lm_weights": tf.train.Feature(
            float_list=tf.train.FloatList(value=[1.0] * k + [0.0] * len(pad_predictions))
        ),
        "next_sentence_labels": int_feature([int(is_random_next)]),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def parse(records, max_seq_length, max_predictions_per_seq):
    """Parsed with the fixed lengths the reader uses: padding to the wrong length fails."""
    spec = {
        name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    spec.update(
        {
            name: tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
            for name in ("masked_lm_positions", "masked_lm_ids")
        }
    )
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    parsed = tf.io.parse_example(tf.constant(records, dtype=tf.string), spec)
    return {name: value.numpy() for name, value in parsed.items()}


def record_values(monkeypatch):
    """Makes `ExampleEncoder.encode` note `(record, values)` of each call in the returned list."""
    calls = []
    encode = ExampleEncoder.encode

    def noting_encode(self, *values):
        record = encode(self, *values)
        calls.append((record, values))
        return record

    monkeypatch.setattr(ExampleEncoder, "encode", noting_encode)
    return calls


def file_records(path):
    return [record.numpy() for record in tf.data.TFRecordDataset(path)]


@pytest.fixture(scope="module")
def matrix_files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("matrix")
    write_corpus(directory / "corpus.txt")
    return directory


@pytest.mark.parametrize("mode", ["exact", "scale"])
@pytest.mark.parametrize(
    "vocab_size, max_seq_length, max_predictions_per_seq, masked_lm_prob",
    [
        (11, 5, 5, 0.15),  # the shortest sequence the original accepts
        (11, 8, 0, 0.15),  # no masked LM: empty lists, as the original writes them
        (11, 8, 8, 1.0),
        (200, 64, 20, 0.15),  # ids of one and two varint bytes
        (20_000, 128, 128, 1.0),  # ... and three
        (250_000, 1024, 0, 0.15),
        (250_000, 1024, 1024, 1.0),
    ],
)
def test_every_record_equals_the_protobuf_encoding(
    matrix_files,
    tmp_path,
    monkeypatch,
    mode,
    vocab_size,
    max_seq_length,
    max_predictions_per_seq,
    masked_lm_prob,
):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab_tokens(vocab_size)) + "\n")
    corpus = str(matrix_files / "corpus.txt")
    options = PretrainingDataOptions(
        vocab_file=str(vocab_file),
        max_seq_length=max_seq_length,
        max_predictions_per_seq=max_predictions_per_seq,
        masked_lm_prob=masked_lm_prob,
        dupe_factor=2,
    )
    output = str(tmp_path / "out")
    calls = record_values(monkeypatch)
    if mode == "exact":
        summary = create_pretraining_data(corpus, output, options)
        written = file_records(output)
        assert sorted(written) == sorted(record for record, _ in calls)
    else:
        # The worker processes cannot be watched: redo each shard here, as a worker does it
        # (scale mode is reproducible), and compare with the file the workers wrote.
        shard_size_mb = 0.0005
        summary = create_pretraining_data(corpus, output, options, num_workers=1, shard_size_mb=shard_size_mb)
        plan = shards.plan_shards([corpus], int(shard_size_mb * (1 << 20)))
        assert len(summary.output_files) == len(plan) > 1
        monkeypatch.setattr(pipeline, "_WORKER", None)
        pipeline._init_worker(options)
        written = []
        for index, ranges in enumerate(plan):
            del calls[len(written) :]
            pipeline._make_shard((index, ranges))
            shard_records = file_records(summary.output_files[index])
            assert sorted(shard_records) == sorted(record for record, _ in calls[len(written) :])
            written.extend(shard_records)
    assert summary.instances == len(written) == len(calls) > 0
    got = parse([record for record, _ in calls], max_seq_length, max_predictions_per_seq)
    want = parse(
        [original_example(values, max_seq_length, max_predictions_per_seq) for _, values in calls],
        max_seq_length,
        max_predictions_per_seq,
    )
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # The matrix covers what it says: ids of every varint size the vocabulary has.
    widest_id = {11: 1, 200: 2}.get(vocab_size, 3)
    sizes = {len(_varint(int(i))) for i in got["input_ids"].ravel()}
    assert sizes == set(range(1, widest_id + 1))
    if max_predictions_per_seq == max_seq_length and masked_lm_prob == 1.0:
        assert got["masked_lm_weights"].sum(axis=1).max() == max_seq_length - 3
