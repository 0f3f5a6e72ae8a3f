"""Windows over long documents (bert_tf/text/windows.py), against the original run_squad.py's
rule worked by hand; their graph form (bert_tf/text/graph_windows.py) against them."""

import tensorflow as tf

from bert_tf.text import graph_windows
from bert_tf.text.windows import DocSpan, doc_spans, max_context_spans


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
