"""atomic_output: a file appears complete under its name, or not at all; local paths need no
TensorFlow (tests/test_remote_paths.py has the other filesystems)."""

import os
import subprocess
import sys

import pytest

from bert_tf.files import atomic_output, expand_input_patterns
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
    # Pattern by pattern, each one's matches sorted, directories left out (the original's order).
    assert expand_input_patterns(f"{path('b.txt')}, {path('*.txt')}") == [
        path(n) for n in ("b.txt", "a.txt", "b.txt", "x1.txt", "x[1].txt")
    ]
    # A name with glob characters that names a file is that file; otherwise it is a pattern.
    assert expand_input_patterns([path("x[1].txt")]) == [path("x[1].txt")]
    assert expand_input_patterns([path("x[12].txt")]) == [path("x1.txt")]
    with pytest.raises(ValueError, match=r"^input_patterns: '.*y\*\.txt' matches no file$"):
        expand_input_patterns(path("y*.txt"), name="input_patterns")


def test_the_temporary_name_keeps_the_suffix(tmp_path):
    path = str(tmp_path / "model.weights.h5")
    with atomic_output(path, ".weights.h5") as tmp:
        assert tmp == str(tmp_path / f"model.tmp-{os.getpid()}.weights.h5")
        open(tmp, "w").close()
    assert os.path.exists(path)


# Run in a fresh interpreter: what a scale-mode worker does with local paths, and the helpers.
WORKER_CODE = """
import sys
from bert_tf import files
from bert_tf.data import PretrainingDataOptions, pipeline

corpus, vocab, directory = sys.argv[1:]
options = PretrainingDataOptions(vocab_file=vocab, dupe_factor=1)
pipeline._init_worker(options)
shards = pipeline.plan_shards(files.expand_input_patterns(corpus), 1000)
records = [pipeline._make_shard((i, ranges))[1] for i, ranges in enumerate(shards)]
with files.atomic_output(directory + "/out.txt") as tmp, files.open_file(tmp, "w") as writer:
    writer.write(str(sum(map(len, records))))
assert files.exists(directory + "/out.txt") and files.size(directory + "/out.txt") > 0
print(len(shards), "tensorflow" in sys.modules)
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
