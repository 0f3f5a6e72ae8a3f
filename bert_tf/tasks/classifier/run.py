"""`run_classifier`: the original's `run_classifier.py` (`tools/run_classifier.py`), its options and
its run: train, evaluate, predict and export through the runner every job uses.

Outputs in `--output_dir`: `labels.txt` when training (the labels in the head's order, which a
later run there must keep, and which `convert_checkpoint.py --hf_output_dir` reads as
`id2label`); `eval_results.txt` (the original's `eval_accuracy`, `eval_loss`, `global_step`,
`loss`, plus GLUE's metrics of the task, `metrics.py`: `eval_f1` for MRPC and QQP,
`eval_matthews_correlation` for CoLA, `eval_pearson` and `eval_spearmanr` for a regression);
`test_results.tsv` (the original's: one row of class probabilities per example, no header; a
regression's score a row) and `test_predictions.tsv` (a header, then per example its guid, the
predicted label and each label's probability under its name); for a GLUE task GLUE's submission
file beside them (`CoLA.tsv`, `MNLI-mm.tsv`, ...: a header `index`, `prediction`, then per test
example its index and label, or score for STS-B); optionally a SavedModel (`--export_dir`)
returning `probabilities` and the `label` they pick (a regression's `scores`), with `labels.txt`
in its `assets.extra/`.

GLUE's metrics need every dev example's prediction: where the task has metrics beyond accuracy
(or with `--doc_stride`), the dev records are predicted once more after the evaluation pass
(`Runner.evaluate`'s `more_results`), and the metrics are computed from those predictions.

With `--doc_stride` each window of a long text is a record (`convert_examples_to_windows`):
training counts windows, each with its example's label; evaluation and prediction pool the
windows' probabilities per example (`--window_pooling`), so the results keep one row per
example and `eval_accuracy`, `eval_loss` are over the examples' pooled probabilities.
"""

import dataclasses
import logging
import os

from bert_tf.export.finetuned import export_finetuned
from bert_tf.files import atomic_output, open_file
from bert_tf.labels import LABELS_FILE, check_trained_labels, write_labels
from bert_tf.modeling import BertClassifier, BertRegressor
from bert_tf.options import option
from bert_tf.tasks.classifier.data import (
    TASK_TYPES,
    PaddingInputExample,
    check_label,
    convert_examples_to_windows,
    convert_single_example,
    file_based_convert_examples_to_features,
    get_processor,
    label_id,
    name_to_features,
    write_features,
)
from bert_tf.tasks.classifier.metrics import accuracy, glue_metrics, metric_names
from bert_tf.tasks.classifier.task import ClassifierTask, RegressionTask
from bert_tf.text.windows import WINDOW_POOLINGS, WindowOptions, pool_windows
from bert_tf.training.options import FinetuningOptions
from bert_tf.training.runner import Runner

logger = logging.getLogger(__name__)

TEST_RESULTS = "test_results.tsv"
TEST_PREDICTIONS = "test_predictions.tsv"


@dataclasses.dataclass
class ClassifierOptions(FinetuningOptions, WindowOptions):
    """The flags of `tools/run_classifier.py`: the common ones, then the classifier's."""

    task_name: str = option(
        None,
        "The task: a GLUE task (cola, sst2, mrpc, qqp, stsb, mnli, mnli-mm: MNLI's mismatched dev and "
        "test sets, qnli, rte, wnli), xnli, or tsv/csv (your own files).",
        required=True,
    )
    data_dir: str = option(None, "The input data dir, with the task's .tsv files.", required=True)
    text_a_column: str = option("sentence", "tsv/csv: the header name of the text column.")
    text_b_column: str = option(None, "tsv/csv: the header name of the second text of a pair.")
    label_column: str = option("label", "tsv/csv: the header name of the label column.")
    task_type: str = option(
        "classification",
        "tsv/csv: classification (a label of --labels), or regression (a score, one output).",
        TASK_TYPES,
    )
    labels: str = option(
        None, "tsv/csv: the labels, comma-separated (default: those of train.tsv/csv, sorted)."
    )
    window_pooling: str = option(
        "mean",
        "With --doc_stride: an example's probabilities from its windows' by their mean, or each label's max.",
        WINDOW_POOLINGS,
    )

    def validate(self):
        """`FinetuningOptions.validate`, then `--doc_stride` and `--window_pooling`."""
        super().validate()
        self.validate_windows()
        if self.window_pooling not in WINDOW_POOLINGS:
            raise ValueError(
                f"--window_pooling: expected one of {', '.join(WINDOW_POOLINGS)}, got {self.window_pooling!r}"
            )


def _pad_for_tpu(examples, batch_size):
    """The original pads eval and predict sets to whole batches with fake examples on TPU only."""
    return examples + [PaddingInputExample() for _ in range(-len(examples) % batch_size)]


def write_test_results(probabilities, output_file):
    """`test_results.tsv`: one line per example, its class probabilities tab-separated (as the
    original prints NumPy float32s); for a regression, [n] scores, one a line."""
    import numpy as np

    rows = np.reshape(probabilities, (len(probabilities), -1))
    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        for row in rows:
            writer.write("\t".join(str(np.float32(p)) for p in row) + "\n")


def write_test_predictions(examples, probabilities, label_list, output_file):
    """`test_predictions.tsv`: a header `guid`, `label`, then the labels' names; then per example
    its guid, the name of its most probable label and each label's probability (as
    `test_results.tsv` prints them). For a regression (`label_list` None, [n] scores): a
    header `guid`, `score`, then each example's guid and score."""
    import numpy as np

    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        if label_list is None:
            writer.write("guid\tscore\n")
            for example, score in zip(examples, probabilities, strict=True):
                writer.write(f"{example.guid}\t{np.float32(score)!s}\n")
            return
        writer.write("\t".join(["guid", "label", *label_list]) + "\n")
        for example, row in zip(examples, probabilities, strict=True):
            best = label_list[int(np.argmax(row))]
            writer.write("\t".join([example.guid, best, *(str(np.float32(p)) for p in row)]) + "\n")


def write_submission(predictions, output_file):
    """GLUE's submission file of a task (`<submission_name>.tsv`): a header `index`,
    `prediction`, then per test example, in the test file's order, its index (0, 1, ..., the
    test files' `index` column) and its prediction: a label's name as GLUE spells it, or a
    score with 3 decimals (STS-B).

    Args:
      predictions: A list of label names, or an [n] array of scores (a regression).
      output_file: The file, written atomically.
    """
    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        writer.write("index\tprediction\n")
        for index, prediction in enumerate(predictions):
            text = prediction if isinstance(prediction, str) else f"{float(prediction):.3f}"
            writer.write(f"{index}\t{text}\n")


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
    runner = Runner.for_finetuning(options)
    tokenizer = runner.pretrained.tokenizer()
    processor = get_processor(
        options.task_name,
        options.data_dir,
        options.text_a_column,
        options.text_b_column,
        options.label_column,
        options.labels,
        options.task_type,
    )
    if not options.data_dir:
        raise ValueError("--data_dir is required")
    regression = processor.is_regression
    if regression and options.doc_stride is not None:
        raise ValueError(
            f"--doc_stride: --task_name={options.task_name} is a regression, whose scores are not "
            "pooled over windows; leave --doc_stride out (a long text is cut)"
        )
    label_list = processor.get_labels()
    # The head, its task, its output and the head's arguments: one score, or a class each label.
    if regression:
        head, task_class, output, head_args = BertRegressor, RegressionTask, "scores", ()
    else:
        head, task_class, output, head_args = (
            BertClassifier,
            ClassifierTask,
            "probabilities",
            (len(label_list),),
        )
    if label_list is not None:
        check_trained_labels(options.output_dir, label_list)
    spec = name_to_features(options.max_seq_length, processor.is_regression)
    out = options.output_dir

    def read(get_examples, set_name=None):
        set_examples = get_examples(options.data_dir)
        if set_name and not set_examples:  # (the training set's count is checked by its steps)
            raise ValueError(f"--data_dir={options.data_dir}: the {set_name} set has no examples")
        for example in set_examples:
            check_label(example, label_list)
        return set_examples

    windowed = options.doc_stride is not None
    examples = {}  # mode -> (examples, record file)
    if options.do_train:
        train_examples = read(processor.get_train_examples)
        if not windowed:  # with windows, the records count
            runner.num_train_steps(len(train_examples), processor.train_file(options.data_dir))
        examples["train"] = (train_examples, "train.tf_record")
    if options.do_eval:
        eval_examples = read(processor.get_dev_examples, "dev")
        if options.use_tpu and not windowed:
            eval_examples = _pad_for_tpu(eval_examples, options.eval_batch_size)
        examples["eval"] = (eval_examples, "eval.tf_record")
    if options.do_predict:
        predict_examples = read(processor.get_test_examples, "test")
        num_actual_predict_examples = len(predict_examples)
        if options.use_tpu and not windowed:
            predict_examples = _pad_for_tpu(predict_examples, options.predict_batch_size)
        examples["predict"] = (predict_examples, "predict.tf_record")

    records = {}  # mode -> (file, number of records)
    if windowed:
        windows = {}  # mode -> (features, the example index of each)
        for mode, (mode_examples, _) in examples.items():
            windows[mode] = convert_examples_to_windows(
                mode_examples, label_list, options.max_seq_length, options.doc_stride, tokenizer
            )
        if options.do_train:
            runner.num_train_steps(len(windows["train"][0]), processor.train_file(options.data_dir))
        for mode, (features, _) in windows.items():
            if options.use_tpu and mode != "train":  # fake windows to whole batches, as above
                batch_size = getattr(options, f"{mode}_batch_size")
                padding = convert_single_example(
                    0, PaddingInputExample(), label_list, options.max_seq_length, tokenizer
                )
                features = features + [padding] * (-len(features) % batch_size)
            path = os.path.join(out, examples[mode][1])
            records[mode] = (path, write_features(features, path))
    else:
        for mode, (mode_examples, name) in examples.items():
            path = os.path.join(out, name)
            file_based_convert_examples_to_features(
                mode_examples, label_list, options.max_seq_length, tokenizer, path
            )
            records[mode] = (path, len(mode_examples))
    if options.do_train and runner.distribution.is_chief and label_list is not None:
        write_labels(os.path.join(out, LABELS_FILE), label_list)

    def pooled_probabilities(model, mode):
        """The probabilities of `mode`'s examples, pooled over their windows."""
        path, num_records = records[mode]
        features, example_indexes = windows[mode]
        outputs = runner.predict_records(model, path, spec, num_records, ["probabilities"])
        return pool_windows(
            outputs["probabilities"][: len(features)],
            example_indexes,
            len(examples[mode][0]),
            options.window_pooling,
        )

    def example_results(model):
        """GLUE's metrics of the task over the dev examples' predictions (module docstring);
        with windows also `eval_accuracy` and `eval_loss` over their pooled probabilities."""
        import numpy as np

        real_examples = [e for e in examples["eval"][0] if not isinstance(e, PaddingInputExample)]
        labels = np.array([label_id(example, label_list) for example in real_examples])
        if windowed:
            probabilities = pooled_probabilities(model, "eval").astype(np.float64)
        else:
            path, num_records = records["eval"]
            outputs = runner.predict_records(model, path, spec, num_records, [output])
            probabilities = outputs[output][: len(real_examples)].astype(np.float64)
        predictions = probabilities if regression else probabilities.argmax(axis=-1)
        metrics = glue_metrics(options.task_name, predictions, labels, is_regression=regression)
        results = {f"eval_{name}": value for name, value in metrics.items()}
        if windowed:  # over the examples, not the windows the evaluation pass saw
            results["eval_accuracy"] = accuracy(predictions, labels)
            results["eval_loss"] = float(np.mean(-np.log(probabilities[np.arange(len(labels)), labels])))
        return results

    results = {"train": None, "eval": None, "predict": None, "export": None}
    if options.do_train:
        train_file, num_train_records = records["train"]
        task = runner.build(task_class, *head_args)
        results["train"] = runner.train_records(task, train_file, spec, num_train_records)
    if options.do_eval:
        task = runner.build(task_class, *head_args)
        eval_file, num_records = records["eval"]
        more = windowed or regression or metric_names(options.task_name) != ("accuracy",)
        results["eval"] = runner.evaluate_records(
            task, eval_file, spec, num_records, more_results=example_results if more else None
        )
    if options.do_predict:
        model = runner.build(head, *head_args)
        runner.restore(model)
        if windowed:
            probabilities = pooled_probabilities(model, "predict")
        else:
            predict_file, num_records = records["predict"]
            outputs = runner.predict_records(model, predict_file, spec, num_records, [output])
            probabilities = outputs[output][:num_actual_predict_examples]
        if runner.distribution.is_chief:
            write_test_results(probabilities, os.path.join(out, TEST_RESULTS))
            actual_examples = predict_examples[:num_actual_predict_examples]
            write_test_predictions(
                actual_examples, probabilities, label_list, os.path.join(out, TEST_PREDICTIONS)
            )
            if processor.submission_name:
                predicted = (
                    probabilities if regression else [label_list[i] for i in probabilities.argmax(axis=-1)]
                )
                write_submission(predicted, os.path.join(out, f"{processor.submission_name}.tsv"))
        results["predict"] = probabilities
    if options.export_dir:
        # Every signature returns the scores, or the probabilities and the most probable class.
        model = runner.model_to_export(head, *head_args)
        if model is not None:
            results["export"] = export_finetuned(
                model,
                runner.pretrained,
                options.max_seq_length,
                options.export_dir,
                labels=label_list,
                doc_stride=options.doc_stride,
                window_pooling=options.window_pooling,
            )
    return results
