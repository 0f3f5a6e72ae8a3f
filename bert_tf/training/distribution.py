"""Choosing a `tf.distribute` strategy from the flags, and where this process stands in it.

- `default`: one device (the first GPU if there is one, else the CPU).
- `mirrored`: every local GPU (or the CPU), one replica each.
- `multi_worker_mirrored`: several machines, each described by the `TF_CONFIG` environment
  variable (`{"cluster": {"worker": ["host1:port", ...]}, "task": {"type": "worker", "index": i}}`);
  every worker runs the same command.
- `tpu`: a Cloud TPU named by `--tpu_name` (or `--master`), as the original's `--use_tpu`.

Each worker reads its own share of the input through one tf.data pipeline and splits its batch
among its local replicas (`bert_tf.training.step.local_replica_batches`).
"""

import dataclasses
import logging
import os

import tensorflow as tf

from bert_tf import errors

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


@dataclasses.dataclass
class Distribution:
    """A strategy and this process's place in it.

    Attributes:
      strategy: The `tf.distribute.Strategy`.
      num_workers: Processes taking part (each with its own input pipeline).
      worker_index: This process's index among them; 0 is the chief.
    """

    strategy: tf.distribute.Strategy
    num_workers: int = 1
    worker_index: int = 0

    @property
    def num_replicas(self):
        return self.strategy.num_replicas_in_sync

    @property
    def num_local_replicas(self):
        return self.num_replicas // self.num_workers

    @property
    def is_chief(self):
        return self.worker_index == 0

    def input_context(self):
        """The `tf.distribute.InputContext` of this worker's input pipeline."""
        return tf.distribute.InputContext(
            num_input_pipelines=self.num_workers,
            input_pipeline_id=self.worker_index,
            num_replicas_in_sync=self.num_replicas,
        )

    def barrier(self):
        """Returns once every worker has called it (a no-op on one worker)."""
        if self.num_workers > 1:
            ones = self.strategy.run(lambda: tf.constant(1.0))
            self.strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None)

    def check_batch_size(self, flag, batch_size, multiple_of=1):
        """Raises a ValueError unless `batch_size` divides into replicas (and micro-batches)."""
        divisor = self.num_replicas * multiple_of
        if batch_size <= 0 or batch_size % divisor:
            what = f"{self.num_replicas} replicas" + (
                f" x {multiple_of} micro-batches" if multiple_of > 1 else ""
            )
            raise ValueError(f"--{flag}={batch_size} is not a positive multiple of {divisor} ({what})")


def _multi_worker_position(resolver):
    """(num_workers, worker_index) from a cluster resolver; a `chief` task counts as worker 0."""
    spec = resolver.cluster_spec()
    chiefs = spec.num_tasks("chief") if "chief" in spec.jobs else 0
    workers = spec.num_tasks("worker") if "worker" in spec.jobs else 0
    if resolver.task_type == "chief":
        return chiefs + workers, 0
    return chiefs + workers, chiefs + resolver.task_id


def create_distribution(
    name="default", tpu_name=None, tpu_zone=None, gcp_project=None, master=None, num_tpu_cores=None
):
    """Builds the strategy called `name`.

    Args:
      name: One of `STRATEGIES`.
      tpu_name, tpu_zone, gcp_project, master: Where the TPU is (`tpu` only), as the original's
        flags.
      num_tpu_cores: The original's `--num_tpu_cores` (`tpu` only): TensorFlow 2 uses every core
        the TPU has, and a warning says so when this differs.

    Returns:
      A `Distribution`.

    Raises:
      ValueError: An unknown strategy, `multi_worker_mirrored` without `TF_CONFIG`, or `tpu`
        without `--tpu_name`/`--master` or with a TPU that cannot be reached.
    """
    if name == "default":
        return Distribution(tf.distribute.get_strategy())
    if name == "mirrored":
        return Distribution(tf.distribute.MirroredStrategy())
    if name == "multi_worker_mirrored":
        if not os.environ.get("TF_CONFIG"):
            raise ValueError(
                "--strategy=multi_worker_mirrored needs the TF_CONFIG environment variable, which "
                "names the workers and this one's index on each machine "
                '(\'{"cluster": {"worker": ["host1:port", ...]}, "task": {"type": "worker", "index": 0}}\'); '
                "for the GPUs of one machine use --strategy=mirrored"
            )
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        num_workers, worker_index = _multi_worker_position(strategy.cluster_resolver)
        return Distribution(strategy, num_workers, worker_index)
    if name == "tpu":
        if not (tpu_name or master):
            raise ValueError("--strategy=tpu (or --use_tpu) needs --tpu_name or --master")
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu=tpu_name or master, zone=tpu_zone, project=gcp_project
            )
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (OSError, ValueError, tf.errors.OpError) as e:  # OSError: urllib's, without a network
            flag = f"--tpu_name={tpu_name}" if tpu_name else f"--master={master}"
            raise ValueError(f"{flag}: cannot reach the TPU ({errors.reason(e)})") from None
        # One client drives every core; it is the only input pipeline.
        strategy = tf.distribute.TPUStrategy(resolver)
        if num_tpu_cores is not None and strategy.num_replicas_in_sync != num_tpu_cores:
            logger.warning(
                "--num_tpu_cores=%d, but the TPU has %d cores: all of them are used",
                num_tpu_cores,
                strategy.num_replicas_in_sync,
            )
        return Distribution(strategy)
    raise ValueError(f"--strategy: unknown strategy {name!r}; expected one of {', '.join(STRATEGIES)}")
