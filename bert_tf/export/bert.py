"""`BertModel` and `BertPretrainer` as users of the export module: loading, checks, signatures."""

import logging

import keras
import tensorflow as tf

from bert_tf.checkpoints import load_google_checkpoint
from bert_tf.checkpoints.converter import load_keras_bert
from bert_tf.config import BertConfig
from bert_tf.export.module import ServedModel, after_checks, export_saved_model
from bert_tf.export.versioning import check_version
from bert_tf.modeling import BertModel, BertPretrainer
from bert_tf.text import tokenization

ENCODER_OUTPUTS = ("sequence_output", "pooled_output")
PRETRAINING_OUTPUTS = ("masked_lm_log_probs", "next_sentence_log_probs")
PRETRAINING_SIGNATURE = "pretraining"

logger = logging.getLogger(__name__)


class PretrainingOutputs(keras.layers.Layer):
    """`BertPretrainer`'s head outputs per example: `masked_lm_log_probs` as [batch, P, vocab].

    `BertPretrainer` returns the masked positions flattened to [batch * P, vocab], the shape
    the original's loss takes; a client wants them per example.
    """

    def __init__(self, pretrainer, **kwargs):
        super().__init__(name="pretraining_outputs", **kwargs)
        self.pretrainer = pretrainer

    def call(self, inputs):
        positions = inputs["masked_lm_positions"]
        # The original's gather reads row `position + b * seq` of the flattened batch: a position
        # outside [0, seq) would read another example's token.
        checks = [
            tf.debugging.assert_non_negative(positions, message="masked_lm_positions has a negative one"),
            tf.debugging.assert_less(
                positions,
                tf.shape(inputs["input_ids"])[1],
                message="masked_lm_positions has a position past the sequence",
            ),
        ]
        inputs = after_checks(inputs, checks)
        outputs = self.pretrainer(inputs)
        vocab_size = self.pretrainer.config.vocab_size
        per_example = tf.concat([tf.shape(inputs["masked_lm_positions"]), [vocab_size]], axis=0)
        return {
            "masked_lm_log_probs": tf.reshape(outputs["masked_lm_log_probs"], per_example),
            "next_sentence_log_probs": outputs["next_sentence_log_probs"],
        }


def check_vocab_and_length(config, vocab_file, max_seq_length):
    """Raises unless the vocabulary and `max_seq_length` fit the model's config.

    A token's id must have a row in the embedding table: the vocabulary's size (its highest id
    + 1; blank lines, which no text tokenizes to, left out) may be below `vocab_size` (a table
    padded beyond its vocabulary, which the original runs too: a warning), not above it.

    Raises:
      ValueError: The vocabulary is larger than the config's `vocab_size`, or `max_seq_length`
        is above `max_position_embeddings`; the message names the file or value.
    """
    ids = [index for token, index in tokenization.load_vocab(vocab_file).items() if token]
    if not ids:
        raise ValueError(f"{vocab_file}: the vocab file has blank lines only")
    vocab_size = max(ids) + 1
    if vocab_size > config.vocab_size:
        raise ValueError(
            f"{vocab_file}: the vocabulary has {vocab_size} tokens but the model's vocab_size is "
            f"{config.vocab_size}; is it the vocab.txt of this checkpoint?"
        )
    if vocab_size < config.vocab_size:
        logger.warning(
            "%s: the vocabulary has %d tokens and the model's vocab_size is %d: no token reaches "
            "the last %d embedding rows (right for a padded table; otherwise, is it the "
            "vocab.txt of this checkpoint?)",
            vocab_file,
            vocab_size,
            config.vocab_size,
            config.vocab_size - vocab_size,
        )
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length {max_seq_length} is above the model's max_position_embeddings "
            f"({config.max_position_embeddings})"
        )


def _load_keras_model(path, bert_config_file):
    model = load_keras_bert(path)
    if bert_config_file and BertConfig.from_json_file(bert_config_file) != model.config:
        raise ValueError(f"{bert_config_file}: does not describe the model in {path}")
    return model


def load_bert(init_checkpoint, bert_config_file, vocab_file, max_seq_length, with_heads=False):
    """Loads the model to export and checks it against the vocabulary and `max_seq_length`.

    Args:
      init_checkpoint: A Google checkpoint (released, or a `run_pretraining.py` output whose
        optimizer slots are skipped) or a `.keras` file of a bert_tf model.
      bert_config_file: The checkpoint's `bert_config.json` (optional for `.keras`, where it
        must match the model's own config when given).
      vocab_file: The vocabulary to check against the config.
      max_seq_length: The length to check against `max_position_embeddings`.
      with_heads: Whether the pretraining heads are needed (a `BertPretrainer` is returned).

    Returns:
      (model, load report or None for a `.keras` file).

    Raises:
      ValueError: Missing or mismatched files, as the message says; checked before the
        weights are read where the config is a separate file.
    """
    if init_checkpoint.endswith(".keras"):
        model = _load_keras_model(init_checkpoint, bert_config_file)
        check_vocab_and_length(model.config, vocab_file, max_seq_length)
        if with_heads and not isinstance(model, BertPretrainer):
            raise ValueError(f"{init_checkpoint}: a BertModel has no pretraining heads for with_heads")
        return model, None
    if not bert_config_file:
        raise ValueError("a Google checkpoint needs its bert_config_file")
    config = BertConfig.from_json_file(bert_config_file)
    check_vocab_and_length(config, vocab_file, max_seq_length)
    model = BertPretrainer(config) if with_heads else BertModel(config)
    return model, load_google_checkpoint(model, init_checkpoint)


def export_bert(
    init_checkpoint,
    bert_config_file,
    vocab_file,
    do_lower_case,
    max_seq_length,
    export_dir,
    with_heads=False,
    max_predictions_per_seq=20,
    text_signatures=True,
    version=None,
    overwrite=False,
):
    """Exports a BERT checkpoint: `serving_default`, `text`, `text_pair`, `tf_example` and,
    with heads, `pretraining`.

    Args:
      init_checkpoint, bert_config_file: As `load_bert`.
      vocab_file, do_lower_case, max_seq_length, export_dir, text_signatures, version,
        overwrite: As `export_saved_model`.
      with_heads: Whether to add the `pretraining` signature (the checkpoint must have the heads).
      max_predictions_per_seq: The `pretraining` signature's `masked_lm_positions` width.

    Returns:
      (the version directory written, the checkpoint's load report or None for `.keras`).

    Raises:
      ValueError: Bad input, before anything is written under `export_dir`.
    """
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    if max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq must be positive, got {max_predictions_per_seq}")
    check_version(export_dir, version, overwrite)
    model, report = load_bert(init_checkpoint, bert_config_file, vocab_file, max_seq_length, with_heads)
    encoder = model.bert if isinstance(model, BertPretrainer) else model
    extra = {}
    if with_heads:
        positions = tf.TensorSpec([None, max_predictions_per_seq], tf.int32, name="masked_lm_positions")
        extra[PRETRAINING_SIGNATURE] = ServedModel(
            PretrainingOutputs(model), PRETRAINING_OUTPUTS, {"masked_lm_positions": positions}
        )
    path = export_saved_model(
        encoder,
        ENCODER_OUTPUTS,
        vocab_file,
        do_lower_case,
        max_seq_length,
        export_dir,
        extra_signatures=extra,
        text_signatures=text_signatures,
        version=version,
        overwrite=overwrite,
        config=encoder.config,
    )
    return path, report
