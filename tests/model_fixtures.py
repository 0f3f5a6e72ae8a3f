"""Helpers shared by the model tests: the google_tiny fixture, its batches and outputs."""

import os

import numpy as np

from tests.conftest import FIXTURES_DIR

GOOGLE_TINY = os.path.join(FIXTURES_DIR, "google_tiny")
GOOGLE_TINY_CONFIG = os.path.join(GOOGLE_TINY, "bert_config.json")
GOOGLE_TINY_CKPT = os.path.join(GOOGLE_TINY, "bert_model.ckpt")
BATCHES = ("b0", "b1", "b2")
INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
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


def model_inputs(batch):
    return {key: batch[key] for key in INPUT_KEYS}
