"""Token offsets, against Hugging Face's fast BertTokenizer's `offset_mapping`.

The reference (`tests/data/hf_offsets/`, made by `tests/data/make_hf_offsets.py`) is the
tokenizer test corpora (the original's fixture lines and the targeted cases) run through
transformers once, cased and uncased. Texts where transformers' tokens differ from the
original's are left out of the offset comparison; `HF_DIFFERS` lists them, and the test fails if
another text starts to differ.
"""

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bert_tf.text.tokenization import BasicTokenizer, FullTokenizer
from tests.conftest import FIXTURES_DIR

VOCAB = os.path.join(FIXTURES_DIR, "google_tiny", "vocab.txt")
HF_OFFSETS = os.path.join(os.path.dirname(__file__), "data", "hf_offsets")

# Texts on which transformers' tokens are not the original's:
HF_DIFFERS = {
    # transformers keeps its special tokens whole; the original splits them like any text.
    "[CLS] hi [SEP]": ("uncased", "cased"),
    "[CLS] hi [SEP] [MASK]": ("uncased", "cased"),
    # transformers lower-cases character by character: the final capital sigma becomes σ, not
    # Python's (and the original's) ς.
    "İstanbul ΣΟΦΟΣ ß ǅ": ("uncased",),
}


def _reference(name):
    with open(os.path.join(HF_OFFSETS, f"{name}.json"), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module", params=["uncased", "cased"])
def case(request, fixtures_dir):
    reference = _reference(request.param)
    return request.param, reference["rows"], FullTokenizer(VOCAB, reference["do_lower_case"])


def test_reference_covers_the_original_fixture_and_the_targeted_cases(fixtures_dir):
    texts = [row["text"] for row in _reference("uncased")["rows"]]
    with open(os.path.join(FIXTURES_DIR, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        assert texts[:33] == [json.loads(line)["text"] for line in f]
    for text in ("Héllo Naïve CAFÉ", "a\x00b\ufffdc\u200bd\u200de\x07f", "x" * 201, "BERT模型很好"):
        assert text in texts


def test_offsets_equal_transformers(case):
    name, rows, tokenizer = case
    differing = set()
    for row in rows:
        tokens, starts, ends = tokenizer.tokenize_with_offsets(row["text"])
        assert tokens == tokenizer.tokenize(row["text"]), repr(row["text"])
        if tokens != row["tokens"]:
            differing.add(row["text"])
            continue
        assert [list(span) for span in zip(starts, ends, strict=True)] == row["offsets"], repr(row["text"])
    assert differing == {text for text, cases in HF_DIFFERS.items() if name in cases}


def test_rules_on_small_cases(fixtures_dir):
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)

    def spans(text):
        tokens, starts, ends = tokenizer.tokenize_with_offsets(text)
        return [(token, text[start:end]) for token, start, end in zip(tokens, starts, ends, strict=True)]

    # Pieces cover their own characters; dropped characters only inside a token.
    assert spans("unaffable") == [("una", "una"), ("##ffa", "ffa"), ("##ble", "ble")]
    assert spans("\x00a\x00b\x00 c\u200b") == [("ab", "a\x00b"), ("c", "c")]
    # A combining mark stripped after the last character is not covered; a composed one is.
    assert spans("cafe\u0301 café") == [("cafe", "cafe"), ("cafe", "café")]
    # An over-long word's [UNK] covers the word.
    assert spans("a " + "x" * 201 + " b") == [("a", "a"), ("[UNK]", "x" * 201), ("b", "b")]
    # Each CJK ideograph is a word; lower-casing that expands a character keeps it whole.
    assert spans("İ東") == [("i", "İ"), ("東", "東")]
    # Bytes are decoded first; the offsets are into the decoded text.
    assert tokenizer.tokenize_with_offsets("é x".encode()) == (["e", "x"], [0, 2], [1, 3])


def test_basic_and_wordpiece_offsets(fixtures_dir):
    basic = BasicTokenizer(do_lower_case=True)
    text = "Héllo, Wörld!\x00 \u0130x"
    tokens, starts, ends = basic.tokenize_with_offsets(text)
    assert tokens == basic.tokenize(text)
    assert [text[s:e] for s, e in zip(starts, ends, strict=True)] == ["Héllo", ",", "Wörld", "!", "\u0130x"]
    wordpiece = FullTokenizer(VOCAB).wordpiece_tokenizer
    text = "  unaffable  " + "y" * 201 + "\tzzzzq\u00e9"
    tokens, starts, ends = wordpiece.tokenize_with_offsets(text)
    assert tokens == wordpiece.tokenize(text)
    assert [text[s:e] for s, e in zip(starts, ends, strict=True)] == [
        "una",
        "ffa",
        "ble",
        "y" * 201,
        "zzzzq\u00e9",
    ]


def test_settings_changed_after_use_apply_to_offsets(fixtures_dir):
    tokenizer = FullTokenizer(VOCAB, do_lower_case=False)
    assert tokenizer.tokenize_with_offsets("Héllo")[0] == tokenizer.tokenize("Héllo")
    tokenizer.basic_tokenizer.do_lower_case = True
    assert tokenizer.tokenize_with_offsets("Héllo") == (["hello"], [0], [5])
    tokenizer.wordpiece_tokenizer.max_input_chars_per_word = 3
    assert tokenizer.tokenize_with_offsets("Héllo") == (["[UNK]"], [0], [5])


def _byte_offsets(text, offsets):
    return [len(text[:offset].encode("utf-8")) for offset in offsets]


@pytest.fixture(scope="module", params=[True, False], ids=["uncased", "cased"])
def graph_case(request, fixtures_dir):
    import tensorflow as tf

    from bert_tf.text.graph_tokenizer import GraphTokenizer
    from tests.test_graph_tokenizer import TARGETED

    texts = [row["text"] for row in _reference("uncased")["rows"]]
    texts += [text for text in TARGETED if text not in texts]
    python = FullTokenizer(VOCAB, request.param)
    graph = GraphTokenizer(VOCAB, request.param)
    ids, starts, ends = graph.tokenize_with_offsets(tf.constant(texts))
    return python, graph, texts, ids.to_list(), starts.to_list(), ends.to_list()


def test_graph_offsets_are_the_python_ones_in_bytes(graph_case):
    """On the reference's texts and the graph tokenizer's targeted cases: the ids of `tokenize`,
    the offsets of `FullTokenizer.tokenize_with_offsets` (so of transformers, where it tokenizes
    as the original) in UTF-8 bytes."""
    python, _, texts, ids, starts, ends = graph_case
    for text, text_ids, text_starts, text_ends in zip(texts, ids, starts, ends, strict=True):
        tokens, char_starts, char_ends = python.tokenize_with_offsets(text)
        assert text_ids == python.convert_tokens_to_ids(tokens), repr(text)
        assert text_starts == _byte_offsets(text, char_starts), repr(text)
        assert text_ends == _byte_offsets(text, char_ends), repr(text)


def test_graph_offsets_equal_transformers_in_bytes(graph_case):
    python, _, texts, ids, starts, ends = graph_case
    reference = _reference("uncased" if python.basic_tokenizer.do_lower_case else "cased")
    compared = 0
    for row in reference["rows"]:
        index = texts.index(row["text"])
        if python.convert_tokens_to_ids(row["tokens"]) != ids[index]:
            continue
        compared += 1
        assert starts[index] == _byte_offsets(row["text"], [start for start, _ in row["offsets"]])
        assert ends[index] == _byte_offsets(row["text"], [end for _, end in row["offsets"]])
    assert compared >= len(reference["rows"]) - len(HF_DIFFERS)


def test_graph_offsets_of_bytes_that_are_not_utf8(graph_case):
    """Bytes that are not UTF-8 are dropped (as `tokenize` drops them); the offsets still count
    them, as bytes of the request."""
    import tensorflow as tf

    _, graph, *_ = graph_case
    rows = [b"caf\xc3 au\xfflait", b"\xe2\x82 \xc3\xa9t\xc3\xa9 a\x00b\xff"]
    ids, starts, ends = graph.tokenize_with_offsets(tf.constant(rows))
    assert ids.to_list() == graph.tokenize(tf.constant(rows)).to_list()
    spans = [
        [row[s:e] for s, e in zip(*pair, strict=True)]
        for row, *pair in zip(rows, starts.to_list(), ends.to_list(), strict=True)
    ]
    assert b"".join(spans[0]) == b"cafaulait"
    # A dropped byte inside a word is covered, one at its edge is not.
    assert spans[1][-1] == b"a\x00b"
    assert spans[1][0].startswith(b"\xc3\xa9")


@pytest.mark.parametrize("max_seq_length, pad_to_multiple, seq", [(16, None, 16), (16, 8, 16), (40, 8, 32)])
def test_packing_carries_the_offsets(graph_case, max_seq_length, pad_to_multiple, seq):
    """`pack_ids` packs offsets beside the ids of `pack_inputs`' rows, -1 at the special tokens
    and the padding; padded to the request, the rows are `pack_inputs`' cut to the longest."""
    import tensorflow as tf

    from bert_tf.text.graph_tokenizer import pack_ids
    from bert_tf.text.packing import pack_inputs

    python, graph, *_ = graph_case
    a = ["Héllo, Wörld!", "東京 naïve unaffable " * 3, "x", "a\x00b ΣΟΦΟΣ"]
    b = ["", "the quick brown fox", "jumps " * 20, "İ ß"]
    ids_a, starts_a, ends_a = graph.tokenize_with_offsets(tf.constant(a))
    ids_b, starts_b, ends_b = graph.tokenize_with_offsets(tf.constant(b))
    packed = pack_ids(
        ids_a,
        ids_b,
        max_seq_length,
        graph.cls_id,
        graph.sep_id,
        offsets=((starts_a, ends_a), (starts_b, ends_b)),
        pad_to_multiple=pad_to_multiple,
    )
    packed = {name: tensor.numpy().tolist() for name, tensor in packed.items()}
    rows = [
        pack_inputs(python.tokenize(x), python.tokenize(y), max_seq_length, python)
        for x, y in zip(a, b, strict=True)
    ]
    # At 40 the longest row has 25 tokens: padded to 32.
    assert max(len(row["tokens"]) for row in rows) == min(25, max_seq_length)
    assert {len(values) for values in packed["input_ids"]} == {seq}
    for i, row in enumerate(rows):
        for name in ("input_ids", "input_mask", "segment_ids"):
            assert packed[name][i] == row[name][:seq], (name, i)
        for name, index in (("start_offsets", 1), ("end_offsets", 2)):
            # Python's offsets, in bytes, of the tokens that survived the truncation.
            spans_a = _byte_offsets(a[i], python.tokenize_with_offsets(a[i])[index])
            spans_b = _byte_offsets(b[i], python.tokenize_with_offsets(b[i])[index])
            segment_b = row["segment_ids"][: len(row["tokens"])].count(1)
            len_a = len(row["tokens"]) - 2 - segment_b
            want = [-1, *spans_a[:len_a], -1]
            if segment_b:
                want += [*spans_b[: segment_b - 1], -1]
            assert packed[name][i] == want + [-1] * (seq - len(want)), (name, i)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=40), min_size=1, max_size=6
    )
)
def test_graph_offsets_on_arbitrary_unicode(graph_case, texts):
    """Any characters of Python's Unicode version: the graph's ids and byte offsets are Python's.
    (A row's misplaced offsets would shift every later row's, so batches of several.)"""
    import tensorflow as tf

    python, graph, *_ = graph_case
    ids, starts, ends = (x.to_list() for x in graph.tokenize_with_offsets(tf.constant(texts)))
    for text, text_ids, text_starts, text_ends in zip(texts, ids, starts, ends, strict=True):
        tokens, char_starts, char_ends = python.tokenize_with_offsets(text)
        assert text_ids == python.convert_tokens_to_ids(tokens), repr(text)
        assert (text_starts, text_ends) == (_byte_offsets(text, char_starts), _byte_offsets(text, char_ends))
