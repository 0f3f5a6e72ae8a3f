"""Tokens to add to a vocabulary: checked and normalised as the tokenizer sees them, or chosen
from a domain corpus by the pieces they save (`tools/extend_vocab.py`).

A token is added as a whole word: `FullTokenizer` tries the longest match first, so a word equal
to a new token becomes that one token. It must therefore be exactly one basic token
(`BasicTokenizer`): no whitespace, no punctuation inside, and for an uncased vocabulary it is
lower-cased and stripped of accents as the tokenizer would do to the text.
"""

import heapq
import logging
import re

from bert_tf import files
from bert_tf.text.tokenization import BasicTokenizer
from bert_tf.text.vocabulary import count_words

logger = logging.getLogger(__name__)

# The placeholders of Google's vocabularies that `--mode=unused` writes new tokens over.
UNUSED_TOKEN = re.compile(r"\[unused\d+\]")


def unused_ids(vocab_tokens):
    """The ids of the `[unusedN]` placeholders of a vocabulary, in id order.

    Args:
      vocab_tokens: The tokens in id order.
    """
    return [index for index, token in enumerate(vocab_tokens) if UNUSED_TOKEN.fullmatch(token)]


def normalise_new_tokens(tokens, vocab, do_lower_case, source="--new_tokens"):
    """Checks tokens to add and returns them as the tokenizer sees them.

    Args:
      tokens: The tokens, as given (surrounding whitespace is ignored).
      vocab: The vocabulary they are added to, `{token: id}`.
      do_lower_case: Whether the tokenizer lower-cases and strips accents.
      source: Where the tokens come from, for the messages.

    Returns:
      The normalised tokens, in the given order.

    Raises:
      ValueError: No token, or a token with whitespace inside, one the basic tokenizer splits
        (punctuation inside) or deletes, one already in the vocabulary, or one given twice; the
        message names it.
    """
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    normalised = {}
    for given in tokens:
        token = given.strip()
        if len(token.split()) > 1:
            raise ValueError(f"{source}: token {token!r} has whitespace inside; give one token a line")
        words = basic.tokenize(token)
        if len(words) != 1:
            raise ValueError(
                f"{source}: token {token!r}: the tokenizer splits it into {words} (punctuation inside); "
                "a token is one word"
            )
        word = words[0]
        shown = repr(token) if word == token else f"{token!r} (as the tokenizer sees it: {word!r})"
        if word in vocab:
            raise ValueError(f"{source}: token {shown} is already in the vocabulary (id {vocab[word]})")
        if word in normalised:
            raise ValueError(f"{source}: token {shown} is given twice")
        normalised[word] = token
    if not normalised:
        raise ValueError(f"{source}: no token given")
    return list(normalised)


def read_new_tokens(path, vocab, do_lower_case):
    """The tokens of a file, one a line (blank lines ignored), checked and normalised
    (`normalise_new_tokens`).

    Raises:
      ValueError: The file is missing, or a token is refused; the message names it.
    """
    try:
        with files.open_file(path) as reader:
            lines = [line for line in reader if line.strip()]
    except FileNotFoundError:
        raise ValueError(f"--new_tokens: {path}: no such file") from None
    return normalise_new_tokens(lines, vocab, do_lower_case, source=f"--new_tokens={path}")


def choose_new_tokens(input_files, tokenizer, max_new_tokens):
    """The words of a corpus that would save the most WordPieces as tokens of their own.

    Every word (basic token) that the vocabulary splits into several pieces is a candidate; it
    scores its occurrences times the pieces it would save (pieces - 1). Words the vocabulary
    cannot cover (one `[UNK]`) are no candidates.

    Args:
      input_files: The corpus's files, read as `bert_tf.text.vocabulary.count_words` reads them.
      tokenizer: The `FullTokenizer` of today's vocabulary and case.
      max_new_tokens: The most words returned.

    Returns:
      `(word, occurrences, pieces)` of the best words, best first (ties by word).

    Raises:
      ValueError: `max_new_tokens` is not positive, or no word of the corpus is split.
    """
    if max_new_tokens < 1:
        raise ValueError(f"--max_new_tokens must be positive, got {max_new_tokens}")
    counts = count_words(input_files, tokenizer.basic_tokenizer.do_lower_case)
    wordpiece = tokenizer.wordpiece_tokenizer
    scored = []
    for word, count in counts.items():
        pieces = wordpiece.tokenize_word(word)
        if len(pieces) > 1:
            scored.append((-count * (len(pieces) - 1), word, count, pieces))
    if not scored:
        raise ValueError(f"--corpus: {', '.join(input_files)}: the vocabulary splits no word of it")
    best = heapq.nsmallest(max_new_tokens, scored)
    logger.info("%d of %d distinct words are split; chose %d", len(scored), len(counts), len(best))
    return [(word, count, pieces) for _, word, count, pieces in best]
