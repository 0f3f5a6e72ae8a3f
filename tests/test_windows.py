"""Windows over long documents (bert_tf/text/windows.py), against the original run_squad.py's
rule worked by hand."""

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
