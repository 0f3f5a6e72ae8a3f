"""Hugging Face BERT model directories in and out: `read_hf_model` reads one into a `BertConfig`,
the weights under the original's names, the tokenizer's settings and the labels;
`write_hf_model` writes them back as `save_pretrained` would.

A directory is read as transformers writes it: `config.json`; `model.safetensors`, or its
shards listed by `model.safetensors.index.json` (`pytorch_model.bin` only through torch, when
it is installed, unpickled with `weights_only=True`); `vocab.txt`, or `tokenizer.json`'s
WordPiece vocabulary; `tokenizer_config.json`; sentence-transformers' `modules.json`, the
`Pooling` module it lists (`read_sentence_modules`) and `sentence_bert_config.json`
(`read_sentence_length`, `read_sentence_lower_case`). Other files are not read.

Names: HF's `bert.encoder.layer.0.attention.self.query.weight` is the original's
`bert/encoder/layer_0/attention/self/query/kernel`, transposed (a torch `Linear` holds
[out, in], a TF1 dense kernel [in, out]); `LayerNorm.weight`/`.bias` are `gamma`/`beta`; an
embedding table is the same array. The pretraining heads keep the original's names,
`cls/predictions/*` and `cls/seq_relationship/*` (whose `[2, H]` weights are [out, in] on both
sides); a fine-tuning head's output layer takes the Google and HF names of its entry in
`bert_tf.modeling.head_table.HEADS` (transformers' `BertForSequenceClassification` is the
classifier, or the regressor where its problem is a regression).

Only what the original's model and tokenizer compute is read: anything else (another
`model_type`, relative positions, another layer-norm epsilon, a tokenizer other than WordPiece)
is an error naming the file and key.
"""

import dataclasses
import json
import logging
import os
import re

import ml_dtypes  # noqa: F401 (NumPy's bfloat16, for safetensors' bfloat16 tensors; TensorFlow's dependency)
import numpy as np
import safetensors
import safetensors.numpy

from bert_tf import files
from bert_tf.checkpoints import parameters
from bert_tf.checkpoints.google import POOLER_SCOPE
from bert_tf.config import GOOGLE_KEYS, BertConfig
from bert_tf.model_settings import POOLINGS, check_max_seq_length
from bert_tf.modeling.head_table import HEADS, head_named, head_of_checkpoint
from bert_tf.modeling.layer_norm import EPSILON
from bert_tf.text import tokenization

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_FILE = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"

# HF's `hidden_act` -> bert_tf's: HF's "gelu" is the erf form, its "gelu_new" and
# "gelu_pytorch_tanh" the original code's tanh form.
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}
# bert_tf's -> HF's.
GOOGLE_ACTIVATIONS = {
    "gelu_exact": "gelu",
    "gelu": "gelu_new",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# transformers 5's defaults (its `BertConfig` and `PreTrainedConfig`) of the `config.json` keys
# read here, used for a key the file leaves out: `save_pretrained` writes no `id2label` for the
# default two labels, and a hand-written file may name fewer keys. Without `id2label` there are
# `num_labels` labels named `LABEL_<id>`, as transformers names them.
HF_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": EPSILON,
    "num_labels": 2,
}

_PRETRAINING_HEAD = ("cls/predictions", "cls/seq_relationship")
_MASKED_LM_HEAD = ("cls/predictions",)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """A transformers BERT class and what of the original's checkpoint it holds.

    Attributes:
      pooler: Whether transformers builds it with the pooler.
      heads: The original's pretraining head scopes it has (`cls/predictions`, ...).
    """

    pooler: bool
    heads: tuple = ()


# The classes without a fine-tuning head, then those of the heads' table.
ARCHITECTURES = {
    "BertModel": Architecture(pooler=True),
    "BertForPreTraining": Architecture(pooler=True, heads=_PRETRAINING_HEAD),
    "BertForMaskedLM": Architecture(pooler=False, heads=_MASKED_LM_HEAD),
    **{head.hf_architecture: Architecture(pooler=head.hf_pooler) for head in HEADS},
}


def _hf_encoder_name(google_name):
    """The HF name of a `bert/` or `cls/` weight of the original, and whether it is transposed."""
    if google_name == "cls/predictions/output_bias":
        return "cls.predictions.bias", False
    name = re.sub(r"layer_(\d+)", r"layer.\1", google_name).replace("/", ".")
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    if name.endswith(".kernel"):
        return name[: -len(".kernel")] + ".weight", True
    if name.endswith("_embeddings"):
        return name + ".weight", False
    # cls/seq_relationship/output_weights: [2, H], [out, in] in both.
    return name.replace("output_weights", "weight").replace("output_bias", "bias"), False


def name_map(config, architecture, pooler=None, head=None):
    """The original's names of a model of `architecture` and their HF names.

    Args:
      config: The `BertConfig`.
      architecture: A key of `ARCHITECTURES`.
      pooler: Whether the pooler is included (None: as transformers builds the architecture).
      head: The fine-tuning `Head` of the model (`bert_tf.modeling.head_table`), or None.

    Returns:
      A list of `(google_name, hf_name, transposed)` in the original's order.
    """
    spec = ARCHITECTURES[architecture]
    pooler = spec.pooler if pooler is None else pooler
    names = [name for name, _ in parameters.variable_shapes(config, with_heads=bool(spec.heads))]
    names = [
        name
        for name in names
        if (pooler or not name.startswith(POOLER_SCOPE))
        and (name.startswith("bert/") or name.startswith(tuple(h + "/" for h in spec.heads)))
    ]
    rows = [(name, *_hf_encoder_name(name)) for name in names]
    if head is not None:  # [width, H] is [out, in] on both sides
        weights, bias = head.variable_names()
        rows += [(weights, f"{head.hf_module}.weight", False), (bias, f"{head.hf_module}.bias", False)]
    return rows


@dataclasses.dataclass
class HfModel:
    """A BERT in the original's terms, as read from (or written to) an HF directory.

    Attributes:
      config: The `BertConfig` (the original's keys only).
      architecture: A key of `ARCHITECTURES`.
      weights: The original's name -> float32 array, in the original's order.
      vocab: The WordPiece tokens in id order.
      do_lower_case: The original tokenizer's setting that reproduces HF's tokenizer (and
        sentence-transformers' lower-casing before it, `read_sentence_lower_case`).
      labels: The task head's labels in id order (`id2label`), or None.
      unused: HF tensors not converted (e.g. `embeddings.position_ids`), sorted.
      head: The fine-tuning `Head` (`bert_tf.modeling.head_table`), or None.
      pooling: The sentence vector's pooling of the last layer (`read_sentence_modules`), or None.
      normalize: Whether the sentence vector is scaled to unit length, or None.
      max_seq_length: The sentence encoder's sequence length (`read_sentence_length`), or None
        (no pooling).
    """

    config: BertConfig
    architecture: str
    weights: dict
    vocab: list
    do_lower_case: bool
    labels: list = None
    unused: list = dataclasses.field(default_factory=list)
    head: object = None
    pooling: str = None
    normalize: bool = None
    max_seq_length: int = None


def read_hf_config(directory):
    """Reads `config.json` into the original's config, the architecture, its fine-tuning head and
    the labels, a key left out taking transformers' default (`HF_DEFAULTS`).

    Returns:
      `(config, architecture, head or None, labels or None)`.

    Raises:
      ValueError: The file is missing, or describes what the original's model does not compute;
        the message names the file and the key.
    """
    path = os.path.join(directory, CONFIG_FILE)
    if not files.isfile(path):
        raise ValueError(f"{directory}: no {CONFIG_FILE} (not a Hugging Face model directory)")
    data = {**HF_DEFAULTS, **files.read_json(path)}

    def refuse(key, why):
        raise ValueError(f"{path}: {key} {data.get(key)!r} {why}")

    if data.get("model_type") != "bert":
        refuse("model_type", "is not supported: only 'bert' (the original's BERT) converts")
    if data.get("position_embedding_type", "absolute") != "absolute":
        refuse(
            "position_embedding_type", "is not supported: the original's model has 'absolute' positions only"
        )
    if data["layer_norm_eps"] != EPSILON:
        refuse("layer_norm_eps", f"is not supported: the original's model uses {EPSILON:g}")
    for key in ("is_decoder", "add_cross_attention"):
        if data.get(key):
            refuse(key, "is not supported: the original's BERT is an encoder only")
    if data.get("hidden_act") not in HF_ACTIVATIONS:
        refuse("hidden_act", f"is not supported: the original's model computes {', '.join(HF_ACTIVATIONS)}")
    architectures = data.get("architectures") or ["BertModel"]
    if len(architectures) != 1 or architectures[0] not in ARCHITECTURES:
        refuse("architectures", f"is not supported: one of {', '.join(ARCHITECTURES)}")
    architecture = architectures[0]
    google = {key: data[key] for key in GOOGLE_KEYS if key != "hidden_act"}
    try:
        config = BertConfig(**google, hidden_act=HF_ACTIVATIONS[data["hidden_act"]])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    labels = None
    id2label = data.get("id2label")
    if id2label is None:  # (null as transformers reads it: the default)
        num_labels = data["num_labels"]
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            refuse("num_labels", "must be a positive integer")
        id2label = {str(i): f"LABEL_{i}" for i in range(num_labels)}
    try:
        head = head_named(
            architecture, data.get("problem_type"), len(id2label) if isinstance(id2label, dict) else None
        )
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if head is not None and head.labels:
        if not isinstance(id2label, dict) or not id2label:
            refuse("id2label", f"must name the labels of a {architecture}")
        try:
            ids = sorted(int(key) for key in id2label)
        except ValueError:
            refuse("id2label", "must be keyed by the ids 0, 1, ...")
        if ids != list(range(len(ids))):
            refuse("id2label", "must be keyed by the ids 0, 1, ...")
        labels = [str(id2label[str(i)] if str(i) in id2label else id2label[i]) for i in ids]
    return config, architecture, head, labels


class _Tensors:
    """The tensors of an HF directory's weight files by name, read one at a time: the first of
    `model.safetensors`, its index's shards, `pytorch_model.bin` and its index's shards."""

    def __init__(self, directory):
        self.files = {}  # tensor name -> its file
        self._readers = {}  # file -> its reader
        found = [
            name
            for name in (SAFETENSORS_FILE, SAFETENSORS_INDEX, PYTORCH_FILE, PYTORCH_INDEX)
            if files.isfile(os.path.join(directory, name))
        ]
        if not found:
            raise ValueError(
                f"{directory}: no weights ({SAFETENSORS_FILE}, {SAFETENSORS_INDEX} or {PYTORCH_FILE})"
            )
        weight_files = [found[0]]
        if found[0].endswith(".index.json"):
            path = os.path.join(directory, found[0])
            weight_map = files.read_json(path).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise ValueError(f"{path}: weight_map must map tensor names to files")
            weight_files = sorted(set(weight_map.values()))
        for name in weight_files:
            path = os.path.join(directory, name)
            if not files.isfile(path):
                raise ValueError(f"{path}: no such weight file")
            reader = _TorchFile(path) if path.endswith(".bin") else _SafetensorsFile(path)
            self._readers[path] = reader
            for key in reader.names:
                if key in self.files:
                    raise ValueError(f"{path}: tensor {key} is also in {self.files[key]}")
                self.files[key] = path

    def read(self, name):
        """The tensor `name` as a NumPy array."""
        return self._readers[self.files[name]].read(name)


class _SafetensorsFile:
    """A safetensors file, opened for each tensor read: a file kept open keeps the pages of every
    tensor read so far resident (it is memory-mapped), beside their copies."""

    def __init__(self, path):
        self.path = path
        with self._open() as reader:
            self.names = list(reader.keys())

    def _open(self):
        try:
            return safetensors.safe_open(self.path, framework="numpy")
        except Exception as e:  # safetensors' own error types
            raise ValueError(f"{self.path}: not a readable safetensors file ({e})") from None

    def read(self, name):
        with self._open() as reader:
            return reader.get_tensor(name)


class _TorchFile:
    """A `pytorch_model.bin`, read with torch where it is installed."""

    def __init__(self, path):
        try:
            import torch
        except ImportError:
            raise ValueError(
                f"{path}: a pytorch_model.bin is read with torch, which is not installed; a "
                f"safetensors copy ({SAFETENSORS_FILE}) converts without it"
            ) from None
        try:
            # A pickle from the internet: tensors and containers only, never code.
            self._state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises anything its unpickler meets
            raise ValueError(f"{path}: cannot read it with torch.load(weights_only=True) ({e})") from None
        self.names = list(self._state)

    def read(self, name):
        return self._state[name].float().numpy()


def _hf_weights(directory, config, architecture, head):
    """The original's weights of the HF model in `directory` (`name_map`), and the HF tensors
    left over."""
    tensors = _Tensors(directory)
    names = dict.fromkeys(tensors.files)
    # A BertModel is saved without the `bert.` its heads' classes put before its names.
    prefix = "" if any(name.startswith("bert.") for name in names) else "bert."
    # Models saved before transformers 4.x name a layer norm's scale and offset gamma and beta.
    aliases = {}
    for name in names:
        renamed = prefix + name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        aliases[renamed] = name
    has_pooler = "bert.pooler.dense.weight" in aliases or "bert.pooler.dense.bias" in aliases
    weights = {}
    for google_name, hf_name, transposed in name_map(config, architecture, has_pooler, head):
        if hf_name not in aliases:
            raise ValueError(f"{directory}: the {architecture} has no tensor {hf_name.removeprefix(prefix)}")
        source = aliases.pop(hf_name)
        value = np.asarray(tensors.read(source))
        value = value.T if transposed else value
        want = dict(parameters.variable_shapes(config)).get(google_name)
        if want is not None and tuple(value.shape) != want:
            raise ValueError(
                f"{tensors.files[source]}: {source} has shape {list(value.shape)}, the config's model "
                f"{list(want[::-1] if transposed else want)}"
            )
        weights[google_name] = np.ascontiguousarray(value, dtype=np.float32)
    # The MLM decoder is the word embedding table, as in the original; its bias the head's.
    tied = {"cls.predictions.decoder.weight": "bert/embeddings/word_embeddings"}
    tied["cls.predictions.decoder.bias"] = "cls/predictions/output_bias"
    for hf_name, google_name in tied.items():
        if hf_name in aliases and google_name in weights:
            source = aliases.pop(hf_name)
            if not np.array_equal(np.asarray(tensors.read(source), np.float32), weights[google_name]):
                raise ValueError(
                    f"{tensors.files[source]}: {source} differs from {google_name}'s tensor; the "
                    "original's masked LM head uses the word embeddings (and the head's bias) itself"
                )
    return weights, sorted(aliases.values())


def _tokenizer_settings(directory, sentence_lower_case=False):
    """The vocabulary in id order and `do_lower_case` (module docstring; warns of what the
    original's tokenizer does differently).

    Args:
      directory: The model directory.
      sentence_lower_case: Whether sentence-transformers lower-cases the text before the
        tokenizer (`read_sentence_lower_case`): a tokenizer that keeps case is then uncased.

    Returns:
      `(vocab, do_lower_case)`.
    """
    vocab_path = os.path.join(directory, VOCAB_FILE)
    tokenizer_path = os.path.join(directory, TOKENIZER_FILE)
    config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    tokenizer_config = files.read_json(config_path) if files.isfile(config_path) else {}
    tokenizer = files.read_json(tokenizer_path) if files.isfile(tokenizer_path) else None
    normalizer = {}
    if tokenizer is not None:
        model = tokenizer.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ValueError(
                f"{tokenizer_path}: model.type {model.get('type')!r} is not supported: the original's "
                "tokenizer is WordPiece"
            )
        if model.get("continuing_subword_prefix", "##") != "##":
            raise ValueError(
                f"{tokenizer_path}: model.continuing_subword_prefix "
                f"{model['continuing_subword_prefix']!r} is not supported: the original's is '##'"
            )
        normalizer = tokenizer.get("normalizer") or {}
    if files.isfile(vocab_path):
        vocab = read_vocab_tokens(vocab_path)
    elif tokenizer is not None:
        token_ids = tokenizer["model"].get("vocab") or {}
        if not isinstance(token_ids, dict) or not token_ids:
            raise ValueError(f"{tokenizer_path}: model.vocab must map the tokens to their ids")
        vocab = _tokens_by_id(token_ids)
    else:
        raise ValueError(
            f"{directory}: no {VOCAB_FILE} or {TOKENIZER_FILE}: the original's tokenizer needs a "
            "WordPiece vocabulary"
        )
    if "do_lower_case" in tokenizer_config:
        do_lower_case, where = bool(tokenizer_config["do_lower_case"]), f"{config_path}: do_lower_case"
        strip_accents = tokenizer_config.get("strip_accents")
    elif "lowercase" in normalizer:
        do_lower_case, where = bool(normalizer["lowercase"]), f"{tokenizer_path}: normalizer.lowercase"
        strip_accents = normalizer.get("strip_accents")
        if not do_lower_case:
            # transformers 5 builds BertTokenizer's normalizer from its own arguments, whose
            # do_lower_case defaults to true, not from tokenizer.json's (checked with 5.23).
            logger.warning(
                "%s is false and %s gives no do_lower_case: recorded as cased, as tokenizer.json "
                "says, but transformers 5's BertTokenizer lower-cases this model (its default); "
                "give the other tools --do_lower_case=true to follow it",
                where,
                TOKENIZER_CONFIG_FILE,
            )
    else:
        do_lower_case, where, strip_accents = True, None, None
        logger.warning(
            "%s: neither %s nor %s says whether the tokenizer lower-cases: BertTokenizer's "
            "default, do_lower_case=true, is taken",
            directory,
            TOKENIZER_CONFIG_FILE,
            TOKENIZER_FILE,
        )
    if sentence_lower_case and not do_lower_case:
        # HF's strip_accents None follows the tokenizer's own lowercase, false here: the accents
        # stay unless strip_accents is true.
        sentence_path = os.path.join(directory, SENTENCE_CONFIG_FILE)
        if strip_accents:
            logger.info(
                "%s: do_lower_case is true and the tokenizer strips accents: recorded as uncased",
                sentence_path,
            )
        else:
            logger.warning(
                "%s: do_lower_case is true, so the tokenizer (%s false) reads lower-cased text: "
                "recorded as uncased, do_lower_case=true, but the original BERT's lower-casing also "
                "strips accents, which sentence-transformers' (str.lower(); in 6.2 a Lowercase "
                "normalizer) does not, so accented letters (é, ü, ñ) tokenize differently",
                sentence_path,
                where,
            )
        return vocab, True
    # HF's strip_accents None follows lowercase, as the original's do_lower_case does both.
    if strip_accents is not None and bool(strip_accents) != do_lower_case:
        logger.warning(
            "%s is %s but strip_accents is %s: the original's do_lower_case=%s %s accents, so "
            "accented letters (é, ü, ñ) tokenize differently from the HF tokenizer",
            where,
            do_lower_case,
            strip_accents,
            str(do_lower_case).lower(),
            "strips" if do_lower_case else "keeps",
        )
    return vocab, do_lower_case


def _tokens_by_id(token_ids):
    """`{token: id}` as one token a line, in id order. An id no token has (a token listed twice in
    a vocab.txt keeps its later id) is a blank line, which no text tokenizes to."""
    vocab = [""] * (max(token_ids.values()) + 1)
    for token, index in token_ids.items():
        vocab[index] = token
    return vocab


def read_vocab_tokens(vocab_file):
    """The tokens of a `vocab.txt` in id order, as the original's `load_vocab` numbers them."""
    return _tokens_by_id(tokenization.load_vocab(vocab_file))


def write_lines(path, lines):
    """Writes one string a line (`vocab.txt`, `labels.txt`)."""
    with files.open_file(path, "w") as writer:
        writer.write("".join(line + "\n" for line in lines))


def read_hf_model(directory):
    """Reads an HF BERT model directory (module docstring).

    Args:
      directory: A local directory as `save_pretrained` writes it.

    Returns:
      An `HfModel`.

    Raises:
      ValueError: A file missing or unreadable, or something the original's model or tokenizer
        does not compute; the message names the file and the key.
    """
    if not files.isdir(directory):
        raise ValueError(f"--hf_model: {directory}: no such directory")
    config, architecture, head, labels = read_hf_config(directory)
    pooling, normalize = read_sentence_modules(directory)
    vocab, do_lower_case = _tokenizer_settings(
        directory, pooling is not None and read_sentence_lower_case(directory)
    )
    if len(vocab) > config.vocab_size:
        raise ValueError(
            f"{directory}: the vocabulary has {len(vocab)} tokens but {CONFIG_FILE}'s vocab_size is "
            f"{config.vocab_size}"
        )
    weights, unused = _hf_weights(directory, config, architecture, head)
    if head is not None:
        width = len(weights[head.variable_names()[1]])
        if labels is not None and len(labels) != width:
            raise ValueError(
                f"{os.path.join(directory, CONFIG_FILE)}: id2label names {len(labels)} labels, the "
                f"{head.hf_module} has {width} outputs"
            )
        if head.width is not None and width != head.width:
            raise ValueError(
                f"{directory}: the {head.hf_module} of a {head.name} has {width} outputs, not {head.width}"
            )
    max_seq_length = None
    if pooling is not None:
        max_seq_length = read_sentence_length(directory, config.max_position_embeddings)
    return HfModel(
        config,
        architecture,
        weights,
        vocab,
        do_lower_case,
        labels,
        unused,
        head,
        pooling,
        normalize,
        max_seq_length,
    )


def architecture_of(shapes):
    """The HF architecture of a Google checkpoint's weights, from its heads.

    Args:
      shapes: The checkpoint's weight name -> shape (optimizer slots left out).

    Returns:
      `(architecture, head, width)`: a key of `ARCHITECTURES`, and the fine-tuning `Head` with
      its number of outputs (`bert_tf.modeling.head_table.head_of_checkpoint`), or None, None.

    Raises:
      ValueError: The names hold the heads of two architectures.
    """
    head, width = head_of_checkpoint(shapes)
    found = [head.hf_architecture] if head is not None else []
    for architecture, spec in ARCHITECTURES.items():
        if spec.heads and all(any(n.startswith(scope + "/") for n in shapes) for scope in spec.heads):
            found.append(architecture)
    if "BertForPreTraining" in found:
        found.remove("BertForMaskedLM")
    if len(found) > 1:
        raise ValueError(f"the checkpoint has the heads of {' and '.join(found)}: one at most converts")
    return (found[0] if found else "BertModel"), head, width


def hf_config_dict(model):
    """`config.json`'s contents for `model` (an `HfModel`)."""
    config = model.config
    data = {key: getattr(config, key) for key in GOOGLE_KEYS}
    data.update(
        architectures=[model.architecture],
        model_type="bert",
        hidden_act=GOOGLE_ACTIVATIONS[config.hidden_act],
        layer_norm_eps=EPSILON,
        pad_token_id=0,
    )
    labels = model.labels
    head = model.head
    if head is not None and head.problem_type is not None and not head.labels:
        # A head transformers tells from its class by the problem (the regressor), which
        # counts its outputs by id2label (two where it is absent).
        data["problem_type"] = head.problem_type
        labels = [f"LABEL_{i}" for i in range(len(model.weights[head.variable_names()[1]]))]
    if labels is not None:
        data["id2label"] = {str(i): label for i, label in enumerate(labels)}
        data["label2id"] = {label: i for i, label in enumerate(labels)}
    return data


def hf_tensors(model):
    """The HF tensors of `model` (an `HfModel`): HF name -> float32 array, as transformers'
    `from_pretrained` names them for the architecture (the pooler where it has one)."""
    spec = ARCHITECTURES[model.architecture]
    tensors = {}
    for google_name, hf_name, transposed in name_map(
        model.config, model.architecture, spec.pooler, model.head
    ):
        if google_name not in model.weights:
            raise ValueError(f"the checkpoint has no {google_name}, which a {model.architecture} needs")
        value = np.asarray(model.weights[google_name], dtype=np.float32)
        tensors[hf_name] = np.ascontiguousarray(value.T if transposed else value)
    if model.architecture == "BertModel":  # saved without its own class's prefix
        tensors = {name.removeprefix("bert."): value for name, value in tensors.items()}
    return tensors


def _write_text(path, text):
    with files.open_file(path, "w") as writer:
        writer.write(text)


def write_hf_model(model, directory):
    """Writes `model` (an `HfModel`) as an HF model directory: `config.json`,
    `model.safetensors` (float32, HF's names), `vocab.txt`, `tokenizer_config.json` and
    `special_tokens_map.json`; everything or nothing (a temporary directory beside it, renamed).

    Args:
      model: An `HfModel`.
      directory: The local directory to write; it must not exist, or be empty.

    Returns:
      The tensors written (HF name -> array), read back from the file.

    Raises:
      ValueError: The directory cannot be written, or the weights do not read back identically.
    """
    tensors = hf_tensors(model)
    tmp = files.prepare_output_dir(directory, "--hf_output_dir")
    try:
        _write_text(
            os.path.join(tmp, CONFIG_FILE), json.dumps(hf_config_dict(model), indent=2, sort_keys=True) + "\n"
        )
        # Written by Python like the other files (safetensors' own `save_file` makes it mode 0600).
        with open(os.path.join(tmp, SAFETENSORS_FILE), "wb") as f:
            f.write(safetensors.numpy.save(tensors, metadata={"format": "pt"}))
        written = safetensors.numpy.load_file(os.path.join(tmp, SAFETENSORS_FILE))
        for name, value in tensors.items():
            if written[name].tobytes() != value.tobytes():
                raise ValueError(f"{directory}: {name} did not read back identically")
        write_lines(os.path.join(tmp, VOCAB_FILE), model.vocab)
        special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]"}
        special["mask_token"] = "[MASK]"
        tokenizer_config = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": model.do_lower_case,
            "model_max_length": model.config.max_position_embeddings,
            **special,
        }
        _write_text(os.path.join(tmp, TOKENIZER_CONFIG_FILE), json.dumps(tokenizer_config, indent=2) + "\n")
        _write_text(os.path.join(tmp, SPECIAL_TOKENS_FILE), json.dumps(special, indent=2) + "\n")
        if model.pooling is not None:
            _write_sentence_modules(model, tmp)
        files.finish_output_dir(tmp, directory)
    finally:
        if files.isdir(tmp):
            files.remove_tree(tmp)
    return written


# sentence-transformers' layout beside the transformer's files: `modules.json` lists the modules
# in order, each in its folder; a `Pooling` module's `config.json` names its mode ("pooling_mode",
# or one true `pooling_mode_*` key in files written before version 6), a `Normalize` module
# scales to unit length, and the transformer's `sentence_bert_config.json` may give the length
# `encode()` cuts texts at (`max_seq_length`; without it, the tokenizer's `model_max_length`
# capped at `max_position_embeddings`). The modules are written as sentence-transformers 6.2
# writes them; a recorded length as versions before 6 wrote it (all-MiniLM-L6-v2's
# `{"max_seq_length": N, "do_lower_case": false}`), which 6.2 reads: 6.2's own `save` puts the
# length in the tokenizer's `model_max_length`, which bert_tf writes as max_position_embeddings.
MODULES_FILE = "modules.json"
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
POOLING_DIR = "1_Pooling"
NORMALIZE_DIR = "2_Normalize"
_MODULE_TYPES = {
    "Transformer": "sentence_transformers.base.modules.transformer.Transformer",
    "Pooling": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
    "Normalize": "sentence_transformers.base.modules.normalize.Normalize",
}
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


def _pooling_mode(path):
    """The mode of the `Pooling` module whose `config.json` is `path`: a string, or a list where
    it concatenates several."""
    data = files.read_json(path)
    if "pooling_mode" in data:
        return data["pooling_mode"]
    modes = [mode for key, mode in _LEGACY_POOLING_KEYS.items() if data.get(key)]
    return modes[0] if len(modes) == 1 else modes


def read_sentence_modules(directory):
    """How the sentence-transformers modules of `directory` make a sentence vector from the
    transformer's last layer.

    Returns:
      `(pooling, normalize)`: one of `bert_tf.model_settings.POOLINGS` and a bool, or
      `(None, None)` where there is no `modules.json`, no `Pooling` module, or modules bert_tf
      does not compute (a warning names them: the transformer still converts).

    Raises:
      ValueError: A file that is not the JSON sentence-transformers writes; the message names it.
    """
    path = os.path.join(directory, MODULES_FILE)
    if not files.isfile(path):
        return None, None
    modules = files.read_json(path, object_only=False)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise ValueError(f"{path}: not a list of modules with their type")
    kinds = [str(module["type"]).rsplit(".", 1)[-1] for module in modules]
    if "Pooling" not in kinds:
        return None, None
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        logger.warning(
            "%s: the modules %s make the sentence vector; bert_tf computes Transformer, Pooling "
            "and Normalize only, so none is recorded",
            path,
            ", ".join(kinds),
        )
        return None, None
    pooling_path = os.path.join(directory, modules[1].get("path", ""), CONFIG_FILE)
    if not files.isfile(pooling_path):
        raise ValueError(f"{path}: the Pooling module has no {pooling_path}")
    mode = _pooling_mode(pooling_path)
    if mode not in POOLINGS:
        logger.warning(
            "%s: pooling %s is not computed by bert_tf (%s are), so no pooling is recorded",
            pooling_path,
            json.dumps(mode),
            ", ".join(POOLINGS),
        )
        return None, None
    return mode, len(kinds) == 3


def read_sentence_length(directory, max_position_embeddings):
    """sentence-transformers' `max_seq_length` of the sentence encoder in `directory`: the
    WordPieces, `[CLS]` and `[SEP]` included, past which its `encode()` cuts a text. A line logged
    says where it comes from.

    Args:
      directory: A sentence-transformers model directory (`read_sentence_modules`).
      max_position_embeddings: The transformer's (its `config.json`'s).

    Returns:
      The `max_seq_length` of its `sentence_bert_config.json`; where the file, or the key
      (version 6's files), is absent or null, the length sentence-transformers takes instead
      (`_tokenizer_length`).

    Raises:
      ValueError: A file that is not a JSON object, a `max_seq_length` that is not a positive
        integer or is above `max_position_embeddings`, or a `model_max_length` `_tokenizer_length`
        refuses; the message names the file and the key.
    """
    path = os.path.join(directory, SENTENCE_CONFIG_FILE)
    length = files.read_json(path).get("max_seq_length") if files.isfile(path) else None
    if length is None:
        length, source = _tokenizer_length(directory, max_position_embeddings)
        logger.info(
            "max_seq_length %d, sentence-transformers' where %s names none: the tokenizer's "
            "model_max_length (%s) capped at %s's max_position_embeddings (%d)",
            length,
            path,
            source,
            CONFIG_FILE,
            max_position_embeddings,
        )
        return length
    check_max_seq_length(length, path)
    # sentence-transformers takes a given max_seq_length as it is (it caps the tokenizer's
    # model_max_length at max_position_embeddings only where none is given), and its encode()
    # then fails on a longer text: there is no encode() to reproduce past the positions.
    if length > max_position_embeddings:
        raise ValueError(
            f"{path}: max_seq_length {length} is above {CONFIG_FILE}'s max_position_embeddings "
            f"({max_position_embeddings})"
        )
    logger.info("max_seq_length %d, %s's", length, path)
    return length


def read_sentence_lower_case(directory):
    """Whether sentence-transformers lower-cases a text before the tokenizer of the sentence
    encoder in `directory`: its `sentence_bert_config.json`'s `do_lower_case`.

    Args:
      directory: A sentence-transformers model directory (`read_sentence_modules`).

    Returns:
      The key's value; False where the file or the key is absent, or null.

    Raises:
      ValueError: The file is not a JSON object, or the key not true, false or null; the message
        names the file and the key.
    """
    path = os.path.join(directory, SENTENCE_CONFIG_FILE)
    if not files.isfile(path):
        return False
    value = files.read_json(path).get("do_lower_case")
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{path}: do_lower_case {value!r} is not true or false")
    return bool(value)


def _tokenizer_length(directory, max_position_embeddings):
    """The length sentence-transformers gives a sentence encoder whose `sentence_bert_config.json`
    names none: the tokenizer's `model_max_length` as transformers loads it from
    `tokenizer_config.json` (the key, else the legacy `max_len`; absent or null, transformers'
    "unset" 10**30), capped at `max_position_embeddings`.

    Args:
      directory: The model directory.
      max_position_embeddings: The transformer's (its `config.json`'s).

    Returns:
      `(length, source)`: the length, and where the tokenizer's value came from, for the log.

    Raises:
      ValueError: A value at or below `max_position_embeddings` that is not a positive integer
        (sentence-transformers' `encode()` fails on it, or cuts nothing); the message names the
        file and the key.
    """
    path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    if not files.isfile(path):
        return max_position_embeddings, f"unset: no {path}"
    tokenizer_config = files.read_json(path)
    key = "model_max_length" if "model_max_length" in tokenizer_config else "max_len"
    value = tokenizer_config.get(key)
    if value is None:
        return max_position_embeddings, f"unset in {path}"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and value > max_position_embeddings:
        return max_position_embeddings, f"{path}: {key} {value}"
    check_max_seq_length(value, path, key)
    return value, f"{path}: {key} {value}"


def _write_sentence_modules(model, directory):
    """Writes `model`'s pooling, normalisation and sequence length (an `HfModel` whose `pooling`
    is set) to `directory` as sentence-transformers' modules."""
    modules = [("Transformer", "")]
    modules.append(("Pooling", POOLING_DIR))
    files.makedirs(os.path.join(directory, POOLING_DIR))
    pooling = {"embedding_dimension": model.config.hidden_size, "pooling_mode": model.pooling}
    _write_text(
        os.path.join(directory, POOLING_DIR, CONFIG_FILE),
        json.dumps(dict(pooling, include_prompt=True), indent=4) + "\n",
    )
    if model.normalize:
        modules.append(("Normalize", NORMALIZE_DIR))
        files.makedirs(os.path.join(directory, NORMALIZE_DIR))
        names = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}
        _write_text(os.path.join(directory, NORMALIZE_DIR, CONFIG_FILE), json.dumps(names, indent=4) + "\n")
    listed = [
        {"idx": i, "name": str(i), "path": path, "type": _MODULE_TYPES[kind]}
        for i, (kind, path) in enumerate(modules)
    ]
    _write_text(os.path.join(directory, MODULES_FILE), json.dumps(listed, indent=2) + "\n")
    if model.max_seq_length is not None:
        # do_lower_case false: no lower-casing of sentence-transformers' own before the
        # tokenizer's (tokenizer_config.json's), into which bert_tf's casing folds any it read.
        length = {"max_seq_length": model.max_seq_length, "do_lower_case": False}
        _write_text(os.path.join(directory, SENTENCE_CONFIG_FILE), json.dumps(length, indent=2) + "\n")
