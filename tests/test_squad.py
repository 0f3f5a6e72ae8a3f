"""SQuAD reading, feature conversion and prediction writing on hand-checked cases.

The expected tokens, positions, windows and n-best lists below were worked out by hand from the
rules of the original's run_squad.py (its docstrings and code read for the rules, not run);
tests/test_squad_original.py compares against the original's own outputs.
"""

import json
import logging
import math
import os

import numpy as np
import pytest

from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.text.tokenization import FullTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(REPO, "tools", "demo_data", "vocab.txt")

F32_2_9 = float(np.float32(2.9))  # logits arrive as float32
MILK = "the man went to the store and bought a gallon of milk"
# WordPieces: the0 man1 went2 to3 the4 store5 and6 bought7 a8 gallon9 of10 milk11


@pytest.fixture(scope="module")
def tokenizer():
    return FullTokenizer(VOCAB, do_lower_case=True)


def squad_file(tmp_path, paragraphs, name="data.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}))
    return str(path)


def qa(qid, question, answer=None, start=None, **extra):
    answers = [] if answer is None else [{"text": answer, "answer_start": start}]
    return dict(id=qid, question=question, answers=answers, **extra)


def convert(examples, tokenizer, max_seq_length, doc_stride=128, max_query_length=64, is_training=False):
    return list(
        squad_data.convert_examples_to_features(
            examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training
        )
    )


# -- reading --------------------------------------------------------------------------------


def test_split_paragraph_maps_whitespace_to_the_word_before():
    words, word_of_char = squad_data.split_paragraph(" ab \t\u202fc\nd ")
    assert words == ["ab", "c", "d"]
    #                        ' '  a  b  ' ' \t  nnbsp c  \n  d  ' '
    assert word_of_char == [-1, 0, 0, 0, 0, 0, 1, 1, 2, 2]


def test_read_training_examples(tmp_path):
    context = "The leader was John Smith (1895-1943).  Born\tin\nLondon."
    path = squad_file(
        tmp_path,
        [
            {
                "context": context,
                "qas": [
                    qa("q1", "When was he born?", "1895", context.index("1895")),
                    qa("q2", "Where?", "in\nLondon", context.index("in\n")),
                ],
            }
        ],
    )
    first, second = squad_data.read_squad_examples(path, is_training=True)
    assert first.doc_tokens == [
        "The",
        "leader",
        "was",
        "John",
        "Smith",
        "(1895-1943).",
        "Born",
        "in",
        "London.",
    ]
    assert (first.qas_id, first.question_text, first.orig_answer_text) == ("q1", "When was he born?", "1895")
    assert (first.start_position, first.end_position, first.is_impossible) == (5, 5, False)
    assert (second.start_position, second.end_position) == (7, 8)
    assert second.doc_tokens is first.doc_tokens  # one list per paragraph


def test_read_predict_examples_ignore_answers(tmp_path):
    path = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q", "?", "zzz", 99), qa("r", "??")]}])
    examples = squad_data.read_squad_examples(path, is_training=False)
    assert [(e.qas_id, e.start_position, e.orig_answer_text) for e in examples] == [
        ("q", None, None),
        ("r", None, None),
    ]


def test_read_impossible_questions_under_version_2(tmp_path):
    path = squad_file(
        tmp_path,
        [
            {
                "context": "red green blue",
                "qas": [
                    qa("no", "Which?", is_impossible=True),
                    qa("yes", "Which?", "green", 4, is_impossible=False),
                ],
            }
        ],
    )
    impossible, possible = squad_data.read_squad_examples(
        path, is_training=True, version_2_with_negative=True
    )
    assert (impossible.is_impossible, impossible.start_position, impossible.end_position) == (True, -1, -1)
    assert impossible.orig_answer_text == ""
    assert (possible.is_impossible, possible.start_position, possible.end_position) == (False, 1, 1)
    with pytest.raises(ValueError, match=r"question no: 0 answers; a training question needs exactly 1"):
        squad_data.read_squad_examples(path, is_training=True, version_2_with_negative=False)


def test_answer_not_at_its_offset_is_skipped_with_a_warning(tmp_path, caplog):
    context = "Paris is the capital of France."
    path = squad_file(
        tmp_path,
        [
            {
                "context": context,
                "qas": [
                    qa("good", "What?", "France", context.index("France")),
                    qa("bad", "What?", "France", context.index("capital")),
                    qa("beyond", "What?", "France", len(context)),
                ],
            }
        ],
    )
    with caplog.at_level(logging.WARNING, logger="bert_tf.tasks.squad.data"):
        examples = squad_data.read_squad_examples(path, is_training=True)
    assert [e.qas_id for e in examples] == ["good"]
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 2
    assert "question bad: skipped: answer 'France' is not at offset 13 (found 'capital')" in messages[0]
    assert path in messages[0]
    assert "question beyond: skipped" in messages[1]


def test_bad_files_name_the_file(tmp_path):
    missing = str(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=r"missing.json: cannot read the SQuAD file"):
        squad_data.read_squad_examples(missing, is_training=False)
    not_json = tmp_path / "bad.json"
    not_json.write_text("{")
    with pytest.raises(ValueError, match=r"bad.json: not JSON"):
        squad_data.read_squad_examples(str(not_json), is_training=False)
    no_context = squad_file(tmp_path, [{"qas": []}])
    with pytest.raises(ValueError, match=r"data.json: not SQuAD JSON \(missing 'context'\)"):
        squad_data.read_squad_examples(no_context, is_training=False)
    two_answers = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q", "?", "a", 0)]}])
    with open(two_answers) as f:
        data = json.load(f)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"] *= 2
    with open(two_answers, "w") as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match=r"question q: 2 answers"):
        squad_data.read_squad_examples(two_answers, is_training=True)
    v1 = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q", "?", "a", 0)]}])
    with pytest.raises(ValueError, match=r"question q: no 'is_impossible'"):
        squad_data.read_squad_examples(v1, is_training=True, version_2_with_negative=True)


def test_a_field_of_the_wrong_type_names_the_question_the_field_and_the_type(tmp_path):
    answer_text = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q7", "?", 5, 0)]}])
    with pytest.raises(
        ValueError, match=r"data\.json: question q7: 'text' is an integer \(5\), expected a string$"
    ):
        squad_data.read_squad_examples(answer_text, is_training=True)
    answer_start = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q7", "?", "b", "2")]}])
    with pytest.raises(
        ValueError,
        match=r"data\.json: question q7: 'answer_start' is a string \(\"2\"\), expected an integer$",
    ):
        squad_data.read_squad_examples(answer_start, is_training=True)
    answers = squad_file(tmp_path, [{"context": "a b", "qas": [dict(qa("q7", "?"), answers={})]}])
    with pytest.raises(ValueError, match=r"question q7: 'answers' is an object \(\{\}\), expected a list$"):
        squad_data.read_squad_examples(answers, is_training=True)
    question = squad_file(tmp_path, [{"context": "a b", "qas": [qa("q7", ["?"])]}])
    with pytest.raises(
        ValueError, match=r"question q7: 'question' is a list \(\[\"\?\"\]\), expected a string$"
    ):
        squad_data.read_squad_examples(question, is_training=False)
    context = squad_file(tmp_path, [{"context": 12, "qas": [qa("q7", "?"), qa("q8", "?")]}])
    with pytest.raises(
        ValueError,
        match=r"data\.json: the paragraph of question q7: 'context' is an integer \(12\), expected a string$",
    ):
        squad_data.read_squad_examples(context, is_training=False)
    qas = squad_file(tmp_path, [{"context": "a b", "qas": ["q7"]}])
    with pytest.raises(ValueError, match=r"data\.json: a string where an object with 'id' is expected$"):
        squad_data.read_squad_examples(qas, is_training=False)


def test_squad_2_training_data_without_the_flag_says_to_pass_it(tmp_path):
    path = squad_file(tmp_path, [{"context": "a b", "qas": [qa("n", "?", is_impossible=True)]}])
    with pytest.raises(
        ValueError,
        match=r"question n: 0 answers; a training question needs exactly 1 "
        r"\(for SQuAD 2\.0 data pass --version_2_with_negative\)$",
    ):
        squad_data.read_squad_examples(path, is_training=True)


# -- features -------------------------------------------------------------------------------


def test_one_window_with_an_improved_answer_span(tokenizer):
    doc = ["The", "leader", "was", "John", "Smith", "(1895-1943).", "Born", "in", "London."]
    example = squad_data.SquadExample("q", "When was John Smith born?", doc, "1895", 5, 5)
    (feature,) = convert([example], tokenizer, 32, is_training=True)
    question = ["when", "was", "john", "smith", "born", "?"]
    pieces = [
        "the",
        "leader",
        "was",
        "john",
        "smith",
        "(",
        "1895",
        "-",
        "1943",
        ")",
        ".",
        "born",
        "in",
        "london",
        ".",
    ]
    assert feature.tokens == ["[CLS]", *question, "[SEP]", *pieces, "[SEP]"]
    assert (feature.unique_id, feature.example_index, feature.doc_span_index) == (1000000000, 0, 0)
    # The answer's word "(1895-1943)." is WordPieces 5-10; "1895" alone is piece 6, position 8 + 6.
    assert (feature.start_position, feature.end_position) == (14, 14)
    assert feature.token_to_orig_map == dict(
        zip(range(8, 23), [0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 6, 7, 8, 8], strict=True)
    )
    assert feature.token_is_max_context == dict.fromkeys(range(8, 23), True)
    ids = [tokenizer.vocab[t] for t in feature.tokens]
    assert feature.input_ids == ids + [0] * 8
    assert feature.input_mask == [1] * 24 + [0] * 8
    assert feature.segment_ids == [0] * 8 + [1] * 16 + [0] * 8
    assert squad_data.feature_values(feature, is_training=True) == {
        "unique_ids": [1000000000],
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
        "start_positions": [14],
        "end_positions": [14],
        "is_impossible": [0],
    }
    assert list(squad_data.feature_values(feature, is_training=False)) == [
        "unique_ids",
        "input_ids",
        "input_mask",
        "segment_ids",
    ]


def test_answer_inside_a_word_keeps_the_whole_word(tokenizer):
    doc = ["The", "Japanese", "electronics", "industry"]
    example = squad_data.SquadExample("q", "Who?", doc, "Japan", 1, 1)
    (feature,) = convert([example], tokenizer, 16, is_training=True)
    assert feature.tokens[feature.start_position : feature.end_position + 1] == ["japanese"]


def test_long_document_across_several_windows(tokenizer):
    doc = MILK.split()
    examples = [
        squad_data.SquadExample(
            "edge", "what ?", doc, "went to the", 2, 4
        ),  # pieces 2-4: window 0's right edge
        squad_data.SquadExample(
            "left", "what ?", doc, "to the store", 3, 5
        ),  # pieces 3-5: window 1's left edge
        squad_data.SquadExample("mid", "what ?", doc, "bought a gallon", 7, 9),
    ]
    # [CLS] what ? [SEP] + 5 document pieces + [SEP]: windows of 5 starting 3 apart.
    features = convert(examples, tokenizer, 10, doc_stride=3, is_training=True)
    assert [f.unique_id for f in features] == list(range(1000000000, 1000000012))
    assert [f.example_index for f in features] == [0] * 4 + [1] * 4 + [2] * 4
    assert [f.doc_span_index for f in features] == [0, 1, 2, 3] * 3
    windows = [["the", "man", "went", "to", "the"], ["to", "the", "store", "and", "bought"]]
    windows += [["and", "bought", "a", "gallon", "of"], ["gallon", "of", "milk"]]
    assert [f.tokens for f in features[:4]] == [["[CLS]", "what", "?", "[SEP]", *w, "[SEP]"] for w in windows]
    assert features[3].input_mask == [1] * 8 + [0] * 2
    # Max context by hand: window 0 holds pieces 0-3, window 1 pieces 4-6, window 2 7-9, window 3 10-11.
    max_context = [[4, 5, 6, 7], [5, 6, 7], [5, 6, 7], [5, 6]]
    for feature, positions in zip(features[:4], max_context, strict=True):
        assert feature.token_is_max_context == {p: p in positions for p in feature.token_to_orig_map}
    assert features[2].token_to_orig_map == {4: 6, 5: 7, 6: 8, 7: 9, 8: 10}
    positions = [(f.start_position, f.end_position) for f in features]
    assert positions[:4] == [(6, 8), (0, 0), (0, 0), (0, 0)]
    assert positions[4:8] == [(0, 0), (4, 6), (0, 0), (0, 0)]
    assert positions[8:] == [(0, 0), (0, 0), (5, 7), (0, 0)]


def test_question_is_cut_to_max_query_length(tokenizer):
    example = squad_data.SquadExample("q", "one two three four five", ["milk"])
    (feature,) = convert([example], tokenizer, 12, max_query_length=2)
    assert feature.tokens == ["[CLS]", "one", "two", "[SEP]", "milk", "[SEP]"]
    with pytest.raises(ValueError, match=r"question q: --max_seq_length=5 leaves no room .* its 2 question"):
        convert([example], tokenizer, 5, max_query_length=2)


def test_impossible_questions_label_cls_in_every_window(tokenizer):
    example = squad_data.SquadExample("q", "what ?", MILK.split(), "", -1, -1, is_impossible=True)
    features = convert([example], tokenizer, 10, doc_stride=3, is_training=True)
    assert len(features) == 4
    assert all((f.start_position, f.end_position, f.is_impossible) == (0, 0, True) for f in features)
    assert squad_data.feature_values(features[0], True)["is_impossible"] == [1]


def test_unknown_accented_and_cjk_words(tokenizer):
    doc = ["Zürich", "☃", "北京是首都", "Crème"]
    examples = [
        squad_data.SquadExample("cjk", "where ?", doc, "北京", 2, 2),
        squad_data.SquadExample("accent", "where ?", doc, "Crème", 3, 3),
    ]
    cjk, accent = convert(examples, tokenizer, 20, is_training=True)
    pieces = ["zurich", "[UNK]", "北", "京", "[UNK]", "[UNK]", "都", "cr", "##eme"]
    assert cjk.tokens == ["[CLS]", "where", "?", "[SEP]", *pieces, "[SEP]"]
    assert cjk.input_ids[5] == tokenizer.vocab["[UNK]"]
    assert cjk.token_to_orig_map == dict(zip(range(4, 13), [0, 1, 2, 2, 2, 2, 2, 3, 3], strict=True))
    # "北京" is a character span of one whitespace word; its WordPieces are exactly 北 京.
    assert (cjk.start_position, cjk.end_position) == (6, 7)
    assert (accent.start_position, accent.end_position) == (11, 12)


def test_empty_document_gives_no_feature(tokenizer):
    assert convert([squad_data.SquadExample("q", "what ?", [])], tokenizer, 10) == []


# -- predictions ----------------------------------------------------------------------------


def test_get_final_text_alignment():
    final = squad_predictions.get_final_text
    assert final("steve smith", "Steve Smith's", True) == "Steve Smith"
    assert final("zurich", "Zürich,", True) == "Zürich"  # accent stripped, one character each
    assert final("1895", "(1895-1943).", True) == "1895"
    assert final("1895 - 1943", "(1895-1943).", True) == "1895-1943"
    assert final("北 京", "北京是首都", True) == "北京"
    assert final("Steve", "Steve's", False) == "Steve"
    # Alignment fails: the whole original text comes back.
    assert final("Steve", "Steve's", True) == "Steve's"  # not in the lower-cased "steve ' s"
    assert final("zurich", "Zu\u0308rich", True) == "Zu\u0308rich"  # NFD: 7 characters vs 6


def milk_results(features, logits_by_feature):
    """RawResults of -100 everywhere except `{feature offset: ({pos: start}, {pos: end})}`."""
    results = []
    for offset, feature in enumerate(features):
        start, end = np.full(10, -100.0, np.float32), np.full(10, -100.0, np.float32)
        for position, value in logits_by_feature.get(offset, ({}, {}))[0].items():
            start[position] = value
        for position, value in logits_by_feature.get(offset, ({}, {}))[1].items():
            end[position] = value
        results.append(squad_predictions.RawResult(feature.unique_id, start, end))
    return results


@pytest.fixture(scope="module")
def milk(tokenizer):
    examples = [squad_data.SquadExample(qid, "what ?", MILK.split()) for qid in ("A", "B", "C")]
    features = convert(examples, tokenizer, 10, doc_stride=3)
    logits = {
        # A. Window 0: start 8 (piece 4) is not max context there; "man went" = 4 + 3.
        0: ({0: 1.0, 5: 4.0, 8: 6.0}, {0: 1.0, 6: 3.0}),
        # Window 1: "the store" = 5 + 2.5, and the lowest null score, 0.5 + 0.5.
        1: ({0: 0.5, 5: 5.0}, {0: 0.5, 6: 2.5}),
        2: ({0: 3.0, 5: 2.0}, {0: 3.0, 7: 2.0}),  # "bought a gallon" = 4, 3 pieces
        3: ({0: 2.0, 5: 1.0}, {0: 2.0, 6: 1.0}),  # "of milk" = 2
        # B. "the" twice (pieces 0 and 4, each in its max-context window): kept once.
        4: ({4: 3.0}, {4: 3.0}),
        5: ({5: 2.9}, {5: 2.9, 6: 1.0}),
        # C: nothing valid.
    }
    return examples, features, milk_results(features, logits)


def nbest_rows(*rows):
    scores = [s + e for _, s, e in rows]
    top = max(scores)
    total = sum(math.exp(s - top) for s in scores)
    return [
        {"text": t, "probability": math.exp(s + e - top) / total, "start_logit": s, "end_logit": e}
        for t, s, e in rows
    ]


def assert_nbest(actual, expected):
    assert [r["text"] for r in actual] == [r["text"] for r in expected]
    for a, e in zip(actual, expected, strict=True):
        assert list(a) == ["text", "probability", "start_logit", "end_logit"]
        assert (a["start_logit"], a["end_logit"]) == (e["start_logit"], e["end_logit"])
        assert a["probability"] == pytest.approx(e["probability"], rel=1e-12)


def test_nbest_and_answers_squad_1(milk):
    examples, features, results = milk
    predictions, nbest, null_odds = squad_predictions.compute_predictions(
        examples, features, results, 4, 30, True
    )
    assert dict(predictions) == {"A": "the store", "B": "the", "C": "empty"}
    assert null_odds == {}
    rows_a = [
        ("the store", 5.0, 2.5),
        ("man went", 4.0, 3.0),
        ("bought a gallon", 2.0, 2.0),
        ("of milk", 1.0, 1.0),
    ]
    assert_nbest(nbest["A"], nbest_rows(*rows_a))
    assert_nbest(nbest["B"], nbest_rows(("the", 3.0, 3.0), ("the store", F32_2_9, 1.0)))
    assert nbest["C"] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]
    # n_best_size bounds the list; max_answer_length drops "bought a gallon".
    _, nbest, _ = squad_predictions.compute_predictions(examples, features, results, 2, 2, True)
    assert [r["text"] for r in nbest["A"]] == ["the store", "man went"]
    _, nbest, _ = squad_predictions.compute_predictions(examples, features, results, 4, 2, True)
    assert [r["text"] for r in nbest["A"]] == ["the store", "man went", "of milk"]


def test_null_answer_squad_2(milk):
    examples, features, results = milk
    predictions, nbest, null_odds = squad_predictions.compute_predictions(
        examples, features, results, 4, 30, True, version_2_with_negative=True
    )
    # A: the null candidate (0.5 + 0.5, window 1) does not make the n-best of 4; it is added.
    rows_a = [
        ("the store", 5.0, 2.5),
        ("man went", 4.0, 3.0),
        ("bought a gallon", 2.0, 2.0),
        ("of milk", 1.0, 1.0),
    ]
    assert_nbest(nbest["A"], nbest_rows(*rows_a, ("", 0.5, 0.5)))
    assert null_odds["A"] == 1.0 - 5.0 - 2.5
    # B: every null score is -200; the first window's is kept.
    assert null_odds["B"] == -200.0 - 3.0 - 3.0
    assert_nbest(nbest["B"], nbest_rows(("the", 3.0, 3.0), ("the store", F32_2_9, 1.0), ("", -100, -100)))
    # C: only the null answer.
    assert_nbest(nbest["C"], nbest_rows(("", -100.0, -100.0)))
    assert (predictions["C"], null_odds["C"]) == ("", -200.0)
    assert dict(predictions) == {"A": "the store", "B": "the", "C": ""}
    # With max_answer_length 2 the null candidate (score 1) makes the n-best itself.
    _, nbest, _ = squad_predictions.compute_predictions(
        examples, features, results, 4, 2, True, version_2_with_negative=True
    )
    assert [r["text"] for r in nbest["A"]] == ["the store", "man went", "of milk", ""]
    # The threshold: A's difference is -6.5.
    predictions, _, _ = squad_predictions.compute_predictions(
        examples, features, results, 4, 30, True, version_2_with_negative=True, null_score_diff_threshold=-6.6
    )
    assert predictions["A"] == ""
    predictions, _, _ = squad_predictions.compute_predictions(
        examples, features, results, 4, 30, True, version_2_with_negative=True, null_score_diff_threshold=-6.5
    )
    assert predictions["A"] == "the store"


def test_final_text_of_unicode_answers(tokenizer):
    doc = ["Zürich", "☃", "北京是首都", "Crème."]
    examples = [
        squad_data.SquadExample("cjk", "where ?", doc),
        squad_data.SquadExample("accent", "where ?", doc),
    ]
    cjk, accent = convert(examples, tokenizer, 20)
    # Positions 4.. are zurich [UNK] 北 京 [UNK] [UNK] 都 cr ##eme .
    results = []
    for feature, start, end in ((cjk, 6, 7), (accent, 11, 12)):
        start_logits, end_logits = np.zeros(20, np.float32), np.zeros(20, np.float32)
        start_logits[start], end_logits[end] = 10.0, 10.0
        results.append(squad_predictions.RawResult(feature.unique_id, start_logits, end_logits))
    predictions, _, _ = squad_predictions.compute_predictions(examples, [cjk, accent], results, 1, 30, True)
    assert dict(predictions) == {"cjk": "北京", "accent": "Crème"}


def test_write_predictions_files(milk, tmp_path):
    examples, features, results = milk
    paths = [
        str(tmp_path / name) for name in ("predictions.json", "nbest_predictions.json", "null_odds.json")
    ]
    squad_predictions.write_predictions(examples, features, results, 4, 30, True, *paths)
    assert not os.path.exists(paths[2])  # SQuAD 1.1: no null odds
    squad_predictions.write_predictions(
        examples, features, results, 4, 30, True, *paths, version_2_with_negative=True
    )
    with open(paths[0]) as f:
        text = f.read()
    assert text == '{\n    "A": "the store",\n    "B": "the",\n    "C": ""\n}\n'
    with open(paths[1]) as f:
        nbest = json.load(f)
    assert list(nbest) == ["A", "B", "C"]
    rows_a = [
        ("the store", 5.0, 2.5),
        ("man went", 4.0, 3.0),
        ("bought a gallon", 2.0, 2.0),
        ("of milk", 1.0, 1.0),
    ]
    assert_nbest(nbest["A"], nbest_rows(*rows_a, ("", 0.5, 0.5)))
    with open(paths[2]) as f:
        assert json.load(f) == {"A": -6.5, "B": -206.0, "C": -200.0}
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "null_odds.json", "predictions.json"]
