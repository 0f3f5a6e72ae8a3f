"""Converting Google checkpoints to Keras and back, with a numeric check of every conversion.

A converted model is run next to the float64 NumPy reference (`bert_tf.checkpoints.reference`, written from
the math, not from the Keras code) on generated inputs with padding, and the largest absolute
difference of each component is reported.
"""

import ctypes
import dataclasses
import logging
import os

import keras
import numpy as np

from bert_tf import files, model_settings
from bert_tf import labels as label_files
from bert_tf.checkpoints import hf, reference
from bert_tf.checkpoints.google import (
    checkpoint_output_prefix,
    checkpoint_value,
    load_google_checkpoint,
    open_checkpoint,
    resolve_checkpoint_prefix,
    save_google_checkpoint,
    write_checkpoint,
    write_checkpoint_state,
)
from bert_tf.checkpoints.pretrained import is_keras_file, load_keras_bert, open_pretrained
from bert_tf.config import ORIGINAL_ACTIVATIONS, BertConfig
from bert_tf.model_files import ModelFileOptions
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
      weights: Google name -> array (`reference.CheckpointWeights`, or a dict).
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
    # weights the model took (not a training checkpoint's optimizer slots), one at a time.
    weights = reference.CheckpointWeights(prefix, report.loaded)
    verification = verify_against_reference(
        model, weights, config, make_check_inputs(config, seed=seed), tolerance
    )
    if output and verification.ok:
        save_keras(model, output)
        model_settings.copy_settings(os.path.dirname(bert_config_file), os.path.dirname(output))
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
    source_dir = None
    if isinstance(keras_model, str):
        source_dir = os.path.dirname(keras_model)
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
    if source_dir is not None:
        model_settings.copy_settings(source_dir, os.path.dirname(output_checkpoint))
    return keras_model, output_checkpoint


# The files of a converted HF model's `--output_dir`, as Google's releases name them.
CHECKPOINT_NAME = "bert_model.ckpt"
CONFIG_NAME = "bert_config.json"


@dataclasses.dataclass
class HfImport:
    """The result of `hf_to_google`.

    Attributes:
      model: The `hf.HfModel` read (its `weights` dropped once written).
      conversion: The check of the written checkpoint (`google_to_keras`).
      written: Whether `output_dir` was written (the check passed).
    """

    model: hf.HfModel
    conversion: Conversion
    written: bool


def hf_to_google(hf_model, output_dir, tolerance=DEFAULT_TOLERANCE, seed=0):
    """Converts an HF BERT directory to the original's files and checks them numerically.

    `output_dir` gets `bert_config.json` (the original's keys), `vocab.txt`, `bert_model.ckpt.*`
    (the original's names), the `checkpoint` state file, `model_settings.json` (the tokenizer's
    `do_lower_case`, and the pooling, normalisation and sequence length of a sentence encoder:
    sentence-transformers' modules and the length its `encode()` cuts at,
    `hf.read_sentence_length`), and `labels.txt` for a classifier or tagger; all of them or, if
    anything fails or the check is above `tolerance`, none.

    Args:
      hf_model: The HF model directory (`hf.read_hf_model`).
      output_dir: The directory to write; it must not exist, or be empty.
      tolerance: Largest allowed difference from the float64 reference.
      seed: Seed of the generated check inputs.

    Returns:
      An `HfImport`.

    Raises:
      ValueError: Bad input (`hf.read_hf_model`) or an output directory that cannot be written;
        the message names the file and key.
    """
    model = hf.read_hf_model(hf_model)
    tmp = files.prepare_output_dir(output_dir, "--output_dir")
    try:
        prefix = os.path.join(tmp, CHECKPOINT_NAME)
        # Each array is given up as TensorFlow copies it (the model in memory once, as tensors,
        # then none): the check loads the checkpoint written.
        write_checkpoint(prefix, ((name, model.weights.pop(name)) for name in list(model.weights)))
        model.weights = None
        write_checkpoint_state(tmp, [CHECKPOINT_NAME])
        model.config.to_json_file(os.path.join(tmp, CONFIG_NAME))
        hf.write_lines(os.path.join(tmp, hf.VOCAB_FILE), model.vocab)
        settings = model_settings.ModelSettings(
            do_lower_case=model.do_lower_case,
            pooling=model.pooling,
            normalize=model.normalize,
            max_seq_length=model.max_seq_length,
        )
        model_settings.write_settings(tmp, settings)
        if model.labels is not None:
            hf.write_lines(os.path.join(tmp, label_files.LABELS_FILE), model.labels)
        conversion = google_to_keras(os.path.join(tmp, CONFIG_NAME), prefix, tolerance=tolerance, seed=seed)
        # The report names the files where they will be.
        conversion.load_report.checkpoint = os.path.join(output_dir, CHECKPOINT_NAME)
        if conversion.verification.ok:
            files.finish_output_dir(tmp, output_dir)
    finally:
        if files.isdir(tmp):
            files.remove_tree(tmp)
    return HfImport(model=model, conversion=conversion, written=conversion.verification.ok)


def free_large_blocks_promptly():
    """Has glibc (where it is the C library) give every block of 1 MiB or more its own mapping,
    returned to the system when freed. A setting of the whole process: the tool makes it, a
    program that calls the converter's functions may. By default glibc's threshold grows with
    the blocks freed, and the blocks below it stay in the heap: a conversion, which frees a
    model's worth of arrays while it reads, writes and loads (TensorFlow's threads in their own
    heaps), then holds up to twice the model beyond what it uses (BUILD_NOTES.md, "Hugging Face
    directories in and out")."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc
        return
    m_mmap_threshold = -3  # mallopt's parameter number, which also stops the threshold's growth
    libc.mallopt(m_mmap_threshold, 1 << 20)


def google_to_hf(
    bert_config_file,
    init_checkpoint,
    vocab_file,
    do_lower_case,
    hf_output_dir,
    labels_file=None,
    force_do_lower_case=False,
):
    """Writes a Google checkpoint as an HF BERT directory (`hf.write_hf_model`).

    The architecture follows the checkpoint's head (`hf.architecture_of`); a classifier's or
    tagger's labels are `labels_file`'s, else those of the `labels.txt` beside the checkpoint
    (in its directory: the `--output_dir` of the run that trained it, or a converted HF model's
    directory), else HF's defaults (`LABEL_0`, ...). A pooling recorded in the `model_settings.json`
    beside `bert_config_file` is written as sentence-transformers' modules, with the sequence length
    recorded there as their `sentence_bert_config.json`.

    Args:
      bert_config_file, init_checkpoint, vocab_file: The model's files, checked together
        (`open_pretrained`); `init_checkpoint` is a Google checkpoint.
      do_lower_case: The tokenizer's setting, written to `tokenizer_config.json` (None: the
        model's recorded one, else its vocabulary's: `open_pretrained`).
      hf_output_dir: The directory to write; it must not exist, or be empty.
      labels_file: One label a line, in the head's order (a `labels.txt`); None looks beside
        the checkpoint.
      force_do_lower_case: As `open_pretrained`'s.

    Returns:
      The `hf.HfModel` written (its `unused` lists the checkpoint's weights not written).

    Raises:
      ValueError: Bad or missing input, naming the flag or file; nothing is written then.
    """
    if not (bert_config_file and init_checkpoint and vocab_file):
        raise ValueError("--hf_output_dir needs --bert_config_file, --init_checkpoint and --vocab_file")
    if is_keras_file(init_checkpoint):
        raise ValueError(
            f"--init_checkpoint={init_checkpoint}: write a .keras model as a Google checkpoint first "
            "(--keras_model), then convert that"
        )
    pretrained = open_pretrained(
        bert_config_file, vocab_file, do_lower_case, init_checkpoint, force_do_lower_case=force_do_lower_case
    )
    prefix = resolve_checkpoint_prefix(init_checkpoint)
    reader = open_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    # Optimizer slots are named below their weight; the step counter is none.
    names = [n for n in shapes if n != "global_step" and not ("/" in n and n.rsplit("/", 1)[0] in shapes)]
    architecture, head, width = hf.architecture_of({name: shapes[name] for name in names})
    wanted = [google for google, _, _ in hf.name_map(pretrained.config, architecture, head=head)]
    weights = {name: reader.get_tensor(name) for name in wanted if name in shapes}
    labels = None
    if head is not None and head.labels:
        flag = "--labels_file"
        if not labels_file and (labels_file := label_files.labels_beside(prefix)):
            flag = "--init_checkpoint"
            logger.info("The labels are those of %s", labels_file)
        if labels_file:
            labels = label_files.read_labels(labels_file, flag)
        else:
            logger.warning("No labels.txt beside %s: the labels are HF's LABEL_0, ...", prefix)
            labels = [f"LABEL_{i}" for i in range(width)]
        if len(labels) != width:
            raise ValueError(
                f"{flag}: {labels_file} names {len(labels)} labels, the checkpoint's "
                f"{head.variable_names()[0]} has {width}"
            )
    elif labels_file:
        raise ValueError(f"--labels_file: the checkpoint's model, a {architecture}, has no labels")
    settings = model_settings.read_settings(
        model_settings.settings_directory(bert_config_file, init_checkpoint)
    )
    model = hf.HfModel(
        config=pretrained.config,
        architecture=architecture,
        weights=weights,
        vocab=hf.read_vocab_tokens(vocab_file),
        do_lower_case=pretrained.do_lower_case,
        labels=labels,
        unused=sorted(set(names) - set(weights)),
        head=head,
        pooling=settings.pooling,
        normalize=settings.normalize,
        max_seq_length=settings.max_seq_length,
    )
    hf.write_hf_model(model, hf_output_dir)
    return model


@dataclasses.dataclass
class ConvertOptions(ModelFileOptions):
    """The flags of `tools/convert_checkpoint.py` (`--max_seq_length` aside: it packs nothing)."""

    keras_model: str = option(None, "A bert_tf model saved as .keras, to write back as a Google checkpoint.")
    output: str = option(None, "Keras file (.keras / .weights.h5) or Google checkpoint prefix.")
    tolerance: float = option(
        None, f"Largest allowed max-abs difference from the reference (default {DEFAULT_TOLERANCE:g})."
    )
    seed: int = option(0, "Seed of the generated check inputs.")
    print_parameters: bool = option(True, "Print the parameter count per component.")
    hf_model: str = option(
        None, "A Hugging Face BERT directory (config.json, model.safetensors, ...) to convert."
    )
    output_dir: str = option(
        None, "With --hf_model: the directory to write the Google checkpoint and files to."
    )
    hf_output_dir: str = option(
        None, "Write the Google checkpoint of --init_checkpoint as this Hugging Face directory."
    )
    labels_file: str = option(
        None,
        "With --hf_output_dir: the classifier's or tagger's labels, one a line in order (default: the "
        "labels.txt in the checkpoint's directory, which run_classifier and run_tagger write in their "
        "--output_dir, else LABEL_0, ...).",
    )


def run_convert(options):
    """Converts as `ConvertOptions` say (`tools/convert_checkpoint.py`) and prints the report.

    Google -> Keras (`--init_checkpoint`): the load report, the parameter table and the numeric
    check against the float64 reference, then the output written. Keras -> Google
    (`--keras_model`): the checkpoint written and read back. HF -> Google (`--hf_model`): the
    HF tensors not used, then as Google -> Keras, and the `--do_lower_case` recorded for the
    other tools. Google -> HF (`--hf_output_dir`): the weights not written, and the directory.

    Returns:
      The exit status: 1 when the check is above tolerance, else 0.

    Raises:
      ValueError: Bad flags or files, naming them.
    """
    if sum(bool(source) for source in (options.keras_model, options.hf_model, options.hf_output_dir)) > 1:
        raise ValueError("give one of --keras_model, --hf_model and --hf_output_dir")
    free_large_blocks_promptly()
    if options.hf_output_dir:
        model = google_to_hf(
            options.bert_config_file,
            options.init_checkpoint,
            options.vocab_file,
            options.do_lower_case,
            options.hf_output_dir,
            options.labels_file,
            options.force_do_lower_case,
        )
        if model.unused:
            print(f"{len(model.unused)} checkpoint weights are not written: {', '.join(model.unused)}")
        print(f"Wrote {options.hf_output_dir}: a {model.architecture} (read back identically).")
        return 0
    if options.keras_model:
        if not options.output:
            raise ValueError("--keras_model needs --output (the Google checkpoint prefix to write)")
        model, prefix = keras_to_google(options.keras_model, options.output)
        print(f"Wrote {len(model.weights)} variables to {prefix} (read back identically).")
        return 0
    tolerance = DEFAULT_TOLERANCE if options.tolerance is None else options.tolerance
    if options.hf_model:
        if not options.output_dir:
            raise ValueError("--hf_model needs --output_dir (the directory to write)")
        imported = hf_to_google(options.hf_model, options.output_dir, tolerance, options.seed)
        model = imported.model
        print(f"Read {options.hf_model}: a {model.architecture}.")
        if model.unused:
            print(f"{len(model.unused)} HF tensors are not used: {', '.join(model.unused)}")
        else:
            print("Every HF tensor is used.")
        _print_check(imported.conversion, options.print_parameters)
        if not imported.written:
            return 1
        if model.pooling is not None:
            normalized = ", normalized" if model.normalize else ""
            print(
                f"Sentence vector: {model.pooling} pooling{normalized}, of {model.max_seq_length} "
                "WordPieces at most (recorded in model_settings.json)."
            )
        print(f"Wrote {options.output_dir} (the other tools read its casing from model_settings.json):")
        print(f"--do_lower_case={str(model.do_lower_case).lower()}")
        return 0
    if not (options.bert_config_file and options.init_checkpoint):
        raise ValueError("give --bert_config_file and --init_checkpoint, --keras_model or --hf_model")
    result = google_to_keras(
        options.bert_config_file, options.init_checkpoint, options.output, tolerance, options.seed
    )
    _print_check(result, options.print_parameters)
    if not result.verification.ok:
        return 1
    if options.output:
        print(f"Wrote {options.output}")
    return 0


def _print_check(result, print_parameters):
    """Prints a `Conversion`'s load report, parameter table and numeric check."""
    from bert_tf.checkpoints import parameters

    print(result.load_report)
    if print_parameters:
        # The pretraining heads are counted where the checkpoint has them.
        with_heads = isinstance(result.model, BertPretrainer)
        print(parameters.format_parameter_table(parameters.parameter_counts(result.model.config, with_heads)))
    print(result.verification.format_table())
