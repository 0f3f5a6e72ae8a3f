"""Learning a WordPiece vocabulary from a corpus, consistent with `FullTokenizer`.

Words are counted after bert_tf's own `BasicTokenizer` (the original's cleaning, CJK splitting,
lower-casing and accent stripping, punctuation splitting), so the vocabulary is learned on
exactly the words `FullTokenizer` will later split into WordPieces. The WordPieces themselves
come from tensorflow-text's vocabulary learner.
"""

import collections
import dataclasses
import logging

from bert_tf.files import atomic_output, check_output_path, expand_input_patterns, open_file
from bert_tf.options import option
from bert_tf.progress import Progress
from bert_tf.text.tokenization import BasicTokenizer

logger = logging.getLogger(__name__)

# BERT's special tokens; [PAD] must be id 0 (padding is 0 everywhere).
DEFAULT_RESERVED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def count_words(input_files, do_lower_case=True):
    """Counts the basic tokens of every line of `input_files` (decoded as UTF-8, bad bytes dropped),
    streaming the files, with progress on stderr (`bert_tf.progress`).

    The whitespace-separated words are counted first and each distinct one is split into basic
    tokens once: the same counts as tokenizing every line, at a fraction of the work.

    Returns:
      A `collections.Counter` of words.
    """
    basic = BasicTokenizer(do_lower_case=do_lower_case)
    words = collections.Counter()
    progress = Progress("Counting words", rate_of="MB")
    read = 0
    for path in input_files:
        with open_file(path, "rb") as reader:
            for line in reader:
                words.update(basic.split_words(line.decode("utf-8", "ignore")))
                read += len(line)
                progress.update(MB=read >> 20, words=len(words))
    progress.done()
    counts = collections.Counter()
    for word, count in words.items():
        for token in basic.tokenize_word_uncached(word):
            counts[token] += count
    return counts


def check_learner_arguments(vocab_size, reserved_tokens):
    """Raises a ValueError unless `learn_vocab` can take these (see there)."""
    if not reserved_tokens or reserved_tokens[0] != "[PAD]":
        raise ValueError("the first reserved token must be [PAD] (id 0 is padding)")
    for token in reserved_tokens:
        if not token.strip() or token != token.strip() or len(token.split()) > 1:
            raise ValueError(f"reserved token {token!r}: a token is one line of the vocab, without spaces")
    if vocab_size < 1:
        raise ValueError(f"the vocab size must be positive, got {vocab_size}")


def learn_vocab(word_counts, vocab_size, reserved_tokens=DEFAULT_RESERVED_TOKENS, min_count=2):
    """Learns WordPieces from word counts.

    Args:
      word_counts: `{word: count}` of basic tokens.
      vocab_size: Target size, reserved tokens included. The learner treats it as a target: it
        always keeps every character of the kept words (and its "##" form), so a small target
        on a corpus with many characters comes out larger.
      reserved_tokens: Tokens put first, in this order.
      min_count: Words seen fewer times are ignored (their characters still enter the vocab).

    Returns:
      The vocabulary as a list of tokens, reserved tokens first, no duplicates.

    Raises:
      ValueError: `check_learner_arguments` rejects the size or the reserved tokens.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

    check_learner_arguments(vocab_size, reserved_tokens)
    vocab = learner.learn(
        sorted(word_counts.items()),
        vocab_size=vocab_size,
        reserved_tokens=list(reserved_tokens),
        lower_thresh=min_count,
    )
    return list(dict.fromkeys(vocab))  # the learner may repeat a reserved token


def write_vocab(tokens, path):
    """Writes one token a line through a temporary file renamed into place."""
    with atomic_output(path) as tmp, open_file(tmp, "w") as writer:
        writer.write("".join(token + "\n" for token in tokens))


def build_vocab(
    input_file, output, vocab_size, do_lower_case=True, reserved_tokens=DEFAULT_RESERVED_TOKENS, min_count=2
):
    """Counts words in `input_file` (comma-separated globs), learns and writes a vocab.

    Returns:
      The list of tokens written.

    Raises:
      ValueError: No input matches, the input has no words, bad reserved tokens, or no file
        can be written at `output`.
    """
    check_output_path(output, "--output")
    check_learner_arguments(vocab_size, reserved_tokens)  # before the corpus is read
    files = expand_input_patterns(input_file)
    logger.info("Counting words in %d files", len(files))
    counts = count_words(files, do_lower_case)
    if not counts:
        raise ValueError(f"{', '.join(files)}: no words found")
    logger.info("%d distinct words; learning %d WordPieces", len(counts), vocab_size)
    tokens = learn_vocab(counts, vocab_size, reserved_tokens, min_count)
    if len(tokens) != vocab_size:
        logger.warning(
            "The vocab has %d tokens where --vocab_size asked for %d (the learner keeps every character "
            "of the words it keeps, and stops where the corpus has no more): a model using it needs "
            "vocab_size %d in its bert_config.json",
            len(tokens),
            vocab_size,
            len(tokens),
        )
    write_vocab(tokens, output)
    return tokens


@dataclasses.dataclass
class BuildVocabOptions:
    """The flags of `tools/build_vocab.py`."""

    input_file: str = option(None, "Text file(s): comma-separated glob patterns.", required=True)
    vocab_size: int = option(30522, "Target vocabulary size, special tokens included.")
    output: str = option(None, "The vocab.txt to write.", required=True)
    do_lower_case: bool = option(True, "Lower-case and strip accents (an uncased vocab).")
    reserved_tokens: list = option(
        list(DEFAULT_RESERVED_TOKENS), "Special tokens, first in the vocab; [PAD] must come first."
    )
    min_count: int = option(2, "Ignore words seen fewer times (their characters still count).")


def run_build_vocab(options):
    """`build_vocab` of `BuildVocabOptions` (`tools/build_vocab.py`); prints what it wrote.

    Returns:
      The list of tokens written.
    """
    tokens = build_vocab(
        options.input_file,
        options.output,
        options.vocab_size,
        options.do_lower_case,
        tuple(options.reserved_tokens),
        options.min_count,
    )
    print(f"Wrote {len(tokens):,} tokens to {options.output}")
    return tokens
