"""`run_extract_features`: the original's `extract_features.py` (`tools/extract_features.py`), its
options and its run: per-token activations of the chosen encoder layers, as JSON lines (with
`--doc_stride`, of every WordPiece of a long text, from the window where it has the most context);
with `--pooling`, each line's sentence vector instead."""

import contextlib
import dataclasses
import logging

from bert_tf import files
from bert_tf.model_files import ModelFileOptions
from bert_tf.model_settings import POOLINGS
from bert_tf.options import option, redefine
from bert_tf.progress import Progress
from bert_tf.tasks.features.data import write_jsonl
from bert_tf.tasks.features.task import extract_features, sentence_embeddings
from bert_tf.text.text_lines import read_examples
from bert_tf.text.windows import WindowOptions

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class FeaturesOptions(ModelFileOptions, WindowOptions):
    """The flags of `tools/extract_features.py`: the original's, `--doc_stride`, `--pooling` and
    `--normalize`."""

    input_file: str = option(
        None, "Text file, one example a line ('text_a' or 'text_a ||| text_b').", required=True
    )
    output_file: str = option(None, "JSON lines file to write.", required=True)
    layers: str = option("-1,-2,-3,-4", "Comma-separated encoder layer indexes (negative: from the top).")
    bert_config_file: str = redefine(ModelFileOptions, "bert_config_file", required=True)
    init_checkpoint: str = redefine(ModelFileOptions, "init_checkpoint", required=True)
    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    pooling: str = option(
        None,
        f"Write each line's sentence vector instead of per-token features: the last layer (whatever "
        f"--layers says) pooled over the line's tokens, as sentence-transformers does; one of "
        f"{', '.join(POOLINGS)}. A model's recorded pooling is not applied here.",
    )
    normalize: bool = option(False, "With --pooling: scale each sentence vector to unit length.")
    batch_size: int = option(32, "Examples per forward pass.")
    use_tpu: bool = option(False, "Run on the Cloud TPU at --master (a TPUStrategy).")
    master: str = option(None, "With --use_tpu: the TPU's address, e.g. grpc://10.240.1.2:8470.")
    num_tpu_cores: int = option(8, "With --use_tpu: TPU cores (TensorFlow 2 uses all the TPU has).")
    use_one_hot_embeddings: bool = option(
        False,
        "Accepted for the original's command lines: it chose the original's TPU embedding lookup, "
        "which gives the same values as the gather used here.",
    )

    def layer_indexes(self):
        """`--layers` as a list of ints.

        Raises:
          ValueError: `--layers` is not comma-separated integers.
        """
        try:
            return [int(x) for x in self.layers.split(",")]
        except ValueError:
            raise ValueError(f"--layers must be comma-separated integers, got {self.layers!r}") from None


def _with_progress(records):
    progress = Progress("extract_features", rate_of="examples")
    for count, record in enumerate(records, start=1):
        progress.update(examples=count)
        yield record
    progress.done()


def _single_texts(examples, input_file):
    """`examples`, refusing a pair (`--doc_stride` reads single texts) with its file and line."""
    for example in examples:
        if example.text_b is not None:
            raise ValueError(
                f"{input_file}:{example.unique_id + 1}: a pair ('text_a ||| text_b'); --doc_stride "
                "reads single texts"
            )
        yield example


def run_extract_features(options):
    """Writes the features of every line of `--input_file` to `--output_file`, as the original.

    Returns:
      The number of examples written.

    Raises:
      ValueError: Bad flags or input, naming the flag or file.
    """
    layer_indexes = options.layer_indexes()
    if options.batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {options.batch_size}")
    options.validate_windows()
    if options.pooling is not None and options.pooling not in POOLINGS:
        raise ValueError(f"--pooling: expected one of {', '.join(POOLINGS)}, got {options.pooling!r}")
    if options.normalize and options.pooling is None:
        raise ValueError("--normalize needs --pooling (it scales the sentence vector)")
    files.check_output_path(options.output_file, "--output_file")
    scope = contextlib.nullcontext()
    if options.use_tpu:
        from bert_tf.training.distribution import create_distribution

        tpu = create_distribution("tpu", master=options.master, num_tpu_cores=options.num_tpu_cores)
        scope = tpu.strategy.scope()
    pretrained = options.open()
    with scope:  # a model made under a strategy's scope predicts through it
        model, report = pretrained.model()
        if report is not None:
            logger.info("%s", report)
        examples = read_examples(options.input_file)
        if options.doc_stride is not None:
            examples = _single_texts(examples, options.input_file)
        if options.pooling is None:
            records = extract_features(
                model,
                pretrained.tokenizer(),
                examples,
                options.max_seq_length,
                layer_indexes,
                options.batch_size,
                options.doc_stride,
            )
        else:
            records = sentence_embeddings(
                model,
                pretrained.tokenizer(),
                examples,
                options.max_seq_length,
                options.pooling,
                options.normalize,
                options.batch_size,
                options.doc_stride,
            )
        count = write_jsonl(_with_progress(records), options.output_file)
    what = "sentence embeddings" if options.pooling else "features"
    print(f"Wrote {what} of {count} examples to {options.output_file}")
    return count
