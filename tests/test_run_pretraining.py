"""tools/run_pretraining.py end to end: exact resume after kill -9, continuing to a larger total,
the original's own checkpoint in --output_dir, a NaN stop, logs and TensorBoard, eval results,
two workers and a lost one, and bad input. A one-layer model of width 32 keeps each run to seconds.
"""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import onednn
from bert_tf.checkpoints import reference
from bert_tf.config import BertConfig
from bert_tf.tasks.pretraining.data import check_records
from bert_tf.tasks.pretraining.run import PretrainingOptions, run_pretraining
from tests import model_fixtures as mf
from tests import tool_runs
from tests.conftest import FIXTURES_DIR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(REPO, "tools", "run_pretraining.py")
RECORDS = os.path.join(FIXTURES_DIR, "pretraining_data", "sample_s12345.tfrecord")
TRAIN = os.path.join(FIXTURES_DIR, "google_tiny_train")
TINY = dict(
    vocab_size=30522,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    max_position_embeddings=128,
    type_vocab_size=2,
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, fixtures_dir):
    directory = tmp_path_factory.mktemp("pretraining")
    shutil.copy(RECORDS, directory / "data.tfrecord")
    BertConfig(**TINY).to_json_file(str(directory / "bert_config.json"))
    return directory


def _flags(workdir, output_dir, steps, **extra):
    """The flags of a run (of `_args`, or `PretrainingOptions`' fields)."""
    flags = dict(
        input_file=workdir / "data.tfrecord",
        bert_config_file=workdir / "bert_config.json",
        output_dir=output_dir,
        do_train=True,
        train_batch_size=8,
        max_seq_length=128,
        max_predictions_per_seq=20,
        num_train_steps=steps,
        num_warmup_steps=5,
        learning_rate=1e-3,
        save_checkpoints_steps=10,
        iterations_per_loop=5,
        seed=7,
        keep_checkpoint_max=0,
    )
    flags.update(extra)
    return {name: str(value) if isinstance(value, os.PathLike) else value for name, value in flags.items()}


def _args(workdir, output_dir, steps, **extra):
    return [TOOL] + [f"--{k}={v}" for k, v in _flags(workdir, output_dir, steps, **extra).items()]


def _run(args, env=None):
    """The tool in a process of its own (`tests.tool_runs`), `env` added to this one's."""
    return tool_runs.run([sys.executable, *args], cwd=REPO, env=dict(os.environ, **(env or {})), timeout=600)


def _run_here(caplog, workdir, output_dir, steps, **extra):
    """`run_pretraining` in this process (no TensorFlow start-up): its log, as the tool's
    stderr would show it."""
    caplog.clear()
    with caplog.at_level("INFO"):
        run_pretraining(PretrainingOptions(**_flags(workdir, output_dir, steps, **extra)))
    return caplog.text


def _weights(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def uninterrupted(workdir):
    output_dir = workdir / "uninterrupted"
    result = _run(_args(workdir, output_dir, 40))
    assert result.returncode == 0, result.stderr[-3000:]
    return output_dir, result.stderr


# The tool's own process, forked (`tests.tool_runs`), with a signal it sends itself from a thread
# of its own: SIGKILL once the first checkpoint is the latest (the `checkpoint` state file exists:
# it is written after every file of a checkpoint), SIGTERM once its evaluation has scored a batch.
_SIGNALLED_TOOL = """
from bert_tf import cli  # first, as the tool itself (the TOOLS server of tests.tool_runs)
import os, runpy, signal, sys, threading, time

from bert_tf.training import step

tool, signal_name, output_dir, *flags = sys.argv[1:]
evaluations = []
record_evaluation = step.EvalStep.__init__


def recording_init(self, *args, **kwargs):
    record_evaluation(self, *args, **kwargs)
    evaluations.append(self)


step.EvalStep.__init__ = recording_init


def due():
    if signal_name == "SIGKILL":
        return os.path.exists(os.path.join(output_dir, "checkpoint"))
    return bool(evaluations) and evaluations[0].metrics.result()["loss"] > 0


def send():
    deadline = time.monotonic() + 300
    while not due():
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)
    os.kill(os.getpid(), getattr(signal, signal_name))


threading.Thread(target=send, daemon=True).start()
sys.argv = [tool, *flags]
runpy.run_path(tool, run_name="__main__")
"""


def _run_signalled(signal_name, output_dir, args, env=None, server=tool_runs.TOOLS):
    """The tool with `args` (`_args`), sending itself `signal_name` (`_SIGNALLED_TOOL`), `env`
    added to this process's environment, forked from `server`."""
    script = [sys.executable, "-c", _SIGNALLED_TOOL, args[0], signal_name, str(output_dir), *args[1:]]
    env = dict(os.environ, **(env or {}))
    return tool_runs.run(script, cwd=REPO, env=env, timeout=600, server=server)


def test_resume_after_kill_9_equals_an_uninterrupted_run(workdir, uninterrupted, caplog):
    output_dir = workdir / "killed"
    killed = _run_signalled("SIGKILL", output_dir, _args(workdir, output_dir, 40))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    killed_at = tf.train.latest_checkpoint(str(output_dir))
    assert killed_at and not killed_at.endswith("-40"), killed_at  # killed mid-run
    _weights(killed_at)  # the latest checkpoint after a kill -9 reads completely

    assert "Resumed the input where" in _run_here(caplog, workdir, output_dir, 40)
    resumed = _weights(str(output_dir / "model.ckpt-40"))
    straight = _weights(str(uninterrupted[0] / "model.ckpt-40"))
    assert resumed.keys() == straight.keys()
    assert int(resumed["global_step"]) == 40
    for name, value in straight.items():
        np.testing.assert_allclose(resumed[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_sigterm_saves_the_step_in_progress_and_the_rerun_equals_an_uninterrupted_run(
    workdir, uninterrupted, monkeypatch
):
    """One block of all 40 steps: SIGTERM, sent once the step counter reads 3, ends the block
    after the step in progress (not after step 40), saves that step with its input position
    and exits with status 143; the same run again then ends as the uninterrupted run does."""
    from bert_tf.training import step as step_module

    assert threading.current_thread() is threading.main_thread()  # else SIGTERM would kill pytest
    steps = []
    original_init = step_module.TrainStep.__init__

    def recording_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        steps.append(self)

    handler = signal.getsignal(signal.SIGTERM)

    def terminate_at_step_3():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            # Only while training takes the signal (the default handler would end pytest).
            if steps and int(steps[0].optimizer.iterations.numpy()) >= 3:
                if signal.getsignal(signal.SIGTERM) is not handler:
                    os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.001)

    monkeypatch.setattr(step_module.TrainStep, "__init__", recording_init)
    output_dir = workdir / "terminated"
    options = PretrainingOptions(
        **_flags(workdir, output_dir, 40, save_checkpoints_steps=40, iterations_per_loop=40)
    )
    signaller = threading.Thread(target=terminate_at_step_3, daemon=True)
    signaller.start()
    with pytest.raises(SystemExit) as stopped:
        run_pretraining(options)
    assert stopped.value.code == 143
    stopped_at = tf.train.latest_checkpoint(str(output_dir))
    step = int(_weights(stopped_at)["global_step"])
    assert 3 <= step < 40 and stopped_at.endswith(f"model.ckpt-{step}"), stopped_at
    assert (output_dir / "input_state" / f"model.ckpt-{step}.worker-0.index").exists()
    assert signal.getsignal(signal.SIGTERM) is handler and signal.set_wakeup_fd(-1) == -1  # restored

    run_pretraining(options)
    resumed = _weights(str(output_dir / "model.ckpt-40"))
    straight = _weights(str(uninterrupted[0] / "model.ckpt-40"))
    assert resumed.keys() == straight.keys()
    for name, value in straight.items():
        np.testing.assert_allclose(resumed[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_sigterm_ends_an_evaluation_at_its_next_batch(workdir, uninterrupted):
    """An evaluation of a million batches is one graph call: SIGTERM, once it has scored a
    batch, ends it at the next batch, without results."""
    output_dir = workdir / "evaluated"
    shutil.copytree(uninterrupted[0], output_dir)
    args = _args(workdir, output_dir, 40, do_train=False, do_eval=True, max_eval_steps=10**6)
    result = _run_signalled("SIGTERM", output_dir, args)
    assert "Evaluating 1000000 batches" in result.stderr
    assert result.returncode == 143, result.stderr[-3000:]
    assert "SIGTERM: evaluation stopped before its end; no results were written" in result.stderr
    assert not (output_dir / "eval_results.txt").exists()


def test_an_input_described_by_relative_paths_is_the_same_input():
    """Runs of older versions of bert_tf described their input files as given, relative or not:
    resuming one continues its input position."""
    from bert_tf.training.checkpointing import _same_input

    relative = json.dumps({"input_files": ["data.tfrecord"], "seed": 7})
    assert _same_input(relative, json.dumps({"input_files": [os.path.abspath("data.tfrecord")], "seed": 7}))
    assert not _same_input(
        relative, json.dumps({"input_files": [os.path.abspath("data.tfrecord")], "seed": 8})
    )
    assert _same_input("not json", "not json") and not _same_input("not json", relative)


def test_checkpoint_layout_progress_and_tensorboard(uninterrupted):
    output_dir, stderr = uninterrupted
    names = tf.train.load_checkpoint(str(output_dir / "model.ckpt-40")).get_variable_to_shape_map()
    weights = [n for n in names if not n.endswith(("/adam_m", "/adam_v")) and n != "global_step"]
    assert len(weights) == 30  # embeddings 5, one layer 16, pooler 2, heads 7
    assert all(f"{w}/adam_m" in names and f"{w}/adam_v" in names for w in weights)
    assert "global_step" in names
    assert (
        tf.train.get_checkpoint_state(str(output_dir))
        .all_model_checkpoint_paths[-1]
        .endswith("model.ckpt-40")
    )
    # A line after each block of --iterations_per_loop=5 steps (and others mid-block where a
    # block outlasts 30 s, as the first may while it compiles).
    progress = [line for line in stderr.splitlines() if line.startswith("step ")]
    assert all(" examples/s | ETA " in line and "| lr " in line for line in progress)
    progress = [line for line in progress if int(line.split()[1].split("/")[0]) % 5 == 0]
    assert progress[0].startswith("step 5/40 | loss ") and progress[-1].startswith("step 40/40 | loss ")
    assert all(" examples/s | ETA " in line and "| lr " in line for line in progress)
    losses = [float(line.split("| loss ")[1].split()[0]) for line in progress]
    assert losses[-1] < losses[0] - 1.0  # it learns
    tags, rates = set(), {}
    for path in tf.io.gfile.glob(str(output_dir / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
            rates.update(
                (event.step, float(tf.make_ndarray(value.tensor)))
                for value in event.summary.value
                if value.tag == "learning_rate"
            )
    # The rate logged at step N is that of the N-th update (the original's schedule at N - 1:
    # warm-up 1e-3 * t / 5 for t < 5, then 1e-3 * (1 - t / 40)).
    schedule = lambda t: 1e-3 * t / 5 if t < 5 else 1e-3 * (1 - t / 40)  # noqa: E731
    assert sorted(rates) == list(range(5, 41, 5))
    for step, rate in rates.items():
        assert rate == pytest.approx(schedule(step - 1), rel=1e-6), step
    assert f"| lr {schedule(4):.2e} |" in progress[0]
    assert {
        "loss",
        "masked_lm_loss",
        "masked_lm_accuracy",
        "next_sentence_loss",
        "next_sentence_accuracy",
        "learning_rate",
        "grad_norm",
        "examples_per_second",
    } <= tags


def test_larger_total_continues_and_output_dir_wins_over_init_checkpoint(
    workdir, uninterrupted, caplog, monkeypatch
):
    output_dir = workdir / "continued"
    shutil.copytree(uninterrupted[0], output_dir)
    # The checkpoint in --output_dir takes precedence: this --init_checkpoint is never read.
    # The same input file named by a relative path: the input position is resumed.
    monkeypatch.chdir(REPO)
    relative = os.path.relpath(workdir / "data.tfrecord", REPO)
    log = _run_here(
        caplog, workdir, output_dir, 45, init_checkpoint=workdir / "no_such.ckpt", input_file=relative
    )
    assert "Resuming from" in log and "model.ckpt-40 (step 40)" in log
    assert "Resumed the input where" in log
    assert "unrestored values" not in log  # TensorFlow's warning on a partial restore
    continued = _weights(str(output_dir / "model.ckpt-45"))
    assert int(continued["global_step"]) == 45
    assert "nothing to train" in _run_here(caplog, workdir, output_dir, 45)


def test_a_float32_run_resumes_under_mixed_float16_with_a_fresh_loss_scale(workdir, uninterrupted, caplog):
    output_dir = workdir / "to_float16"
    shutil.copytree(uninterrupted[0], output_dir)
    float16 = dict(mixed_precision="mixed_float16", save_checkpoints_steps=2)
    log = _run_here(caplog, workdir, output_dir, 42, **float16)
    assert "has no saved loss_scale, loss_scale_good_steps: started afresh" in log
    # float16 on oneDNN's CPU kernels is warned of where they run (the AVX-512 VNNI, BF16 and AMX
    # CPUs' default), and not where they do not.
    assert ("mixed_float16 on CPUs with TensorFlow's oneDNN" in log) == onednn.onednn_enabled()
    assert "Resumed the input where" in log
    assert int(_weights(str(output_dir / "model.ckpt-42"))["global_step"]) == 42
    # Another batch size: the input starts afresh, the loss scale's state carries on.
    log = _run_here(caplog, workdir, output_dir, 44, train_batch_size=4, **float16)
    assert "the input starts afresh" in log and "Resumed the input" not in log
    state = tf.train.load_checkpoint(str(output_dir / "input_state" / "model.ckpt-44.worker-0"))
    assert int(state.get_tensor("loss_scale_good_steps/.ATTRIBUTES/VARIABLE_VALUE")) == 4


def test_resumes_the_originals_own_checkpoint_without_input_state(workdir, caplog):
    """The fixture's model.ckpt-3 (written by the original's training) with a `checkpoint` file:
    weights, slots and step are resumed, the input starts afresh."""
    output_dir = workdir / "original"
    output_dir.mkdir()
    for name in os.listdir(TRAIN):
        if name.startswith("model.ckpt-3"):
            shutil.copy(os.path.join(TRAIN, name), output_dir / name)
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
    log = _run_here(
        caplog,
        workdir,
        output_dir,
        4,
        bert_config_file=os.path.join(TRAIN, "bert_config.json"),
        num_warmup_steps=2,
        learning_rate=1e-4,
        train_batch_size=4,
    )
    assert "has no input state: the input starts afresh" in log
    before, after = _weights(os.path.join(TRAIN, "model.ckpt-3")), _weights(str(output_dir / "model.ckpt-4"))
    assert int(after["global_step"]) == 4
    # v4 = 0.999 v3 + 0.001 g^2 >= 0.999 v3 holds only if the slots were resumed, not zeroed.
    for name in before:
        if name.endswith("/adam_v"):
            assert (after[name] >= 0.999 * before[name] * (1 - 1e-6)).all(), name
    assert max(np.abs(after[n] - before[n]).max() for n in before if n.endswith("/kernel")) > 0


def test_another_models_checkpoint_in_output_dir_is_an_error(workdir, tmp_path):
    """The fixture's 2-layer model.ckpt-3 resumed by a 1-layer model: its layer_1 weights would
    be left out of every later checkpoint (and so lost once older ones are deleted)."""
    for name in os.listdir(TRAIN):
        if name.startswith("model.ckpt-3"):
            shutil.copy(os.path.join(TRAIN, name), tmp_path / name)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-3"\n')
    with open(os.path.join(TRAIN, "bert_config.json"), encoding="utf-8") as f:
        one_layer = dict(json.load(f), num_hidden_layers=1)
    config = tmp_path / "one_layer.json"
    BertConfig(**one_layer).to_json_file(str(config))
    options = _five_steps(workdir, tmp_path, output_dir=str(tmp_path), bert_config_file=str(config))
    with pytest.raises(
        ValueError, match=r"model\.ckpt-3: 16 of its weights are not in the model \(bert/encoder/layer_1/"
    ):
        run_pretraining(options)
    assert sorted(p.name for p in tmp_path.glob("model.ckpt-*.index")) == ["model.ckpt-3.index"]


def test_a_lost_state_file_and_a_corrupt_input_state_resume_from_the_newest_checkpoint(
    workdir, uninterrupted, caplog
):
    """Without its `checkpoint` state file the run resumes from the newest complete checkpoint
    (the original's Estimator would start again from step 0 and write over them); an input
    state that cannot be read restarts the input only."""
    output_dir = workdir / "lost_state"
    shutil.copytree(uninterrupted[0], output_dir)
    # The state file names a checkpoint that is gone (TensorFlow's own lookup logs errors).
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-60"\n')
    (output_dir / "model.ckpt-50.index").write_bytes(b"")  # an index without data: not complete
    for path in output_dir.glob("model.ckpt-40.*"):  # a save killed before its rename: not a step
        shutil.copy(path, output_dir / path.name.replace("model.ckpt-40", "model.ckpt-40.tmp-99999"))
    for path in (output_dir / "input_state").glob("model.ckpt-40.worker-0.data-*"):
        path.write_bytes(path.read_bytes()[:100])
    log = _run_here(caplog, workdir, output_dir, 42, save_checkpoints_steps=2)
    assert "using the newest complete checkpoint, model.ckpt-40" in log
    assert "Couldn't match files" not in log
    assert "Resuming from" in log and "model.ckpt-40 (step 40)" in log
    assert "worker-0: cannot read it (" in log and "the input starts afresh" in log
    assert int(_weights(str(output_dir / "model.ckpt-42"))["global_step"]) == 42


def _nan_copy(source, target):
    """The records of `source` with every masked_lm_weights value NaN."""
    with tf.io.TFRecordWriter(str(target)) as writer:
        for record in tf.data.TFRecordDataset(str(source)):
            example = tf.train.Example.FromString(record.numpy())
            weights = example.features.feature["masked_lm_weights"].float_list.value
            weights[:] = [float("nan")] * len(weights)
            writer.write(example.SerializeToString())


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(workdir, uninterrupted, caplog):
    from bert_tf.training.loop import TrainingStopped

    data = workdir / "nan_data"
    data.mkdir()
    _nan_copy(RECORDS, data / "data.tfrecord")  # the same records, with NaN weights
    # Resumed from the uninterrupted run's step 10 (its weights and slots; other input files,
    # so the input starts afresh).
    output_dir = workdir / "nan"
    output_dir.mkdir()
    for path in uninterrupted[0].glob("model.ckpt-10.*"):
        shutil.copy(path, output_dir / path.name)
    (output_dir / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-10"\n')
    with pytest.raises(TrainingStopped) as stopped:
        _run_here(caplog, workdir, output_dir, 20, input_file=data / "data.tfrecord")
    assert "Resuming from" in caplog.text and "model.ckpt-10 (step 10)" in caplog.text
    error = str(stopped.value)
    match = re.match(r"step (\d+): the loss or its gradient is NaN or infinite; training stopped", error)
    assert match and 10 < int(match.group(1)) <= 20, error  # the step as the progress lines count it
    assert "The latest checkpoint is " in error and error.split("The latest checkpoint is ")[1].startswith(
        str(output_dir / "model.ckpt-10")
    )
    latest = tf.train.latest_checkpoint(str(output_dir))
    assert latest.endswith("model.ckpt-10")
    assert all(np.isfinite(v).all() for v in _weights(latest).values())


# Two workers' runs: 9 steps, a checkpoint every 3.
_TWO_WORKERS = dict(strategy="multi_worker_mirrored", save_checkpoints_steps=3, iterations_per_loop=3)


def _two_workers(workdir, output_dir, kill_worker_1=False):
    """The tool as two workers on localhost (`TF_CONFIG`, fresh ports) running at once, each forked
    from a server of its own (a server forks one run at a time); with `kill_worker_1`, worker 1
    kills itself (SIGKILL) once the first checkpoint is the latest.

    Returns:
      The workers' addresses and, for each worker, `(CompletedProcess, time.monotonic() at its end)`.
    """
    from tests.test_training_distribution import _free_ports

    addresses = [f"localhost:{port}" for port in _free_ports(2)]
    args = _args(workdir, output_dir, 9, **_TWO_WORKERS)

    def worker(index, server):
        tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        env = {"TF_CONFIG": json.dumps(tf_config)}
        if index == 1 and kill_worker_1:
            result = _run_signalled("SIGKILL", output_dir, args, env=env, server=server)
        else:
            command = [sys.executable, *args]
            result = tool_runs.run(command, cwd=REPO, env=dict(os.environ, **env), timeout=600, server=server)
        return result, time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(worker, 0, tool_runs.TOOLS), pool.submit(worker, 1, tool_runs.TENSORFLOW)]
        return addresses, [run.result() for run in runs]


@pytest.fixture(scope="module")
def two_workers(workdir):
    """The output directory of an uninterrupted run of two workers (`_two_workers`)."""
    output_dir = workdir / "two_workers"
    _, runs = _two_workers(workdir, output_dir)
    for result, _ in runs:
        assert result.returncode == 0, result.stderr[-3000:]
    return output_dir


def test_the_tool_trains_under_multi_worker_mirrored(two_workers):
    """The strategy must exist before any TensorFlow op: the tool's input checks ran ops first
    and the strategy then failed ("Collective ops must be configured at program startup")."""
    assert tf.train.latest_checkpoint(str(two_workers)).endswith("model.ckpt-9")
    assert sorted(os.listdir(two_workers / "input_state")) == sorted(
        f"model.ckpt-{step}.worker-{w}.{ext}"
        for step in (3, 6, 9)
        for w in (0, 1)
        for ext in ("index", "data-00000-of-00001")
    )


def test_a_lost_worker_stops_the_other_with_one_line_and_the_rerun_is_exact(workdir, two_workers):
    """Worker 1 killed (kill -9) once checkpoint 3 is the latest: worker 0 exits within 60 s, its
    last line naming worker 1 and saying to rerun; both commands rerun (other ports) continue
    from checkpoint 3 and end with the uninterrupted run's weights."""
    output_dir = workdir / "lost_worker"
    addresses, ((survivor, survivor_end), (killed, killed_end)) = _two_workers(
        workdir, output_dir, kill_worker_1=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert survivor.returncode == 1, survivor.stderr[-3000:]
    assert survivor_end - killed_end <= 60
    last_line = survivor.stderr.splitlines()[-1]
    assert re.fullmatch(
        re.escape(f"error: worker 1 (/job:worker/replica:0/task:1, {addresses[1]}) was lost (")
        + r".+"  # the reason, as TensorFlow words it (it may hold parentheses)
        + re.escape(
            "): this worker stopped too. Rerun the same command on every worker, the lost one "
            f"included: training continues from {output_dir / 'model.ckpt-3'}"
        ),
        last_line,
    ), last_line

    _, reruns = _two_workers(workdir, output_dir)
    for result, _ in reruns:
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"Resuming from {output_dir / 'model.ckpt-3'} (step 3)" in result.stderr
        assert "Resumed the input where" in result.stderr
    resumed = _weights(str(output_dir / "model.ckpt-9"))
    straight = _weights(str(two_workers / "model.ckpt-9"))
    assert resumed.keys() == straight.keys()
    for name, value in straight.items():
        np.testing.assert_allclose(resumed[name], value, rtol=0, atol=1e-6, err_msg=name)


def test_eval_results_are_the_originals_metrics(workdir, fixtures_dir):
    """--do_eval on google_tiny: eval_results.txt against the original's metric_fn computed on
    the float64 reference's outputs for the same batches (the records in file order)."""
    output_dir = workdir / "eval"
    options = PretrainingOptions(
        bert_config_file=mf.GOOGLE_TINY_CONFIG,
        input_file=RECORDS,
        output_dir=str(output_dir),
        init_checkpoint=mf.GOOGLE_TINY_CKPT,
        do_eval=True,
        eval_batch_size=4,
        max_eval_steps=3,
    )
    run_pretraining(options)
    lines = (output_dir / "eval_results.txt").read_text().splitlines()
    got = dict(line.split(" = ") for line in lines)
    assert (
        list(got)
        == sorted(got)
        == [
            "global_step",
            "loss",
            "masked_lm_accuracy",
            "masked_lm_loss",
            "next_sentence_accuracy",
            "next_sentence_loss",
        ]
    )
    assert got["global_step"] == "0"
    # TensorBoard's eval scalars, as the original's Estimator writes them: in <output_dir>/eval.
    events = {
        value.tag: float(tf.make_ndarray(value.tensor))
        for path in tf.io.gfile.glob(str(output_dir / "eval" / "events.out.tfevents.*"))
        for event in tf.compat.v1.train.summary_iterator(path)
        for value in event.summary.value
    }
    assert set(events) == set(got) - {"global_step"}
    for tag, value in events.items():
        assert float(got[tag]) == pytest.approx(value, rel=1e-6), tag

    config = BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG)
    weights = reference.load_checkpoint_weights(mf.GOOGLE_TINY_CKPT)
    spec = {
        name: tf.io.FixedLenFeature(
            [20 if name.startswith("masked") else 128], tf.float32 if "weights" in name else tf.int64
        )
        for name in (
            "input_ids",
            "input_mask",
            "segment_ids",
            "masked_lm_positions",
            "masked_lm_ids",
            "masked_lm_weights",
        )
    }
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    records = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(RECORDS).take(12)]
    totals = dict(mlm_correct=0.0, mlm_loss=0.0, weight=0.0, nsp_correct=0.0, nsp_loss=0.0, losses=[])
    for start in range(0, 12, 4):
        batch = {k: np.stack([r[k].numpy() for r in records[start : start + 4]]) for k in spec}
        out = reference.reference_forward(weights, config, **batch)
        w = batch["masked_lm_weights"].reshape(-1)
        predictions = out["masked_lm_log_probs"].argmax(-1)
        totals["mlm_correct"] += (w * (predictions == batch["masked_lm_ids"].reshape(-1))).sum()
        totals["mlm_loss"] += (w * out["masked_lm_example_loss"]).sum()
        totals["weight"] += w.sum()
        labels = batch["next_sentence_labels"].reshape(-1)
        totals["nsp_correct"] += (out["next_sentence_log_probs"].argmax(-1) == labels).sum()
        totals["nsp_loss"] += out["next_sentence_example_loss"].sum()
        totals["losses"].append(out["total_loss"])
    want = {
        "masked_lm_accuracy": totals["mlm_correct"] / totals["weight"],
        "masked_lm_loss": totals["mlm_loss"] / totals["weight"],
        "next_sentence_accuracy": totals["nsp_correct"] / 12,
        "next_sentence_loss": totals["nsp_loss"] / 12,
        "loss": float(np.mean(totals["losses"])),
    }
    for key, value in want.items():
        assert abs(float(got[key]) - value) <= 1e-5, (key, got[key], value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(input_file="nothing_*.tfrecord"), r"--input_file: 'nothing_\*.tfrecord' matches no file"),
        (dict(max_seq_length=64), r"records have input_ids of length 128 but --max_seq_length=64"),
        (
            dict(max_predictions_per_seq=10),
            r"masked_lm_positions of length 20 but --max_predictions_per_seq=10",
        ),
        (
            dict(train_batch_size=10, gradient_accumulation_steps=4),
            r"--train_batch_size=10 is not a positive multiple",
        ),
        (
            dict(init_checkpoint=mf.GOOGLE_TINY_CKPT),
            r"does not fit --bert_config_file: bert/embeddings/word_embeddings: checkpoint \[30522, 128\], "
            r"config \[30522, 32\]",
        ),
        (dict(do_train=False), r"at least one of --do_train or --do_eval"),
        (dict(strategy="multi_worker_mirrored"), r"--strategy=multi_worker_mirrored needs the TF_CONFIG"),
        (dict(keep_checkpoint_max=-1), r"--keep_checkpoint_max must be 0 \(keep all\) or more, got -1"),
        (
            dict(jit_compile=True, gradient_accumulation_steps=2),
            r"--jit_compile does not work with --gradient_accumulation_steps above 1",
        ),
    ],
)
def test_bad_input_is_an_error_before_any_step(workdir, tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        run_pretraining(_five_steps(workdir, tmp_path, **overrides))
    assert not (tmp_path / "out").exists()  # made by the first file written in it


def test_the_records_are_checked_in_the_first_file_that_holds_one(fixtures_dir, tmp_path):
    # The original's create_pretraining_data leaves an output file empty when it has fewer
    # examples than files: such a file is skipped, and the next one's record is checked.
    empty, data = str(tmp_path / "part-0.tfrecord"), str(tmp_path / "part-1.tfrecord")
    tf.io.TFRecordWriter(empty).close()
    shutil.copy(RECORDS, data)
    check_records([empty, data], 128, 20)
    with pytest.raises(ValueError, match=re.escape(f"{data}: records have input_ids of length 128 but")):
        check_records([empty, data], 64, 20)
    with pytest.raises(ValueError, match=re.escape(f"{empty}: the file holds no record")):
        check_records([empty], 128, 20)
    with pytest.raises(ValueError, match=r"^--input_file: none of its 2 files holds a record"):
        check_records([empty, empty], 128, 20)
    text = tmp_path / "text.tfrecord"
    text.write_text("words, not records\n")
    message = f"{text}: cannot read TFRecords (corrupted record at 0 (Is this even a TFRecord file?))"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        check_records([data, str(text)], 128, 20)


def _shortened_copy(source, target, length):
    """`source`'s records with `input_ids`, `input_mask` and `segment_ids` cut to `length`."""
    with tf.io.TFRecordWriter(str(target)) as writer:
        for record in tf.data.TFRecordDataset(str(source)):
            example = tf.train.Example.FromString(record.numpy())
            for name in ("input_ids", "input_mask", "segment_ids"):
                values = example.features.feature[name].int64_list.value
                del values[length:]
            writer.write(example.SerializeToString())


def test_every_files_first_record_is_checked_before_any_step(workdir, tmp_path):
    # Data of another --max_seq_length in a later file failed mid-run with a parse error naming
    # no file; the first record of every file is checked now.
    files = [tmp_path / f"part-{i}.tfrecord" for i in range(3)]
    shutil.copy(RECORDS, files[0])
    shutil.copy(RECORDS, files[1])
    _shortened_copy(RECORDS, files[2], 64)
    names = [str(path) for path in files]
    check_records(names[:2], 128, 20)
    with pytest.raises(ValueError, match=re.escape(f"{files[2]}: records have input_ids of length 64 but")):
        run_pretraining(_five_steps(workdir, tmp_path, input_file=",".join(names)))
    assert not (tmp_path / "out").exists()


def test_token_ids_beyond_the_configs_vocab_size_are_an_error_before_any_step(workdir, tmp_path):
    config = tmp_path / "small_vocab.json"
    BertConfig(**dict(TINY, vocab_size=1000)).to_json_file(str(config))
    with pytest.raises(ValueError, match=r"data.tfrecord: records hold token id \d+ but --bert_config_file"):
        run_pretraining(_five_steps(workdir, tmp_path, bert_config_file=str(config)))
    assert not (tmp_path / "out").exists()


def test_a_corrupt_file_met_in_training_is_a_one_line_error_naming_it(workdir, tmp_path):
    """tf.data reports a truncated record without its file: the error names it."""
    records = (workdir / "data.tfrecord").read_bytes()
    good, cut = tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"
    good.write_bytes(records)
    # A record is its length (8 bytes), a CRC (4), the data and a CRC (4): cut the second one's data.
    first = 8 + 4 + int.from_bytes(records[:8], "little") + 4
    cut.write_bytes(records[: first + 8 + 4 + 100])
    with pytest.raises(ValueError, match=rf"^{re.escape(str(cut))}: corrupt TFRecord file \(.*truncated"):
        run_pretraining(_five_steps(workdir, tmp_path, input_file=f"{good},{cut}"))


def _copy_with_record_changed(source, target, index, change):
    """`source`'s records, the `index`-th (0-based) passed through `change(features)`."""
    with tf.io.TFRecordWriter(str(target)) as writer:
        for i, record in enumerate(tf.data.TFRecordDataset(str(source))):
            example = tf.train.Example.FromString(record.numpy())
            if i == index:
                change(example.features.feature)
            writer.write(example.SerializeToString())


def _cut_input_ids(features):
    del features["input_ids"].int64_list.value[127:]


def _unknown_token(features):
    features["input_ids"].int64_list.value[1] = 40000


def _position_past_the_sequence(features):
    features["masked_lm_positions"].int64_list.value[0] = 128


def _float_input_ids(features):
    ids = list(features["input_ids"].int64_list.value)
    features["input_ids"].ClearField("int64_list")
    features["input_ids"].float_list.value.extend(ids)


@pytest.mark.parametrize(
    "change, message",
    [
        (_cut_input_ids, "record 20: input_ids has 127 values, not 128"),
        (
            _unknown_token,
            r"record 20: input_ids holds 40000, outside \[0, 30522\) \(the config's vocab_size\)",
        ),
        (_position_past_the_sequence, r"record 20: masked_lm_positions holds 128, outside \[0, 128\)"),
        (_float_input_ids, r"record 20: cannot be parsed \("),
    ],
    ids=["length", "token id", "masked position", "type"],
)
def test_a_bad_record_met_in_training_is_a_one_line_error_naming_file_and_record(
    workdir, tmp_path, change, message
):
    """Past each file's first record (checked before any step), a record that does not fit
    fails the step with a message naming neither file nor record; the error names both. A
    masked position beyond the sequence, which would gather another sequence's token, is one."""
    bad = tmp_path / "bad.tfrecord"
    _copy_with_record_changed(workdir / "data.tfrecord", bad, 19, change)
    good = str(workdir / "data.tfrecord")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(str(bad))}: {message}.*; checkpoints so far are kept$"
    ):
        run_pretraining(_five_steps(workdir, tmp_path, input_file=f"{good},{bad}", num_train_steps=200))


@pytest.fixture(scope="module")
def lamb_run_on_a_glob(workdir, tmp_path_factory):
    """Five --optimizer=lamb steps and an evaluation (of one batch: the files it is given, in
    their order, are what is checked) on a glob of five copies of the records:
    `(output directory, the pattern, {is_training: files read, in order})`."""
    import bert_tf.data

    tmp_path = tmp_path_factory.mktemp("lamb_glob")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("b", "e", "a", "d", "c"):
        shutil.copy(workdir / "data.tfrecord", data / f"{name}.tfrecord")
    pattern = str(data / "*.tfrecord")
    read = {}

    def recording(files, *args, is_training, **kwargs):
        read[is_training] = list(files)
        return make_dataset(files, *args, is_training=is_training, **kwargs)

    make_dataset = bert_tf.data.make_pretraining_dataset
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(bert_tf.data, "make_pretraining_dataset", recording)
        options = _five_steps(
            workdir,
            tmp_path,
            input_file=pattern,
            do_eval=True,
            max_eval_steps=1,
            optimizer="lamb",
            save_checkpoints_steps=5,
        )
        run_pretraining(options)
    return tmp_path / "out", pattern, read


def test_evaluation_reads_a_glob_in_the_originals_order(lamb_run_on_a_glob):
    """With --max_eval_steps the order of the files decides which records are scored: the
    original's evaluation reads `tf.gfile.Glob`'s order (the filesystem's, not sorted)."""
    _, pattern, read = lamb_run_on_a_glob
    assert read[False] == tf.io.gfile.glob(pattern)
    assert read[True] == sorted(read[False])  # every worker shards one list


def test_the_training_flags_are_read_only_to_train(workdir, tmp_path):
    """The original reads --num_train_steps, --num_warmup_steps (and bert_tf's
    --gradient_accumulation_steps) only with --do_train, --max_eval_steps only with --do_eval:
    an evaluation's command line may leave the training flags at any value."""
    untrained = dict(num_train_steps=0, num_warmup_steps=-1, gradient_accumulation_steps=0)
    _five_steps(workdir, tmp_path, do_train=False, do_eval=True, **untrained).validate()
    _five_steps(workdir, tmp_path, max_eval_steps=0).validate()
    with pytest.raises(ValueError, match=r"^--num_train_steps must be at least 1, got 0$"):
        _five_steps(workdir, tmp_path, num_train_steps=0).validate()
    with pytest.raises(ValueError, match=r"^--max_eval_steps must be at least 1, got 0$"):
        _five_steps(workdir, tmp_path, do_eval=True, max_eval_steps=0).validate()


def _five_steps(workdir, tmp_path, **overrides):
    """`PretrainingOptions` of a five-step run into `tmp_path / "out"`, with `overrides`."""
    values = dict(
        bert_config_file=str(workdir / "bert_config.json"),
        input_file=str(workdir / "data.tfrecord"),
        output_dir=str(tmp_path / "out"),
        do_train=True,
        num_train_steps=5,
        train_batch_size=8,
    )
    return PretrainingOptions(**dict(values, **overrides))


@pytest.mark.parametrize("value", ["1", "TRUE"])
def test_frozen_weights_setting_is_an_error_before_any_step(workdir, tmp_path, monkeypatch, value):
    """TF_ONEDNN_ASSUME_FROZEN_WEIGHTS (a serving setting) has oneDNN keep the weights of a
    fused matmul's first call: training would never see its updates."""
    from bert_tf.training.loop import check_weights_can_change

    monkeypatch.setenv("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "0")
    check_weights_can_change()  # TensorFlow reads "0" and "false" as off
    monkeypatch.setenv("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", value)
    with pytest.raises(ValueError, match=f"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS={value} is set"):
        run_pretraining(_five_steps(workdir, tmp_path))
    assert not list((tmp_path / "out").glob("model.ckpt-*"))


def test_bad_input_from_the_tool_is_one_line(workdir, tmp_path):
    result = _run(_args(workdir, tmp_path / "out", 5, max_seq_length=64))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "Traceback" not in result.stderr


def test_optimizer_state_and_lamb_run(lamb_run_on_a_glob):
    """--optimizer=lamb trains and writes the same Google layout (slots under adam_m/adam_v)."""
    output_dir = lamb_run_on_a_glob[0]
    names = tf.train.load_checkpoint(str(output_dir / "model.ckpt-5")).get_variable_to_shape_map()
    assert "bert/pooler/dense/kernel/adam_m" in names and "global_step" in names


def test_progress_every_30_seconds_whatever_iterations_per_loop(
    workdir, uninterrupted, tmp_path, monkeypatch, capsys
):
    """A block of 1,000 steps (the default --iterations_per_loop) printed one line, at its end;
    a progress line is now due every PROGRESS_SECONDS within it too (0 here, with calls of one
    step each)."""
    from bert_tf.training import loop

    monkeypatch.setattr(loop, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr(loop, "CALL_SECONDS", 0.0)
    output_dir = tmp_path / "every_step"
    run_pretraining(PretrainingOptions(**_flags(workdir, output_dir, 40, iterations_per_loop=1000)))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ")]
    # Each call of one step but the first, which compiles and so gives no rate yet.
    assert [line.split(" |")[0] for line in lines] == [f"step {step}/40" for step in range(2, 41)]
    # The same steps as the uninterrupted run's, however they are cut into calls.
    every_step = _weights(str(output_dir / "model.ckpt-40"))
    for name, value in _weights(str(uninterrupted[0] / "model.ckpt-40")).items():
        np.testing.assert_array_equal(every_step[name], value, err_msg=name)


def test_the_rate_leaves_out_the_compiling_call_and_calls_grow_to_seconds():
    from bert_tf.training import loop

    now = [0.0]
    pace = loop._Pace(clock=lambda: now[0])
    config = loop.LoopConfig(output_dir="unused", num_train_steps=1000, global_batch_size=8)
    assert pace.next_call(1000) == 1
    pace.add(1, 20.0)  # tracing and compiling
    assert pace.rate(config) == pytest.approx(8 / 20.0)  # only the compiling call so far
    now[0] = 2 * loop.PROGRESS_SECONDS
    assert not pace.progress_due()  # no rate without the compiling call yet
    assert pace.next_call(1000) == 1
    pace.add(1, 0.1)
    assert pace.next_call(1000) == int(loop.CALL_SECONDS / 0.1) and pace.next_call(3) == 3
    pace.add(50, 5.0)
    assert pace.rate(config) == pytest.approx(51 * 8 / 5.1)
    assert pace.progress_due()
    pace.block_shown(end_of_block=False)
    assert not pace.progress_due()
    pace.block_shown(end_of_block=True)  # the next block's rate is its own
    pace.add(10, 2.0)
    assert pace.rate(config) == pytest.approx(10 * 8 / 2.0)
    # Several workers: a block in one call, and its line at its end only.
    shared = loop._Pace(adaptive=False, clock=lambda: now[0])
    shared.add(1000, 60.0)
    shared.add(1000, 30.0)
    now[0] += 10 * loop.PROGRESS_SECONDS
    assert shared.next_call(1000) == 1000 and not shared.progress_due()


def test_make_demos_loss_curve_reads_the_events_without_a_deprecation_warning(uninterrupted, caplog):
    """`summary_iterator` logged TensorFlow's `tf_record_iterator` deprecation in `make demo`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo", os.path.join(REPO, "tools", "demo.py"))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    output_dir, stderr = uninterrupted
    with caplog.at_level("WARNING"):
        points = demo.read_scalars(str(output_dir), "loss")
    assert "deprecat" not in caplog.text.lower()
    progress = {
        int(line.split()[1].split("/")[0]): float(line.split("| loss ")[1].split()[0])
        for line in stderr.splitlines()
        if line.startswith("step ")
    }
    assert [step for step, _ in points] == list(range(5, 41, 5))
    for step, loss in points:
        assert loss == pytest.approx(progress[step], abs=1e-4), step


def test_evaluating_a_checkpoint_without_the_heads_warns_that_they_are_random(workdir, tmp_path, caplog):
    from bert_tf import BertModel, save_google_checkpoint

    encoder = tmp_path / "encoder" / "bert_model.ckpt"
    save_google_checkpoint(BertModel(BertConfig(**TINY)), str(encoder))
    flags = _flags(workdir, tmp_path / "out", 10, do_train=False, do_eval=True, max_eval_steps=1)
    with caplog.at_level("INFO"):
        run_pretraining(PretrainingOptions(**dict(flags, init_checkpoint=str(encoder))))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "has no cls/predictions/transform/dense/kernel" in warnings[0]
    assert "they are random, and so are the outputs that depend on them" in warnings[0]


def test_log_lines_are_plain_beside_the_progress_lines(uninterrupted):
    """absl's handler wrote each log record as `I1126 22:44:01.123456 140... loop.py:301] ...`,
    mixed into the progress lines; the tools log `LEVEL message`."""
    _, stderr = uninterrupted
    absl_format = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+\.py:\d+\] ")
    assert not [line for line in stderr.splitlines() if absl_format.match(line)]
    assert re.search(r"^INFO Saved .*model\.ckpt-40$", stderr, re.MULTILINE), stderr[-2000:]
