"""atomic_output: a file appears complete under its name, or not at all, and a killed run's
temporaries go on the next write; output paths are checked before the work; local paths need no
TensorFlow (tests/test_remote_paths.py has the other filesystems)."""

import os
import subprocess
import sys

import pytest

from bert_tf.files import (
    atomic_output,
    check_output_dir,
    check_output_path,
    expand_input_patterns,
    glob,
    remove_abandoned,
)
from tests import pretraining_fixtures as pf


def test_the_file_appears_when_the_block_completes(tmp_path):
    path = tmp_path / "new" / "dir" / "out.txt"
    with atomic_output(str(path)) as tmp:
        with open(tmp, "w") as f:
            f.write("done")
        assert not path.exists()  # nothing under the final name while writing
    assert path.read_text() == "done"
    assert os.listdir(path.parent) == ["out.txt"]


def test_an_error_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("previous run")
    with pytest.raises(RuntimeError), atomic_output(str(path)) as tmp:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "previous run"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_input_patterns_expand_in_the_order_given_and_a_file_name_is_itself(tmp_path):
    for name in ("b.txt", "a.txt", "x[1].txt", "x1.txt"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "dir.txt").mkdir()
    path = lambda name: str(tmp_path / name)  # noqa: E731
    # Pattern by pattern, each one's matches sorted, directories left out.
    assert expand_input_patterns(f"{path('b.txt')}, {path('*.txt')}") == [
        path(n) for n in ("b.txt", "a.txt", "b.txt", "x1.txt", "x[1].txt")
    ]
    # Or in the order of the original's glob (the filesystem's, which need not be sorted).
    import tensorflow as tf

    matches = [p for p in tf.io.gfile.glob(path("*.txt")) if not os.path.isdir(p)]
    assert expand_input_patterns(path("*.txt"), sort=False) == matches
    # A name with glob characters that names a file is that file; otherwise it is a pattern.
    assert expand_input_patterns([path("x[1].txt")]) == [path("x[1].txt")]
    assert expand_input_patterns([path("x[12].txt")]) == [path("x1.txt")]
    with pytest.raises(ValueError, match=r"^input_patterns: '.*y\*\.txt' matches no file$"):
        expand_input_patterns(path("y*.txt"), name="input_patterns")
    with pytest.raises(
        ValueError, match=r"^--input_file: '.*' is a directory; give its files \(e\.g\. .*/\*\)$"
    ):
        expand_input_patterns(str(tmp_path))


def test_input_patterns_leave_out_temporaries(tmp_path, caplog):
    """A glob of a prefix must not read a shard still being written, or a killed run's."""
    names = ["train-00000-of-00002", "train-00001-of-00002", "train-00001-of-00003.tmp-77", "x.tmp-7.tmp-7"]
    for name in names:
        (tmp_path / name).write_text("x\n")
    assert expand_input_patterns(str(tmp_path / "train-*")) == [str(tmp_path / n) for n in names[:2]]
    assert "leaving out" in caplog.text and "train-00001-of-00003.tmp-77" in caplog.text
    assert expand_input_patterns(str(tmp_path / "x.tmp-7.tmp-7")) == [str(tmp_path / "x.tmp-7.tmp-7")]
    with pytest.raises(ValueError, match="matches no file"):
        expand_input_patterns(str(tmp_path / "x*"))


def test_the_temporary_name_keeps_the_suffix(tmp_path):
    path = str(tmp_path / "model.weights.h5")
    with atomic_output(path, ".weights.h5") as tmp:
        assert tmp == str(tmp_path / f"model.tmp-{os.getpid()}.weights.h5")
        open(tmp, "w").close()
    assert os.path.exists(path)


def finished_process_id():
    """The id of a process that has ended (a killed writer's)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_next_write_removes_the_temporaries_of_killed_runs_only(tmp_path, caplog):
    dead = finished_process_id()
    leftovers = {
        f"out.txt.tmp-{dead}": True,  # a killed run's: removed
        f"out.txt.tmp-{os.getppid()}": False,  # a running process's (pytest's parent): kept
        "out.txt.tmp-notes": False,  # not a temporary's name
        "out.txt.tmp-99999999999999999999": False,  # not a process id
        f"other.txt.tmp-{dead}": False,  # another file's
        f"model.tmp-{dead}.weights.h5": False,  # another suffix's
    }
    for name in leftovers:
        (tmp_path / name).write_text("partial")
    with atomic_output(str(tmp_path / "out.txt")) as tmp:
        open(tmp, "w").close()
    expected = sorted(["out.txt", *(name for name, removed in leftovers.items() if not removed)])
    assert sorted(os.listdir(tmp_path)) == expected
    assert f"out.txt.tmp-{dead}, left by a run that was killed" in caplog.text

    # With a suffix the temporaries keep; a directory (an export's version) goes whole.
    (tmp_path / f"model.tmp-{dead}.weights.h5").unlink()
    (tmp_path / f"model.tmp-{dead}.weights.h5").mkdir()
    (tmp_path / f"model.tmp-{dead}.weights.h5" / "part").write_text("partial")
    assert remove_abandoned(str(tmp_path / "model.weights.h5"), ".weights.h5") == [
        str(tmp_path / f"model.tmp-{dead}.weights.h5")
    ]


def test_local_globs_match_as_tensorflows(tmp_path):
    """The original reads `--input_file` through `tf.gfile.Glob`: `*` matches a name that starts
    with a dot, and `[^a]` is a negated set (Python's glob skips the one and reads the other as
    the set of `^` and `a`)."""
    import tensorflow as tf

    for name in ("a.txt", ".b.txt", "c.txt", "^.txt"):
        (tmp_path / name).write_text("x")
    for pattern in ("*.txt", "[^a]*.txt", "[!a]*", "?b.txt", "*"):
        expected = sorted(tf.io.gfile.glob(str(tmp_path / pattern)))
        assert glob(str(tmp_path / pattern)) == expected and expected, pattern
    assert [os.path.basename(p) for p in glob(str(tmp_path / "[^a]*.txt"))] == [".b.txt", "^.txt", "c.txt"]


def test_output_paths_are_checked_up_to_the_first_existing_directory(tmp_path):
    (tmp_path / "a_file").write_text("x")
    check_output_path(str(tmp_path / "new" / "dir" / "out.txt"), "--output")
    check_output_dir(str(tmp_path / "new" / "dir"), "--output_dir")
    with pytest.raises(ValueError, match=r"^--output: .*/a_file/x/out.txt: .*/a_file is a file"):
        check_output_path(str(tmp_path / "a_file" / "x" / "out.txt"), "--output")
    with pytest.raises(ValueError, match=r"^--output: .* is a directory, not a file to write"):
        check_output_path(str(tmp_path), "--output")
    with pytest.raises(ValueError, match=r"^--output_dir: .*/a_file is a file, not a directory"):
        check_output_dir(str(tmp_path / "a_file"), "--output_dir")
    with pytest.raises(ValueError, match=r"^--output_dir: cannot make .*/a_file/run: .*/a_file is a file"):
        check_output_dir(str(tmp_path / "a_file" / "run"), "--output_dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # the checks leave nothing
    # sysfs takes no new directory, for root either (whom permission bits do not stop).
    with pytest.raises(ValueError, match=r"^--output_dir: cannot write in /sys \("):
        check_output_dir("/sys/bert_tf_run/out", "--output_dir")
    with pytest.raises(ValueError, match=r"^--output: cannot write in /sys \("):
        check_output_path("/sys/out.txt", "--output")


# Run in a fresh interpreter: what a scale-mode worker does with local paths, and the helpers.
WORKER_CODE = """
import sys
from bert_tf import files
from bert_tf.data import PretrainingDataOptions, pipeline, shards

corpus, vocab, directory = sys.argv[1:]
options = PretrainingDataOptions(vocab_file=vocab, dupe_factor=1)
pipeline._init_worker(options)
plan = shards.plan_shards(files.expand_input_patterns(corpus), 1000)
records = [pipeline._make_shard((i, ranges))[1] for i, ranges in enumerate(plan)]
with files.atomic_output(directory + "/out.txt") as tmp, files.open_file(tmp, "w") as writer:
    writer.write(str(sum(map(len, records))))
assert files.exists(directory + "/out.txt") and files.size(directory + "/out.txt") > 0
print(len(plan), "tensorflow" in sys.modules)
"""


def test_local_paths_never_load_tensorflow(fixtures_dir, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", WORKER_CODE, pf.SAMPLE_TEXT, pf.VOCAB, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    num_shards, tensorflow_loaded = result.stdout.split()
    assert int(num_shards) > 1 and tensorflow_loaded == "False"
