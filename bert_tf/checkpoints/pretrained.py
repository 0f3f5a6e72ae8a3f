"""The one loader of a pretrained model, for every tool: what `--init_checkpoint`,
`--bert_config_file` and `--vocab_file` mean everywhere.

`--init_checkpoint` is any of:
- a Google checkpoint: its prefix (`.../bert_model.ckpt`), its `.index` or
  `.data-00000-of-00001` file, or a directory holding one checkpoint or a `checkpoint` state
  file naming the latest (a `run_pretraining.py` or fine-tuning `--output_dir`); optimizer slots
  and `global_step` in it are skipped;
- a bert_tf model saved as `.keras` (`tools/convert_checkpoint.py --output=model.keras`).

`bert_tf.model_files.ModelFileOptions` declares these flags once for every tool.
`open_pretrained` checks the files together before any work (the config, the vocabulary against
it, the sequence length against its positions, the checkpoint's presence, completeness and
encoder shapes), so a tool fails on bad input before it writes anything. `load_weights` then
loads a checkpoint of either kind into a model built from the config.
"""

import dataclasses
import logging
import os
import zipfile

import h5py
import keras

from bert_tf import errors, files, model_settings
from bert_tf.checkpoints import parameters
from bert_tf.checkpoints.google import (
    POOLER_SCOPE,
    assign_named_values,
    check_complete,
    load_google_checkpoint,
    open_checkpoint,
    resolve_checkpoint_prefix,
)
from bert_tf.config import BertConfig
from bert_tf.modeling import BertModel, BertPretrainer
from bert_tf.text import casing, tokenization

logger = logging.getLogger(__name__)

KERAS_SUFFIX = ".keras"


def is_keras_file(init_checkpoint):
    """Whether `init_checkpoint` names a bert_tf model saved as `.keras`."""
    return init_checkpoint.endswith(KERAS_SUFFIX)


def load_keras_bert(path):
    """The bert_tf `BertModel` or `BertPretrainer` saved as a `.keras` file at `path`.

    Raises:
      ValueError: The file is missing, a directory, not a whole zip archive (where Keras would
        say it is not found), not a Keras model, another model, or holds more weights than its
        config's model (Keras would drop them); the message names it.
    """
    if not files.exists(path):
        raise ValueError(f"{path}: no such Keras model file")
    if files.isdir(path):
        raise ValueError(f"{path}: a directory, not a Keras model saved as .keras")
    with files.open_file(path, "rb") as reader:
        if not zipfile.is_zipfile(reader):
            raise ValueError(f"{path}: not a Keras model saved as .keras (not a whole zip archive)")
    try:
        model = keras.models.load_model(path)
    except (ValueError, OSError) as e:
        raise ValueError(f"{path}: not a Keras model saved as .keras ({errors.reason(e)})") from None
    if not isinstance(model, (BertModel, BertPretrainer)):
        raise ValueError(f"{path}: a {type(model).__name__}, not a bert_tf BertModel or BertPretrainer")
    stored = _stored_weight_count(path)
    if stored != len(model.weights):
        raise ValueError(
            f"{path}: its weights file holds {stored} weights, the model its config.json describes "
            f"has {len(model.weights)}: the config does not fit the weights (num_hidden_layers?)"
        )
    return model


def _stored_weight_count(path):
    """The number of model weights in the `model.weights.h5` of the `.keras` file at `path`
    (Keras' `load_model` loads the weights its config's layers name and ignores the others)."""
    arrays = []
    # h5py reads the archive's member where it lies (its metadata only), not a copy in memory.
    with (
        files.open_file(path, "rb") as reader,
        zipfile.ZipFile(reader) as archive,
        archive.open("model.weights.h5") as stored,
        h5py.File(stored, "r") as weights,
    ):
        weights.visititems(lambda name, item: arrays.append(name) if isinstance(item, h5py.Dataset) else None)
    return sum(1 for name in arrays if name.split("/")[0] != "optimizer")


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
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length {max_seq_length} is above the model's max_position_embeddings "
            f"({config.max_position_embeddings})"
        )


def _check_encoder_shapes(where, shapes, config):
    """Raises unless the checkpoint's `bert/` variables are the config's encoder, by name and shape
    (the pooler may be left out as a whole: `load_google_checkpoint`)."""
    expected = dict(parameters.variable_shapes(config, with_heads=False))
    found = {name: tuple(shape) for name, shape in shapes.items() if name.startswith("bert/")}
    # A training checkpoint's optimizer slots (`<weight>/adam_m`, ...) are named below a weight.
    found = {name: shape for name, shape in found.items() if name.rsplit("/", 1)[0] not in found}
    if not set(expected) & set(found):
        sample = ", ".join(sorted(shapes)[:3]) or "no variables"
        raise ValueError(f"{where}: not a BERT checkpoint (no bert/ encoder variables; it holds {sample})")
    problems = [
        f"{name}: checkpoint {list(found[name])}, config {list(shape)}"
        for name, shape in expected.items()
        if name in found and found[name] != shape
    ]
    missing = sorted(set(expected) - set(found))
    # The pooler may be left out as a whole (it loads with a warning).
    if not any(name.startswith(POOLER_SCOPE) for name in found):
        missing = [name for name in missing if not name.startswith(POOLER_SCOPE)]
    extra = sorted(set(found) - set(expected))
    if missing:
        problems.append(
            f"{len(missing)} encoder variables are not in the checkpoint ({', '.join(missing[:3])})"
        )
    if extra:
        problems.append(
            f"{len(extra)} of its encoder variables are not in the config's model ({', '.join(extra[:3])})"
        )
    if problems:
        raise ValueError(
            f"{where}: does not fit --bert_config_file: " + "; ".join(problems[:3]) + ". Is the "
            "bert_config.json that of this checkpoint (hidden_size, num_hidden_layers, vocab_size)?"
        )


@dataclasses.dataclass
class Pretrained:
    """A pretrained model's files, checked together (`open_pretrained`).

    Attributes:
      config: The model's `BertConfig`.
      vocab_file: Its vocabulary (None where a tool needs none).
      do_lower_case: Whether its tokenizer lower-cases.
      init_checkpoint: Its weights, as given (a Google checkpoint or a `.keras` file), or None.
      keras_model: The model of a `.keras` `init_checkpoint`, as loaded; else None.
    """

    config: BertConfig
    vocab_file: str = None
    do_lower_case: bool = None
    init_checkpoint: str = None
    keras_model: object = dataclasses.field(default=None, repr=False)

    def tokenizer(self):
        """The original's `FullTokenizer` of the vocabulary and case."""
        return tokenization.FullTokenizer(self.vocab_file, self.do_lower_case)

    def model(self, with_heads=False):
        """The pretrained model itself, with its weights: a `BertModel`, or with `with_heads` a
        `BertPretrainer` (a `.keras` file's model as saved).

        Returns:
          (model, the load report, or None for a `.keras` file).

        Raises:
          ValueError: The checkpoint lacks what is asked for.
        """
        if self.keras_model is not None:
            if with_heads and not isinstance(self.keras_model, BertPretrainer):
                raise ValueError(
                    f"{self.init_checkpoint}: a BertModel has no pretraining heads for with_heads"
                )
            return self.keras_model, None
        model = BertPretrainer(self.config) if with_heads else BertModel(self.config)
        return model, load_google_checkpoint(model, self.init_checkpoint)


def open_pretrained(
    bert_config_file,
    vocab_file=None,
    do_lower_case=None,
    init_checkpoint=None,
    max_seq_length=None,
    force_do_lower_case=False,
):
    """Reads a pretrained model's config and checks its files together, before any work:
    `do_lower_case` against a released checkpoint's name first, as the original does; with a
    vocabulary, the casing last (`bert_tf.text.casing`: the flag, else the one recorded beside
    the model, else the vocabulary's).

    Args:
      bert_config_file: The model's `bert_config.json`; None for a `.keras` `init_checkpoint`,
        whose own config is used (given, it must equal that one).
      vocab_file: Its vocabulary, checked against `vocab_size` (None: no check, and the tool
        tokenizes nothing: `do_lower_case` is kept as given).
      do_lower_case: The `--do_lower_case` flag: True, False, or None where not given.
      init_checkpoint: Its weights (module docstring), or None (a model trained from scratch).
      max_seq_length: The sequence length the tool uses, checked against
        `max_position_embeddings` (None: no check).
      force_do_lower_case: Take `do_lower_case` as given, unchecked against the record and the
        vocabulary (`--force_do_lower_case`).

    Returns:
      A `Pretrained`.

    Raises:
      ValueError: A file missing, unreadable or truncated, or not fitting the others; the
        message names the flag or file.
    """
    if do_lower_case is not None:
        tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    config, keras_model = None, None
    if bert_config_file:
        if not files.isfile(bert_config_file):
            raise ValueError(f"--bert_config_file: {bert_config_file}: no such file")
        config = BertConfig.from_json_file(bert_config_file)
    if init_checkpoint and is_keras_file(init_checkpoint):
        keras_model = load_keras_bert(init_checkpoint)
        if config is not None and config != keras_model.config:
            raise ValueError(f"{bert_config_file}: does not describe the model in {init_checkpoint}")
        config = keras_model.config
    elif init_checkpoint:
        if config is None:
            raise ValueError(
                f"--init_checkpoint={init_checkpoint}: a Google checkpoint needs --bert_config_file"
            )
        prefix = resolve_checkpoint_prefix(init_checkpoint)
        if do_lower_case is not None:  # a directory names the released model by its prefix
            tokenization.validate_case_matches_checkpoint(do_lower_case, prefix)
        reader = open_checkpoint(prefix)
        check_complete(prefix, reader)
        _check_encoder_shapes(prefix, reader.get_variable_to_shape_map(), config)
    if config is None:
        raise ValueError("--bert_config_file is required")
    if vocab_file:
        if not files.isfile(vocab_file):
            raise ValueError(f"--vocab_file: {vocab_file}: no such file")
        try:
            check_vocab_and_length(config, vocab_file, max_seq_length)
        except ValueError as e:
            raise ValueError(f"--vocab_file/--max_seq_length: {e}") from None
        do_lower_case = _resolve_casing(
            bert_config_file, vocab_file, do_lower_case, init_checkpoint, force_do_lower_case
        )
    elif max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max_seq_length={max_seq_length} is longer than the config's max_position_embeddings "
            f"({config.max_position_embeddings})"
        )
    return Pretrained(config, vocab_file, do_lower_case, init_checkpoint, keras_model)


def _resolve_casing(bert_config_file, vocab_file, do_lower_case, init_checkpoint, force):
    """`casing.resolve_do_lower_case` with the setting recorded in the model's directory."""
    directory = model_settings.settings_directory(bert_config_file, init_checkpoint)
    recorded = model_settings.read_settings(directory).do_lower_case if directory else None
    record = os.path.join(directory, model_settings.SETTINGS_FILE) if directory else None
    prefix = None
    if init_checkpoint and not is_keras_file(init_checkpoint):
        prefix = resolve_checkpoint_prefix(init_checkpoint)
    return casing.resolve_do_lower_case(do_lower_case, vocab_file, recorded, record, prefix, force)


def load_weights(model, init_checkpoint, strict=False, allow_unused=True):
    """Loads the weights of `init_checkpoint` (module docstring) into `model`, by their names.

    Args:
      model: A bert_tf model (its weight paths are Google names), e.g. a task's model whose
        head the checkpoint lacks.
      init_checkpoint: A Google checkpoint or a `.keras` file.
      strict, allow_unused: As `bert_tf.checkpoints.load_google_checkpoint`'s.

    Returns:
      A `LoadReport`.

    Raises:
      ValueError: As `load_google_checkpoint`; nothing is loaded then.
    """
    if not is_keras_file(init_checkpoint):
        return load_google_checkpoint(model, init_checkpoint, strict=strict, allow_unused=allow_unused)
    values = {weight.path: weight.numpy() for weight in load_keras_bert(init_checkpoint).weights}
    shapes = {name: list(value.shape) for name, value in values.items()}
    return assign_named_values(model, init_checkpoint, shapes, values.__getitem__, strict, allow_unused)
