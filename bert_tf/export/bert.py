"""`BertModel` and `BertPretrainer` as users of the export module: loading, checks, signatures."""

import dataclasses
import logging
import os

import keras
import tensorflow as tf

from bert_tf.checkpoints.pretrained import open_pretrained
from bert_tf.export.module import (
    MAX_WINDOWED_TOKENS,
    WINDOW_BATCH_SIZE,
    ServedModel,
    after_checks,
    export_saved_model,
)
from bert_tf.export.versioning import check_version
from bert_tf.model_files import ModelFileOptions
from bert_tf.model_settings import POOLINGS, SETTINGS_FILE, read_settings, settings_directory
from bert_tf.modeling import BertPretrainer, BertSentenceEncoder
from bert_tf.options import option, redefine
from bert_tf.text.windows import WindowOptions

ENCODER_OUTPUTS = ("sequence_output", "pooled_output")
SENTENCE_OUTPUT = "sentence_embedding"
# --pooling's value for no sentence_embedding, whatever pooling the model records.
NO_POOLING = "none"
PRETRAINING_OUTPUTS = ("masked_lm_log_probs", "next_sentence_log_probs")
PRETRAINING_SIGNATURE = "pretraining"
# Without --max_seq_length or a recorded one: the length the other tools default to.
DEFAULT_MAX_SEQ_LENGTH = ModelFileOptions.max_seq_length

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


def resolve_pooling(pooling, normalize, recorded):
    """The sentence vector an export adds: the `--pooling` and `--normalize` flags, else the
    model's recorded settings (`model_settings.json`); logged.

    Args:
      pooling: The flag: one of `POOLINGS`, `NO_POOLING` (no `sentence_embedding`, whatever is
        recorded), or None (not given: the recorded pooling, if any).
      normalize: The flag: True, False, or None (not given: the recorded setting, else False).
      recorded: The model's `ModelSettings` (`read_settings`).

    Returns:
      (one of `POOLINGS`, or None for no `sentence_embedding`; whether it is normalized).

    Raises:
      ValueError: An unknown pooling, or `normalize` true without a pooling (`NO_POOLING`, or
        none given or recorded); the message names the flag.
    """
    if pooling is not None and pooling not in (*POOLINGS, NO_POOLING):
        raise ValueError(f"--pooling: expected one of {', '.join(POOLINGS)} or {NO_POOLING}, got {pooling!r}")
    if pooling == NO_POOLING:
        if normalize:
            raise ValueError(f"--normalize needs a pooling, not --pooling={NO_POOLING}")
        logger.info("no sentence_embedding (--pooling=%s)", NO_POOLING)
        return None, False
    pooling = recorded.pooling if pooling is None else pooling
    normalize = bool(recorded.normalize if normalize is None else normalize)
    if normalize and pooling is None:
        raise ValueError("--normalize needs --pooling (the model records no pooling)")
    if pooling is not None:
        logger.info("sentence_embedding: %s pooling%s", pooling, ", normalized" if normalize else "")
    return pooling, normalize


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
    text_tokens=False,
    doc_stride=None,
    window_batch_size=WINDOW_BATCH_SIZE,
    max_windowed_tokens=MAX_WINDOWED_TOKENS,
    force_do_lower_case=False,
    pooling=None,
    normalize=None,
    pack_tokens=True,
):
    """Exports a BERT checkpoint: `serving_default`, `text`, `text_pair`, `tf_example`, with
    heads `pretraining`, and with `doc_stride` `text_windowed`. With a pooling (given, or
    recorded in the model's `model_settings.json`) they also return `sentence_embedding`
    [batch, H], the last layer pooled as `BertSentenceEncoder` pools it.

    Args:
      init_checkpoint, bert_config_file: The model (`bert_tf.checkpoints.pretrained`; the
        config is optional for a `.keras` file).
      vocab_file, do_lower_case, export_dir, text_signatures, version, overwrite, text_tokens,
        doc_stride, window_batch_size, max_windowed_tokens, pack_tokens: As `export_saved_model`
        (`do_lower_case` None: resolved by `open_pretrained`).
      max_seq_length: As `export_saved_model`; None for the model's recorded one (a sentence
        encoder's, `model_settings.json`), else `DEFAULT_MAX_SEQ_LENGTH`.
      force_do_lower_case: As `open_pretrained`'s.
      with_heads: Whether to add the `pretraining` signature (the checkpoint must have the heads).
      max_predictions_per_seq: The `pretraining` signature's `masked_lm_positions` width.
      pooling, normalize: The `--pooling` and `--normalize` flags, resolved against the
        settings recorded beside the model by `resolve_pooling`.

    Returns:
      (the version directory written, the checkpoint's load report or None for `.keras`).

    Raises:
      ValueError: Bad input, before anything is written under `export_dir`.
    """
    if max_predictions_per_seq < 1:
        raise ValueError(f"max_predictions_per_seq must be positive, got {max_predictions_per_seq}")
    if not init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    directory = settings_directory(bert_config_file, init_checkpoint)
    recorded = read_settings(directory)
    pooling, normalize = resolve_pooling(pooling, normalize, recorded)
    if max_seq_length is not None:
        logger.info("max_seq_length=%d (given)", max_seq_length)
    elif recorded.max_seq_length is not None:
        max_seq_length = recorded.max_seq_length
        logger.info(
            "max_seq_length=%d (recorded in %s)", max_seq_length, os.path.join(directory, SETTINGS_FILE)
        )
    else:
        max_seq_length = DEFAULT_MAX_SEQ_LENGTH
        logger.info("max_seq_length=%d (the default: none given or recorded)", max_seq_length)
    pretrained = open_pretrained(
        bert_config_file, vocab_file, do_lower_case, init_checkpoint, max_seq_length, force_do_lower_case
    )
    check_version(export_dir, version, overwrite)
    model, report = pretrained.model(with_heads)
    encoder = model.bert if isinstance(model, BertPretrainer) else model
    served, outputs = encoder, ENCODER_OUTPUTS
    if pooling is not None:
        served = BertSentenceEncoder(encoder.config, pooling, normalize, bert=encoder)
        outputs = (*ENCODER_OUTPUTS, SENTENCE_OUTPUT)
    extra = {}
    if with_heads:
        positions = tf.TensorSpec([None, max_predictions_per_seq], tf.int32, name="masked_lm_positions")
        extra[PRETRAINING_SIGNATURE] = ServedModel(
            PretrainingOutputs(model), PRETRAINING_OUTPUTS, {"masked_lm_positions": positions}
        )
    path = export_saved_model(
        served,
        outputs,
        vocab_file,
        pretrained.do_lower_case,
        max_seq_length,
        export_dir,
        extra_signatures=extra,
        text_signatures=text_signatures,
        version=version,
        overwrite=overwrite,
        config=encoder.config,
        text_tokens=text_tokens,
        doc_stride=doc_stride,
        window_batch_size=window_batch_size,
        max_windowed_tokens=max_windowed_tokens,
        pack_tokens=pack_tokens,
    )
    return path, report


@dataclasses.dataclass
class SentenceVectorOptions:
    """`--pooling` and `--normalize`, the flags of every export that can add `sentence_embedding`
    (mixed into their options; resolved against the model's settings by `resolve_pooling`)."""

    pooling: str = option(
        None,
        f"The export also returns sentence_embedding, the last layer pooled over the real tokens "
        f"as sentence-transformers pools it: one of {', '.join(POOLINGS)}; {NO_POOLING}: no "
        "sentence_embedding, whatever the model records (default: the pooling recorded in "
        "model_settings.json beside the model, e.g. by convert_checkpoint.py --hf_model; none "
        "recorded: no sentence_embedding).",
    )
    normalize: bool = option(
        None,
        "Scale sentence_embedding to unit length (default: as recorded in model_settings.json, else "
        f"false; refused with --pooling={NO_POOLING}).",
    )


@dataclasses.dataclass
class ExportOptions(ModelFileOptions, WindowOptions, SentenceVectorOptions):
    """The flags of `tools/export_saved_model.py`: the model's files, then the export's."""

    init_checkpoint: str = redefine(ModelFileOptions, "init_checkpoint", required=True)
    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    max_seq_length: int = redefine(
        ModelFileOptions,
        "max_seq_length",
        default=None,
        help="Tokens per sequence after WordPiece, [CLS] and [SEP] included; longer inputs are truncated "
        "(or read as windows), shorter ones padded (default: the max_seq_length recorded in "
        "model_settings.json beside the model, a sentence encoder's by convert_checkpoint.py --hf_model; "
        f"else {DEFAULT_MAX_SEQ_LENGTH}).",
    )
    export_dir: str = option(None, "Model base directory (TF Serving's --model_base_path).", required=True)
    with_heads: bool = option(False, "Add the `pretraining` signature (masked LM and next sentence).")
    max_predictions_per_seq: int = option(20, "Width of masked_lm_positions in `pretraining`.")
    text_signatures: bool = option(
        True, "Export `text` and `text_pair` (their ops come from tensorflow-text)."
    )
    text_tokens: bool = option(
        False,
        "`text` and `text_pair` also return tokens, start_offsets, end_offsets (UTF-8 bytes into "
        "the request's text, -1 for [CLS], [SEP], padding) and segment_ids.",
    )
    window_batch_size: int = option(
        WINDOW_BATCH_SIZE,
        "With --doc_stride: how many windows `text_windowed` runs through the model at a time.",
    )
    max_windowed_tokens: int = option(
        MAX_WINDOWED_TOKENS,
        "With --doc_stride: the largest `text_windowed` request, texts x (longest text's WordPieces + 2); "
        "a larger one is refused (INVALID_ARGUMENT).",
    )
    pack_tokens: bool = option(
        True,
        "Run the dense layers on the real tokens only, skipping the padding of a request's shorter "
        "texts (their outputs at the padding are zeros; false: the original's values there).",
    )
    version: int = option(None, "Version to write (default: one above the highest existing).")
    overwrite: bool = option(False, "Replace the version if it exists.")


def run_export(options):
    """`export_bert` of `ExportOptions` (`tools/export_saved_model.py`); prints what it wrote.

    Returns:
      The version directory written.
    """
    path, report = export_bert(
        options.init_checkpoint,
        options.bert_config_file,
        options.vocab_file,
        options.do_lower_case,
        options.max_seq_length,
        options.export_dir,
        with_heads=options.with_heads,
        max_predictions_per_seq=options.max_predictions_per_seq,
        text_signatures=options.text_signatures,
        version=options.version,
        overwrite=options.overwrite,
        text_tokens=options.text_tokens,
        doc_stride=options.doc_stride,
        window_batch_size=options.window_batch_size,
        max_windowed_tokens=options.max_windowed_tokens,
        force_do_lower_case=options.force_do_lower_case,
        pooling=options.pooling,
        normalize=options.normalize,
        pack_tokens=options.pack_tokens,
    )
    if report is not None:
        print(report)
    print(f"Exported {path}")
    return path
