"""Helpers shared by the fine-tuning tests: a checkpoint in the layout of the original's
run_classifier (or with another head), the float64 reference of its classifier on a records
file, and the original run_squad.py's max-context rule written out."""

import numpy as np
import tensorflow as tf

from bert_tf.checkpoints import reference
from bert_tf.config import BertConfig
from bert_tf.tasks.classifier import data as classifier_data
from tests import model_fixtures as mf


def write_original_finetuned_checkpoint(prefix, num_labels, global_step, seed, head=""):
    """bert/* of google_tiny, a new head, Adam slots for every weight and global_step: the
    variables of a checkpoint the original's run_classifier writes (by TensorFlow's own SaveV2).

    `head` is the scope of the head's `output_weights` and `output_bias`: "" for the
    classifier's (top level), e.g. "cls/tagging/" for the tagger's.

    Returns:
      The weights (name -> float32 array), slots left out.
    """
    source = tf.train.load_checkpoint(mf.GOOGLE_TINY_CKPT)
    rng = np.random.default_rng(seed)
    weights = {
        name: source.get_tensor(name)
        for name in source.get_variable_to_shape_map()
        if name.startswith("bert/")
    }
    weights[f"{head}output_weights"] = rng.normal(0, 0.3, (num_labels, 128)).astype(np.float32)
    weights[f"{head}output_bias"] = rng.normal(0, 0.3, (num_labels,)).astype(np.float32)
    tensors = dict(weights)
    for name, value in weights.items():
        tensors[f"{name}/adam_m"] = rng.normal(0, 1e-3, value.shape).astype(np.float32)
        tensors[f"{name}/adam_v"] = rng.uniform(0, 1e-6, value.shape).astype(np.float32)
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names + ["global_step"],
        shape_and_slices=[""] * (len(names) + 1),
        tensors=[tf.constant(tensors[n]) for n in names] + [tf.constant(global_step, tf.int64)],
    )
    return weights


def reference_probabilities(weights, records_file, max_seq_length):
    """The original classifier's probabilities on every record, by the float64 NumPy reference.

    Returns:
      (probabilities [n, num_labels], label_ids [n]).
    """
    spec = classifier_data.name_to_features(max_seq_length)
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(records_file)]
    batch = {k: np.stack([row[k].numpy() for row in rows]) for k in spec}
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    pooled = reference.reference_forward(
        weights, config, batch["input_ids"], batch["input_mask"], batch["segment_ids"]
    )["pooled_output"]
    logits = pooled @ weights["output_weights"].astype(np.float64).T + weights["output_bias"]
    return reference.softmax(logits), batch["label_ids"]


def eval_reference(weights, records_file, max_seq_length, batch_size):
    """`eval_accuracy`, `eval_loss` (means over the examples) and `loss` (the mean of the
    batch means, the last batch's over its rows) of the original's run_classifier."""
    probabilities, labels = reference_probabilities(weights, records_file, max_seq_length)
    nll = -np.log(probabilities[np.arange(len(labels)), labels])
    return {
        "eval_accuracy": np.mean(probabilities.argmax(-1) == labels),
        "eval_loss": nll.mean(),
        "loss": np.mean([nll[i : i + batch_size].mean() for i in range(0, len(nll), batch_size)]),
    }


def max_context_window(windows, piece):
    """The original run_squad.py's `_check_is_max_context`, written out: the index of the window
    (of `(start, length)` pairs) where `piece` has the most context, the smaller of its pieces
    to the left and to the right plus 0.01 * the window's length, the first on ties."""
    best, best_score = None, None
    for index, (start, length) in enumerate(windows):
        if start <= piece < start + length:
            score = min(piece - start, start + length - 1 - piece) + 0.01 * length
            if best_score is None or score > best_score:
                best, best_score = index, score
    return best
