"""Helpers shared by the model tests: the google_tiny fixture, its batches and outputs."""

import os

import numpy as np

from bert_tf import BertConfig
from tests.conftest import FIXTURES_DIR

GOOGLE_TINY = os.path.join(FIXTURES_DIR, "google_tiny")
GOOGLE_TINY_CONFIG = os.path.join(GOOGLE_TINY, "bert_config.json")
GOOGLE_TINY_CKPT = os.path.join(GOOGLE_TINY, "bert_model.ckpt")
# The same weights' training fixture; its config has dropout 0, so training is deterministic.
GOOGLE_TINY_TRAIN = os.path.join(FIXTURES_DIR, "google_tiny_train")
GOOGLE_TINY_TRAIN_CONFIG = os.path.join(GOOGLE_TINY_TRAIN, "bert_config.json")
BATCHES = ("b0", "b1", "b2")
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
LABEL_KEYS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
OUTPUT_KEYS = (
    "embedding_output",
    "encoder_layer_0",
    "encoder_layer_1",
    "sequence_output",
    "pooled_output",
    "masked_lm_log_probs",
    "masked_lm_example_loss",
    "masked_lm_loss",
    "next_sentence_log_probs",
    "next_sentence_example_loss",
    "next_sentence_loss",
    "total_loss",
)


def reference_arrays():
    """The original code's inputs and outputs, as a dict `batch -> key -> array`."""
    data = np.load(os.path.join(GOOGLE_TINY, "reference_outputs.npz"))
    batches = {}
    for key in data.files:
        batch, name = key.split("/", 1)
        batches.setdefault(batch, {})[name] = data[key]
    return batches


def train_batch():
    """The google_tiny_train batch: the model inputs and the labels, 4 rows of 128 tokens."""
    with np.load(os.path.join(GOOGLE_TINY_TRAIN, "batch.npz")) as data:
        return {key: data[key] for key in data.files}


def model_inputs(batch):
    return {key: batch[key] for key in INPUT_KEYS}


def tiny_config(**changes):
    """The google_tiny config with `changes` (e.g. `hidden_act="gelu_exact"`)."""
    return BertConfig.from_dict(dict(BertConfig.from_json_file(GOOGLE_TINY_CONFIG).to_dict(), **changes))
