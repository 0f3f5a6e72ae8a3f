"""The options of `create_pretraining_data`, as dataclasses whose fields are also the tool's flags.

`PretrainingDataOptions`: the original's flags that decide the examples (with its defaults and
help), and `word_segmenter` (Chinese words for whole-word masking,
`bert_tf.text.word_segmentation`). `CreatePretrainingDataOptions` adds the tool's other flags:
the input and output files, and how the job runs (scale mode's processes and shards, an Apache
Beam runner).
`tools/create_pretraining_data.py` defines its flags from the latter (`bert_tf.options`).

Scale mode's worker processes and Beam's workers receive the options: this module imports
neither absl's flags nor TensorFlow.
"""

import dataclasses
import logging

from bert_tf.model_files import ModelFileOptions
from bert_tf.options import option, redefine
from bert_tf.text.word_segmentation import NO_SEGMENTER, check_segmenter_name

logger = logging.getLogger(__name__)

# The positions of Google's released checkpoints (`max_position_embeddings` in their
# bert_config.json).
RELEASED_MAX_POSITIONS = 512
# `log_warnings` warns when --max_predictions_per_seq is below this fraction of the masked tokens
# that --masked_lm_prob asks of a full-length instance: the defaults' 20 for 128 x 0.15 = 19.2
# pass, as does a value rounded down a little (76 for 512 x 0.15 = 76.8).
MASKING_CAP_MARGIN = 0.9


@dataclasses.dataclass(frozen=True)
class PretrainingDataOptions:
    """The original's flags (and defaults) that decide the examples, and the word segmenter."""

    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    do_lower_case: bool = redefine(
        ModelFileOptions,
        "do_lower_case",
        help="Lower-case the input and strip accents: True for uncased models, False for cased ones "
        "(default: inferred from --vocab_file, the original's True for an uncased one).",
    )
    force_do_lower_case: bool = redefine(
        ModelFileOptions,
        "force_do_lower_case",
        help="Use --do_lower_case as given where --vocab_file's casing says otherwise "
        "(docs/checkpoints.md, Casing).",
    )
    do_whole_word_mask: bool = option(False, "Mask whole words instead of single WordPieces.")
    word_segmenter: str = option(
        NO_SEGMENTER,
        "With --do_whole_word_mask, the words of Chinese text: none (WordPieces only), jieba "
        "(pip install -e '.[zh]'), or module:function (a line -> its list of words).",
    )
    max_seq_length: int = redefine(ModelFileOptions, "max_seq_length")
    max_predictions_per_seq: int = option(20, "Maximum number of masked LM predictions per sequence.")
    random_seed: int = option(12345, "Random seed for data generation.")
    dupe_factor: int = option(10, "Number of times to duplicate the input data (with different masks).")
    masked_lm_prob: float = option(0.15, "Masked LM probability.")
    short_seq_prob: float = option(0.1, "Probability of creating sequences shorter than the maximum length.")

    def validate(self):
        """Rejects what the original cannot run: below 5 tokens a pair does not fit beside
        `[CLS] [SEP] [SEP]`, and it fails on negative predictions (0 means no masked LM).

        Raises:
          ValueError: The message names the flag.
        """
        if not self.vocab_file:
            raise ValueError("--vocab_file is required")
        if self.max_seq_length < 5:
            raise ValueError(f"--max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 0:
            raise ValueError(
                f"--max_predictions_per_seq must be at least 0, got {self.max_predictions_per_seq}"
            )
        check_segmenter_name(self.word_segmenter)
        if self.dupe_factor < 1:
            raise ValueError(f"--dupe_factor must be positive, got {self.dupe_factor}")
        for name in ("masked_lm_prob", "short_seq_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name} must be in [0, 1], got {getattr(self, name)}")

    def resolved(self):
        """These options with `do_lower_case` decided and checked against the vocabulary
        (`bert_tf.text.casing.resolve_do_lower_case`; a Google model's directory is not read:
        this tool has only --vocab_file).

        Raises:
          ValueError: As `resolve_do_lower_case`.
        """
        from bert_tf.text.casing import resolve_do_lower_case

        do_lower_case = resolve_do_lower_case(
            self.do_lower_case, self.vocab_file, force=self.force_do_lower_case
        )
        return dataclasses.replace(self, do_lower_case=do_lower_case, force_do_lower_case=False)

    def log_warnings(self):
        """Warns about flags the original runs with but that likely miss what the user meant:

        - `--max_seq_length` above the 512 positions of Google's released checkpoints;
        - `--word_segmenter` without `--do_whole_word_mask`, where it changes nothing;
        - `--max_predictions_per_seq` capping the masking well below `--masked_lm_prob`. The
          original masks `min(max_predictions_per_seq, max(1, round(len(tokens) *
          masked_lm_prob)))` tokens of an instance, so a cap below `MASKING_CAP_MARGIN` x
          `masked_lm_prob` x `max_seq_length` masks a smaller fraction of a full-length
          instance than asked (0, no masked LM at all, is taken as meant).
        """
        if self.max_seq_length > RELEASED_MAX_POSITIONS:
            logger.warning(
                "--max_seq_length=%d: Google's released BERT checkpoints have %d positions "
                "(max_position_embeddings in bert_config.json) and cannot train on these examples; "
                "pretrain a model whose max_position_embeddings is at least %d",
                self.max_seq_length,
                RELEASED_MAX_POSITIONS,
                self.max_seq_length,
            )
        if self.word_segmenter != NO_SEGMENTER and not self.do_whole_word_mask:
            logger.warning(
                "--word_segmenter=%s changes nothing without --do_whole_word_mask", self.word_segmenter
            )
        asked = self.masked_lm_prob * self.max_seq_length
        if 0 < self.max_predictions_per_seq < MASKING_CAP_MARGIN * asked:
            logger.warning(
                "--max_predictions_per_seq=%d masks at most %d of the %d tokens of an instance "
                "(%.1f%%), not the %.0f%% of --masked_lm_prob=%s: set --max_predictions_per_seq=%d "
                "(about max_seq_length x masked_lm_prob), and give run_pretraining.py the same value",
                self.max_predictions_per_seq,
                self.max_predictions_per_seq,
                self.max_seq_length,
                100 * self.max_predictions_per_seq / self.max_seq_length,
                100 * self.masked_lm_prob,
                self.masked_lm_prob,
                max(1, round(asked)),
            )


@dataclasses.dataclass(frozen=True)
class CreatePretrainingDataOptions(PretrainingDataOptions):
    """The flags of `tools/create_pretraining_data.py`: the examples' (`PretrainingDataOptions`),
    then the files and how the job runs (`create_pretraining_data`'s other arguments)."""

    input_file: str = option(None, "Input text file(s): comma-separated glob patterns.", required=True)
    output_file: str = option(
        None, "Output TFRecord file(s), comma-separated (scale mode: one prefix).", required=True
    )
    num_workers: int = option(
        0, "0: the original's exact single-process output; N: scale mode with N processes."
    )
    shard_size_mb: float = option(
        8.0, "Scale mode: megabytes of text per shard (bounds each worker's memory)."
    )
    runner: str = option(
        None,
        "Run scale mode on this Apache Beam runner: DirectRunner (--num_workers local processes, "
        "0: one per core), DataflowRunner, FlinkRunner, SparkRunner, PortableRunner. Flags this tool "
        "does not define are Beam pipeline options.",
    )
    num_output_shards: int = option(0, "With --runner: the number of output files (0: the runner decides).")
