"""`labels.txt`: the names of a fine-tuned head's outputs, one a line in the head's order.

A classifier's or tagger's head outputs positions only; the file names them wherever the model
goes: `run_classifier` and `run_tagger` write it in `--output_dir` beside the checkpoints they
train, a SavedModel export holds it in its version's `assets.extra/`, a converted Hugging Face
classifier or tagger gets it from `id2label`, and `convert_checkpoint.py --hf_output_dir` reads
it from beside the checkpoint it converts.
"""

import os

from bert_tf import files

LABELS_FILE = "labels.txt"


def write_labels(path, labels):
    """Writes `labels`, one a line, to `path` through a temporary name (`files.atomic_output`)."""
    with files.atomic_output(path) as tmp, files.open_file(tmp, "w") as writer:
        writer.write("".join(f"{label}\n" for label in labels))


def read_labels(path, flag="--labels_file"):
    """The labels of a `labels.txt`, one a line in the head's order (blank lines left out).

    Args:
      path: The file.
      flag: What the errors name the file by (the flag that gave it).

    Raises:
      ValueError: The file is missing, names no label or one twice.
    """
    try:
        with files.open_file(path) as reader:
            labels = [line.strip() for line in reader if line.strip()]
    except FileNotFoundError:
        raise ValueError(f"{flag}: {path}: no such file") from None
    if not labels:
        raise ValueError(f"{flag}: {path} names no label")
    if repeated := sorted({label for label in labels if labels.count(label) > 1}):
        raise ValueError(f"{flag}: {path} names {', '.join(repeated)} more than once")
    return labels


def labels_beside(checkpoint_prefix):
    """The `labels.txt` in the directory of a checkpoint (a fine-tuning `--output_dir`, or a
    converted Hugging Face model's directory), or None if there is none."""
    path = os.path.join(os.path.dirname(checkpoint_prefix), LABELS_FILE)
    return path if files.isfile(path) else None


def check_trained_labels(output_dir, labels):
    """Raises a ValueError if `output_dir` holds the labels of a model trained on others, or on
    the same in another order (a head's outputs are only positions: other labels would rename
    every prediction). Nothing is checked where `output_dir` has no `labels.txt`."""
    path = os.path.join(output_dir, LABELS_FILE)
    if not files.isfile(path):
        return
    trained = read_labels(path, "--output_dir")
    if trained != list(labels):
        raise ValueError(
            f"the labels ({','.join(labels)}) are not those the model in --output_dir was "
            f"trained on, in their order ({','.join(trained)}, from {path}): pass those as --labels"
        )
