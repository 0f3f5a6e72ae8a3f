"""The SQuAD 1.1 / 2.0 evaluation rules on hand-made predictions, scores worked out by hand."""

import json
import sys

import pytest

from bert_tf.tasks.squad import evaluation as ev
from tests import tool_runs
from tests.test_squad import REPO


def test_normalize_answer():
    assert ev.normalize_answer("The Cat's  hat!") == "cats hat"
    assert ev.normalize_answer("An apple a day\tkeeps THE doctor away.") == "apple day keeps doctor away"
    assert ev.normalize_answer("theatre, anna") == "theatre anna"  # articles only as whole words
    assert ev.normalize_answer("Zürich – 1895") == "zürich – 1895"  # non-ASCII punctuation stays
    assert ev.normalize_answer("") == ""


def test_exact_match_and_f1():
    assert ev.exact_match_score("the Eiffel Tower", "Eiffel tower.") == 1
    assert ev.exact_match_score("Eiffel", "Eiffel tower") == 0
    # big red dog / red dog barks: 2 common of 3 and 3.
    assert ev.f1_score("the big red dog", "red dog barks") == pytest.approx(2 / 3)
    # Tokens count as a multiset: one "dog" in common; precision 1/3, recall 1.
    assert ev.f1_score("dog dog dog", "dog") == pytest.approx(0.5)
    assert ev.f1_score("cat", "dog") == 0.0
    # Empty answers: 0 under 1.1; under 2.0, 1 if both are empty.
    assert ev.f1_score("", "") == 0.0
    assert ev.f1_score("", "", version_2_with_negative=True) == 1.0
    assert ev.f1_score("the", "", version_2_with_negative=True) == 1.0  # "the" normalises to ""
    assert ev.f1_score("", "dog", version_2_with_negative=True) == 0.0


def article(*qas):
    return [{"title": "t", "paragraphs": [{"context": "...", "qas": list(qas)}]}]


def question(qid, *answers):
    return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers]}


def test_evaluate_v1():
    dataset = article(
        question("q1", "Denver Broncos", "Broncos"),
        question("q2", "Santa Clara, California"),
        question("q3", "Levi's Stadium"),
    )
    # q1 exact (best over its answers); q2 F1 2 * 1 * 2/3 / (1 + 2/3) = 0.8; q3 has no prediction.
    result = ev.evaluate_v1(dataset, {"q1": "the Broncos", "q2": "Santa Clara"})
    assert list(result) == ["exact_match", "f1"]
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * 1.8 / 3)
    with pytest.raises(ValueError, match=r"question n has no answer"):
        ev.evaluate_v1(article(question("n")), {"n": ""})


V2 = article(
    question("a1", "Broncos", "the Broncos"),
    question("a2", "1895"),
    question("n1"),
    question("n2"),
)
V2_PREDICTIONS = {"a1": "Denver Broncos", "a2": "1895", "n1": "", "n2": "Paris"}
NULL_ODDS = {"a1": -3.0, "a2": -5.0, "n1": 2.0, "n2": 1.0}


def test_evaluate_v2_without_probabilities():
    # Exact: a1 0, a2 1, n1 1 ("" for no answer), n2 0. F1: a1 2/3 (denver broncos / broncos).
    result = ev.evaluate_v2(V2, V2_PREDICTIONS)
    assert list(result) == [
        "exact", "f1", "total",
        "HasAns_exact", "HasAns_f1", "HasAns_total",
        "NoAns_exact", "NoAns_f1", "NoAns_total",
    ]  # fmt: skip
    expected = [50.0, 100 * (2 / 3 + 2) / 4, 4, 50.0, 100 * (2 / 3 + 1) / 2, 2, 50.0, 50.0, 2]
    assert list(result.values()) == pytest.approx(expected)


def test_evaluate_v2_with_null_odds():
    # Threshold 1.0: only n1 (2.0) counts as "", which it already is.
    result = ev.evaluate_v2(V2, V2_PREDICTIONS, NULL_ODDS)
    assert (result["exact"], result["f1"]) == pytest.approx((50.0, 100 * (2 / 3 + 2) / 4))
    # Best thresholds, by probability a2 -5, a1 -3, n2 1, n1 2, from 2 (every question ""):
    # exact 3 after a2 (-5); F1 3 after a2, 3 + 2/3 after a1 (-3), then n2's "Paris" costs 1.
    assert list(result)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert (result["best_exact"], result["best_exact_thresh"]) == pytest.approx((75.0, -5.0))
    assert (result["best_f1"], result["best_f1_thresh"]) == pytest.approx((100 * (3 + 2 / 3) / 4, -3.0))
    # Threshold 0: n2 (1.0) counts as "" too, and is right.
    result = ev.evaluate_v2(V2, V2_PREDICTIONS, NULL_ODDS, na_prob_thresh=0.0)
    assert (result["exact"], result["f1"], result["NoAns_exact"]) == pytest.approx(
        (75.0, 100 * (2 / 3 + 3) / 4, 100)
    )


def test_evaluate_v2_leaves_out_questions_without_predictions():
    result = ev.evaluate_v2(V2, {"a2": "1895", "n2": ""})
    assert (result["exact"], result["total"], result["HasAns_total"], result["NoAns_total"]) == (
        100.0,
        2,
        1,
        1,
    )
    with pytest.raises(ValueError, match=r"no question of the dataset has a prediction"):
        ev.evaluate_v2(V2, {})
    with pytest.raises(ValueError, match=r"1 predicted questions have no no-answer probability, e.g. n2"):
        ev.evaluate_v2(V2, V2_PREDICTIONS, {"a1": 0.0, "a2": 0.0, "n1": 0.0})


def write(path, value):
    path.write_text(json.dumps(value))
    return str(path)


def test_evaluate_files_and_tool(tmp_path, capsys):
    data = write(tmp_path / "dev.json", {"version": "v2.0", "data": V2})
    predictions = write(tmp_path / "predictions.json", V2_PREDICTIONS)
    null_odds = write(tmp_path / "null_odds.json", NULL_ODDS)
    result = ev.evaluate_files(data, predictions, True, null_odds)
    assert result == ev.evaluate_v2(V2, V2_PREDICTIONS, NULL_ODDS)
    with pytest.raises(ValueError, match=r"needs --version_2_with_negative"):
        ev.evaluate_files(data, predictions, False, null_odds)
    with pytest.raises(ValueError, match=r"nothing.json: cannot read the predictions file"):
        ev.evaluate_files(data, str(tmp_path / "nothing.json"))
    with pytest.raises(ValueError, match=r"predictions.json: not SQuAD JSON"):
        ev.evaluate_files(predictions, predictions)

    # The tool's call, in this process: the scores printed as JSON.
    ev.run_evaluate(
        ev.EvaluateOptions(
            data_file=data, prediction_file=predictions, na_prob_file=null_odds, version_2_with_negative=True
        )
    )
    assert json.loads(capsys.readouterr().out) == pytest.approx(dict(result))
    tool = [sys.executable, f"{REPO}/tools/evaluate_squad.py"]
    v1 = write(tmp_path / "dev-v1.1.json", {"version": "1.1", "data": article(question("a1", "Broncos"))})
    out_file = tmp_path / "eval.json"
    assert tool_runs.run([*tool, v1, predictions, f"--out_file={out_file}"]).returncode == 0
    assert json.loads(out_file.read_text()) == {"exact_match": 0.0, "f1": pytest.approx(100 * 2 / 3)}
    bad = tool_runs.run([*tool, v1])
    assert bad.returncode == 2
    assert "error: " in bad.stderr and "DATA_FILE PREDICTION_FILE" in bad.stderr


def test_files_are_checked_before_evaluating(tmp_path):
    predictions = write(tmp_path / "predictions.json", V2_PREDICTIONS)
    v2 = write(tmp_path / "dev-v2.0.json", {"version": "v2.0", "data": V2})
    with pytest.raises(
        ValueError,
        match=r"dev-v2\.0\.json: question n1 has no answer: for SQuAD 2\.0 data pass "
        r"--version_2_with_negative$",
    ):
        ev.evaluate_files(v2, predictions)
    bad_text = article(question("a1", "Broncos"))
    bad_text[0]["paragraphs"][0]["qas"][0]["answers"][0]["text"] = 1895
    data = write(tmp_path / "dev.json", {"data": bad_text})
    with pytest.raises(
        ValueError, match=r"dev\.json: question a1: 'text' is an integer \(1895\), expected a string$"
    ):
        ev.evaluate_files(data, predictions, True)
    no_answers = article(question("a1", "Broncos"))
    del no_answers[0]["paragraphs"][0]["qas"][0]["answers"]
    data = write(tmp_path / "dev.json", {"data": no_answers})
    with pytest.raises(
        ValueError, match=r"dev\.json: question a1: no 'answers' \(evaluation needs the gold answers\)$"
    ):
        ev.read_dataset(data)
    numbers = write(tmp_path / "numbers.json", {"a1": 1895})
    with pytest.raises(
        ValueError, match=r"numbers\.json: question a1: the answer is an integer, expected a string$"
    ):
        ev.evaluate_files(v2, numbers, True)

    tool = [sys.executable, f"{REPO}/tools/evaluate_squad.py"]
    result = tool_runs.run([*tool, v2, predictions])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {v2}: question n1 has no answer: for SQuAD 2.0 data pass --version_2_with_negative"
    )
