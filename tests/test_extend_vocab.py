"""tools/extend_vocab.py: the checkpoint's variables kept, only the vocabulary's tables changed,
new rows the mean of the old pieces', the model unchanged on old text, new tokens tokenized to
their ids, bad input, the corpus's ranking, and continued pretraining from the result; both
modes, on the training fixture with Adam slots and the google_tiny vocabulary ([unusedN]
entries)."""

import collections
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.checkpoints import reference
from bert_tf.checkpoints.vocab_extension import OUTPUT_BIAS, TABLES, WORD_EMBEDDINGS, extend_vocab
from bert_tf.config import BertConfig
from bert_tf.text.tokenization import BasicTokenizer, FullTokenizer
from tests import model_fixtures as mf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(mf.GOOGLE_TINY_TRAIN, "model.ckpt-3")
CONFIG = mf.GOOGLE_TINY_TRAIN_CONFIG
VOCAB = os.path.join(mf.GOOGLE_TINY, "vocab.txt")
# Words the fixture's vocabulary splits into several pieces; the third as given, upper case and
# accent included, is normalised to "pharmacokinetics".
NEW_TOKENS = ["electrophoresis", "immunoglobulin", "Pharmacokinétics"]
NORMALISED = ["electrophoresis", "immunoglobulin", "pharmacokinetics"]
OLD_TEXT = ("the man went to the store .", "he bought a gallon of milk .")


def _read(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def original(fixtures_dir):
    return _read(CHECKPOINT)


@pytest.fixture(scope="module")
def old_tokenizer(fixtures_dir):
    return FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module", params=["unused", "append"])
def extended(request, tmp_path_factory, fixtures_dir):
    """`(mode, Extension, output directory, its variables)` of the three NEW_TOKENS."""
    mode = request.param
    directory = tmp_path_factory.mktemp(mode)
    tokens_file = directory / "tokens.txt"
    tokens_file.write_text("\n".join(NEW_TOKENS) + "\n\n", encoding="utf-8")
    output = directory / "out"
    extension = extend_vocab(
        CONFIG, CHECKPOINT, VOCAB, None, str(output), new_tokens=str(tokens_file), mode=mode
    )
    return mode, extension, output, _read(str(output / "bert_model.ckpt"))


def _slots(name, weights):
    return [other for other in weights if other.startswith(name + "/")]


def test_every_variable_is_kept_and_only_the_tables_and_their_slots_change(original, extended):
    mode, extension, output, weights = extended
    assert sorted(weights) == sorted(original)  # global_step and every Adam slot included
    assert "global_step" in weights and _slots(WORD_EMBEDDINGS, weights)
    changed = [*TABLES, *_slots(WORD_EMBEDDINGS, weights), *_slots(OUTPUT_BIAS, weights)]
    assert sorted(extension.rewritten) == sorted(changed) and len(changed) == 6
    for name, value in original.items():
        if name not in changed:
            assert weights[name].dtype == value.dtype and weights[name].tobytes() == value.tobytes(), name
    rows = original[WORD_EMBEDDINGS].shape[0]
    expected_ids = list(range(rows, rows + 3)) if mode == "append" else [1, 2, 3]  # [unused0..2]
    assert extension.ids == expected_ids
    kept = np.setdiff1d(np.arange(rows), expected_ids)
    for name in changed:
        assert weights[name].shape[0] == (rows + 3 if mode == "append" else rows)
        assert weights[name][kept].tobytes() == original[name][kept].tobytes(), name
    for name in changed:
        if name not in TABLES:
            assert not weights[name][expected_ids].any(), name  # zero slots for new rows
    config = BertConfig.from_json_file(str(output / "bert_config.json"))
    assert config.vocab_size == weights[WORD_EMBEDDINGS].shape[0]


def test_a_new_row_is_the_mean_of_its_old_pieces_rows(original, old_tokenizer, extended):
    _, extension, _, weights = extended
    assert extension.tokens == NORMALISED
    for token, new_id in zip(NORMALISED, extension.ids, strict=True):
        pieces = old_tokenizer.tokenize(token)
        assert len(pieces) > 1
        piece_ids = old_tokenizer.convert_tokens_to_ids(pieces)
        for name in TABLES:
            mean = np.mean(np.asarray(original[name][piece_ids], dtype=np.float64), axis=0)
            np.testing.assert_allclose(weights[name][new_id], mean, rtol=0, atol=1e-7)


def test_the_vocabulary_written(extended):
    mode, extension, output, _ = extended
    with open(VOCAB, encoding="utf-8") as f:
        old = f.read().splitlines()
    new = (output / "vocab.txt").read_text(encoding="utf-8").splitlines()
    if mode == "append":
        assert new == old + NORMALISED
    else:
        assert new == old[:1] + NORMALISED + old[4:]
    assert (output / "added_tokens.txt").read_text(encoding="utf-8").splitlines() == NORMALISED
    assert sorted(os.listdir(output)) == [
        "added_tokens.txt",
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
        "checkpoint",
        "model_settings.json",
        "vocab.txt",
    ]
    # No --do_lower_case: google_tiny's uncased vocabulary decided, and the output records it.
    assert json.loads((output / "model_settings.json").read_text()) == {"do_lower_case": True}


def _inputs(tokenizer, first, second):
    tokens = ["[CLS]", *tokenizer.tokenize(first), "[SEP]", *tokenizer.tokenize(second), "[SEP]"]
    segments = [0] * (len(tokenizer.tokenize(first)) + 2)
    segments += [1] * (len(tokens) - len(segments))
    ids = np.array([tokenizer.convert_tokens_to_ids(tokens) + [0] * 4])
    mask = np.array([[1] * len(tokens) + [0] * 4])
    return ids, mask, np.array([segments + [0] * 4]), np.array([[1, 3, len(tokens) - 2]])


def _mlm_logits(weights, config, sequence_output, positions):
    """The masked-LM head's logits (before the softmax over the whole vocabulary)."""

    def w(name):
        return np.asarray(weights[name], dtype=np.float64)

    x = sequence_output[0, positions[0]]
    x = reference.ACTIVATIONS[config.hidden_act](
        x @ w("cls/predictions/transform/dense/kernel") + w("cls/predictions/transform/dense/bias")
    )
    scope = "cls/predictions/transform/LayerNorm"
    x = reference.layer_norm(x, w(f"{scope}/gamma"), w(f"{scope}/beta"))
    return x @ w(WORD_EMBEDDINGS).T + w(OUTPUT_BIAS)


def test_text_without_new_tokens_gives_the_same_ids_and_outputs(original, old_tokenizer, extended):
    mode, extension, output, weights = extended
    new_tokenizer = FullTokenizer(str(output / "vocab.txt"), do_lower_case=True)
    old_inputs = _inputs(old_tokenizer, *OLD_TEXT)
    new_inputs = _inputs(new_tokenizer, *OLD_TEXT)
    for old, new in zip(old_inputs, new_inputs, strict=True):
        np.testing.assert_array_equal(old, new)
    config = BertConfig.from_json_file(CONFIG)
    before = reference.reference_forward(original, config, *old_inputs)
    after = reference.reference_forward(weights, config, *new_inputs)
    tolerance = 0 if mode == "unused" else 1e-6
    for key in ("sequence_output", "pooled_output", "next_sentence_log_probs"):
        np.testing.assert_allclose(after[key], before[key], rtol=0, atol=tolerance, err_msg=key)
    if mode == "unused":  # every output but the softmax over the whole vocabulary, bit for bit
        for key in (key for key in before if key != "masked_lm_log_probs"):
            assert after[key].tobytes() == before[key].tobytes(), key
    old_ids = np.setdiff1d(np.arange(original[WORD_EMBEDDINGS].shape[0]), extension.ids)
    logits_before = _mlm_logits(original, config, before["sequence_output"], old_inputs[3])
    logits_after = _mlm_logits(weights, config, after["sequence_output"], new_inputs[3])
    np.testing.assert_allclose(logits_after[:, old_ids], logits_before[:, old_ids], rtol=0, atol=tolerance)


def test_a_new_token_is_tokenized_to_its_new_id(extended):
    _, extension, output, _ = extended
    tokenizer = FullTokenizer(str(output / "vocab.txt"), do_lower_case=True)
    tokens = tokenizer.tokenize("Electrophoresis of PHARMACOKINÉTICS, and immunoglobulin.")
    assert tokens == ["electrophoresis", "of", "pharmacokinetics", ",", "and", "immunoglobulin", "."]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert [ids[0], ids[5], ids[2]] == extension.ids


def _extend(directory, tokens=None, mode="unused", vocab=VOCAB, **more):
    """`extend_vocab` into `directory/out`, the tokens (a list) written to a file first."""
    if tokens is not None:
        (directory / "tokens.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
        more["new_tokens"] = str(directory / "tokens.txt")
    return extend_vocab(CONFIG, CHECKPOINT, vocab, True, str(directory / "out"), mode=mode, **more)


@pytest.fixture(scope="module")
def few_unused_vocab(tmp_path_factory, fixtures_dir):
    """The fixture's vocabulary with two [unusedN] entries left."""
    with open(VOCAB, encoding="utf-8") as f:
        tokens = f.read().splitlines()
    unused = [index for index, token in enumerate(tokens) if token.startswith("[unused")]
    for index in unused[2:]:
        tokens[index] = f"placeholder{index}"
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["electrophoresis", "the"], "token 'the' is already in the vocabulary (id 1996)"),
        (["The"], "token 'The' (as the tokenizer sees it: 'the') is already in the vocabulary"),
        (["gel electrophoresis"], "token 'gel electrophoresis' has whitespace inside"),
        (["covid-19"], "token 'covid-19': the tokenizer splits it into ['covid', '-', '19']"),
        (["electrophoresis", "Electrophoresis"], "token 'Electrophoresis' (as the tokenizer sees it: "),
        ([], "no token given"),
    ],
)
def test_a_bad_token_is_one_line_naming_it_and_nothing_is_written(tmp_path, tokens, message):
    with pytest.raises(ValueError, match="^--new_tokens=.*") as raised:
        _extend(tmp_path, tokens)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert os.listdir(tmp_path) == ["tokens.txt"]  # no output, no temporary


def test_too_few_unused_entries_and_missing_files_are_errors_and_nothing_is_written(
    tmp_path, few_unused_vocab
):
    with pytest.raises(ValueError, match=r"--mode=unused: 3 new tokens but .* has 2 \[unusedN\] entries"):
        _extend(tmp_path, NEW_TOKENS, vocab=few_unused_vocab)
    with pytest.raises(ValueError, match=r"--new_tokens: .*missing.txt: no such file"):
        _extend(tmp_path, new_tokens=str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match=r"--vocab_file: .*missing_vocab.txt: no such file"):
        _extend(tmp_path, NEW_TOKENS, vocab=str(tmp_path / "missing_vocab.txt"))
    with pytest.raises(ValueError, match=r"--corpus: .*nothing\*.txt' matches no file"):
        _extend(tmp_path, corpus=str(tmp_path / "nothing*.txt"), max_new_tokens=3)
    with pytest.raises(ValueError, match="give one of --new_tokens and --corpus"):
        _extend(tmp_path)
    with pytest.raises(ValueError, match="--max_new_tokens goes with --corpus"):
        _extend(tmp_path, NEW_TOKENS, max_new_tokens=3)
    # Found once the output's temporary directory is made, which goes with it.
    (tmp_path / "known.txt").write_text("The man went to the store.\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--corpus: .*known.txt: the vocabulary splits no word of it"):
        _extend(tmp_path, corpus=str(tmp_path / "known.txt"), max_new_tokens=3)
    assert sorted(os.listdir(tmp_path)) == ["known.txt", "tokens.txt"]


def test_the_tool_prints_one_error_line_and_exits_2(tmp_path, fixtures_dir):
    (tmp_path / "tokens.txt").write_text("the\n", encoding="utf-8")
    result = tool_runs.run(
        [
            sys.executable,
            os.path.join(REPO, "tools", "extend_vocab.py"),
            f"--bert_config_file={CONFIG}",
            f"--init_checkpoint={CHECKPOINT}",
            f"--vocab_file={VOCAB}",
            f"--new_tokens={tmp_path / 'tokens.txt'}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith("error: --new_tokens=")
    assert "'the' is already in the vocabulary" in result.stderr.splitlines()[-1]
    assert sorted(os.listdir(tmp_path)) == ["tokens.txt"]


CORPUS = [
    "Electrophoresis separates proteins; gel electrophoresis is routine.",
    "Immunoglobulin levels rose. The immunoglobulin assay used electrophoresis.",
    "Pharmacokinetics of the drug: pharmacokinetics matter.",
    "",
    "Electrophoresis again, and thermocyclers, thermocyclers, thermocyclers.",
]


def test_the_corpus_words_are_ranked_by_the_pieces_they_save(tmp_path, old_tokenizer, capsys):
    (tmp_path / "a.txt").write_text("\n".join(CORPUS[:3]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(CORPUS[3:]) + "\n", encoding="utf-8")
    basic = BasicTokenizer(do_lower_case=True)
    counts = collections.Counter(word for line in CORPUS for word in basic.tokenize(line))
    scores = {
        word: count * (len(old_tokenizer.tokenize(word)) - 1)
        for word, count in counts.items()
        if len(old_tokenizer.tokenize(word)) > 1
    }
    expected = sorted(scores, key=lambda word: (-scores[word], word))[:4]
    assert len(scores) > 4 and scores[expected[0]] > scores[expected[-1]]
    extension = _extend(tmp_path, corpus=str(tmp_path / "*.txt"), max_new_tokens=4)
    assert extension.tokens == expected
    assert (tmp_path / "out" / "added_tokens.txt").read_text(encoding="utf-8").splitlines() == expected
    captured = capsys.readouterr()
    printed = captured.out.splitlines()
    assert [line.split("\t")[0] for line in printed] == expected
    assert printed[0].split("\t")[1] == f"{counts[expected[0]]:,} occurrences"
    assert "Counting words: 0 MB | " in captured.err  # the corpus's progress (every 10 s on a long one)


def test_continued_pretraining_lowers_the_masked_lm_loss_on_text_with_the_new_tokens(tmp_path):
    """create_pretraining_data and run_pretraining take the output (of --mode=append, whose
    table grew) as it is: a short run at a high learning rate lowers the masked-LM loss on the
    records of a text full of the new tokens."""
    from bert_tf.data import PretrainingDataOptions, create_pretraining_data
    from bert_tf.tasks.pretraining.run import PretrainingOptions, run_pretraining

    _extend(tmp_path, NEW_TOKENS, mode="append")
    output = tmp_path / "out"
    sentences = [
        f"The {a} of the {b} sample used {c} twice."
        for a in NORMALISED
        for b in NORMALISED
        for c in ("electrophoresis", "pharmacokinetics")
    ]
    corpus = tmp_path / "domain.txt"
    corpus.write_text("\n".join(sentences[:9] + [""] + sentences[9:]) + "\n", encoding="utf-8")
    records = tmp_path / "domain.tfrecord"
    data_options = PretrainingDataOptions(
        vocab_file=str(output / "vocab.txt"), max_seq_length=32, max_predictions_per_seq=5, dupe_factor=10
    )
    create_pretraining_data(str(corpus), str(records), data_options)

    def mlm_loss(run, **flags):
        options = PretrainingOptions(
            input_file=str(records),
            bert_config_file=str(output / "bert_config.json"),
            init_checkpoint=str(output),
            output_dir=str(tmp_path / run),
            max_seq_length=32,
            max_predictions_per_seq=5,
            do_eval=True,
            eval_batch_size=8,
            max_eval_steps=2,
            seed=7,
            **flags,
        )
        return run_pretraining(options)["eval"]["masked_lm_loss"]

    before = mlm_loss("before")
    after = mlm_loss(
        "after",
        do_train=True,
        train_batch_size=8,
        num_train_steps=20,
        num_warmup_steps=0,
        learning_rate=2e-3,
        save_checkpoints_steps=20,
        iterations_per_loop=10,
    )
    print(f"masked-LM loss {before:.3f} before, {after:.3f} after")
    assert after < 0.7 * before, (before, after)
