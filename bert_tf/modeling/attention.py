"""The `attention` block: multi-head self-attention (`self`) and its output (`output`)."""

import math

import keras
from keras import ops

from bert_tf.modeling.dense_output import DenseOutput
from bert_tf.modeling.dropout import Dropout
from bert_tf.modeling.initializers import dense
from bert_tf.modeling.serialization import BertConfigured

# What the original adds to the scores of masked-out positions (not -inf).
MASK_ADDER = -10000.0


def _fused_attention_compiles(compute_dtype):
    """Whether the backend's fused attention can be compiled in `compute_dtype`: in float16 only
    beside an accelerator. XLA's CPU dot takes no float16 operands with a float32 result, which
    JAX's attention asks for; under `jax.jit` that is a compile error, which Keras' fallback to
    its own attention (taken only when it runs eagerly) does not catch."""
    return compute_dtype != "float16" or any(
        not device.startswith("cpu") for device in keras.distribution.list_devices()
    )


@keras.saving.register_keras_serializable(package="bert_tf")
class SelfAttention(BertConfigured, keras.layers.Layer):
    """Per head: `softmax(Q K^T / sqrt(head_size) + (1 - mask) * -10000) V`, heads concatenated.

    Creates `query`, `key`, `value` (each `kernel` [H, H] and `bias` [H]) in that order.
    In `explicit_attention` the query is scaled by `1 / sqrt(head_size)` before `Q K^T`, which
    then cannot overflow float16 unless the scaled scores do, and the mask and softmax are
    computed in float32 (a bfloat16 forward pass on TensorFlow excepted); the fused attention
    takes the scale as its argument.

    `fused_attention` (default: on every backend but TensorFlow, and in float16 only beside an
    accelerator) chooses the backend's fused attention when no dropout applies; otherwise
    `explicit_attention` computes the same context step by step.

    `fold_biases` (default: on) computes the key and value projections of an inference pass as
    matmuls without their biases. The scores `(q_i + b_q) . (k_j + b_k)` differ from
    `(q_i + b_q) . k_j` by `(q_i + b_q) . b_k`, the same for every key j, which the softmax does
    not see: the key bias is dropped. Each row of probabilities sums to one, so the value bias
    adds `b_v` to every context row: `Attention` moves it into its output dense layer's bias.
    The explicit form adds the query bias and the scale `1 / sqrt(head_size)` to the projected
    rows (packed: the real tokens' only), not to the padded queries. (TensorFlow's oneDNN runs a
    matmul fused with its bias as an inner product on the kernel as stored, a matmul alone as
    its faster brgemm kernels; on a GPU each bias is a pass of its own: BUILD_NOTES.md.)
    """

    def __init__(self, config, name="self", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "self".
        """
        super().__init__(config, name=name, **kwargs)
        config = self.config
        self.num_heads = config.num_attention_heads
        self.head_size = config.attention_head_size
        self.hidden_size = config.hidden_size

        def projection(name):
            return dense(config.hidden_size, config, self.dtype_policy, name=name)

        self.query = projection("query")
        self.key = projection("key")
        self.value = projection("value")
        self.dropout = Dropout(config.attention_probs_dropout_prob, dtype=self.dtype_policy)
        # Keras' TensorFlow `dot_product_attention` is no fused kernel: an einsum, the scores and
        # the bias cast to float32 and back, a multiplication by the scale. The step-by-step form
        # is the same arithmetic in batched matmuls, and faster there (BUILD_NOTES.md).
        self.fused_attention = keras.backend.backend() != "tensorflow" and _fused_attention_compiles(
            self.compute_dtype
        )
        self.fold_biases = True

    def build(self, input_shape=None):
        for projection in (self.query, self.key, self.value):
            projection.build((None, self.hidden_size))

    def _heads(self, x, length):
        """[batch, length, H] or [batch * length, H] -> [batch, length, heads, head_size] (the
        batch inferred: an empty batch keeps its length)."""
        return ops.reshape(x, (-1, length, self.num_heads, self.head_size))

    def _project(self, projection, x, with_bias):
        """`projection(x)`, or its matmul alone."""
        if with_bias:
            return projection(x)
        return ops.matmul(ops.cast(x, self.compute_dtype), ops.cast(projection.kernel, self.compute_dtype))

    def _scaled_query(self, x, scale):
        """`query(x) * scale`, in the shape of `x`.

        The bias is added to the product's [rows, heads, head_size] view: TensorFlow's oneDNN
        rewrite would fuse a matmul and the bias added to it into its slower inner product.
        """
        kernel = ops.cast(self.query.kernel, self.compute_dtype)
        bias = ops.cast(self.query.bias, self.compute_dtype)
        product = ops.reshape(
            ops.matmul(ops.cast(x, self.compute_dtype), kernel), (-1, self.num_heads, self.head_size)
        )
        product = (product + ops.reshape(bias, (self.num_heads, self.head_size))) * scale
        return ops.reshape(product, ops.shape(x))

    def call(
        self,
        hidden_states,
        input_mask,
        training=False,
        from_states=None,
        defer_value_bias=False,
        packing=None,
    ):
        """Args:
          hidden_states: float [batch, seq, H], or [batch * seq, H] (the encoder's layout): the
            states attended to (the original's `to_tensor`), and by default those attending.
          input_mask: [batch, seq], 1 for real tokens and 0 for padding. Every position attends
            to the real tokens only (`mask[b, from, to] = input_mask[b, to]`).
          training: Whether attention-probability dropout is on.
          from_states: None, or float [batch, R, H]: the states of the R positions per
            sequence that attend (the original's `from_tensor`); the queries are computed for
            these rows only.
          defer_value_bias: Return the value bias beside the context instead of adding it, when
            the biases are folded (see the class); the caller adds it to every row.
          packing: None, or the `Packing` of `input_mask` (`bert_tf.modeling.token_packing`):
            `hidden_states` are then the real tokens' rows [tokens, H], projected as they are
            and spread to each `AttentionGroup`'s padded sequences for the attention;
            `from_states` must be None.

        Returns:
          float, the concatenated context of all heads, in the shape of `from_states` (by
          default `hidden_states`). With `defer_value_bias`: `(context, value_bias)`, where
          `value_bias` is None unless the context leaves it out.
        """
        length = ops.shape(input_mask)[1]
        from_length = length if from_states is None else ops.shape(from_states)[1]
        if from_states is None:
            from_states = hidden_states
        # cuDNN's fused attention with a bias differentiates only even lengths; Keras would try
        # it, log the failure with its traceback and fall back (pretraining's last layer attends
        # from the masked positions and [CLS]: often an odd count).
        odd_lengths = any(isinstance(n, int) and n % 2 for n in (from_length, length))
        fused = self.fused_attention and not self.dropout.drops(training) and not (training and odd_lengths)
        fold = self.fold_biases and not training
        scale = 1.0 / math.sqrt(self.head_size)
        if packing is not None:  # the row each padding position reads
            hidden_states = from_states = packing.with_padding_row(hidden_states)
        if fused:  # the fused attention takes the scale
            query = self._project(self.query, from_states, True)
        elif fold:
            query = self._scaled_query(from_states, scale)
        else:
            # The query scaled before the product, not after: in float16, Q K^T overflows
            # (65504) long before Q K^T / sqrt(head_size) does.
            query = self.query(from_states) * scale
        key = self._project(self.key, hidden_states, not fold)
        value = self._project(self.value, hidden_states, not fold)

        def attend(query, key, value, mask, heads_first=False):
            """The context of queries, keys and values in heads ([batch, seq, heads, size], or
            with `heads_first` [batch, heads, seq, size]) under `mask` [batch, seq]."""
            mask_batch, mask_length = ops.shape(mask)[0], ops.shape(mask)[1]
            # A reshape, not `[:, None, None, :]`: TFLite's strided slice has no new axes (an
            # export to LiteRT would need TensorFlow's own kernel for it).
            mask = ops.reshape(ops.cast(mask, "float32"), (mask_batch, 1, 1, mask_length))
            adder = (1.0 - mask) * MASK_ADDER
            if not fused:
                return self.explicit_attention(query, key, value, adder, training, heads_first)
            # The backend's fused attention (flash attention where it has one): the scores are
            # accumulated, scaled and normalised in float32, and the scale costs no pass over
            # the queries. cuDNN's (JAX on a GPU) takes a bias only of [batch or 1, heads or 1,
            # from_seq, seq]: at [batch, 1, 1, seq] JAX falls back to its unfused attention.
            from_length = ops.shape(query)[1]
            bias = ops.broadcast_to(adder, (mask_batch, 1, from_length, mask_length))
            return ops.dot_product_attention(query, key, value, bias=bias, scale=scale)

        if packing is None:
            query, key, value = (
                self._heads(x, n) for x, n in ((query, from_length), (key, length), (value, length))
            )
            context = ops.reshape(attend(query, key, value, input_mask), ops.shape(from_states))
        else:
            # Each group of sequences attends at its own length: the packed rows spread to its
            # positions and its context gathered back to its rows. The explicit attention takes
            # the heads first, as the gathers lay them out.
            contexts = []
            for group in packing.groups:
                if fused:
                    spread = (self._heads(group.spread(x), group.length) for x in (query, key, value))
                    context = attend(*spread, group.mask)
                    contexts.append(group.pack(ops.reshape(context, (-1, self.hidden_size))))
                else:
                    spread = (group.spread_heads(x, self.num_heads) for x in (query, key, value))
                    contexts.append(group.pack_heads(attend(*spread, group.mask, heads_first=True)))
            context = ops.concatenate(contexts, axis=0)
        value_bias = self.value.bias if fold else None
        if defer_value_bias:
            return context, value_bias
        return context if value_bias is None else context + ops.cast(value_bias, context.dtype)

    def explicit_attention(self, query, key, value, adder, training, heads_first=False):
        """`softmax(Q K^T + adder)` with dropout on the probabilities, then `P V`, step by step.

        The softmax is taken in float32, except in a bfloat16 pass that is not training, where
        it is taken on the bfloat16 scores: oneDNN's bfloat16 softmax accumulates in float32 and
        gives the float32 softmax's probabilities rounded to bfloat16 (the same BERT-base output,
        bit for bit, on the CPU benchmark's batch), without casting the [batch, heads, seq, seq]
        scores up and the probabilities back.

        Args:
          query: [batch, from_seq, heads, head_size], already scaled by `1 / sqrt(head_size)`
            (before the product: in float16, Q K^T overflows long before the scaled scores do).
          key, value: [batch, seq, heads, head_size].
          adder: float32 [batch, 1, 1, seq], 0 for real tokens and -10000 for padding.
          training: Whether the dropout is applied.
          heads_first: Whether the inputs and the result are [batch, heads, seq, head_size].

        Returns:
          [batch, from_seq, heads, head_size] ([batch, heads, from_seq, head_size] with
          `heads_first`).
        """
        if not heads_first:
            query, key, value = (ops.transpose(t, (0, 2, 1, 3)) for t in (query, key, value))
        scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        if training or scores.dtype != "bfloat16":
            scores = ops.cast(scores, "float32")
        probs = ops.softmax(scores + ops.cast(adder, scores.dtype), axis=-1)
        probs = ops.cast(probs, self.compute_dtype)
        probs = self.dropout(probs, training=training)
        context = ops.matmul(probs, value)
        return context if heads_first else ops.transpose(context, (0, 2, 1, 3))


@keras.saving.register_keras_serializable(package="bert_tf")
class Attention(BertConfigured, keras.layers.Layer):
    """`attention`: self-attention followed by `output` (dense, dropout, residual, LayerNorm)."""

    def __init__(self, config, name="attention", **kwargs):
        """Args:
        config: A `BertConfig` (or its dict).
        name: Variable scope; the original's is "attention".
        """
        # Not autocast: the residual stream passes through in its own dtype (see LayerNorm).
        super().__init__(config, name=name, autocast=False, **kwargs)
        config = self.config
        self.self_attention = SelfAttention(config, dtype=self.dtype_policy)
        self.output_block = DenseOutput(config, config.hidden_size, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.self_attention.build()
        self.output_block.build()

    def call(self, hidden_states, input_mask, training=False, from_states=None, packing=None):
        """Args:
          hidden_states: float [batch, seq, H] (or [batch * seq, H], or with `packing` the
            real tokens' [tokens, H]), the layer input.
          input_mask: [batch, seq] padding mask.
          training: Whether dropout is on.
          from_states: None, or float [batch, R, H]: the rows of `hidden_states` the output is
            computed for (see `SelfAttention`); they are also the residual.
          packing: None, or the `Packing` of `input_mask` that packed `hidden_states`.

        Returns:
          float, in the shape of `from_states` (by default `hidden_states`).
        """
        context, value_bias = self.self_attention(
            hidden_states,
            input_mask,
            training=training,
            from_states=from_states,
            defer_value_bias=True,
            packing=packing,
        )
        residual = hidden_states if from_states is None else from_states
        return self.output_block(context, residual, training=training, input_offset=value_bias)
