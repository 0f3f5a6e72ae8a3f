"""SQuAD answers from the span logits: the original's `write_predictions`.

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
"""

import collections
import functools
import json
import logging
import math

import numpy as np

from bert_tf.files import atomic_output, open_file
from bert_tf.text.tokenization import BasicTokenizer

logger = logging.getLogger(__name__)


PREDICTION_FILES = ("predictions.json", "nbest_predictions.json", "null_odds.json")


RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])


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
