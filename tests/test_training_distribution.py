"""The train step on several replicas: MirroredStrategy on 2 logical CPU devices (both gradient
reductions) and MultiWorkerMirroredStrategy on 2 worker processes, each against a NumPy
re-derivation of the reduction, the clipping and the AdamWeightDecay update
(`tests/training_reference.py`), with clipping active (the gradient norm is about 3).

Each runs in a process of its own, forked before TensorFlow has run an op (`tests.tool_runs`):
logical devices and TF_CONFIG must be set before TensorFlow starts.
"""

import concurrent.futures
import json
import os
import socket
import sys

import pytest

from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Shared by the scripts: the fixture weights and batch, three steps, and the NumPy reference.
_COMMON = """
import json, os, sys
sys.path.insert(0, os.getcwd())  # the repository (the subprocess's cwd)
import numpy as np
import tensorflow as tf
from bert_tf import BertConfig, load_google_checkpoint
from bert_tf.training.optimization import create_optimizer
from bert_tf.tasks.pretraining.task import PretrainingTask
from tests import model_fixtures as mf
from tests import training_reference as ref

TRAIN = os.path.join(mf.FIXTURES_DIR, "google_tiny_train")
CONFIG = BertConfig.from_json_file(os.path.join(TRAIN, "bert_config.json"))
BATCH = dict(np.load(os.path.join(TRAIN, "batch.npz")))
LR, STEPS, WARMUP = 1e-3, 10, 1


def rows(batch, start, stop):
    return {k: v[start:stop] for k, v in batch.items()}


_REFERENCE = []  # the model the reference's gradients come from, and its initial weights


def reference_run(shards, per_shard_clip, num_steps=3):
    if not _REFERENCE:
        task = PretrainingTask(CONFIG)
        load_google_checkpoint(task.model, mf.GOOGLE_TINY_CKPT)
        _REFERENCE.extend([task, {v.path: v.numpy() for v in task.model.trainable_variables}])
    task, initial = _REFERENCE
    params = {path: value.astype(np.float64) for path, value in initial.items()}
    adam = ref.AdamWeightDecay(params)
    losses, previous = [], None  # previous: the last step's params and its shards' (gradients, loss)
    for step in range(num_steps):
        if previous and all(np.array_equal(previous[0][k], params[k]) for k in params):
            # The weights the last step started from (its learning rate was 0, in the warmup):
            # the same gradients (no dropout in this config).
            shard_results = previous[1]
        else:
            for v in task.model.trainable_variables:
                v.assign(params[v.path].astype(np.float32))
            shard_results = [ref.model_gradients(task.model, s, ref.pretraining_loss) for s in shards]
        previous = params, shard_results
        total, shard_losses = None, []
        for grads, loss in shard_results:
            shard_losses.append(loss)
            if per_shard_clip:
                grads, _ = ref.clip(grads)
            total = grads if total is None else {k: total[k] + grads[k] for k in total}
        if not per_shard_clip:
            total, _ = ref.clip(total)
        losses.append(float(np.mean(shard_losses)))
        params = adam.apply(params, total, ref.learning_rate(step, LR, STEPS, WARMUP))
    return params, losses
"""

_MIRRORED = (
    """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""
    + _COMMON
    + """
from bert_tf.training.step import TrainStep
strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
reference_file, results = sys.argv[1], {}
for mode in sys.argv[2:]:
    with strategy.scope():
        task = PretrainingTask(CONFIG)
        optimizer = create_optimizer("adamw", LR, STEPS, WARMUP)
    load_google_checkpoint(task.model, mf.GOOGLE_TINY_CKPT)
    step = TrainStep(task, optimizer, strategy, num_local_replicas=2, reduction=mode)
    iterator = iter(tf.data.Dataset.from_tensors(BATCH).repeat())
    losses = []
    for _ in range(3):
        step.train(iterator, tf.constant(1))
        losses.append(step.metrics.result()["loss"])
        step.metrics.reset()
    shards = [rows(BATCH, 0, 2), rows(BATCH, 2, 4)] if mode == "tpu_original" else [BATCH]
    params, ref_losses = reference_run(shards, per_shard_clip=mode == "tpu_original")
    if mode == "global":  # one device's steps on the whole batch: the multi-worker test's too
        np.savez(reference_file, **params)
    got = {v.path: v.numpy() for v in task.model.trainable_variables}
    results[mode] = {
        "replicas": strategy.num_replicas_in_sync,
        "weight_diff": max(float(np.abs(got[k] - params[k]).max()) for k in params),
        "losses": losses, "ref_losses": ref_losses,
        "step": int(optimizer.iterations.numpy()),
    }
print("RESULT", json.dumps(results))
"""
)


def _run_script(script, *args, env=None, server=tool_runs.TENSORFLOW, timeout=300):
    """The `RESULT` line of `script` run with `args`, forked from `server` (`tests.tool_runs`)."""
    result = tool_runs.run(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=dict(os.environ, **(env or {})),
        timeout=timeout,
        server=server,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


MODES = ["global", "tpu_original"]


@pytest.fixture(scope="module")
def mirrored_run(fixtures_dir, tmp_path_factory):
    """`({mode: result}, reference file)` of the mirrored script, both reductions in one
    process; the file holds the NumPy reference's weights after three steps of one device on
    the whole batch."""
    reference_file = str(tmp_path_factory.mktemp("reference") / "one_device.npz")
    return _run_script(_MIRRORED, reference_file, *MODES), reference_file


@pytest.fixture(scope="module")
def mirrored(mirrored_run):
    return mirrored_run[0]


@pytest.mark.parametrize("mode", MODES)
def test_mirrored_two_replicas_against_numpy(mirrored, mode):
    result = mirrored[mode]
    assert result["replicas"] == 2 and result["step"] == 3
    assert result["weight_diff"] <= 1e-5, result
    for got, want in zip(result["losses"], result["ref_losses"], strict=True):
        assert abs(got - want) <= 1e-5, result


_WORKER = (
    """
from bert_tf import cli  # first: the worker may be forked from tests.tool_runs' TOOLS server
"""
    + _COMMON
    + """
from bert_tf.training import loop
from bert_tf.training.distribution import create_distribution
output_dir, reference_file = sys.argv[1:3]
distribution = create_distribution("multi_worker_mirrored")
with distribution.strategy.scope():
    task = PretrainingTask(CONFIG)
    optimizer = create_optimizer("adamw", LR, STEPS, WARMUP)
half = len(BATCH["input_ids"]) // distribution.num_workers
mine = rows(BATCH, distribution.worker_index * half, (distribution.worker_index + 1) * half)
config = loop.LoopConfig(output_dir=output_dir, num_train_steps=3, global_batch_size=4,
                         init_checkpoint=mf.GOOGLE_TINY_CKPT, save_checkpoints_steps=3, iterations_per_loop=3)
results = loop.train(task, optimizer, distribution, tf.data.Dataset.from_tensors(mine).repeat(), config)
reader = tf.train.load_checkpoint(os.path.join(output_dir, "model.ckpt-3"))
result = {
    "worker": distribution.worker_index, "workers": distribution.num_workers, "step": results["global_step"],
    "vs_checkpoint": max(float(np.abs(v.numpy() - reader.get_tensor(v.path)).max())
                         for v in task.model.trainable_variables),
}
if distribution.is_chief:
    params = dict(np.load(reference_file))  # reference_run([BATCH], per_shard_clip=False)'s
    assert len(params) == len(task.model.trainable_variables)
    result["vs_reference"] = max(float(np.abs(reader.get_tensor(k) - p).max()) for k, p in params.items())
print("RESULT", json.dumps(result))
"""
)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_multi_worker_mirrored_two_processes_equal_one_device(mirrored_run, tmp_path):
    """Two worker processes on localhost, each with half of the global batch: the chief's
    checkpoint equals the NumPy reference of one device on the whole batch (computed once, by
    the mirrored script), and both workers hold the weights it wrote."""
    reference_file = mirrored_run[1]
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}

    def worker(index, server):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        return _run_script(
            _WORKER, str(tmp_path), reference_file, env={"TF_CONFIG": tf_config}, server=server
        )

    # The two workers run at once, each forked from a server of its own (a server forks one
    # run at a time).
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(worker, 0, tool_runs.TENSORFLOW), pool.submit(worker, 1, tool_runs.TOOLS)]
        results = [run.result() for run in runs]
    assert sorted(r["worker"] for r in results) == [0, 1]
    assert all(r["workers"] == 2 and r["step"] == 3 and r["vs_checkpoint"] == 0.0 for r in results)
    chief = next(r for r in results if r["worker"] == 0)
    assert chief["vs_reference"] <= 1e-5, chief
    assert sorted(os.listdir(tmp_path / "input_state")) == sorted(
        f"model.ckpt-3.worker-{w}.{ext}" for w in (0, 1) for ext in ("index", "data-00000-of-00001")
    )


# UnavailableErrors' messages survivors got in runs of two local workers (tools/run_pretraining.py)
# where the other was killed with kill -9, tracebacks shortened: a graph call's (worker 1, the chief
# killed mid-step), an eager barrier's (the chief, worker 1 killed during a save), gRPC's failure to
# reach a worker gone before the call (the chief); and the text of the strategy's health check
# (tensorflow/python/distribute/collective_all_reduce_strategy.py), which no local run waits for.
_GRAPH_ERROR = (
    "Graph execution error:\n\nDetected at node while/cond_2/CollectiveReduceV2 defined at (most recent "
    'call last):\n  File "tools/run_pretraining.py", line 26, in <module>\n\nCollective ops is aborted '
    "by: recvmsg:Connection reset by peer\nAdditional GRPC error information from remote target "
    "/job:worker/replica:0/task:0 while calling /tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error "
    'received from peer  {grpc_message:"recvmsg:Connection reset by peer", grpc_status:14}\nThe error '
    "could be from a previous operation. Restart your program to reset.\n\t [[{{node "
    "while/cond_2/CollectiveReduceV2}}]] [Op:__inference__train_4345]"
)
_EAGER_ERROR = (
    "{{function_node __wrapped__CollectiveReduceV2_Nordering_token_1_device_/job:worker/replica:0/task:0"
    "/device:CPU:0}} Collective ops is aborted by: recvmsg:Connection reset by peer\nAdditional GRPC "
    "error information from remote target /job:worker/replica:0/task:1 while calling "
    '/tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"'
    'recvmsg:Connection reset by peer"}\nThe error could be from a previous operation. Restart your '
    "program to reset. [Op:CollectiveReduceV2] name: "
)
_REFUSED_ERROR = (
    "Graph execution error:\n\nDetected at node while/cond_2/CollectiveReduceV2 defined at (most recent "
    "call last):\n\nCollective ops is aborted by: failed to connect to all addresses; last error: "
    "UNKNOWN: ipv4:127.0.0.1:2223: Failed to connect to remote host: Connection refused\nAdditional GRPC "
    "error information from remote target /job:worker/replica:0/task:1 while calling "
    '/tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received from peer  {grpc_message:"failed to '
    "connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:2223: Failed to connect to remote "
    'host: Connection refused", grpc_status:14}\nThe error could be from a previous operation. Restart '
    "your program to reset.\n\t [[{{node while/cond_2/CollectiveReduceV2}}]] [Op:__inference__train_4459]"
)
_HEALTH_CHECK_ERROR = (
    "Collective ops is aborted by: cluster check alive failed, /job:worker/replica:0/task:2 is down"
)


def _distribution(addresses, index):
    """A `Distribution` of worker `index` in a cluster of `addresses` (no strategy runs)."""
    import types

    import tensorflow as tf

    from bert_tf.training.distribution import Distribution

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": addresses}), task_type="worker", task_id=index
    )
    return Distribution(types.SimpleNamespace(cluster_resolver=resolver), len(addresses), index)


def _lost_worker_message(addresses, index, error):
    """The `LostWorker` message worker `index` of a cluster of `addresses` makes of an
    UnavailableError saying `error`."""
    import tensorflow as tf

    from bert_tf.training.distribution import LostWorker

    with (
        pytest.raises(LostWorker) as lost,
        _distribution(addresses, index).lost_worker_stops(lambda: "RERUN"),
    ):
        raise tf.errors.UnavailableError(None, None, error)
    return str(lost.value)


TWO = ["localhost:2222", "localhost:2223"]
THREE = [*TWO, "localhost:2224"]
RERUN = "this worker stopped too. Rerun the same command on every worker, the lost one included: RERUN"


@pytest.mark.parametrize(
    "addresses, index, error, want",
    [
        (
            TWO,
            1,
            _GRAPH_ERROR,
            "worker 0 (/job:worker/replica:0/task:0, localhost:2222) was lost "
            "(recvmsg:Connection reset by peer)",
        ),
        (
            TWO,
            0,
            _EAGER_ERROR,
            "worker 1 (/job:worker/replica:0/task:1, localhost:2223) was lost "
            "(recvmsg:Connection reset by peer)",
        ),
        (
            THREE,
            2,
            _REFUSED_ERROR,
            "worker 1 (/job:worker/replica:0/task:1, localhost:2223) was lost (failed to connect to all "
            "addresses; last error: UNKNOWN: ipv4:127.0.0.1:2223: Failed to connect to remote host: "
            "Connection refused)",
        ),
        (
            THREE,
            0,
            _HEALTH_CHECK_ERROR,
            "worker 2 (/job:worker/replica:0/task:2, localhost:2224) was lost (cluster check alive failed, "
            "/job:worker/replica:0/task:2 is down)",
        ),
        # Naming no task: the other worker of two, one of the others of three.
        (
            TWO,
            0,
            "Collective ops is aborted by: Socket closed",
            "worker 1 (/job:worker/replica:0/task:1, localhost:2223) was lost (Socket closed)",
        ),
        (
            THREE,
            1,
            "Collective ops is aborted by: Socket closed",
            "a worker (one of worker 0 (/job:worker/replica:0/task:0, localhost:2222), worker 2 "
            "(/job:worker/replica:0/task:2, localhost:2224)) was lost (Socket closed)",
        ),
    ],
)
def test_a_lost_worker_is_one_line_naming_it(addresses, index, error, want):
    assert _lost_worker_message(addresses, index, error) == f"{want}: {RERUN}"


def test_other_errors_pass_through():
    """An error of the worker's own (a file, gs:// out of reach), and a lost-worker text in a run
    of one worker."""
    import tensorflow as tf

    for error, distribution in [
        (
            tf.errors.UnavailableError(None, None, "gs://bucket/x: Couldn't resolve host name"),
            _distribution(TWO, 0),
        ),
        (tf.errors.NotFoundError(None, None, "model.ckpt-3.index: No such file"), _distribution(TWO, 1)),
        (tf.errors.UnavailableError(None, None, _EAGER_ERROR), _distribution(TWO[:1], 0)),
    ]:
        with pytest.raises(type(error)), distribution.lost_worker_stops(lambda: "RERUN"):
            raise error
