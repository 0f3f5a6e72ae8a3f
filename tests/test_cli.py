"""The tools' shared start-up (bert_tf.cli): TensorFlow's C++ logs hidden unless the user asks."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(REPO, "tools", "demo_data")

# A line of TensorFlow's C++ logging (`I0000 00:00:1795431512.186846   8941 port.cc:153] ...`) or
# abseil's banner before its logging is initialised.
CPP_LOG_LINE = re.compile(r"^[IWEF]\d{4} .*\.cc:\d+\]|absl::InitializeLog", re.MULTILINE)


def run_tool(tmp_path, *flags, level=None):
    """A small create_pretraining_data run (TensorFlow is loaded to write the TFRecords)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "tools", "create_pretraining_data.py"),
            f"--input_file={os.path.join(DEMO, 'sample_text.txt')}",
            f"--output_file={tmp_path / 'out.tfrecord'}",
            f"--vocab_file={os.path.join(REPO, 'tests', 'data', 'char_vocab.txt')}",
            "--max_seq_length=16",
            "--dupe_factor=1",
            *flags,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Each run starts TensorFlow: ~5 s.
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
    result = run_tool(tmp_path, "--num_workers=-1")
    assert result.returncode == 2
    assert result.stderr == "error: --num_workers must be at least 0 (0: exact mode), got -1\n"
    assert os.listdir(tmp_path) == []


SLOW_WRITER = """
import sys, time
from bert_tf import cli, files

def main(argv):
    with files.atomic_output(argv[1]) as tmp, open(tmp, "w") as f:
        f.write("partial")
        f.flush()
        print("writing", flush=True)
        time.sleep(60)

cli.run(main)
"""


def test_sigterm_ends_a_tool_through_its_cleanup(tmp_path):
    path = tmp_path / "out.txt"
    tool = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert tool.stdout.readline() == "writing\n"
    assert os.listdir(tmp_path) == [f"out.txt.tmp-{tool.pid}"]
    tool.terminate()
    assert tool.wait(timeout=60) == 128 + 15
    assert os.listdir(tmp_path) == []  # the temporary deleted, nothing under the final name


def test_tensorflow_python_info_lines_are_dropped_and_bert_tfs_kept():
    import logging

    from bert_tf.cli import _not_tensorflow_info

    def record(path, level):
        return logging.LogRecord("absl", level, path, 1, "message", None, None)

    saver = os.path.join(os.sep, "venv", "site-packages", "tensorflow", "python", "saver.py")
    loop = os.path.join(REPO, "bert_tf", "training", "loop.py")
    assert not _not_tensorflow_info(record(saver, logging.INFO))
    assert _not_tensorflow_info(record(saver, logging.WARNING))
    assert _not_tensorflow_info(record(loop, logging.INFO))
