"""`BertConfig`: the model hyperparameters, read and written as Google's `bert_config.json`."""

import copy
import difflib
import inspect
import json
import logging
import math

from bert_tf.files import atomic_output, open_file

logger = logging.getLogger(__name__)

# The activations a config may name. "gelu" is what the original code computes at HEAD (the tanh
# approximation); "gelu_exact" is the erf form the original used before 2019-02-07, which the 2018
# released checkpoints were trained with.
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
# Those the original's `modeling.get_activation` knows ("gelu_exact" is bert_tf's).
ORIGINAL_ACTIVATIONS = ("gelu", "relu", "tanh", "linear")

# Google's keys, in the order of the original `BertConfig`'s arguments (`to_dict` keeps it; the
# JSON file is written with sorted keys, as the original's).
GOOGLE_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)

# Keys of Google's released configs beyond the original code's (the multilingual and Chinese
# ones'), which no model here reads.
_RELEASED_EXTRA_KEYS = (
    "directionality",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
)


class BertConfig:
    """Configuration of a `BertModel`, with the keys and defaults of the original.

    Keys the original does not know (the multilingual and Chinese configs carry `pooler_*` and
    `directionality`) are kept in `extra` and written back unchanged.
    """

    def __init__(
        self,
        vocab_size,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=16,
        initializer_range=0.02,
        **extra,
    ):
        """Builds a config and checks it.

        Args:
          vocab_size: Size of the WordPiece vocabulary.
          hidden_size: Width H of the encoder layers and the pooler.
          num_hidden_layers: Number L of Transformer layers.
          num_attention_heads: Number A of attention heads; must divide `hidden_size`.
          intermediate_size: Width I of the feed-forward ("intermediate") layer.
          hidden_act: One of `ACTIVATIONS`, in any case ("" is "linear", as in the original).
          hidden_dropout_prob: Dropout on embeddings and on every sub-layer output.
          attention_probs_dropout_prob: Dropout on the attention probabilities.
          max_position_embeddings: Longest sequence the position table covers.
          type_vocab_size: Number of segment (token type) ids.
          initializer_range: Stddev of the truncated-normal initializer.
          **extra: Keys outside Google's set; kept and written back.

        Raises:
          ValueError: A value that cannot describe a BERT model.
        """
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        # As the original's `get_activation`: any case, and "" for linear.
        self.hidden_act = (hidden_act.lower() or "linear") if isinstance(hidden_act, str) else hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.extra = dict(extra)
        self._validate()

    def _validate(self):
        for key in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig: {key} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig: hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"BertConfig: unknown hidden_act {self.hidden_act!r}; "
                f"expected one of {', '.join(ACTIVATIONS)}"
            )
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"BertConfig: {key} must be a number, got {value!r}")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not 0.0 <= value < 1.0:  # NaN fails too
                raise ValueError(f"BertConfig: {key} must be in [0, 1), got {value!r}")
        if not 0 < self.initializer_range < math.inf:
            raise ValueError(
                f"BertConfig: initializer_range must be positive and finite, got {self.initializer_range!r}"
            )

    @property
    def attention_head_size(self):
        """Width of one attention head, H / A."""
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict with Google's keys (extra keys are kept)."""
        if "vocab_size" not in json_object:
            raise ValueError("BertConfig: the config has no 'vocab_size'")
        return cls(**json_object)

    @classmethod
    def from_json_file(cls, json_file):
        """Reads a `bert_config.json` (a local path or one like `gs://...`).

        Raises:
          ValueError: The file is missing, not JSON, or not a valid BERT config; the message
            names the file.
        """
        try:
            with open_file(json_file) as reader:
                data = json.load(reader)
        except FileNotFoundError:
            raise ValueError(f"{json_file}: no such BERT config file") from None
        except IsADirectoryError:
            raise ValueError(f"{json_file}: a directory, not a bert_config.json file") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{json_file}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{json_file}: a BERT config must be a JSON object")
        _warn_of_unusual_keys(json_file, data)
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{json_file}: {e}") from None

    def to_dict(self):
        """Google's keys, then the extra keys."""
        output = {key: getattr(self, key) for key in GOOGLE_KEYS}
        output.update(copy.deepcopy(self.extra))
        return output

    def to_json_string(self):
        """The config as JSON, formatted like the original (2-space indent, sorted keys)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file):
        """Writes the config to `json_file` atomically (temporary name, then rename)."""
        with atomic_output(json_file) as tmp, open_file(tmp, "w") as writer:
            writer.write(self.to_json_string())

    # Keras-style names, so a config can sit inside a layer's own config.
    get_config = to_dict
    from_config = from_dict

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig({self.to_dict()})"


def _warn_of_unusual_keys(json_file, data):
    """Warns of the keys a hand-written config may have wrong: one of Google's left out (the
    original's default is used, as the original does) and one nobody reads (kept, as the
    original keeps it), with the Google key it may be a misspelling of."""
    defaults = inspect.signature(BertConfig).parameters
    for key in GOOGLE_KEYS:
        if key not in data and key != "vocab_size":  # from_dict requires vocab_size
            default = defaults[key].default
            logger.warning("%s: no %r; the original's default %r is used", json_file, key, default)
    for key in data:
        if key not in GOOGLE_KEYS and key not in _RELEASED_EXTRA_KEYS:
            close = difflib.get_close_matches(key, GOOGLE_KEYS, n=1)
            hint = f" (is it {close[0]!r}?)" if close else ""
            logger.warning("%s: unknown key %r: kept, but no model reads it%s", json_file, key, hint)
