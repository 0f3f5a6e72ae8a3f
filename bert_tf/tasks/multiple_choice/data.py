"""Multiple-choice data (SWAG): the CSV files, and each example's choices packed as pairs.

- Files: `--task_name=swag` reads SWAG's CSVs as distributed (`train.csv`, `val.csv`,
  `test.csv`; columns `sent1`, `sent2`, `ending0`-`ending3`, `label`, others ignored);
  `--task_name=multiple_choice` reads `train.csv`, `dev.csv`, `test.csv` with the columns
  `--text_a_column` (the context), `--text_b_column` (optional: a text put before each
  ending), `--ending_columns` and `--label_column`. A label is the index of the right ending;
  the test file's may be empty or its column absent (SWAG's `test.csv` has none).
- Features: choice i is the pair (context, `f"{text_b} {ending_i}"`), as transformers'
  `run_swag.py` packs it, each packed by `bert_tf.text.packing.pack_inputs` (the original's
  longest-first truncation: BUILD_NOTES, "Multiple choice"); a record per example holds
  int [choices, max_seq_length] `input_ids`, `input_mask`, `segment_ids`, its `label_ids` and
  `is_real_example`.
"""

import dataclasses
import logging
import os

from bert_tf.data.records import write_records
from bert_tf.tasks.classifier.data import read_tsv
from bert_tf.text.packing import pack_inputs

logger = logging.getLogger(__name__)

SWAG_ENDINGS = ("ending0", "ending1", "ending2", "ending3")


@dataclasses.dataclass
class MultipleChoiceExample:
    """One example: a context, an optional text before every ending, the endings, and the index
    of the right one (None for an example to predict).

    `input_file` and `line_number` say where it was read; they take no part in comparing
    examples."""

    guid: str
    context: str
    question: str
    endings: list
    label: int = None
    input_file: str = dataclasses.field(default=None, compare=False)
    line_number: int = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class MultipleChoiceFiles:
    """Where a task's examples are: its files in `--data_dir` and their columns.

    Attributes:
      set_files: Set name ("train", "dev", "test") -> file name.
      context_column, question_column, ending_columns, label_column: The header names of the
        columns (`question_column` None: none), each with the flag that names it in errors.
    """

    set_files: dict
    context_column: tuple
    question_column: tuple
    ending_columns: tuple
    label_column: tuple

    def path(self, data_dir, set_name):
        """The file of `set_name` in `data_dir`."""
        return os.path.join(data_dir, self.set_files[set_name])

    @property
    def num_choices(self):
        """The number of endings of every example."""
        return len(self.ending_columns[0])


def task_files(task_name, text_a_column=None, text_b_column=None, ending_columns=None, label_column=None):
    """The files and columns of `--task_name` `swag` or `multiple_choice` (module docstring).

    Args:
      task_name: "swag" or "multiple_choice" (any case).
      text_a_column, text_b_column, ending_columns, label_column: For `multiple_choice`:
        the flags' values, `ending_columns` comma-separated.

    Raises:
      ValueError: An unknown task, or `multiple_choice` without two endings.
    """
    name = task_name.lower()
    if name == "swag":
        return MultipleChoiceFiles(
            {"train": "train.csv", "dev": "val.csv", "test": "test.csv"},
            ("sent1", "SWAG's"),
            ("sent2", "SWAG's"),
            (SWAG_ENDINGS, "SWAG's"),
            ("label", "SWAG's"),
        )
    if name != "multiple_choice":
        raise ValueError(f"--task_name: {task_name!r} is not a multiple-choice task (swag, multiple_choice)")
    endings = tuple(column.strip() for column in (ending_columns or "").split(",") if column.strip())
    if len(endings) < 2:
        raise ValueError(f"--ending_columns: name at least two columns, got {ending_columns!r}")
    return MultipleChoiceFiles(
        {"train": "train.csv", "dev": "dev.csv", "test": "test.csv"},
        (text_a_column, "--text_a_column"),
        (text_b_column, "--text_b_column") if text_b_column else None,
        (endings, "--ending_columns"),
        (label_column, "--label_column"),
    )


def read_examples(files, data_dir, set_name):
    """The examples of one set, every row checked.

    Args:
      files: A `MultipleChoiceFiles`.
      data_dir: `--data_dir`.
      set_name: "train", "dev" or "test"; a test row's label may be empty, or the column absent.

    Returns:
      A list of `MultipleChoiceExample`s, guids `<set>-<row>`.

    Raises:
      ValueError: A missing file or column, a row of another number of columns, or a label that
        is not an ending's index; the message names the file (and line, or the flag).
    """
    path = files.path(data_dir, set_name)
    lines = read_tsv(path, delimiter=",", quotechar='"')
    if not lines:
        raise ValueError(f"{path}: empty file (a header row naming the columns is expected)")
    header = lines[0][1]

    def index(column, flag, required=True):
        if column not in header:
            if required:
                raise ValueError(f"{path}: no column {column!r} ({flag}) in the header {header}")
            return None
        return header.index(column)

    context = index(*files.context_column)
    question = index(*files.question_column) if files.question_column else None
    endings = [index(column, files.ending_columns[1]) for column in files.ending_columns[0]]
    label = index(*files.label_column, required=set_name != "test")
    examples = []
    for i, (line_number, line) in enumerate(lines[1:]):
        label_id = None
        text = line[label].strip() if label is not None else ""
        if text or set_name != "test":
            if not text.isdigit() or int(text) >= len(endings):
                raise ValueError(
                    f"{path}:{line_number}: label {text!r} is not the index of one of the "
                    f"{len(endings)} endings (0 to {len(endings) - 1})"
                )
            label_id = int(text)
        examples.append(
            MultipleChoiceExample(
                f"{set_name}-{i}",
                line[context],
                line[question] if question is not None else None,
                [line[e] for e in endings],
                label_id,
                path,
                line_number,
            )
        )
    return examples


def convert_example(ex_index, example, max_seq_length, tokenizer):
    """The features of one example: each choice packed as a pair (module docstring).

    Args:
      ex_index: The example's index (the first five are logged).
      example: A `MultipleChoiceExample`.
      max_seq_length: The padded length of a choice; a pair is truncated longest-first.
      tokenizer: A `FullTokenizer`.

    Returns:
      A dict of `input_ids`, `input_mask`, `segment_ids` ([choices] lists of max_seq_length
      ints), `label_ids` (0 for an example to predict) and `is_real_example`.
    """
    tokens_a = tokenizer.tokenize(example.context)
    choices = []
    for ending in example.endings:
        second = ending if example.question is None else f"{example.question} {ending}"
        choices.append(pack_inputs(tokens_a, tokenizer.tokenize(second), max_seq_length, tokenizer))
    if ex_index < 5:
        logger.info(
            "*** Example *** guid: %s | %s | label: %s",
            example.guid,
            " | ".join(" ".join(choice["tokens"]) for choice in choices),
            "none (an example to predict)" if example.label is None else example.label,
        )
    features = {
        key: [choice[key] for choice in choices] for key in ("input_ids", "input_mask", "segment_ids")
    }
    features["label_ids"] = 0 if example.label is None else example.label
    features["is_real_example"] = 1
    return features


def name_to_features(num_choices, max_seq_length):
    """The records' schema: int64 [choices, max_seq_length] ids, a label and `is_real_example`."""
    import tensorflow as tf

    shape = [num_choices, max_seq_length]
    return {
        "input_ids": tf.io.FixedLenFeature(shape, tf.int64),
        "input_mask": tf.io.FixedLenFeature(shape, tf.int64),
        "segment_ids": tf.io.FixedLenFeature(shape, tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def write_examples(examples, max_seq_length, tokenizer, output_file):
    """Writes one record per example to `output_file` (atomically; `convert_example`).

    Returns:
      The number of records written.
    """

    def records():
        for ex_index, example in enumerate(examples):
            features = convert_example(ex_index, example, max_seq_length, tokenizer)
            yield {
                **{
                    key: [i for row in features[key] for i in row]
                    for key in ("input_ids", "input_mask", "segment_ids")
                },
                "label_ids": [features["label_ids"]],
                "is_real_example": [features["is_real_example"]],
            }

    return write_records(output_file, records())
