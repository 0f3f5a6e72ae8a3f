"""Windows over long documents (bert_tf/text/windows.py), against the original run_squad.py's
rule worked by hand: the spans, each piece's window, outputs read back per token, pooling, and
`--doc_stride`'s checks; their graph form (bert_tf/text/graph_windows.py) against them."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.text import graph_windows
from bert_tf.text.windows import (
    DocSpan,
    WindowOptions,
    doc_spans,
    max_context_outputs,
    max_context_spans,
    pool_windows,
    window_spans,
)


def test_doc_spans_step_by_the_stride_and_stop_at_the_end():
    # 10 pieces, windows of 4, stride 3: starts 0, 3, 6; the third reaches the end.
    assert doc_spans(10, 4, 3) == [DocSpan(0, 4), DocSpan(3, 4), DocSpan(6, 4)]
    # A stride longer than the window skips nothing past a window's length.
    assert doc_spans(10, 4, 9) == [DocSpan(0, 4), DocSpan(4, 4), DocSpan(8, 2)]
    assert doc_spans(3, 4, 2) == [DocSpan(0, 3)]
    assert doc_spans(0, 4, 2) == []


def test_max_context_spans_prefers_the_most_centred_window_and_the_first_on_ties():
    spans = [DocSpan(0, 5), DocSpan(2, 5)]
    # Token 3: window 0 has 3 left, 1 right; window 1 has 1 left, 3 right: a tie, window 0 wins.
    assert max_context_spans(spans, 7) == [0, 0, 0, 0, 1, 1, 1]
    # The 0.01 * length term: equal context, the longer window wins.
    assert max_context_spans([DocSpan(0, 3), DocSpan(0, 4)], 4) == [1, 1, 1, 1]


def test_an_empty_document_is_one_empty_window():
    assert window_spans(0, 4, 2) == [DocSpan(0, 0)]
    assert window_spans(5, 4, 2) == doc_spans(5, 4, 2) == [DocSpan(0, 4), DocSpan(2, 3)]


def test_max_context_outputs_read_each_piece_from_its_window_and_cls_sep_from_the_ends():
    # 7 pieces in windows of 5 starting 0 and 2: [CLS] p0..p4 [SEP] and [CLS] p2..p6 [SEP].
    # Pieces 0-3 from window 0 (piece 3 a tie, the first window wins), 4-6 from window 1.
    spans = [DocSpan(0, 5), DocSpan(2, 5)]
    outputs = np.array([[[10 * w + position] for position in range(8)] for w in range(2)])
    got = max_context_outputs(outputs, spans)[:, 0].tolist()
    assert got == [0, 1, 2, 3, 4, 10 + 3, 10 + 4, 10 + 5, 10 + 6]
    # The last window shorter: its [SEP] is at 1 + its length.
    spans = [DocSpan(0, 4), DocSpan(2, 3)]
    outputs = np.array([[[10 * w + position] for position in range(6)] for w in range(2)])
    assert max_context_outputs(outputs, spans)[:, 0].tolist() == [0, 1, 2, 3, 10 + 2, 10 + 3, 10 + 4]
    # An empty document: [CLS] and [SEP] of its one window.
    assert max_context_outputs(np.arange(4).reshape(1, 4), [DocSpan(0, 0)]).tolist() == [0, 1]


def test_pool_windows_by_mean_and_max_keeps_a_single_window_as_it_is():
    values = np.array([[0.1, 0.9], [0.7, 0.3], [0.6, 0.4], [0.123456789, 0.876543211]], np.float32)
    mean = pool_windows(values, [0, 0, 0, 1], 2)
    np.testing.assert_allclose(mean[0], [(0.1 + 0.7 + 0.6) / 3, (0.9 + 0.3 + 0.4) / 3], rtol=1e-6)
    assert mean.dtype == np.float32 and mean[1].tolist() == values[3].tolist()
    biggest = pool_windows(values, [0, 0, 0, 1], 2, "max")
    assert biggest.tolist() == [[values[1, 0], values[0, 1]], values[3].tolist()]
    with pytest.raises(ValueError, match=r"^--window_pooling: expected one of mean, max, got 'sum'$"):
        pool_windows(values, [0, 0, 0, 1], 2, "sum")


def test_doc_stride_must_be_at_least_1():
    WindowOptions().validate_windows()
    WindowOptions(doc_stride=1).validate_windows()
    with pytest.raises(ValueError, match=r"^--doc_stride must be at least 1, got 0$"):
        WindowOptions(doc_stride=0).validate_windows()


def test_the_graph_windows_are_doc_spans_and_max_context_spans():
    """`graph_windows` on a batch of every document length up to three windows and more, for
    strides below, at and above the window (where `doc_spans` steps by the window), against the
    Python rule; windows of 510 with a short last window test the 0.01 * length term's ties."""
    for max_tokens, stride in [(4, 3), (4, 9), (5, 2), (14, 5), (3, 1), (1, 1), (7, 7), (510, 128)]:
        lengths = list(range(3 * max_tokens + 2)) if max_tokens < 100 else [0, 509, 511, 700, 1000, 1300]
        starts, window_lengths = graph_windows.doc_spans(tf.constant(lengths), max_tokens, stride)
        best = graph_windows.max_context_spans(tf.constant(lengths), max_tokens, stride)
        for i, n in enumerate(lengths):
            spans = doc_spans(n, max_tokens, stride) or [DocSpan(0, 0)]  # an empty document: one window
            got = list(zip(starts[i].numpy().tolist(), window_lengths[i].numpy().tolist(), strict=True))
            assert got == [tuple(span) for span in spans], (max_tokens, stride, n)
            assert best[i].numpy().tolist() == max_context_spans(spans, n), (max_tokens, stride, n)
