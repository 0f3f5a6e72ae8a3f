"""Helpers for the pretraining-data tests: the fixture and a record parser."""

import json
import os

import numpy as np
import tensorflow as tf

from tests.conftest import FIXTURES_DIR

DATA_DIR = os.path.join(FIXTURES_DIR, "pretraining_data")
SAMPLE_TEXT = os.path.join(DATA_DIR, "sample_text.txt")
VOCAB = os.path.join(FIXTURES_DIR, "google_tiny", "vocab.txt")
FIXTURE_ARGS = dict(
    vocab_file=VOCAB,
    do_lower_case=True,
    max_seq_length=128,
    max_predictions_per_seq=20,
    masked_lm_prob=0.15,
    random_seed=12345,
    dupe_factor=5,
    short_seq_prob=0.1,
)


def fixture_records():
    with open(os.path.join(DATA_DIR, "sample_s12345.jsonl")) as f:
        return [json.loads(line) for line in f]


def read_records(path):
    """Every record of a TFRecord file, parsed into plain lists (schema-agnostic lengths).

    The records are parsed by TensorFlow's parser, a batch of them per call (parsing each record
    alone took some ten eager ops a record)."""
    spec = {
        name: tf.io.VarLenFeature(tf.int64)
        for name in (
            "input_ids",
            "input_mask",
            "segment_ids",
            "masked_lm_positions",
            "masked_lm_ids",
            "next_sentence_labels",
        )
    }
    spec["masked_lm_weights"] = tf.io.VarLenFeature(tf.float32)
    records = []
    for serialized in tf.data.TFRecordDataset(path).batch(1 << 16):
        parsed = tf.io.parse_example(serialized, spec)
        count = int(serialized.shape[0])
        columns = {}
        for name, values in parsed.items():
            # A VarLenFeature's values are in row order, each row's from its index 0 on.
            lengths = np.bincount(values.indices[:, 0].numpy(), minlength=count)
            columns[name] = np.split(values.values.numpy(), np.cumsum(lengths)[:-1])
        records.extend({name: column[i].tolist() for name, column in columns.items()} for i in range(count))
    return records


def statistics(records, mask_id=103):
    """NSP, masking and length statistics of parsed records."""
    lengths, masked, mask_tok, kept, real_tokens = [], 0, 0, 0, 0
    random_next = 0
    for r in records:
        n = sum(r["input_mask"])
        lengths.append(n)
        real_tokens += n
        random_next += r["next_sentence_labels"][0]
        for pos, label, w in zip(
            r["masked_lm_positions"], r["masked_lm_ids"], r["masked_lm_weights"], strict=True
        ):
            if w == 0:
                continue
            masked += 1
            token = r["input_ids"][pos]
            mask_tok += token == mask_id
            kept += token == label
    return {
        "random_next": random_next / len(records),
        "mask_rate": masked / real_tokens,
        "as_mask": mask_tok / masked,
        "kept": kept / masked,
        "mean_length": float(np.mean(lengths)),
        "short_fraction": float(np.mean(np.array(lengths) < 64)),
    }
