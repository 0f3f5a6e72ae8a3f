"""`bert_tf.errors.reason`: the one line of an error that bert_tf's messages quote."""

import pytest
import tensorflow as tf

from bert_tf import errors


def test_a_tensorflow_op_error_without_its_decorations(tmp_path):
    """Reading a file that is not TFRecords: TensorFlow's message is wrapped in the op's
    `{{function_node ...}}` and `[Op:...]`, which name nothing a user wrote."""
    path = tmp_path / "notes.txt"
    path.write_text("not a record\n" * 10)
    with pytest.raises(tf.errors.DataLossError) as raised:
        next(iter(tf.data.TFRecordDataset(str(path))))
    assert "[Op:" in str(raised.value) or "function_node" in str(raised.value)  # what is stripped
    assert errors.reason(raised.value) == "corrupted record at 0 (Is this even a TFRecord file?)"


@pytest.mark.parametrize(
    "error, want",
    [
        (ValueError("\n  first line  \nsecond line"), "first line"),
        (OSError(2, "No such file or directory"), "[Errno 2] No such file or directory"),
        (ValueError(), "ValueError"),
        (IndexError("  \n "), "IndexError"),
    ],
)
def test_the_first_non_blank_line_or_the_type(error, want):
    assert errors.reason(error) == want
