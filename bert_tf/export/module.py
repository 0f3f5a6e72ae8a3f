"""The export module: a model and the names of its outputs, behind TF Serving signatures.

Every signature ends in the same call, the model on int32 [batch, seq] `input_ids`,
`input_mask` and `segment_ids`; they differ in where those come from:

- `serving_default`: the three tensors themselves (seq up to `max_seq_length`);
- `text`, `text_pair`: strings, tokenized and packed in the graph by `GraphTokenizer` (the ids
  of `FullTokenizer`), padded to the longest packed row of the request rounded up to a multiple
  of 8 (`REQUEST_PADDING`), at most `max_seq_length`: a short request costs what its texts need,
  and a token's outputs do not depend on the padding after it (the mask hides it);
- `text_windowed` (with `doc_stride`): strings, each cut into windows of `max_seq_length - 2`
  WordPieces as `bert_tf.text.windows` cuts long documents, the request's windows run in
  batches of `window_batch_size` (a request past `max_windowed_tokens` is refused); it returns
  per text what the tools return per document (see `ExportModule`);
- `tf_example`: serialized `tf.Example`s with the three int64 features of the original's
  TFRecords, each `max_seq_length` long;
- a multiple-choice model (`ServedModel.choices`) has `serving_default` on [batch, choices, seq]
  ids and `text_choices` (strings: a context and a question [batch], the endings
  [batch, choices]; each choice packed as the pair (context, question + " " + ending)) in place
  of `text`, `text_pair` and `tf_example`;
- extra signatures (e.g. `pretraining`): the three tensors plus the inputs a model needs
  beyond them (`masked_lm_positions`).

A fine-tuned model exports the same way as `BertModel`: hand in the model (a Keras model taking
the dict of id tensors) and the names of the outputs to serve. `NamedLabels` adds the names of
its best classes as an output (and the export its labels, as `labels.txt` in the version's
`assets.extra/` and as the loaded object's `labels`); with `text_tokens` the text signatures also
return the WordPiece tokens they fed the model, where each came from in the request's texts and
which text, for outputs given per token.
"""

import dataclasses
import inspect
import logging
import os

import keras
import tensorflow as tf

from bert_tf import files, onednn
from bert_tf.export.versioning import versioned_directory
from bert_tf.labels import LABELS_FILE, write_labels
from bert_tf.modeling.pooling import BertSentenceEncoder
from bert_tf.modeling.token_packing import token_packing
from bert_tf.text import graph_windows
from bert_tf.text.graph_tokenizer import GraphTokenizer, pack_ids
from bert_tf.text.windows import WINDOW_POOLINGS

logger = logging.getLogger(__name__)

ID_INPUTS = ("input_ids", "input_mask", "segment_ids")
DEFAULT_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
TEXT_SIGNATURE = "text"
TEXT_PAIR_SIGNATURE = "text_pair"
TEXT_WINDOWED_SIGNATURE = "text_windowed"
TEXT_CHOICES_SIGNATURE = "text_choices"
EXAMPLE_SIGNATURE = "tf_example"
TOKENS_OUTPUT = "tokens"
# The outputs `text_tokens` adds to the text signatures, `TOKENS_OUTPUT` first.
TEXT_TOKEN_OUTPUTS = (TOKENS_OUTPUT, "start_offsets", "end_offsets", "segment_ids")
# The outputs `text_windowed` adds where it returns outputs per token.
WINDOWED_TOKEN_OUTPUTS = TEXT_TOKEN_OUTPUTS[:3]
# The text signatures pad to a multiple of this (tensor cores and oneDNN like such shapes, and
# the model is traced for fewer lengths).
REQUEST_PADDING = 8
# `text_windowed`'s defaults: windows run through the model at a time (32 windows of 128 are
# 4,096 rows, enough for a CPU's matmuls to run at their rate), and the largest request, in
# tokens of its outputs (texts x (longest text's WordPieces + 2)).
WINDOW_BATCH_SIZE = 32
MAX_WINDOWED_TOKENS = 100_000
# TF Serving's directory of a version's extra files (its warm-up requests), which loaders ignore.
ASSETS_EXTRA = "assets.extra"


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
      choices: Whether the id tensors are [batch, choices, seq] (a multiple-choice model).
    """

    model: object
    output_names: tuple
    extra_inputs: dict = dataclasses.field(default_factory=dict)
    choices: bool = False

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
        inputs = {name: tf.zeros([1, 2, 2] if self.choices else [1, 2], tf.int32) for name in ID_INPUTS}
        for name, spec in self.extra_inputs.items():
            inputs[name] = tf.zeros([1 if n is None else n for n in spec.shape], spec.dtype)
        self(inputs)

    def token_outputs(self):
        """The outputs given per token: those whose axis 1 follows the input's length, found by
        calling the model eagerly on a row of 2 tokens and on one of 3.

        Returns:
          A tuple of output names, in the order of `output_names`.
        """
        shapes = [
            {
                name: tuple(x.shape)
                for name, x in self({n: tf.zeros([1, length], tf.int32) for n in ID_INPUTS}).items()
            }
            for length in (2, 3)
        ]
        return tuple(
            name
            for name in self.output_names
            if len(shapes[0][name]) > 1 and (shapes[0][name][1], shapes[1][name][1]) == (2, 3)
        )

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
        return self.with_labels(dict(self.model(inputs)))

    def with_labels(self, outputs):
        """`outputs` (a dict holding `scores`) plus `output`, the names of the best classes."""
        outputs = dict(outputs)
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


def _traced_when_called(fn, *specs):
    """`fn` as a `tf.function` of the given input specs, not traced yet: `tf.saved_model.save`
    traces it, in the context where it also traces the tokenizer's functions it saves, so that
    the signature's calls to them reuse those traces. (A `tf.function` traced in another context,
    as `_concrete`'s before the save, calls tokenizer functions traced for that context, and the
    save traces them once more.) Not converted by AutoGraph, as `_concrete`."""
    return tf.function(fn, input_signature=specs, autograph=False)


def _traced_when_called_by_name(fn, specs):
    """`_traced_when_called` for a `fn(**inputs)` of the inputs `specs` names (name -> spec): a
    function of one argument per input, named as its spec (a signature's input names)."""
    names = list(specs)

    def call(*args, **kwargs):
        return fn(**dict(zip(names, args, strict=False)), **kwargs)

    call.__name__ = fn.__name__
    call.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names]
    )
    return tf.function(call, input_signature=[specs[name] for name in names], autograph=False)


def _id_specs(choices=False):
    """The id inputs' specs: int32 [batch, seq], or [batch, choices, seq]."""
    shape = [None, None, None] if choices else [None, None]
    return {name: tf.TensorSpec(shape, tf.int32, name=name) for name in ID_INPUTS}


class ExportModule(tf.Module):
    """The SavedModel's root: the models' variables, the tokenizer, the vocabulary and the signatures.

    Besides the signatures, the loaded object has `vocab_file` (a `tf.saved_model.Asset`: its
    `asset_path` is the copy inside the export directory), `do_lower_case` and
    `max_seq_length` (variables), so a client can rebuild the tokenization, and with
    `doc_stride` a `doc_stride` variable. A `NamedLabels` model adds `labels` (a string
    variable: its labels in the order of the scores' last axis) and `label_scores` (a string
    variable: the name of the output whose last axis they name).

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
      doc_stride: None, or adds the `text_windowed` signature, which takes strings as `text`
        does and cuts each text into windows of `max_seq_length - 2` WordPieces, starting
        `doc_stride` pieces apart (`bert_tf.text.windows`; a text that fits gets one window,
        packed as `text` packs it). The windows of all the request's texts, padded as `text`
        pads, run through the model `window_batch_size` at a time, so that a request's memory
        beyond the model's is its outputs and one batch's activations; what it returns is per
        text:
        the outputs given per token (`ServedModel.token_outputs`: the encoder's
        `sequence_output`, a tagger's `probabilities` and `labels`), each token's from the
        window where it has the most context, `[CLS]`'s from the first window and the last
        `[SEP]`'s from the last, [batch, tokens, ...] with `tokens` the request's most WordPieces
        plus 2, rounded up to a multiple of `REQUEST_PADDING` (at most `max_seq_length` when
        every text fits), filled with 0 ("" for strings) past each text's `[SEP]`; with them
        `tokens`, `start_offsets`, `end_offsets` as `text_tokens` gives them. A `NamedLabels`
        model's `scores` given per example (a classifier's `probabilities`) are pooled over
        the windows (`window_pooling`) and its `output` named from them. A `BertSentenceEncoder`'s
        `sentence_embedding` pools the text's `sequence_output` so put together ([CLS], every
        piece from its max-context window, [SEP]). Other outputs per example (the encoder's
        `pooled_output`, which summarises one window) are left out.
      window_pooling: "mean" or "max" over the windows of a text, for the pooled `scores`.
      window_batch_size: How many windows `text_windowed` runs through the model at a time.
      max_windowed_tokens: The largest `text_windowed` request, counted as its outputs per
        token are shaped: texts x (the longest text's WordPieces + 2). A larger one is refused
        (`InvalidArgumentError` naming this cap and the request's size) before any window runs.

    Raises:
      ValueError: `max_seq_length` below 3, a missing vocabulary, a signature name used twice,
        or a served output named as one of `TEXT_TOKEN_OUTPUTS` with `text_tokens` (or with
        `doc_stride` and outputs per token); `doc_stride` below 1, without the text signatures,
        with `max_text_a_tokens`, or for a model that would return nothing in `text_windowed`;
        a `window_pooling` not in `WINDOW_POOLINGS`; a `window_batch_size` or
        `max_windowed_tokens` below 1.
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
        doc_stride=None,
        window_pooling="mean",
        window_batch_size=WINDOW_BATCH_SIZE,
        max_windowed_tokens=MAX_WINDOWED_TOKENS,
    ):
        super().__init__(name="bert_tf_export")
        if max_seq_length < 3:
            raise ValueError(
                f"max_seq_length must be at least 3 ([CLS] a [SEP] b [SEP]), got {max_seq_length}"
            )
        if not tf.io.gfile.exists(vocab_file):
            raise ValueError(f"{vocab_file}: no such vocab file")
        extra_signatures = dict(extra_signatures or {})
        reserved = {
            DEFAULT_SIGNATURE,
            EXAMPLE_SIGNATURE,
            TEXT_SIGNATURE,
            TEXT_PAIR_SIGNATURE,
            TEXT_WINDOWED_SIGNATURE,
        }
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
        if isinstance(served.model, NamedLabels):
            self.labels = tf.Variable(served.model.labels, trainable=False, name="labels")
            self.label_scores = tf.Variable(served.model.scores, trainable=False, name="label_scores")
        self._doc_stride = doc_stride
        if doc_stride is not None:
            if doc_stride < 1:
                raise ValueError(f"doc_stride must be positive, got {doc_stride}")
            if not text_signatures:
                raise ValueError("doc_stride adds text_windowed, a text signature: it needs text_signatures")
            if max_text_a_tokens is not None:
                raise ValueError(
                    "doc_stride windows single texts; a model packing pairs by max_text_a_tokens "
                    "(SQuAD) windows its own way"
                )
            if window_pooling not in WINDOW_POOLINGS:
                raise ValueError(f"window_pooling must be one of {WINDOW_POOLINGS}, got {window_pooling!r}")
            for name, value in (
                ("window_batch_size", window_batch_size),
                ("max_windowed_tokens", max_windowed_tokens),
            ):
                if value < 1:
                    raise ValueError(f"{name} must be positive, got {value}")
            self._window_batch_size = window_batch_size
            self._max_windowed_tokens = max_windowed_tokens
            self._windowed = _WindowedModel(served, window_pooling)
            self.doc_stride = tf.Variable(doc_stride, trainable=False, name="doc_stride")

    def signatures(self):
        """The functions to save, by signature name: `tf.function`s traced when first called or
        saved (`_traced_when_called`), and `tf_example`'s concrete function.

        The signatures that run the served model on [batch, seq] ids (`serving_default` and the
        text signatures) call it through one function of those ids, traced once and saved
        once; `tf_example`, whose ids are [batch, max_seq_length], runs the model itself (its
        outputs keep that length in their shapes), as does each extra signature."""

        def run_model(inputs):
            """The served model on the three id tensors."""
            return self._served(inputs)

        model = _traced_when_called(run_model, _id_specs(self._served.choices))
        shared = None if self._served.extra_inputs else model  # (it takes the three ids only)
        signatures = {DEFAULT_SIGNATURE: self._ids_signature(self._served, shared)}
        signatures.update({name: self._ids_signature(s) for name, s in self._extra_served.items()})
        if self.tokenizer is not None and self._served.choices:

            def serve_text_choices(context, question, endings):
                return self._serve_text_choices(context, question, endings, model)

            signatures[TEXT_CHOICES_SIGNATURE] = _traced_when_called(
                serve_text_choices,
                tf.TensorSpec([None], tf.string, name="context"),
                tf.TensorSpec([None], tf.string, name="question"),
                tf.TensorSpec([None, None], tf.string, name="endings"),
            )
        elif self.tokenizer is not None:

            def serve_text_pair(text_a, text_b):
                return self._serve_text_pair(text_a, text_b, model)

            text_pair = _traced_when_called(
                serve_text_pair,
                tf.TensorSpec([None], tf.string, name="text_a"),
                tf.TensorSpec([None], tf.string, name="text_b"),
            )

            def serve_text(text):
                """`text`: `text_pair` with every `text_b` empty, calling its function (traced
                once, saved once)."""
                return text_pair(text, tf.fill(tf.shape(text), ""))

            signatures[TEXT_SIGNATURE] = _traced_when_called(
                serve_text, tf.TensorSpec([None], tf.string, name="text")
            )
            signatures[TEXT_PAIR_SIGNATURE] = text_pair
        if self._doc_stride is not None:

            def serve_text_windowed(text):
                return self._serve_text_windowed(text, model)

            signatures[TEXT_WINDOWED_SIGNATURE] = _traced_when_called(
                serve_text_windowed, tf.TensorSpec([None], tf.string, name="text")
            )
        if not self._served.choices:
            signatures[EXAMPLE_SIGNATURE] = _concrete(
                self._serve_examples, tf.TensorSpec([None], tf.string, name="examples")
            )
        return signatures

    def _ids_signature(self, served, model=None):
        """The signature taking `served`'s inputs directly; it runs `served` by `model` (a
        function of the three ids), if given."""

        def serve(**inputs):
            shape = tf.shape(inputs["input_ids"])
            rows, length = tf.reduce_prod(shape[:-1]), shape[-1]
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
            padding = [[0, 0]] * (2 if served.choices else 1) + [[0, tf.maximum(1 - length, 0)]]
            return (model or served)(
                {name: tf.pad(x, padding) if name in ID_INPUTS else x for name, x in inputs.items()}
            )

        return _traced_when_called_by_name(serve, {**_id_specs(served.choices), **served.extra_inputs})

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

    def _serve_text_pair(self, text_a, text_b, model):
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
        outputs = model({name: packed[name] for name in ID_INPUTS})
        if self._text_tokens:
            tokens = self.tokenizer.id_tokens(packed["input_ids"])
            outputs[TOKENS_OUTPUT] = tf.where(packed["input_mask"] > 0, tokens, "")
            for name in TEXT_TOKEN_OUTPUTS[1:]:
                outputs[name] = packed[name]
        return outputs

    def _serve_text_choices(self, context, question, endings, model):
        """`text_choices`: choice i of row r is the pair (`context[r]`,
        `question[r] + " " + endings[r, i]`), packed as `text_pair` packs a pair, all the
        request's choices as one batch; the model's outputs are per row ([batch, choices])."""
        rows, choices = tf.unstack(tf.shape(endings))
        same_size = [
            tf.debugging.assert_equal(
                tf.size(texts), rows, message=f"{name} and endings hold different numbers of rows"
            )
            for name, texts in (("context", context), ("question", question))
        ]
        texts = after_checks({"context": context, "question": question, "endings": endings}, same_size)
        text_a = tf.repeat(texts["context"], choices)
        text_b = tf.strings.join(
            [tf.repeat(texts["question"], choices), tf.reshape(texts["endings"], [-1])], " "
        )
        packed = pack_ids(
            self.tokenizer.tokenize(text_a),
            self.tokenizer.tokenize(text_b),
            self._max_seq_length,
            self.tokenizer.cls_id,
            self.tokenizer.sep_id,
            pad_to_multiple=REQUEST_PADDING,
        )
        return model({name: tf.reshape(packed[name], [rows, choices, -1]) for name in ID_INPUTS})

    def _serve_text_windowed(self, text, model):
        """`text_windowed`: each text cut into windows, the request's windows run in batches of
        `window_batch_size`, the outputs put back together per text (`ExportModule`'s
        `doc_stride`).

        The outputs per token are built at their positions of the padded [batch, length]
        tensors by gathers (as `pack_ids` packs), rather than by ragged concatenations and
        their validation; every row partition here is made from the tokenizer's, so none needs
        validating."""
        tokenizer, windowed = self.tokenizer, self._windowed
        max_tokens = self._max_seq_length - 2
        if windowed.token_outputs:
            ids, starts, ends = tokenizer.tokenize_with_offsets(text)
        else:
            ids = tokenizer.tokenize(text)
        ids = self._within_windowed_cap(ids)
        num_tokens = ids.row_lengths()
        window_starts, window_lengths = graph_windows.doc_spans(num_tokens, max_tokens, self._doc_stride)
        # Ragged [windows, (pieces)]: where each window's pieces are in `ids.flat_values`.
        first_piece = tf.gather(ids.row_starts(), window_starts.value_rowids()) + window_starts.flat_values
        pieces = tf.ragged.range(first_piece, first_piece + window_lengths.flat_values)
        window_ids = tf.gather(ids.flat_values, pieces)
        no_ids = tf.RaggedTensor.from_row_lengths(
            tf.zeros([0], window_ids.dtype), tf.zeros_like(window_lengths.flat_values), validate=False
        )
        packed = pack_ids(
            window_ids,
            no_ids,
            self._max_seq_length,
            tokenizer.cls_id,
            tokenizer.sep_id,
            pad_to_multiple=REQUEST_PADDING,
        )
        windows = {name: packed[name] for name in ID_INPUTS}
        outputs = {}
        if windowed.pooled_outputs:
            per_window = self._run_windows(model, windows, windowed.pooled_outputs)
            pool = tf.reduce_mean if windowed.pooling == "mean" else tf.reduce_max
            for name, values in per_window.items():
                per_text = tf.RaggedTensor.from_row_splits(values, window_starts.row_splits, validate=False)
                outputs[name] = pool(per_text, axis=1)
            if windowed.labels is not None:
                outputs = windowed.labels.with_labels(outputs)
        if windowed.token_outputs:
            # Each piece's window of most context (counted in the request's windows) and its
            # position there.
            window = graph_windows.max_context_spans(num_tokens, max_tokens, self._doc_stride)
            window = tf.gather(window_starts.row_starts(), window.value_rowids()) + window.flat_values
            position = (
                tf.ragged.range(num_tokens).flat_values - tf.gather(window_starts.flat_values, window) + 1
            )
            longest = tf.reduce_max(tf.concat([num_tokens + 2, [1]], axis=0))
            rounded = -(-longest // REQUEST_PADDING) * REQUEST_PADDING
            length = tf.where(
                longest > self._max_seq_length, rounded, tf.minimum(rounded, self._max_seq_length)
            )
            # Column j of a text's row: [CLS] at 0, piece j - 1 up to its last piece, the last
            # [SEP] after it, then padding.
            columns = tf.range(length)[None, :]  # [1, length], against [batch, 1] row by row
            count = num_tokens[:, None]
            is_piece = (columns >= 1) & (columns <= count)
            is_sep = tf.equal(columns, count + 1)
            # Where each column's piece is in `ids.flat_values`; past them (a fill) elsewhere.
            piece_at = tf.where(
                is_piece, ids.row_starts()[:, None] + columns - 1, tf.size(ids.flat_values, out_type=tf.int64)
            )

            def at_pieces(values, fill):
                """Per-piece `values` at the columns of their pieces, `fill` elsewhere."""
                filler = tf.fill([1], tf.constant(fill, values.dtype))
                return tf.gather(tf.concat([values, filler], axis=0), piece_at)

            # The (window, position) each column is read at: [CLS] in the text's first window,
            # each piece in its window of most context, the last [SEP] after the pieces of the
            # text's last window; the padding reads [CLS]'s, then is filled.
            last = window_starts.row_limits() - 1
            first = window_starts.row_starts()[:, None]
            at = tf.stack(
                [
                    tf.where(is_piece, at_pieces(window, 0), tf.where(is_sep, last[:, None], first)),
                    tf.where(
                        is_piece,
                        at_pieces(position, 0),
                        tf.where(is_sep, tf.gather(window_lengths.flat_values, last)[:, None] + 1, 0),
                    ),
                ],
                axis=-1,
            )
            picked = self._run_windows(model, windows, windowed.token_outputs, at)
            if not windowed.pooled_outputs and windowed.labels is not None:
                picked = windowed.labels.with_labels(picked)
            real = columns <= count + 1
            for name, values in picked.items():
                mask = real
                for _ in range(values.shape.rank - 2):
                    mask = mask[..., None]
                outputs[name] = tf.where(mask, values, tf.zeros([], values.dtype))
            if windowed.sentence_pooling is not None:
                outputs[windowed.sentence_output] = windowed.sentence_pooling(
                    outputs[windowed.sentence_tokens], real
                )
            tokens = at_pieces(tokenizer.id_tokens(ids.flat_values), "")
            outputs[TOKENS_OUTPUT] = tf.where(
                tf.equal(columns, 0), "[CLS]", tf.where(is_sep, "[SEP]", tokens)
            )
            for name, offsets in zip(WINDOWED_TOKEN_OUTPUTS[1:], (starts, ends), strict=True):
                outputs[name] = at_pieces(tf.cast(offsets.flat_values, tf.int64), -1)
        return outputs

    def _within_windowed_cap(self, ids):
        """`ids` (ragged [texts, (pieces)]) passed on once the request is known to be within
        `max_windowed_tokens`, counted as its outputs per token are shaped: texts x (the
        longest text's pieces + 2).

        Raises:
          InvalidArgumentError: (when run) the request is larger, naming the cap and its size.
        """
        num_tokens = ids.row_lengths()
        texts = tf.size(num_tokens, out_type=tf.int64)
        longest = tf.reduce_max(tf.concat([num_tokens, tf.zeros([1], num_tokens.dtype)], axis=0))
        size = texts * (tf.cast(longest, tf.int64) + 2)
        cap = self._max_windowed_tokens
        message = tf.strings.format(
            "text_windowed: a request of {} texts, the longest {} WordPieces, is {} tokens "
            f"(texts x (longest + 2)), more than max_windowed_tokens={cap}",
            (texts, longest, size),
        )
        check = tf.debugging.Assert(size <= cap, [message])
        return ids.with_flat_values(after_checks({"ids": ids.flat_values}, [check])["ids"])

    def _run_windows(self, model, windows, names, at=None):
        """The outputs `names` of `model` on the windows, run `window_batch_size` windows at a
        time, one batch after the other: what stays of a batch is what is read from it.

        Args:
          model: The served model's function of the three id tensors.
          windows: The id tensors, [windows, seq] each.
          names: The outputs to return.
          at: None: each window's outputs are returned, [windows, ...]. Else int64
            [batch, length, 2], the (window, position) each output cell reads, and the outputs
            are returned as [batch, length, ...], each cell's from its window and position.

        Returns:
          Name -> output.
        """
        size = self._window_batch_size
        num_windows = tf.shape(windows["input_ids"], out_type=tf.int64)[0]
        num_batches = (num_windows + size - 1) // size
        specs = model.get_concrete_function().structured_outputs
        if at is not None:
            # The cells sorted by window, so that those of a batch are a slice.
            cell_window, cell_position = tf.unstack(tf.reshape(at, [-1, 2]), axis=1)
            order = tf.argsort(cell_window, stable=True)
            cell_window, cell_position = tf.gather(cell_window, order), tf.gather(cell_position, order)
            bounds = tf.searchsorted(cell_window, tf.range(num_batches + 1) * size, out_type=tf.int64)
        skip = 1 if at is None else 2  # the axes replaced by the windows' or the cells'
        arrays = [
            tf.TensorArray(
                specs[name].dtype,
                size=tf.cast(num_batches, tf.int32),
                infer_shape=False,
                element_shape=tf.TensorShape([None]).concatenate(specs[name].shape[skip:]),
            )
            for name in names
        ]

        def run_batch(index, arrays):
            start = index * size
            outputs = model({name: x[start : start + size] for name, x in windows.items()})
            if at is not None:
                cells = slice(bounds[index], bounds[index + 1])
                read = tf.stack([cell_window[cells] - start, cell_position[cells]], axis=-1)
            return index + 1, [
                array.write(
                    tf.cast(index, tf.int32),
                    outputs[name] if at is None else tf.gather_nd(outputs[name], read),
                )
                for name, array in zip(names, arrays, strict=True)
            ]

        # One batch at a time: batches run side by side would hold their activations together.
        _, arrays = tf.while_loop(
            lambda index, _: index < num_batches,
            run_batch,
            (tf.constant(0, tf.int64), arrays),
            parallel_iterations=1,
        )
        values = {name: array.concat() for name, array in zip(names, arrays, strict=True)}
        if at is None:
            return values
        unsorted = tf.math.invert_permutation(order)
        return {
            name: tf.reshape(tf.gather(x, unsorted), tf.concat([tf.shape(at)[:2], tf.shape(x)[1:]], axis=0))
            for name, x in values.items()
        }

    def _serve_examples(self, examples):
        features = {name: tf.io.FixedLenFeature([self._max_seq_length], tf.int64) for name in ID_INPUTS}
        parsed = tf.io.parse_example(examples, features)
        parsed = after_checks(parsed, self._id_checks(parsed))  # before the cast, which would wrap
        return self._served({name: tf.cast(parsed[name], tf.int32) for name in ID_INPUTS})


class _WindowedModel:
    """What `text_windowed` runs on the windows and what it makes of the outputs (see
    `ExportModule`'s `doc_stride`).

    Attributes:
      model: A `ServedModel`, the served model without its `NamedLabels`, if any.
      token_outputs: Its outputs given per token, read from each token's max-context window.
      pooled_outputs: Its outputs pooled over the windows: the `NamedLabels` scores, when
        given per example.
      labels: The served `NamedLabels`, or None; it names its best classes from the pooled or
        per-token scores.
      pooling: "mean" or "max".
      sentence_pooling: A `BertSentenceEncoder`'s `SentencePooling`, when its
        `sentence_embedding` is served (with `sequence_output`), else None.
      sentence_tokens, sentence_output: The output it pools, and its own.

    Raises:
      ValueError: The model has neither outputs per token nor `NamedLabels` scores per example.
    """

    sentence_tokens = "sequence_output"
    sentence_output = "sentence_embedding"

    def __init__(self, served, pooling):
        labels = served.model if isinstance(served.model, NamedLabels) else None
        if labels is not None:
            names = tuple(name for name in served.output_names if name != labels.output)
            served = ServedModel(labels.model, names)
        self.model = served
        self.token_outputs = served.token_outputs()
        per_example = labels is not None and labels.scores not in self.token_outputs
        self.pooled_outputs = (labels.scores,) if per_example else ()
        self.labels = labels
        self.pooling = pooling
        self.sentence_pooling = None
        if isinstance(served.model, BertSentenceEncoder) and self.sentence_output in served.output_names:
            if self.sentence_tokens not in self.token_outputs:
                raise ValueError(f"text_windowed pools {self.sentence_tokens!r}, which is not served")
            self.sentence_pooling = served.model.sentence_pooling
        if not self.token_outputs and not self.pooled_outputs:
            raise ValueError(
                f"text_windowed would return nothing: the outputs {served.output_names} are per "
                "example and not NamedLabels scores"
            )
        clash = [name for name in WINDOWED_TOKEN_OUTPUTS if name in served.output_names]
        if self.token_outputs and clash:
            raise ValueError(f"with doc_stride text_windowed returns {clash[0]!r} itself")


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
    doc_stride=None,
    window_pooling="mean",
    window_batch_size=WINDOW_BATCH_SIZE,
    max_windowed_tokens=MAX_WINDOWED_TOKENS,
    choices=False,
    pack_tokens=True,
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
      doc_stride, window_pooling, window_batch_size, max_windowed_tokens: The `text_windowed`
        signature, windowing long texts (see `ExportModule`); a `doc_stride` of None leaves it
        out.
      choices: Whether the model takes [batch, choices, seq] ids (a multiple-choice model): its
        signatures are then `serving_default` on such ids and `text_choices` (see
        `ExportModule`).
      pack_tokens: Whether the signatures run the model's dense layers on the real tokens only
        (`bert_tf.modeling.token_packing`): the same outputs at the real tokens, zeros at the padding
        (the original computes values there), and the padding costs only its attention.

    Returns:
      The version directory written; with a `NamedLabels` model it also holds
      `assets.extra/labels.txt`, the labels one a line in the order of the scores.

    Raises:
      ValueError: Bad arguments, or the version exists and `overwrite` is False; nothing is
        left under `export_dir` then.
    """
    served = ServedModel(model, output_names, choices=choices)
    if config is None:
        logger.warning(
            "export_saved_model without config: the id signatures accept ids outside the "
            "embedding tables (a lookup past a table fails only on a CPU; a negative id reads "
            "the table's last rows)"
        )
    models = [model, *(extra.model for extra in (extra_signatures or {}).values())]
    with (
        versioned_directory(export_dir, version, overwrite) as (tmp, final),
        token_packing(models, pack_tokens),
    ):
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
            doc_stride,
            window_pooling,
            window_batch_size,
            max_windowed_tokens,
        )
        # Served elsewhere, perhaps without oneDNN or on a GPU: no oneDNN-only forms.
        with onednn.portable():
            tf.saved_model.save(module, tmp, signatures=module.signatures())
        if isinstance(model, NamedLabels):
            files.makedirs(os.path.join(tmp, ASSETS_EXTRA))
            labels = [label.decode("utf-8") for label in model.labels.numpy()]
            write_labels(os.path.join(tmp, ASSETS_EXTRA, LABELS_FILE), labels)
    if text_signatures:
        if doc_stride is None:
            logger.info(
                "The text signatures cut a text past max_seq_length=%d WordPieces ([CLS] and [SEP] "
                "included); export with doc_stride for text_windowed, which windows it",
                max_seq_length,
            )
        else:
            logger.info(
                "The text signatures cut a text past max_seq_length=%d WordPieces; text_windowed "
                "windows it (%d pieces a window, doc_stride=%d; %d windows at a time, requests up to "
                "max_windowed_tokens=%d)",
                max_seq_length,
                max_seq_length - 2,
                doc_stride,
                window_batch_size,
                max_windowed_tokens,
            )
    return final
