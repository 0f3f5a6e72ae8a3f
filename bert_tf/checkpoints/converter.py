"""Converting Google checkpoints to Keras and back, with a numeric check of every conversion.

A converted model is run next to the float64 NumPy reference (`bert_tf.checkpoints.reference`, written from
the math, not from the Keras code) on generated inputs with padding, and the largest absolute
difference of each component is reported.
"""

import dataclasses
import logging
import os

import keras
import numpy as np

from bert_tf import files
from bert_tf.checkpoints import reference
from bert_tf.checkpoints.google import (
    checkpoint_output_prefix,
    checkpoint_value,
    load_google_checkpoint,
    resolve_checkpoint_prefix,
    save_google_checkpoint,
)
from bert_tf.checkpoints.pretrained import load_keras_bert
from bert_tf.config import ORIGINAL_ACTIVATIONS, BertConfig
from bert_tf.modeling import BertModel, BertPretrainer
from bert_tf.options import option

logger = logging.getLogger(__name__)

# float32 against float64: the fixtures agree to 2e-6 for the tiny model; deeper and wider models
# accumulate more rounding, so the default bound leaves room for BERT-Large.
DEFAULT_TOLERANCE = 1e-4

_HEAD_VARIABLES = ("cls/predictions/output_bias", "cls/seq_relationship/output_weights")


@dataclasses.dataclass
class Verification:
    """Per-component largest absolute differences, Keras float32 vs NumPy float64.

    Attributes:
      rows: (component, max_abs_diff) in the order the model computes them.
      tolerance: The bound each difference is checked against.
    """

    rows: list
    tolerance: float

    @property
    def ok(self):
        return all(diff <= self.tolerance for _, diff in self.rows)

    @property
    def max_abs_diff(self):
        return max(diff for _, diff in self.rows)

    def format_table(self):
        """The rows as a fixed-width text table with a pass/fail column."""
        width = max(len(name) for name, _ in self.rows)
        lines = [f"{'component':<{width}}  max |keras - reference|", "-" * (width + 26)]
        for name, diff in self.rows:
            flag = "ok" if diff <= self.tolerance else "ABOVE TOLERANCE"
            lines.append(f"{name:<{width}}  {diff:.3e}  {flag}")
        verdict = "PASS" if self.ok else "FAIL"
        lines.append(f"{verdict}: largest difference {self.max_abs_diff:.3e}, tolerance {self.tolerance:.1e}")
        return "\n".join(lines)


def make_check_inputs(config, batch_size=3, seq_length=64, max_predictions=8, seed=0):
    """Random inputs that exercise padding, both segments and the MLM gather.

    Row 0 is full length; the others are padded to shorter real lengths. Each row's second
    half of real tokens is segment 1.

    Args:
      config: A `BertConfig`.
      batch_size: Rows.
      seq_length: Tokens per row, at most `config.max_position_embeddings`.
      max_predictions: Masked LM positions per row.
      seed: NumPy seed.

    Returns:
      A dict of int32 `input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`.
    """
    seq_length = min(seq_length, config.max_position_embeddings)
    rng = np.random.RandomState(seed)
    lengths = np.linspace(seq_length, max(2, seq_length // 4), batch_size).astype(int)
    input_ids = rng.randint(0, config.vocab_size, size=(batch_size, seq_length))
    positions = np.arange(seq_length)[None, :]
    input_mask = (positions < lengths[:, None]).astype(np.int32)
    segment_ids = ((positions >= (lengths // 2)[:, None]) & (input_mask == 1)).astype(np.int32)
    segment_ids = np.minimum(segment_ids, config.type_vocab_size - 1)
    input_ids = input_ids * input_mask
    masked_lm_positions = np.stack(
        [np.sort(rng.randint(0, length, size=max_predictions)) for length in lengths]
    )
    return {
        "input_ids": input_ids.astype(np.int32),
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": masked_lm_positions.astype(np.int32),
    }


def verify_against_reference(model, weights, config, inputs, tolerance=DEFAULT_TOLERANCE):
    """Runs `model` and the float64 reference on `inputs` and compares every component.

    Args:
      model: A `BertModel` or `BertPretrainer` holding `weights`.
      weights: Google name -> array, as `reference.load_checkpoint_weights` returns.
      config: The `BertConfig` of both.
      inputs: As `make_check_inputs` returns.
      tolerance: Bound for `Verification.ok`.

    Returns:
      A `Verification`.
    """
    with_heads = isinstance(model, BertPretrainer)
    model_inputs = inputs if with_heads else {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
    got = model(model_inputs, training=False)
    want = reference.reference_forward(
        weights,
        config,
        inputs["input_ids"],
        inputs["input_mask"],
        inputs["segment_ids"],
        masked_lm_positions=inputs["masked_lm_positions"] if with_heads else None,
    )
    pairs = [("bert/embeddings", got["embedding_output"], want["embedding_output"])]
    for i, layer_output in enumerate(got["all_encoder_layers"]):
        pairs.append((f"bert/encoder/layer_{i}", layer_output, want[f"encoder_layer_{i}"]))
    if "pooled_output" in want:  # a checkpoint without a pooler leaves it untrained
        pairs.append(("bert/pooler", got["pooled_output"], want["pooled_output"]))
    if with_heads:
        pairs.append(("cls/predictions", got["masked_lm_log_probs"], want["masked_lm_log_probs"]))
        pairs.append(
            ("cls/seq_relationship", got["next_sentence_log_probs"], want["next_sentence_log_probs"])
        )
    rows = [
        (name, float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b))))) for name, a, b in pairs
    ]
    return Verification(rows=rows, tolerance=tolerance)


@dataclasses.dataclass
class Conversion:
    """The result of `google_to_keras`: the model, what was loaded, and the check."""

    model: keras.Model
    load_report: object
    verification: Verification


def google_to_keras(bert_config_file, init_checkpoint, output=None, tolerance=DEFAULT_TOLERANCE, seed=0):
    """Loads a Google checkpoint into Keras, checks it against the reference, optionally saves it.

    The model is a `BertPretrainer` when the checkpoint has the pretraining heads, else a
    `BertModel`.

    Args:
      bert_config_file: The checkpoint's `bert_config.json`.
      init_checkpoint: A Google checkpoint: its prefix, directory, `.index` or `.data` file.
      output: If given, where to write the Keras model: a `.keras` file (the whole model) or
        a `.weights.h5` file (weights only; rebuild with the config). Only written if the
        check passes; written to a temporary name, then renamed.
      tolerance: Largest allowed difference from the reference.
      seed: Seed of the generated check inputs.

    Returns:
      A `Conversion`.

    Raises:
      ValueError: Bad config, checkpoint or output name (the message names it).
    """
    if output:
        if not output.endswith((".keras", ".weights.h5")):
            raise ValueError(f"{output}: the output must end in .keras or .weights.h5")
        files.check_output_path(output, "--output")
    # The weights are read where the model loads them (a training checkpoint's shard of
    # optimizer slots is not needed), and checked against the reference, which reads them too.
    config = BertConfig.from_json_file(bert_config_file)
    prefix = resolve_checkpoint_prefix(init_checkpoint)
    names = reference.checkpoint_variable_names(prefix)
    model_class = BertPretrainer if all(n in names for n in _HEAD_VARIABLES) else BertModel
    model = model_class(config)
    # Refuses a config of another depth than the checkpoint's, which the check below would not
    # see (the reference reads the same config).
    report = load_google_checkpoint(model, prefix)
    # The reference reads the checkpoint itself, so a loading mistake cannot hide; it reads the
    # weights the model took (not a training checkpoint's optimizer slots).
    weights = reference.load_checkpoint_weights(prefix, report.loaded)
    verification = verify_against_reference(
        model, weights, config, make_check_inputs(config, seed=seed), tolerance
    )
    if output and verification.ok:
        save_keras(model, output)
    return Conversion(model=model, load_report=report, verification=verification)


def save_keras(model, output):
    """Saves a model as `.keras` or `.weights.h5`, through a temporary name."""
    suffix = ".weights.h5" if output.endswith(".weights.h5") else ".keras"
    with files.atomic_output(output, suffix) as tmp:
        if suffix == ".keras":
            model.save(tmp)
        else:
            model.save_weights(tmp)


def keras_to_google(keras_model, output_checkpoint):
    """Writes a Keras model as a Google checkpoint plus `bert_config.json`, and checks the bytes.

    Args:
      keras_model: A bert_tf model, or the path of one saved as `.keras`.
      output_checkpoint: The prefix to write, e.g. `out/bert_model.ckpt`, or a directory
        (an existing one, or a path ending in "/"), where `bert_model.ckpt` is written; the
        config goes to `bert_config.json` in the same directory.

    Returns:
      (the model that was written, the checkpoint prefix written).

    Raises:
      ValueError: The `.keras` file is missing or not a bert_tf model, the output cannot be
        written there, or the written checkpoint does not read back identically.
    """
    output_checkpoint = checkpoint_output_prefix(output_checkpoint)
    files.check_output_path(output_checkpoint, "--output")
    if isinstance(keras_model, str):
        keras_model = load_keras_bert(keras_model)
    foreign = [w.path for w in keras_model.weights if not w.path.startswith(("bert/", "cls/"))]
    if isinstance(keras_model, (BertModel, BertPretrainer)) and foreign:
        raise ValueError(
            f"{keras_model.name}: its weight paths are not Google's names ({foreign[0]}, ...): build "
            "the model with its default name, outside any name scope"
        )
    if keras_model.config.hidden_act not in ORIGINAL_ACTIVATIONS:
        logger.warning(
            "the bert_config.json written has hidden_act=%r, bert_tf's: the original's modeling.py reads %s",
            keras_model.config.hidden_act,
            ", ".join(ORIGINAL_ACTIVATIONS),
        )
    save_google_checkpoint(keras_model, output_checkpoint)
    keras_model.config.to_json_file(os.path.join(os.path.dirname(output_checkpoint), "bert_config.json"))
    written = reference.load_checkpoint_weights(output_checkpoint)
    for weight in keras_model.weights:
        if checkpoint_value(weight).tobytes() != written[weight.path].tobytes():
            raise ValueError(f"{output_checkpoint}: {weight.path} did not read back identically")
    return keras_model, output_checkpoint


@dataclasses.dataclass
class ConvertOptions:
    """The flags of `tools/convert_checkpoint.py`."""

    bert_config_file: str = option(None, "The checkpoint's bert_config.json.")
    init_checkpoint: str = option(None, "Google checkpoint prefix or its directory.")
    keras_model: str = option(None, "A bert_tf model saved as .keras, to write back as a Google checkpoint.")
    output: str = option(None, "Keras file (.keras / .weights.h5) or Google checkpoint prefix.")
    tolerance: float = option(
        None, f"Largest allowed max-abs difference from the reference (default {DEFAULT_TOLERANCE:g})."
    )
    seed: int = option(0, "Seed of the generated check inputs.")
    print_parameters: bool = option(True, "Print the parameter count per component.")


def run_convert(options):
    """Converts as `ConvertOptions` say (`tools/convert_checkpoint.py`) and prints the report.

    Google -> Keras (`--init_checkpoint`): the load report, the parameter table and the numeric
    check against the float64 reference, then the output written. Keras -> Google
    (`--keras_model`): the checkpoint written and read back.

    Returns:
      The exit status: 1 when the check is above tolerance, else 0.

    Raises:
      ValueError: Bad flags or files, naming them.
    """
    from bert_tf.checkpoints import parameters

    if options.keras_model:
        if not options.output:
            raise ValueError("--keras_model needs --output (the Google checkpoint prefix to write)")
        model, prefix = keras_to_google(options.keras_model, options.output)
        print(f"Wrote {len(model.weights)} variables to {prefix} (read back identically).")
        return 0
    if not (options.bert_config_file and options.init_checkpoint):
        raise ValueError("give --bert_config_file and --init_checkpoint, or --keras_model")
    tolerance = DEFAULT_TOLERANCE if options.tolerance is None else options.tolerance
    result = google_to_keras(
        options.bert_config_file, options.init_checkpoint, options.output, tolerance, options.seed
    )
    print(result.load_report)
    if options.print_parameters:
        # The pretraining heads are counted where the checkpoint has them.
        with_heads = isinstance(result.model, BertPretrainer)
        print(parameters.format_parameter_table(parameters.parameter_counts(result.model.config, with_heads)))
    print(result.verification.format_table())
    if not result.verification.ok:
        return 1
    if options.output:
        print(f"Wrote {options.output}")
    return 0
