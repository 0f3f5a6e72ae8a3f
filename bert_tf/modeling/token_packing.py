"""Token packing: an inference pass that runs the dense layers on the real tokens only.

A batch padded to its longest row spends most of a Transformer layer's work (the projections,
the attention output and the feed-forward block: every matmul but the attention's own) on rows
of padding whose outputs nobody reads. With packing, the encoder gathers the real tokens of the
[batch * seq, H] layout into [tokens, H] once, runs every dense layer on those rows, and spreads
the queries, keys and values back to [batch * seq, H] only for the attention itself, whose
context it gathers again. Each layer appends one zero row to its input before the projections,
and every padding position reads that row's projection: a finite value that the mask hides
from every real token (a padding position's query is never gathered back). The explicit
attention takes its heads first ([batch, heads, seq, head_size]): those gathers lay them out
so, in place of the transposes the unpacked pass makes. The real tokens' outputs are the
unpacked pass's (the same rows through the same matmuls); the padding positions' outputs, which
the original computes and no mask-aware reader uses, are zeros.

The packed shapes depend on the mask's values, so packing is for a pass traced with dynamic
shapes (TensorFlow's graphs: the SavedModel export turns it on) or run eagerly; under `jax.jit`
or XLA the shapes must be static and it stays off (the default).
"""

import contextlib

from keras import ops

from bert_tf.modeling.training_forms import sublayers


class Packing:
    """Where a batch's real tokens are in its [batch * seq, H] layout, and back.

    Args:
      input_mask: int [batch, seq], 1 for real tokens and 0 for padding.

    Attributes:
      token_rows: int32 [tokens], the flattened positions of the real tokens, in order.
      padded_rows: int32 [batch * seq], for each position its row in the packed [tokens, H]
        matrix, or `tokens` (the row `with_padding_row` appends) at the padding.
    """

    def __init__(self, input_mask):
        self.batch, self.length = ops.shape(input_mask)[0], ops.shape(input_mask)[1]
        self._head_rows = {}
        flat = ops.cast(ops.reshape(input_mask, (-1,)), "int32")
        real = ops.greater(flat, 0)
        self.token_rows = ops.cast(ops.reshape(ops.nonzero(real)[0], (-1,)), "int32")
        tokens = ops.shape(self.token_rows)[0]
        self.padded_rows = ops.where(real, ops.cumsum(flat) - 1, tokens)

    def pack(self, x):
        """[batch * seq, W] -> [tokens, W], the real tokens' rows."""
        return ops.take(x, self.token_rows, axis=0)

    def with_padding_row(self, x):
        """[tokens, W] -> [tokens + 1, W]: a zero row appended, the row every padding position
        of `spread` and `spread_heads` reads."""
        return ops.concatenate([x, ops.zeros((1, ops.shape(x)[-1]), x.dtype)], axis=0)

    def unpack(self, x):
        """[tokens, W] -> [batch * seq, W], zeros at the padding."""
        return self.spread(self.with_padding_row(x))

    def spread(self, rows):
        """[tokens + 1, W] -> [batch * seq, W]: each real token's row at its position, the last
        row (the padding row) at every padding position."""
        return ops.take(rows, self.padded_rows, axis=0)

    def spread_heads(self, rows, heads):
        """[tokens + 1, heads * size] -> [batch, heads, seq, size]: `spread` and the split into
        heads, heads first, as one gather of the [size] rows.

        Args:
          rows: float [tokens + 1, W], the last row the padding's (`with_padding_row`, or
            computed from it), W a multiple of `heads` known when traced.
          heads: The number of heads.

        Returns:
          float [batch, heads, seq, W / heads].
        """
        size = rows.shape[-1] // heads
        _, padded = self._heads_rows(heads)
        rows = ops.take(ops.reshape(rows, (-1, size)), padded, axis=0)
        return ops.reshape(rows, (self.batch, heads, self.length, size))

    def pack_heads(self, x):
        """[batch, heads, seq, size] -> [tokens, heads * size]: the real tokens' rows, heads
        joined, as one gather of the [size] rows (the inverse of `spread_heads`).

        Args:
          x: float [batch, heads, seq, size], `heads` and `size` known when traced.

        Returns:
          float [tokens, heads * size].
        """
        heads, size = x.shape[1], x.shape[3]
        tokens, _ = self._heads_rows(heads)
        return ops.reshape(ops.take(ops.reshape(x, (-1, size)), tokens, axis=0), (-1, heads * size))

    def _heads_rows(self, heads):
        """The gathers' row indices with `heads` heads: the real tokens' rows of the heads-first
        [batch * heads * seq] layout, token-major ([tokens * heads]), and for each position of
        that layout its row of the [(tokens + 1) * heads] split of the packed matrix (computed
        once per pass)."""
        if heads not in self._head_rows:
            head = ops.arange(heads, dtype="int32")
            sequence, position = self.token_rows // self.length, self.token_rows % self.length
            tokens = (sequence[:, None] * heads + head[None, :]) * self.length + position[:, None]
            padded = ops.reshape(self.padded_rows, (self.batch, 1, self.length)) * heads
            padded = padded + ops.reshape(head, (1, heads, 1))
            self._head_rows[heads] = (ops.reshape(tokens, (-1,)), ops.reshape(padded, (-1,)))
        return self._head_rows[heads]


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
