"""Word segmenters for `--word_segmenter=module:function` in the tests (tests/test_word_segmentation.py)."""


def character_pairs(line):
    """The line cut into pieces of two characters (the last may have one)."""
    return [line[start : start + 2] for start in range(0, len(line), 2)]


def not_the_line(line):
    """Words that are not pieces of the line."""
    return ["不在这里"]


NOT_CALLABLE = "character_pairs"
