"""The in-graph tokenizer gives FullTokenizer's ids; in-graph packing gives pack_inputs' rows."""

import json
import os
import random
import re
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_tf.text.graph_tokenizer import GraphTokenizer, pack_ids
from bert_tf.text.packing import pack_inputs
from bert_tf.text.tokenization import FullTokenizer
from tests import tool_runs
from tests.conftest import FIXTURES_DIR

VOCAB = os.path.join(FIXTURES_DIR, "google_tiny", "vocab.txt")

TARGETED = [
    "",
    "   ",
    "Hello, World!",
    "BERT模型很好 and 東京",
    "ひらがな カタカナ 한국어",
    "Héllo Naïve CAFÉ",
    "a\x00b\ufffdc\u200bd\u200de\x07f",
    "one\ttwo\u00a0three\u3000four\r\nfive",
    "a¿b«c»d$e^f`g",
    "[CLS] hi [SEP] [MASK]",
    "x" * 250,
    "é" * 200,
    "é" * 201,
    "x\u2028y\u2029z",
    "İstanbul ΣΟΦΟΣ ß ǅ",
    "\u0300abc",
    "https://example.com/a?b=c&d=e#f",
    "emoji 😀👍🏽 flags 🇫🇷",
    "Привет, мир!",
    "مرحبا بالعالم",
    "ＦＵＬＬ ｗｉｄｔｈ １２３",
    "tab\tand\x0bvertical\x0cform\x1cfile",
    "\U00020000\U0002a6d6 \uf900",
]


def python_ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def tokenizers(request):
    return FullTokenizer(VOCAB, request.param), GraphTokenizer(VOCAB, request.param)


def test_fixture_ids_are_identical(fixtures_dir):
    with open(os.path.join(FIXTURES_DIR, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    got = GraphTokenizer(VOCAB, True).tokenize(tf.constant([r["text"] for r in rows])).to_list()
    assert got == [r["ids"] for r in rows]


def test_targeted_cases(fixtures_dir, tokenizers):
    python, graph = tokenizers
    got = graph.tokenize(tf.constant(TARGETED)).to_list()
    for text, ids in zip(TARGETED, got, strict=True):
        assert ids == python_ids(python, text), repr(text)


def test_bytes_that_are_not_utf8_are_dropped(fixtures_dir, tokenizers):
    python, graph = tokenizers
    rows = [
        b"plain ascii",
        b"caf\xc3 au\xfflait",
        b"Caf\xc3\xa9 \xe2\x82",
        b"ok",
        b"\xf0\x9f\x98 \xf0\x9f\x98\x80x",
        b"\xed\xa0\x80 surrogate \xc0\xaf overlong",
        # A control byte inside a broken sequence: dropped after decoding, it joins nothing.
        b"caf\xc3\x00\xa9",
        b"x\xe4\x01\xb8\x80y",
        b"\xc3\x1b\xa9t\xc3\x7f\xa9 ok\x0b\xc3\xa9",
    ]
    got = graph.tokenize(tf.constant(rows)).to_list()
    assert got == [
        python_ids(python, python_text) for python_text in (row.decode("utf-8", "ignore") for row in rows)
    ]


def test_ascii_chunks_agree_with_the_general_path(fixtures_dir, tokenizers):
    """Printable-ASCII chunks take a shortcut: the same chunks beside non-ASCII ones, at the word limit."""
    python, graph = tokenizers
    punctuation = "".join(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum())
    ascii_rows = ["Hello,World!", f"a{punctuation}b", "X" * 199, "x" * 200, "x" * 201, "ab\x0bcd\x0cef"]
    texts = ascii_rows + [f"{row} naïve {row} \u00e9{row}" for row in ascii_rows]
    got = graph.tokenize(tf.constant(texts)).to_list()
    for text, ids in zip(texts, got, strict=True):
        assert ids == python_ids(python, text), repr(text)


def test_every_assigned_bmp_character(fixtures_dir, tokenizers):
    """Each assigned character of the Basic Multilingual Plane between two letters."""
    python, graph = tokenizers
    chars = [
        chr(cp)
        for cp in range(0x10000)
        if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) != "Cn"
    ]
    texts = [f"a{c}b" for c in chars]
    got = graph.tokenize(tf.constant(texts)).to_list()
    bad = [
        hex(ord(c)) for c, text, ids in zip(chars, texts, got, strict=True) if ids != python_ids(python, text)
    ]
    assert bad == []


# Characters of Python's Unicode version (unassigned ones may be assigned in TF's newer tables:
# see BUILD_NOTES.md), surrogates excluded (not encodable as UTF-8).
_ASSIGNED = st.characters(blacklist_categories=("Cs", "Cn"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(_ASSIGNED, max_size=60), min_size=1, max_size=8))
def test_arbitrary_unicode(fixtures_dir, tokenizers, texts):
    python, graph = tokenizers
    assert graph.tokenize(tf.constant(texts)).to_list() == [python_ids(python, t) for t in texts]


# Forked from tool_runs' TensorFlow server, which has imported TensorFlow but run no op: ICU reads
# LC_ALL when it first lower-cases, so the variable set here is the locale it follows.
_LOCALE_SCRIPT = """
import os, sys
os.environ["LC_ALL"] = sys.argv[1]  # before ICU starts
import tensorflow as tf
from bert_tf.text.graph_tokenizer import GraphTokenizer
from bert_tf.text.tokenization import FullTokenizer
texts = ["I\u00f1igo", "I\u015eIK", "Ib\u00e1\u00f1ez", "\u0130stanbul", "I\u0307\u00e9"]
python, graph = FullTokenizer(sys.argv[2], True), GraphTokenizer(sys.argv[2], True)
got = graph.tokenize(tf.constant(texts)).to_list()
print([ids == python.convert_tokens_to_ids(python.tokenize(t)) for t, ids in zip(texts, got)])
"""


@pytest.mark.parametrize("locale", ["tr_TR.UTF-8", "lt_LT.UTF-8"])
def test_lower_casing_does_not_follow_the_locale(fixtures_dir, locale):
    """ICU lower-cases by the process's locale; `str.lower()` does not. Under tr_TR, "I" in a
    chunk with a non-ASCII character became a dotless "\u0131"."""
    result = tool_runs.run(
        [sys.executable, "-c", _LOCALE_SCRIPT, locale, VOCAB],
        cwd=tool_runs.REPO,
        timeout=120,
        server=tool_runs.TENSORFLOW,
    )
    assert result.stdout.strip().splitlines()[-1] == str([True] * 5), result.stderr[-2000:]


def test_packing_matches_python(fixtures_dir):
    python = FullTokenizer(VOCAB, True)
    rng = random.Random(3)
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", ",", "unaffable", "東京", "!"]
    a = [" ".join(rng.choices(words, k=rng.randint(0, 30))) for _ in range(64)]
    b = [" ".join(rng.choices(words, k=rng.randint(0, 30))) if i % 3 else "" for i in range(64)]
    graph = GraphTokenizer(VOCAB, True)  # `pack` takes max_seq_length as an input: traced once
    for max_seq_length in (3, 4, 8, 16, 33):  # at 3 and 4 a truncated b can vanish
        got = graph.pack(tf.constant(a), tf.constant(b), max_seq_length)
        for i in range(64):
            want = pack_inputs(python.tokenize(a[i]), python.tokenize(b[i]), max_seq_length, python)
            for key in ("input_ids", "input_mask", "segment_ids"):
                assert got[key][i].numpy().tolist() == want[key], (key, i, max_seq_length)


def test_pack_ids_truncates_longest_first():
    a = tf.ragged.constant([[1] * 4, [1] * 8, [1] * 2, [1] * 5], dtype=tf.int64)
    b = tf.ragged.constant([[2] * 4, [2] * 3, [2] * 9, []], dtype=tf.int64)
    packed = pack_ids(a, b, 8, 101, 102)  # room for 5 tokens of a pair, 6 of a single
    lengths = (
        [(np.array(row) == 1).sum() for row in packed["input_ids"].numpy()],
        [(np.array(row) == 2).sum() for row in packed["input_ids"].numpy()],
    )
    assert lengths == ([3, 3, 2, 5], [2, 2, 3, 0])


def test_survives_a_savedmodel_round_trip(fixtures_dir, tmp_path):
    tokenizer = GraphTokenizer(VOCAB, True)
    tf.saved_model.save(tokenizer, str(tmp_path / "tokenizer"))
    loaded = tf.saved_model.load(str(tmp_path / "tokenizer"))
    texts_a = ["Hello, World!", "東京 naïve [CLS]", "the quick fox"]
    texts_b = ["", "unaffable running", "over"]
    assert (
        loaded.tokenize(tf.constant(texts_a)).to_list() == tokenizer.tokenize(tf.constant(texts_a)).to_list()
    )

    max_seq_length = 12
    packed = loaded.pack(tf.constant(texts_a), tf.constant(texts_b), tf.constant(max_seq_length))
    python = FullTokenizer(VOCAB, True)
    for key in ("input_ids", "input_mask", "segment_ids"):
        rows = packed[key].numpy().tolist()
        # A single text, a pair truncated, a pair that fits: every row differs from every other.
        assert len({tuple(row) for row in rows}) == len(rows), key
        for i, row in enumerate(rows):
            want = pack_inputs(
                python.tokenize(texts_a[i]), python.tokenize(texts_b[i]), max_seq_length, python
            )
            assert row == want[key], (key, i)


@pytest.mark.parametrize("token", ["[CLS]", "[SEP]", "[UNK]"])
def test_a_vocab_without_a_special_token_is_a_clear_error(tmp_path, token):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "##s", ","]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(f"{t}\n" for t in tokens if t != token), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{path}: the vocab has no {token} token")):
        GraphTokenizer(str(path))


def test_vocab_tokens_no_word_can_match_are_accepted(tmp_path):
    """Lines with control characters built no FastWordpiece ("zero-length key", "Duplicated key");
    the original reads them and never matches them."""
    tokens = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "hello",
        "##s",
        "/",
        ".",
        "\x00",
        "a\x00b",
        "\x11",
        "\x11/",
        "\x07.x",
    ]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    python, graph = FullTokenizer(str(path), True), GraphTokenizer(str(path), True)
    texts = ["hellos / hello.", "a\x00b \x11/ hello\x07.x"]
    assert graph.tokenize(tf.constant(texts)).to_list() == [python_ids(python, t) for t in texts]


def test_capitals_newer_than_icus_case_tables_are_lower_cased(tmp_path):
    """TensorFlow's ICU leaves the capitals Unicode 14 added as they are (U+2C2F, U+A7C0,
    Vithkuqi...), which Python lower-cases: the graph maps them itself."""
    capitals = ["\u2c2f", "\ua7c0", "\ua7d0", "\ua7d6", "\ua7d8", "\U00010570", "\U00010595"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "x", "##x"] + [c.lower() for c in capitals]
    tokens += ["##" + c.lower() for c in capitals]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    python, graph = FullTokenizer(str(path), True), GraphTokenizer(str(path), True)
    texts = ["".join(capitals), " ".join(capitals), "x\u2c2fx \U00010570\u00e9 plain", "\u2c2f" * 3]
    want = [python_ids(python, t) for t in texts]
    assert graph.tokenize(tf.constant(texts)).to_list() == want
    assert want[1] == list(range(6, 6 + len(capitals)))  # each capital read as its lower-case token
