"""The tools' shared start-up (bert_tf.cli): TensorFlow's C++ logs hidden unless the user asks, bad
flags and SIGTERM; and the original's flags, which every tool of the same name takes."""

import ast
import concurrent.futures
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests import tool_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, "tools", "demo_data")

# A line of TensorFlow's C++ logging (`I0000 00:00:1795431512.186846   8941 port.cc:153] ...`) or
# abseil's banner before its logging is initialised.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} .*\.cc:\d+\]|absl::InitializeLog", re.MULTILINE)


def _tool_command(tmp_path, *flags):
    """A small create_pretraining_data run (TensorFlow is loaded to write the TFRecords)."""
    return [
        sys.executable,
        os.path.join(REPO, "tools", "create_pretraining_data.py"),
        f"--input_file={os.path.join(DEMO, 'sample_text.txt')}",
        f"--output_file={tmp_path / 'out.tfrecord'}",
        f"--vocab_file={os.path.join(REPO, 'tests', 'data', 'char_vocab.txt')}",
        "--max_seq_length=16",
        "--dupe_factor=1",
        *flags,
    ]


def run_tool(tmp_path, *flags, level=None):
    """`_tool_command` in a fresh process (its start-up is what is checked), with
    TF_CPP_MIN_LOG_LEVEL unset or `level`."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return subprocess.run(
        _tool_command(tmp_path, *flags), cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def _default_sigint():
    # A shell without job control starts a background command (`make test &`) with SIGINT
    # ignored, and Python keeps an inherited SIG_IGN: Ctrl-C's handling is the point here.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def fork_python(code, *args, timeout=300):
    """`python -c code args...` in the repository, its output captured, forked by `tool_runs`
    from its server of the tools: `code` starts as a tool does, with `from bert_tf import cli`
    (whose handlers of SIGTERM and of bad input are what is checked)."""
    return tool_runs.run(
        [sys.executable, "-c", code, *args], cwd=REPO, timeout=timeout, server=tool_runs.TOOLS
    )


def run_python(code, *args, timeout=300):
    """`python -c code args...` in a fresh interpreter in the repository, its output captured,
    SIGINT as a terminal's command gets it (Python's own handling of SIGINT is set as the
    interpreter starts)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_default_sigint,
    )


# Each run starts TensorFlow.
# None: the default. "3": set by a parent that imported bert_tf.cli (make demo runs the tools
# from such a process); the lines TensorFlow writes while loading ignore the level.
@pytest.mark.parametrize("level", [None, "3"], ids=["unset", "inherited 3"])
def test_a_tool_run_prints_no_tensorflow_start_up_lines(tmp_path, level):
    result = run_tool(tmp_path, level=level)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote 31 instances" in result.stdout
    assert not CPP_LOG_LINE.search(result.stderr), result.stderr


def test_a_tool_whose_imports_load_tensorflow_is_quiet_too(tmp_path, fixtures_dir):
    """run_pretraining.py imports bert_tf.training (TensorFlow) at its top, after bert_tf.cli."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    missing = tmp_path / "missing.tfrecord"
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "tools", "run_pretraining.py"),
            f"--input_file={missing}",
            f"--output_dir={tmp_path / 'out'}",
            f"--bert_config_file={os.path.join(fixtures_dir, 'google_tiny', 'bert_config.json')}",
            "--do_train",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr == f"error: --input_file: '{missing}' matches no file\n"


def test_a_user_set_log_level_is_respected(tmp_path):
    result = run_tool(tmp_path, level="0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert CPP_LOG_LINE.search(result.stderr), result.stderr  # TensorFlow's INFO lines, as asked
    for level, want in ((None, "3"), ("1", "1")):
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        env.update({} if level is None else {"TF_CPP_MIN_LOG_LEVEL": level})
        seen = subprocess.run(
            [sys.executable, "-c", "import os, bert_tf.cli; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert seen.stdout.strip() == want


def test_a_bad_flag_is_one_line_naming_it(tmp_path):
    # Forked from the tools' server: a fresh process's start-up lines are checked above.
    result = tool_runs.run(_tool_command(tmp_path, "--num_workers=-1"), cwd=REPO, timeout=300)
    assert result.returncode == 2
    assert result.stderr == "error: --num_workers must be at least 0 (0: exact mode), got -1\n"
    assert os.listdir(tmp_path) == []


FAILING_TOOL = """
import sys
from bert_tf import cli  # first: it quiets TensorFlow's start-up
import tensorflow as tf

def main(argv):
    if argv[1] == "gcs":
        raise tf.errors.FailedPreconditionError(
            None, None, "Error executing an HTTP request: Could not resolve host\\n\\t when reading gs://b/x"
        )
    if argv[1] == "os":
        raise PermissionError(13, "Permission denied", "/data/out.txt")
    raise tf.errors.InvalidArgumentError(None, None, "a bug")

cli.run(main)
"""


@pytest.mark.parametrize(
    "kind, line",
    [
        ("gcs", "error: Error executing an HTTP request: Could not resolve host when reading gs://b/x"),
        ("os", "error: [Errno 13] Permission denied: '/data/out.txt'"),
    ],
)
def test_file_and_network_errors_are_one_line(kind, line):
    result = fork_python(FAILING_TOOL, kind, timeout=120)
    assert result.returncode == 1 and result.stderr.splitlines()[-1] == line
    assert "Traceback" not in result.stderr


def test_other_tensorflow_errors_keep_their_traceback():
    result = fork_python(FAILING_TOOL, "bug", timeout=120)
    assert result.returncode == 1 and "Traceback" in result.stderr and "InvalidArgumentError" in result.stderr


SLOW_WRITER = """
import os, sys, time
from bert_tf import cli, files

def main(argv):
    with files.atomic_output(argv[1]) as tmp, open(tmp, "w") as f:
        print("writing", flush=True)
        f.write(str(os.getpid()))  # the test reads the tool's process id here
        f.flush()
        time.sleep(60)

cli.run(main)
"""


def test_sigterm_ends_a_tool_through_its_cleanup(tmp_path):
    path = tmp_path / "out.txt"
    # The tool is forked (cli's SIGTERM handler runs there as in a fresh process) in a thread of
    # this test, which reads the tool's process id from the file it writes.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        tool = pool.submit(fork_python, SLOW_WRITER, str(path), timeout=120)
        deadline = time.monotonic() + 60
        while not (written := [p.read_text() for p in tmp_path.iterdir()]) or not written[0]:
            assert time.monotonic() < deadline and not tool.done(), tool.result() if tool.done() else None
            time.sleep(0.02)
        pid = int(written[0])
        assert os.listdir(tmp_path) == [f"out.txt.tmp-{pid}"]
        os.kill(pid, signal.SIGTERM)
        result = tool.result(timeout=60)
    assert result.stdout == "writing\n"
    assert result.returncode == 128 + 15, result.stderr[-2000:]
    assert os.listdir(tmp_path) == []  # the temporary deleted, nothing under the final name


def test_tensorflow_python_info_lines_are_dropped_and_bert_tfs_kept(monkeypatch):
    import logging

    # Importing bert_tf.cli sets TF_CPP_MIN_LOG_LEVEL in this process's environment, as it does
    # in a tool's: set here through monkeypatch, which takes it back after the test, so that the
    # environment of the runs forked later is still the one their server started in.
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
    from bert_tf.cli import _not_tensorflow_info

    def record(path, level):
        return logging.LogRecord("absl", level, path, 1, "message", None, None)

    saver = os.path.join(os.sep, "venv", "site-packages", "tensorflow", "python", "saver.py")
    loop = os.path.join(REPO, "bert_tf", "training", "loop.py")
    assert not _not_tensorflow_info(record(saver, logging.INFO))
    assert _not_tensorflow_info(record(saver, logging.WARNING))
    assert _not_tensorflow_info(record(loop, logging.INFO))


# The flags of google-research/bert's scripts, read from its sources: the tools with the same
# names take each of them, of the same kind, with the same default (bert_tf adds others).
# `RESOLVED_TRUE`: bert_tf's flag has no default (None: the casing is recorded or inferred,
# bert_tf.text.casing), and its help says that the original's True is what an uncased
# vocabulary with nothing recorded gets (tests/test_casing.py runs that).
RESOLVED_TRUE = "the original's True"
_TPU_FLAGS = {"use_tpu": False, "tpu_name": None, "tpu_zone": None, "gcp_project": None, "master": None}
_TRAINING_FLAGS = {
    "bert_config_file": None,
    "output_dir": None,
    "init_checkpoint": None,
    "do_train": False,
    "train_batch_size": 32,
    "learning_rate": 5e-5,
    "save_checkpoints_steps": 1000,
    "iterations_per_loop": 1000,
    "num_tpu_cores": 8,
    **_TPU_FLAGS,
}
_FINETUNING_FLAGS = {
    **_TRAINING_FLAGS,
    "vocab_file": None,
    "do_lower_case": RESOLVED_TRUE,
    "do_predict": False,
    "predict_batch_size": 8,
    "num_train_epochs": 3.0,
    "warmup_proportion": 0.1,
}
ORIGINAL_FLAGS = {
    "run_classifier.py": {
        **_FINETUNING_FLAGS,
        "data_dir": None,
        "task_name": None,
        "max_seq_length": 128,
        "do_eval": False,
        "eval_batch_size": 8,
    },
    "run_squad.py": {
        **_FINETUNING_FLAGS,
        "train_file": None,
        "predict_file": None,
        "max_seq_length": 384,
        "doc_stride": 128,
        "max_query_length": 64,
        "n_best_size": 20,
        "max_answer_length": 30,
        "verbose_logging": False,
        "version_2_with_negative": False,
        "null_score_diff_threshold": 0.0,
    },
    "run_pretraining.py": {
        **_TRAINING_FLAGS,
        "input_file": None,
        "max_seq_length": 128,
        "max_predictions_per_seq": 20,
        "do_eval": False,
        "eval_batch_size": 8,
        "num_train_steps": 100000,
        "num_warmup_steps": 10000,
        "max_eval_steps": 100,
    },
    "create_pretraining_data.py": {
        "input_file": None,
        "output_file": None,
        "vocab_file": None,
        "do_lower_case": RESOLVED_TRUE,
        "do_whole_word_mask": False,
        "max_seq_length": 128,
        "max_predictions_per_seq": 20,
        "random_seed": 12345,
        "dupe_factor": 10,
        "masked_lm_prob": 0.15,
        "short_seq_prob": 0.1,
    },
    "extract_features.py": {
        "input_file": None,
        "output_file": None,
        "layers": "-1,-2,-3,-4",
        "bert_config_file": None,
        "max_seq_length": 128,
        "init_checkpoint": None,
        "vocab_file": None,
        "do_lower_case": RESOLVED_TRUE,
        "batch_size": 32,
        "use_tpu": False,
        "master": None,
        "num_tpu_cores": 8,
        "use_one_hot_embeddings": False,
    },
}

# Every tool, and the options dataclass its flags are defined from (and the fields it has no
# flag for).
TOOL_OPTIONS = {
    "build_vocab.py": ("bert_tf.text.vocabulary", "BuildVocabOptions", ()),
    "convert_checkpoint.py": ("bert_tf.checkpoints.converter", "ConvertOptions", ("max_seq_length",)),
    "create_pretraining_data.py": ("bert_tf.data.options", "CreatePretrainingDataOptions", ()),
    "evaluate_squad.py": ("bert_tf.tasks.squad.evaluation", "EvaluateOptions", ()),
    "export_edge.py": ("bert_tf.export.edge", "EdgeOptions", ()),
    "export_saved_model.py": ("bert_tf.export.bert", "ExportOptions", ()),
    "extend_vocab.py": ("bert_tf.checkpoints.vocab_extension", "ExtendVocabOptions", ("max_seq_length",)),
    "extract_features.py": ("bert_tf.tasks.features.run", "FeaturesOptions", ()),
    "query_saved_model.py": ("bert_tf.export.query", "QueryOptions", ()),
    "run_classifier.py": ("bert_tf.tasks.multiple_choice.run", "MultipleChoiceOptions", ()),
    "run_pretraining.py": (
        "bert_tf.tasks.pretraining.run",
        "PretrainingOptions",
        ("vocab_file", "do_lower_case", "force_do_lower_case"),
    ),
    "run_squad.py": ("bert_tf.tasks.squad.run", "SquadOptions", ("eval_batch_size",)),
    "run_tagger.py": ("bert_tf.tasks.tagging.run", "TaggingOptions", ()),
}
# One absl flag's entry in --help: `  --[no]name: <a|b>: help` and its indented lines.
_HELP_ENTRY = re.compile(r"^  --(\[no\])?(\w+): (.*?)(?=^  --|^\S|\Z)", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def helps():
    """`{tool: (exit status, stdout)}` of `--help`, every tool (and make demo's script) at once."""
    helps = {}
    for tool in sorted([*TOOL_OPTIONS, "demo.py"]):
        result = tool_runs.run(
            [sys.executable, os.path.join(REPO, "tools", tool), "--help"], cwd=REPO, timeout=600
        )
        helps[tool] = (result.returncode, result.stdout)
    return helps


def _help_entries(text):
    """`{flag: (kind, default as absl prints it or None, help)}` of a tool's --help."""
    entries = {}
    for match in _HELP_ENTRY.finditer(text):
        body = " ".join(match.group(3).split())
        default = re.search(r"\(default: '(.*?)'\)", body)
        kind = (
            "bool"
            if match.group(1)
            else "int"
            if "(an integer)" in body
            else "float"
            if "(a number)" in body
            else "str"
        )
        entries[match.group(2)] = (kind, default.group(1) if default else None, body)
    return entries


def test_the_tool_list_is_every_tool():
    tools = {name for name in os.listdir(os.path.join(REPO, "tools")) if name.endswith(".py")}
    assert tools == {*TOOL_OPTIONS, "demo.py"}


@pytest.mark.parametrize("tool", sorted(TOOL_OPTIONS))
def test_help_lists_each_of_the_tools_flags_with_its_help_and_default(helps, tool):
    import importlib

    from bert_tf.options import flag_fields

    status, text = helps[tool]
    assert status == 0, text[-2000:]
    with open(os.path.join(REPO, "tools", tool), encoding="utf-8") as f:
        docstring = ast.get_docstring(ast.parse(f.read()))
    assert text.startswith(docstring.splitlines()[0])  # the tool's docstring first
    assert "Try --helpfull" in text
    module, name, omitted = TOOL_OPTIONS[tool]
    fields = [f for f in flag_fields(getattr(importlib.import_module(module), name)) if f.name not in omitted]
    entries = _help_entries(text)
    assert sorted(entries) == sorted(f.name for f in fields)  # its own flags only: no absl's, no TF's
    for field in fields:
        kind, default, body = entries[field.name]
        # absl wraps the help at spaces and hyphens ("non-null" -> "non- null").
        assert "".join(field.metadata["help"].split()) in "".join(body.split()), field.name
        value = field.default_factory() if field.default is dataclasses.MISSING else field.default
        if value is None:
            assert default is None, field.name
        elif isinstance(value, bool):
            assert default == str(value).lower(), field.name
        elif isinstance(value, list):
            assert default == ",".join(value), field.name
        else:
            assert default is not None and type(value)(default) == value, field.name


def test_make_demos_script_prints_its_help_without_running(helps):
    status, text = helps["demo.py"]
    assert status == 0 and text.startswith("`make demo`: bert_tf end to end")
    assert "$ python tools/" not in text  # no step of the demo ran


def test_helpfull_lists_absl_flags_too_and_exits_0():
    result = tool_runs.run(
        [sys.executable, os.path.join(REPO, "tools", "evaluate_squad.py"), "--helpfull"],
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--na_prob_thresh" in result.stdout and "logtostderr" in result.stdout


@pytest.mark.parametrize("tool", sorted(ORIGINAL_FLAGS))
def test_a_tool_takes_the_originals_flags_with_its_defaults(helps, tool):
    ours = _help_entries(helps[tool][1])
    for name, default in ORIGINAL_FLAGS[tool].items():
        assert name in ours, f"{tool} lacks the original's --{name}"
        kind, our_default, body = ours[name]
        if default == RESOLVED_TRUE:
            assert kind == "bool" and our_default is None, (tool, name, kind, our_default)
            assert RESOLVED_TRUE in body, (tool, name, body)
            continue
        if isinstance(default, bool):
            assert kind == "bool", (tool, name, kind)
        elif isinstance(default, (int, float)):
            assert kind == {int: "int", float: "float"}[type(default)], (tool, name, kind)
        if default is None:
            assert our_default is None, (tool, name, our_default)
        elif isinstance(default, (bool, str)):
            want = str(default).lower() if isinstance(default, bool) else default
            assert our_default == want, (tool, name, our_default, want)
        else:
            assert type(default)(our_default) == default, (tool, name, our_default, default)


@pytest.mark.parametrize("signum, status, line", [(15, 143, "cleaned up"), (2, 130, "interrupted")])
def test_sigterm_and_sigint_end_a_tool_through_its_cleanup_without_a_traceback(signum, status, line):
    script = (
        "import os, sys\n"
        "from bert_tf import cli\n"
        "def main(argv):\n"
        "    try:\n"
        f"        os.kill(os.getpid(), {signum})\n"
        "        while True: pass\n"
        "    finally:\n"
        "        print('cleaned up', file=sys.stderr)\n"
        "cli.run(main)\n"
    )
    # SIGTERM's handler is cli's (a fork of the tools' server runs it); SIGINT's is Python's
    # own, set as the interpreter starts (a fresh one).
    result = fork_python(script) if signum == signal.SIGTERM else run_python(script)
    assert result.returncode == status, result.stderr[-2000:]
    assert line in result.stderr.splitlines() and "Traceback" not in result.stderr


@pytest.mark.parametrize("signum, status", [(15, 143), (2, 130)])
def test_a_signal_handled_inside_a_finalizer_still_ends_the_tool(signum, status):
    """Python runs a signal's handler between any two bytecodes, a `__del__` or a garbage
    collector's callback included (JAX registers one), where the exception is printed and
    dropped: the tool ran on to its end and exited 0."""
    script = (
        "import os, sys\n"
        "from bert_tf import cli\n"
        "class Finalized:\n"
        "    def __del__(self):\n"
        f"        os.kill(os.getpid(), {signum})\n"
        "        sum(range(1000))  # the handler runs here, inside __del__\n"
        "def main(argv):\n"
        "    Finalized()\n"
        "    for _ in range(10 ** 8):\n"
        "        pass\n"
        "    print('ran on', file=sys.stderr)\n"
        "cli.run(main)\n"
    )
    # As above: SIGTERM's handler is cli's, SIGINT's Python's own.
    result = fork_python(script) if signum == signal.SIGTERM else run_python(script)
    assert result.returncode == status, result.stderr[-2000:]
    assert "ran on" not in result.stderr
