"""Edge and cross-runtime export: a BERT model, with its fine-tuned head, as one LiteRT
(`.tflite`) or ONNX file, in float32, float16 or int8, checked in its own runtime.

The file takes the three int32 [batch, seq] inputs `input_ids`, `input_mask` and
`segment_ids`, batch and length both dynamic (seq at most the model's
`max_position_embeddings`), and returns the outputs of the SavedModel's id signature under
its names: `sequence_output` and `pooled_output` for a pretrained model (and `sentence_embedding`
with a pooling, `--pooling` or the one recorded beside the model: a sentence encoder's),
`probabilities` for a classifier or a tagger, `start_logits` and `end_logits` for SQuAD. The
tokenizer stays outside the file (docs/edge.md names one for each runtime).

The converters are the existing ones (BUILD_NOTES, "Edge export"):
- LiteRT: TensorFlow's `TFLiteConverter` on a SavedModel of the id function; `float16` stores
  the weights in float16, `dynamic_int8` the weights in int8 (activations float), `int8` the ops
  of `TFLITE_INT8_OPS` in int8 with activations calibrated on `--calibration_texts`, the
  feed-forward layers hybrid (`hybrid_fully_connected`), every other op float. The file runs in
  LiteRT's interpreter from `ai-edge-litert`.
- ONNX: `tf2onnx` on the same function; onnxruntime's quantization tools for `dynamic_int8`
  (`quantize_dynamic`) and `int8` (`smooth_matmul_inputs`, then `quantize_static`: QDQ on
  `ONNX_INT8_OPS`, per-channel int8 weights, uint8 activations, the matmuls' outputs float), and
  its float16 converter for `float16`. The file runs in `onnxruntime`.

The exporters are optional extras (`pip install -e '.[tflite]'`, `'.[onnx]'`).
"""

import dataclasses
import importlib
import logging
import os
import tempfile
import time
import warnings

import numpy as np
import tensorflow as tf

from bert_tf import files, onednn
from bert_tf.checkpoints.google import open_checkpoint, resolve_checkpoint_prefix
from bert_tf.checkpoints.pretrained import is_keras_file, load_weights
from bert_tf.export.bert import SENTENCE_OUTPUT, SentenceVectorOptions, resolve_pooling
from bert_tf.export.module import ID_INPUTS
from bert_tf.model_files import ModelFileOptions
from bert_tf.model_settings import ModelSettings, read_settings, settings_directory
from bert_tf.modeling import BertPretrainer, BertSentenceEncoder
from bert_tf.modeling.head_table import CLASSES, PER_EXAMPLE, PER_TOKEN, SCORES, head_of_checkpoint
from bert_tf.options import option, redefine
from bert_tf.text.text_lines import InputExample, convert_example, read_examples

logger = logging.getLogger(__name__)

FORMATS = ("tflite", "onnx")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "int8")
# The packages each format needs, and the extra of setup.py that installs them.
FORMAT_MODULES = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnx", "onnxruntime")}
RUNTIMES = {"tflite": "LiteRT", "onnx": "onnxruntime"}
# Largest absolute difference from the Keras model, per output, of the float files.
FLOAT_TOLERANCES = {"none": 1e-4, "float16": 1e-2}
# The int8 files: cosine similarity per example, at least.
MIN_COSINE = 0.99
# After a file past its tolerance, the mode to try next: the nearest one that quantizes less.
NEXT_QUANTIZATION = {"int8": "dynamic_int8", "dynamic_int8": "float16", "float16": "none"}
# LiteRT's int8 files compute only these op kinds in int8 (the others stay float): on MiniLM
# (all-MiniLM-L6-v2), each other kind quantized alone cost the outputs a cosine of 0.35-0.7
# (ADD: the -10000 attention mask and the residual stream's outlier dimensions in one int8
# range; LayerNorm's MEAN, SQUARED_DIFFERENCE, RSQRT, SUB and MUL; the attention's
# BATCH_MATMULs; SOFTMAX, GELU). GATHER quantizes the embedding tables (half of MiniLM's weights).
TFLITE_INT8_OPS = ("FULLY_CONNECTED", "GATHER")
# tf2onnx's opset: 17 is what onnxruntime's quantization and float16 tools handle throughout.
ONNX_OPSET = 17
# The ONNX ops an int8 file quantizes: the matmuls and the embedding tables' gathers. On MiniLM
# every other kind onnxruntime quantizes (Add, Mul, Softmax, ...) cost as much as in LiteRT.
ONNX_INT8_OPS = ("MatMul", "Gemm", "Gather")
# SmoothQuant's migration strength: a matmul's input channel j is divided by
# max|x_j|^a / max|W_j|^(1-a) and the weights' row j multiplied by it (a = 0.5 measured best of
# 0.3, 0.5 and 0.7 on MiniLM, and is the SmoothQuant paper's default).
SMOOTHING_ALPHA = 0.5
# onnxruntime's graph optimizers its sessions run without. MatMulAddFusion turns an int8 file's
# feed-forward output matmul and the residual add after it into a float Gemm before the QDQ
# fusions see it: the weights were then dequantized on every call (MiniLM: 28 ms a call on one
# thread, 16 ms without it, where the matmul runs as MatMulIntegerToFloat).
ONNX_DISABLED_OPTIMIZERS = ["MatMulAddFusion"]
DEFAULT_CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "BERT reads a sentence in both directions at once.",
    "Is the café on the corner open on Sundays? ||| Yes, from nine until noon.",
    "Quantized models trade a little accuracy for a smaller, faster file.",
)
# How an output is compared in an int8 file (`check_outputs`).
ENCODER_OUTPUTS = {"sequence_output": PER_TOKEN, "pooled_output": PER_EXAMPLE}
# A multiple-choice model's check and calibration inputs: the packed texts, this many a question.
CHECK_CHOICES = 4


@dataclasses.dataclass
class EdgeOptions(ModelFileOptions, SentenceVectorOptions):
    """The flags of `tools/export_edge.py`."""

    format: str = option(None, "The file's format: tflite (LiteRT) or onnx.", choices=FORMATS, required=True)
    quantize: str = option(
        "none",
        "none (float32), float16 (weights), dynamic_int8 (weights), int8 (weights and activations; "
        "needs --calibration_texts).",
        choices=QUANTIZATIONS,
    )
    init_checkpoint: str = redefine(
        ModelFileOptions,
        "init_checkpoint",
        required=True,
        help="The model's weights: a Google checkpoint (pretrained, or fine-tuned: its head is "
        "exported too) or a .keras file.",
    )
    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    max_seq_length: int = redefine(
        ModelFileOptions,
        "max_seq_length",
        help="Length of the calibration, check and latency inputs (the file's length is dynamic).",
    )
    output: str = option(None, "The file to write (.tflite or .onnx).", required=True)
    calibration_texts: str = option(
        None, "int8: a file of texts, one a line (`a ||| b` for a pair), to calibrate activations on."
    )
    check_texts: str = option(
        None, "A file of texts, one a line, to check the file against the Keras model on (default: built-in)."
    )
    benchmark: bool = option(
        False, "Also print the latency at batch 1 beside the SavedModel's on TensorFlow."
    )


@dataclasses.dataclass
class EdgeModel:
    """A Keras model to export and its outputs.

    Attributes:
      model: The Keras model, taking the dict of id tensors.
      outputs: Output name -> how an int8 file's output is checked (`PER_TOKEN`,
        `PER_EXAMPLE` or `CLASSES`), in the order of the SavedModel signature's outputs.
      head: What the model is, for the log ("BertModel", "BertModel with mean pooling,
        normalized", "classifier with 3 labels", ...).
      choices: Whether its ids are [batch, choices, seq] (a multiple-choice model).
    """

    model: object
    outputs: dict
    head: str
    choices: bool = False


def require_format(fmt):
    """Imports the packages of `fmt`, or raises naming the extra that installs them.

    Raises:
      ValueError: An unknown format, or a package missing.
    """
    if fmt not in FORMATS:
        raise ValueError(f"--format={fmt}: not one of {', '.join(FORMATS)}")
    for module in FORMAT_MODULES[fmt]:
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ValueError(
                f"--format={fmt} needs the `{fmt}` extra: pip install -e '.[{fmt}]' ({e})"
            ) from None


def edge_model(pretrained, pooling=None, normalize=None, recorded=None):
    """The model of a `Pretrained`'s checkpoint with the head it holds, or with a sentence vector.

    A Google checkpoint with a fine-tuning head (`bert_tf.modeling.head_table.head_of_checkpoint`)
    gives that head's model (the number of labels from its shape; a pooling recorded beside it
    does not apply: the head's outputs are the file's), any other the `BertModel`; a `.keras`
    file its `BertModel` (a `BertPretrainer`'s encoder). With a pooling (`resolve_pooling`: the
    flag, else the recorded one) the `BertModel` is pooled by a `BertSentenceEncoder`, whose
    outputs add `sentence_embedding`.

    Args:
      pretrained: A `Pretrained` (`EdgeOptions.open`).
      pooling, normalize: The `--pooling` and `--normalize` flags; None where not given.
      recorded: The `ModelSettings` recorded beside the model (`read_settings`); None: nothing.

    Returns:
      An `EdgeModel` with the weights loaded.

    Raises:
      ValueError: `--pooling` or `--normalize` for a checkpoint with a head, or as `resolve_pooling`.
    """
    config = pretrained.config
    recorded = recorded or ModelSettings()
    head = None
    if not is_keras_file(pretrained.init_checkpoint):
        shapes = open_checkpoint(
            resolve_checkpoint_prefix(pretrained.init_checkpoint)
        ).get_variable_to_shape_map()
        head, width = head_of_checkpoint(shapes)
    if head is not None:
        flags = (("--pooling", pooling), ("--normalize", normalize))
        given = [flag for flag, value in flags if value is not None]
        if given:
            raise ValueError(
                f"{' and '.join(given)}: {pretrained.init_checkpoint} holds a fine-tuned head "
                f"({head.name}), whose outputs are the file's; pooling is for a BertModel without one"
            )
        if recorded.pooling is not None:
            logger.info(
                "the recorded %s pooling is not applied: the checkpoint's head (%s) gives the file's outputs",
                recorded.pooling,
                head.name,
            )
        model = head.build(config, width)
        load_weights(model, pretrained.init_checkpoint)
        name = f"{head.name} with {width} labels" if head.labels else head.name
        return EdgeModel(model, head.outputs, name, head.choices)
    pooling, normalize = resolve_pooling(pooling, normalize, recorded)
    model, _ = pretrained.model()
    model = model.bert if isinstance(model, BertPretrainer) else model
    if pooling is None:
        return EdgeModel(model, ENCODER_OUTPUTS, "BertModel")
    model = BertSentenceEncoder(config, pooling, normalize, bert=model)
    name = f"BertModel with {pooling} pooling{', normalized' if normalize else ''}"
    return EdgeModel(model, {**ENCODER_OUTPUTS, SENTENCE_OUTPUT: PER_EXAMPLE}, name)


def id_specs(choices=False):
    """The three int32 [batch, seq] inputs ([batch, choices, seq] with `choices`), every
    dimension dynamic, in `ID_INPUTS` order."""
    shape = [None, None, None] if choices else [None, None]
    return [tf.TensorSpec(shape, tf.int32, name=name) for name in ID_INPUTS]


def id_function(edge):
    """`edge.model` as a `tf.function` of the `id_specs` inputs, returning its outputs by name.

    Returns:
      (the `tf.function`, its concrete function).
    """
    names = tuple(edge.outputs)

    def serve(input_ids, input_mask, segment_ids):
        outputs = edge.model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids})
        return {name: outputs[name] for name in names}

    function = tf.function(serve, input_signature=id_specs(edge.choices), autograph=False)
    # Run by LiteRT or onnxruntime: traced with the generic ops, none of oneDNN's forms (whose
    # LayerNorm holds a `PlaceholderWithDefault` that tf2onnx cannot convert).
    with onednn.portable():
        return function, function.get_concrete_function()


def save_id_function(function, variables, directory):
    """Writes `function` (traced by `id_function`) as the `serving_default` signature of a
    SavedModel in `directory`."""
    module = tf.Module()
    module.model_variables = [getattr(v, "value", v) for v in variables]
    tf.saved_model.save(module, directory, signatures={"serving_default": function})


def read_texts(path, flag):
    """The examples of a file of texts (one a line, `a ||| b` for a pair; blank lines skipped).

    Raises:
      ValueError: The file is missing or holds no text; the message names `flag`.
    """
    try:
        examples = [e for e in read_examples(path) if e.text_a or e.text_b]
    except ValueError as e:
        raise ValueError(f"{flag}: {e}") from None
    if not examples:
        raise ValueError(f"{flag}: {path} holds no text (one text a line)")
    return examples


def default_check_examples():
    """`DEFAULT_CHECK_TEXTS` as examples."""
    examples = []
    for i, text in enumerate(DEFAULT_CHECK_TEXTS):
        text_a, _, text_b = (part.strip() for part in text.partition("|||"))
        examples.append(InputExample(i, text_a, text_b or None))
    return examples


def encode(examples, tokenizer, max_seq_length, choices=False):
    """The examples packed as the original's features: int32 [n, max_seq_length] arrays by name.

    With `choices` (a multiple-choice model), the packed examples are the choices of one
    question each `CHECK_CHOICES` of them: [n // CHECK_CHOICES, CHECK_CHOICES, max_seq_length]
    (all of them as one question's choices where there are fewer).
    """
    features = [convert_example(example, tokenizer, max_seq_length) for example in examples]
    arrays = {name: np.array([f[name] for f in features], np.int32) for name in ID_INPUTS}
    if not choices:
        return arrays
    per_question = min(CHECK_CHOICES, len(features))
    rows = len(features) // per_question * per_question
    return {name: a[:rows].reshape(-1, per_question, max_seq_length) for name, a in arrays.items()}


def _rows(inputs):
    """Each row of a batch of arrays (by name) as a batch of one."""
    count = len(next(iter(inputs.values())))
    return [{name: array[i : i + 1] for name, array in inputs.items()} for i in range(count)]


def convert_tflite(saved_model_dir, quantize, calibration, intermediate_size):
    """Converts the SavedModel's `serving_default` to a LiteRT flatbuffer.

    Args:
      saved_model_dir: A SavedModel written by `save_id_function`.
      quantize: One of `QUANTIZATIONS`.
      calibration: For `int8`, the id arrays (by name) to calibrate on, a row at a time.
      intermediate_size: The model's feed-forward width (its config's `intermediate_size`).

    Returns:
      The file's bytes.
    """
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    if quantize == "int8":
        return _convert_tflite_int8(saved_model_dir, calibration, intermediate_size)
    if quantize != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def _tflite_op_names():
    """LiteRT's builtin operator codes -> their names."""
    from tensorflow.lite.python import schema_py_generated as schema

    return {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}


def _tflite_ops(model):
    """(kind, op, subgraph) of each op of a LiteRT model object (`flatbuffer_utils`)."""
    names = _tflite_op_names()
    # Codes below 127 are in the deprecated field, the others in the new one.
    kinds = [names[max(code.builtinCode, code.deprecatedBuiltinCode)] for code in model.operatorCodes]
    return [(kinds[op.opcodeIndex], op, graph) for graph in model.subgraphs for op in graph.operators]


def _convert_tflite_int8(saved_model_dir, calibration, intermediate_size):
    """The int8 LiteRT file: `TFLITE_INT8_OPS` in int8, activations calibrated on `calibration`;
    the feed-forward layers' two FULLY_CONNECTED ops hybrid (`hybrid_fully_connected`); every
    other op in float.

    The feed-forward layers cannot be int8 throughout: an int8 FULLY_CONNECTED's output is int8
    too, in one range per tensor, and on MiniLM the feed-forward output (which writes the
    residual stream's outlier dimensions) and input (GELU's, one neuron per layer up to 25 where
    the rest stay under 5) lose the small values: every FULLY_CONNECTED int8 gave MiniLM's outputs
    a cosine of 0.86, the feed-forward ones hybrid 0.994.

    Returns:
      The file's bytes.
    """
    from tensorflow.lite.tools import flatbuffer_utils

    float_model = flatbuffer_utils.read_model_from_bytearray(
        tf.lite.TFLiteConverter.from_saved_model(saved_model_dir).convert()
    )
    ops = _tflite_ops(float_model)
    feed_forward = [
        graph.tensors[op.outputs[0]].name.decode()
        for kind, op, graph in ops
        if kind == "FULLY_CONNECTED" and intermediate_size in graph.tensors[op.inputs[1]].shape
    ]

    def representative_dataset():
        yield from _rows(calibration)

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
        tf.lite.OpsSet.TFLITE_BUILTINS,
    ]
    # The debugger calibrates in TensorFlow's own (deprecated) interpreter, which warns so. Its
    # denylists are the converter's own way of keeping ops in float.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter,
            debug_dataset=representative_dataset,
            debug_options=tf.lite.experimental.QuantizationDebugOptions(
                denylisted_ops=sorted({kind for kind, _, _ in ops} - set(TFLITE_INT8_OPS)),
                denylisted_nodes=feed_forward,
            ),
        )
        return hybrid_fully_connected(debugger.get_nondebug_quantized_model())


def _int8_per_channel(kernel, axis):
    """Symmetric int8 weights with a scale per channel along `axis` (the output channels).

    Args:
      kernel: A float32 2-D array.
      axis: The axis of the output channels.

    Returns:
      (the int8 array, the float32 scales: `kernel` ~ int8 * scale along `axis`).
    """
    other = 1 - axis
    scale = np.maximum(np.max(np.abs(kernel), axis=other), np.finfo(np.float32).tiny) / 127.0
    quantized = np.round(kernel / np.expand_dims(scale, other)).astype(np.int8)
    return quantized, scale.astype(np.float32)


def hybrid_fully_connected(data):
    """Stores the float32 weights of a LiteRT file's float FULLY_CONNECTED ops in int8.

    Each output channel's weights get a symmetric scale of their own. An op with float input
    and int8 weights is LiteRT's hybrid kernel (what `dynamic_int8` gives every matmul): the
    input quantized to int8 on each call, one asymmetric range per row (token), int8 products,
    float output.

    Args:
      data: The file's bytes.

    Returns:
      The changed file's bytes.
    """
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model_from_bytearray(bytearray(data))
    for kind, op, graph in _tflite_ops(model):
        if kind != "FULLY_CONNECTED":
            continue
        inputs, weights = graph.tensors[op.inputs[0]], graph.tensors[op.inputs[1]]
        buffer = model.buffers[weights.buffer]
        if inputs.type != schema.TensorType.FLOAT32 or weights.type != schema.TensorType.FLOAT32:
            continue
        if buffer.data is None or len(buffer.data) == 0:  # weights computed, not stored
            continue
        kernel = np.frombuffer(buffer.data.tobytes(), np.float32).reshape(weights.shape)  # [out, in]
        quantized, scale = _int8_per_channel(kernel, axis=0)
        buffer.data = quantized.ravel().view(np.uint8)
        weights.type = schema.TensorType.INT8
        weights.quantization = schema.QuantizationParametersT()
        weights.quantization.scale = scale.astype(np.float32).tolist()
        weights.quantization.zeroPoint = [0] * len(scale)
        weights.quantization.quantizedDimension = 0
        op.builtinOptions.asymmetricQuantizeInputs = True
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def convert_onnx(function, quantize, calibration, work_dir, hidden_size, intermediate_size):
    """Converts an id function to ONNX.

    Args:
      function: The `tf.function` of `id_function`.
      quantize: One of `QUANTIZATIONS`.
      calibration: For `int8`, the id arrays (by name) to calibrate on, a row at a time.
      work_dir: A directory for the intermediate files.
      hidden_size: The model's width (its config's `hidden_size`).
      intermediate_size: The model's feed-forward width (its config's `intermediate_size`).

    Returns:
      The file's bytes.
    """
    import onnx
    import tf2onnx

    # Its INFO lines (versions, the optimizer's op counts) say nothing a user acts on.
    logging.getLogger("tf2onnx").setLevel(logging.WARNING)

    proto, _ = tf2onnx.convert.from_function(
        function, input_signature=function.input_signature, opset=ONNX_OPSET
    )
    if quantize == "none":
        return proto.SerializeToString()
    if quantize == "float16":
        from onnxruntime.transformers import float16

        # tf2onnx computes the end of the position table's slice with a float `Max` on the
        # sequence length. Kept float32 (onnxruntime's default block list) beside its float16
        # constant, the end comes out 0 in onnxruntime 1.32, and the embeddings' sum fails to
        # broadcast; in float16 it is exact (lengths up to 2048).
        blocked = [op for op in float16.DEFAULT_OP_BLOCK_LIST if op != "Max"]
        return float16.convert_float_to_float16(
            proto, keep_io_types=True, op_block_list=blocked
        ).SerializeToString()
    from onnxruntime import quantization

    source = os.path.join(work_dir, "float32.onnx")
    target = os.path.join(work_dir, f"{quantize}.onnx")
    onnx.save(proto, source)
    if quantize == "dynamic_int8":
        # Per-channel weights; the feed-forward matmuls' weights int8 too, but computed in float
        # (`dequantized_weights`): their inputs (the LayerNorm's outlier dimension, GELU's outlier
        # neuron) in one dynamic uint8 range per tensor lose the small values. On MiniLM (22
        # sentences) per-tensor weights gave a cosine of 0.94, per-channel 0.985, with the
        # feed-forward matmuls computed in float 0.997.
        feed_forward = _feed_forward_matmuls(proto, intermediate_size)
        quantization.quantize_dynamic(
            source,
            target,
            weight_type=quantization.QuantType.QInt8,
            per_channel=True,
            nodes_to_exclude=feed_forward,
        )
        model = onnx.load(target)
        dequantized_weights(model, feed_forward)
        onnx.save(model, target)
    else:
        prepared = os.path.join(work_dir, "prepared.onnx")
        # Symbolic shape inference needs sympy, which onnxruntime does not install.
        quantization.shape_inference.quant_pre_process(source, prepared, skip_symbolic_shape=True)
        model = onnx.load(prepared)
        smooth_matmul_inputs(model, calibration, hidden_size)
        onnx.save(model, prepared)

        class Reader(quantization.CalibrationDataReader):
            def __init__(self):
                self.rows = iter(_rows(calibration))

            def get_next(self):
                return next(self.rows, None)

        # Activations uint8 with int8 weights (U8S8): with int8 activations onnxruntime 1.32 on
        # an x86 CPU without VNNI leaves the weights' MatMuls unfused (BUILD_NOTES). The matmuls'
        # outputs stay float (MatMulIntegerToFloat): the feed-forward output matmuls alone gave
        # MiniLM a cosine of 0.90 with their outputs (the residual stream's outlier dimensions)
        # in one uint8 range, 0.994 float.
        # The weights in their full 8 bits: in 7 (`reduce_range`, against the 16-bit pair sums of
        # x86's u8 x s8 instruction without VNNI) MiniLM's cosine fell from 0.9927 to 0.9893.
        quantization.quantize_static(
            prepared,
            target,
            Reader(),
            quant_format=quantization.QuantFormat.QDQ,
            op_types_to_quantize=list(ONNX_INT8_OPS),
            activation_type=quantization.QuantType.QUInt8,
            weight_type=quantization.QuantType.QInt8,
            per_channel=True,
            extra_options={"OpTypesToExcludeOutputQuantization": ["MatMul", "Gemm"]},
        )
    with open(target, "rb") as f:
        return f.read()


def _feed_forward_matmuls(model, intermediate_size):
    """The names of the ONNX graph's MatMul nodes whose constant weights have
    `intermediate_size` among their dimensions: the feed-forward layers'."""
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and any(intermediate_size in shapes.get(i, ()) for i in node.input)
    ]


def dequantized_weights(model, names):
    """Stores the constant [in, out] weights of the named MatMul nodes in int8, computed in float.

    Each output channel gets a symmetric scale of its own; a `DequantizeLinear` before the MatMul
    gives it the float weights back on each call, so the file holds a byte a weight and the
    product is float (its input is not quantized).

    Args:
      model: An ONNX `ModelProto`, changed in place.
      names: The MatMul nodes' names.
    """
    from onnx import helper, numpy_helper

    initializers = {t.name: t for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        if node.name in names:
            (name,) = [i for i in node.input if i in initializers]
            kernel = numpy_helper.to_array(initializers[name]).astype(np.float32)  # [in, out]
            quantized, scale = _int8_per_channel(kernel, axis=1)
            model.graph.initializer.remove(initializers[name])
            model.graph.initializer.extend(
                [
                    numpy_helper.from_array(quantized, f"{name}/int8"),
                    numpy_helper.from_array(scale, f"{name}/scale"),
                    numpy_helper.from_array(np.zeros(scale.shape, np.int8), f"{name}/zero_point"),
                ]
            )
            inputs = [f"{name}/int8", f"{name}/scale", f"{name}/zero_point"]
            nodes.append(
                helper.make_node("DequantizeLinear", inputs, [name], name=f"{name}/dequantize", axis=1)
            )
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def smooth_matmul_inputs(model, calibration, width):
    """SmoothQuant on an ONNX model: scales each input channel of the matmuls that read `width`
    channels a row per token (the hidden states: every matmul with constant weights but the
    feed-forward output's, the pooler's and a head's) so that an int8 range per tensor fits
    their activations.

    Channel j of such an input x is divided by `s_j = max|x_j|^a / max|W_j|^(1 - a)` (a is
    `SMOOTHING_ALPHA`; `max|x_j|` over the calibration rows, `max|W_j|` over row j of the
    weights of every matmul reading x), and row j of those weights multiplied by it: the same
    products, with the outlier channels (MiniLM's LayerNorm outputs hold one near 30 where the
    median channel stays under 2) brought nearer the others. A float `Mul` by `1 / s` goes
    before the matmuls. On MiniLM the LayerNorm outputs' matmuls then cost the cosine 0.002
    instead of 0.015. (The feed-forward output's input, GELU's, lost more smoothed than not.)

    Args:
      model: An ONNX `ModelProto`, changed in place.
      calibration: The id arrays (by name) to run the model on, a row at a time.
      width: The number of input channels of the matmuls to smooth.
    """
    import onnx
    import onnxruntime
    from onnx import numpy_helper

    graph = model.graph
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    readers = {}  # input name -> [(node, its weights [width, out] as stored or transposed)]
    for node in graph.node:
        if node.op_type not in ("MatMul", "Gemm") or node.input[1] not in initializers:
            continue
        transposed = any(a.name == "transB" and a.i for a in node.attribute)
        kernel = numpy_helper.to_array(initializers[node.input[1]])
        if kernel.ndim == 2 and (kernel.T if transposed else kernel).shape[0] == width:
            readers.setdefault(node.input[0], []).append((node, transposed))
    names = list(readers)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.extend(
        onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in names
    )
    session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    peaks = np.zeros((len(names), width), np.float32)
    rows = np.zeros(len(names), np.int64)  # rows of each input over the calibration
    for row in _rows(calibration):
        for i, x in enumerate(session.run(names, row)):
            x = x.reshape(-1, width)
            peaks[i] = np.maximum(peaks[i], np.max(np.abs(x), axis=0))
            rows[i] += len(x)
    smoothing = {}  # input name -> its Mul
    # Only the inputs of a row per token: a channel's maximum over the few rows of a per-example
    # input (the pooler's, a head's) is no bound on other texts (google_tiny's pooled output on
    # random ids fell to a cosine of 0.98 with the pooler smoothed).
    for name, peak, count in zip(names, peaks, rows, strict=True):
        if count < rows.max():
            continue
        kernels = {}
        for node, transposed in readers[name]:
            kernel = numpy_helper.to_array(initializers[node.input[1]])
            kernels[node.input[1]] = (kernel.T if transposed else kernel, transposed)
        kernel_peak = np.max([np.max(np.abs(k), axis=1) for k, _ in kernels.values()], axis=0)
        tiny = np.finfo(np.float32).tiny
        alpha = SMOOTHING_ALPHA
        scale = np.maximum(peak, tiny) ** alpha / np.maximum(kernel_peak, tiny) ** (1 - alpha)
        for weights_name, (kernel, transposed) in kernels.items():
            scaled = (kernel * scale[:, None]).astype(np.float32)
            initializers[weights_name].CopyFrom(
                numpy_helper.from_array(scaled.T if transposed else scaled, weights_name)
            )
        for node, _ in readers[name]:
            node.input[0] = f"{name}/smoothed"
        graph.initializer.append(numpy_helper.from_array((1 / scale).astype(np.float32), f"{name}/smoothing"))
        smoothing[name] = onnx.helper.make_node(
            "Mul", [name, f"{name}/smoothing"], [f"{name}/smoothed"], name=f"{name}/smooth"
        )
    # Each Mul right after the node computing its input (first if a graph input): the graph
    # stays in topological order.
    computed = {output for node in graph.node for output in node.output}
    nodes = [mul for name, mul in smoothing.items() if name not in computed]
    for node in graph.node:
        nodes.append(node)
        nodes.extend(smoothing[output] for output in node.output if output in smoothing)
    del graph.node[:]
    graph.node.extend(nodes)


class Runtime:
    """A written file in its own runtime: LiteRT's interpreter or an onnxruntime session.

    Args:
      fmt: One of `FORMATS`.
      path: The local file.
      output_names: The outputs to return, by name.
    """

    def __init__(self, fmt, path, output_names):
        self.output_names = tuple(output_names)
        self._path = path
        if fmt == "tflite":
            from ai_edge_litert.interpreter import Interpreter

            self._interpreter = Interpreter(model_path=path, num_threads=os.cpu_count())
            self._runner = self._interpreter.get_signature_runner()
        else:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            # The masked scores' exponentials underflow to denormal floats, which x86 computes
            # slowly: at MiniLM's batch 1, seq 128, the softmax took 13 ms a call, 0.8 ms flushed
            # to zero (as TensorFlow's kernels run).
            options.add_session_config_entry("session.set_denormal_as_zero", "1")
            self._session = onnxruntime.InferenceSession(
                path,
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=ONNX_DISABLED_OPTIMIZERS,
            )
            self._runner = None

    def __call__(self, inputs):
        """The outputs (name -> float32 array) on int32 id arrays of any batch and length."""
        if self._runner is not None:
            outputs = self._runner(**inputs)
        else:
            outputs = dict(
                zip(self.output_names, self._session.run(list(self.output_names), inputs), strict=True)
            )
        return {name: np.asarray(outputs[name], np.float32) for name in self.output_names}

    def float_ops(self):
        """The op types (name -> count) of the file that compute in float: in an int8 file, the
        float fallback; LiteRT's hybrid ops (float input, int8 weights) are named so."""
        counts = {}
        if self._runner is not None:
            dtypes = {t["index"]: t["dtype"] for t in self._interpreter.get_tensor_details()}
            for op in self._interpreter._get_ops_details():
                name = op["op_name"]
                if name not in ("QUANTIZE", "DEQUANTIZE", "DELEGATE") and any(
                    dtypes.get(i) == np.float32 for i in op["inputs"]
                ):
                    if any(dtypes.get(i) == np.int8 for i in op["inputs"]):
                        name += " (hybrid)"
                    counts[name] = counts.get(name, 0) + 1
            return counts
        import onnx

        graph = onnx.load(self._path).graph
        dequantized = {
            out for node in graph.node if node.op_type == "DequantizeLinear" for out in node.output
        }
        for node in graph.node:
            if node.op_type in _ONNX_FLOAT_MATH and dequantized.isdisjoint(node.input):
                counts[node.op_type] = counts.get(node.op_type, 0) + 1
        return counts


# The ONNX ops of BERT's graph that do float arithmetic (the others move ints or shapes).
_ONNX_FLOAT_MATH = frozenset(
    (
        "Add",
        "Sub",
        "Mul",
        "Div",
        "MatMul",
        "Softmax",
        "Tanh",
        "Erf",
        "Pow",
        "Sqrt",
        "Reciprocal",
        "ReduceMean",
    )
)


@dataclasses.dataclass
class CheckRow:
    """One output's comparison with the Keras model.

    Attributes:
      output: The output's name.
      max_abs_diff: The largest absolute difference.
      measure: What `value` is: "max abs diff", "min cosine" or "arg-max agreement".
      value: The measure's value.
      limit: The bound `value` must meet (at most for a difference, at least otherwise).
      ok: Whether it does.
    """

    output: str
    max_abs_diff: float
    measure: str
    value: float
    limit: float
    ok: bool

    def line(self):
        """The row as one line of the tool's report."""
        verdict = "ok" if self.ok else "PAST TOLERANCE"
        if self.measure == "max abs diff":
            return f"  {self.output}: max abs diff {self.value:.2e} (<= {self.limit:g}) {verdict}"
        return (
            f"  {self.output}: max abs diff {self.max_abs_diff:.2e}, {self.measure} {self.value:.6f} "
            f"(>= {self.limit:g}) {verdict}"
        )


def _cosines(expected, actual):
    """The cosine similarity of each row of two [n, d] arrays (1 where both rows are zero)."""
    dot = np.sum(expected * actual, axis=1)
    norms = np.linalg.norm(expected, axis=1) * np.linalg.norm(actual, axis=1)
    return np.where(norms > 0, dot / np.maximum(norms, 1e-30), np.where(dot == 0, 1.0, 0.0))


def check_outputs(expected, actual, input_mask, kinds, quantize):
    """Compares a file's outputs with the Keras model's.

    A float file (`none`, `float16`) is held to `FLOAT_TOLERANCES` in the largest absolute
    difference. An int8 one (`dynamic_int8`, `int8`) to a cosine similarity of at least
    `MIN_COSINE` per example: each row of a `PER_EXAMPLE` output, and each example's real
    tokens (`input_mask` 1) of a `PER_TOKEN` output taken together; a `CLASSES` output must
    pick the same class (arg-max) for every example; a `SCORES` output (one number an example)
    to `MIN_COSINE` over the batch's scores taken together.

    Args:
      expected, actual: Output name -> float array, [batch, ...].
      input_mask: The int [batch, seq] mask of the inputs.
      kinds: Output name -> `PER_TOKEN`, `PER_EXAMPLE`, `CLASSES` or `SCORES`.
      quantize: One of `QUANTIZATIONS`.

    Returns:
      A `CheckRow` per output, in the order of `kinds`.
    """
    rows = []
    for name, kind in kinds.items():
        want, got = np.asarray(expected[name], np.float64), np.asarray(actual[name], np.float64)
        diff = float(np.max(np.abs(want - got))) if want.size else 0.0
        if quantize in FLOAT_TOLERANCES:
            limit = FLOAT_TOLERANCES[quantize]
            rows.append(CheckRow(name, diff, "max abs diff", diff, limit, diff <= limit))
        elif kind == CLASSES:
            agreement = float(np.mean(np.argmax(want, -1) == np.argmax(got, -1)))
            rows.append(CheckRow(name, diff, "arg-max agreement", agreement, 1.0, agreement == 1.0))
        else:
            if kind == PER_TOKEN:
                mask = np.asarray(input_mask) > 0
                mask = mask.reshape(mask.shape + (1,) * (want.ndim - 2))
                want, got = want * mask, got * mask
            rows_of = (lambda a: a.reshape(1, -1)) if kind == SCORES else (lambda a: a.reshape(len(a), -1))
            cosine = float(np.min(_cosines(rows_of(want), rows_of(got))))
            rows.append(CheckRow(name, diff, "min cosine", cosine, MIN_COSINE, cosine >= MIN_COSINE))
    return rows


def latency(call, inputs, repeats=20):
    """The median seconds of `call(inputs)` over `repeats` calls, after two to warm up."""
    for _ in range(2):
        call(inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call(inputs)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


@dataclasses.dataclass
class EdgeExport:
    """What `export_edge` did.

    Attributes:
      path: The file written, or None where the check failed (nothing is written then).
      size: The file's bytes.
      float32_bytes: The model's weights in float32 (what a float32 file holds, nearly).
      rows: The `CheckRow`s.
      float_ops: The op types (name -> count) computing in float.
      latency: None, or (the file's runtime, the SavedModel on TensorFlow) seconds per call
        at batch 1 and `max_seq_length`.
      edge: The `EdgeModel`.
    """

    path: str
    size: int
    float32_bytes: int
    rows: list
    float_ops: dict
    latency: tuple
    edge: EdgeModel

    @property
    def ok(self):
        return all(row.ok for row in self.rows)


def export_edge(options):
    """Exports, checks and (if the check passes) writes the file `EdgeOptions` describe.

    Every input is checked before the work: the extra's packages, the model files and the
    sequence length (`open_pretrained`), the output path, the calibration and check texts, the
    pooling flags (`edge_model`).

    Returns:
      An `EdgeExport`.

    Raises:
      ValueError: Bad input; nothing is written then.
    """
    if options.quantize not in QUANTIZATIONS:
        raise ValueError(f"--quantize={options.quantize}: not one of {', '.join(QUANTIZATIONS)}")
    require_format(options.format)
    if not options.init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    if not options.output:
        raise ValueError("--output is required")
    if options.max_seq_length < 2:
        raise ValueError(f"--max_seq_length={options.max_seq_length}: at least 2 ([CLS] and [SEP])")
    if options.quantize == "int8" and not options.calibration_texts:
        raise ValueError("--quantize=int8 needs --calibration_texts (a file of texts, one a line)")
    pretrained = options.open()
    files.check_output_path(options.output, "--output")
    tokenizer = pretrained.tokenizer()
    check_examples = (
        read_texts(options.check_texts, "--check_texts") if options.check_texts else default_check_examples()
    )
    calibration_texts = None
    if options.quantize == "int8":
        calibration_texts = read_texts(options.calibration_texts, "--calibration_texts")
    recorded = read_settings(settings_directory(options.bert_config_file, options.init_checkpoint))
    edge = edge_model(pretrained, options.pooling, options.normalize, recorded)
    calibration = None
    if calibration_texts is not None:
        calibration = encode(calibration_texts, tokenizer, options.max_seq_length, edge.choices)
    check_inputs = encode(check_examples, tokenizer, options.max_seq_length, edge.choices)
    function, concrete = id_function(edge)
    float32_bytes = sum(int(np.prod(w.shape)) * 4 for w in edge.model.weights)
    with tempfile.TemporaryDirectory(prefix="bert_tf_edge_") as work_dir:
        saved_model_dir = os.path.join(work_dir, "saved_model")
        save_id_function(concrete, edge.model.weights, saved_model_dir)
        if options.format == "tflite":
            data = convert_tflite(
                saved_model_dir, options.quantize, calibration, pretrained.config.intermediate_size
            )
        else:
            data = convert_onnx(
                function,
                options.quantize,
                calibration,
                work_dir,
                pretrained.config.hidden_size,
                pretrained.config.intermediate_size,
            )
        local = os.path.join(work_dir, f"model.{options.format}")
        with open(local, "wb") as f:
            f.write(data)
        runtime = Runtime(options.format, local, edge.outputs)
        expected = {name: value.numpy() for name, value in concrete(**check_inputs).items()}
        rows = check_outputs(
            expected, runtime(check_inputs), check_inputs["input_mask"], edge.outputs, options.quantize
        )
        float_ops = runtime.float_ops() if options.quantize == "int8" else {}
        timing = None
        if options.benchmark:
            one = {name: array[:1] for name, array in check_inputs.items()}
            served = tf.saved_model.load(saved_model_dir).signatures["serving_default"]
            one_tensors = {name: tf.constant(array) for name, array in one.items()}
            timing = (latency(runtime, one), latency(lambda x: served(**x), one_tensors))
        result = EdgeExport(None, len(data), float32_bytes, rows, float_ops, timing, edge)
        if result.ok:
            with (
                files.atomic_output(options.output, f".{options.format}") as tmp,
                files.open_file(tmp, "wb") as f,
            ):
                f.write(data)
            result.path = options.output
    return result


def run_export_edge(options):
    """`export_edge` of `EdgeOptions` (`tools/export_edge.py`); prints the check, the size
    and, with `--benchmark`, the latencies.

    Returns:
      The exit status: 1 when an output is past its tolerance (nothing written), else 0.
    """
    result = export_edge(options)
    runtime = RUNTIMES[options.format]
    print(
        f"{result.edge.head} as {options.format} ({options.quantize}): {result.size / 1e6:.2f} MB, "
        f"{result.size / result.float32_bytes:.2f}x its float32 weights "
        f"({result.float32_bytes / 1e6:.2f} MB); inputs int32 "
        f"{'[batch, choices, seq]' if result.edge.choices else '[batch, seq]'}, every dimension dynamic"
    )
    if result.float_ops:
        ops = ", ".join(f"{name} x{count}" for name, count in sorted(result.float_ops.items()))
        print(f"ops left in float (the int8 file's float fallback): {ops}")
    print(f"check in {runtime} against the Keras model at seq {options.max_seq_length}:")
    for row in result.rows:
        print(row.line())
    if result.latency is not None:
        edge_seconds, tf_seconds = result.latency
        print(
            f"latency at batch 1, seq {options.max_seq_length}: {runtime} {edge_seconds * 1e3:.2f} ms, "
            f"SavedModel on TensorFlow {tf_seconds * 1e3:.2f} ms ({tf_seconds / edge_seconds:.2f}x)"
        )
    if not result.ok:
        retry = NEXT_QUANTIZATION.get(options.quantize)
        advice = f"try --quantize={retry}" if retry else "float32 should match: please report the model"
        print(f"not written: an output is past its tolerance ({options.output}); {advice}")
        return 1
    print(f"Wrote {result.path}")
    return 0
