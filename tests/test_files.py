"""atomic_output: a file appears complete under its name, or not at all."""

import os

import pytest

from bert_tf.files import atomic_output


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


def test_the_temporary_name_keeps_the_suffix(tmp_path):
    path = str(tmp_path / "model.weights.h5")
    with atomic_output(path, ".weights.h5") as tmp:
        assert tmp == str(tmp_path / f"model.tmp-{os.getpid()}.weights.h5")
        open(tmp, "w").close()
    assert os.path.exists(path)
