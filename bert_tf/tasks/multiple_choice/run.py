"""`run_multiple_choice`: `tools/run_classifier.py --task_name=swag` (SWAG's CSVs) or
`--task_name=multiple_choice` (your CSVs), its options and its run: train, evaluate, predict and
export through the runner every job uses.

Outputs in `--output_dir`: `eval_results.txt` (`eval_accuracy`, `eval_loss`), `test_results.tsv`
(as the classifier's: one row per example, each ending's probability tab-separated in ending
order, no header); optionally a SavedModel (`--export_dir`) returning `probabilities`
[batch, choices].
"""

import dataclasses
import logging
import os

from bert_tf.export.finetuned import export_finetuned
from bert_tf.modeling import BertMultipleChoice
from bert_tf.options import option, redefine
from bert_tf.tasks.classifier.run import TEST_RESULTS, ClassifierOptions, run_classifier, write_test_results
from bert_tf.tasks.multiple_choice.data import name_to_features, read_examples, task_files, write_examples
from bert_tf.tasks.multiple_choice.task import MultipleChoiceTask
from bert_tf.training.runner import Runner

logger = logging.getLogger(__name__)

# The --task_name values this job runs.
TASK_NAMES = ("swag", "multiple_choice")


@dataclasses.dataclass
class MultipleChoiceOptions(ClassifierOptions):
    """The flags of `tools/run_classifier.py`: the classifier's, and the multiple-choice ones."""

    task_name: str = redefine(
        ClassifierOptions,
        "task_name",
        help=ClassifierOptions.__dataclass_fields__["task_name"].metadata["help"].rstrip(".")
        + "; or swag/multiple_choice (multiple choice: SWAG's CSVs, or yours).",
    )
    ending_columns: str = option(
        None,
        "multiple_choice: the header names of the ending columns, comma-separated (the context is "
        "--text_a_column, an optional text before each ending --text_b_column, the index of the "
        "right ending --label_column).",
    )

    def validate(self):
        """`ClassifierOptions.validate`; `--doc_stride` and `--labels` are the classifier's only."""
        super().validate()
        if self.task_name.lower() in TASK_NAMES:
            for flag in ("doc_stride", "labels"):
                if getattr(self, flag) is not None:
                    raise ValueError(f"--{flag}: not for --task_name={self.task_name}")


def is_multiple_choice(task_name):
    """Whether `--task_name` is this job's (any case)."""
    return (task_name or "").lower() in TASK_NAMES


def run_multiple_choice(options):
    """Trains, evaluates, predicts and exports a multiple-choice model (module docstring).

    Every input file is read and checked before the first record is written; every record is
    written before the first training step.

    Returns:
      `{"train": metrics or None, "eval": results or None, "predict": probabilities
      [examples, choices] or None, "export": the SavedModel version directory or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or line.
    """
    files = task_files(
        options.task_name,
        options.text_a_column,
        options.text_b_column,
        options.ending_columns,
        options.label_column,
    )
    runner = Runner.for_finetuning(options)
    tokenizer = runner.pretrained.tokenizer()
    examples = {}
    for mode, set_name in (("train", "train"), ("eval", "dev"), ("predict", "test")):
        if getattr(options, f"do_{mode}"):
            examples[mode] = read_examples(files, options.data_dir, set_name)
            if not examples[mode]:
                raise ValueError(f"{files.path(options.data_dir, set_name)}: no examples")
    if options.do_train:
        runner.num_train_steps(len(examples["train"]), files.path(options.data_dir, "train"))
    records = {}
    for mode, mode_examples in examples.items():
        path = os.path.join(options.output_dir, f"{mode}.tf_record")
        records[mode] = (path, write_examples(mode_examples, options.max_seq_length, tokenizer, path))
    spec = name_to_features(files.num_choices, options.max_seq_length)

    results = {"train": None, "eval": None, "predict": None, "export": None}
    if options.do_train:
        task = runner.build(MultipleChoiceTask)
        train_file, num_records = records["train"]
        results["train"] = runner.train_records(task, train_file, spec, num_records)
    if options.do_eval:
        task = runner.build(MultipleChoiceTask)
        eval_file, num_records = records["eval"]
        results["eval"] = runner.evaluate_records(task, eval_file, spec, num_records)
    if options.do_predict:
        model = runner.build(BertMultipleChoice)
        runner.restore(model)
        predict_file, num_records = records["predict"]
        outputs = runner.predict_records(model, predict_file, spec, num_records, ["probabilities"])
        if runner.distribution.is_chief:
            write_test_results(outputs["probabilities"], os.path.join(options.output_dir, TEST_RESULTS))
        results["predict"] = outputs["probabilities"]
    if options.export_dir:
        model = runner.model_to_export(BertMultipleChoice)
        if model is not None:
            results["export"] = export_finetuned(
                model, runner.pretrained, options.max_seq_length, options.export_dir
            )
    return results


def run_classifier_tool(options):
    """The job of `tools/run_classifier.py`: `run_multiple_choice` for `--task_name=swag` or
    `multiple_choice`, else the original's `run_classifier` (`bert_tf.tasks.classifier.run`).

    Args:
      options: `MultipleChoiceOptions` (the classifier's, and `--ending_columns`).

    Returns:
      The job's results.
    """
    if is_multiple_choice(options.task_name):
        return run_multiple_choice(options)
    return run_classifier(options)
