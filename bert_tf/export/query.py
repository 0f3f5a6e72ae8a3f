"""Asking an exported SavedModel one question from the command line (`tools/query_saved_model.py`).

`saved_model_cli run` cannot run a bert_tf export: it does not load TensorFlow Text's ops, which
every default export holds (the `text` and `text_pair` signatures' tokenizer, and so the graph
that all signatures share), and fails with `Op type not registered
'FastWordpieceTokenizeWithOffsets'`. TF Serving's own builds link those ops. This module loads
them (`import tensorflow_text`), then the SavedModel, and calls one signature on one example:
a text (`text`), a pair of texts (`text_pair`), or ids (`serving_default`, `pretraining`, and
`tf_example`, to which the ids are given as one serialized `tf.Example`).

The outputs come as one JSON object, its keys the output names sorted (a signature returns a
dict, whose order says nothing), so two queries print alike. A fine-tuned export names its scores:
a classifier's `probabilities` are `{label: probability}` in the head's order, a tagger's one
such object per token (the export's `labels` and `label_scores`, `ExportModule`).
"""

import dataclasses
import json
import os

import numpy as np

from bert_tf import files
from bert_tf.export.module import DEFAULT_SIGNATURE, EXAMPLE_SIGNATURE, TEXT_PAIR_SIGNATURE, TEXT_SIGNATURE
from bert_tf.export.versioning import existing_versions
from bert_tf.options import option


@dataclasses.dataclass
class QueryOptions:
    """The flags of `tools/query_saved_model.py`."""

    export_dir: str = option(
        None,
        "The export: a model base directory (its highest version is used) or one version's directory.",
        required=True,
    )
    signature: str = option(
        None,
        "The signature to call (default: text_pair with --text_b, text with --text, else serving_default).",
    )
    text: str = option(None, "The text (text signature), or the first text of a pair (text_pair).")
    text_b: str = option(None, "The second text of a pair (text_pair).")
    input_ids: str = option(None, "Comma-separated token ids (serving_default, pretraining, tf_example).")
    input_mask: str = option(None, "Comma-separated 0/1 (default: 1 for every id).")
    segment_ids: str = option(None, "Comma-separated segment ids (default: 0 for every id).")
    masked_lm_positions: str = option(None, "Comma-separated positions to predict (pretraining).")


def version_directory(export_dir):
    """The SavedModel directory of `export_dir`: itself if it holds a `saved_model.pb`, else its
    highest version.

    Raises:
      ValueError: Neither; the message names the directory.
    """
    if files.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    versions = existing_versions(export_dir)
    if not versions:
        raise ValueError(f"--export_dir={export_dir}: neither a SavedModel nor a directory of versions")
    return os.path.join(export_dir, str(versions[-1]))


def _ints(flag, text):
    try:
        return [int(value) for value in text.split(",")]
    except ValueError:
        raise ValueError(f"--{flag} must be comma-separated integers, got {text!r}") from None


def _signature_name(options):
    if options.signature:
        return options.signature
    if options.text_b is not None:
        return TEXT_PAIR_SIGNATURE
    return TEXT_SIGNATURE if options.text is not None else DEFAULT_SIGNATURE


def _id_inputs(options):
    """The id tensors of one example, from the flags."""
    if options.input_ids is None:
        raise ValueError("give --input_ids (comma-separated token ids) for an id signature")
    input_ids = _ints("input_ids", options.input_ids)
    inputs = {"input_ids": input_ids}
    for flag, default in (("input_mask", 1), ("segment_ids", 0)):
        value = getattr(options, flag)
        inputs[flag] = _ints(flag, value) if value is not None else [default] * len(input_ids)
        if len(inputs[flag]) != len(input_ids):
            raise ValueError(f"--{flag} has {len(inputs[flag])} values, --input_ids {len(input_ids)}")
    if options.masked_lm_positions is not None:
        inputs["masked_lm_positions"] = _ints("masked_lm_positions", options.masked_lm_positions)
    return inputs


def _example(inputs, max_seq_length):
    """`inputs` as one serialized `tf.Example`, each feature zero-padded to `max_seq_length`."""
    import tensorflow as tf

    if len(inputs["input_ids"]) > max_seq_length:
        raise ValueError(
            f"--input_ids has {len(inputs['input_ids'])} ids, the export's length is {max_seq_length}"
        )
    feature = {
        name: tf.train.Feature(
            int64_list=tf.train.Int64List(value=values + [0] * (max_seq_length - len(values)))
        )
        for name, values in inputs.items()
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _signature_inputs(name, options, loaded):
    """The keyword arguments of signature `name`, a batch of one example."""
    import tensorflow as tf

    if name in (TEXT_SIGNATURE, TEXT_PAIR_SIGNATURE):
        if options.text is None or (name == TEXT_PAIR_SIGNATURE and options.text_b is None):
            raise ValueError(
                f"the {name} signature needs --text"
                + (" and --text_b" if name == TEXT_PAIR_SIGNATURE else "")
            )
        if name == TEXT_SIGNATURE:
            return {"text": tf.constant([options.text])}
        return {"text_a": tf.constant([options.text]), "text_b": tf.constant([options.text_b])}
    inputs = _id_inputs(options)
    if name == EXAMPLE_SIGNATURE:
        return {"examples": tf.constant([_example(inputs, int(loaded.max_seq_length.numpy()))])}
    specs = loaded.signatures[name].structured_input_signature[1]
    for key, values in inputs.items():
        if key not in specs:
            raise ValueError(f"the {name} signature takes no {key} (its inputs: {', '.join(sorted(specs))})")
        width = specs[key].shape[-1]
        if width is not None and len(values) != width:
            raise ValueError(f"--{key} has {len(values)} values; the {name} signature takes {width}")
    return {key: tf.constant([values], tf.int32) for key, values in inputs.items()}


def _json_value(tensor):
    """A tensor's one example as JSON: numbers as lists of floats or ints, strings decoded."""
    value = np.asarray(tensor.numpy()[0])  # a string output per example is bytes, not an array
    if value.dtype.kind in "SO":
        return np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(value).tolist()
    return value.tolist()


def _named(scores, labels):
    """`scores` (nested lists whose innermost run over the labels) with each innermost list a
    `{label: score}` dict in the labels' order."""
    if scores and not isinstance(scores[0], list):
        return dict(zip(labels, scores, strict=True))
    return [_named(row, labels) for row in scores]


def open_export(export_dir):
    """The SavedModel of `export_dir` (`version_directory`), loaded with TF Text's ops.

    Returns:
      (its directory, the loaded object).
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops before the load)

    path = version_directory(export_dir)
    return path, tf.saved_model.load(path)


def query_saved_model(options, export=None):
    """Calls a signature of the export on the example the options give.

    Args:
      options: A `QueryOptions`.
      export: `open_export(options.export_dir)`, if opened already.

    Returns:
      `{output name: value}` for the example, JSON-ready, the names sorted; an export's
      `label_scores` output, if any, with its scores named by the export's `labels`.

    Raises:
      ValueError: No SavedModel, an unknown signature, or inputs the signature cannot take.
    """
    path, loaded = export or open_export(options.export_dir)
    name = _signature_name(options)
    if name not in loaded.signatures:
        raise ValueError(f"{path}: no signature {name!r}; it has {', '.join(sorted(loaded.signatures))}")
    outputs = loaded.signatures[name](**_signature_inputs(name, options, loaded))
    values = {key: _json_value(outputs[key]) for key in sorted(outputs)}
    if hasattr(loaded, "label_scores"):
        scores = loaded.label_scores.numpy().decode("utf-8")
        if scores in values:
            labels = [label.decode("utf-8") for label in loaded.labels.numpy()]
            values[scores] = _named(values[scores], labels)
    return values


def run_query(options):
    """`query_saved_model`, printed as one JSON object (`tools/query_saved_model.py`)."""
    outputs = query_saved_model(options)
    print(json.dumps(outputs))
    return outputs
