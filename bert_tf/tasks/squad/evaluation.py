"""Exact match and F1 by the rules of the official SQuAD 1.1 and 2.0 evaluation scripts.

Both compare answers after the same normalisation: lower-case, delete every ASCII punctuation
character (`string.punctuation`), replace the whole words "a", "an" and "the" by a space,
and collapse whitespace. Exact match is 1 when the normalised texts are equal; F1 is the
harmonic mean of precision and recall over the multiset of whitespace tokens common to both.
A question scores its best over its gold answers, and the totals are percentages.

SQuAD 1.1 (`evaluate-v1.1.py`): every question of the file counts; one without a prediction
scores 0. A prediction or answer that normalises to nothing has F1 0.

SQuAD 2.0 (`evaluate-v2.0.py`): gold answers that normalise to nothing are dropped, and a
question left with none (unanswerable) has the single gold answer "". If either side has no
tokens, F1 is 1 when both have none and 0 otherwise. Only questions with a prediction are
scored. With no-answer probabilities (e.g. `null_odds.json`), a question whose probability
exceeds `na_prob_thresh` counts as answered "" (1 if unanswerable, else 0). The result adds
`HasAns_*` and `NoAns_*` over the answerable and unanswerable questions and, given the
probabilities, `best_exact`/`best_f1`: the scores for the best threshold on them, with that
threshold (`best_*_thresh`, the value to pass to `run_squad.py --null_score_diff_threshold`).
"""

import collections
import dataclasses
import json
import logging
import re
import string

from bert_tf.files import atomic_output, check_output_path, open_file
from bert_tf.options import option

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """Lower-cases, drops punctuation and the articles a/an/the, and collapses whitespace."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction, ground_truth):
    """1 if the normalised texts are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(ground_truth))


def f1_score(prediction, ground_truth, version_2_with_negative=False):
    """Token F1 of the normalised texts.

    Args:
      prediction: The predicted answer.
      ground_truth: One gold answer.
      version_2_with_negative: SQuAD 2.0's rule for empty answers (1 if both are empty).

    Returns:
      A float in [0, 1].
    """
    predicted = normalize_answer(prediction).split()
    gold = normalize_answer(ground_truth).split()
    if version_2_with_negative and not (predicted and gold):
        return float(predicted == gold)
    common = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def _warn_missing(missing, consequence):
    if missing:
        logger.warning("%d questions have no prediction (%s), e.g. %s", len(missing), consequence, missing[0])


def evaluate_v1(dataset, predictions):
    """SQuAD 1.1's `{"exact_match": %, "f1": %}` over every question of `dataset`.

    Args:
      dataset: The `data` list of a SQuAD JSON file.
      predictions: `{question id: answer text}`.

    Raises:
      ValueError: A question has no gold answer (a SQuAD 2.0 file: use `evaluate_v2`).
    """
    exact = f1 = total = 0
    missing = []
    for qa in _questions(dataset):
        total += 1
        truths = [answer["text"] for answer in qa["answers"]]
        if not truths:
            raise ValueError(f"question {qa['id']} has no answer: evaluate SQuAD 2.0 with its rules")
        if qa["id"] not in predictions:
            missing.append(qa["id"])
            continue
        prediction = predictions[qa["id"]]
        exact += max(exact_match_score(prediction, truth) for truth in truths)
        f1 += max(f1_score(prediction, truth) for truth in truths)
    _warn_missing(missing, "scored 0")
    if not total:
        raise ValueError("the dataset has no question")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _percentages(exact, f1, qids):
    return collections.OrderedDict(
        exact=100.0 * sum(exact[q] for q in qids) / len(qids),
        f1=100.0 * sum(f1[q] for q in qids) / len(qids),
        total=len(qids),
    )


def _best_threshold(predictions, scores, na_probs, has_answer):
    """The best score over no-answer thresholds, and the threshold.

    Below the lowest probability every question is answered "": the unanswerable ones score 1.
    Raising the threshold past a question's probability answers it with its prediction: an
    answerable one gains its score, an unanswerable one with a non-empty prediction loses 1.
    """
    score = best = sum(1 for answerable in has_answer.values() if not answerable)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=na_probs.get):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """SQuAD 2.0's metrics: `exact`, `f1`, `total`, then `HasAns_*`, `NoAns_*` and, given
    `na_probs`, `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`.

    Args:
      dataset: The `data` list of a SQuAD JSON file.
      predictions: `{question id: answer text}` ("" for no answer).
      na_probs: `{question id: no-answer score}` (e.g. `null_odds.json`), or None.
      na_prob_thresh: Questions scoring above it count as answered "".

    Returns:
      An ordered dict of the metrics, in the official script's order.

    Raises:
      ValueError: No question has a prediction, or `na_probs` lacks a predicted question.
    """
    has_answer, exact_raw, f1_raw, missing = {}, {}, {}, []
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        truths = [answer["text"] for answer in qa["answers"] if normalize_answer(answer["text"])] or [""]
        if qid not in predictions:
            missing.append(qid)
            continue
        prediction = predictions[qid]
        exact_raw[qid] = max(exact_match_score(prediction, truth) for truth in truths)
        f1_raw[qid] = max(f1_score(prediction, truth, version_2_with_negative=True) for truth in truths)
    _warn_missing(missing, "left out")
    if not exact_raw:
        raise ValueError("no question of the dataset has a prediction")
    probabilities = na_probs if na_probs is not None else dict.fromkeys(predictions, 0.0)
    absent = [qid for qid in exact_raw if qid not in probabilities]
    if absent:
        raise ValueError(f"{len(absent)} predicted questions have no no-answer probability, e.g. {absent[0]}")

    def thresholded(raw):
        return {
            qid: float(not has_answer[qid]) if probabilities[qid] > na_prob_thresh else score
            for qid, score in raw.items()
        }

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    results = _percentages(exact, f1, list(exact))
    for prefix, answerable in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in exact if has_answer[qid] == answerable]
        if qids:
            for key, value in _percentages(exact, f1, qids).items():
                results[f"{prefix}_{key}"] = value
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            results[f"best_{name}"], results[f"best_{name}_thresh"] = best, threshold
    return results


# The JSON names of Python's types as `json` reads them (bool before int: a bool is an int).
_JSON_TYPES = {bool: "a boolean", str: "a string", int: "an integer", float: "a number",
               list: "a list", dict: "an object"}  # fmt: skip


def _json_type(value):
    """The JSON name of `value`'s type: "a string", "an integer", ... ("null" for None)."""
    return next((name for kind, name in _JSON_TYPES.items() if isinstance(value, kind)), "null")


def squad_field(record, name, expected, where):
    """`record[name]`, checked to be of type `expected` (a boolean is not an integer).

    Args:
      record: An object of the SQuAD JSON (an article, paragraph, question or answer).
      name: The field.
      expected: `str`, `int`, `list` or `dict`; None checks nothing.
      where: The file, and the question where there is one, for the message.

    Returns:
      The value.

    Raises:
      KeyError: The field is missing.
      ValueError: `record` is not an object, or the value has another type; the message names
        `where`, the field, the type found and the type expected.
    """
    if not isinstance(record, dict):
        raise ValueError(f"{where}: {_json_type(record)} where an object with {name!r} is expected")
    value = record[name]
    if expected is not None and (not isinstance(value, expected) or isinstance(value, bool)):
        shown = json.dumps(value, ensure_ascii=False)
        shown = f" ({shown})" if len(shown) <= 40 else ""
        raise ValueError(f"{where}: {name!r} is {_json_type(value)}{shown}, expected {_JSON_TYPES[expected]}")
    return value


def read_dataset(data_file, version_2_with_negative=False):
    """The `data` list of a SQuAD JSON file, checked for evaluation: every question has an `id`
    and a list of `answers`, each with a string `text`; under SQuAD 1.1 at least one.

    Args:
      data_file: The SQuAD JSON file.
      version_2_with_negative: SQuAD 2.0: a question may have no answer.

    Returns:
      The `data` list.

    Raises:
      ValueError: The file cannot be read or is not SQuAD JSON, a field is missing or has the
        wrong type, or (SQuAD 1.1) a question has no answer; the message names the file, and
        the question and field where there is one.
    """
    data = _read_json(data_file, "SQuAD file")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f'{data_file}: not SQuAD JSON (no top-level "data" list)')
    try:
        for article in data["data"]:
            for paragraph in squad_field(article, "paragraphs", list, data_file):
                for qa in squad_field(paragraph, "qas", list, data_file):
                    where = f"{data_file}: question {squad_field(qa, 'id', None, data_file)}"
                    if "answers" not in qa:
                        raise ValueError(f"{where}: no 'answers' (evaluation needs the gold answers)")
                    answers = squad_field(qa, "answers", list, where)
                    for answer in answers:
                        squad_field(answer, "text", str, where)
                    if not answers and not version_2_with_negative:
                        raise ValueError(
                            f"{where} has no answer: for SQuAD 2.0 data pass --version_2_with_negative"
                        )
    except KeyError as e:
        raise ValueError(f"{data_file}: not SQuAD JSON (missing {e})") from None
    return data["data"]


def _read_json(path, what):
    try:
        with open_file(path) as reader:
            return json.load(reader)
    except OSError as e:
        raise ValueError(f"{path}: cannot read the {what} ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: the {what} is not JSON ({e})") from None


def evaluate_files(
    data_file, prediction_file, version_2_with_negative=False, na_prob_file=None, na_prob_thresh=1.0
):
    """`evaluate_v1` or `evaluate_v2` on files: a SQuAD JSON file and a `predictions.json`
    (and, for 2.0, optionally a `null_odds.json`).

    Raises:
      ValueError: A file cannot be read or is not what it should be (`read_dataset`); the
        message names it.
    """
    if na_prob_file and not version_2_with_negative:
        raise ValueError("a no-answer probability file needs --version_2_with_negative")
    predictions = _read_json(prediction_file, "predictions file")
    if not isinstance(predictions, dict):
        raise ValueError(f"{prediction_file}: not a predictions file (a JSON object of question id: answer)")
    for qas_id, answer in predictions.items():
        if not isinstance(answer, str):
            raise ValueError(
                f"{prediction_file}: question {qas_id}: the answer is {_json_type(answer)}, expected a string"
            )
    dataset = read_dataset(data_file, version_2_with_negative)
    if not version_2_with_negative:
        return evaluate_v1(dataset, predictions)
    na_probs = _read_json(na_prob_file, "no-answer probabilities file") if na_prob_file else None
    return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh)


@dataclasses.dataclass
class EvaluateOptions:
    """The flags of `tools/evaluate_squad.py` (the official scripts' options), and its two
    arguments, the data file and the predictions file (no flags)."""

    version_2_with_negative: bool = option(False, "SQuAD 2.0 rules (unanswerable questions).")
    na_prob_file: str = option(None, "SQuAD 2.0: no-answer scores per question (null_odds.json).")
    na_prob_thresh: float = option(1.0, 'SQuAD 2.0: answer "" where the no-answer score exceeds this.')
    out_file: str = option(None, "Write the JSON here instead of printing it.")
    data_file: str = None
    prediction_file: str = None


def run_evaluate(options):
    """`evaluate_files` of `EvaluateOptions`, printed (or written to `out_file`) as the official
    scripts' JSON (`tools/evaluate_squad.py`).

    Returns:
      The scores.
    """
    if options.out_file:
        check_output_path(options.out_file, "--out_file")
    result = evaluate_files(
        options.data_file,
        options.prediction_file,
        options.version_2_with_negative,
        options.na_prob_file,
        options.na_prob_thresh,
    )
    text = json.dumps(result, indent=2 if options.version_2_with_negative else None)
    if options.out_file:
        with atomic_output(options.out_file) as tmp, open_file(tmp, "w") as writer:
            writer.write(text + "\n")
    else:
        print(text)
    return result
