"""Choosing a `tf.distribute` strategy from the flags, and where this process stands in it.

- `default`: one device (the first GPU if there is one, else the CPU).
- `mirrored`: every local GPU (or the CPU), one replica each.
- `multi_worker_mirrored`: several machines, each described by the `TF_CONFIG` environment
  variable (`{"cluster": {"worker": ["host1:port", ...]}, "task": {"type": "worker", "index": i}}`);
  every worker runs the same command.
- `tpu`: a Cloud TPU named by `--tpu_name` (or `--master`), as the original's `--use_tpu`.

Each worker reads its own share of the input through one tf.data pipeline and splits its batch
among its local replicas (`bert_tf.training.step.local_replica_batches`).

A worker that stops (its process killed, its machine gone) fails the others' next collective op
within seconds: a reset connection, or the strategy's health check (a peer that stopped answering
for about a minute). `Distribution.lost_worker_stops` turns that op's error, a page of graph
trace, into a `LostWorker` naming the worker TensorFlow names (the remote task it was talking to,
or the cluster's other member when there are two).
"""

import contextlib
import dataclasses
import logging
import os
import re

import tensorflow as tf

from bert_tf import errors

logger = logging.getLogger(__name__)

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")

# What TensorFlow's errors say when a collective op lost its peer: the collective executor's
# abort, the health check's, or gRPC's own failure to reach a task.
_PEER_LOST = re.compile(
    r"Collective ops is aborted|cluster check alive failed|Error received from peer|"
    r"failed to connect to all addresses|Connection reset by peer|Socket closed"
)
# A task as TensorFlow names it: `/job:worker/replica:0/task:1`.
_TASK_NAME = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# The cause, as gRPC or the health check put it.
_PEER_CAUSE = re.compile(
    r'grpc_message:"([^"]+)"|(cluster check alive failed, \S+ is down)|'
    r"Collective ops is aborted by: ([^\n]+?)(?: Additional GRPC|\n|$)"
)


class LostWorker(errors.JobError):
    """Another worker of the run stopped (its process died, its machine went away): this one's
    collective ops cannot go on, and every worker has to be started again."""


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

    @contextlib.contextmanager
    def lost_worker_stops(self, rerun):
        """A context in which a collective op failed by a lost worker raises `LostWorker`.

        Args:
          rerun: Returns what rerunning the workers' commands does (e.g. which checkpoint
            training continues from), for the end of the message; called when a worker is lost.

        Raises:
          LostWorker: Several workers, and a TensorFlow error says a peer was lost; the one-line
            message names the worker (index, TensorFlow's task name and address) where the error
            names it, else the cluster's members, and says to rerun every worker's command.
        """
        try:
            yield
        except tf.errors.OpError as e:
            if self.num_workers == 1 or not _PEER_LOST.search(e.message):
                raise
            raise LostWorker(
                f"{self._lost_worker_named(e.message)} was lost ({_peer_cause(e.message)}): this worker "
                f"stopped too. Rerun the same command on every worker, the lost one included: {rerun()}"
            ) from None

    def _lost_worker_named(self, message):
        """'worker 1 (/job:worker/replica:0/task:1, localhost:2223)' for the task other than this
        one that `message` names (the only other one of two workers where it names none), else
        'a worker (one of ...)'."""
        resolver = self.strategy.cluster_resolver
        spec = resolver.cluster_spec()
        own = (resolver.task_type, resolver.task_id)
        jobs = [job for job in ("chief", "worker") if job in spec.jobs]  # not an `evaluator`
        members = [(job, task) for job in jobs for task in spec.task_indices(job)]
        others = [member for member in members if member != own]
        named = {(job, int(task)) for job, task in _TASK_NAME.findall(message)} - {own}
        named = [member for member in others if member in named] or (others if len(others) == 1 else [])

        def describe(member):
            job, task = member
            name = f"/job:{job}/replica:0/task:{task}"
            return f"worker {_worker_index(spec, job, task)} ({name}, {spec.task_address(job, task)})"

        if len(named) == 1:
            return describe(named[0])
        return f"a worker (one of {', '.join(describe(member) for member in named or others)})"

    def check_batch_size(self, flag, batch_size, multiple_of=1):
        """Raises a ValueError unless `batch_size` divides into replicas (and micro-batches)."""
        divisor = self.num_replicas * multiple_of
        if batch_size <= 0 or batch_size % divisor:
            what = f"{self.num_replicas} replicas" + (
                f" x {multiple_of} micro-batches" if multiple_of > 1 else ""
            )
            raise ValueError(f"--{flag}={batch_size} is not a positive multiple of {divisor} ({what})")


def _peer_cause(message):
    """The cause of a lost peer in TensorFlow's `message` ("recvmsg:Connection reset by peer"),
    or "its collective ops failed"."""
    match = _PEER_CAUSE.search(message)
    return next((group for group in match.groups() if group), None) if match else "its collective ops failed"


def _worker_index(spec, task_type, task_id):
    """The worker index of a task of cluster `spec`: a `chief` task is worker 0, the `worker`
    tasks follow it."""
    chiefs = spec.num_tasks("chief") if "chief" in spec.jobs else 0
    return 0 if task_type == "chief" else chiefs + task_id


def _multi_worker_position(resolver):
    """(num_workers, worker_index) from a cluster resolver."""
    spec = resolver.cluster_spec()
    num_workers = sum(spec.num_tasks(job) for job in ("chief", "worker") if job in spec.jobs)
    return num_workers, _worker_index(spec, resolver.task_type, resolver.task_id)


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
