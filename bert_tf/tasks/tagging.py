"""Token tagging (e.g. named entities) on CoNLL-2003-style files: bert_tf's, beyond the original.

- Input: one word per line, the token in the first column and its tag in the last (CoNLL-2003's
  `word POS chunk NER`, or just `word tag`), columns separated by whitespace; a blank line ends a
  sentence, `-DOCSTART-` lines end one too and are skipped. A file to predict may have the token
  column only.
- Features: each word is tokenized alone; its first WordPiece carries its label (weight 1), its
  other pieces and `[CLS]`, `[SEP]` and padding carry none (weight 0). A sentence with more
  pieces than fit between `[CLS]` and `[SEP]` is split into consecutive windows of whole words
  (each word in one window; a single word longer than a window keeps its first pieces), so every
  word gets a prediction. A word that tokenizes to nothing is one `[UNK]`.
- Model: `BertTagger`: dropout 0.1 on the sequence output in training (as the original's
  classifier does on the pooled output), then `cls/tagging/output_weights` [num_labels, H] and
  `cls/tagging/output_bias` [num_labels].
- Loss: `sum(w * nll) / (sum(w) + 1e-5)` over the labelled pieces, as the masked LM's.
- Evaluation: `eval_accuracy` (words), `eval_loss` (per labelled word), and entity-level
  `eval_precision`, `eval_recall`, `eval_f1` counted by the conlleval rules (`chunks`), which
  read IOB1, IOB2 (and IOE) tags alike.
- Output: the sentences back in CoNLL format, `token gold predicted` (or `token predicted`
  without gold tags), a blank line after each sentence: `eval_predictions.txt`,
  `test_predictions.txt`; conlleval reads them as they are. Optionally a SavedModel
  (`export_dir`) returning each token's label.
"""

import collections
import dataclasses
import functools
import io
import logging
import os
import re

import keras
from keras import ops

from bert_tf.files import atomic_output, isfile, open_file
from bert_tf.modeling import BertModel
from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.heads import ClsOutput
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.tasks.finetuning import FinetuningOptions, FinetuningRunner, write_records

logger = logging.getLogger(__name__)

DOCSTART = "-DOCSTART-"
TAGGING_DROPOUT = 0.1
EVAL_PREDICTIONS = "eval_predictions.txt"
TEST_PREDICTIONS = "test_predictions.txt"
# The labels, in the order of the head's outputs, that the model in --output_dir was trained on.
LABELS_FILE = "labels.txt"


@dataclasses.dataclass
class TaggingExample:
    """One sentence.

    Attributes:
      guid: `<set>-<n>`.
      words: The tokens of the first column.
      tags: Their tags (the last column), or None for a file without tags.
      input_file: The file it was read from.
      line: The line of its first word (word i is on line `line + i`).
    """

    guid: str
    words: list
    tags: list
    input_file: str
    line: int


# A CoNLL column: what lies between spaces and tabs (`str.split()` would also split a token at a
# no-break space).
_COLUMN = re.compile(r"[^ \t\n]+")


def read_conll(input_file, set_type, require_tags=True):
    """Reads the sentences of a CoNLL-style file.

    Args:
      input_file: The file.
      set_type: "train", "dev" or "test" (the guids' prefix).
      require_tags: Whether every word must have a tag column.

    Returns:
      A list of `TaggingExample`.

    Columns are separated by spaces and tabs only (a no-break space can be part of a token), and
    a UTF-8 byte-order mark at the start is not part of the first line.

    Raises:
      ValueError: The file is missing, a line is not UTF-8, a line has a different number of
        columns from the file's first word line, or (with `require_tags`) a line has no tag
        column; the message names the file and line.
    """
    if not isfile(input_file):
        raise ValueError(f"{input_file}: no such file")
    examples, words, tags = [], [], []
    num_columns = first_line = start = None

    def end_sentence():
        if words:
            examples.append(
                TaggingExample(
                    f"{set_type}-{len(examples)}",
                    list(words),
                    list(tags) if num_columns > 1 else None,
                    input_file,
                    start,
                )
            )
        words.clear()
        tags.clear()

    with open_file(input_file, "rb") as reader:
        data = reader.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_number = len(re.findall(r"\r\n|\r|\n", data[: e.start].decode("utf-8"))) + 1
        raise ValueError(f"{input_file}:{line_number}: not UTF-8 ({e.reason} at byte {e.start})") from None
    # Lines as Python's text mode splits them ("\n", "\r\n" or "\r"), also from gs:// files.
    for line_number, line in enumerate(io.StringIO(text, newline=None), start=1):
        columns = _COLUMN.findall(line)
        if not columns or columns[0] == DOCSTART:
            end_sentence()
            continue
        if num_columns is None:
            num_columns, first_line = len(columns), line_number
            if require_tags and num_columns < 2:
                raise ValueError(f"{input_file}:{line_number}: a token and a tag expected, found 1 column")
        if len(columns) != num_columns:
            raise ValueError(
                f"{input_file}:{line_number}: {len(columns)} columns, expected {num_columns} "
                f"(as line {first_line})"
            )
        if not words:
            start = line_number
        words.append(columns[0])
        tags.append(columns[-1])
    end_sentence()
    return examples


@dataclasses.dataclass
class TaggingFeatures:
    """One window of a sentence, as written to the records (plus where its words are).

    Attributes:
      example_index: The sentence's index.
      first_word: The index in the sentence of the window's first word.
      word_positions: The position of each word's first piece in the window.
      input_ids, input_mask, segment_ids, label_ids: int lists of `max_seq_length`.
      label_weights: float list: 1.0 at the words' first pieces.
    """

    example_index: int
    first_word: int
    word_positions: list
    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    label_weights: list


def convert_example(example_index, example, label_map, max_seq_length, tokenizer):
    """Converts one sentence into one or more windows of features (module docstring).

    Args:
      example_index: The sentence's index.
      example: A `TaggingExample`.
      label_map: Tag -> label id.
      max_seq_length: The padded length of a window, `[CLS]` and `[SEP]` included.
      tokenizer: A `FullTokenizer`.

    Returns:
      A list of `TaggingFeatures`, the windows in order.

    Raises:
      ValueError: A tag is not in `label_map`, or `max_seq_length` is below 3; the message
        names the file and line.
    """
    budget = max_seq_length - 2
    if budget < 1:
        raise ValueError(f"--max_seq_length={max_seq_length} is too short for tagging (at least 3)")
    pieces = [tokenizer.tokenize(word)[:budget] or ["[UNK]"] for word in example.words]
    labels = [0] * len(example.words)
    if example.tags is not None:
        for i, tag in enumerate(example.tags):
            if tag not in label_map:
                raise ValueError(
                    f"{example.input_file}:{example.line + i}: tag {tag!r} is not one of the labels "
                    f"{list(label_map)}"
                )
            labels[i] = label_map[tag]
    windows, start = [], 0
    while start < len(pieces):
        end, length = start, 0
        while end < len(pieces) and length + len(pieces[end]) <= budget:
            length += len(pieces[end])
            end += 1
        windows.append((start, end))
        start = end
    features = []
    for first, last in windows:
        tokens, positions = ["[CLS]"], []
        for word_pieces in pieces[first:last]:
            positions.append(len(tokens))
            tokens.extend(word_pieces)
        tokens.append("[SEP]")
        padding = [0] * (max_seq_length - len(tokens))
        label_ids = [0] * max_seq_length
        label_weights = [0.0] * max_seq_length
        for position, label in zip(positions, labels[first:last], strict=True):
            label_ids[position] = label
            label_weights[position] = 1.0
        features.append(
            TaggingFeatures(
                example_index=example_index,
                first_word=first,
                word_positions=positions,
                input_ids=tokenizer.convert_tokens_to_ids(tokens) + padding,
                input_mask=[1] * len(tokens) + padding,
                segment_ids=[0] * max_seq_length,
                label_ids=label_ids,
                label_weights=label_weights,
            )
        )
    return features


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """The windows of every sentence, in order; logs how many sentences were split.

    Returns:
      A list of `TaggingFeatures`.
    """
    label_map = {label: i for i, label in enumerate(label_list)}
    features = []
    for example_index, example in enumerate(examples):
        features.extend(convert_example(example_index, example, label_map, max_seq_length, tokenizer))
    windows = collections.Counter(feature.example_index for feature in features)
    split = sum(count > 1 for count in windows.values())
    if split:
        logger.warning(
            "%d sentences have more word pieces than --max_seq_length=%d holds; they were split "
            "into windows of whole words (%d windows for %d sentences)",
            split,
            max_seq_length,
            len(features),
            len(examples),
        )
    return features


def name_to_features(max_seq_length):
    """The records' schema."""
    import tensorflow as tf

    ints = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    return {
        "input_ids": ints,
        "input_mask": ints,
        "segment_ids": ints,
        "label_ids": ints,
        "label_weights": tf.io.FixedLenFeature([max_seq_length], tf.float32),
    }


def write_features(features, output_file):
    """Writes one record per window to `output_file` (atomically).

    Returns:
      The number of records.
    """
    return write_records(
        output_file,
        (
            {
                "input_ids": f.input_ids,
                "input_mask": f.input_mask,
                "segment_ids": f.segment_ids,
                "label_ids": f.label_ids,
                "label_weights": f.label_weights,
            }
            for f in features
        ),
    )


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTagger(BertConfigured, keras.Model):
    """`BertModel` plus a tagging head (module docstring).

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids`.
    Outputs: float32 `logits`, `probabilities` and `log_probs` [batch, seq, num_labels], int32
    `predictions` [batch, seq].

    Args:
      config: A `BertConfig` (or its dict).
      num_labels: The number of tags.
      dtype: The dtype policy; the head computes in float32.
    """

    def __init__(self, config, num_labels, name="bert_tagger", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.num_labels = num_labels
        self.bert = BertModel(config, dtype=self.dtype_policy)
        # The loss does not reach the pooler; the original's optimizer leaves such variables
        # alone (no update, no Adam slots), and so does training them not at all.
        self.bert.pooler.trainable = False
        self.cls = ClsOutput("tagging", num_labels, config.hidden_size, dtype=self.dtype_policy)
        self.cls.build()
        self.dropout = Dropout(TAGGING_DROPOUT, dtype=self.dtype_policy)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config

    def call(self, inputs, training=False):
        sequence_output = self.bert(inputs, training=training)["sequence_output"]
        logits = self.cls(self.dropout(sequence_output, training=training))
        return {
            "logits": logits,
            "probabilities": ops.softmax(logits, axis=-1),
            "log_probs": ops.log_softmax(logits, axis=-1),
            "predictions": ops.cast(ops.argmax(logits, axis=-1), "int32"),
        }


class TaggingTask:
    """The tagger's loss and metrics for `bert_tf.training.step`: the weighted mean of the
    labelled pieces' cross entropy (module docstring); `accuracy` and `word_loss` over them,
    written as `eval_accuracy` and `eval_loss`.

    Args:
      config: A `BertConfig`.
      num_labels: The number of tags.
      dtype: The model's dtype policy.
    """

    metric_names = ("accuracy", "word_loss")
    eval_keys = {"accuracy": "eval_accuracy", "word_loss": "eval_loss"}
    loss_epsilons = (1e-5,)

    def __init__(self, config, num_labels, dtype=None):
        self.model = BertTagger(config, num_labels, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[sum(label_weights)]`."""
        return [ops.sum(batch["label_weights"])]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[sum(w * nll)]`, `{"accuracy": ..., "word_loss": ...}`) with w = `label_weights`."""
        weights = batch["label_weights"]
        labels = ops.cast(batch["label_ids"], "int32")
        weighted_nll = ops.sum(weights * negative_log_likelihood(outputs["log_probs"], labels))
        correct = ops.cast(outputs["predictions"] == labels, "float32")
        words = ops.sum(weights)
        return [weighted_nll], {
            "accuracy": (ops.sum(weights * correct), words),
            "word_loss": (weighted_nll, words),
        }


# -- conlleval's chunks ---------------------------------------------------------------------------


def _split_tag(label):
    """conlleval's split of a label at its first hyphen: "B-PER" -> ("B", "PER"), "O" -> ("O", "")."""
    tag, _, chunk_type = label.partition("-")
    return tag, chunk_type


def _end_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's endOfChunk: did a chunk end between the previous word and this one?"""
    return (
        (prev_tag, tag)
        in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
        or (prev_tag not in ("O", ".") and prev_type != chunk_type)
        or prev_tag in ("[", "]")
    )


def _start_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's startOfChunk: did a chunk start at this word?"""
    return (
        (prev_tag, tag)
        in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}
        or (tag not in ("O", ".") and prev_type != chunk_type)
        or tag in ("[", "]")
    )


def chunks(labels):
    """The chunks of one sentence's labels, by conlleval's rules.

    A chunk ends before a word where `endOfChunk` holds and starts at a word where
    `startOfChunk` holds (given the previous word's tag and type; before the first word and
    after the last one the tag is "O"). So IOB2 chunks start at B; IOB1 chunks start at an I
    after O or after a chunk of another type, and at a B; a type change always ends a chunk.

    Args:
      labels: The sentence's labels ("B-PER", "I-LOC", "O", ...).

    Returns:
      A list of (start, end, type), `end` exclusive.
    """
    found = []
    start, start_type = None, ""
    prev_tag, prev_type = "O", ""
    for i, label in enumerate([*labels, "O"]):
        tag, chunk_type = _split_tag(label)
        starts = _start_of_chunk(prev_tag, tag, prev_type, chunk_type)
        if start is not None and (starts or _end_of_chunk(prev_tag, tag, prev_type, chunk_type)):
            found.append((start, i, start_type))
            start = None
        if starts and i < len(labels):
            start, start_type = i, chunk_type
        prev_tag, prev_type = tag, chunk_type
    return found


def entity_scores(gold_sentences, predicted_sentences):
    """conlleval's overall scores: chunks found in both with the same span and type, over the
    predicted chunks (precision) and the gold ones (recall), and word accuracy.

    Args:
      gold_sentences: A list of label lists.
      predicted_sentences: A list of label lists of the same lengths.

    Returns:
      `{"precision", "recall", "f1", "accuracy"}` as fractions (conlleval prints percentages;
      0 where undefined), and the counts `gold_chunks`, `predicted_chunks`, `correct_chunks`.
    """
    counts = collections.Counter()
    for gold, predicted in zip(gold_sentences, predicted_sentences, strict=True):
        if len(gold) != len(predicted):
            raise ValueError(f"a sentence of {len(gold)} gold labels has {len(predicted)} predicted labels")
        gold_chunks, predicted_chunks = chunks(gold), chunks(predicted)
        counts["gold_chunks"] += len(gold_chunks)
        counts["predicted_chunks"] += len(predicted_chunks)
        counts["correct_chunks"] += len(set(gold_chunks) & set(predicted_chunks))
        counts["correct_words"] += sum(g == p for g, p in zip(gold, predicted, strict=True))
        counts["words"] += len(gold)
    precision = counts["correct_chunks"] / counts["predicted_chunks"] if counts["predicted_chunks"] else 0.0
    recall = counts["correct_chunks"] / counts["gold_chunks"] if counts["gold_chunks"] else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": counts["correct_words"] / counts["words"] if counts["words"] else 0.0,
        "gold_chunks": counts["gold_chunks"],
        "predicted_chunks": counts["predicted_chunks"],
        "correct_chunks": counts["correct_chunks"],
    }


# -- predictions ---------------------------------------------------------------------------------


def word_predictions(examples, features, predictions, label_list):
    """Maps the windows' predicted piece labels back to each sentence's words.

    Args:
      examples: The `TaggingExample`s.
      features: Their `TaggingFeatures`, in order.
      predictions: int [num_features, max_seq_length] label ids.
      label_list: The labels.

    Returns:
      A list of predicted label lists, one per example.
    """
    predicted = [[None] * len(example.words) for example in examples]
    for feature, row in zip(features, predictions, strict=True):
        for i, position in enumerate(feature.word_positions):
            predicted[feature.example_index][feature.first_word + i] = label_list[row[position]]
    return predicted


def write_conll(examples, predicted, output_file):
    """Writes `token gold predicted` (or `token predicted`) lines, a blank line after each sentence."""
    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        for example, labels in zip(examples, predicted, strict=True):
            gold = example.tags if example.tags is not None else [None] * len(labels)
            for word, gold_label, label in zip(example.words, gold, labels, strict=True):
                writer.write(" ".join(c for c in (word, gold_label, label) if c is not None) + "\n")
            writer.write("\n")


@dataclasses.dataclass
class TaggingOptions(FinetuningOptions):
    """The flags of `tools/run_tagger.py`: the common ones, then the tagger's."""

    train_file: str = None
    eval_file: str = None
    predict_file: str = None
    labels: str = None


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


def _check_trained_labels(output_dir, label_list):
    """Raises a ValueError if `output_dir` holds the labels of a model trained on others (a
    head's outputs are only positions: other labels would rename every prediction)."""
    path = os.path.join(output_dir, LABELS_FILE)
    if not isfile(path):
        return
    with open_file(path) as f:
        trained = f.read().split("\n")[:-1]
    if trained != label_list:
        raise ValueError(
            f"the labels ({','.join(label_list)}) are not those the model in --output_dir was "
            f"trained on, in their order ({','.join(trained)}, from {path}): pass those as --labels"
        )


def run_tagger(options):
    """Trains, evaluates and predicts a tagger (`tools/run_tagger.py`).

    Every input file is read and converted, and the training steps checked, before the first
    record is written; every record is written before the first training step. The labels are
    `--labels` in order, else the tags of the training file, sorted.

    Returns:
      `{"train": metrics or None, "eval": results or None, "predict": predicted label lists or
      None, "export": the SavedModel version directory or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or line.
    """
    for mode, flag in (("train", "train_file"), ("eval", "eval_file"), ("predict", "predict_file")):
        if getattr(options, f"do_{mode}") and not getattr(options, flag):
            raise ValueError(f"--do_{mode} needs --{flag}")
    runner = FinetuningRunner(options)
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
    _check_trained_labels(options.output_dir, label_list)
    spec = name_to_features(options.max_seq_length)

    converted = {}  # mode -> (features, record file)
    for mode, examples in (("train", train_examples), ("eval", eval_examples), ("predict", predict_examples)):
        if examples is not None:
            features = convert_examples_to_features(
                examples, label_list, options.max_seq_length, runner.tokenizer
            )
            if mode == "train":
                runner.num_train_steps(len(features), options.train_file)
            converted[mode] = (features, os.path.join(options.output_dir, f"{mode}.tf_record"))
    for features, path in converted.values():
        write_features(features, path)
    if options.do_train and runner.distribution.is_chief:
        labels_file = os.path.join(options.output_dir, LABELS_FILE)
        with atomic_output(labels_file) as tmp, open_file(tmp, "w") as writer:
            writer.write("".join(f"{label}\n" for label in label_list))

    results = {"train": None, "eval": None, "predict": None, "export": None}
    num_labels = len(label_list)

    def predict(model, examples, mode):
        features, path = converted[mode]
        outputs = runner.predict(model, path, spec, len(features), ["predictions"])
        return word_predictions(examples, features, outputs["predictions"], label_list)

    if options.do_train:
        features, path = converted["train"]
        task = runner.build(TaggingTask, num_labels)
        results["train"] = runner.train(task, path, spec, len(features))
    if options.do_eval:
        features, path = converted["eval"]

        def entity_results(model):
            predicted = predict(model, eval_examples, "eval")
            if runner.distribution.is_chief:
                write_conll(eval_examples, predicted, os.path.join(options.output_dir, EVAL_PREDICTIONS))
            scores = entity_scores([example.tags for example in eval_examples], predicted)
            return {f"eval_{name}": scores[name] for name in ("precision", "recall", "f1")}

        task = runner.build(TaggingTask, num_labels)
        results["eval"] = runner.evaluate(task, path, spec, len(features), more_results=entity_results)
    if options.do_predict:
        model = runner.build(BertTagger, num_labels)
        runner.restore(model)
        predicted = predict(model, predict_examples, "predict")
        if runner.distribution.is_chief:
            write_conll(predict_examples, predicted, os.path.join(options.output_dir, TEST_PREDICTIONS))
        results["predict"] = predicted
    if options.export_dir:
        # Per token, the probabilities and the most probable label's name; the text signatures
        # also return the tokens, against which a word's label is that of its first piece.
        factory = functools.partial(BertTagger, num_labels=num_labels)
        results["export"] = runner.export(
            factory, ("probabilities",), (label_list, "probabilities", "labels"), text_tokens=True
        )
    return results
