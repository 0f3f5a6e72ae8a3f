"""What every fine-tuning tool shares (classifier, SQuAD, tagging): options, records, the runner.

A task module reads its data, converts examples to features and supplies its model and task
object; this module does the rest as the original's `run_classifier.py` and `run_squad.py` do.
The API (stable; the task modules and tools build on it):

- `FinetuningOptions`: the original's common flags and bert_tf's, as a dataclass on
  `bert_tf.training.options.TrainingOptions` (the flags every training tool shares); a task's
  own options subclass it (`ClassifierOptions(FinetuningOptions)` adds `task_name`, ...).
  `bert_tf.training.options.define_flags(FinetuningOptions, **defaults)` defines these flags in a
  tool (with the original's defaults, or the ones given, e.g. `max_seq_length=384` for SQuAD);
  `options_from_flags(cls)` reads them back.
- `train_steps(num_examples, train_batch_size, num_train_epochs)` and
  `warmup_steps(num_train_steps, warmup_proportion)`: the original's step arithmetic,
  `int(num_examples / train_batch_size * num_train_epochs)` and `int(steps * proportion)`.
- `write_records(path, features)`: one `tf.train.Example` per dict of int (int64 list) or float
  (float list) lists, keys in the dict's order, written atomically. `records_dataset(...)` reads
  them back: int64 features as int32 (the original's `_decode_record`).
- `FinetuningRunner(options)`: checks the options (before anything is read or written), loads the
  config, makes the `tf.distribute` strategy and the `FullTokenizer` (`runner.tokenizer`); the
  output directory is made by the first file written in it, so a run that fails on its input
  leaves none behind. Then:
  - `runner.num_train_steps(num_examples, input_file)`: the original's step count, checked
    (call it before writing anything: the error names the file);
  - `runner.build(factory, *args)`: `factory(config, *args, dtype=...)` under the strategy's
    scope (a task object or a model);
  - `runner.train(task, train_file, name_to_features, num_examples)`: AdamWeightDecay with the
    original's schedule and step arithmetic, through `bert_tf.training.loop.train` (resumes from
    the latest checkpoint in `output_dir`, else initialises from `init_checkpoint`);
  - `runner.evaluate(task, eval_file, name_to_features, num_records, more_results=None)`: one
    exact pass over the records (the last batch padded with all-zero rows, which a task must
    weight 0, e.g. through `is_real_example`), from the latest checkpoint in `output_dir`, else
    `init_checkpoint`; writes `eval_results.txt`: `global_step`, `loss` (the mean of the batch
    losses, as the Estimator's) and the task's metrics, renamed by `task.eval_keys` (e.g.
    `accuracy` -> `eval_accuracy`), plus `more_results(model)`'s;
  - `runner.restore(model)`: the latest checkpoint in `output_dir`, else `init_checkpoint`
    (returns the global step);
  - `runner.predict(model, predict_file, name_to_features, num_records, output_names)`: the
    model's outputs for every record, in file order, as NumPy arrays (padding dropped).

A task object (what `runner.train`/`evaluate` take; see `bert_tf.training.step`) has `model` (a
Keras model called on the dict of features, returning a dict of outputs), `metric_names`,
`loss_epsilons`, `loss_denominators(batch)`, `loss_terms(outputs, batch)` and, optionally,
`eval_keys`. Its loss is normalised over the global batch by the step. Every trainable variable
must get a gradient: a model whose loss does not use the pooler (SQuAD, tagging) sets
`bert.pooler.trainable = False`, which is what the original's optimizer does with a variable
without a gradient (no update, no Adam slots in the checkpoint).
"""

import dataclasses
import json
import logging
import math
import os

from bert_tf import files
from bert_tf.training.options import TrainingOptions, option

logger = logging.getLogger(__name__)

EVAL_RESULTS = "eval_results.txt"
# The original's input_fn shuffles the repeated training records with this buffer.
SHUFFLE_BUFFER = 100


@dataclasses.dataclass
class FinetuningOptions(TrainingOptions):
    """The flags every fine-tuning tool has: the original's (with its defaults), then bert_tf's."""

    vocab_file: str = option(None, "The vocabulary file that the BERT model was trained on.")
    bert_config_file: str = option(None, "The bert_config.json of the pre-trained model.")
    do_lower_case: bool = option(True, "True for uncased models, False for cased ones.")
    max_seq_length: int = option(
        128,
        "Total input length after WordPiece tokenization; longer inputs are truncated (split into "
        "windows by the tagger), shorter ones padded.",
    )
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
        super().validate()
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("at least one of --do_train, --do_eval or --do_predict must be True")
        for flag in ("vocab_file", "bert_config_file"):
            if not getattr(self, flag):
                raise ValueError(f"--{flag} is required")
            if not files.isfile(getattr(self, flag)):
                raise ValueError(f"--{flag}: {getattr(self, flag)}: no such file")
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


def train_steps(num_examples, train_batch_size, num_train_epochs):
    """The original's `int(num_examples / train_batch_size * num_train_epochs)`."""
    return int(num_examples / train_batch_size * num_train_epochs)


def warmup_steps(num_train_steps, warmup_proportion):
    """The original's `int(num_train_steps * warmup_proportion)`."""
    return int(num_train_steps * warmup_proportion)


def _example(features):
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        values = list(values)
        if values and isinstance(values[0], float):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_records(path, features):
    """Writes one `tf.train.Example` per feature dict to the TFRecord file `path`, atomically.

    Args:
      path: The output file; written under a temporary name and renamed when complete.
      features: An iterable of dicts `name -> list` (ints are written as an int64 list, floats
        as a float list), e.g. the original's `input_ids`, `input_mask`, `segment_ids`,
        `label_ids`, `is_real_example`.

    Returns:
      The number of records written.
    """
    from bert_tf.data.examples import RecordWriter

    count = 0
    with RecordWriter([path]) as writer:
        for feature in features:
            writer.write(_example(feature).SerializeToString(deterministic=True))
            count += 1
    return count


def _cast_ints(features):
    import tensorflow as tf

    return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for name, t in features.items()}


def records_dataset(
    input_file,
    name_to_features,
    batch_size,
    is_training,
    input_context=None,
    seed=None,
    num_batches=None,
):
    """Batches of features from a TFRecord file of `write_records`.

    Training (the original's `input_fn`): the records repeated, shuffled in a buffer of 100 and
    batched, dropping the remainder. Otherwise: the records in file order, then all-zero rows up
    to exactly `num_batches` full batches, so a finite set is covered once with static shapes;
    the zero rows have `is_real_example` (and every other feature) 0.

    Args:
      input_file: The TFRecord file.
      name_to_features: Name -> `tf.io.FixedLenFeature` of the records.
      batch_size: Rows per batch (this worker's).
      is_training: Repeat and shuffle.
      input_context: A `tf.distribute.InputContext`; with several input pipelines each reads
        every n-th record. None reads every record.
      seed: The shuffle seed.
      num_batches: The number of batches (not training); the file must not hold more rows.

    Returns:
      A `tf.data.Dataset` of dicts of int32 (and float32) [batch, ...] tensors.
    """
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(input_file)
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        dataset = dataset.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.map(
            lambda records: _cast_ints(tf.io.parse_example(records, name_to_features)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)
    dataset = dataset.map(lambda record: _cast_ints(tf.io.parse_single_example(record, name_to_features)))
    zeros = {
        name: tf.zeros(spec.shape, tf.int32 if spec.dtype == tf.int64 else spec.dtype)
        for name, spec in name_to_features.items()
    }
    dataset = dataset.concatenate(tf.data.Dataset.from_tensors(zeros).repeat())
    dataset = dataset.take(num_batches * batch_size).batch(batch_size, drop_remainder=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


class FinetuningRunner:
    """Runs the training, evaluation and prediction of a fine-tuning task (module docstring).

    Args:
      options: A `FinetuningOptions` (or a task's subclass of it).

    Raises:
      ValueError: Bad options (names the flag): none of do_train/do_eval/do_predict, a missing
        file, a vocabulary that does not fit the config, `max_seq_length` above
        `max_position_embeddings`, `do_lower_case` against a released checkpoint's name, or a
        batch size that does not divide into the replicas.
    """

    def __init__(self, options):
        import keras

        from bert_tf.config import BertConfig
        from bert_tf.export.bert import check_vocab_and_length
        from bert_tf.text import tokenization

        # In the original's order: the case, the --do_* flags, then the lengths.
        tokenization.validate_case_matches_checkpoint(options.do_lower_case, options.init_checkpoint)
        options.validate()
        self.options = options
        self.config = BertConfig.from_json_file(options.bert_config_file)
        try:
            check_vocab_and_length(self.config, options.vocab_file, options.max_seq_length)
        except ValueError as e:
            raise ValueError(f"--vocab_file/--max_seq_length: {e}") from None
        self.tokenizer = tokenization.FullTokenizer(options.vocab_file, options.do_lower_case)
        self.distribution = options.distribution()
        for mode in ("train", "eval", "predict"):
            if getattr(options, f"do_{mode}"):
                flag = f"{mode}_batch_size"
                self.distribution.check_batch_size(flag, getattr(options, flag))
        if options.seed is not None:
            keras.utils.set_random_seed(options.seed)
        self.dtype = options.dtype

    @property
    def strategy(self):
        return self.distribution.strategy

    def build(self, factory, *args, **kwargs):
        """`factory(config, *args, dtype=<the options' policy>, **kwargs)` under the strategy's scope."""
        with self.strategy.scope():
            return factory(self.config, *args, dtype=self.dtype, **kwargs)

    def _worker_batch(self, global_batch_size):
        return global_batch_size // self.distribution.num_workers

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

    def train(self, task, train_file, name_to_features, num_examples):
        """Trains `task.model` on the records of `train_file` for the options' epochs.

        Args:
          task: The task object, from `build`.
          train_file: The TFRecord file of training features.
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_examples: The examples the epochs count (the original counts examples, not
            features: SQuAD's documents may give several features each).

        Returns:
          The last block's metrics and `global_step` (`bert_tf.training.loop.train`).

        Raises:
          ValueError: The options give no training step.
        """
        from bert_tf.training import loop
        from bert_tf.training.optimization import create_optimizer

        options = self.options
        num_train_steps = self.num_train_steps(num_examples)
        num_warmup_steps = warmup_steps(num_train_steps, options.warmup_proportion)
        with self.strategy.scope():
            optimizer = create_optimizer("adamw", options.learning_rate, num_train_steps, num_warmup_steps)
            loss_scale = options.loss_scale()
        logger.info(
            "***** Running training *****  examples %d, batch size %d, steps %d (warm-up %d)",
            num_examples,
            options.train_batch_size,
            num_train_steps,
            num_warmup_steps,
        )
        dataset = records_dataset(
            train_file,
            name_to_features,
            self._worker_batch(options.train_batch_size),
            is_training=True,
            input_context=self.distribution.input_context(),
            seed=options.seed,
        )
        source = (
            f"the {num_train_steps} steps of --num_train_epochs={options.num_train_epochs} "
            f"({num_examples} examples, --train_batch_size={options.train_batch_size})"
        )
        config = options.loop_config(num_train_steps, options.train_batch_size, num_train_steps_source=source)
        # What a resumed run must read the same to continue the saved input position: the
        # records (made afresh by each run from the data and flags), their shapes, the batch,
        # the seed and the worker.
        description = json.dumps(
            {
                "train_file": files.absolute(train_file),
                "bytes": files.size(train_file),
                "num_examples": num_examples,
                "features": {name: list(feature.shape) for name, feature in sorted(name_to_features.items())},
                "batch_size": self._worker_batch(options.train_batch_size),
                "seed": options.seed,
                "worker": [self.distribution.worker_index, self.distribution.num_workers],
            },
            sort_keys=True,
        )
        return loop.train(task, optimizer, self.distribution, dataset, config, loss_scale, description)

    def evaluate(self, task, eval_file, name_to_features, num_records, more_results=None):
        """Evaluates on every record of `eval_file` once and writes `eval_results.txt`.

        Args:
          task: The task object, from `build` (its metrics must weight all-zero rows 0).
          eval_file: The TFRecord file of eval features.
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_records: The records in `eval_file`.
          more_results: Optional `more_results(model) -> {key: value}`, called with the
            restored model after the pass; its results are written too.

        Returns:
          The results written: `global_step`, `loss`, the task's metrics (renamed by
          `task.eval_keys`) and `more_results`'.
        """
        from bert_tf.training import loop

        if num_records < 1:
            raise ValueError(f"{eval_file}: no eval examples")
        batch_size = self._worker_batch(self.options.eval_batch_size)
        num_workers = self.distribution.num_workers
        num_batches = math.ceil(math.ceil(num_records / num_workers) / batch_size)
        dataset = records_dataset(
            eval_file,
            name_to_features,
            batch_size,
            is_training=False,
            input_context=self.distribution.input_context(),
            num_batches=num_batches,
        )
        logger.info("***** Running evaluation *****  records %d, batches %d", num_records, num_batches)
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

    def export(self, factory, output_names, labels=None, text_tokens=False, max_text_a_tokens=None):
        """Exports the fine-tuned model as a SavedModel version under `--export_dir`
        (`bert_tf.export.export_saved_model`), on the chief only.

        The model is built in float32 outside the distribution strategy and restored as
        `restore` does; the signatures check the ids against the config.

        Args:
          factory: As `build`'s, e.g. `BertClassifier`, called as `factory(config)`.
          output_names: The model outputs every signature returns.
          labels: None, or `(label_list, scores, output)`: the signatures also return `output`,
            the names of the best classes of the output `scores` (`bert_tf.export.NamedLabels`).
          text_tokens: Whether `text` and `text_pair` also return the packed `tokens`.
          max_text_a_tokens: How `text_pair` truncates (`bert_tf.export.ExportModule`).

        Returns:
          The version directory written, or None on a worker that is not the chief.
        """
        from bert_tf.export import NamedLabels, export_saved_model

        if not self.distribution.is_chief:
            return None
        options = self.options
        model = factory(self.config)
        self.restore(model)
        if labels is not None:
            label_list, scores, output = labels
            model = NamedLabels(model, label_list, scores, output)
            output_names = (*output_names, output)
        path = export_saved_model(
            model,
            output_names,
            options.vocab_file,
            options.do_lower_case,
            options.max_seq_length,
            options.export_dir,
            config=self.config,
            text_tokens=text_tokens,
            max_text_a_tokens=max_text_a_tokens,
        )
        logger.info("Exported %s", path)
        return path

    def predict(self, model, predict_file, name_to_features, num_records, output_names):
        """The model's outputs on every record of `predict_file`, in file order.

        Every worker predicts every record (the chief writes the results); each worker's
        batch of `predict_batch_size / workers` rows is split among its replicas. The last
        batch is padded with all-zero rows, whose outputs are dropped.

        Args:
          model: A restored model, from `build` (see `restore`).
          predict_file: The TFRecord file of features.
          name_to_features: Name -> `tf.io.FixedLenFeature` of its records.
          num_records: The records in `predict_file`.
          output_names: The model outputs to return.

        Returns:
          `{name: np.ndarray [num_records, ...]}`.
        """
        import numpy as np
        import tensorflow as tf

        from bert_tf.training.step import local_replica_batches

        if num_records < 1:
            raise ValueError(f"{predict_file}: no examples to predict")
        strategy, num_local_replicas = self.strategy, self.distribution.num_local_replicas
        batch_size = self._worker_batch(self.options.predict_batch_size)
        num_batches = math.ceil(num_records / batch_size)
        dataset = records_dataset(
            predict_file, name_to_features, batch_size, is_training=False, num_batches=num_batches
        )

        def replica_outputs(batch):
            outputs = model(batch, training=False)
            return {name: outputs[name] for name in output_names}

        @tf.function
        def predict_step(batch):
            outputs = strategy.run(
                replica_outputs, args=(local_replica_batches(strategy, batch, num_local_replicas),)
            )
            return {
                name: tf.concat(strategy.experimental_local_results(value), axis=0)
                for name, value in outputs.items()
            }

        logger.info("***** Running prediction *****  records %d, batches %d", num_records, num_batches)
        outputs = {name: [] for name in output_names}
        for batch in dataset:
            for name, value in predict_step(batch).items():
                outputs[name].append(value.numpy())
        return {name: np.concatenate(values)[:num_records] for name, values in outputs.items()}
