"""Sentence and sentence-pair classification: the original's `run_classifier.py`.

- Data: the original's processors (`cola`, `mnli` with the matched dev set, `mrpc`, `xnli`) with
  its files, columns, header skipping, guids and label lists, plus `tsv`/`csv` for users' own data
  (a header row naming the columns; `text_a_column`, `text_b_column`, `label_column`).
- Features: the original's `convert_single_example` (`[CLS] a [SEP] b [SEP]`, the pair truncated
  longest-first, segment ids, zero padding, `label_id`, `is_real_example`), written one record per
  example to `train.tf_record`, `eval.tf_record`, `predict.tf_record` with the original's feature
  names (and, only with `--use_tpu`, padded with fake examples to whole batches, as the original).
- Model: `BertClassifier`, the original's head: dropout 0.1 on the pooled output in training,
  `logits = pooled @ output_weights^T + output_bias` with `output_weights` [num_labels, H] and
  `output_bias` [num_labels] at the top level of the checkpoint (no scope), as the original's.
- Task: the mean cross entropy over the real examples; `eval_accuracy` and `eval_loss` weighted
  by `is_real_example`, as the original's `metric_fn`.
- Outputs: `eval_results.txt` and `test_results.tsv` (one row of class probabilities per
  example) in `--output_dir`; optionally a SavedModel (`export_dir`) returning `probabilities`
  and the `label` they pick.
"""

import csv
import dataclasses
import functools
import logging
import os

import keras
from keras import ops

from bert_tf.files import atomic_output, isfile, open_file, original_line
from bert_tf.modeling import BertModel
from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.heads import create_output_weights, output_logits
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.tasks.finetuning import FinetuningOptions, FinetuningRunner, write_records
from bert_tf.text.packing import pack_inputs

logger = logging.getLogger(__name__)

# The original's dropout on the pooled output (keep_prob 0.9), whatever the config says.
CLASSIFIER_DROPOUT = 0.1
TEST_RESULTS = "test_results.tsv"


@dataclasses.dataclass
class InputExample:
    """One example: `text_b` is None for a single sentence; `label` is a string of the label list.

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
    label_id: int
    is_real_example: bool = True


def read_tsv(input_file, num_columns=None, delimiter="\t", quotechar=None, min_columns=0):
    """Reads a delimited file as the original's `_read_tsv` (no quoting for TSV), checking that
    every row has the same number of columns, and at least those the task reads.

    Args:
      input_file: The file.
      num_columns: Columns every row must have; None: as many as the first row (the header).
      delimiter: The column separator.
      quotechar: The quote character; None reads quotes as text, as the original.
      min_columns: Columns the first row (and so every row) must have at least: one past the
        last the task reads.

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
    with open_file(input_file, "rb") as f:
        rows = (original_line(line).decode("utf-8", "ignore") for line in f)
        reader = csv.reader(rows, delimiter=delimiter, quotechar=quotechar, quoting=quoting)
        lines = []
        for line in reader:
            where = f"{input_file}:{reader.line_num}"
            if not lines and len(line) < min_columns:  # the others must have as many columns
                raise ValueError(f"{where}: {len(line)} columns, expected at least {min_columns}")
            expected = num_columns if num_columns is not None else len(lines[0][1]) if lines else len(line)
            if len(line) != expected:
                source = "" if num_columns is not None else " (as the header)"
                raise ValueError(f"{where}: {len(line)} columns, expected {expected}{source}")
            lines.append((reader.line_num, line))
    return lines


class DataProcessor:
    """Reads the train, dev and test examples of a task and knows its labels."""

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
        """The `InputExample`s to predict (their labels are placeholders)."""
        raise ValueError(f"the {type(self).__name__} has no test set (--do_predict)")

    def get_labels(self):
        """The label strings; the model's class i is `get_labels()[i]`."""
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
                "contradiction" if set_type == "test" else line[-1],
                path,
                line_number,
            )
            for line_number, line in lines[1:]
        ]


class MrpcProcessor(GlueProcessor):
    """MRPC (GLUE): `train.tsv`, `dev.tsv`, `test.tsv`; the label in column 0, the sentences in
    columns 3 and 4."""

    def get_labels(self):
        return ["0", "1"]

    @staticmethod
    def _create_examples(path, set_type):
        return [
            InputExample(
                f"{set_type}-{i}", line[3], line[4], "0" if set_type == "test" else line[0], path, line_number
            )
            for i, (line_number, line) in enumerate(read_tsv(path, min_columns=5))
            if i > 0
        ]


class ColaProcessor(GlueProcessor):
    """CoLA (GLUE): single sentences. `train.tsv` and `dev.tsv` have no header and four columns
    (label in 1, sentence in 3); `test.tsv` has a header and the sentence in column 1."""

    def get_labels(self):
        return ["0", "1"]

    @staticmethod
    def _create_examples(path, set_type):
        if set_type == "test":
            return [
                InputExample(f"test-{i}", line[1], None, "0", path, line_number)
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
    """

    def __init__(
        self,
        data_dir,
        extension="tsv",
        text_a_column="sentence",
        text_b_column=None,
        label_column="label",
        labels=None,
    ):
        self.data_dir = data_dir
        self.extension = extension
        self.delimiter, self.quotechar = ("\t", None) if extension == "tsv" else (",", '"')
        self.text_a_column = text_a_column
        self.text_b_column = text_b_column
        self.label_column = label_column
        self.labels = list(labels) if labels else None

    def train_file(self, data_dir):
        return os.path.join(data_dir, f"train.{self.extension}")

    def get_train_examples(self, data_dir):
        return self._create_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._create_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._create_examples(data_dir, "test")

    def get_labels(self):
        if self.labels is None:
            train_file = self.train_file(self.data_dir)
            if not isfile(train_file):
                raise ValueError(f"{train_file}: no such file; without training data pass --labels")
            self.labels = sorted({example.label for example in self.get_train_examples(self.data_dir)})
        return self.labels

    def _create_examples(self, data_dir, set_type):
        path = os.path.join(data_dir, f"{set_type}.{self.extension}")
        lines = read_tsv(path, delimiter=self.delimiter, quotechar=self.quotechar)
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
                raise ValueError(f"{path}: no column {name!r} (--{flag}) in the header {header}")
        text_a = header.index(self.text_a_column)
        text_b = header.index(self.text_b_column) if self.text_b_column else None
        label = header.index(self.label_column) if set_type != "test" else None
        return [
            InputExample(
                f"{set_type}-{i}",
                line[text_a],
                line[text_b] if text_b is not None else None,
                line[label] if label is not None else self.get_labels()[0],
                path,
                line_number,
            )
            for i, (line_number, line) in enumerate(lines)
            if i > 0
        ]


PROCESSORS = {
    "cola": ColaProcessor,
    "mnli": MnliProcessor,
    "mrpc": MrpcProcessor,
    "xnli": XnliProcessor,
    "tsv": TableProcessor,
    "csv": TableProcessor,
}


def get_processor(
    task_name, data_dir=None, text_a_column="sentence", text_b_column=None, label_column="label", labels=None
):
    """The processor of `--task_name` (case-insensitive, as the original lower-cases it).

    Args:
      task_name: One of `PROCESSORS`.
      data_dir, text_a_column, text_b_column, label_column, labels: For `tsv` and `csv`
        (`TableProcessor`); `labels` is a list or a comma-separated string.

    Raises:
      ValueError: An unknown task name; the message lists the known ones.
    """
    name = (task_name or "").lower()
    if name not in PROCESSORS:
        raise ValueError(f"--task_name: unknown task {task_name!r}; known tasks: {', '.join(PROCESSORS)}")
    if PROCESSORS[name] is not TableProcessor:
        return PROCESSORS[name]()
    if isinstance(labels, str):
        labels = [label.strip() for label in labels.split(",") if label.strip()]
    return TableProcessor(data_dir, name, text_a_column, text_b_column, label_column, labels)


def check_label(example, label_list):
    """Raises unless `example`'s label is one of `label_list`.

    Args:
      example: An `InputExample`.
      label_list: The task's labels.

    Raises:
      ValueError: An unknown label; the message names the file and line the example was read
        from (its guid for an example made in code).
    """
    if example.label not in label_list:
        where = f"{example.input_file}:{example.line_number}" if example.input_file else example.guid
        raise ValueError(f"{where}: label {example.label!r} is not one of the labels {label_list}")


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
    check_label(example, label_list)
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    packed = pack_inputs(tokenizer.tokenize(example.text_a), tokens_b, max_seq_length, tokenizer)
    label_id = label_list.index(example.label)
    if ex_index < 5:
        logger.info(
            "*** Example *** guid: %s | tokens: %s | label: %s (id = %d)",
            example.guid,
            " ".join(packed["tokens"]),
            example.label,
            label_id,
        )
    return InputFeatures(packed["input_ids"], packed["input_mask"], packed["segment_ids"], label_id)


def name_to_features(max_seq_length):
    """The records' schema: the original's `file_based_input_fn_builder`'s."""
    import tensorflow as tf

    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer, output_file):
    """Writes one record per example to `output_file` (atomically), with the original's features
    `input_ids`, `input_mask`, `segment_ids`, `label_ids`, `is_real_example`.

    Returns:
      The number of records written.
    """

    def records():
        for ex_index, example in enumerate(examples):
            feature = convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer)
            yield {
                "input_ids": feature.input_ids,
                "input_mask": feature.input_mask,
                "segment_ids": feature.segment_ids,
                "label_ids": [feature.label_id],
                "is_real_example": [int(feature.is_real_example)],
            }

    return write_records(output_file, records())


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(BertConfigured, keras.Model):
    """`BertModel` plus the original's classification head (module docstring).

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids` (other
    features are ignored).
    Outputs: float32 `logits`, `probabilities` and `log_probs` [batch, num_labels].

    Args:
      config: A `BertConfig` (or its dict).
      num_labels: The number of classes.
      dtype: The dtype policy (e.g. "mixed_bfloat16"); the head computes in float32.
    """

    def __init__(self, config, num_labels, name="bert_classifier", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.num_labels = num_labels
        self.bert = BertModel(config, dtype=self.dtype_policy)
        # Created here, outside any layer's scope: the original's top-level names.
        self.output_weights, self.output_bias = create_output_weights(num_labels, config.hidden_size)
        self.dropout = Dropout(CLASSIFIER_DROPOUT, dtype=self.dtype_policy)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config

    def call(self, inputs, training=False):
        pooled_output = self.dropout(self.bert(inputs, training=training)["pooled_output"], training=training)
        logits = output_logits(pooled_output, self.output_weights, self.output_bias)
        return {
            "logits": logits,
            "probabilities": ops.softmax(logits, axis=-1),
            "log_probs": ops.log_softmax(logits, axis=-1),
        }


class ClassifierTask:
    """The classifier's loss and metrics for `bert_tf.training.step`.

    The loss is the mean cross entropy over the real examples (all of a training batch, as the
    original's `reduce_mean`); `accuracy` and `example_loss` are weighted by `is_real_example`,
    written to `eval_results.txt` as the original's `eval_accuracy` and `eval_loss`.

    Args:
      config: A `BertConfig`.
      num_labels: The number of classes.
      dtype: The model's dtype policy.
    """

    metric_names = ("accuracy", "example_loss")
    eval_keys = {"accuracy": "eval_accuracy", "example_loss": "eval_loss"}
    loss_epsilons = (0.0,)

    def __init__(self, config, num_labels, dtype=None):
        self.model = BertClassifier(config, num_labels, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(is_real_example)]`."""
        return [ops.sum(ops.cast(batch["is_real_example"], "float32"))]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[sum(w * nll)]`, `{"accuracy": ..., "example_loss": ...}`) with w = `is_real_example`."""
        weights = ops.cast(batch["is_real_example"], "float32")
        labels = ops.cast(batch["label_ids"], "int32")
        weighted_nll = ops.sum(weights * negative_log_likelihood(outputs["log_probs"], labels))
        correct = ops.cast(ops.argmax(outputs["logits"], axis=-1) == labels, "float32")
        real = ops.sum(weights)
        return [weighted_nll], {
            "accuracy": (ops.sum(weights * correct), real),
            "example_loss": (weighted_nll, real),
        }


@dataclasses.dataclass
class ClassifierOptions(FinetuningOptions):
    """The flags of `tools/run_classifier.py`: the common ones, then the classifier's."""

    task_name: str = None
    data_dir: str = None
    text_a_column: str = "sentence"
    text_b_column: str = None
    label_column: str = "label"
    labels: str = None


def _pad_for_tpu(examples, batch_size):
    """The original pads eval and predict sets to whole batches with fake examples on TPU only."""
    return examples + [PaddingInputExample() for _ in range(-len(examples) % batch_size)]


def write_test_results(probabilities, output_file):
    """`test_results.tsv`: one line per example, its class probabilities tab-separated (as the
    original prints NumPy float32s)."""
    import numpy as np

    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        for row in probabilities:
            writer.write("\t".join(str(np.float32(p)) for p in row) + "\n")


def run_classifier(options):
    """Trains, evaluates, predicts and exports as the original's `run_classifier.py` does
    (`tools/run_classifier.py`).

    Every input file is read, and every label checked, before the first record is written;
    every record is written before the first training step.

    Returns:
      `{"train": metrics or None, "eval": results or None, "predict": probabilities or None,
      "export": the SavedModel version directory or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or line.
    """
    runner = FinetuningRunner(options)  # the original's checks first, in its order
    processor = get_processor(
        options.task_name,
        options.data_dir,
        options.text_a_column,
        options.text_b_column,
        options.label_column,
        options.labels,
    )
    if not options.data_dir:
        raise ValueError("--data_dir is required")
    label_list = processor.get_labels()
    spec = name_to_features(options.max_seq_length)
    out = options.output_dir

    def read(get_examples, set_name=None):
        set_examples = get_examples(options.data_dir)
        if set_name and not set_examples:  # (the training set's count is checked by its steps)
            raise ValueError(f"--data_dir={options.data_dir}: the {set_name} set has no examples")
        for example in set_examples:
            check_label(example, label_list)
        return set_examples

    examples = {}  # mode -> (examples, record file)
    if options.do_train:
        train_examples = read(processor.get_train_examples)
        runner.num_train_steps(len(train_examples), processor.train_file(options.data_dir))
        examples["train"] = (train_examples, "train.tf_record")
    if options.do_eval:
        eval_examples = read(processor.get_dev_examples, "dev")
        if options.use_tpu:
            eval_examples = _pad_for_tpu(eval_examples, options.eval_batch_size)
        examples["eval"] = (eval_examples, "eval.tf_record")
    if options.do_predict:
        predict_examples = read(processor.get_test_examples, "test")
        num_actual_predict_examples = len(predict_examples)
        if options.use_tpu:
            predict_examples = _pad_for_tpu(predict_examples, options.predict_batch_size)
        examples["predict"] = (predict_examples, "predict.tf_record")

    records = {}  # mode -> (file, number of records)
    for mode, (mode_examples, name) in examples.items():
        path = os.path.join(out, name)
        file_based_convert_examples_to_features(
            mode_examples, label_list, options.max_seq_length, runner.tokenizer, path
        )
        records[mode] = (path, len(mode_examples))

    results = {"train": None, "eval": None, "predict": None, "export": None}
    num_labels = len(label_list)
    if options.do_train:
        train_file, num_train_examples = records["train"]
        task = runner.build(ClassifierTask, num_labels)
        results["train"] = runner.train(task, train_file, spec, num_train_examples)
    if options.do_eval:
        task = runner.build(ClassifierTask, num_labels)
        eval_file, num_records = records["eval"]
        results["eval"] = runner.evaluate(task, eval_file, spec, num_records)
    if options.do_predict:
        model = runner.build(BertClassifier, num_labels)
        runner.restore(model)
        predict_file, num_records = records["predict"]
        outputs = runner.predict(model, predict_file, spec, num_records, ["probabilities"])
        probabilities = outputs["probabilities"][:num_actual_predict_examples]
        if runner.distribution.is_chief:
            write_test_results(probabilities, os.path.join(out, TEST_RESULTS))
        results["predict"] = probabilities
    if options.export_dir:
        # Every signature returns the probabilities and the name of the most probable class.
        factory = functools.partial(BertClassifier, num_labels=num_labels)
        results["export"] = runner.export(factory, ("probabilities",), (label_list, "probabilities", "label"))
    return results
