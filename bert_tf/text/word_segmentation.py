"""Words for whole-word masking of text whose tokens are characters (Chinese), from a segmenter.

BERT's tokenizer makes each CJK ideograph a token of its own, so its "##" pieces never join the
characters of a Chinese word. A word segmenter cuts a line into words; `word_continuations`
marks each token that starts inside a word (not at its first character) as continuing the
token before it, as a "##" piece would, so whole-word masking masks the word's tokens together.
A word that mixes CJK with other characters (T恤, 2018年, 卡拉OK) is one word like any other.

`--word_segmenter` names the segmenter (`load_word_segmenter`):
- `none`: no segmenter (only "##" pieces join, as in the original);
- `jieba`: jieba's default cut (its accurate mode, with its HMM for unknown words), from the
  optional `zh` extra;
- `module:function`: a Python callable from a line (`str`) to its words (`str`s), which must be
  pieces of the line, in order; text between them (spaces) belongs to no word. The module is
  imported as `python` would from the current directory, where `PYTHONPATH` does not have it.
"""

import bisect
import importlib
import logging
import os
import sys

NO_SEGMENTER = "none"
JIEBA = "jieba"
JIEBA_REQUIREMENT = "jieba==0.42.1"


def check_segmenter_name(name):
    """Raises a ValueError naming `--word_segmenter` if `name` is none of its three forms."""
    if name in (NO_SEGMENTER, JIEBA):
        return
    module, _, function = name.partition(":")
    if not (module and function and ":" not in function):
        raise ValueError(f"--word_segmenter={name}: give none, jieba or module:function")


def load_word_segmenter(name):
    """The segmenter `--word_segmenter=name` names (module doc).

    Args:
      name: "none", "jieba" or "module:function".

    Returns:
      None for "none", else a function from a line to its list of words.

    Raises:
      ValueError: One line naming the flag: a malformed name, jieba not installed, a module
        that cannot be imported, or no such callable in it.
    """
    check_segmenter_name(name)
    if name == NO_SEGMENTER:
        return None
    if name == JIEBA:
        return _load_jieba()
    module_name, _, function_name = name.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # spawned workers inherit sys.path
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--word_segmenter={name}: cannot import {module_name} ({e})") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"--word_segmenter={name}: {module_name} has no function {function_name}")
    return function


def _load_jieba():
    try:
        import jieba
    except ImportError:
        raise ValueError(
            f"--word_segmenter=jieba needs jieba: pip install -e '.[zh]' ({JIEBA_REQUIREMENT})"
        ) from None
    # jieba logs its dictionary's loading at DEBUG on its own stderr handler; load it now, once.
    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba.lcut


def word_spans(text, words):
    """The `[start, end)` character spans of `words` in `text`, found in order.

    Raises:
      ValueError: A word is not the next piece of `text` (a non-string, or text out of order).
    """
    spans, position = [], 0
    for word in words:
        start = text.find(word, position) if isinstance(word, str) else -1
        if start < 0:
            raise ValueError(f"the segmenter's word {word!r} is not the next piece of the line")
        if word:
            position = start + len(word)
            spans.append((start, position))
    return spans


def word_continuations(text, token_starts, words):
    """Which tokens continue a word of the segmenter.

    Args:
      text: The line.
      token_starts: Where in `text` each token starts (`FullTokenizer.tokenize_with_offsets`).
      words: The segmenter's words of `text`.

    Returns:
      A list of bools, one a token: True where the token starts inside a word, after its first
      character.

    Raises:
      ValueError: The words are not pieces of `text` in order (`word_spans`).
    """
    spans = word_spans(text, words)
    ends = [end for _, end in spans]
    continues = []
    for start in token_starts:
        index = bisect.bisect_right(ends, start)  # the first word that ends after `start`
        continues.append(index < len(spans) and spans[index][0] < start)
    return continues
