"""Sentence and sentence-pair classification data: the original's `run_classifier.py` processors and
features.

- Data: the original's processors (`cola`, `mnli` with the matched dev set, `mrpc`, `xnli`) with
  its files, columns, header skipping, guids and label lists; the other GLUE tasks as GLUE
  distributes them (`sst2`, `qqp`, `stsb`, `qnli`, `rte`, `wnli`, and `mnli-mm`: MNLI with the
  mismatched dev and test sets), their columns found by the names in their header rows; and
  `tsv`/`csv` for users' own data (a header row naming the columns; `text_a_column`,
  `text_b_column`, `label_column`; `is_regression` for a score).
- Features: the original's `convert_single_example` (`[CLS] a [SEP] b [SEP]`, the pair truncated
  longest-first, segment ids, zero padding, `label_id`, `is_real_example`), written one record per
  example to `train.tf_record`, `eval.tf_record`, `predict.tf_record` with the original's feature
  names (and, only with `--use_tpu`, padded with fake examples to whole batches, as the original).
- Regression (`stsb`, `tsv`/`csv` with `--task_type=regression`): the processor's `get_labels()` is
  None and a label is a score; it goes to the records under the same name, `label_ids`, as a
  float feature (`name_to_features(..., is_regression=True)` reads it as float32), so the model,
  the runner and the predict path read one name for both kinds of task. A row to predict gets 0.0.
- Windows (`--doc_stride`, bert_tf's): a text longer than `max_seq_length` - 2 WordPieces is
  read as SQuAD reads a document (`bert_tf.text.windows`): windows of that many pieces, each
  a record with the example's label. Of a pair, `text_a` is kept whole in every window, as
  SQuAD's question, and `text_b` is cut into windows of `max_seq_length - len(text_a) - 3`
  pieces. A text that fits gives the one record it gives without windows.
"""

import csv
import dataclasses
import logging
import math
import os
from functools import partial

from bert_tf.data.records import write_records
from bert_tf.files import isfile, open_file, original_line
from bert_tf.text.packing import pack_inputs
from bert_tf.text.windows import window_spans

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class InputExample:
    """One example: `text_b` is None for a single sentence; `label` is a string of the label list,
    None for a row to predict (whose features get label id 0, as the original's placeholder
    labels: "0", or MNLI's "contradiction").

    `input_file` and `line_number` say where it was read (None for an example made in code);
    they name the place in an error and take no part in comparing examples.
    """

    guid: str
    text_a: str
    text_b: str = None
    label: str = None
    input_file: str = dataclasses.field(default=None, compare=False)
    line_number: int = dataclasses.field(default=None, compare=False)


class PaddingInputExample:
    """A fake example (all-zero features, `is_real_example` 0) that pads eval and predict sets
    to whole batches under `--use_tpu`, as the original's."""


@dataclasses.dataclass
class InputFeatures:
    """The features of one example, as written to the records."""

    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: int  # a float score for a regression
    is_real_example: bool = True


def read_tsv(
    input_file, num_columns=None, delimiter="\t", quotechar=None, min_columns=0, skip_malformed=False
):
    """Reads a delimited file as the original's `_read_tsv` (no quoting for TSV), checking that
    every row has the same number of columns, and at least those the task reads.

    Args:
      input_file: The file.
      num_columns: Columns every row must have; None: as many as the first row (the header).
      delimiter: The column separator.
      quotechar: The quote character; None reads quotes as text, as the original.
      min_columns: Columns the first row (and so every row) must have at least: one past the
        last the task reads.
      skip_malformed: Drop a row with another number of columns than expected, with one warning
        naming the file, the first such line and their number, instead of failing (QQP).

    Bytes that are not UTF-8 are dropped, as the original's `convert_to_unicode` does, with a
    warning naming the file, the first such line (the header is line 1) and their number.

    Returns:
      A list of (line number, row) with each row a list of strings, the header included; the
      line number is the file's line where the row ends.

    Raises:
      ValueError: The file is missing, the first row has fewer than `min_columns` columns, or a
        row has another number of columns than expected; the message names the file and line.
    """
    if not isfile(input_file):
        raise ValueError(f"{input_file}: no such file")
    quoting = csv.QUOTE_NONE if quotechar is None else csv.QUOTE_MINIMAL
    not_utf8 = []  # the numbers of the file's lines that are not UTF-8
    malformed = []  # the lines where the rows skipped end

    def decoded(numbered_lines):
        for number, line in numbered_lines:
            line = original_line(line)
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError:
                not_utf8.append(number)
                yield line.decode("utf-8", "ignore")  # as the original's convert_to_unicode

    with open_file(input_file, "rb") as f:
        rows = decoded(enumerate(f, start=1))
        reader = csv.reader(rows, delimiter=delimiter, quotechar=quotechar, quoting=quoting)
        lines = []
        for line in reader:
            where = f"{input_file}:{reader.line_num}"
            if not lines and len(line) < min_columns:  # the others must have as many columns
                raise ValueError(f"{where}: {len(line)} columns, expected at least {min_columns}")
            expected = num_columns if num_columns is not None else len(lines[0][1]) if lines else len(line)
            if len(line) != expected and skip_malformed and lines:
                malformed.append(reader.line_num)
                continue
            if len(line) != expected:
                source = "" if num_columns is not None else " (as the header)"
                raise ValueError(f"{where}: {len(line)} columns, expected {expected}{source}")
            lines.append((reader.line_num, line))
    if not_utf8:
        logger.warning(
            "%s: %d line%s not UTF-8 (the first is line %d); %s invalid bytes are dropped",
            input_file,
            len(not_utf8),
            " is" if len(not_utf8) == 1 else "s are",
            not_utf8[0],
            "its" if len(not_utf8) == 1 else "their",
        )
    if malformed:
        logger.warning(
            "%s: %d row%s skipped: not %d columns as the header (the first ends on line %d)",
            input_file,
            len(malformed),
            "" if len(malformed) == 1 else "s",
            len(lines[0][1]),
            malformed[0],
        )
    return lines


class DataProcessor:
    """Reads the train, dev and test examples of a task and knows its labels.

    Attributes:
      is_regression: Whether a label is a score (one output) rather than one of `get_labels()`.
      submission_name: The name of GLUE's submission file for the task (`CoLA` for `CoLA.tsv`),
        None for a task outside GLUE's leaderboard.
    """

    is_regression = False
    submission_name = None

    def train_file(self, data_dir):
        """The path of the training set's file (GLUE's `train.tsv`)."""
        return os.path.join(data_dir, "train.tsv")

    def get_train_examples(self, data_dir):
        """The `InputExample`s of the training set (`train_file`)."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """The `InputExample`s of the dev set."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """The `InputExample`s to predict (without labels)."""
        raise ValueError(f"the {type(self).__name__} has no test set (--do_predict)")

    def get_labels(self):
        """The label strings; the model's class i is `get_labels()[i]`; None for a regression."""
        raise NotImplementedError()


class GlueProcessor(DataProcessor):
    """A GLUE task: its sets are `train_file`, `dev_file` and `test_file` in `data_dir`, each read
    by the task's `_create_examples(path, set_type)`."""

    dev_file, dev_set, test_file = "dev.tsv", "dev", "test.tsv"

    def get_train_examples(self, data_dir):
        return self._create_examples(self.train_file(data_dir), "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(os.path.join(data_dir, self.dev_file), self.dev_set)

    def get_test_examples(self, data_dir):
        return self._create_examples(os.path.join(data_dir, self.test_file), "test")

    @staticmethod
    def _create_examples(path, set_type):
        raise NotImplementedError()


class XnliProcessor(DataProcessor):
    """XNLI: trained on the machine-translated MultiNLI of `language`, evaluated on that language's
    rows of `xnli.dev.tsv`; the original has no test set for it."""

    language = "zh"

    def train_file(self, data_dir):
        return os.path.join(data_dir, "multinli", f"multinli.train.{self.language}.tsv")

    def get_train_examples(self, data_dir):
        path = self.train_file(data_dir)
        examples = []
        for i, (line_number, line) in enumerate(read_tsv(path, min_columns=3)):
            if i == 0:
                continue
            label = "contradiction" if line[2] == "contradictory" else line[2]
            examples.append(InputExample(f"train-{i}", line[0], line[1], label, path, line_number))
        return examples

    def get_dev_examples(self, data_dir):
        path = os.path.join(data_dir, "xnli.dev.tsv")
        return [
            InputExample(f"dev-{i}", line[6], line[7], line[1], path, line_number)
            for i, (line_number, line) in enumerate(read_tsv(path, min_columns=8))
            if i > 0 and line[0] == self.language
        ]

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]


class MnliProcessor(GlueProcessor):
    """MultiNLI (GLUE): `train.tsv`, `dev_matched.tsv`, `test_matched.tsv`; sentences in columns
    8 and 9, the label last (the test set has none); guids from the first column."""

    dev_file, dev_set, test_file = "dev_matched.tsv", "dev_matched", "test_matched.tsv"
    submission_name = "MNLI-m"

    def get_labels(self):
        return ["contradiction", "entailment", "neutral"]

    @staticmethod
    def _create_examples(path, set_type):
        lines = read_tsv(path, min_columns=10 if set_type == "test" else 11)
        return [
            InputExample(
                f"{set_type}-{line[0]}",
                line[8],
                line[9],
                None if set_type == "test" else line[-1],
                path,
                line_number,
            )
            for line_number, line in lines[1:]
        ]


class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI's mismatched sets (`--task_name=mnli-mm`): trained on the same `train.tsv`,
    evaluated on `dev_mismatched.tsv`, predicting `test_mismatched.tsv`; columns as `mnli`'s."""

    dev_file, dev_set, test_file = "dev_mismatched.tsv", "dev_mismatched", "test_mismatched.tsv"
    submission_name = "MNLI-mm"


class MrpcProcessor(GlueProcessor):
    """MRPC (GLUE): `train.tsv`, `dev.tsv`, `test.tsv`; the label in column 0, the sentences in
    columns 3 and 4."""

    submission_name = "MRPC"

    def get_labels(self):
        return ["0", "1"]

    @staticmethod
    def _create_examples(path, set_type):
        return [
            InputExample(
                f"{set_type}-{i}",
                line[3],
                line[4],
                None if set_type == "test" else line[0],
                path,
                line_number,
            )
            for i, (line_number, line) in enumerate(read_tsv(path, min_columns=5))
            if i > 0
        ]


class ColaProcessor(GlueProcessor):
    """CoLA (GLUE): single sentences. `train.tsv` and `dev.tsv` have no header and four columns
    (label in 1, sentence in 3); `test.tsv` has a header and the sentence in column 1."""

    submission_name = "CoLA"

    def get_labels(self):
        return ["0", "1"]

    @staticmethod
    def _create_examples(path, set_type):
        if set_type == "test":
            return [
                InputExample(f"test-{i}", line[1], None, None, path, line_number)
                for i, (line_number, line) in enumerate(read_tsv(path, min_columns=2))
                if i > 0
            ]
        return [
            InputExample(f"{set_type}-{i}", line[3], None, line[1], path, line_number)
            for i, (line_number, line) in enumerate(read_tsv(path, num_columns=4))
        ]


class TableProcessor(DataProcessor):
    """Users' own data: `train.<ext>`, `dev.<ext>`, `test.<ext>` with a header row naming the columns.

    `tsv` files are tab-separated and read without quoting (as the original reads GLUE); `csv`
    files are comma-separated with `"` quoting. The test file needs no label column.

    Args:
      data_dir: Where the files are (the labels may be read from `train.<ext>`).
      extension: "tsv" or "csv".
      text_a_column: The column of the (first) text.
      text_b_column: The column of the second text of a pair; None for single texts.
      label_column: The column of the label.
      labels: The label list; None: the distinct labels of `train.<ext>`, sorted.
      is_regression: Whether the label is a score (then `labels` must be None).

    Raises:
      ValueError: `labels` given for a regression.
    """

    # Whether the columns were named by the flags (`--text_a_column`, ...), which errors name.
    columns_from_flags = True
    # Whether a row with another number of columns than the header is dropped (`read_tsv`).
    skip_malformed = False

    def __init__(
        self,
        data_dir,
        extension="tsv",
        text_a_column="sentence",
        text_b_column=None,
        label_column="label",
        labels=None,
        is_regression=False,
    ):
        if is_regression and labels:
            raise ValueError("--labels: a regression (--task_type=regression) has no labels")
        self.data_dir = data_dir
        self.extension = extension
        self.delimiter, self.quotechar = ("\t", None) if extension == "tsv" else (",", '"')
        self.text_a_column = text_a_column
        self.text_b_column = text_b_column
        self.label_column = label_column
        self.labels = list(labels) if labels else None
        self.is_regression = is_regression

    def train_file(self, data_dir):
        return os.path.join(data_dir, f"train.{self.extension}")

    def get_train_examples(self, data_dir):
        return self._create_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(data_dir, "test")

    def get_labels(self):
        if self.is_regression:
            return None
        if self.labels is None:
            train_file = self.train_file(self.data_dir)
            if not isfile(train_file):
                raise ValueError(f"{train_file}: no such file; without training data pass --labels")
            self.labels = sorted({example.label for example in self.get_train_examples(self.data_dir)})
        return self.labels

    def _create_examples(self, data_dir, set_type):
        path = os.path.join(data_dir, f"{set_type}.{self.extension}")
        lines = read_tsv(
            path, delimiter=self.delimiter, quotechar=self.quotechar, skip_malformed=self.skip_malformed
        )
        if not lines:
            raise ValueError(f"{path}: empty file (a header row naming the columns is expected)")
        header = lines[0][1]
        wanted = [("text_a_column", self.text_a_column)]
        if self.text_b_column:
            wanted.append(("text_b_column", self.text_b_column))
        if set_type != "test":
            wanted.append(("label_column", self.label_column))
        for flag, name in wanted:
            if name not in header:
                hint = f" (--{flag})" if self.columns_from_flags else ""
                raise ValueError(f"{path}: no column {name!r}{hint} in the header {header}")
        text_a = header.index(self.text_a_column)
        text_b = header.index(self.text_b_column) if self.text_b_column else None
        label = header.index(self.label_column) if set_type != "test" else None
        return [
            InputExample(
                f"{set_type}-{i}",
                line[text_a],
                line[text_b] if text_b is not None else None,
                line[label] if label is not None else None,
                path,
                line_number,
            )
            for i, (line_number, line) in enumerate(lines)
            if i > 0
        ]


class GlueTableProcessor(TableProcessor):
    """A GLUE task whose `train.tsv`, `dev.tsv` and `test.tsv` name their columns in a header row
    (read as `tsv`, without quoting): the texts and the label are found by those names, the
    test file having no label column.

    Args:
      submission_name: GLUE's name of the task (`submission_name`).
      text_a_column, text_b_column, label_column: The header's names of the columns.
      labels: The label list; None for a regression (a score).
      skip_malformed: Whether a row with another number of columns than the header is dropped
        with a warning (QQP: GLUE's `train.tsv` held rows split by a newline inside a question).
    """

    columns_from_flags = False

    def __init__(
        self, submission_name, text_a_column, text_b_column, label_column, labels, skip_malformed=False
    ):
        super().__init__(
            None, "tsv", text_a_column, text_b_column, label_column, labels, is_regression=labels is None
        )
        self.submission_name = submission_name
        self.skip_malformed = skip_malformed


# --task_name (lower-cased) -> a processor's constructor (without arguments but for tsv/csv).
# The GLUE columns are those of GLUE's distributed files (https://gluebenchmark.com/tasks).
PROCESSORS = {
    "cola": ColaProcessor,
    "sst2": partial(GlueTableProcessor, "SST-2", "sentence", None, "label", ["0", "1"]),
    "mrpc": MrpcProcessor,
    "qqp": partial(
        GlueTableProcessor, "QQP", "question1", "question2", "is_duplicate", ["0", "1"], skip_malformed=True
    ),
    "stsb": partial(GlueTableProcessor, "STS-B", "sentence1", "sentence2", "score", None),
    "mnli": MnliProcessor,
    "mnli-mm": MnliMismatchedProcessor,
    "qnli": partial(
        GlueTableProcessor, "QNLI", "question", "sentence", "label", ["entailment", "not_entailment"]
    ),
    "rte": partial(
        GlueTableProcessor, "RTE", "sentence1", "sentence2", "label", ["entailment", "not_entailment"]
    ),
    "wnli": partial(GlueTableProcessor, "WNLI", "sentence1", "sentence2", "label", ["0", "1"]),
    "xnli": XnliProcessor,
    "tsv": TableProcessor,
    "csv": TableProcessor,
}
TASK_TYPES = ("classification", "regression")


def get_processor(
    task_name,
    data_dir=None,
    text_a_column="sentence",
    text_b_column=None,
    label_column="label",
    labels=None,
    task_type="classification",
):
    """The processor of `--task_name` (case-insensitive, as the original lower-cases it).

    Args:
      task_name: One of `PROCESSORS`.
      data_dir, text_a_column, text_b_column, label_column, labels, task_type: For `tsv` and
        `csv` (`TableProcessor`); `labels` is a list or a comma-separated string; `task_type`
        one of `TASK_TYPES`.

    Raises:
      ValueError: An unknown task name (the message lists the known ones) or task type, or
        `--task_type=regression` with `--labels`.
    """
    name = (task_name or "").lower()
    if name not in PROCESSORS:
        raise ValueError(f"--task_name: unknown task {task_name!r}; known tasks: {', '.join(PROCESSORS)}")
    if task_type not in TASK_TYPES:
        raise ValueError(f"--task_type: expected one of {', '.join(TASK_TYPES)}, got {task_type!r}")
    if PROCESSORS[name] is not TableProcessor:
        if task_type != "classification":
            raise ValueError(f"--task_type={task_type} is for tsv/csv; --task_name={task_name} has its own")
        return PROCESSORS[name]()
    if isinstance(labels, str):
        labels = [label.strip() for label in labels.split(",") if label.strip()]
    return TableProcessor(
        data_dir, name, text_a_column, text_b_column, label_column, labels, task_type == "regression"
    )


def label_id(example, label_list):
    """The label of `example` as its record holds it (`label_ids`).

    Args:
      example: An `InputExample`.
      label_list: The task's labels; None for a regression.

    Returns:
      The label's index in `label_list`, or for a regression the score as a float; for an
      example to predict (no label) 0 or 0.0, the original's placeholder id.

    Raises:
      ValueError: A label not in `label_list`, or a score that is not a finite number; the
        message names the file and line the example was read from (its guid for an example
        made in code).
    """
    where = f"{example.input_file}:{example.line_number}" if example.input_file else example.guid
    if label_list is None:
        try:
            score = 0.0 if example.label is None else float(example.label)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise ValueError(f"{where}: label {example.label!r} is not a number (a regression's score)")
        return score
    if example.label is None:
        return 0
    if example.label not in label_list:
        raise ValueError(f"{where}: label {example.label!r} is not one of the labels {label_list}")
    return label_list.index(example.label)


def check_label(example, label_list):
    """Raises unless `example`'s label is one of `label_list` (a finite number where that is
    None, a regression): `label_id`'s checks."""
    label_id(example, label_list)


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """Converts one `InputExample` into `InputFeatures`, as the original.

    Args:
      ex_index: The example's index (the first five are logged).
      example: An `InputExample`, or a `PaddingInputExample` (all-zero features, not real).
      label_list: The task's labels.
      max_seq_length: The padded length; a pair is truncated longest-first to fit.
      tokenizer: A `FullTokenizer`.

    Raises:
      ValueError: The example's label is not in `label_list` (`check_label`).
    """
    if isinstance(example, PaddingInputExample):
        zeros = [0] * max_seq_length
        return InputFeatures(list(zeros), list(zeros), list(zeros), 0, is_real_example=False)
    label = label_id(example, label_list)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    packed = pack_inputs(tokenizer.tokenize(example.text_a), tokens_b, max_seq_length, tokenizer)
    if ex_index < 5:
        logged = (
            "none (an example to predict)" if example.label is None else f"{example.label} (id = {label})"
        )
        logger.info(
            "*** Example *** guid: %s | tokens: %s | label: %s",
            example.guid,
            " ".join(packed["tokens"]),
            logged,
        )
    return InputFeatures(packed["input_ids"], packed["input_mask"], packed["segment_ids"], label)


def convert_example_to_windows(example, label_list, max_seq_length, doc_stride, tokenizer):
    """The windows of one `InputExample` (module docstring), each packed as
    `convert_single_example` packs a text that fits.

    Args:
      example: An `InputExample`.
      label_list: The task's labels.
      max_seq_length: The padded length of a window, `[CLS]` and `[SEP]` included.
      doc_stride: The most WordPieces a window starts after the previous one.
      tokenizer: A `FullTokenizer`.

    Returns:
      A list of `InputFeatures`, one per window, each with the example's label id.

    Raises:
      ValueError: The label is not in `label_list`, or `text_a` of a pair leaves no room for
        `text_b` (the message names the file and line).
    """
    label = label_id(example, label_list)
    tokens_a = tokenizer.tokenize(example.text_a)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    if tokens_b:
        document, max_tokens = tokens_b, max_seq_length - len(tokens_a) - 3
        if max_tokens < 1:
            where = f"{example.input_file}:{example.line_number}" if example.input_file else example.guid
            raise ValueError(
                f"{where}: text_a has {len(tokens_a)} WordPieces, which leave no room for text_b's "
                f"windows in --max_seq_length={max_seq_length} (--doc_stride keeps text_a whole)"
            )
    else:
        document, max_tokens = tokens_a, max_seq_length - 2
    features = []
    for span in window_spans(len(document), max_tokens, doc_stride):
        window = document[span.start : span.start + span.length]
        packed = pack_inputs(*((tokens_a, window) if tokens_b else (window, None)), max_seq_length, tokenizer)
        features.append(
            InputFeatures(packed["input_ids"], packed["input_mask"], packed["segment_ids"], label)
        )
    return features


def convert_examples_to_windows(examples, label_list, max_seq_length, doc_stride, tokenizer):
    """The windows of every example, in order (`convert_example_to_windows`).

    Returns:
      (a list of `InputFeatures`, the index of each one's example).
    """
    features, example_indexes = [], []
    for index, example in enumerate(examples):
        windows = convert_example_to_windows(example, label_list, max_seq_length, doc_stride, tokenizer)
        features.extend(windows)
        example_indexes.extend([index] * len(windows))
    if len(features) > len(examples):
        logger.info(
            "%d examples read as %d windows (--doc_stride=%d)", len(examples), len(features), doc_stride
        )
    return features, example_indexes


def name_to_features(max_seq_length, is_regression=False):
    """The records' schema: the original's `file_based_input_fn_builder`'s; for a regression
    `label_ids` is a float32 score (module docstring)."""
    import tensorflow as tf

    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, output_file):
    """Writes one record per example to `output_file` (atomically), with the original's features
    `input_ids`, `input_mask`, `segment_ids`, `label_ids`, `is_real_example`.

    Returns:
      The number of records written.
    """

    return write_features(
        (
            convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer)
            for ex_index, example in enumerate(examples)
        ),
        output_file,
    )


def write_features(features, output_file):
    """Writes one record per `InputFeatures` to `output_file` (atomically), with the original's
    features `input_ids`, `input_mask`, `segment_ids`, `label_ids` (an int64 class id, or a
    float score for a regression), `is_real_example`.

    Returns:
      The number of records written.
    """
    return write_records(
        output_file,
        (
            {
                "input_ids": feature.input_ids,
                "input_mask": feature.input_mask,
                "segment_ids": feature.segment_ids,
                "label_ids": [feature.label_id],
                "is_real_example": [int(feature.is_real_example)],
            }
            for feature in features
        ),
    )
