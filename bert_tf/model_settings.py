"""`model_settings.json`: what a model directory records beside `bert_config.json` that the
original's config does not hold, so that it travels with the model: how its text is tokenized
(`do_lower_case`) and how it makes a sentence vector (`pooling`, `normalize`) of how many
WordPieces (`max_seq_length`: sentence-transformers' length, past which `encode()` cuts a text).

`bert_config.json` keeps the original's keys only (the original's code reads it). A key absent
from the file, or the file absent (Google's released directories), means "not recorded": the
tools then decide as the original does, or infer (their docs say how).

    {"do_lower_case": true, "max_seq_length": 256, "normalize": true, "pooling": "mean"}
"""

import dataclasses
import json
import os

from bert_tf import files

SETTINGS_FILE = "model_settings.json"
# sentence-transformers' pooling modes that bert_tf computes (`bert_tf.modeling.pooling`).
POOLINGS = ("cls", "mean", "max", "mean_sqrt_len_tokens")


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """A model's recorded settings (module docstring); None: not recorded.

    Attributes:
      do_lower_case: Whether its tokenizer lower-cases and strips accents.
      pooling: How its sentence vector pools the last layer (one of `POOLINGS`).
      normalize: Whether the sentence vector is scaled to unit length.
      max_seq_length: The sentence encoder's sequence length: the WordPieces, `[CLS]` and `[SEP]`
        included, past which its text is cut.
    """

    do_lower_case: bool = None
    pooling: str = None
    normalize: bool = None
    max_seq_length: int = None

    def to_dict(self):
        """The recorded keys only."""
        return {key: value for key, value in dataclasses.asdict(self).items() if value is not None}


def read_settings(directory):
    """The `ModelSettings` recorded in `directory` (all None where there is no file).

    Raises:
      ValueError: The file is not a JSON object of the known keys with values of their kinds;
        the message names the file and the key.
    """
    path = os.path.join(directory, SETTINGS_FILE)
    if not files.isfile(path):
        return ModelSettings()
    data = files.read_json(path)
    known = {field.name for field in dataclasses.fields(ModelSettings)}
    for key, value in data.items():
        if key not in known:
            raise ValueError(f"{path}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        if key == "pooling":
            if value not in POOLINGS:
                raise ValueError(f"{path}: pooling {value!r} is not one of {', '.join(POOLINGS)}")
        elif key == "max_seq_length":
            check_max_seq_length(value, path)
        elif not isinstance(value, bool):
            raise ValueError(f"{path}: {key} {value!r} is not true or false")
    return ModelSettings(**data)


def check_max_seq_length(value, where, key="max_seq_length"):
    """Raises unless `value` is a sequence length, an integer above 0.

    Args:
      value: The value read.
      where: The file it was read from, for the message.
      key: The key it was read under, for the message.

    Raises:
      ValueError: `where: key <value> is not a positive integer`.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {key} {value!r} is not a positive integer")


def write_settings(directory, settings):
    """Writes `settings`' recorded keys to `directory`/`SETTINGS_FILE` (temporary name, then
    renamed); nothing where none is recorded.

    Returns:
      The path written, or None.
    """
    data = settings.to_dict()
    if not data:
        return None
    path = os.path.join(directory, SETTINGS_FILE)
    with files.atomic_output(path) as tmp, files.open_file(tmp, "w") as writer:
        writer.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path


def copy_settings(source_dir, target_dir):
    """Writes the settings recorded in `source_dir` to `target_dir`, for a model written there
    from one read in `source_dir` (a conversion); nothing where the two are one directory or
    nothing is recorded.

    Returns:
      The path written, or None.
    """
    source_dir, target_dir = source_dir or ".", target_dir or "."
    if os.path.abspath(source_dir) == os.path.abspath(target_dir):
        return None
    return write_settings(target_dir, read_settings(source_dir))


def settings_directory(bert_config_file=None, init_checkpoint=None):
    """The directory whose settings a model's files carry: that of `bert_config_file`, else of
    `init_checkpoint` (a checkpoint prefix's, or the directory it names); None without either."""
    if bert_config_file:
        return os.path.dirname(bert_config_file) or "."
    if init_checkpoint:
        if files.isdir(init_checkpoint):
            return init_checkpoint
        return os.path.dirname(init_checkpoint) or "."
    return None
