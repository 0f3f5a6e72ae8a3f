"""build_vocab: a vocabulary FullTokenizer can use on the corpus it was learned from."""

import os
import pathlib
import sys

import pytest

from bert_tf.text.tokenization import BasicTokenizer, FullTokenizer
from bert_tf.text.vocabulary import BuildVocabOptions, build_vocab, run_build_vocab
from tests import pretraining_fixtures as pf
from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def corpus_lines():
    with open(pf.SAMPLE_TEXT, encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line.strip()]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_vocab_covers_its_corpus_consistently(fixtures_dir, tmp_path, do_lower_case):
    path = str(tmp_path / "vocab.txt")
    tokens = build_vocab(pf.SAMPLE_TEXT, path, vocab_size=600, do_lower_case=do_lower_case, min_count=1)
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(tokens) == len(set(tokens)) and 300 < len(tokens) < 900
    assert pathlib.Path(path).read_text(encoding="utf-8").splitlines() == tokens
    tokenizer = FullTokenizer(path, do_lower_case=do_lower_case)
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    for line in corpus_lines():
        pieces = tokenizer.tokenize(line)
        assert "[UNK]" not in pieces, line
        words = "".join(p[2:] if p.startswith("##") else " " + p for p in pieces).split()
        assert words == basic.tokenize(line)
    has_upper = any(t.isalpha() and t != t.lower() for t in tokens[5:])
    assert has_upper == (not do_lower_case)


def test_tool_and_its_errors(fixtures_dir, tmp_path):
    tool = [sys.executable, os.path.join(REPO, "tools", "build_vocab.py")]
    output = tmp_path / "v.txt"
    result = tool_runs.run(
        tool + [f"--input_file={pf.SAMPLE_TEXT}", "--vocab_size=500", f"--output={output}", "--min_count=1"],
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote" in result.stdout and output.exists()
    # The errors from the tool's call in this process (the tool prints a ValueError as one line).
    with pytest.raises(ValueError, match="matches no file"):
        run_build_vocab(BuildVocabOptions(input_file=f"{tmp_path}/*.none", output=f"{tmp_path}/x.txt"))
    with pytest.raises(ValueError, match=r"\[PAD\]"):
        run_build_vocab(
            BuildVocabOptions(
                input_file=pf.SAMPLE_TEXT, output=f"{tmp_path}/y.txt", reserved_tokens=["[UNK]", "[PAD]"]
            )
        )
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "y.txt").exists()


def test_a_size_other_than_asked_is_warned_of_and_bad_reserved_tokens_are_errors(tmp_path, caplog):
    tokens = build_vocab(pf.SAMPLE_TEXT, str(tmp_path / "small.txt"), vocab_size=3, min_count=1)
    assert len(tokens) > 3  # every character of the kept words stays
    assert f"The vocab has {len(tokens)} tokens where --vocab_size asked for 3" in caplog.text
    assert f"needs vocab_size {len(tokens)} in its bert_config.json" in caplog.text
    for reserved, message in [
        (("[PAD]", "", "[UNK]"), r"reserved token '': a token is one line of the vocab"),
        (("[PAD]", "[MY TOKEN]"), r"reserved token '\[MY TOKEN\]'"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_vocab(pf.SAMPLE_TEXT, str(tmp_path / "bad.txt"), 100, reserved_tokens=reserved)
    with pytest.raises(ValueError, match="the vocab size must be positive, got 0"):
        build_vocab(pf.SAMPLE_TEXT, str(tmp_path / "bad.txt"), 0)
    assert not (tmp_path / "bad.txt").exists()
