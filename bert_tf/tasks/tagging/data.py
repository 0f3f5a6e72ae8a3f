"""Token tagging data (e.g. named entities) on CoNLL-2003-style files: bert_tf's, beyond the original.

- Input: one word per line, the token in the first column and its tag in the last (CoNLL-2003's
  `word POS chunk NER`, or just `word tag`), columns separated by whitespace; a blank line ends a
  sentence, `-DOCSTART-` lines end one too and are skipped. A file to predict may have the token
  column only.
- Features: each word is tokenized alone; its first WordPiece carries its label (weight 1), its
  other pieces and `[CLS]`, `[SEP]` and padding carry none (weight 0). A sentence with more
  pieces than fit between `[CLS]` and `[SEP]` is split into consecutive windows of whole words
  (each word in one window; a single word longer than a window keeps its first pieces), so every
  word gets a prediction. A word that tokenizes to nothing is one `[UNK]`.
- Windows (`--doc_stride`): the sentence's pieces (no word cut short) are read as SQuAD reads a
  document (`bert_tf.text.windows`): overlapping windows of `max_seq_length` - 2 pieces. In
  training every word whose first piece is in a window is labelled there; in evaluation and
  prediction only in the window where that piece has the most context, so each word is
  counted and predicted once.
- Output: the sentences back in CoNLL format, `token gold predicted` (or `token predicted`
  without gold tags), a blank line after each sentence; conlleval reads them as they are.
"""

import bisect
import collections
import dataclasses
import io
import logging
import re

from bert_tf.data.records import write_records
from bert_tf.files import atomic_output, isfile, open_file
from bert_tf.text.windows import DocSpan, max_context_outputs, max_context_spans, window_spans

logger = logging.getLogger(__name__)


DOCSTART = "-DOCSTART-"


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
      word_positions: The position of each word's first piece in the window (with
        `--doc_stride`: of the consecutive words whose first piece has its most context here).
      span: The window's `DocSpan` over the sentence's pieces.
      input_ids, input_mask, segment_ids, label_ids: int lists of `max_seq_length`.
      label_weights: float list: 1.0 at the labelled words' first pieces.
    """

    example_index: int
    first_word: int
    word_positions: list
    span: DocSpan
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
    budget = _window_budget(max_seq_length)
    pieces = [tokenizer.tokenize(word)[:budget] or ["[UNK]"] for word in example.words]
    labels = _label_ids(example, label_map)
    windows, start = [], 0
    while start < len(pieces):
        end, length = start, 0
        while end < len(pieces) and length + len(pieces[end]) <= budget:
            length += len(pieces[end])
            end += 1
        windows.append((start, end))
        start = end
    features = []
    first_piece = 0
    for first, last in windows:
        span = DocSpan(first_piece, sum(len(word_pieces) for word_pieces in pieces[first:last]))
        first_piece += span.length
        tokens, positions = ["[CLS]"], []
        for word_pieces in pieces[first:last]:
            positions.append(len(tokens))
            tokens.extend(word_pieces)
        tokens.append("[SEP]")
        labelled = zip(positions, labels[first:last], strict=True)
        features.append(
            _window_features(
                example_index, first, positions, span, tokens, labelled, max_seq_length, tokenizer
            )
        )
    return features


def _window_features(
    example_index, first_word, word_positions, span, tokens, labelled, max_seq_length, tokenizer
):
    """One window's `TaggingFeatures`: `tokens` (`[CLS] ... [SEP]`) padded to `max_seq_length`,
    with each `(position, label id)` of `labelled` weighted 1 and every other position 0."""
    padding = [0] * (max_seq_length - len(tokens))
    label_ids = [0] * max_seq_length
    label_weights = [0.0] * max_seq_length
    for position, label in labelled:
        label_ids[position] = label
        label_weights[position] = 1.0
    return TaggingFeatures(
        example_index=example_index,
        first_word=first_word,
        word_positions=word_positions,
        span=span,
        input_ids=tokenizer.convert_tokens_to_ids(tokens) + padding,
        input_mask=[1] * len(tokens) + padding,
        segment_ids=[0] * max_seq_length,
        label_ids=label_ids,
        label_weights=label_weights,
    )


def _window_budget(max_seq_length):
    """The pieces a window holds between `[CLS]` and `[SEP]`."""
    if max_seq_length < 3:
        raise ValueError(f"--max_seq_length={max_seq_length} is too short for tagging (at least 3)")
    return max_seq_length - 2


def _label_ids(example, label_map):
    """The label id of each word of `example` (0 without tags), naming the file and line of a
    tag not in `label_map`."""
    labels = [0] * len(example.words)
    if example.tags is not None:
        for i, tag in enumerate(example.tags):
            if tag not in label_map:
                raise ValueError(
                    f"{example.input_file}:{example.line + i}: tag {tag!r} is not one of the labels "
                    f"{list(label_map)}"
                )
            labels[i] = label_map[tag]
    return labels


def convert_example_to_windows(
    example_index, example, label_map, max_seq_length, doc_stride, tokenizer, is_training
):
    """Converts one sentence into the overlapping windows of `--doc_stride` (module docstring).

    Args:
      example_index: The sentence's index.
      example: A `TaggingExample`.
      label_map: Tag -> label id.
      max_seq_length: The padded length of a window, `[CLS]` and `[SEP]` included.
      doc_stride: The most pieces a window starts after the previous one.
      tokenizer: A `FullTokenizer`.
      is_training: Label every word in every window that holds its first piece; else only
        in that piece's max-context window.

    Returns:
      A list of `TaggingFeatures`, the windows in order.

    Raises:
      ValueError: As `convert_example`.
    """
    budget = _window_budget(max_seq_length)
    labels = _label_ids(example, label_map)
    pieces, first_pieces = [], []
    for word in example.words:
        first_pieces.append(len(pieces))
        pieces.extend(tokenizer.tokenize(word) or ["[UNK]"])
    spans = window_spans(len(pieces), budget, doc_stride)
    best = max_context_spans(spans, len(pieces))
    features = []
    for index, span in enumerate(spans):
        end = span.start + span.length
        words = range(bisect.bisect_left(first_pieces, span.start), bisect.bisect_left(first_pieces, end))
        # The max-context windows of the pieces follow each other, so a window's words are consecutive.
        owned = [word for word in words if best[first_pieces[word]] == index]
        tokens = ["[CLS]", *pieces[span.start : end], "[SEP]"]
        position = {word: 1 + first_pieces[word] - span.start for word in words}
        labelled = [(position[word], labels[word]) for word in (words if is_training else owned)]
        first_word = owned[0] if owned else words.start
        owned_positions = [position[word] for word in owned]
        features.append(
            _window_features(
                example_index, first_word, owned_positions, span, tokens, labelled, max_seq_length, tokenizer
            )
        )
    return features


def convert_examples_to_features(
    examples, label_list, max_seq_length, tokenizer, doc_stride=None, is_training=False
):
    """The windows of every sentence, in order; logs how many sentences were split.

    Args:
      examples: The `TaggingExample`s.
      label_list: The labels.
      max_seq_length: The padded length of a window.
      tokenizer: A `FullTokenizer`.
      doc_stride: None: windows of whole words (`convert_example`); else the overlapping
        windows of `convert_example_to_windows`.
      is_training: With `doc_stride`: whether the features are for training.

    Returns:
      A list of `TaggingFeatures`.
    """
    label_map = {label: i for i, label in enumerate(label_list)}
    features = []
    for example_index, example in enumerate(examples):
        if doc_stride is None:
            features.extend(convert_example(example_index, example, label_map, max_seq_length, tokenizer))
        else:
            features.extend(
                convert_example_to_windows(
                    example_index, example, label_map, max_seq_length, doc_stride, tokenizer, is_training
                )
            )
    windows = collections.Counter(feature.example_index for feature in features)
    split = sum(count > 1 for count in windows.values())
    if split:
        (logger.warning if doc_stride is None else logger.info)(
            "%d sentences have more word pieces than --max_seq_length=%d holds; they were split "
            "into windows (%d windows for %d sentences)",
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


def token_predictions(examples, features, predictions, label_list):
    """Maps the windows' predicted piece labels back to each sentence's WordPieces, each from
    the window where it has the most context (`bert_tf.text.windows.max_context_outputs`).

    Args:
      examples: The `TaggingExample`s.
      features: Their `TaggingFeatures`, in order.
      predictions: int [num_features, max_seq_length] label ids.
      label_list: The labels.

    Returns:
      A list per example of the labels of its WordPieces (`[CLS]` and `[SEP]` left out).
    """
    rows = collections.defaultdict(list)
    for row, feature in enumerate(features):
        rows[feature.example_index].append(row)
    predicted = []
    for index in range(len(examples)):
        spans = [features[row].span for row in rows[index]]
        label_ids = max_context_outputs(predictions[rows[index]], spans)[1:-1]
        predicted.append([label_list[label_id] for label_id in label_ids])
    return predicted


def write_conll(examples, predicted, output_file):
    """Writes `token gold predicted` (or `token predicted`) lines, a blank line after each sentence."""
    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        for example, labels in zip(examples, predicted, strict=True):
            gold = example.tags if example.tags is not None else [None] * len(labels)
            for word, gold_label, label in zip(example.words, gold, labels, strict=True):
                writer.write(" ".join(c for c in (word, gold_label, label) if c is not None) + "\n")
            writer.write("\n")
