"""Token packing: an inference pass that runs the dense layers on the real tokens only.

A batch padded to its longest row spends most of a Transformer layer's work (the projections,
the attention output and the feed-forward block: every matmul but the attention's own) on rows
of padding whose outputs nobody reads. With packing, the encoder gathers the real tokens of the
[batch * seq, H] layout into [tokens, H] once, runs every dense layer on those rows, and spreads
the queries, keys and values back to padded sequences only for the attention itself, whose
context it gathers again. The attention runs in groups (`AttentionGroup`): the sequences sorted
by length and split in two, each half padded to its own longest, so that short sequences do not
attend at the longest one's length. Each layer appends one zero row to its input before the
projections, and every padding position reads that row's projection: a finite value that the
mask hides from every real token (a padding position's query is never gathered back). The
explicit attention takes its heads first ([batch, heads, seq, head_size]): the gathers lay them
out so, in place of the transposes the unpacked pass makes. The real tokens' outputs are the
unpacked pass's (the same rows through the same matmuls); the padding positions' outputs, which
the original computes and no mask-aware reader uses, are zeros.

The packed shapes depend on the mask's values, so packing is for a pass traced with dynamic
shapes (TensorFlow's graphs: the SavedModel export turns it on) or run eagerly; under `jax.jit`
or XLA the shapes must be static and it stays off (the default).
"""

import contextlib

from keras import ops

from bert_tf.modeling.training_forms import sublayers

# A batch's sequences attend in this many groups of neighbouring lengths (the shortest half, then
# the longest), each padded to its own longest: the scores of 512 sentences of 5-20 words in
# requests of 32 cover a third fewer positions; four groups cost more in ops than they save
# (BUILD_NOTES.md, "Export").
ATTENTION_GROUPS = 2


class Packing:
    """Where a batch's real tokens are in its [batch * seq, H] layout, and back.

    The packed rows hold the sequences sorted by their extent (the position after their last real
    token), each sequence's tokens in order, so that each of the `groups` (`AttentionGroup`: the
    sequences of neighbouring extents) owns consecutive rows.

    Args:
      input_mask: int [batch, seq], 1 for real tokens and 0 for padding.
      groups: How many `AttentionGroup`s the sorted sequences are split into (as evenly as
        their count allows).

    Attributes:
      token_rows: int32 [tokens], the flattened positions of the real tokens, in packed order.
      padded_rows: int32 [batch * seq], for each position its row in the packed [tokens, H]
        matrix, or `tokens` (the row `with_padding_row` appends) at the padding.
      groups: The `AttentionGroup`s, in packed order.
    """

    def __init__(self, input_mask, groups=ATTENTION_GROUPS):
        batch, length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        mask = ops.cast(ops.greater(input_mask, 0), "int32")
        extent = ops.max(mask * ops.arange(1, length + 1, dtype="int32")[None, :], axis=1, initial=0)
        order = ops.cast(ops.argsort(extent), "int32")
        # The mask of the sorted sequences, and each real token's row in packed order.
        sorted_mask = ops.take(mask, order, axis=0)
        flat = ops.reshape(sorted_mask, (-1,))
        sorted_rows = _real_positions(sorted_mask)
        self.token_rows = ops.take(order, sorted_rows // length) * length + sorted_rows % length
        tokens = ops.shape(self.token_rows)[0]
        sorted_padded = ops.reshape(ops.where(flat > 0, ops.cumsum(flat) - 1, tokens), (batch, length))
        self.padded_rows = ops.reshape(ops.take(sorted_padded, ops.argsort(order), axis=0), (-1,))
        sorted_extent = ops.take(extent, order)
        self.groups = []
        for index in range(groups):
            first, end = batch * index // groups, batch * (index + 1) // groups
            group_length = ops.max(ops.slice(sorted_extent, (first,), (end - first,)), initial=0)
            shape = (end - first, group_length)
            self.groups.append(
                AttentionGroup(
                    ops.slice(sorted_mask, (first, 0), shape), ops.slice(sorted_padded, (first, 0), shape)
                )
            )

    def pack(self, x):
        """[batch * seq, W] -> [tokens, W], the real tokens' rows."""
        return ops.take(x, self.token_rows, axis=0)

    def with_padding_row(self, x):
        """[tokens, W] -> [tokens + 1, W]: a zero row appended, the row every padding position
        of `unpack` and of the groups' spreads reads."""
        return ops.concatenate([x, ops.zeros((1, ops.shape(x)[-1]), x.dtype)], axis=0)

    def unpack(self, x):
        """[tokens, W] -> [batch * seq, W], zeros at the padding."""
        return ops.take(self.with_padding_row(x), self.padded_rows, axis=0)


class AttentionGroup:
    """Sequences of a `Packing` that attend together, padded to their longest extent.

    Args:
      mask: int [batch, length], the group's mask (its `batch` sequences, `length` positions).
      padded_rows: int [batch, length], each position's row of the packed matrix (the padding
        row at the padding).
    """

    def __init__(self, mask, padded_rows):
        self.mask = mask
        self.batch, self.length = ops.shape(mask)[0], ops.shape(mask)[1]
        self.padded_rows = ops.reshape(padded_rows, (-1,))
        # The flattened positions of the group's real tokens, in packed order.
        self.token_positions = _real_positions(mask)
        self._heads_rows_cache = {}

    def spread(self, rows):
        """[tokens + 1, W] -> [batch * length, W]: each real token's row at its position, the
        last row (the padding row) at every padding position."""
        return ops.take(rows, self.padded_rows, axis=0)

    def pack(self, x):
        """[batch * length, W] -> [group tokens, W]: the group's real tokens' rows, in packed
        order (the inverse of `spread`)."""
        return ops.take(x, self.token_positions, axis=0)

    def spread_heads(self, rows, heads):
        """[tokens + 1, heads * size] -> [batch, heads, length, size]: `spread` and the split
        into heads, heads first, as one gather of the [size] rows.

        Args:
          rows: float [tokens + 1, W], the last row the padding's (`Packing.with_padding_row`,
            or computed from it), W a multiple of `heads` known when traced.
          heads: The number of heads.

        Returns:
          float [batch, heads, length, W / heads].
        """
        size = rows.shape[-1] // heads
        _, padded = self._heads_rows(heads)
        rows = ops.take(ops.reshape(rows, (-1, size)), padded, axis=0)
        return ops.reshape(rows, (self.batch, heads, self.length, size))

    def pack_heads(self, x):
        """[batch, heads, length, size] -> [group tokens, heads * size]: the real tokens' rows,
        heads joined, as one gather of the [size] rows (the inverse of `spread_heads`).

        Args:
          x: float [batch, heads, length, size], `heads` and `size` known when traced.

        Returns:
          float [group tokens, heads * size].
        """
        heads, size = x.shape[1], x.shape[3]
        tokens, _ = self._heads_rows(heads)
        return ops.reshape(ops.take(ops.reshape(x, (-1, size)), tokens, axis=0), (-1, heads * size))

    def _heads_rows(self, heads):
        """The gathers' row indices with `heads` heads: the real tokens' rows of the heads-first
        [batch * heads * length] layout, token-major ([group tokens * heads]), and for each
        position of that layout its row of the [(tokens + 1) * heads] split of the packed matrix
        (computed once per pass)."""
        if heads not in self._heads_rows_cache:
            head = ops.arange(heads, dtype="int32")
            sequence = self.token_positions // self.length
            position = self.token_positions % self.length
            tokens = (sequence[:, None] * heads + head[None, :]) * self.length + position[:, None]
            padded = ops.reshape(self.padded_rows, (self.batch, 1, self.length)) * heads
            padded = padded + ops.reshape(head, (1, heads, 1))
            self._heads_rows_cache[heads] = (ops.reshape(tokens, (-1,)), ops.reshape(padded, (-1,)))
        return self._heads_rows_cache[heads]


def _real_positions(mask):
    """int32 [real tokens], the flattened positions of `mask`'s nonzero entries, in order."""
    return ops.cast(ops.reshape(ops.nonzero(ops.reshape(mask, (-1,)))[0], (-1,)), "int32")


@contextlib.contextmanager
def token_packing(models, on=True):
    """Packing on (or off) in the inference passes of every encoder below `models` while the
    context is open (e.g. while a SavedModel's signatures are traced), as it was after.

    Args:
      models: Keras models or layers, or other objects holding them as public attributes
        (`bert_tf.modeling.training_forms.sublayers`).
      on: Whether the encoders pack.

    Yields:
      The number of encoders found (0: none).
    """
    encoders = {}
    for model in models:
        for layer in [model, *sublayers(model)]:
            if hasattr(layer, "pack_tokens"):
                encoders[id(layer)] = layer
    before = {key: encoder.pack_tokens for key, encoder in encoders.items()}
    for encoder in encoders.values():
        encoder.pack_tokens = on
    try:
        yield len(encoders)
    finally:
        for key, encoder in encoders.items():
            encoder.pack_tokens = before[key]
