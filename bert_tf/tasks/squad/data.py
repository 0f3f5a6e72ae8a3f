"""SQuAD 1.1 and 2.0 examples and features, as the original's `run_squad.py`.

Reading (`read_squad_examples`): each paragraph is split on whitespace into `doc_tokens`, and
every character is mapped to the word it belongs to (or, for whitespace, to the word before
it). A training answer becomes the words its characters cover; if those words do not contain
the answer's text, the question is skipped with a warning. Under SQuAD 2.0 a training question
may be `is_impossible` (no answer; positions -1).

Features (`convert_examples_to_features`): the question's WordPieces (cut to
`max_query_length`) and a window of the document's WordPieces, `[CLS] question [SEP] window
[SEP]`, segment 0 then 1, zero-padded to `max_seq_length`. The windows are
`max_seq_length - len(question) - 3` tokens long and start `min(length, doc_stride)` tokens
apart until one reaches the end, so a long document gives several features, numbered
`unique_id` = 1000000000, 1000000001, ... across the whole file. A token that several windows
contain is scored only in the one where it has the most context: the largest
`min(tokens left, tokens right) + 0.01 * window length`, the first window on a tie. A training
answer is first narrowed to the WordPieces that spell its text, where some do
(`_improve_answer_span`); a window that does not contain the whole answer, or an impossible
question, is labelled position 0 ([CLS]).
"""

import dataclasses
import json
import logging
import re

from bert_tf.files import open_file
from bert_tf.tasks.squad.evaluation import squad_field
from bert_tf.text.tokenization import whitespace_tokenize
from bert_tf.text.windows import doc_spans, max_context_spans

logger = logging.getLogger(__name__)


FIRST_UNIQUE_ID = 1000000000


# The characters `read_squad_examples` splits paragraphs on (U+202F, the narrow no-break space,
# included, as the original does).
_DOC_WORD = re.compile("[^ \t\r\n\u202f]+")


@dataclasses.dataclass
class SquadExample:
    """One question on one paragraph.

    Attributes:
      qas_id: The question's `id`.
      question_text: The question.
      doc_tokens: The paragraph's whitespace-separated words (shared by its questions).
      orig_answer_text: Training only: the answer's text ("" when impossible).
      start_position, end_position: Training only: the first and last word of the answer in
        `doc_tokens` (-1 when impossible).
      is_impossible: Training under SQuAD 2.0 only: the question has no answer.
    """

    qas_id: str
    question_text: str
    doc_tokens: list
    orig_answer_text: str = None
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, as the original's `InputFeatures`.

    Attributes:
      unique_id: 1000000000 for the first feature of the file, then counting up.
      example_index: The example's position in the list converted.
      doc_span_index: The window's position among the example's windows.
      tokens: `[CLS] question [SEP] window [SEP]` (unpadded).
      token_to_orig_map: `{position in tokens: word index in doc_tokens}` for the window.
      token_is_max_context: `{position in tokens: bool}` for the window.
      input_ids, input_mask, segment_ids: `max_seq_length` ints each.
      start_position, end_position: Training only: the answer's positions in `tokens` (0 when
        the window does not hold it or the question is impossible).
      is_impossible: The example's.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None
    is_impossible: bool = False


def split_paragraph(text):
    """Splits a paragraph on whitespace, as the original's `read_squad_examples`.

    Returns:
      (words, word_of_char): the words, and for each character of `text` the index of its word;
      whitespace belongs to the word before it (-1 before the first word).
    """
    words, word_of_char = [], []
    for match in _DOC_WORD.finditer(text):
        word_of_char.extend([len(words) - 1] * (match.start() - len(word_of_char)))
        word_of_char.extend([len(words)] * (match.end() - match.start()))
        words.append(match.group())
    word_of_char.extend([len(words) - 1] * (len(text) - len(word_of_char)))
    return words, word_of_char


def _load_squad_json(input_file):
    """The `data` list of a SQuAD JSON file.

    Raises:
      ValueError: The file cannot be read or is not SQuAD JSON; the message names it.
    """
    try:
        with open_file(input_file) as reader:
            data = json.load(reader)["data"]
    except OSError as e:
        raise ValueError(f"{input_file}: cannot read the SQuAD file ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{input_file}: not JSON ({e})") from None
    except (KeyError, TypeError):
        raise ValueError(f'{input_file}: not SQuAD JSON (no top-level "data" list)') from None
    if not isinstance(data, list):
        raise ValueError(f'{input_file}: not SQuAD JSON ("data" is not a list)')
    return data


def _training_answer(example, qa, word_of_char, version_2_with_negative, where):
    """Sets the answer fields of a training example; False if its answer must be skipped.

    Raises:
      ValueError: `is_impossible` is missing under SQuAD 2.0, an answerable question does not
        have exactly one answer (without `version_2_with_negative`, the message says to pass
        it), or an answer's field has the wrong type.
    """
    if version_2_with_negative:
        if "is_impossible" not in qa:
            raise ValueError(
                f"{where}: no 'is_impossible' (a SQuAD 1.1 file with --version_2_with_negative?)"
            )
        example.is_impossible = bool(qa["is_impossible"])
    if example.is_impossible:
        example.orig_answer_text, example.start_position, example.end_position = "", -1, -1
        return True
    answers = squad_field(qa, "answers", list, where) if "answers" in qa else []
    if len(answers) != 1:
        hint = (
            ""
            if answers or version_2_with_negative
            else " (for SQuAD 2.0 data pass --version_2_with_negative)"
        )
        raise ValueError(f"{where}: {len(answers)} answers; a training question needs exactly 1{hint}")
    text = squad_field(answers[0], "text", str, where)
    offset = squad_field(answers[0], "answer_start", int, where)
    last = offset + len(text) - 1
    found = ""
    if text and offset >= 0 and last < len(word_of_char):
        example.start_position, example.end_position = word_of_char[offset], word_of_char[last]
        found = " ".join(example.doc_tokens[example.start_position : example.end_position + 1])
    # A text that the words at its offset do not contain (usually Unicode the splitting treats
    # differently) cannot be a training target.
    wanted = " ".join(whitespace_tokenize(text))
    if not text or wanted not in found:
        logger.warning("%s: skipped: answer %r is not at offset %d (found %r)", where, wanted, offset, found)
        return False
    example.orig_answer_text = text
    return True


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Reads a SQuAD JSON file into `SquadExample`s, in file order.

    Args:
      input_file: A SQuAD 1.1 or 2.0 JSON file.
      is_training: Read the answers (one per question) as training targets.
      version_2_with_negative: SQuAD 2.0: training questions carry `is_impossible`.

    Returns:
      A list of `SquadExample`. A training question whose answer text is not at its offset is
      left out, with a warning naming it.

    Raises:
      ValueError: The file is not SQuAD JSON, a field has the wrong type, or a training question
        has no single answer; the message names the file, and the question and field where
        there is one (a paragraph by its first question).
    """
    examples = []
    for entry in _load_squad_json(input_file):
        try:
            for paragraph in squad_field(entry, "paragraphs", list, input_file):
                qas = squad_field(paragraph, "qas", list, input_file)
                first = squad_field(qas[0], "id", None, input_file) if qas else None
                where = f"{input_file}: the paragraph of question {first}" if qas else input_file
                doc_tokens, word_of_char = split_paragraph(squad_field(paragraph, "context", str, where))
                for qa in qas:
                    where = f"{input_file}: question {squad_field(qa, 'id', None, input_file)}"
                    example = SquadExample(qa["id"], squad_field(qa, "question", str, where), doc_tokens)
                    if is_training and not _training_answer(
                        example, qa, word_of_char, version_2_with_negative, where
                    ):
                        continue
                    examples.append(example)
        except KeyError as e:
            raise ValueError(f"{input_file}: not SQuAD JSON (missing {e})") from None
    return examples


def _improve_answer_span(doc_tokens, input_start, input_end, tokenizer, orig_answer_text):
    """The narrowest WordPiece span inside `[input_start, input_end]` that spells the answer.

    The answer's words may carry more than the answer ("(1895-1943)." for "1895"); their
    WordPieces often hold it exactly. Starts are tried left to right and, for each, ends right
    to left; without a match the span is kept (e.g. "Japan" inside "Japanese").

    Returns:
      (start, end) WordPiece indexes.
    """
    answer = " ".join(tokenizer.tokenize(orig_answer_text))
    for start in range(input_start, input_end + 1):
        for end in range(input_end, start - 1, -1):
            if " ".join(doc_tokens[start : end + 1]) == answer:
                return start, end
    return input_start, input_end


class _DocTokenizer:
    """WordPiece-tokenizes an example's words, reusing the result for the paragraph's next
    question (the questions of a paragraph share one `doc_tokens` list)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._words = None
        self._result = None

    def __call__(self, words):
        """Returns (pieces, piece_to_word, word_to_first_piece)."""
        if words is not self._words:
            pieces, piece_to_word, word_to_first_piece = [], [], []
            for index, word in enumerate(words):
                word_to_first_piece.append(len(pieces))
                word_pieces = self.tokenizer.tokenize(word)
                pieces.extend(word_pieces)
                piece_to_word.extend([index] * len(word_pieces))
            self._words, self._result = words, (pieces, piece_to_word, word_to_first_piece)
        return self._result


def _example_features(example, doc_tokenizer, max_seq_length, doc_stride, max_query_length, is_training):
    """The features of one example, without `unique_id` and `example_index`."""
    tokenizer = doc_tokenizer.tokenizer
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    pieces, piece_to_word, word_to_first_piece = doc_tokenizer(example.doc_tokens)

    if is_training and not example.is_impossible:
        answer_start = word_to_first_piece[example.start_position]
        if example.end_position + 1 < len(example.doc_tokens):
            answer_end = word_to_first_piece[example.end_position + 1] - 1
        else:
            answer_end = len(pieces) - 1
        answer_start, answer_end = _improve_answer_span(
            pieces, answer_start, answer_end, tokenizer, example.orig_answer_text
        )

    # [CLS], [SEP] and [SEP] take 3 positions.
    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3
    if max_tokens_for_doc < 1:
        raise ValueError(
            f"question {example.qas_id}: --max_seq_length={max_seq_length} leaves no room for the "
            f"document after its {len(query_tokens)} question tokens (lower --max_query_length)"
        )
    spans = doc_spans(len(pieces), max_tokens_for_doc, doc_stride)
    best_span = max_context_spans(spans, len(pieces))
    doc_offset = len(query_tokens) + 2
    features = []
    for span_index, span in enumerate(spans):
        window = range(span.start, span.start + span.length)
        positions = range(doc_offset, doc_offset + span.length)
        tokens = ["[CLS]", *query_tokens, "[SEP]", *pieces[span.start : span.start + span.length], "[SEP]"]
        segment_ids = [0] * doc_offset + [1] * (span.length + 1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = [0] * (max_seq_length - len(tokens))
        start_position = end_position = None
        if is_training:
            start_position = end_position = 0
            if not example.is_impossible and span.start <= answer_start and answer_end < window.stop:
                start_position = answer_start - span.start + doc_offset
                end_position = answer_end - span.start + doc_offset
        features.append(
            InputFeatures(
                unique_id=None,
                example_index=None,
                doc_span_index=span_index,
                tokens=tokens,
                token_to_orig_map=dict(
                    zip(positions, piece_to_word[window.start : window.stop], strict=True)
                ),
                token_is_max_context={
                    i: best_span[p] == span_index for i, p in zip(positions, window, strict=True)
                },
                input_ids=input_ids + padding,
                input_mask=[1] * len(input_ids) + padding,
                segment_ids=segment_ids + padding,
                start_position=start_position,
                end_position=end_position,
                is_impossible=example.is_impossible,
            )
        )
    return features


def convert_examples_to_features(
    examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training
):
    """The features of `examples`, as the original's `convert_examples_to_features`.

    Args:
      examples: `SquadExample`s.
      tokenizer: A `FullTokenizer`.
      max_seq_length: Tokens per feature, padding included.
      doc_stride: The most tokens a window starts after the previous one.
      max_query_length: Question WordPieces kept.
      is_training: Label the answer positions.

    Yields:
      `InputFeatures` in example order, `unique_id` from 1000000000.

    Raises:
      ValueError: `max_seq_length` leaves no room for the document after a question.
    """
    doc_tokenizer = _DocTokenizer(tokenizer)
    unique_id = FIRST_UNIQUE_ID
    for example_index, example in enumerate(examples):
        for feature in _example_features(
            example, doc_tokenizer, max_seq_length, doc_stride, max_query_length, is_training
        ):
            feature.unique_id, feature.example_index = unique_id, example_index
            unique_id += 1
            yield feature


def feature_values(feature, is_training):
    """The original's record of a feature: `{name: list of ints}` in its feature order."""
    values = {
        "unique_ids": [feature.unique_id],
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
    }
    if is_training:
        values["start_positions"] = [feature.start_position]
        values["end_positions"] = [feature.end_position]
        values["is_impossible"] = [int(feature.is_impossible)]
    return values


def name_to_features(max_seq_length, is_training):
    """The records' schema, as the original's `input_fn` reads them."""
    import tensorflow as tf

    ints = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    spec = {"unique_ids": tf.io.FixedLenFeature([], tf.int64), "input_ids": ints, "input_mask": ints}
    spec["segment_ids"] = ints
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    return spec
