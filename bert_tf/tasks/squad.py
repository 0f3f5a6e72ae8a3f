"""SQuAD 1.1 and 2.0 as the original's `run_squad.py`: examples, features, the span head and its
loss, and the n-best prediction writer.

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

Head (`BertSquad`, `SquadTask`): `cls/squad/output_weights` [2, H] and `cls/squad/output_bias`
[2] on the last encoder layer give each token a start and an end logit; a softmax over the
sequence positions, and the loss is `(start_loss + end_loss) / 2`, each the mean over the batch
of the labelled position's cross entropy.

Predictions (`compute_predictions`, `write_predictions`): for each feature, every pair of the
`n_best_size` best starts and ends that lies in the document, starts in a token's max-context
window, and spans at most `max_answer_length` tokens is a candidate scored `start + end
logit`. The best candidates of a question (over all its features, duplicates of the same text
dropped) form its n-best list, with softmax probabilities over the list. Each answer's WordPieces
are projected back onto the original words (`get_final_text`), which keeps the original case,
accents and punctuation. Under SQuAD 2.0 the null answer ("") scores the lowest
`start_logits[0] + end_logits[0]` of the question's features; the question is answered "" when
that score minus the best non-null answer's exceeds `null_score_diff_threshold`, and the
difference is written to `null_odds.json`.

`run_squad(SquadOptions(...))` is `tools/run_squad.py`: the above through the shared runner of
`bert_tf.tasks.finetuning`.
"""

import collections
import dataclasses
import functools
import json
import logging
import math
import os
import random
import re

import keras
import numpy as np
from keras import ops

from bert_tf.files import atomic_output, isfile, open_file
from bert_tf.modeling import BertModel
from bert_tf.modeling.heads import ClsOutput
from bert_tf.modeling.losses import negative_log_likelihood
from bert_tf.modeling.serialization import BertConfigured
from bert_tf.tasks.finetuning import EVAL_RESULTS, FinetuningOptions, FinetuningRunner, write_records
from bert_tf.tasks.squad_evaluation import squad_field
from bert_tf.text.tokenization import BasicTokenizer, whitespace_tokenize

logger = logging.getLogger(__name__)

FIRST_UNIQUE_ID = 1000000000
PREDICTION_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")

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


DocSpan = collections.namedtuple("DocSpan", ["start", "length"])

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


# -- reading --------------------------------------------------------------------------------


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


# -- features -------------------------------------------------------------------------------


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


def doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
    """The windows over a document of `num_tokens` WordPieces (none for an empty document).

    Returns:
      A list of `DocSpan(start, length)`.
    """
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_spans(spans, num_tokens):
    """For each WordPiece of the document, the window in which it has the most context.

    Context is `min(tokens to the left, tokens to the right) + 0.01 * window length`; on a
    tie the earlier window wins.

    Returns:
      A list of window indexes, one per WordPiece.
    """
    if len(spans) <= 1:
        return [0] * num_tokens
    scores = np.full((len(spans), num_tokens), -np.inf)
    for index, span in enumerate(spans):
        left = np.arange(span.length)
        scores[index, span.start : span.start + span.length] = (
            np.minimum(left, span.length - 1 - left) + 0.01 * span.length
        )
    return scores.argmax(axis=0).tolist()  # the first of equal maxima: the earlier window


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


# -- predictions ----------------------------------------------------------------------------

_Candidate = collections.namedtuple(
    "_Candidate", ["feature_index", "start_index", "end_index", "start_logit", "end_logit"]
)
_Answer = collections.namedtuple("_Answer", ["text", "start_logit", "end_logit"])


@functools.lru_cache(maxsize=2)
def _basic_tokenizer(do_lower_case):
    return BasicTokenizer(do_lower_case=do_lower_case)


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Projects a predicted answer (normalised WordPiece text) onto the original words.

    `orig_text` (the words the answer's WordPieces came from) is basic-tokenized again; where
    `pred_text` occurs in that, and the two agree character for character once spaces are
    removed, the characters of `pred_text` are mapped onto `orig_text`. "steve smith" in
    "Steve Smith's" gives "Steve Smith". Where the alignment fails (e.g. the tokenizer
    changed the number of characters), the whole of `orig_text` is returned.

    Args:
      pred_text: The answer's WordPieces joined, "##" removed.
      orig_text: The original words the answer's WordPieces belong to, joined by spaces.
      do_lower_case: The tokenizer's setting.
      verbose_logging: Log why an alignment failed.

    Returns:
      The answer text as it is written in the document.
    """
    tok_text = " ".join(_basic_tokenizer(do_lower_case).tokenize(orig_text))
    start = tok_text.find(pred_text) if pred_text else -1
    if start == -1:
        reason = f"Unable to find text: {pred_text!r} in {orig_text!r}"
    elif len(orig_text) - orig_text.count(" ") != len(tok_text) - tok_text.count(" "):
        reason = f"Length not equal after stripping spaces: {orig_text!r} vs {tok_text!r}"
    else:
        # The non-space characters correspond one to one, in order.
        end = start + len(pred_text) - 1
        first = _non_space_index(orig_text, start - tok_text.count(" ", 0, start))
        last = _non_space_index(orig_text, end - tok_text.count(" ", 0, end))
        return orig_text[first : last + 1]
    if verbose_logging:
        logger.info(reason)
    return orig_text


def _non_space_index(text, rank):
    """The position in `text` of its non-space character number `rank` (from 0)."""
    position = 0
    for word in text.split(" "):
        if rank < len(word):
            return position + rank
        rank -= len(word)
        position += len(word) + 1
    raise IndexError(rank)


def _best_indexes(logits, n_best_size):
    """Positions of the `n_best_size` largest logits, largest first (ties: lower position)."""
    return np.argsort(-np.asarray(logits), kind="stable")[:n_best_size].tolist()


def _softmax(scores):
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [x / total for x in exps]


def _answer_text(example, feature, start, end, do_lower_case, verbose_logging):
    pieces = " ".join(feature.tokens[start : end + 1])
    pred_text = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    first, last = feature.token_to_orig_map[start], feature.token_to_orig_map[end]
    orig_text = " ".join(example.doc_tokens[first : last + 1])
    return get_final_text(pred_text, orig_text, do_lower_case, verbose_logging)


def compute_predictions(
    all_examples,
    all_features,
    all_results,
    n_best_size,
    max_answer_length,
    do_lower_case,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
    verbose_logging=False,
):
    """The answers, n-best lists and null-score differences, as the original's
    `write_predictions` computes them.

    Args:
      all_examples: The `SquadExample`s predicted.
      all_features: Their `InputFeatures`.
      all_results: A `RawResult(unique_id, start_logits, end_logits)` per feature.
      n_best_size: Starts and ends tried per feature, and answers kept per question.
      max_answer_length: The most WordPieces an answer spans.
      do_lower_case: The tokenizer's setting (for `get_final_text`).
      version_2_with_negative: SQuAD 2.0: consider the null answer.
      null_score_diff_threshold: Answer "" when null score - best non-null score exceeds it.
      verbose_logging: Log where `get_final_text` cannot align an answer.

    Returns:
      `(predictions, nbest, null_odds)`: dicts keyed by question id, in example order, of the answer
      text, of the n-best list (`[{"text", "probability", "start_logit", "end_logit"}]`) and
      (SQuAD 2.0; else empty) of the null score minus the best non-null score.
    """
    features_of_example = collections.defaultdict(list)
    for feature in all_features:
        features_of_example[feature.example_index].append(feature)
    logits_of_feature = {
        result.unique_id: (
            np.asarray(result.start_logits, np.float64).tolist(),
            np.asarray(result.end_logits, np.float64).tolist(),
        )
        for result in all_results
    }

    predictions, nbest_lists, null_odds = {}, {}, {}
    for example_index, example in enumerate(all_examples):
        features = features_of_example[example_index]
        candidates = []
        # The null answer: the question's lowest [CLS] start + end score over its features.
        null_score, null_start_logit, null_end_logit, null_feature = 1000000, 0, 0, 0
        for feature_index, feature in enumerate(features):
            start_logits, end_logits = logits_of_feature[feature.unique_id]
            if version_2_with_negative and start_logits[0] + end_logits[0] < null_score:
                null_score = start_logits[0] + end_logits[0]
                null_start_logit, null_end_logit, null_feature = start_logits[0], end_logits[0], feature_index
            # Answers lie in the document window and start at a token scored in this window.
            in_window, max_context = feature.token_to_orig_map, feature.token_is_max_context
            starts = [i for i in _best_indexes(start_logits, n_best_size) if max_context.get(i, False)]
            ends = [i for i in _best_indexes(end_logits, n_best_size) if i in in_window]
            for start in starts:
                for end in ends:
                    if start <= end < start + max_answer_length:
                        candidates.append(
                            _Candidate(feature_index, start, end, start_logits[start], end_logits[end])
                        )
        if version_2_with_negative:
            candidates.append(_Candidate(null_feature, 0, 0, null_start_logit, null_end_logit))
        candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

        nbest, seen = [], set()
        for candidate in candidates:
            if len(nbest) >= n_best_size:
                break
            text = ""
            if candidate.start_index > 0:
                feature = features[candidate.feature_index]
                text = _answer_text(
                    example,
                    feature,
                    candidate.start_index,
                    candidate.end_index,
                    do_lower_case,
                    verbose_logging,
                )
                if text in seen:
                    continue
            seen.add(text)
            nbest.append(_Answer(text, candidate.start_logit, candidate.end_logit))
        if version_2_with_negative and "" not in seen:
            nbest.append(_Answer("", null_start_logit, null_end_logit))
        if not nbest:  # no valid span at all: the original's placeholder answer
            nbest.append(_Answer("empty", 0.0, 0.0))

        probabilities = _softmax([answer.start_logit + answer.end_logit for answer in nbest])
        nbest_lists[example.qas_id] = [
            {
                "text": answer.text,
                "probability": p,
                "start_logit": answer.start_logit,
                "end_logit": answer.end_logit,
            }
            for answer, p in zip(nbest, probabilities, strict=True)
        ]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0].text
            continue
        best_non_null = next((answer for answer in nbest if answer.text), None)
        if best_non_null is None:
            # No span among the windows' n_best_size best starts and ends was valid (where the
            # original fails): "" is the only answer, and the difference is taken to the score of
            # the original's placeholder answer, 0 (on an empty paragraph, without any window,
            # the null score is the original's starting one).
            null_odds[example.qas_id] = float(null_score)
            predictions[example.qas_id] = ""
            continue
        score_diff = null_score - best_non_null.start_logit - best_non_null.end_logit
        null_odds[example.qas_id] = score_diff
        predictions[example.qas_id] = "" if score_diff > null_score_diff_threshold else best_non_null.text
    return predictions, nbest_lists, null_odds


def write_predictions(
    all_examples,
    all_features,
    all_results,
    n_best_size,
    max_answer_length,
    do_lower_case,
    output_prediction_file,
    output_nbest_file,
    output_null_log_odds_file,
    version_2_with_negative=False,
    null_score_diff_threshold=0.0,
    verbose_logging=False,
):
    """Writes `predictions.json`, `nbest_predictions.json` and (SQuAD 2.0) `null_odds.json`.

    The arguments are `compute_predictions`'s and the three file names. Each file is the JSON
    of an object keyed by question id, indented by 4, as the original writes it; each appears
    complete or not at all.

    Returns:
      `compute_predictions`'s `(predictions, nbest, null_odds)`.
    """
    results = compute_predictions(
        all_examples,
        all_features,
        all_results,
        n_best_size,
        max_answer_length,
        do_lower_case,
        version_2_with_negative,
        null_score_diff_threshold,
        verbose_logging,
    )
    outputs = [output_prediction_file, output_nbest_file]
    if version_2_with_negative:
        outputs.append(output_null_log_odds_file)
    for path, values in zip(outputs, results, strict=False):
        logger.info("Writing %s", path)
        with atomic_output(path) as tmp, open_file(tmp, "w") as writer:
            writer.write(json.dumps(values, indent=4) + "\n")
    return results


# -- model and loss -------------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSquad(BertConfigured, keras.Model):
    """`BertModel` plus the span head: the original's `run_squad.create_model`.

    Variables: `BertModel`'s, then `cls/squad/output_weights` [2, H] (row 0 start, row 1 end;
    truncated normal, stddev 0.02) and `cls/squad/output_bias` [2]. The loss does not reach the
    pooler, which is therefore not trained (the original's optimizer skips a variable without
    a gradient: no update, no Adam slots); it is still saved and loaded.

    Inputs: the dict of int [batch, seq] `input_ids`, `input_mask`, `segment_ids` (other
    features are ignored).
    Outputs: float32 [batch, seq] `start_logits` and `end_logits`.

    Args:
      config: A `BertConfig` (or its dict).
      dtype: The dtype policy (e.g. "mixed_bfloat16"); the head computes in float32.
    """

    def __init__(self, config, name="bert_squad", dtype=None, **kwargs):
        super().__init__(config, name=name, dtype=dtype, **kwargs)
        config = self.config
        self.bert = BertModel(config, dtype=self.dtype_policy)
        self.bert.pooler.trainable = False
        self.cls = ClsOutput("squad", 2, config.hidden_size, dtype=self.dtype_policy)
        self.cls.build()
        self.built = True

    def call(self, inputs, training=False):
        logits = self.cls(self.bert(inputs, training=training)["sequence_output"])
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


class SquadTask:
    """The span loss for `bert_tf.training.step`: the original's `(start_loss + end_loss) / 2`,
    each the mean over the batch of `-log softmax(logits)[labelled position]`; the start and
    end losses and accuracies (argmax = label) as metrics.

    Args:
      config: A `BertConfig`.
      dtype: The model's dtype policy.
    """

    metric_names = ("start_loss", "end_loss", "start_accuracy", "end_accuracy")
    loss_epsilons = (0.0,)

    def __init__(self, config, dtype=None):
        self.model = BertSquad(config, dtype=dtype)

    @staticmethod
    def loss_denominators(batch):
        """`[rows]`: the losses are means over the batch."""
        return [ops.cast(ops.shape(batch["start_positions"])[0], "float32")]

    @staticmethod
    def loss_terms(outputs, batch):
        """(`[(sum(start_nll) + sum(end_nll)) / 2]`, the start/end loss and accuracy terms)."""
        rows = ops.cast(ops.shape(batch["start_positions"])[0], "float32")
        metrics, nll_sums = {}, []
        for side in ("start", "end"):
            logits = outputs[f"{side}_logits"]
            positions = ops.reshape(ops.cast(batch[f"{side}_positions"], "int32"), (-1,))
            nll_sum = ops.sum(negative_log_likelihood(ops.log_softmax(logits, axis=-1), positions))
            correct = ops.cast(ops.argmax(logits, axis=-1) == positions, "float32")
            metrics[f"{side}_loss"] = (nll_sum, rows)
            metrics[f"{side}_accuracy"] = (ops.sum(correct), rows)
            nll_sums.append(nll_sum)
        return [(nll_sums[0] + nll_sums[1]) / 2.0], metrics


# -- the run_squad.py job -------------------------------------------------------------------


@dataclasses.dataclass
class SquadOptions(FinetuningOptions):
    """The flags of `tools/run_squad.py`: the common ones (SQuAD's `max_seq_length` 384), then
    the original run_squad.py's own."""

    max_seq_length: int = 384
    train_file: str = None
    predict_file: str = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    verbose_logging: bool = False
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0


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
    (`bert_tf.tasks.squad_evaluation`) and writes `eval_results.txt`. Both files are read and
    checked (for `--do_eval`, as evaluation data; without `--do_predict`, `predictions.json`
    must exist), the training steps checked and the predict features made before the first
    file is written.

    Returns:
      `{"train": metrics or None, "predict": predictions or None, "eval": results or None,
      "export": the SavedModel version directory (`--export_dir`) or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag, file or question.
    """
    from bert_tf.tasks.squad_evaluation import evaluate_files, read_dataset
    from bert_tf.training.loop import write_eval_results

    _validate(options)
    runner = FinetuningRunner(options)
    output_dir = options.output_dir
    version_2 = options.version_2_with_negative

    def convert(examples, is_training):
        return convert_examples_to_features(
            examples,
            runner.tokenizer,
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
        results["train"] = runner.train(task, train_file, spec, len(train_examples))
    if options.do_predict:
        raw_results = []
        if eval_features:
            model = runner.build(BertSquad)
            runner.restore(model)
            spec = name_to_features(options.max_seq_length, False)
            logits = runner.predict(
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
        if runner.distribution.is_chief:
            results["predict"] = write_predictions(*arguments, options.do_lower_case, *outputs, **settings)[0]
        else:
            results["predict"] = compute_predictions(*arguments, options.do_lower_case, **settings)[0]
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
        results["export"] = runner.export(
            BertSquad,
            ("start_logits", "end_logits"),
            text_tokens=True,
            max_text_a_tokens=options.max_query_length,
        )
    return results
