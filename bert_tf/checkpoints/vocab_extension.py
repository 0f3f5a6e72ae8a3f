"""Growing or filling the vocabulary of a pretrained Google checkpoint (`tools/extend_vocab.py`).

A new token's row of `bert/embeddings/word_embeddings` (and its entry of
`cls/predictions/output_bias`) is the mean of the rows of the pieces the old vocabulary splits
it into, so the model starts from what it knew of the word; the optimizer slots of those
variables (`<name>/adam_m`, `<name>/adam_v`, any `<name>/<slot>` of the same rows) are zero
for the new rows, as for a variable never trained. Every other tensor of the checkpoint is
written back as read. `--mode=unused` writes the tokens over `[unusedN]` placeholders, keeping
the table's size; `--mode=append` adds rows and sets `vocab_size`. BUILD_NOTES.md, "Vocabulary
extension", gives the reasons.
"""

import dataclasses
import logging
import os

import numpy as np

from bert_tf import files, model_settings
from bert_tf.checkpoints.converter import CHECKPOINT_NAME, CONFIG_NAME
from bert_tf.checkpoints.google import (
    open_checkpoint,
    resolve_checkpoint_prefix,
    write_checkpoint,
    write_checkpoint_state,
)
from bert_tf.checkpoints.hf import read_vocab_tokens
from bert_tf.checkpoints.pretrained import is_keras_file, open_pretrained
from bert_tf.config import BertConfig
from bert_tf.model_files import ModelFileOptions
from bert_tf.options import option, redefine
from bert_tf.text.new_tokens import choose_new_tokens, read_new_tokens, unused_ids
from bert_tf.text.vocabulary import write_vocab

logger = logging.getLogger(__name__)

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
OUTPUT_BIAS = "cls/predictions/output_bias"
# The vocabulary-indexed variables: a row (an entry) per id.
TABLES = (WORD_EMBEDDINGS, OUTPUT_BIAS)
ADDED_TOKENS_NAME = "added_tokens.txt"
MODES = ("unused", "append")


def extended_rows(value, piece_ids, new_ids, is_slot):
    """A vocabulary-indexed tensor with rows for new tokens.

    Args:
      value: The tensor, one row per id (`[vocab_size, ...]`).
      piece_ids: For each new token, the old ids of its pieces.
      new_ids: For each new token, its id: an old row to overwrite, or the next row beyond the
        table (rows are appended in order).
      is_slot: An optimizer slot: new rows are zero; else the mean of the pieces' rows.

    Returns:
      The new tensor, of `value`'s dtype.
    """
    rows = max(value.shape[0], max(new_ids) + 1)
    extended = np.zeros((rows, *value.shape[1:]), dtype=value.dtype)
    extended[: value.shape[0]] = value
    for pieces, new_id in zip(piece_ids, new_ids, strict=True):
        extended[new_id] = 0 if is_slot else value[pieces].astype(np.float64).mean(axis=0)
    return extended


@dataclasses.dataclass
class Extension:
    """What `extend_vocab` wrote.

    Attributes:
      tokens: The new tokens, normalised, in order.
      ids: Their ids.
      pieces: The old vocabulary's pieces of each.
      vocab_size: The table's size written.
      rewritten: The checkpoint variables with new rows.
    """

    tokens: list
    ids: list
    pieces: list
    vocab_size: int
    rewritten: list


def extend_vocab(
    bert_config_file,
    init_checkpoint,
    vocab_file,
    do_lower_case,
    output_dir,
    new_tokens=None,
    corpus=None,
    max_new_tokens=None,
    mode="unused",
    force_do_lower_case=False,
):
    """Adds tokens to a checkpoint's vocabulary and writes the model in `output_dir`:
    `vocab.txt`, `bert_config.json`, `bert_model.ckpt.*`, the `checkpoint` state file and
    `added_tokens.txt` (the tokens added, one a line) and `model_settings.json` (the model's,
    with the casing used), all of them or, on any error, none.

    Args:
      bert_config_file, init_checkpoint, vocab_file, do_lower_case: The pretrained model
        (`open_pretrained`); the checkpoint must be a Google one.
      output_dir: The directory to write; it must not exist, or be empty.
      new_tokens: A file of tokens, one a line (`bert_tf.text.new_tokens.read_new_tokens`).
      corpus: Else, comma-separated globs of a corpus to choose the tokens from
        (`bert_tf.text.new_tokens.choose_new_tokens`).
      max_new_tokens: With `corpus`, the most tokens chosen.
      mode: "unused" (write over `[unusedN]` entries) or "append" (add rows).
      force_do_lower_case: As `open_pretrained`'s.

    Returns:
      An `Extension`.

    Raises:
      ValueError: Bad flags or files, a refused token, or too few `[unusedN]` entries; the
        message names them, and nothing is written.
    """
    if mode not in MODES:
        raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if bool(new_tokens) == bool(corpus):
        raise ValueError("give one of --new_tokens and --corpus")
    if bool(corpus) != (max_new_tokens is not None):
        raise ValueError("--corpus needs --max_new_tokens, and --max_new_tokens goes with --corpus")
    if not init_checkpoint or is_keras_file(init_checkpoint):
        raise ValueError("--init_checkpoint: give a Google checkpoint (the one whose vocabulary is extended)")
    if not vocab_file:
        raise ValueError("--vocab_file is required")
    pretrained = open_pretrained(
        bert_config_file, vocab_file, do_lower_case, init_checkpoint, force_do_lower_case=force_do_lower_case
    )
    do_lower_case = pretrained.do_lower_case
    settings = model_settings.read_settings(model_settings.settings_directory(bert_config_file))
    config = pretrained.config
    tokenizer = pretrained.tokenizer()
    vocab_tokens = read_vocab_tokens(vocab_file)
    if mode == "append" and len(vocab_tokens) != config.vocab_size:
        raise ValueError(
            f"--mode=append: {vocab_file} has {len(vocab_tokens)} tokens for {config.vocab_size} rows; "
            "rows are appended after a vocabulary that names every row"
        )
    input_files = files.expand_input_patterns(corpus, "--corpus") if corpus else None
    tokens = read_new_tokens(new_tokens, tokenizer.vocab, do_lower_case) if new_tokens else None
    prefix = resolve_checkpoint_prefix(init_checkpoint)
    tmp = files.prepare_output_dir(output_dir, "--output_dir")
    try:
        if input_files:
            chosen = choose_new_tokens(input_files, tokenizer, max_new_tokens)
            tokens = [word for word, _, _ in chosen]
            for word, count, pieces in chosen:
                print(f"{word}\t{count:,} occurrences\t{' '.join(pieces)}")
        if mode == "unused":
            free = unused_ids(vocab_tokens)
            if len(free) < len(tokens):
                raise ValueError(
                    f"--mode=unused: {len(tokens)} new tokens but {vocab_file} has {len(free)} [unusedN] "
                    "entries; add fewer tokens or use --mode=append"
                )
            ids = free[: len(tokens)]
        else:
            ids = list(range(config.vocab_size, config.vocab_size + len(tokens)))
        pieces = [tokenizer.tokenize(token) for token in tokens]
        piece_ids = [tokenizer.convert_tokens_to_ids(token_pieces) for token_pieces in pieces]
        for token, token_pieces in zip(tokens, pieces, strict=True):
            if token_pieces == ["[UNK]"]:
                logger.warning("%r: the vocabulary cannot cover it; its row is that of [UNK]", token)
        named, rewritten = _extended_tensors(prefix, piece_ids, ids)
        write_checkpoint(os.path.join(tmp, CHECKPOINT_NAME), named)
        write_checkpoint_state(tmp, [CHECKPOINT_NAME])
        vocab_size = max(config.vocab_size, max(ids) + 1)
        BertConfig.from_dict(dict(config.to_dict(), vocab_size=vocab_size)).to_json_file(
            os.path.join(tmp, CONFIG_NAME)
        )
        for token, new_id in zip(tokens, ids, strict=True):
            if new_id < len(vocab_tokens):
                vocab_tokens[new_id] = token
            else:
                vocab_tokens.append(token)
        write_vocab(vocab_tokens, os.path.join(tmp, "vocab.txt"))
        write_vocab(tokens, os.path.join(tmp, ADDED_TOKENS_NAME))
        model_settings.write_settings(tmp, dataclasses.replace(settings, do_lower_case=do_lower_case))
        files.finish_output_dir(tmp, output_dir)
    finally:
        if files.isdir(tmp):
            files.remove_tree(tmp)
    return Extension(tokens, ids, pieces, vocab_size, rewritten)


def _extended_tensors(prefix, piece_ids, new_ids):
    """Every variable of the checkpoint at `prefix` as `(name, value)`, the vocabulary-indexed
    ones (`WORD_EMBEDDINGS`, `OUTPUT_BIAS` and their slots) with the new rows, and the names of
    those. The pairs are an iterator reading each value when reached, so that `write_checkpoint`
    holds the model once."""
    reader = open_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    rows = shapes[WORD_EMBEDDINGS][0]

    def table_of(name):
        return name.rsplit("/", 1)[0] if name not in TABLES else name  # a slot's variable

    rewritten = [n for n in sorted(shapes) if table_of(n) in TABLES and shapes[n][:1] == [rows]]

    def named():
        for name in sorted(shapes):
            value = reader.get_tensor(name)
            if name in rewritten:
                value = extended_rows(value, piece_ids, new_ids, is_slot=name != table_of(name))
            yield name, value

    return named(), rewritten


@dataclasses.dataclass
class ExtendVocabOptions(ModelFileOptions):
    """The flags of `tools/extend_vocab.py` (`--max_seq_length` aside: it packs nothing)."""

    bert_config_file: str = redefine(ModelFileOptions, "bert_config_file", required=True)
    init_checkpoint: str = redefine(ModelFileOptions, "init_checkpoint", required=True)
    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    output_dir: str = option(
        None,
        "The directory to write: vocab.txt, bert_config.json, bert_model.ckpt.*, added_tokens.txt, "
        "model_settings.json.",
        required=True,
    )
    new_tokens: str = option(None, "A file of tokens to add, one a line.")
    corpus: str = option(
        None, "Instead, a domain corpus (comma-separated globs): add the words that save the most pieces."
    )
    max_new_tokens: int = option(None, "With --corpus: the most tokens to add.")
    mode: str = option(
        "unused", "unused: write over [unusedN] entries, same size; append: add rows, set vocab_size.", MODES
    )


def run_extend_vocab(options):
    """`extend_vocab` of `ExtendVocabOptions` (`tools/extend_vocab.py`); prints what it wrote.

    Returns:
      The `Extension`.
    """
    extension = extend_vocab(
        options.bert_config_file,
        options.init_checkpoint,
        options.vocab_file,
        options.do_lower_case,
        options.output_dir,
        options.new_tokens,
        options.corpus,
        options.max_new_tokens,
        options.mode,
        options.force_do_lower_case,
    )
    print(
        f"Added {len(extension.tokens):,} tokens (ids {extension.ids[0]}..{extension.ids[-1]}); "
        f"vocab_size {extension.vocab_size:,}; rewrote {', '.join(extension.rewritten)}. "
        f"Wrote {options.output_dir}"
    )
    return extension
