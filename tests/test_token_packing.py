"""Token packing (`bert_tf.modeling.token_packing`): an inference pass whose dense layers run on
the real tokens only gives the original's outputs there (google_tiny's fixtures, made by the
original code) and zeros at the padding."""

import numpy as np
import pytest
import tensorflow as tf

from bert_tf import BertConfig, BertModel, load_google_checkpoint
from bert_tf.modeling.token_packing import Packing, token_packing
from tests import model_fixtures as mf


@pytest.fixture(scope="module")
def google_tiny():
    model = BertModel(BertConfig.from_json_file(mf.GOOGLE_TINY_CONFIG))
    load_google_checkpoint(model, mf.GOOGLE_TINY_CKPT)
    return model


def _ids(batch):
    return {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}


def test_packing_indices_and_their_round_trip():
    # Extents (the position after the last real token) 2, 0, 1, 3: packed in the order of rows
    # 1, 2, 0, 3, split into the groups (1, 2), of length 1, and (0, 3), of length 3.
    mask = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0], [1, 1, 1]], np.int32)
    packing = Packing(tf.constant(mask))
    np.testing.assert_array_equal(packing.token_rows, [6, 0, 1, 9, 10, 11])
    np.testing.assert_array_equal(packing.padded_rows, [1, 2, 6, 6, 6, 6, 0, 6, 6, 3, 4, 5])
    x = np.arange(12 * 2, dtype=np.float32).reshape(12, 2) + 1
    rows = packing.pack(tf.constant(x))
    np.testing.assert_array_equal(rows, x[[6, 0, 1, 9, 10, 11]])
    np.testing.assert_array_equal(packing.unpack(rows), x * (mask.reshape(-1, 1) > 0))
    # Each group spreads the rows to its sequences at its length; every padding position reads
    # the padding row; packing the spread gives the group's rows back, in packed order.
    padding_row = np.array([[-7.0, -8.0]], np.float32)
    with_padding = tf.concat([rows, padding_row], 0)
    x_3d, real = x.reshape(4, 3, 2), (mask > 0)[..., None]
    groups = [([1, 2], 1), ([0, 3], 3)]
    packed = []
    for group, (sequences, length) in zip(packing.groups, groups, strict=True):
        np.testing.assert_array_equal(group.mask, mask[sequences, :length])
        want = np.where(real[sequences, :length], x_3d[sequences, :length], padding_row)
        spread = group.spread(with_padding)
        np.testing.assert_array_equal(spread, want.reshape(-1, 2))
        packed.append(group.pack(spread))
        # The same with the heads laid out first: [tokens + 1, heads * size] <-> [batch, heads,
        # length, size] (two heads of one).
        heads_first = group.spread_heads(with_padding, 2)
        np.testing.assert_array_equal(heads_first, np.transpose(want[..., None], (0, 2, 1, 3)))
        np.testing.assert_array_equal(group.pack_heads(heads_first), packed[-1])
    np.testing.assert_array_equal(np.concatenate(packed), rows)
    # Three groups of a batch of four: sizes 1, 1 and 2, their rows consecutive in packed order.
    packing = Packing(tf.constant(mask), groups=3)
    assert [int(g.batch) for g in packing.groups] == [1, 1, 2]
    assert [int(g.length) for g in packing.groups] == [0, 1, 3]
    spreads = [g.pack_heads(g.spread_heads(with_padding, 2)) for g in packing.groups]
    np.testing.assert_array_equal(np.concatenate(spreads), rows)
    # No real token at all (an empty batch, or only padding): nothing to gather, all zeros back.
    for empty in (np.zeros([0, 4], np.int32), np.zeros([2, 3], np.int32)):
        packing = Packing(tf.constant(empty))
        rows = packing.pack(tf.zeros([empty.size, 2]))
        assert rows.shape == (0, 2)
        np.testing.assert_array_equal(packing.unpack(rows), np.zeros([empty.size, 2]))
        for group in packing.groups:
            heads_first = group.spread_heads(packing.with_padding_row(rows), 2)
            assert heads_first.shape == (group.batch, 2, 0, 1)  # every group's length is 0
            assert group.pack_heads(heads_first).shape == (0, 2)


@pytest.mark.onednn_both
@pytest.mark.parametrize("batch", mf.BATCHES)
def test_packed_pass_is_the_originals_at_the_real_tokens(google_tiny, batch):
    data = mf.reference_arrays()[batch]
    mask = data["input_mask"]
    assert 0 < mask.sum() < mask.size  # real tokens and padding
    real = (mask > 0)[..., None]
    with token_packing([google_tiny]) as count:
        assert count == 1 and google_tiny.encoder.pack_tokens
        for run in (google_tiny, tf.function(google_tiny)):  # eager, and traced as an export is
            got = run(_ids(data))
            np.testing.assert_allclose(got["pooled_output"], data["pooled_output"], rtol=0, atol=1e-5)
            for i, layer in enumerate(got["all_encoder_layers"]):
                want = data[
                    "sequence_output" if i == len(got["all_encoder_layers"]) - 1 else f"encoder_layer_{i}"
                ]
                np.testing.assert_allclose(np.asarray(layer), want * real, rtol=0, atol=1e-5)
    # Off again after the context: every position is the original's, the padding's too.
    assert not google_tiny.encoder.pack_tokens
    got = google_tiny(_ids(data))
    np.testing.assert_allclose(got["sequence_output"], data["sequence_output"], rtol=0, atol=1e-5)
    assert np.abs(data["sequence_output"] * ~real).max() > 0.1  # so the zeros above were packing's


def test_training_and_positions_of_the_heads_never_pack(google_tiny):
    """A training pass (and the pretraining heads' last layer at a few positions) runs every
    position: packing is for inference passes over whole sequences."""
    data = mf.reference_arrays()["b0"]
    with token_packing([google_tiny]):
        trained = google_tiny.encoder(
            google_tiny.embeddings(data["input_ids"], data["segment_ids"]), data["input_mask"], training=True
        )[-1]
    # Dropout aside (google_tiny's config has it), the padding rows are computed: not zeros.
    padding = np.asarray(trained)[data["input_mask"] == 0]
    assert np.abs(padding).max() > 0.1
