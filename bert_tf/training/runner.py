"""The runner every training job goes through: the strategy, the models built under it,
training with the original's optimizer and schedule, evaluation, prediction, restore, export.

A job (`bert_tf.tasks.<job>.run`) reads its data and makes its datasets; the runner does the
rest, the same way for every job:

- `Runner(options, pretrained, distribution)`: the job's options (`TrainingOptions`), its model's
  files (`bert_tf.checkpoints.pretrained.open_pretrained`) and the `tf.distribute` strategy
  (`options.distribution()`, made first: MultiWorkerMirroredStrategy must exist before any
  TensorFlow op runs); the seed and the dtype policy are set; `check_batch_size(flag)` refuses
  a batch that does not divide into the replicas;
- `build(factory, *args)`: `factory(config, *args, dtype=...)` under the strategy's scope (a
  task object or a model);
- `train(task, dataset, num_train_steps, num_warmup_steps, input_description)`: the optimizer
  (the original's AdamWeightDecay, or LAMB) with the warm-up and linear decay schedule, through
  `bert_tf.training.loop.train` (resumes from the latest checkpoint in `output_dir`, else
  initialises from `init_checkpoint`);
- `evaluate(task, dataset, num_batches)`: one pass over `num_batches` batches from the latest
  checkpoint in `output_dir` (else `init_checkpoint`); writes `eval_results.txt`: `global_step`,
  `loss` (the mean of the batch losses, as the Estimator's) and the task's metrics, renamed by
  `task.eval_keys` where it has them (e.g. `accuracy` -> `eval_accuracy`);
- `predict(model, dataset, num_records, output_names)`: the model's outputs for every record,
  in order, as NumPy arrays;
- `restore(model)`, and `model_to_export(factory)` (the chief's float32 model, restored).

The fine-tuning jobs train on feature files (`bert_tf.data.records`) for a number of epochs:
`train_records`, `evaluate_records` and `predict_records` are the three above on such a file,
with the original's step arithmetic (`train_steps`, `warmup_steps`).

A task object (what `train` and `evaluate` take) is a `bert_tf.training.task.Task`. Its loss is
normalised over the global batch by the step. Every trainable variable must get a gradient: a
model whose loss does not use the pooler sets `bert.pooler.trainable = False`, which is what the
original's optimizer does with a variable without a gradient (no update, no Adam slots in the
checkpoint).
"""

import dataclasses
import json
import logging
import math
import os

from bert_tf import files, model_settings

logger = logging.getLogger(__name__)

EVAL_RESULTS = "eval_results.txt"


def train_steps(num_examples, train_batch_size, num_train_epochs):
    """The original's `int(num_examples / train_batch_size * num_train_epochs)`."""
    return int(num_examples / train_batch_size * num_train_epochs)


def warmup_steps(num_train_steps, warmup_proportion):
    """The original's `int(num_train_steps * warmup_proportion)`."""
    return int(num_train_steps * warmup_proportion)


class Runner:
    """Runs a job's training, evaluation, prediction and export (module docstring).

    Args:
      options: The job's options (a `bert_tf.training.options.TrainingOptions`), validated.
      pretrained: The model's files, a `bert_tf.checkpoints.pretrained.Pretrained`.
      distribution: The `Distribution` of `options.distribution()`.
    """

    def __init__(self, options, pretrained, distribution):
        import keras

        self.options = options
        # A `.keras` model loaded to check it is not kept for the run (the loop reads its weights).
        self.pretrained = dataclasses.replace(pretrained, keras_model=None)
        self.config = pretrained.config
        self.distribution = distribution
        if options.seed is not None:
            keras.utils.set_random_seed(options.seed)
        self.dtype = options.dtype

    @classmethod
    def for_finetuning(cls, options):
        """The runner of a fine-tuning job, after every check that needs no data: the options
        (`FinetuningOptions.validate`), the strategy, the model's files together
        (`ModelFileOptions.open`: config, vocabulary, sequence length, checkpoint) and the batch
        size of each `--do_*` mode, so that bad input fails before a feature is written.

        Raises:
          ValueError: Bad options or files, naming the flag or file.
        """
        options.validate()
        distribution = options.distribution()  # first: see the module docstring
        pretrained = options.open(init_checkpoint=options.init_checkpoint_read())
        trained = model_settings.read_settings(options.output_dir).do_lower_case
        if trained is not None and trained != pretrained.do_lower_case:
            raise ValueError(
                f"--output_dir: its model was trained with do_lower_case={str(trained).lower()} "
                f"({os.path.join(options.output_dir, model_settings.SETTINGS_FILE)}), this run "
                f"tokenizes with {str(pretrained.do_lower_case).lower()}: use another --output_dir"
            )
        runner = cls(options, pretrained, distribution)
        for mode in ("train", "eval", "predict"):
            if getattr(options, f"do_{mode}"):
                runner.check_batch_size(f"{mode}_batch_size")
        return runner

    @property
    def strategy(self):
        return self.distribution.strategy

    def check_batch_size(self, flag, multiple_of=1):
        """Raises a ValueError unless the option `flag` (e.g. "train_batch_size") divides into
        the replicas (and `multiple_of` micro-batches)."""
        self.distribution.check_batch_size(flag, getattr(self.options, flag), multiple_of)

    def build(self, factory, *args, **kwargs):
        """`factory(config, *args, dtype=<the options' policy>, **kwargs)` under the strategy's scope."""
        with self.strategy.scope():
            return factory(self.config, *args, dtype=self.dtype, **kwargs)

    def worker_batch(self, global_batch_size):
        """This worker's share of a global batch."""
        return global_batch_size // self.distribution.num_workers

    def input_context(self):
        """The `tf.distribute.InputContext` of this worker's input pipeline."""
        return self.distribution.input_context()

    def train(
        self,
        task,
        dataset,
        num_train_steps,
        num_warmup_steps,
        input_description,
        optimizer="adamw",
        num_train_steps_source="",
        **loop_options,
    ):
        """Trains `task.model` to `num_train_steps` steps.

        Args:
          task: The `bert_tf.training.task.Task`, from `build`.
          dataset: This worker's repeating `tf.data.Dataset` of worker batches.
          num_train_steps: The total steps (a resumed run continues to it).
          num_warmup_steps: The schedule's warm-up steps.
          input_description: What `dataset` reads (a JSON string): a resumed run continues the
            saved input position only if it reads the same.
          optimizer: "adamw" (the original's) or "lamb".
          num_train_steps_source: What set `num_train_steps`, as the log names it.
          **loop_options: Other `bert_tf.training.loop.LoopConfig` fields (gradient reduction
            and accumulation).

        Returns:
          The last block's metrics and `global_step` (`bert_tf.training.loop.train`).
        """
        from bert_tf.training import loop
        from bert_tf.training.optimization import create_optimizer

        options = self.options
        with self.strategy.scope():
            optimizer = create_optimizer(optimizer, options.learning_rate, num_train_steps, num_warmup_steps)
            loss_scale = options.loss_scale()
        config = options.loop_config(
            num_train_steps,
            options.train_batch_size,
            num_train_steps_source=num_train_steps_source,
            **loop_options,
        )
        return loop.train(task, optimizer, self.distribution, dataset, config, loss_scale, input_description)

    def evaluate(self, task, dataset, num_batches, more_results=None):
        """Evaluates on `num_batches` batches of `dataset` and writes `eval_results.txt`.

        Args:
          task: The task object, from `build`.
          dataset: This worker's `tf.data.Dataset` of eval batches (at least `num_batches`).
          num_batches: The batches to evaluate.
          more_results: Optional `more_results(model) -> {key: value}`, called with the
            restored model after the pass; its results are written too.

        Returns:
          The results written: `global_step`, `loss`, the task's metrics (renamed by
          `task.eval_keys`) and `more_results`'.
        """
        from bert_tf.training import loop

        results = loop.evaluate(
            task,
            self.distribution,
            dataset,
            self.options.output_dir,
            num_batches,
            self.options.init_checkpoint,
            results_file=None,
        )
        keys = getattr(task, "eval_keys", {})
        results = {keys.get(name, name): value for name, value in results.items()}
        if more_results is not None:
            results.update(more_results(task.model))
        if self.distribution.is_chief:
            loop.write_eval_results(results, os.path.join(self.options.output_dir, EVAL_RESULTS))
            loop.write_eval_scalars(results, self.options.output_dir)
        return results

    def restore(self, model):
        """Loads the latest checkpoint in `output_dir` into `model`, else `init_checkpoint`.

        Returns:
          The global step of the checkpoint loaded (0 if none).
        """
        from bert_tf.training import loop

        return loop.restore_for_inference(model, self.options.output_dir, self.options.init_checkpoint)

    def predict(self, model, dataset, num_records, output_names):
        """The model's outputs on the first `num_records` rows of `dataset`, in order.

        Every worker predicts every record (the chief writes the results); each worker's batch
        is split among its replicas.

        Args:
          model: A restored model, from `build` (see `restore`).
          dataset: A finite `tf.data.Dataset` of batches (every worker's the same).
          num_records: The rows to keep (the rows past them pad the last batch).
          output_names: The model outputs to return.

        Returns:
          `{name: np.ndarray [num_records, ...]}`.
        """
        import numpy as np
        import tensorflow as tf

        from bert_tf.training.step import local_replica_batches

        strategy, num_local_replicas = self.strategy, self.distribution.num_local_replicas

        def replica_outputs(batch):
            outputs = model(batch, training=False)
            return {name: outputs[name] for name in output_names}

        @tf.function(autograph=False)  # no control flow on tensors (bert_tf.training.step)
        def predict_step(batch):
            outputs = strategy.run(
                replica_outputs, args=(local_replica_batches(strategy, batch, num_local_replicas),)
            )
            return {
                name: tf.concat(strategy.experimental_local_results(value), axis=0)
                for name, value in outputs.items()
            }

        outputs = {name: [] for name in output_names}
        for batch in dataset:
            for name, value in predict_step(batch).items():
                outputs[name].append(value.numpy())
        return {name: np.concatenate(values)[:num_records] for name, values in outputs.items()}

    # -- fine-tuning: feature files and epochs -------------------------------------------------

    def num_train_steps(self, num_examples, input_file=None):
        """The training steps of `num_examples` for the options' batch size and epochs (`train_steps`).

        Args:
          num_examples: The examples the epochs count.
          input_file: The file they were read from, named in the error (None: none named).

        Returns:
          The number of steps, at least 1.

        Raises:
          ValueError: The examples give no training step.
        """
        options = self.options
        num_train_steps = train_steps(num_examples, options.train_batch_size, options.num_train_epochs)
        if num_train_steps < 1:
            where = f"{input_file}: " if input_file else ""
            raise ValueError(
                f"{where}{num_examples} training examples with --train_batch_size={options.train_batch_size} "
                f"and --num_train_epochs={options.num_train_epochs} give no training step"
            )
        return num_train_steps

    def record_settings(self):
        """Writes the pretrained model's `model_settings.json` in `output_dir`, with the casing
        this run tokenizes with, so that the model trained there carries it."""
        options = self.options
        source = model_settings.settings_directory(options.bert_config_file, options.init_checkpoint)
        settings = model_settings.read_settings(source) if source else model_settings.ModelSettings()
        settings = dataclasses.replace(settings, do_lower_case=self.pretrained.do_lower_case)
        model_settings.write_settings(options.output_dir, settings)

    def train_records(self, task, train_file, name_to_features, num_examples):
        """Trains `task.model` on the records of `train_file` for the options' epochs, as the
        original's fine-tuning (`--num_train_epochs`, `--warmup_proportion`).

        Args:
          task: The task object, from `build`.
          train_file: The TFRecord file of training features (`bert_tf.data.records`).
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_examples: The examples the epochs count (the original counts examples, not
            features: SQuAD's documents may give several features each).

        Returns:
          As `train`.

        Raises:
          ValueError: The options give no training step.
        """
        from bert_tf.data.records import records_dataset

        options = self.options
        num_train_steps = self.num_train_steps(num_examples)
        if self.distribution.is_chief:
            self.record_settings()
        num_warmup_steps = warmup_steps(num_train_steps, options.warmup_proportion)
        logger.info(
            "***** Running training *****  examples %d, batch size %d, steps %d (warm-up %d)",
            num_examples,
            options.train_batch_size,
            num_train_steps,
            num_warmup_steps,
        )
        batch_size = self.worker_batch(options.train_batch_size)
        dataset = records_dataset(
            train_file,
            name_to_features,
            batch_size,
            is_training=True,
            input_context=self.input_context(),
            seed=options.seed,
        )
        source = (
            f"the {num_train_steps} steps of --num_train_epochs={options.num_train_epochs} "
            f"({num_examples} examples, --train_batch_size={options.train_batch_size})"
        )
        # What a resumed run must read the same to continue the saved input position: the
        # records (made afresh by each run from the data and flags), their shapes, the batch,
        # the seed and the worker.
        description = json.dumps(
            {
                "train_file": files.absolute(train_file),
                "bytes": files.size(train_file),
                "num_examples": num_examples,
                "features": {name: list(feature.shape) for name, feature in sorted(name_to_features.items())},
                "batch_size": batch_size,
                "seed": options.seed,
                "worker": [self.distribution.worker_index, self.distribution.num_workers],
            },
            sort_keys=True,
        )
        return self.train(
            task, dataset, num_train_steps, num_warmup_steps, description, num_train_steps_source=source
        )

    def evaluate_records(self, task, eval_file, name_to_features, num_records, more_results=None):
        """`evaluate` on every record of `eval_file` once (the last batch padded with all-zero
        rows, which a task must weight 0, e.g. through `is_real_example`).

        Args:
          task, more_results: As `evaluate`'s.
          eval_file: The TFRecord file of eval features.
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_records: The records in `eval_file`.

        Returns:
          As `evaluate`.
        """
        from bert_tf.data.records import records_dataset

        if num_records < 1:
            raise ValueError(f"{eval_file}: no eval examples")
        batch_size = self.worker_batch(self.options.eval_batch_size)
        num_workers = self.distribution.num_workers
        num_batches = math.ceil(math.ceil(num_records / num_workers) / batch_size)
        dataset = records_dataset(
            eval_file,
            name_to_features,
            batch_size,
            is_training=False,
            input_context=self.input_context(),
            num_batches=num_batches,
        )
        logger.info("***** Running evaluation *****  records %d, batches %d", num_records, num_batches)
        return self.evaluate(task, dataset, num_batches, more_results)

    def predict_records(self, model, predict_file, name_to_features, num_records, output_names):
        """`predict` on every record of `predict_file`, in file order; each worker's batch of
        `predict_batch_size / workers` rows, the last padded with all-zero rows whose outputs
        are dropped.

        Args:
          model: A restored model, from `build` (see `restore`).
          predict_file: The TFRecord file of features.
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_records: The records in `predict_file`.
          output_names: The model outputs to return.

        Returns:
          `{name: np.ndarray [num_records, ...]}`.
        """
        from bert_tf.data.records import records_dataset

        if num_records < 1:
            raise ValueError(f"{predict_file}: no examples to predict")
        batch_size = self.worker_batch(self.options.predict_batch_size)
        num_batches = math.ceil(num_records / batch_size)
        dataset = records_dataset(
            predict_file, name_to_features, batch_size, is_training=False, num_batches=num_batches
        )
        logger.info("***** Running prediction *****  records %d, batches %d", num_records, num_batches)
        return self.predict(model, dataset, num_records, output_names)

    def model_to_export(self, factory, *args):
        """`factory(config, *args)` in float32 outside the strategy, restored as `restore` does,
        on the chief; None on the other workers (the chief alone exports).

        Args:
          factory, *args: As `build`'s, e.g. a fine-tuned model's class and its labels' count.

        Returns:
          The restored model, or None.
        """
        if not self.distribution.is_chief:
            return None
        model = factory(self.config, *args)
        self.restore(model)
        return model
