"""The options of the training jobs, as dataclasses whose fields are also their tools' flags.

`TrainingOptions`: the flags every training tool has (`run_pretraining.py`, `run_classifier.py`,
`run_squad.py`, `run_tagger.py`): the model's files (`ModelFileOptions`), the original's (`--output_dir`,
`--learning_rate`, `--save_checkpoints_steps`, `--iterations_per_loop`, the TPU flags) and
bert_tf's (`--strategy`, `--mixed_precision`, `--jit_compile`, `--seed`, `--keep_checkpoint_max`),
with what every run makes of them: the checks, the strategy, the dtype policy, the loss scale and
the loop's configuration. `FinetuningOptions` adds the flags the original's `run_classifier.py`
and `run_squad.py` share (the model's files required, `--do_*`, the batch sizes, epochs and warm-up) and
`--export_dir`. A job's options subclass one of them (`bert_tf.options` makes the flags).
"""

import dataclasses
import logging

from bert_tf import files, onednn
from bert_tf.model_files import ModelFileOptions
from bert_tf.options import option, redefine
from bert_tf.text import tokenization
from bert_tf.training.checkpointing import latest_checkpoint
from bert_tf.training.distribution import STRATEGIES, create_distribution

logger = logging.getLogger(__name__)

MIXED_PRECISION = ("float32", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass
class TrainingOptions(ModelFileOptions):
    """The flags every training tool has (module docstring), after the model's files'."""

    output_dir: str = option(
        None, "Where checkpoints, results and TensorBoard events are written.", required=True
    )
    learning_rate: float = option(5e-5, "The peak learning rate.")
    save_checkpoints_steps: int = option(1000, "Save a checkpoint every this many steps.")
    iterations_per_loop: int = option(
        1000, "Steps per block: the metrics are logged and written after each (progress every 30 s)."
    )
    use_tpu: bool = option(False, "Train on a Cloud TPU (same as --strategy=tpu).")
    tpu_name: str = option(None, "The Cloud TPU's name or grpc:// address.")
    tpu_zone: str = option(None, "GCE zone of the Cloud TPU.")
    gcp_project: str = option(None, "GCP project of the Cloud TPU.")
    master: str = option(None, "TensorFlow master URL (used for the TPU when --tpu_name is not given).")
    num_tpu_cores: int = option(8, "TPU cores (checked against the TPU found; TF2 uses all of them).")
    strategy: str = option("default", "tf.distribute strategy.", STRATEGIES)
    mixed_precision: str = option(
        "float32",
        "Compute dtype; mixed_float16 uses dynamic loss scaling. Weights stay float32.",
        MIXED_PRECISION,
    )
    jit_compile: bool = option(False, "Compile the forward and backward pass with XLA.")
    seed: int = option(None, "Seed of the weight initialisation, dropout and input shuffling.")
    keep_checkpoint_max: int = option(5, "Checkpoints kept in --output_dir (0: all).")

    def validate(self):
        """Raises a ValueError naming the flag of an option that cannot work."""
        if not self.output_dir:
            raise ValueError("--output_dir is required")
        files.check_output_dir(self.output_dir, "--output_dir")
        if self.mixed_precision not in MIXED_PRECISION:
            expected = ", ".join(MIXED_PRECISION)
            raise ValueError(f"--mixed_precision: expected one of {expected}, got {self.mixed_precision!r}")
        for flag in ("save_checkpoints_steps", "iterations_per_loop"):
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag} must be at least 1, got {getattr(self, flag)}")
        if self.keep_checkpoint_max < 0:
            raise ValueError(
                f"--keep_checkpoint_max must be 0 (keep all) or more, got {self.keep_checkpoint_max}"
            )

    def init_checkpoint_read(self):
        """`init_checkpoint` where the run will read it, else None: a checkpoint in `output_dir`
        is resumed (or restored for evaluation, prediction and export) instead, and the run then
        needs no initial weights (a rerun after a crash does not read them again)."""
        if not self.init_checkpoint or latest_checkpoint(self.output_dir):
            return None
        return self.init_checkpoint

    @property
    def dtype(self):
        """The models' dtype policy: None (the global one, float32) or a mixed policy."""
        return None if self.mixed_precision == "float32" else self.mixed_precision

    def distribution(self):
        """The strategy of `--strategy` (`--use_tpu` implies tpu), as a `Distribution`.

        `--mixed_precision=mixed_float16` computing on CPUs with TensorFlow's oneDNN gets a
        warning: Grappler fuses each float16 dense layer with its bias into oneDNN's reference
        kernel there, tens of times slower than float32 (BUILD_NOTES.md, "Mixed precision").
        """
        strategy = "tpu" if self.use_tpu else self.strategy
        where = (self.tpu_name, self.tpu_zone, self.gcp_project, self.master, self.num_tpu_cores)
        distribution = create_distribution(strategy, *where)
        if self.mixed_precision == "mixed_float16" and onednn.runs_on_onednn_cpus():
            logger.warning(
                "--mixed_precision=mixed_float16 on CPUs with TensorFlow's oneDNN runs each float16 dense "
                "layer as oneDNN's reference kernel, tens of times slower than float32: on a CPU use "
                "--mixed_precision=mixed_bfloat16 (AVX512_BF16 or AMX) or float32 (or set "
                "TF_ENABLE_ONEDNN_OPTS=0)"
            )
        return distribution

    def loss_scale(self):
        """A `DynamicLossScale` for mixed_float16 (create it under the strategy's scope), else None."""
        from bert_tf.training.step import DynamicLossScale

        return DynamicLossScale() if self.mixed_precision == "mixed_float16" else None

    def loop_config(self, num_train_steps, global_batch_size, **more):
        """The `bert_tf.training.loop.LoopConfig` of these options; `more` sets the other fields."""
        from bert_tf.training.loop import LoopConfig

        return LoopConfig(
            output_dir=self.output_dir,
            num_train_steps=num_train_steps,
            global_batch_size=global_batch_size,
            init_checkpoint=self.init_checkpoint,
            save_checkpoints_steps=self.save_checkpoints_steps,
            iterations_per_loop=self.iterations_per_loop,
            keep_checkpoint_max=self.keep_checkpoint_max,
            jit_compile=self.jit_compile,
            **more,
        )


@dataclasses.dataclass
class FinetuningOptions(TrainingOptions):
    """The flags every fine-tuning tool has: the original's (with its defaults), then bert_tf's."""

    vocab_file: str = redefine(ModelFileOptions, "vocab_file", required=True)
    bert_config_file: str = redefine(ModelFileOptions, "bert_config_file", required=True)
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run eval on the dev set.")
    do_predict: bool = option(False, "Whether to run the model in inference mode on the test set.")
    train_batch_size: int = option(32, "Total batch size for training.")
    eval_batch_size: int = option(8, "Total batch size for eval.")
    predict_batch_size: int = option(8, "Total batch size for predict.")
    num_train_epochs: float = option(3.0, "Total number of training epochs to perform.")
    warmup_proportion: float = option(
        0.1, "Proportion of training with linear learning rate warm-up (0.1 = 10%)."
    )
    export_dir: str = option(
        None,
        "If set, export the fine-tuned model after the --do_* actions as a SavedModel version here "
        "(TF Serving's model base path).",
    )

    def validate(self):
        """Raises a ValueError naming the flag of an option that cannot work: in the original's
        order, `--do_lower_case` (where given) against a released checkpoint's name first, then
        the rest."""
        if self.do_lower_case is not None:
            tokenization.validate_case_matches_checkpoint(self.do_lower_case, self.init_checkpoint)
        super().validate()
        if not (self.do_train or self.do_eval or self.do_predict):
            if not self.export_dir:
                raise ValueError(
                    "at least one of --do_train, --do_eval or --do_predict must be True (or --export_dir "
                    "given, to export the model of --init_checkpoint or --output_dir)"
                )
            if not (self.init_checkpoint or latest_checkpoint(self.output_dir)):
                raise ValueError(
                    "--export_dir alone exports a trained model: give --init_checkpoint, or an "
                    "--output_dir holding a checkpoint"
                )
        for flag in ("vocab_file", "bert_config_file"):
            if not getattr(self, flag):
                raise ValueError(f"--{flag} is required")
        if self.do_train:  # as in the original, the training flags are read only to train
            if self.num_train_epochs <= 0:
                raise ValueError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")
            if self.warmup_proportion < 0:
                raise ValueError(f"--warmup_proportion must be 0 or more, got {self.warmup_proportion}")
            if self.warmup_proportion > 1:
                logger.warning(
                    "--warmup_proportion=%s: the warm-up outlasts the training, so the learning "
                    "rate never reaches --learning_rate",
                    self.warmup_proportion,
                )
        if self.export_dir:
            files.check_output_dir(self.export_dir, "--export_dir")
