"""The SQuAD head, loss and tools/run_squad.py end to end on google_tiny (random weights).

References: the original's sequence output in the google_tiny fixture with the head's math in
NumPy; answers checked as strings against the synthetic data; records and the checkpoint read
back with TensorFlow; the prediction files recomputed from the trained checkpoint.
"""

import json
import logging
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, load_google_checkpoint
from bert_tf.modeling import BertSquad
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import predictions as squad_predictions
from bert_tf.tasks.squad import run as squad_run
from bert_tf.tasks.squad import task as squad_task
from bert_tf.text.tokenization import FullTokenizer
from tests import model_fixtures as mf
from tests import tool_runs
from tests.test_squad import REPO, VOCAB

DATA = os.path.join(REPO, "tools", "demo_data", "squad")
TOOL = [sys.executable, os.path.join(REPO, "tools", "run_squad.py")]
COMMON = [
    f"--vocab_file={VOCAB}",
    f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
    f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
    "--seed=1",
]


def run_squad(*flags, check=True):
    result = tool_runs.run([*TOOL, *COMMON, *flags])
    if check and result.returncode != 0:
        raise AssertionError(result.stderr[-3000:])
    return result


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_head_and_loss_against_numpy_on_the_original_sequence_output(fixtures_dir):
    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    task = squad_task.SquadTask(config)
    model = task.model
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT, strict=False)
    paths = {w.path: tuple(w.shape) for w in model.weights}
    assert list(paths)[-2:] == ["cls/squad/output_weights", "cls/squad/output_bias"]
    assert (paths["cls/squad/output_weights"], paths["cls/squad/output_bias"]) == ((2, 128), (2,))
    assert not any(w.path.startswith("bert/pooler") for w in model.trainable_weights)
    rng = np.random.RandomState(0)
    weights, bias = rng.normal(0, 0.5, (2, 128)), rng.normal(0, 0.5, 2)
    model.cls.output_weights.assign(weights)
    model.cls.output_bias.assign(bias)

    batch = mf.reference_arrays()["b0"]
    outputs = model(mf.model_inputs(batch))
    logits = batch["sequence_output"].astype(np.float64) @ weights.T + bias  # the original's, then the head
    np.testing.assert_allclose(outputs["start_logits"], logits[..., 0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], logits[..., 1], atol=1e-5)

    rows = len(logits)
    positions = {
        "start_positions": np.array([0, 3, 5, 31][:rows]),
        "end_positions": np.array([0, 4, 9, 31][:rows]),
    }
    (numerator,), metrics = task.loss_terms(outputs, positions)
    (denominator,) = task.loss_denominators(positions)
    start_nll = -log_softmax(logits[..., 0])[np.arange(rows), positions["start_positions"]]
    end_nll = -log_softmax(logits[..., 1])[np.arange(rows), positions["end_positions"]]
    assert float(numerator) / float(denominator) == pytest.approx(
        (start_nll.mean() + end_nll.mean()) / 2, rel=1e-5
    )
    assert float(metrics["start_loss"][0]) == pytest.approx(start_nll.sum(), rel=1e-5)
    correct = (logits[..., 1].argmax(-1) == positions["end_positions"]).sum()
    assert float(metrics["end_accuracy"][0]) == correct


def synthetic_squad(num_questions, seed=0):
    """Questions a tiny model can learn: each paragraph of filler words holds one year and one
    two-word name; "in which year ?" asks for the year, "who was it ?" for the name."""
    rng = random.Random(seed)
    filler = [
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
        "was",
        "it",
        "he",
        "she",
        "they",
        "at",
        "on",
        "by",
        "from",
        "with",
        "for",
        "as",
        "his",
        "her",
    ]
    filler += [
        "city",
        "river",
        "house",
        "king",
        "war",
        "church",
        "school",
        "music",
        "paper",
        "game",
        "field",
        "road",
        "light",
    ]
    first = ["john", "mary", "james", "anna", "peter", "paul", "george", "helen", "david", "sarah"]
    last = ["smith", "brown", "jones", "miller", "davis", "wilson", "moore", "taylor", "clark", "lewis"]
    paragraphs, answers = [], {}
    for i in range(num_questions // 2):
        words = rng.choices(filler, k=rng.randint(12, 24))
        year, name = str(rng.randint(1800, 1999)), f"{rng.choice(first)} {rng.choice(last)}"
        words.insert(rng.randint(0, len(words)), year)
        words.insert(rng.randint(0, len(words)), name)
        context = " ".join(words) + "."
        qas = []
        for qid, question, answer in ((f"y{i}", "in which year ?", year), (f"n{i}", "who was it ?", name)):
            qas.append(
                {
                    "id": qid,
                    "question": question,
                    "answers": [{"text": answer, "answer_start": context.index(answer)}],
                }
            )
            answers[qid] = answer
        paragraphs.append({"context": context, "qas": qas})
    return {"version": "1.1", "data": [{"title": "synthetic", "paragraphs": paragraphs}]}, answers


def test_learns_synthetic_squad_from_random_weights(fixtures_dir, tmp_path):
    # 100 steps of batch 16 on the 2-layer model, then predict.
    data, answers = synthetic_squad(64)
    train_file = tmp_path / "train.json"
    train_file.write_text(json.dumps(data))
    output_dir = tmp_path / "out"
    run_squad(
        "--do_train",
        "--do_predict",
        "--do_eval",
        f"--train_file={train_file}",
        f"--predict_file={train_file}",
        f"--output_dir={output_dir}",
        f"--export_dir={tmp_path / 'export'}",
        "--max_seq_length=48",
        "--max_query_length=8",
        "--train_batch_size=16",
        "--num_train_epochs=25",
        "--learning_rate=1e-3",
    )
    predictions = json.loads((output_dir / "predictions.json").read_text())
    assert list(predictions) == list(answers)
    exact = sum(predictions[qid] == answer for qid, answer in answers.items()) / len(answers)
    assert exact >= 0.5, predictions
    results = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert sorted(results) == ["exact_match", "f1"]
    assert float(results["exact_match"]) >= 100 * exact  # normalised answers match at least as often
    assert not (output_dir / "null_odds.json").exists()
    # The checkpoint: int(64 / 16 * 25) steps, the head with its Adam slots, the pooler without.
    names = dict(tf.train.list_variables(str(output_dir / "model.ckpt-100")))
    assert names["cls/squad/output_weights"] == [2, 128] and names["cls/squad/output_bias"] == [2]
    assert "cls/squad/output_weights/adam_m" in names and "cls/squad/output_bias/adam_v" in names
    assert "bert/pooler/dense/kernel" in names and "bert/pooler/dense/kernel/adam_m" not in names
    check_export(tmp_path / "export" / "1", data, predictions, output_dir / "eval.tf_record")


def best_answer(start_logits, end_logits, tokens, n_best_size=20, max_answer_length=30):
    """The original's choice for a window that holds the whole paragraph: the best sum of start
    and end logits over the top `n_best_size` starts and ends that span paragraph tokens in
    order, at most `max_answer_length` long; its pieces joined back into words."""
    first = tokens.index("[SEP]") + 1
    paragraph = range(first, tokens.index("[SEP]", first))
    starts, ends = (np.argsort(-logits)[:n_best_size] for logits in (start_logits, end_logits))
    spans = [
        (s, e)
        for s in starts
        for e in ends
        if s in paragraph and e in paragraph and 0 <= e - s < max_answer_length
    ]
    start, end = max(spans, key=lambda span: start_logits[span[0]] + end_logits[span[1]])
    return " ".join(tokens[start : end + 1]).replace(" ##", "")


def check_export(path, data, predictions, eval_records):
    """`text_pair` on (question, paragraph) packs the tool's features and gives its logits and
    answers, for the questions whose paragraph fits in one window."""
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    loaded = tf.saved_model.load(str(path))
    questions = [(qa, p["context"]) for p in data["data"][0]["paragraphs"] for qa in p["qas"]]
    got = loaded.signatures["text_pair"](
        text_a=tf.constant([qa["question"] for qa, _ in questions]),
        text_b=tf.constant([context for _, context in questions]),
    )
    assert sorted(got) == [
        "end_logits",
        "end_offsets",
        "segment_ids",
        "start_logits",
        "start_offsets",
        "tokens",
    ]
    features = read_records(eval_records, squad_data.name_to_features(48, False))
    by_ids = loaded.signatures["serving_default"](
        **{
            name: tf.constant([f[name] for f in features], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
    )
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    compared = 0
    for i, (qa, _) in enumerate(questions):
        tokens = [t.decode() for t in got["tokens"][i].numpy()]
        ids = tokenizer.convert_tokens_to_ids([t for t in tokens if t])
        matches = [
            j
            for j, f in enumerate(features)
            if f["input_ids"][: len(ids)] == ids and f["input_mask"].count(1) == len(ids)
        ]
        if tokens[-1] != "" or len(matches) != 1:  # the paragraph was cut, or windowed by the tool
            continue
        for name in ("start_logits", "end_logits"):  # at the real tokens: text_pair pads to the request
            np.testing.assert_allclose(
                got[name][i][: len(ids)], by_ids[name][matches[0]][: len(ids)], atol=1e-5
            )
        start, end = got["start_logits"][i].numpy(), got["end_logits"][i].numpy()
        assert best_answer(start, end, tokens) == predictions[qa["id"]]
        compared += 1
    assert compared >= 32, compared
    # A long question is cut to --max_query_length (8) and the paragraph fills the rest, as the
    # tool's first window: not longest first.
    question, paragraph = " ".join(["which year was it"] * 5), " ".join(["the old road"] * 30)
    got = loaded.signatures["text_pair"](text_a=tf.constant([question]), text_b=tf.constant([paragraph]))
    q, p = tokenizer.tokenize(question)[:8], tokenizer.tokenize(paragraph)[: 48 - 3 - 8]
    assert [t.decode() for t in got["tokens"][0].numpy()] == ["[CLS]", *q, "[SEP]", *p, "[SEP]"]


def read_records(path, spec):
    return [
        {k: v.numpy().tolist() for k, v in tf.io.parse_single_example(r, spec).items()}
        for r in tf.data.TFRecordDataset(str(path))
    ]


def test_squad_2_train_and_predict_files(fixtures_dir, tmp_path):
    data_file = os.path.join(DATA, "squad-v2.0.json")
    output_dir = tmp_path / "out"
    shape = ["--max_seq_length=64", "--doc_stride=24", "--max_query_length=16"]
    run_squad(
        "--do_train",
        "--do_predict",
        "--version_2_with_negative",
        "--null_score_diff_threshold=-1.0",
        "--n_best_size=5",
        f"--train_file={data_file}",
        f"--predict_file={data_file}",
        f"--output_dir={output_dir}",
        "--train_batch_size=8",
        "--num_train_epochs=2",  # int(15 / 8 * 2) = 3 steps
        *shape,
    )
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)

    def features(examples, is_training):
        return list(squad_data.convert_examples_to_features(examples, tokenizer, 64, 24, 16, is_training))

    # train.tf_record: the features of the examples in random.Random(12345)'s order.
    train_examples = squad_data.read_squad_examples(data_file, True, True)
    random.Random(12345).shuffle(train_examples)
    spec = squad_data.name_to_features(64, True)
    spec["is_impossible"] = tf.io.FixedLenFeature([], tf.int64)
    assert read_records(output_dir / "train.tf_record", spec) == [
        {k: v[0] if len(v) == 1 else v for k, v in squad_data.feature_values(f, True).items()}
        for f in features(train_examples, True)
    ]
    assert {e.qas_id for e in train_examples if e.is_impossible} == {"ada06", "zur11", "bei15"}

    # eval.tf_record, in file order.
    examples = squad_data.read_squad_examples(data_file, False)
    eval_features = features(examples, False)
    records = read_records(output_dir / "eval.tf_record", squad_data.name_to_features(64, False))
    assert records == [
        {k: v[0] if len(v) == 1 else v for k, v in squad_data.feature_values(f, False).items()}
        for f in eval_features
    ]

    # The three files: the original's structure, recomputed from the trained checkpoint.
    model = BertSquad(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, str(output_dir / "model.ckpt-3"))
    inputs = {
        k: np.array([r[k] for r in records], np.int32) for k in ("input_ids", "input_mask", "segment_ids")
    }
    outputs = model(inputs)
    results = [
        squad_predictions.RawResult(f.unique_id, s, e)
        for f, s, e in zip(
            eval_features, outputs["start_logits"].numpy(), outputs["end_logits"].numpy(), strict=True
        )
    ]
    expected = squad_predictions.compute_predictions(
        examples,
        eval_features,
        results,
        5,
        30,
        True,
        version_2_with_negative=True,
        null_score_diff_threshold=-1.0,
    )
    texts = {name: (output_dir / name).read_text() for name in squad_predictions.PREDICTION_FILES}
    for text in texts.values():
        assert text.startswith('{\n    "ada01": ') and text.endswith("\n}\n")  # indent 4, as the original
        assert list(json.loads(text)) == [e.qas_id for e in examples]
    predictions, nbest, null_odds = (json.loads(t) for t in texts.values())
    assert predictions == expected[0]
    for qid, entries in nbest.items():
        assert [e["text"] for e in entries] == [e["text"] for e in expected[1][qid]]
        for entry, want in zip(entries, expected[1][qid], strict=True):
            assert list(entry) == ["text", "probability", "start_logit", "end_logit"]
            assert [entry[k] for k in list(entry)[1:]] == pytest.approx(
                [want[k] for k in list(want)[1:]], abs=1e-4
            )
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
        assert "" in [e["text"] for e in entries]
        best_non_null = next(e for e in entries if e["text"])
        assert null_odds[qid] == pytest.approx(expected[2][qid], abs=1e-4)
        assert predictions[qid] == ("" if null_odds[qid] > -1.0 else best_non_null["text"])


def _options(tmp_path, **changes):
    """`SquadOptions` on google_tiny into `tmp_path / "out"`, short sequences, with `changes`."""
    values = dict(
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        output_dir=str(tmp_path / "out"),
        max_seq_length=32,
        max_query_length=8,
    )
    return squad_run.SquadOptions(**dict(values, **changes))


def test_training_skips_an_answer_not_at_its_offset(fixtures_dir, tmp_path, caplog):
    context = "Paris is the capital of France."
    qas = [
        {"id": "good", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}]},
        {"id": "bad", "question": "?", "answers": [{"text": "France", "answer_start": 9}]},
    ]
    train_file = tmp_path / "train.json"
    train_file.write_text(json.dumps({"data": [{"paragraphs": [{"context": context, "qas": qas}]}]}))
    options = _options(
        tmp_path, do_train=True, train_file=str(train_file), train_batch_size=1, num_train_epochs=1
    )
    with caplog.at_level(logging.INFO):
        squad_run.run_squad(options)
    messages = [r.getMessage() for r in caplog.records]
    assert (
        f"{train_file}: question bad: skipped: answer 'France' is not at offset 9 (found 'the capital')"
        in messages
    )
    assert "Train: 1 questions, 1 features" in messages
    assert (tmp_path / "out" / "model.ckpt-1.index").exists()  # int(1 / 1 * 1) steps


def test_eval_data_is_checked_before_the_predictions_are_written(fixtures_dir, tmp_path):
    with open(os.path.join(DATA, "squad-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)
    del data["data"][1]["paragraphs"][0]["qas"][0]["answers"]
    qid = data["data"][1]["paragraphs"][0]["qas"][0]["id"]
    predict_file = tmp_path / "dev.json"
    predict_file.write_text(json.dumps(data))
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    earlier = {
        name: f"earlier {name}" for name in ("predictions.json", "nbest_predictions.json", "eval_results.txt")
    }
    for name, text in earlier.items():
        (output_dir / name).write_text(text)
    options = _options(
        tmp_path,
        do_predict=True,
        do_eval=True,
        predict_file=str(predict_file),
        max_seq_length=64,
        max_query_length=16,
    )
    with pytest.raises(
        ValueError,
        match=rf"^{predict_file}: question {qid}: no 'answers' \(evaluation needs the gold answers\)$",
    ):
        squad_run.run_squad(options)
    assert {path.name: path.read_text() for path in output_dir.iterdir()} == earlier


@pytest.mark.parametrize("version_2", [False, True], ids=["v1", "v2"])
def test_questions_on_empty_paragraphs_get_the_originals_answers(fixtures_dir, tmp_path, version_2):
    """No window to run the model on: v1 answers the original's placeholder "empty", v2 the
    null answer, with the original's starting null score as its difference."""
    qas = [{"id": "q1", "question": "Who?", "answers": [], "is_impossible": True}]
    predict_file = tmp_path / "dev.json"
    predict_file.write_text(json.dumps({"data": [{"paragraphs": [{"context": " ", "qas": qas}]}]}))
    options = _options(
        tmp_path, do_predict=True, predict_file=str(predict_file), version_2_with_negative=version_2
    )
    squad_run.run_squad(options)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert predictions == {"q1": "" if version_2 else "empty"}
    if version_2:
        assert json.loads((tmp_path / "out" / "null_odds.json").read_text()) == {"q1": 1000000.0}


def test_a_predict_file_without_questions_is_an_error(fixtures_dir, tmp_path):
    predict_file = tmp_path / "dev.json"
    predict_file.write_text(json.dumps({"data": []}))
    options = _options(tmp_path, init_checkpoint=None, do_predict=True, predict_file=str(predict_file))
    with pytest.raises(ValueError, match=rf"^{predict_file}: no questions to predict$"):
        squad_run.run_squad(options)
    assert not (tmp_path / "out").exists()


def test_no_training_step_names_the_file_and_writes_nothing(fixtures_dir, tmp_path):
    train_file = tmp_path / "train.json"
    train_file.write_text(json.dumps({"data": []}))
    options = _options(
        tmp_path,
        init_checkpoint=None,
        do_train=True,
        train_file=str(train_file),
        do_predict=True,
        predict_file=os.path.join(DATA, "squad-v1.1.json"),
        max_seq_length=64,
        max_query_length=16,
    )
    with pytest.raises(
        ValueError,
        match=rf"^{train_file}: 0 training examples with --train_batch_size=32 and "
        r"--num_train_epochs=3\.0 give no training step$",
    ):
        squad_run.run_squad(options)
    assert not (tmp_path / "out").exists()


def test_the_tool_has_the_originals_batch_flags_only(tmp_path):
    """The original's run_squad.py has --predict_batch_size and no --eval_batch_size (its
    evaluation is of the predictions)."""
    result = run_squad(f"--output_dir={tmp_path}", "--eval_batch_size=4", "--do_predict", check=False)
    assert result.returncode != 0 and "Unknown command line flag 'eval_batch_size'" in result.stderr


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(do_train=True), r"^--do_train needs --train_file$"),
        (dict(do_eval=True), r"^--do_eval needs --predict_file$"),
        (dict(do_train=True, train_file="t.json", max_seq_length=11, max_query_length=8),
         r"^--max_seq_length \(11\) must be greater than --max_query_length \(8\) \+ 3$"),
        (dict(do_predict=True, predict_file="p", doc_stride=0), r"^--doc_stride must be at least 1, got 0"),
        (dict(do_predict=True, predict_file="p", n_best_size=0), r"^--n_best_size must be at least 1"),
        (dict(do_eval=True, predict_file=os.path.join(DATA, "squad-v1.1.json")),
         r"^--do_eval: .*predictions.json does not exist \(run --do_predict first\)$"),
    ],
)  # fmt: skip
def test_bad_flags(fixtures_dir, tmp_path, options, message):
    base = dict(vocab_file=VOCAB, bert_config_file=mf.GOOGLE_TINY_CONFIG, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match=message):
        squad_run.run_squad(squad_run.SquadOptions(**base, **options))
