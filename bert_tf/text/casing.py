"""Casing: whether a model's tokenizer lower-cases (`do_lower_case`), decided in one place for
every tool that tokenizes with a model's vocabulary.

A tool's `--do_lower_case` is None unless given. `resolve_do_lower_case` takes, in order:
1. the flag, where given;
2. else the `do_lower_case` recorded beside the model (`bert_tf.model_settings`: the converter,
   `extend_vocab` and the fine-tuning jobs write it);
3. else the casing a released Google checkpoint's directory name says (the original's
   `validate_case_matches_checkpoint` table);
4. else the vocabulary's (`vocab_casing`): False for a cased vocabulary, True for an uncased or
   a caseless one (the original's default, True).

A flag given is then checked, unless `force` (`--force_do_lower_case`) insists: against the
record where there is one, else against the vocabulary. False where the model lower-cases (a
record of true, or an uncased vocabulary) is refused: every capital would become [UNK]. True
where it keeps case (a record of false, or a cased vocabulary) is a warning: it runs, the
vocabulary's capitalised tokens unused. The original uses whatever the flag says.

The vocabulary rule (`vocab_casing`): the tokens that count are whole words with a cased letter:
not a continuation piece (`##...`), not a bracketed special (`[CLS]`, `[unused0]`), alphabetic
(`str.isalpha`), and with a letter that has case (lower- or upper-casing changes it). A
vocabulary is cased if one of them has a letter that lower-casing changes (an upper-case or
title-case letter), uncased if none has, and caseless if no token counts (a CJK-only Chinese
vocabulary): there case loses nothing, and True is taken, as Google's Chinese model is used.
"""

import logging

from bert_tf.text.tokenization import load_vocab, released_model_casing

logger = logging.getLogger(__name__)

CASED, UNCASED, CASELESS = "cased", "uncased", "caseless"
# The most capitalised tokens a warning shows.
_EXAMPLES = 3


def _counts(token):
    """Whether `token` is a whole-word token with a cased letter (module docstring)."""
    if token.startswith("##") or (token.startswith("[") and token.endswith("]")):
        return False
    return token.isalpha() and token.lower() != token.upper()


def capitalised_tokens(vocab):
    """The tokens of `vocab` (an iterable of tokens) that make it cased, in its order."""
    return [token for token in vocab if _counts(token) and token != token.lower()]


def vocab_casing(vocab):
    """`CASED`, `UNCASED` or `CASELESS`: the casing of a vocabulary (an iterable of tokens), by
    the rule of the module docstring."""
    counted = [token for token in vocab if _counts(token)]
    if not counted:
        return CASELESS
    return CASED if any(token != token.lower() for token in counted) else UNCASED


def _flag(value):
    return f"--do_lower_case={str(value).lower()}"


def resolve_do_lower_case(
    do_lower_case, vocab_file, recorded=None, record=None, init_checkpoint=None, force=False
):
    """The casing a tool tokenizes with (module docstring), checked before any work.

    Args:
      do_lower_case: The flag: True, False, or None where not given.
      vocab_file: The model's vocabulary.
      recorded: The `do_lower_case` recorded beside the model, or None.
      record: The file holding `recorded` (what the messages name).
      init_checkpoint: The model's checkpoint (a released one's name decides where nothing is
        recorded), or None.
      force: Use the flag as given, unchecked (`--force_do_lower_case`).

    Returns:
      True or False.

    Raises:
      ValueError: `force` without the flag, or the flag False where the record says true or the
        vocabulary is uncased; one line naming both and the effect.
    """
    if force and do_lower_case is None:
        raise ValueError("--force_do_lower_case insists on a --do_lower_case: give it")
    if do_lower_case is None:
        if recorded is not None:
            return recorded
        released, _ = released_model_casing(init_checkpoint)
        if released is not None:
            return released
        return vocab_casing(load_vocab(vocab_file)) != CASED
    if force:
        return do_lower_case
    if recorded is not None:
        if do_lower_case == recorded:
            return do_lower_case
        if recorded:
            raise ValueError(
                f"{_flag(do_lower_case)}, but {record} records do_lower_case=true: the model was "
                "trained on lower-cased text, so capitals would become [UNK] or tokens it never saw; "
                "leave out --do_lower_case (or add --force_do_lower_case to insist)"
            )
        logger.warning(
            "%s, but %s records do_lower_case=false: the text is lower-cased and the model's "
            "capitalised tokens go unused (it runs, losing case)",
            _flag(do_lower_case),
            record,
        )
        return do_lower_case
    tokens = load_vocab(vocab_file)
    casing = vocab_casing(tokens)
    if casing == UNCASED and not do_lower_case:
        raise ValueError(
            f"{_flag(do_lower_case)} with the uncased vocabulary {vocab_file} (no whole-word token "
            "has a capital): every capital would become [UNK]; leave out --do_lower_case (or add "
            "--force_do_lower_case to insist)"
        )
    if casing == CASED and do_lower_case:
        logger.warning(
            "%s with the cased vocabulary %s (tokens such as %s): the text is lower-cased and those "
            "tokens go unused (it runs, losing case; --do_lower_case=false keeps it)",
            _flag(do_lower_case),
            vocab_file,
            ", ".join(capitalised_tokens(tokens)[:_EXAMPLES]),
        )
    return do_lower_case
