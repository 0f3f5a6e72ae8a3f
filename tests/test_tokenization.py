"""FullTokenizer against the original's outputs and its documented rules."""

import json
import os
import unicodedata

import pytest

from bert_tf import tokenization
from tests.conftest import FIXTURES_DIR

VOCAB = os.path.join(FIXTURES_DIR, "google_tiny", "vocab.txt")


@pytest.fixture(scope="module")
def uncased():
    return tokenization.FullTokenizer(VOCAB, do_lower_case=True)


@pytest.fixture(scope="module")
def cased():
    return tokenization.FullTokenizer(VOCAB, do_lower_case=False)


def test_fixture_is_reproduced_exactly(fixtures_dir, uncased):
    rows = _fixture_rows()
    assert len(rows) == 33
    for row in rows:
        tokens = uncased.tokenize(row["text"])
        assert tokens == row["tokens"], row["text"]
        assert uncased.convert_tokens_to_ids(tokens) == row["ids"]
        assert uncased.convert_ids_to_tokens(row["ids"]) == row["tokens"]


def _fixture_rows():
    with open(os.path.join(FIXTURES_DIR, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("change", ["do_lower_case", "basic_tokenizer"])
def test_settings_changed_after_use_are_not_hidden_by_the_memos(change):
    """The word memos hold what the settings gave: a cased tokenizer, used, then made uncased
    (its basic tokenizer's `do_lower_case` set, or the basic tokenizer replaced, as users of the
    original do) gives the original's uncased tokens, not the cased words it memoised."""
    rows = _fixture_rows()
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=False)
    cased = [tokenizer.tokenize(row["text"]) for row in rows]
    assert cased != [row["tokens"] for row in rows]  # the fixture has upper-case text
    if change == "do_lower_case":
        tokenizer.basic_tokenizer.do_lower_case = True
    else:
        tokenizer.basic_tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
    assert [tokenizer.tokenize(row["text"]) for row in rows] == [row["tokens"] for row in rows]


def test_wordpiece_settings_changed_after_use():
    """`max_input_chars_per_word` and `unk_token` set on a used WordPiece tokenizer apply to
    the words it has already seen, through the full tokenizer too."""
    tokenizer = tokenization.FullTokenizer(VOCAB, do_lower_case=True)
    assert tokenizer.tokenize("unaffable hello") == ["una", "##ffa", "##ble", "hello"]
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = 5
    assert tokenizer.tokenize("unaffable hello") == ["[UNK]", "hello"]
    tokenizer.wordpiece_tokenizer.unk_token = "[MASK]"
    assert tokenizer.tokenize("unaffable hello") == ["[MASK]", "hello"]
    assert tokenizer.wordpiece_tokenizer.tokenize("unaffable") == ["[MASK]"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", []),
        ("   \t\n ", []),
        ("Hello, World!", ["hello", ",", "world", "!"]),
        # CJK ideographs become words of their own (these four are not in this vocab).
        ("BERT模型很好", ["bert", "[UNK]", "[UNK]", "[UNK]", "[UNK]"]),
        # Kana are not split; the dakuten of が is a combining mark (Mn) and is stripped.
        ("ひらがな", ["ひ", "##ら", "##か", "##な"]),
        # Accents are stripped after lower-casing (NFD, drop Mn).
        ("Héllo Naïve CAFÉ", ["hello", "naive", "cafe"]),
        # NUL, U+FFFD, Cc and Cf (zero-width joiner/space U+200D/U+200B) are dropped.
        ("a\x00b\ufffdc\u200bd\u200de\x07f", ["abc", "##de", "##f"]),
        # \t \n \r and Zs (no-break space, ideographic space) separate words.
        ("one\ttwo\u00a0three\u3000four", ["one", "two", "three", "four"]),
        # Non-ASCII punctuation (P*) splits; ASCII symbols like $ ^ ` count as punctuation too.
        ("a¿b«c»d$e^f`g", ["a", "¿", "b", "«", "c", "»", "d", "$", "e", "^", "f", "`", "g"]),
        # The original splits literal special tokens like any other text.
        ("[CLS] hi [SEP]", ["[", "cl", "##s", "]", "hi", "[", "sep", "]"]),
        ("unaffable", ["una", "##ffa", "##ble"]),
        ("x" * 201, ["[UNK]"]),
    ],
)
def test_targeted_cases_uncased(uncased, text, expected):
    assert uncased.tokenize(text) == expected


def test_basic_tokenization_steps():
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    assert basic.tokenize("BERT模型很好") == ["bert", "模", "型", "很", "好"]
    assert basic.tokenize("ひらがな") == ["ひらかな"]
    assert basic.tokenize("a\x00b\ufffdc\u200bd\u200de\x07f") == ["abcdef"]
    # U+2028 (Zl) is kept by cleaning but still separates words, as Python's split() does.
    assert basic.tokenize("x\u2028y") == ["x", "y"]


def test_word_length_limit_is_in_characters(uncased):
    # 200 characters of a two-byte letter: still WordPiece'd, not [UNK] (a byte limit would differ).
    assert uncased.tokenize("é" * 200) != ["[UNK]"]
    assert uncased.tokenize("é" * 201) == ["[UNK]"]
    assert uncased.tokenize("x" * 200) != ["[UNK]"]


def test_cased_keeps_case_and_accents(cased):
    assert cased.basic_tokenizer.tokenize("Héllo WORLD") == ["Héllo", "WORLD"]
    assert cased.tokenize("Héllo")[0] != "hello"


def test_every_unicode_punctuation_character_is_split(uncased):
    basic = tokenization.BasicTokenizer(do_lower_case=False)
    punctuation = [chr(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)).startswith("P")]
    assert len(punctuation) > 700
    for char in punctuation:
        assert basic.tokenize(f"a{char}b") == ["a", char, "b"], hex(ord(char))


def test_vocab_loading_rules(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\nhello\n\nhello\nworld\n")
    vocab = tokenization.load_vocab(str(path))
    # Every line counts; a repeated token keeps its first place with the later id.
    assert list(vocab.items()) == [("[PAD]", 0), ("[UNK]", 1), ("hello", 4), ("", 3), ("world", 5)]
    with pytest.raises(ValueError, match=r"missing\.txt: cannot read the vocab file"):
        tokenization.FullTokenizer(str(tmp_path / "missing.txt"))


def test_convert_to_unicode_drops_invalid_utf8():
    assert tokenization.convert_to_unicode(b"caf\xc3\xa9 \xff\xfeok") == "café ok"
    assert tokenization.printable_text("x") == "x"
    with pytest.raises(ValueError):
        tokenization.convert_to_unicode(3)


def test_case_check_against_released_checkpoint_names():
    check = tokenization.validate_case_matches_checkpoint
    check(True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt")
    check(False, "/models/my_own_model/bert_model.ckpt")
    check(True, None)
    with pytest.raises(ValueError, match=r"--do_lower_case=True"):
        check(False, "/models/uncased_L-24_H-1024_A-16/bert_model.ckpt")
    with pytest.raises(ValueError, match=r"--do_lower_case=False"):
        check(True, "gs://bucket/multi_cased_L-12_H-768_A-12/bert_model.ckpt")


def test_module_level_conversions_give_the_original_ids(fixtures_dir):
    vocab = tokenization.load_vocab(VOCAB)
    inv_vocab = {index: token for token, index in vocab.items()}
    with open(os.path.join(FIXTURES_DIR, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        assert tokenization.convert_tokens_to_ids(vocab, row["tokens"]) == row["ids"]
        assert tokenization.convert_ids_to_tokens(inv_vocab, row["ids"]) == row["tokens"]
    assert tokenization.convert_tokens_to_ids(vocab, []) == []
    # As in the original, an unknown token or id is an error, not [UNK].
    with pytest.raises(KeyError):
        tokenization.convert_tokens_to_ids(vocab, ["hello", "not-a-wordpiece"])
    with pytest.raises(KeyError):
        tokenization.convert_ids_to_tokens(inv_vocab, [len(inv_vocab)])


def test_whitespace_tokenize_and_printable_text():
    assert tokenization.whitespace_tokenize("") == []
    assert tokenization.whitespace_tokenize(" \t\r\n ") == []
    # Python's notion of whitespace: the no-break and ideographic spaces, U+2028 and the
    # information separators split; the zero-width space does not.
    assert tokenization.whitespace_tokenize(" a\xa0b\u3000c\u2028d\x1ce\u200bf ") == [
        "a",
        "b",
        "c",
        "d",
        "e\u200bf",
    ]
    assert tokenization.printable_text(b"caf\xc3\xa9\xff!") == "café!"
    assert tokenization.printable_text("naïve") == "naïve"
    for bad in (None, 3, bytearray(b"x")):
        with pytest.raises(ValueError, match="unsupported string type"):
            tokenization.printable_text(bad)


def test_character_classes_the_original_tests_use():
    whitespace = [" ", "\t", "\n", "\r", "\xa0", "\u3000", "\u2009"]
    control = ["\x00", "\x05", "\x7f", "\x85", "\u200b", "\u200d", "\ufeff"]
    punctuation = ["-", "$", "`", ".", "^", "¿", "«", "、", "\u2014"]
    other = ["A", "é", "7", "\U0001f4a9", "\u4e00", "\u2028"]
    for char in whitespace:
        assert tokenization._is_whitespace(char) and not tokenization._is_control(char), repr(char)
    for char in control:
        assert tokenization._is_control(char) and not tokenization._is_whitespace(char), repr(char)
    for char in punctuation:
        assert tokenization._is_punctuation(char), repr(char)
    for char in whitespace + control + other:
        assert not tokenization._is_punctuation(char), repr(char)
    for char in other:
        assert not tokenization._is_whitespace(char) and not tokenization._is_control(char), repr(char)
