"""`run_tagger` (`tools/run_tagger.py`): its options and its run: train, evaluate (`eval_accuracy`
over words, `eval_loss` per labelled word, entity-level `eval_precision`, `eval_recall`, `eval_f1`),
predict (`eval_predictions.txt`, `test_predictions.txt` in CoNLL format) and export (a SavedModel
returning each token's label), through the runner every job uses.

With `--doc_stride` a sentence longer than a window is read as overlapping windows
(`bert_tf.tasks.tagging.data.convert_example_to_windows`); each word is evaluated and predicted
once, from the window where its first piece has the most context.
"""

import dataclasses
import logging
import os

from bert_tf.export.finetuned import export_finetuned
from bert_tf.labels import LABELS_FILE, check_trained_labels, write_labels
from bert_tf.modeling import BertTagger
from bert_tf.options import option
from bert_tf.tasks.tagging.data import (
    convert_examples_to_features,
    name_to_features,
    read_conll,
    token_predictions,
    word_predictions,
    write_conll,
    write_features,
)
from bert_tf.tasks.tagging.metrics import entity_scores
from bert_tf.tasks.tagging.task import TaggingTask
from bert_tf.text.windows import WindowOptions
from bert_tf.training.options import FinetuningOptions
from bert_tf.training.runner import Runner

logger = logging.getLogger(__name__)

EVAL_PREDICTIONS = "eval_predictions.txt"
TEST_PREDICTIONS = "test_predictions.txt"


@dataclasses.dataclass
class TaggingOptions(FinetuningOptions, WindowOptions):
    """The flags of `tools/run_tagger.py`: the common ones, then the tagger's."""

    train_file: str = option(None, "CoNLL-style training file (token first, tag last column).")
    eval_file: str = option(None, "CoNLL-style dev file, for --do_eval.")
    predict_file: str = option(None, "CoNLL-style file to tag (the tag column may be absent).")
    labels: str = option(
        None, "The tags, comma-separated, in the model's order (default: those of --train_file, sorted)."
    )

    def validate(self):
        """`FinetuningOptions.validate`, then `--doc_stride`."""
        super().validate()
        self.validate_windows()


def _label_list(options, train_examples):
    """`--labels` in order, else the tags of the training file, sorted."""
    if options.labels:
        labels = [label.strip() for label in options.labels.split(",") if label.strip()]
        if not labels:
            raise ValueError(f"--labels={options.labels!r} names no label")
        if repeated := sorted({label for label in labels if labels.count(label) > 1}):
            raise ValueError(f"--labels names {', '.join(repeated)} more than once")
        return labels
    if train_examples is None:
        if not options.train_file:
            raise ValueError("--labels is required without --train_file (the checkpoint's labels, in order)")
        train_examples = read_conll(options.train_file, "train")
    return sorted({tag for example in train_examples for tag in example.tags})


def run_tagger(options):
    """Trains, evaluates and predicts a tagger (`tools/run_tagger.py`).

    Every input file is read and converted, and the training steps checked, before the first
    record is written; every record is written before the first training step. The labels are
    `--labels` in order, else the tags of the training file, sorted.

    Returns:
      `{"train": metrics or None, "eval": results or None, "predict": the predicted labels of
      each sentence's words or None, "predict_tokens": the predicted labels of each sentence's
      WordPieces (`token_predictions`) or None, "export": the SavedModel version directory or
      None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or line.
    """
    for mode, flag in (("train", "train_file"), ("eval", "eval_file"), ("predict", "predict_file")):
        if getattr(options, f"do_{mode}") and not getattr(options, flag):
            raise ValueError(f"--do_{mode} needs --{flag}")
    runner = Runner.for_finetuning(options)
    tokenizer = runner.pretrained.tokenizer()
    train_examples = read_conll(options.train_file, "train") if options.do_train else None
    eval_examples = read_conll(options.eval_file, "dev") if options.do_eval else None
    predict_examples = (
        read_conll(options.predict_file, "test", require_tags=False) if options.do_predict else None
    )
    for flag, examples in (("eval_file", eval_examples), ("predict_file", predict_examples)):
        if examples == []:  # only blank and -DOCSTART- lines
            raise ValueError(f"{getattr(options, flag)}: no sentence")
    label_list = _label_list(options, train_examples)
    logger.info("Labels: %s", " ".join(label_list))
    check_trained_labels(options.output_dir, label_list)
    spec = name_to_features(options.max_seq_length)

    converted = {}  # mode -> (features, record file)
    for mode, examples in (("train", train_examples), ("eval", eval_examples), ("predict", predict_examples)):
        if examples is not None:
            features = convert_examples_to_features(
                examples,
                label_list,
                options.max_seq_length,
                tokenizer,
                options.doc_stride,
                is_training=mode == "train",
            )
            if mode == "train":
                runner.num_train_steps(len(features), options.train_file)
            converted[mode] = (features, os.path.join(options.output_dir, f"{mode}.tf_record"))
    for features, path in converted.values():
        write_features(features, path)
    if options.do_train and runner.distribution.is_chief:
        # The labels, in the order of the head's outputs, of the model trained in --output_dir.
        write_labels(os.path.join(options.output_dir, LABELS_FILE), label_list)

    results = {"train": None, "eval": None, "predict": None, "predict_tokens": None, "export": None}
    num_labels = len(label_list)

    def predict(model, mode):
        """The features of `mode` and their predicted label ids."""
        features, path = converted[mode]
        outputs = runner.predict_records(model, path, spec, len(features), ["predictions"])
        return features, outputs["predictions"]

    if options.do_train:
        features, path = converted["train"]
        task = runner.build(TaggingTask, num_labels)
        results["train"] = runner.train_records(task, path, spec, len(features))
    if options.do_eval:
        features, path = converted["eval"]

        def entity_results(model):
            predicted = word_predictions(eval_examples, *predict(model, "eval"), label_list)
            if runner.distribution.is_chief:
                write_conll(eval_examples, predicted, os.path.join(options.output_dir, EVAL_PREDICTIONS))
            scores = entity_scores([example.tags for example in eval_examples], predicted)
            return {f"eval_{name}": scores[name] for name in ("precision", "recall", "f1")}

        task = runner.build(TaggingTask, num_labels)
        results["eval"] = runner.evaluate_records(
            task, path, spec, len(features), more_results=entity_results
        )
    if options.do_predict:
        model = runner.build(BertTagger, num_labels)
        runner.restore(model)
        features, predictions = predict(model, "predict")
        predicted = word_predictions(predict_examples, features, predictions, label_list)
        results["predict_tokens"] = token_predictions(predict_examples, features, predictions, label_list)
        if runner.distribution.is_chief:
            write_conll(predict_examples, predicted, os.path.join(options.output_dir, TEST_PREDICTIONS))
        results["predict"] = predicted
    if options.export_dir:
        # Per token, the probabilities and the most probable label's name; the text signatures
        # also return the tokens, against which a word's label is that of its first piece.
        model = runner.model_to_export(BertTagger, num_labels)
        if model is not None:
            results["export"] = export_finetuned(
                model,
                runner.pretrained,
                options.max_seq_length,
                options.export_dir,
                labels=label_list,
                doc_stride=options.doc_stride,
            )
    return results
