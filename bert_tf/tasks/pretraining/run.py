"""`run_pretraining`: the original's `run_pretraining.py` (`tools/run_pretraining.py`), its
options and its run: train and/or evaluate the masked-LM and next-sentence task on the records
of `create_pretraining_data.py`, through the runner every job uses (`bert_tf.training.runner`).
"""

import dataclasses
import json
import logging

from bert_tf import files
from bert_tf.model_files import ModelFileOptions
from bert_tf.options import option, redefine
from bert_tf.tasks.pretraining.data import check_records, naming_bad_input
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.training.options import TrainingOptions
from bert_tf.training.runner import Runner

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PretrainingOptions(TrainingOptions):
    """The flags of `tools/run_pretraining.py`: the original's, then bert_tf's own."""

    bert_config_file: str = redefine(ModelFileOptions, "bert_config_file", required=True)
    input_file: str = option(None, "Input TFRecord files (comma-separated globs).", required=True)
    max_predictions_per_seq: int = option(20, "Masked LM predictions per record (must match the data).")
    do_train: bool = option(False, "Whether to run training.")
    do_eval: bool = option(False, "Whether to run evaluation.")
    train_batch_size: int = option(32, "Total (global) batch size for training.")
    eval_batch_size: int = option(8, "Total (global) batch size for evaluation.")
    num_train_steps: int = option(100000, "Number of training steps (a total: resumed runs continue to it).")
    num_warmup_steps: int = option(10000, "Number of linear warm-up steps.")
    max_eval_steps: int = option(100, "Number of evaluation batches.")
    gradient_accumulation_steps: int = option(1, "Micro-batches per step (same update as the whole batch).")
    gradient_reduction: str = option(
        "global",
        "global: one step equals one device's on the global batch; tpu_original: each replica clips "
        "its own gradient and the clipped gradients are summed, as the original on TPU.",
        ("global", "tpu_original"),
    )
    optimizer: str = option("adamw", "adamw: the original's AdamWeightDecay; lamb: LAMB.", ("adamw", "lamb"))

    def validate(self):
        super().validate()
        for flag in ("bert_config_file", "input_file"):
            if not getattr(self, flag):
                raise ValueError(f"--{flag} is required")
        if not (self.do_train or self.do_eval):
            raise ValueError("at least one of --do_train or --do_eval must be True")
        # As in the original, the training flags are read only to train, the eval flag to evaluate.
        flags = ("num_train_steps", "gradient_accumulation_steps") if self.do_train else ()
        for flag in flags + (("max_eval_steps",) if self.do_eval else ()):
            if getattr(self, flag) < 1:
                raise ValueError(f"--{flag} must be at least 1, got {getattr(self, flag)}")
        if self.do_train and self.num_warmup_steps < 0:
            raise ValueError(f"--num_warmup_steps must be >= 0, got {self.num_warmup_steps}")
        if self.jit_compile and self.gradient_accumulation_steps > 1:
            # XLA compiling the accumulation loop around the layers' own compiled training
            # forms gave other gradients than the step without XLA, and dropout's draws inside
            # it do not compile (BUILD_NOTES.md).
            raise ValueError("--jit_compile does not work with --gradient_accumulation_steps above 1")


def run_pretraining(options):
    """Trains and/or evaluates as the original's `run_pretraining.py` (`tools/run_pretraining.py`).

    Every check of the input (files, record lengths, config against the checkpoint, batch
    sizes) runs before the first step.

    Returns:
      `{"train": metrics or None, "eval": metrics or None}`.

    Raises:
      ValueError: Bad flags or input, naming the flag or file.
      bert_tf.training.loop.TrainingStopped: A non-finite loss.
    """
    from bert_tf.data import make_pretraining_dataset

    options.validate()
    # The strategy first: MultiWorkerMirroredStrategy must exist before any TensorFlow op runs.
    distribution = options.distribution()
    # No vocabulary: the records hold ids.
    pretrained = options.open(init_checkpoint=options.init_checkpoint_read(), do_lower_case=None)
    config = pretrained.config
    input_files = files.expand_input_patterns(options.input_file)
    # Evaluation reads a glob's files in the filesystem's order, as the original's (with
    # --max_eval_steps, the order decides which records are scored); training sorts them, so
    # that every worker shards one list.
    eval_files = files.expand_input_patterns(options.input_file, sort=False) if options.do_eval else None
    shown = ", ".join(input_files[:2]) + (f", ..., {input_files[-1]}" if len(input_files) > 2 else "")
    logger.info("--input_file: %d file%s (%s)", len(input_files), "s"[: len(input_files) > 1], shown)
    check_records(input_files, options.max_seq_length, options.max_predictions_per_seq, config.vocab_size)
    runner = Runner(options, pretrained, distribution)
    if options.do_train:
        runner.check_batch_size("train_batch_size", options.gradient_accumulation_steps)
    if options.do_eval:
        runner.check_batch_size("eval_batch_size")

    def dataset(batch_size, is_training):
        return make_pretraining_dataset(
            input_files if is_training else eval_files,
            runner.worker_batch(batch_size),
            options.max_seq_length,
            options.max_predictions_per_seq,
            is_training=is_training,
            input_context=runner.input_context(),
            seed=options.seed,
            repeat=True,
        )

    results = {"train": None, "eval": None}
    if options.do_train:
        task = runner.build(PretrainingTask)
        description = json.dumps(
            {
                "input_files": [files.absolute(path) for path in input_files],
                "batch_size": runner.worker_batch(options.train_batch_size),
                "max_seq_length": options.max_seq_length,
                "max_predictions_per_seq": options.max_predictions_per_seq,
                "seed": options.seed,
                "worker": [distribution.worker_index, distribution.num_workers],
            },
            sort_keys=True,
        )
        with naming_bad_input(input_files, options, config):
            results["train"] = runner.train(
                task,
                dataset(options.train_batch_size, True),
                options.num_train_steps,
                options.num_warmup_steps,
                description,
                optimizer=options.optimizer,
                gradient_reduction=options.gradient_reduction,
                gradient_accumulation_steps=options.gradient_accumulation_steps,
            )
    if options.do_eval:
        task = runner.build(PretrainingTask)
        with naming_bad_input(input_files, options, config):
            results["eval"] = runner.evaluate(
                task, dataset(options.eval_batch_size, False), options.max_eval_steps
            )
    return results
