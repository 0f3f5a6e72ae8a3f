"""The options every training tool shares, and their absl flags.

`TrainingOptions` holds the flags that `run_pretraining.py`, `run_classifier.py`, `run_squad.py`
and `run_tagger.py` have in common: the original's (`--output_dir`, `--init_checkpoint`,
`--learning_rate`, `--save_checkpoints_steps`, `--iterations_per_loop`, the TPU flags) and
bert_tf's (`--strategy`, `--mixed_precision`, `--jit_compile`, `--seed`, `--keep_checkpoint_max`),
with what every run makes of them: the checks, the strategy, the dtype policy, the loss scale and
the loop's configuration. A tool's options subclass it; each field declared with `option` is also
a flag (`define_flags`), so the dataclass is the one place a flag is described.
"""

import dataclasses

from bert_tf import files

MIXED_PRECISION = ("float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def option(default, help, choices=None):
    """A dataclass field that is also an absl flag (`define_flags`), with its help and choices."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclasses.dataclass
class TrainingOptions:
    """The flags every training tool has (module docstring)."""

    output_dir: str = option(None, "Where checkpoints, results and TensorBoard events are written.")
    init_checkpoint: str = option(None, "Initial weights (usually a pretrained Google checkpoint).")
    learning_rate: float = option(5e-5, "The peak learning rate.")
    save_checkpoints_steps: int = option(1000, "Save a checkpoint every this many steps.")
    iterations_per_loop: int = option(1000, "Steps per compiled loop call (metrics are logged after each).")
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

    @property
    def dtype(self):
        """The models' dtype policy: None (the global one, float32) or a mixed policy."""
        return None if self.mixed_precision == "float32" else self.mixed_precision

    def distribution(self):
        """The strategy of `--strategy` (`--use_tpu` implies tpu), as a `Distribution`."""
        from bert_tf.training.distribution import create_distribution

        strategy = "tpu" if self.use_tpu else self.strategy
        where = (self.tpu_name, self.tpu_zone, self.gcp_project, self.master, self.num_tpu_cores)
        return create_distribution(strategy, *where)

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


def define_flags(options_class, omit=(), helps=None, **defaults):
    """Defines an absl flag for every `option` field of `options_class` (its help, type, choices).

    Args:
      options_class: A dataclass such as `TrainingOptions` or a subclass.
      omit: Options the tool has no flag for (the original's tool has none and nothing reads
        them); they keep their defaults.
      helps: None, or `{option: help}` where the tool's original words a flag otherwise.
      **defaults: Defaults that differ from the fields' (e.g. SQuAD's `max_seq_length=384`).

    Raises:
      ValueError: A default, a help or an omission for a field that is not an option.
    """
    from absl import flags

    helps = helps or {}
    fields = [field for field in dataclasses.fields(options_class) if "help" in field.metadata]
    unknown = sorted((set(defaults) | set(omit) | set(helps)) - {field.name for field in fields})
    if unknown:
        raise ValueError(f"define_flags: {options_class.__name__} has no options {unknown}")
    fields = [field for field in fields if field.name not in omit]
    define = {
        str: flags.DEFINE_string,
        int: flags.DEFINE_integer,
        float: flags.DEFINE_float,
        bool: flags.DEFINE_bool,
    }
    for field in fields:
        default = defaults.get(field.name, field.default)
        help_text, choices = helps.get(field.name, field.metadata["help"]), field.metadata["choices"]
        if choices:
            flags.DEFINE_enum(field.name, default, list(choices), help_text)
        else:
            define[field.type](field.name, default, help_text)


def options_from_flags(options_class):
    """An `options_class` filled from the absl flags named as its fields."""
    from absl import flags

    values = flags.FLAGS
    names = [field.name for field in dataclasses.fields(options_class) if field.name in values]
    return options_class(**{name: values[name].value for name in names})
