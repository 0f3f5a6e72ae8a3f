"""The export module: a model and the names of its outputs, behind TF Serving signatures.

Every signature ends in the same call, the model on int32 [batch, seq] `input_ids`,
`input_mask` and `segment_ids`; they differ in where those come from:

- `serving_default`: the three tensors themselves (seq up to `max_seq_length`);
- `text`, `text_pair`: strings, tokenized and packed in the graph by `GraphTokenizer` (the ids
  of `FullTokenizer`), padded to the longest packed row of the request rounded up to a multiple
  of 8 (`REQUEST_PADDING`), at most `max_seq_length`: a short request costs what its texts need,
  and a token's outputs do not depend on the padding after it (the mask hides it);
- `tf_example`: serialized `tf.Example`s with the three int64 features of the original's
  TFRecords, each `max_seq_length` long;
- extra signatures (e.g. `pretraining`): the three tensors plus the inputs a model needs
  beyond them (`masked_lm_positions`).

A fine-tuned model exports the same way as `BertModel`: hand in the model (a Keras model taking
the dict of id tensors) and the names of the outputs to serve. `NamedLabels` adds the names of
its best classes as an output; with `text_tokens` the text signatures also return the
WordPiece tokens they fed the model, where each came from in the request's texts and which text,
for outputs given per token.
"""

import dataclasses
import logging

import keras
import tensorflow as tf

from bert_tf import onednn
from bert_tf.export.versioning import versioned_directory
from bert_tf.text.graph_tokenizer import GraphTokenizer, pack_ids

logger = logging.getLogger(__name__)

ID_INPUTS = ("input_ids", "input_mask", "segment_ids")
DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
TEXT_SIGNATURE = "text"
TEXT_PAIR_SIGNATURE = "text_pair"
EXAMPLE_SIGNATURE = "tf_example"
TOKENS_OUTPUT = "tokens"
# The outputs `text_tokens` adds to the text signatures, `TOKENS_OUTPUT` first.
TEXT_TOKEN_OUTPUTS = (TOKENS_OUTPUT, "start_offsets", "end_offsets", "segment_ids")
# The text signatures pad to a multiple of this (tensor cores and oneDNN like such shapes, and
# the model is traced for fewer lengths).
REQUEST_PADDING = 8


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A model and the outputs a signature returns from it.

    Attributes:
      model: A Keras model or layer (or a `tf.Module`: anything whose `variables` are all the
        variables it uses), called as `model(inputs)` on a dict of int32 [batch, seq]
        `input_ids`, `input_mask`, `segment_ids` and the `extra_inputs`. It returns a dict
        holding `output_names`, or a tensor or sequence of tensors in the order of
        `output_names`.
      output_names: The names of the signature's outputs.
      extra_inputs: Name -> `tf.TensorSpec` of the inputs beyond the three id tensors (only
        for extra signatures, which take the ids directly).
    """

    model: object
    output_names: tuple
    extra_inputs: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        names = tuple(self.output_names)
        if not names or len(set(names)) != len(names) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"output_names must be distinct strings, got {self.output_names!r}")
        object.__setattr__(self, "output_names", names)
        clash = sorted(set(self.extra_inputs) & set(ID_INPUTS))
        if clash:
            raise ValueError(f"extra_inputs may not redefine the id inputs {clash}")

    def build(self):
        """Calls the model once, eagerly, on a batch of one row of two tokens: a Keras model that
        makes its variables on its first call (a subclassed one, never called yet) makes them
        here, where they can be tracked and saved, and not inside a signature's trace. (One
        token would have Keras warn of a softmax over a single position.)"""
        inputs = {name: tf.zeros([1, 2], tf.int32) for name in ID_INPUTS}
        for name, spec in self.extra_inputs.items():
            inputs[name] = tf.zeros([1 if n is None else n for n in spec.shape], spec.dtype)
        self(inputs)

    def __call__(self, inputs):
        """The model's outputs on `inputs`, as a dict keyed by `output_names`."""
        outputs = self.model(inputs)
        if isinstance(outputs, dict):
            missing = [name for name in self.output_names if name not in outputs]
            if missing:
                raise ValueError(f"the model has no outputs {missing}; it returns {sorted(outputs)}")
            return {name: outputs[name] for name in self.output_names}
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        if len(outputs) != len(self.output_names):
            raise ValueError(f"the model returns {len(outputs)} outputs for output_names {self.output_names}")
        return dict(zip(self.output_names, outputs, strict=True))


class NamedLabels:
    """A classifier whose outputs also name its best class: `model`'s outputs plus `output`,
    `labels[argmax(outputs[scores], axis=-1)]`, strings of the shape of the scores without their
    last axis (one per example, or one per token of a tagger).

    Args:
      model: As `ServedModel.model`, returning a dict that holds `scores`.
      labels: The label strings, in the order of the model's classes.
      scores: The output whose last axis runs over the classes (e.g. "probabilities").
      output: The name of the added output.
    """

    def __init__(self, model, labels, scores, output):
        self.model = model
        self.labels = tf.constant(list(labels), tf.string)
        self.scores = scores
        self.output = output

    @property
    def variables(self):
        return self.model.variables

    def __call__(self, inputs):
        outputs = dict(self.model(inputs))
        outputs[self.output] = tf.gather(self.labels, tf.argmax(outputs[self.scores], axis=-1))
        return outputs


def after_checks(tensors, checks):
    """`tensors` (a dict) passed on once the assertions `checks` have run, so that no op reading
    them fails first with a less clear error (an op runs as soon as its inputs are ready).

    Args:
      tensors: Name -> tensor.
      checks: Assertion ops (`tf.debugging.assert_*` in a `tf.function`).

    Returns:
      Name -> the same values, computed after `checks`.
    """
    with tf.control_dependencies(checks):
        return {name: tf.identity(tensor) for name, tensor in tensors.items()}


def _concrete(fn, *specs, **named_specs):
    """`fn` traced for the given input specs, as a signature's concrete function. Not converted
    by AutoGraph: the signatures and the models they call branch on Python values only."""
    return tf.function(fn, autograph=False).get_concrete_function(*specs, **named_specs)


def _id_specs():
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in ID_INPUTS}


class ExportModule(tf.Module):
    """The SavedModel's root: the models' variables, the tokenizer, the vocabulary and the signatures.

    Besides the signatures, the loaded object has `vocab_file` (a `tf.saved_model.Asset`: its
    `asset_path` is the copy inside the export directory), `do_lower_case` and
    `max_seq_length` (variables), so a client can rebuild the tokenization.

    Args:
      served: The `ServedModel` behind `serving_default`, `text`, `text_pair` and `tf_example`.
      vocab_file: The model's `vocab.txt`.
      do_lower_case: True for uncased models.
      max_seq_length: The longest the text signatures pack to (they pad to the request), the
        length of the tf.Example signature's features, and the longest `serving_default`
        accepts.
      extra_signatures: Name -> `ServedModel` of more signatures taking the id tensors (and
        their `extra_inputs`) directly.
      text_signatures: False leaves out `text` and `text_pair` and so every tensorflow-text op:
        a server without tensorflow-text can then load the export.
      config: The model's `BertConfig`, or None. With it, the signatures that take ids reject
        an `input_ids` outside [0, vocab_size) and a `segment_ids` outside
        [0, type_vocab_size): a lookup past an embedding table fails only on a CPU, and a
        negative id would read a row from the table's end.
      text_tokens: Whether `text` and `text_pair` also return, each [batch, seq] as the
        packed input: `tokens`, its WordPiece tokens (`[CLS]` first, "" at the padding), so a
        client can read outputs given per token (a tagger's) against them; `start_offsets` and
        `end_offsets`, int64, each token's span in its text in UTF-8 bytes (end exclusive, -1
        at `[CLS]`, `[SEP]` and the padding); and `segment_ids`, int32, 0 for `text`/`text_a`,
        1 for `text_b` (the text the offsets index).
      max_text_a_tokens: None: `text_pair` truncates a pair that is too long longest first,
        as the original's classifier. Else it cuts `text_a` to this many tokens and `text_b`
        to the rest, as the original's SQuAD packs a question (`max_query_length`) and the
        first window of its paragraph.

    Raises:
      ValueError: `max_seq_length` below 3, a missing vocabulary, a signature name used twice,
        or a served output named as one of `TEXT_TOKEN_OUTPUTS` with `text_tokens`.
    """

    def __init__(
        self,
        served,
        vocab_file,
        do_lower_case,
        max_seq_length,
        extra_signatures=None,
        text_signatures=True,
        config=None,
        text_tokens=False,
        max_text_a_tokens=None,
    ):
        super().__init__(name="bert_tf_export")
        if max_seq_length < 3:
            raise ValueError(
                f"max_seq_length must be at least 3 ([CLS] a [SEP] b [SEP]), got {max_seq_length}"
            )
        if not tf.io.gfile.exists(vocab_file):
            raise ValueError(f"{vocab_file}: no such vocab file")
        extra_signatures = dict(extra_signatures or {})
        reserved = {DEFAULT_SIGNATURE, EXAMPLE_SIGNATURE, TEXT_SIGNATURE, TEXT_PAIR_SIGNATURE}
        if reserved & set(extra_signatures):
            raise ValueError(f"extra signature names may not be {sorted(reserved & set(extra_signatures))}")
        clash = [name for name in TEXT_TOKEN_OUTPUTS if name in served.output_names]
        if text_tokens and clash:
            raise ValueError(f"with text_tokens the text signatures return {clash[0]!r} themselves")
        self._served = served
        self._text_tokens = text_tokens
        self._max_text_a_tokens = max_text_a_tokens
        self._extra_served = extra_signatures
        self._max_seq_length = max_seq_length
        self._id_limits = (
            {
                "input_ids": ("vocab_size", config.vocab_size),
                "segment_ids": ("type_vocab_size", config.type_vocab_size),
            }
            if config is not None
            else {}
        )
        # The variables the signatures capture, tracked so they are saved. The models are not
        # tracked themselves: TensorFlow would also save every function a Keras model offers
        # (and trace its default serving function with float inputs).
        for s in (served, *extra_signatures.values()):
            s.build()
        variables = [v for s in (served, *extra_signatures.values()) for v in s.model.variables]
        variables = {id(v): v for v in (v.value if isinstance(v, keras.Variable) else v for v in variables)}
        self.model_variables = list(variables.values())
        self.vocab_file = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
        self.max_seq_length = tf.Variable(max_seq_length, trainable=False, name="max_seq_length")
        self.tokenizer = GraphTokenizer(vocab_file, do_lower_case) if text_signatures else None

    def signatures(self):
        """The concrete functions to save, by signature name."""
        signatures = {DEFAULT_SIGNATURE: self._ids_signature(self._served)}
        signatures.update({name: self._ids_signature(s) for name, s in self._extra_served.items()})
        if self.tokenizer is not None:
            signatures[TEXT_SIGNATURE] = _concrete(
                self._serve_text, tf.TensorSpec([None], tf.string, name="text")
            )
            signatures[TEXT_PAIR_SIGNATURE] = _concrete(
                self._serve_text_pair,
                tf.TensorSpec([None], tf.string, name="text_a"),
                tf.TensorSpec([None], tf.string, name="text_b"),
            )
        signatures[EXAMPLE_SIGNATURE] = _concrete(
            self._serve_examples, tf.TensorSpec([None], tf.string, name="examples")
        )
        return signatures

    def _ids_signature(self, served):
        def serve(**inputs):
            rows, length = tf.unstack(tf.shape(inputs["input_ids"]))
            checks = [
                tf.debugging.assert_less_equal(
                    length,
                    self._max_seq_length,
                    message=f"input_ids has more than max_seq_length={self._max_seq_length} tokens per row",
                ),
                tf.debugging.assert_equal(
                    tf.logical_or(rows == 0, length > 0),
                    True,
                    message="input_ids has no tokens per row (at least [CLS])",
                ),
                *(
                    tf.debugging.assert_equal(
                        tf.shape(inputs[name]),
                        tf.shape(inputs["input_ids"]),
                        message=f"{name} is not shaped as input_ids",
                    )
                    for name in ID_INPUTS[1:]
                ),
                tf.debugging.assert_equal(
                    tf.reduce_all((inputs["input_mask"] == 0) | (inputs["input_mask"] == 1)),
                    True,
                    message="input_mask holds a value other than 0 and 1",
                ),
            ]
            inputs = after_checks(inputs, [*checks, *self._id_checks(inputs)])
            # A batch of 0 rows may come with 0 columns, where the pooler reads column 0.
            padding = [[0, 0], [0, tf.maximum(1 - length, 0)]]
            return served(
                {name: tf.pad(x, padding) if name in ID_INPUTS else x for name, x in inputs.items()}
            )

        return _concrete(serve, **_id_specs(), **served.extra_inputs)

    def _id_checks(self, inputs):
        """The assertions that the ids in `inputs` have rows in the embedding tables."""
        checks = []
        for name, (limit_name, limit) in self._id_limits.items():
            ids = inputs[name]
            checks.append(tf.debugging.assert_non_negative(ids, message=f"{name} has a negative id"))
            checks.append(
                tf.debugging.assert_less(
                    ids,
                    tf.cast(limit, ids.dtype),
                    message=f"{name} has an id of {limit_name}={limit} or more, past the embedding table",
                )
            )
        return checks

    def _serve_text(self, text):
        return self._serve_text_pair(text, tf.fill(tf.shape(text), ""))

    def _serve_text_pair(self, text_a, text_b):
        same_size = tf.debugging.assert_equal(
            tf.size(text_a), tf.size(text_b), message="text_a and text_b hold different numbers of texts"
        )
        texts = after_checks({"a": text_a, "b": text_b}, [same_size])
        # A row whose text_b has no tokens is packed as a single text, as text_b=None is.
        tokenizer = self.tokenizer
        if self._text_tokens:
            (ids_a, *offsets_a), (ids_b, *offsets_b) = (
                tokenizer.tokenize_with_offsets(texts[k]) for k in "ab"
            )
            offsets = (offsets_a, offsets_b)
        else:
            ids_a, ids_b, offsets = tokenizer.tokenize(texts["a"]), tokenizer.tokenize(texts["b"]), None
        packed = pack_ids(
            ids_a,
            ids_b,
            self._max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
            max_a=self._max_text_a_tokens,
            offsets=offsets,
            pad_to_multiple=REQUEST_PADDING,
        )
        outputs = self._served({name: packed[name] for name in ID_INPUTS})
        if self._text_tokens:
            tokens = self.tokenizer.id_tokens(packed["input_ids"])
            outputs[TOKENS_OUTPUT] = tf.where(packed["input_mask"] > 0, tokens, "")
            for name in TEXT_TOKEN_OUTPUTS[1:]:
                outputs[name] = packed[name]
        return outputs

    def _serve_examples(self, examples):
        features = {name: tf.io.FixedLenFeature([self._max_seq_length], tf.int64) for name in ID_INPUTS}
        parsed = tf.io.parse_example(examples, features)
        parsed = after_checks(parsed, self._id_checks(parsed))  # before the cast, which would wrap
        return self._served({name: tf.cast(parsed[name], tf.int32) for name in ID_INPUTS})


def export_saved_model(
    model,
    output_names,
    vocab_file,
    do_lower_case,
    max_seq_length,
    export_dir,
    extra_signatures=None,
    text_signatures=True,
    version=None,
    overwrite=False,
    config=None,
    text_tokens=False,
    max_text_a_tokens=None,
):
    """Writes a model as a SavedModel version for TF Serving.

    Args:
      model: As `ServedModel.model`: a Keras model or `tf.Module` taking the dict of id tensors.
      output_names: The outputs to serve, as `ServedModel.output_names`.
      vocab_file: The model's `vocab.txt`; copied into the export as an asset.
      do_lower_case: True for uncased models.
      max_seq_length: As `ExportModule`'s.
      export_dir: The model's base directory; the version is written to `<export_dir>/<version>`.
      extra_signatures: Name -> `ServedModel` of more signatures on the id tensors.
      text_signatures: Whether to export `text` and `text_pair` (they need tensorflow-text's
        ops in the server).
      version: Integer version; default the next free one.
      overwrite: Whether an existing version may be replaced.
      config: The model's `BertConfig`: the signatures then check the ids (see `ExportModule`).
      text_tokens: Whether the text signatures also return the `tokens` (see `ExportModule`).
      max_text_a_tokens: How `text_pair` truncates (see `ExportModule`).

    Returns:
      The version directory written.

    Raises:
      ValueError: Bad arguments, or the version exists and `overwrite` is False; nothing is
        left under `export_dir` then.
    """
    served = ServedModel(model, output_names)
    if config is None:
        logger.warning(
            "export_saved_model without config: the id signatures accept ids outside the "
            "embedding tables (a lookup past a table fails only on a CPU; a negative id reads "
            "the table's last rows)"
        )
    with versioned_directory(export_dir, version, overwrite) as (tmp, final):
        module = ExportModule(
            served,
            vocab_file,
            do_lower_case,
            max_seq_length,
            extra_signatures,
            text_signatures,
            config,
            text_tokens,
            max_text_a_tokens,
        )
        # Served elsewhere, perhaps without oneDNN or on a GPU: no oneDNN-only forms.
        with onednn.portable():
            tf.saved_model.save(module, tmp, signatures=module.signatures())
    return final
