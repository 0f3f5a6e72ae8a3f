"""Token tagging: the CoNLL reader, first-piece labels and windows on hand-checked cases, the
conlleval chunker on hand-made IOB1/IOB2 sequences whose chunks are counted by hand, the head's
names, and tools/run_tagger.py end to end on the bundled names task from google_tiny's random
weights.
"""

import json
import os
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import reference
from bert_tf.config import BertConfig
from bert_tf.modeling import BertTagger
from bert_tf.tasks.tagging import data as tagging_data
from bert_tf.tasks.tagging import run as tagging_run
from bert_tf.tasks.tagging.data import TaggingExample
from bert_tf.tasks.tagging.metrics import chunks, entity_scores
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text.windows import DocSpan
from tests import finetuning_fixtures as ff
from tests import model_fixtures as mf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "tools", "run_tagger.py")
DEMO = os.path.join(REPO, "tools", "demo_data", "conll_names")
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
LABELS = ["B-LOC", "B-PER", "I-LOC", "I-PER", "O"]


def _ids(tokens):
    with open(VOCAB, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return [lines.index(token) for token in tokens]


@pytest.fixture(scope="module")
def tokenizer(fixtures_dir):
    return FullTokenizer(VOCAB, do_lower_case=True)


# -- reading -------------------------------------------------------------------------------------


def test_conll_reader_skips_docstart_and_blank_lines(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
        "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n-DOCSTART- -X- -X- O\nBRUSSELS NNP B-NP B-LOC\n"
    )
    examples = tagging_data.read_conll(str(path), "train")
    assert examples == [
        TaggingExample("train-0", ["EU", "rejects"], ["B-ORG", "O"], str(path), 3),
        TaggingExample("train-1", ["Peter", "Blackburn"], ["B-PER", "I-PER"], str(path), 7),
        TaggingExample("train-2", ["BRUSSELS"], ["B-LOC"], str(path), 10),
    ]
    tokens_only = tmp_path / "test.txt"
    tokens_only.write_text("Peter\nsaid\n\nHi\n")
    assert [e.words for e in tagging_data.read_conll(str(tokens_only), "test", require_tags=False)] == [
        ["Peter", "said"],
        ["Hi"],
    ]
    assert tagging_data.read_conll(str(tokens_only), "test", require_tags=False)[0].tags is None


def test_conll_reader_names_the_file_and_line_of_a_bad_row(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nGerman JJ B-NP\n")
    with pytest.raises(ValueError, match=r"dev\.txt:4: 3 columns, expected 4 \(as line 1\)"):
        tagging_data.read_conll(str(path), "dev")
    path.write_text("EU\nrejects\n")
    with pytest.raises(ValueError, match=r"dev\.txt:1: a token and a tag expected, found 1 column"):
        tagging_data.read_conll(str(path), "dev")


def test_conll_reader_columns_encoding_and_byte_order_mark(tmp_path):
    """Columns are split at spaces and tabs only, as conlleval's: a no-break space or an
    ideographic space is part of a token. A UTF-8 byte-order mark is no part of the first word
    (it made `-DOCSTART-` a word), and bytes that are not UTF-8 are an error naming the line
    (they were dropped, and a word of them vanished)."""
    path = tmp_path / "train.txt"
    path.write_bytes("\ufeff-DOCSTART- O\n\n10\u00a0000 CD\tO\n\u3000 PU O\n".encode())
    [example] = tagging_data.read_conll(str(path), "train")
    assert (example.words, example.tags, example.line) == (["10\u00a0000", "\u3000"], ["O", "O"], 3)
    path.write_bytes("Essen B-LOC\r\nM\xfcnchen B-LOC\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"train\.txt:2: not UTF-8 \(invalid start byte at byte 14\)$"):
        tagging_data.read_conll(str(path), "train")


def _options(tmp_path, **changes):
    values = dict(
        labels=",".join(LABELS),
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(tmp_path / "out"),
        do_predict=True,
        predict_file=os.path.join(DEMO, "test.txt"),
    )
    return tagging_run.TaggingOptions(**dict(values, **changes))


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(predict_file="EMPTY"), r"^.*/empty\.txt: no sentence$"),
        (dict(do_eval=True, eval_file="EMPTY"), r"^.*/empty\.txt: no sentence$"),
        (dict(labels="O,B-PER,O"), r"^--labels names O more than once$"),
        (dict(labels=" , ,"), r"^--labels=' , ,' names no label$"),
        (dict(doc_stride=0), r"^--doc_stride must be at least 1, got 0$"),
    ],
)
def test_bad_input_is_an_error_before_anything_is_written(tmp_path, fixtures_dir, changes, message):
    empty = tmp_path / "empty.txt"
    empty.write_text("-DOCSTART- O\n\n \t\n")
    changes = {key: str(empty) if value == "EMPTY" else value for key, value in changes.items()}
    with pytest.raises(ValueError, match=message):
        tagging_run.run_tagger(_options(tmp_path, **changes))
    assert not (tmp_path / "out").exists()


def test_no_training_step_names_the_file_before_anything_is_written(tmp_path, fixtures_dir):
    train_file = tmp_path / "train.txt"
    train_file.write_text("-DOCSTART- -X- -X- O\n\n")  # no sentence
    options = tagging_run.TaggingOptions(
        train_file=str(train_file),
        eval_file=os.path.join(DEMO, "dev.txt"),
        labels=",".join(LABELS),
        vocab_file=VOCAB,
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        output_dir=str(tmp_path / "out"),
        do_train=True,
        do_eval=True,
        train_batch_size=8,
        num_train_epochs=0.1,
    )
    with pytest.raises(
        ValueError,
        match=r"^.*/train\.txt: 0 training examples with --train_batch_size=8 and "
        r"--num_train_epochs=0\.1 give no training step$",
    ):
        tagging_run.run_tagger(options)
    assert not (tmp_path / "out").exists()


# -- features --------------------------------------------------------------------------------


def test_labels_on_first_pieces_only(tokenizer):
    # "Johanson" -> johan ##son; "U.S." -> u . s . (basic tokenization splits the punctuation).
    example = TaggingExample("g", ["Johanson", "visited", "U.S."], ["B-PER", "O", "B-LOC"], "f", 1)
    [feature] = tagging_data.convert_example(
        0, example, {label: i for i, label in enumerate(LABELS)}, 12, tokenizer
    )
    tokens = ["[CLS]", "johan", "##son", "visited", "u", ".", "s", ".", "[SEP]"]
    assert feature.input_ids == _ids(tokens) + [0] * 3
    assert feature.input_mask == [1] * 9 + [0] * 3
    assert feature.segment_ids == [0] * 12
    assert feature.word_positions == [1, 3, 4]
    assert feature.label_ids == [0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0]
    assert feature.label_weights == [0.0, 1.0, 0.0, 1.0, 1.0] + [0.0] * 7


def test_long_sentence_is_split_into_windows_of_whole_words(tokenizer):
    # max_seq_length 6 leaves 4 pieces per window: [johan ##son visited] [u . s .] [dog].
    example = TaggingExample(
        "g", ["Johanson", "visited", "U.S.", "dog"], ["B-PER", "O", "B-LOC", "O"], "f", 1
    )
    features = tagging_data.convert_example(
        3, example, {label: i for i, label in enumerate(LABELS)}, 6, tokenizer
    )
    assert [f.input_ids for f in features] == [
        _ids(["[CLS]", "johan", "##son", "visited", "[SEP]"]) + [0],
        _ids(["[CLS]", "u", ".", "s", ".", "[SEP]"]),
        _ids(["[CLS]", "dog", "[SEP]"]) + [0] * 3,
    ]
    assert [(f.example_index, f.first_word, f.word_positions) for f in features] == [
        (3, 0, [1, 3]),
        (3, 2, [1]),
        (3, 3, [1]),
    ]
    # Every word gets exactly one prediction back, in order.
    predictions = np.zeros((3, 6), np.int32)
    predictions[0, [1, 3]] = [1, 4]
    predictions[1, 1], predictions[2, 1] = 0, 4
    assert tagging_data.word_predictions([example] * 4, features, predictions, LABELS)[3] == [
        "B-PER",
        "O",
        "B-LOC",
        "O",
    ]


def test_a_word_longer_than_a_window_keeps_its_first_pieces_and_empty_words_are_unk(tokenizer):
    example = TaggingExample("g", ["Johanson", "\u200b"], ["B-PER", "O"], "f", 1)
    features = tagging_data.convert_example(
        0, example, {label: i for i, label in enumerate(LABELS)}, 3, tokenizer
    )
    assert [f.input_ids for f in features] == [
        _ids(["[CLS]", "johan", "[SEP]"]),
        _ids(["[CLS]", "[UNK]", "[SEP]"]),
    ]


# 12 words, 14 pieces (johan ##son twice); --max_seq_length=8 (windows of 6) and --doc_stride=3
# give windows at 0, 3, 6 and 9 (the last of 5 pieces). By the max-context rule pieces 0-4 are
# read from the first window (piece 4 a tie), 5-7 from the second, 8-10 from the third, 11-13
# from the last.
LONG_WORDS = ["Johanson", "visited", "the", "cat", "near", "Johanson"]
LONG_WORDS += ["and", "two", "dog", "trees", "with", "fish"]
LONG_TAGS = ["B-PER", "O", "O", "O", "O", "B-PER", "O", "O", "O", "B-LOC", "O", "O"]
LONG_PIECES = ["johan", "##son", "visited", "the", "cat", "near", "johan", "##son", *LONG_WORDS[6:]]
LONG_WINDOWS = [(0, 6), (3, 6), (6, 6), (9, 5)]


def test_windows_label_every_word_in_training_and_its_max_context_window_else(tokenizer):
    example = TaggingExample("g", LONG_WORDS, LONG_TAGS, "f", 1)
    label_map = {label: i for i, label in enumerate(LABELS)}
    train, evaluate = (
        tagging_data.convert_example_to_windows(2, example, label_map, 8, 3, tokenizer, is_training)
        for is_training in (True, False)
    )
    assert [f.input_ids for f in train] == [
        _ids(["[CLS]", *LONG_PIECES[start : start + length], "[SEP]"]) + [0] * (6 - length)
        for start, length in LONG_WINDOWS
    ]
    assert [f.span for f in evaluate] == [DocSpan(*window) for window in LONG_WINDOWS]
    # The words each window predicts: those whose first piece has its most context there.
    assert [(f.example_index, f.first_word, f.word_positions) for f in evaluate] == [
        (2, 0, [1, 3, 4, 5]),
        (2, 4, [3, 4]),
        (2, 6, [3, 4, 5]),
        (2, 9, [3, 4, 5]),
    ]
    # Training labels every first piece of a window; evaluation only the predicted ones.
    assert [f.label_weights for f in train] == [
        [0, 1, 0, 1, 1, 1, 1, 0],  # johan ##son visited the cat near
        [0, 1, 1, 1, 1, 0, 1, 0],  # the cat near johan ##son and
        [0, 1, 0, 1, 1, 1, 1, 0],  # johan ##son and two dog trees
        [0, 1, 1, 1, 1, 1, 0, 0],  # two dog trees with fish
    ]
    assert [f.label_weights for f in evaluate] == [
        [0, 1, 0, 1, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 1, 0, 0],
    ]
    assert train[3].label_ids == [0, 4, 4, 0, 4, 4, 0, 0] and evaluate[3].label_ids == [
        0,
        0,
        0,
        0,
        4,
        4,
        0,
        0,
    ]
    # Without --doc_stride the windows are spans over the pieces too: each piece its own window.
    features = tagging_data.convert_example(0, example, label_map, 8, tokenizer)
    assert [f.span for f in features] == [DocSpan(0, 6), DocSpan(6, 6), DocSpan(12, 2)]


def test_an_unknown_tag_names_its_file_and_line(tokenizer):
    example = TaggingExample("g", ["a", "b"], ["O", "B-ORG"], "dev.txt", 7)
    with pytest.raises(ValueError, match=r"dev\.txt:8: tag 'B-ORG' is not one of the labels"):
        tagging_data.convert_example(0, example, {label: i for i, label in enumerate(LABELS)}, 8, tokenizer)


# -- conlleval's chunks ----------------------------------------------------------------------------


def test_chunks_of_iob1():
    # IOB1: I- inside; B- only between two chunks of the same type.
    labels = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-ORG", "I-ORG"]
    assert chunks(labels) == [(0, 2, "PER"), (3, 4, "LOC"), (4, 6, "LOC"), (6, 8, "ORG")]


def test_chunks_of_iob2():
    labels = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O", "B-MISC"]
    assert chunks(labels) == [(0, 2, "PER"), (2, 3, "PER"), (4, 7, "LOC"), (8, 9, "MISC")]


def test_chunks_of_ill_formed_tags_and_hyphenated_types():
    # An I after O starts a chunk; a type change ends one and starts another; the type is all
    # after the first hyphen.
    assert chunks(["O", "I-PER", "I-PER", "B-LOC", "I-PER", "I-B-X"]) == [
        (1, 3, "PER"),
        (3, 4, "LOC"),
        (4, 5, "PER"),
        (5, 6, "B-X"),
    ]
    assert chunks(["O", "O"]) == []


def test_entity_scores_count_exact_spans_and_types():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-LOC", "B-PER"]]
    # gold: PER(0,2) LOC(3,4) | ORG(0,1) = 3; predicted: PER(0,1) LOC(3,4) | LOC(0,1) PER(1,2) = 4;
    # correct: LOC(3,4) only. Words right: B-PER, O, B-LOC of 6.
    scores = entity_scores(gold, predicted)
    assert (scores["gold_chunks"], scores["predicted_chunks"], scores["correct_chunks"]) == (3, 4, 1)
    assert scores["precision"] == pytest.approx(1 / 4)
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(2 * (1 / 4) * (1 / 3) / (1 / 4 + 1 / 3))
    assert scores["accuracy"] == pytest.approx(3 / 6)
    assert entity_scores([["O"]], [["O"]])["f1"] == 0.0


# -- model -----------------------------------------------------------------------------------------


def test_head_names_and_the_untrained_pooler(fixtures_dir):
    model = BertTagger(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG), 5)
    shapes = {w.path: tuple(w.shape) for w in model.weights}
    assert shapes["cls/tagging/output_weights"] == (5, 128) and shapes["cls/tagging/output_bias"] == (5,)
    assert [p for p in shapes if not p.startswith("bert/")] == [
        "cls/tagging/output_weights",
        "cls/tagging/output_bias",
    ]
    trainable = {w.path for w in model.trainable_variables}
    assert "bert/pooler/dense/kernel" not in trainable and "cls/tagging/output_weights" in trainable


# -- the tool end to end ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory, fixtures_dir):
    """tools/run_tagger.py on the bundled names task, evaluated on its own training file, from
    google_tiny's random weights. These settings reached F1 1.0 for each of 14
    seeds (and 4 with XLA)."""
    workdir = tmp_path_factory.mktemp("tagger")
    output_dir = workdir / "output"
    test_file = workdir / "test.txt"
    shutil.copy(os.path.join(DEMO, "test.txt"), test_file)
    args = [
        TOOL,
        f"--train_file={DEMO}/train.txt",
        f"--eval_file={DEMO}/train.txt",
        f"--predict_file={test_file}",
        f"--vocab_file={VOCAB}",
        f"--bert_config_file={mf.GOOGLE_TINY_CONFIG}",
        f"--init_checkpoint={mf.GOOGLE_TINY_CKPT}",
        f"--output_dir={output_dir}",
        f"--export_dir={workdir / 'export'}",
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_seq_length=24",
        "--train_batch_size=16",
        "--learning_rate=1e-3",
        "--num_train_epochs=10",
        "--iterations_per_loop=25",
        "--seed=1",
    ]
    result = tool_runs.run([sys.executable, *args], cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result.stderr, workdir / "export"


def test_the_trained_labels_are_kept_and_checked(trained, tmp_path):
    """A head's outputs are positions: predicting with the labels in another order renamed
    every prediction. The labels the model was trained on are kept beside its checkpoints, and
    other labels are an error naming them."""
    output_dir = trained[0]
    labels = sorted(
        {tag for e in tagging_data.read_conll(os.path.join(DEMO, "train.txt"), "train") for tag in e.tags}
    )
    assert (output_dir / "labels.txt").read_text() == "".join(f"{label}\n" for label in labels)
    reordered = [labels[1], labels[0], *labels[2:]]
    options = _options(tmp_path, output_dir=str(output_dir), labels=",".join(reordered))
    with pytest.raises(ValueError, match=rf"^the labels \({reordered[0]},{reordered[1]},.*\) are not those"):
        tagging_run.run_tagger(options)


def test_learns_the_names_task(trained):
    """The tags are a function of the word and its left neighbour (a first name, a surname after
    one, a city or company name, or O), so a tagger can get every chunk right; random
    predictions over its 6 tags find almost none. 0.9 entity F1 on the training file is a clear
    sign of learning, reached from random weights in 50 steps."""
    output_dir, _, _ = trained
    got = dict(line.split(" = ") for line in (output_dir / "eval_results.txt").read_text().splitlines())
    assert list(got) == [
        "eval_accuracy",
        "eval_f1",
        "eval_loss",
        "eval_precision",
        "eval_recall",
        "global_step",
        "loss",
    ]
    assert got["global_step"] == str(int(80 / 16 * 10))
    assert float(got["eval_f1"]) >= 0.9, got
    # The F1 written is conlleval's on the predictions file written beside it.
    sentences, gold, predicted = [], [], []
    for line in (output_dir / "eval_predictions.txt").read_text().splitlines() + [""]:
        if line:
            sentences.append(line.split())
        elif sentences:
            gold.append([s[1] for s in sentences])
            predicted.append([s[2] for s in sentences])
            sentences = []
    assert len(gold) == 80
    assert float(got["eval_f1"]) == pytest.approx(entity_scores(gold, predicted)["f1"], abs=1e-6)


def test_predictions_are_written_back_in_conll_format(trained):
    output_dir, _, _ = trained
    with open(os.path.join(DEMO, "test.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    expected = [
        line.split()[0] + " " + line.split()[-1]
        for line in lines
        if line and not line.startswith("-DOCSTART-")
    ]
    written = [line for line in (output_dir / "test_predictions.txt").read_text().splitlines() if line]
    assert [" ".join(line.split()[:2]) for line in written] == expected
    assert all(len(line.split()) == 3 for line in written)
    assert (output_dir / "test_predictions.txt").read_text().count("\n\n") == 16
    assert len(list(tf.data.TFRecordDataset(str(output_dir / "train.tf_record")))) == 80


def test_the_export_tags_raw_sentences_as_the_tool_does(trained):
    """The `text` signature on the test file's sentences, joined by spaces: the label of each
    word's first piece (a token without `##`) is the tool's prediction for the word."""
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    output_dir, _, export_dir = trained
    sentences, predicted, words = [], [], []
    for line in (output_dir / "test_predictions.txt").read_text().splitlines() + [""]:
        if line:
            words.append(line.split())
        elif words:
            sentences.append(" ".join(w[0] for w in words))
            predicted.append([w[-1] for w in words])
            words = []
    loaded = tf.saved_model.load(str(export_dir / "1"))
    got = loaded.signatures["text"](text=tf.constant(sentences))
    compared = 0
    for tokens, labels, want in zip(got["tokens"].numpy(), got["labels"].numpy(), predicted, strict=True):
        tokens = [t.decode() for t in tokens]
        firsts = [
            label.decode()
            for token, label in zip(tokens, labels, strict=True)
            if token and token not in ("[CLS]", "[SEP]") and not token.startswith("##")
        ]
        # The sentence fits (the row, padded to the request, is not cut at --max_seq_length=24),
        # a word a token.
        if (tokens[-1] == "" or len(tokens) < 24) and len(firsts) == len(want):
            assert firsts == want
            compared += 1
    assert compared >= 12, compared
    by_ids = loaded.signatures["serving_default"]
    assert sorted(by_ids.structured_outputs) == ["labels", "probabilities"]


def test_query_names_each_tokens_probabilities_by_the_exported_labels(trained, capsys):
    """labels.txt travels to the export's assets.extra; query_saved_model.py prints the outputs
    sorted by name, each token's probabilities under the tags' names in the head's order."""
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    from bert_tf.export.query import QueryOptions, run_query

    _, _, export_dir = trained
    tags = sorted(
        {tag for e in tagging_data.read_conll(os.path.join(DEMO, "train.txt"), "train") for tag in e.tags}
    )
    assert (export_dir / "1" / "assets.extra" / "labels.txt").read_text() == "".join(f"{t}\n" for t in tags)
    text = "Anna Schmidt visited Paris"
    run_query(QueryOptions(export_dir=str(export_dir), text=text))
    printed = json.loads(capsys.readouterr().out)
    names = ["end_offsets", "labels", "probabilities", "segment_ids", "start_offsets", "tokens"]
    assert list(printed) == names
    served = tf.saved_model.load(str(export_dir / "1")).signatures["text"](text=tf.constant([text]))
    assert len(printed["probabilities"]) == served["probabilities"].shape[1]
    for token, label, named, want in zip(
        printed["tokens"],
        printed["labels"],
        printed["probabilities"],
        served["probabilities"][0].numpy(),
        strict=True,
    ):
        assert list(named) == tags
        np.testing.assert_allclose(list(named.values()), want, rtol=0, atol=1e-6)
        if token:
            assert label == tags[int(np.argmax(want))]


# -- long sentences as windows (--doc_stride) ---------------------------------------------------


def _write_conll(path, sentences):
    path.write_text("".join("".join(f"{w} {t}\n" for w, t in zip(*s, strict=True)) + "\n" for s in sentences))


def test_a_long_sentence_is_tagged_from_each_pieces_max_context_window(tmp_path, tokenizer):
    """Through run_tagger with --doc_stride: each WordPiece's label from the window where it
    has the most context, each word's from its first piece, eval_accuracy over the words,
    against the float64 reference of the checkpoint on the windows cut by hand; and the same
    labels from the export's `text_windowed` signature."""
    prefix = str(tmp_path / "ckpt" / "model.ckpt-0")
    weights = ff.write_original_finetuned_checkpoint(prefix, len(LABELS), 0, seed=2, head="cls/tagging/")
    short = (["the", "dog"], ["O", "B-PER"])
    data = tmp_path / "long.txt"
    _write_conll(data, [(LONG_WORDS, LONG_TAGS), short])
    options = _options(
        tmp_path,
        init_checkpoint=prefix,
        predict_file=str(data),
        eval_file=str(data),
        do_eval=True,
        max_seq_length=8,
        doc_stride=3,
        predict_batch_size=3,
        eval_batch_size=3,
        export_dir=str(tmp_path / "export"),
    )
    results = tagging_run.run_tagger(options)

    windows = [["[CLS]", *LONG_PIECES[s : s + n], "[SEP]"] for s, n in LONG_WINDOWS]
    windows.append(["[CLS]", "the", "dog", "[SEP]"])
    input_ids = np.zeros((len(windows), 8), np.int32)
    for row, tokens in enumerate(windows):
        input_ids[row, : len(tokens)] = _ids(tokens)
    sequence_output = reference.reference_forward(
        weights,
        BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG),
        input_ids,
        (input_ids != 0) * 1,
        0 * input_ids,
    )["sequence_output"]
    logits = sequence_output @ weights["cls/tagging/output_weights"].T + weights["cls/tagging/output_bias"]
    predicted = logits.argmax(-1)
    pieces = []
    for piece in range(len(LONG_PIECES)):
        window = ff.max_context_window(LONG_WINDOWS, piece)
        pieces.append(LABELS[predicted[window, 1 + piece - LONG_WINDOWS[window][0]]])
    assert results["predict_tokens"] == [pieces, [LABELS[i] for i in predicted[4, 1:3]]]
    first_pieces = [i for i, piece in enumerate(LONG_PIECES) if not piece.startswith("##")]
    words = [[pieces[i] for i in first_pieces], results["predict_tokens"][1]]
    assert results["predict"] == words
    assert len(set(pieces)) > 1  # the comparison tells windows apart
    got = dict(line.split(" = ") for line in (tmp_path / "out" / "eval_results.txt").read_text().splitlines())
    gold = LONG_TAGS + short[1]
    accuracy = np.mean([g == p for g, p in zip(gold, words[0] + words[1], strict=True)])
    assert float(got["eval_accuracy"]) == pytest.approx(accuracy, abs=1e-6)
    written = (tmp_path / "out" / "test_predictions.txt").read_text().split("\n\n")[0].splitlines()
    assert written == [f"{w} {g} {p}" for w, g, p in zip(LONG_WORDS, LONG_TAGS, words[0], strict=True)]
    # The exported signature windows the text in the graph: the same label for every piece.
    import tensorflow_text  # noqa: F401  (the text signatures' ops)

    served = tf.saved_model.load(results["export"]).signatures["text_windowed"]
    got = served(text=tf.constant([" ".join(LONG_WORDS)]))
    assert [t.decode() for t in got["tokens"][0].numpy()] == ["[CLS]", *LONG_PIECES, "[SEP]"]
    assert [t.decode() for t in got["labels"][0].numpy()][1:-1] == pieces


def test_sentences_that_fit_in_one_window_are_tagged_as_today(tmp_path):
    test_file = os.path.join(DEMO, "test.txt")
    labels = sorted({tag for e in tagging_data.read_conll(test_file, "test") for tag in e.tags})
    prefix = str(tmp_path / "ckpt" / "model.ckpt-0")
    ff.write_original_finetuned_checkpoint(prefix, len(labels), 0, seed=3, head="cls/tagging/")
    runs = []
    for doc_stride in (None, 2):
        output_dir = tmp_path / f"out_{doc_stride}"
        options = _options(
            tmp_path,
            labels=",".join(labels),
            init_checkpoint=prefix,
            output_dir=str(output_dir),
            max_seq_length=32,
            doc_stride=doc_stride,
        )
        results = tagging_run.run_tagger(options)
        runs.append((results["predict"], (output_dir / "test_predictions.txt").read_text()))
        assert len(list(tf.data.TFRecordDataset(str(output_dir / "predict.tf_record")))) == 16  # none split
    assert runs[0] == runs[1]
    assert len(runs[0][0]) == 16 and len({label for s in runs[0][0] for label in s}) > 1
