"""`run_squad`: the original's `run_squad.py` (`tools/run_squad.py`), its options and its run:
train, predict (the answers' files), evaluate (bert_tf's: the official scores of the predictions)
and export, through the runner every job uses.
"""

import dataclasses
import json
import logging
import os
import random

from bert_tf.data.records import write_records
from bert_tf.export.finetuned import export_finetuned
from bert_tf.files import isfile
from bert_tf.model_files import ModelFileOptions
from bert_tf.modeling import BertSquad
from bert_tf.options import option, redefine
from bert_tf.tasks.squad.data import (
    convert_examples_to_features,
    feature_values,
    name_to_features,
    read_squad_examples,
)
from bert_tf.tasks.squad.evaluation import evaluate_files, read_dataset
from bert_tf.tasks.squad.predictions import (
    PREDICTION_FILES,
    RawResult,
    compute_predictions,
    write_predictions,
)
from bert_tf.tasks.squad.task import SquadTask
from bert_tf.text.windows import WindowOptions
from bert_tf.training.loop import write_eval_results
from bert_tf.training.options import FinetuningOptions
from bert_tf.training.runner import EVAL_RESULTS, Runner

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class SquadOptions(FinetuningOptions):
    """The flags of `tools/run_squad.py`: the common ones (SQuAD's `max_seq_length` 384), then
    the original run_squad.py's own."""

    max_seq_length: int = redefine(ModelFileOptions, "max_seq_length", default=384)
    do_predict: bool = option(
        False, "Whether to run eval on the dev set (--predict_file): writes predictions.json."
    )
    train_file: str = option(None, "SQuAD json for training. E.g., train-v1.1.json")
    predict_file: str = option(None, "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
    doc_stride: int = redefine(WindowOptions, "doc_stride", default=128)
    max_query_length: int = option(64, "Question WordPieces kept; longer questions are truncated.")
    n_best_size: int = option(20, "Answers kept per question in nbest_predictions.json.")
    max_answer_length: int = option(
        30, "The most WordPieces in an answer (start and end are predicted independently)."
    )
    verbose_logging: bool = option(False, "Log every answer that cannot be aligned with the original text.")
    version_2_with_negative: bool = option(False, "SQuAD 2.0: some questions have no answer.")
    null_score_diff_threshold: float = option(
        0.0, 'SQuAD 2.0: answer "" if null score - best non-null score exceeds this.'
    )


def _validate(options):
    for mode, flag in (("train", "train_file"), ("predict", "predict_file"), ("eval", "predict_file")):
        if getattr(options, f"do_{mode}") and not getattr(options, flag):
            raise ValueError(f"--do_{mode} needs --{flag}")
    if options.max_seq_length <= options.max_query_length + 3:
        raise ValueError(
            f"--max_seq_length ({options.max_seq_length}) must be greater than --max_query_length "
            f"({options.max_query_length}) + 3"
        )
    for flag in ("doc_stride", "n_best_size", "max_answer_length"):
        if getattr(options, flag) < 1:
            raise ValueError(f"--{flag} must be at least 1, got {getattr(options, flag)}")


def run_squad(options):
    """Trains and/or predicts as the original's `run_squad.py` (`tools/run_squad.py`).

    `--do_train` shuffles the training examples with `random.Random(12345)`, as the original,
    writes their features to `train.tf_record` and trains for `--num_train_epochs` of the
    examples (not of the features). `--do_predict` writes `eval.tf_record`, runs the latest
    checkpoint in `--output_dir` (else `--init_checkpoint`) on it and writes `predictions.json`,
    `nbest_predictions.json` and, for SQuAD 2.0, `null_odds.json`. `--do_eval` (bert_tf's)
    scores `predictions.json` against `--predict_file` by the official rules
    (`bert_tf.tasks.squad.evaluation`) and writes `eval_results.txt`. Both files are read and
    checked (for `--do_eval`, as evaluation data; without `--do_predict`, `predictions.json`
    must exist), the training steps checked and the predict features made before the first
    file is written.

    Returns:
      `{"train": metrics or None, "predict": predictions or None, "eval": results or None,
      "export": the SavedModel version directory (`--export_dir`) or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or question.
    """
    _validate(options)
    runner = Runner.for_finetuning(options)
    tokenizer = runner.pretrained.tokenizer()
    output_dir = options.output_dir
    version_2 = options.version_2_with_negative

    def convert(examples, is_training):
        return convert_examples_to_features(
            examples,
            tokenizer,
            options.max_seq_length,
            options.doc_stride,
            options.max_query_length,
            is_training,
        )

    prediction_file, _, null_odds_file = (os.path.join(output_dir, name) for name in PREDICTION_FILES)
    if options.do_train:
        train_examples = read_squad_examples(options.train_file, True, version_2)
        runner.num_train_steps(len(train_examples), options.train_file)
        # Shuffled here so that the input pipeline's small shuffle buffer suffices.
        random.Random(12345).shuffle(train_examples)
    if options.do_eval:
        read_dataset(options.predict_file, version_2)
        if not options.do_predict and not isfile(prediction_file):
            raise ValueError(f"--do_eval: {prediction_file} does not exist (run --do_predict first)")
    if options.do_predict:
        eval_examples = read_squad_examples(options.predict_file, False, version_2)
        if not eval_examples:
            raise ValueError(f"{options.predict_file}: no questions to predict")
        eval_features = list(convert(eval_examples, False))
        eval_file = os.path.join(output_dir, "eval.tf_record")
        write_records(eval_file, (feature_values(f, False) for f in eval_features))
        logger.info("Predict: %d questions, %d features", len(eval_examples), len(eval_features))

    results = {"train": None, "predict": None, "eval": None, "export": None}
    if options.do_train:
        train_file = os.path.join(output_dir, "train.tf_record")
        num_features = write_records(
            train_file, (feature_values(f, True) for f in convert(train_examples, True))
        )
        logger.info("Train: %d questions, %d features", len(train_examples), num_features)
        task = runner.build(SquadTask)
        spec = name_to_features(options.max_seq_length, True)
        results["train"] = runner.train_records(task, train_file, spec, len(train_examples))
    if options.do_predict:
        raw_results = []
        if eval_features:
            model = runner.build(BertSquad)
            runner.restore(model)
            spec = name_to_features(options.max_seq_length, False)
            logits = runner.predict_records(
                model, eval_file, spec, len(eval_features), ["start_logits", "end_logits"]
            )
            raw_results = [
                RawResult(feature.unique_id, start, end)
                for feature, start, end in zip(
                    eval_features, logits["start_logits"], logits["end_logits"], strict=True
                )
            ]
        else:  # the original's placeholder answers, without the model
            logger.warning("%s: every paragraph is empty; no answer can be found", options.predict_file)
        outputs = [os.path.join(output_dir, name) for name in PREDICTION_FILES]
        arguments = (
            eval_examples,
            eval_features,
            raw_results,
            options.n_best_size,
            options.max_answer_length,
        )
        settings = dict(
            version_2_with_negative=version_2,
            null_score_diff_threshold=options.null_score_diff_threshold,
            verbose_logging=options.verbose_logging,
        )
        do_lower_case = runner.pretrained.do_lower_case
        if runner.distribution.is_chief:
            results["predict"] = write_predictions(*arguments, do_lower_case, *outputs, **settings)[0]
        else:
            results["predict"] = compute_predictions(*arguments, do_lower_case, **settings)[0]
    if options.do_eval:
        results["eval"] = evaluate_files(
            options.predict_file, prediction_file, version_2, null_odds_file if version_2 else None
        )
        logger.info("Evaluation: %s", json.dumps(results["eval"]))
        if runner.distribution.is_chief:
            write_eval_results(results["eval"], os.path.join(output_dir, EVAL_RESULTS))
    if options.export_dir:
        # The logits per token; `text_pair` (the question cut to --max_query_length, then the
        # paragraph's first window) also returns the tokens, which the logits index.
        model = runner.model_to_export(BertSquad)
        if model is not None:
            results["export"] = export_finetuned(
                model,
                runner.pretrained,
                options.max_seq_length,
                options.export_dir,
                max_text_a_tokens=options.max_query_length,
            )
    return results
