"""Dropout as the original applies it, drawing half as many random numbers as Keras' dropout.

In training, each element is kept with probability `1 - rate` and scaled by the inverse of
that probability, or set to 0. The keep decision reads 15 random bits: each random int32 in
[0, 2^30) that `keras.random.randint` draws gives two of them (its low and its high 15 bits),
where Keras' own dropout draws one float32 per element. On TensorFlow's CPU kernels the draw
is the largest part of dropout's cost, and half the numbers take about 60% of the time. The
element is dropped when its 15 bits are below `round(rate * 2^15)`: the rate is that count over
2^15 (0.1 becomes 0.100006), and the scale is exactly the inverse of the keep probability, so
the expectation of the output is the input.

On JAX, where XLA compiles every step, the draws are not drawn and kept: each call draws a key
of two numbers, and the draws are a hash of each draw's index and the key (`keyed_draws`),
computed again in the backward pass. XLA fuses that integer arithmetic into the element-wise
work around it, so the dropout of a [batch, heads, seq, seq] tensor costs no pass over memory
for its randomness, where threefry's draws (`jax.random`) cost their generation, a write and two
reads (BUILD_NOTES.md, "Dropout on JAX: keyed draws").
"""

import functools
import math

import keras
from keras import ops

# Random bits per keep decision, and the draws' range: two decisions per draw.
_BITS = 15
_LEVELS = 1 << _BITS
DRAW_RANGE = 1 << (2 * _BITS)


def draws_shape(shape):
    """The shape of the int32 draws (in [0, `DRAW_RANGE`)) for dropout on a tensor of `shape`:
    `[..., 1, width / 2]`, or `[..., 1, width]` where the last axis `width` is odd or None."""
    *leading, width = shape
    pairs = 2 if isinstance(width, int) and width % 2 == 0 else 1
    return (*leading, 1, width // pairs)


# The two multipliers of Chris Wellons' `lowbias32` integer hash (his hash-prospector), a
# bijection of uint32 whose output bits each flip with probability close to 1/2 when any input
# bit flips.
_HASH_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)


def _lowbias32(x):
    """The `lowbias32` hash of uint32 `x`: xor-shifts by 16, 15 and 16 with the multipliers
    between them (arithmetic modulo 2^32)."""
    first, second = (ops.convert_to_tensor(m, dtype="uint32") for m in _HASH_MULTIPLIERS)
    x = ops.bitwise_xor(x, ops.right_shift(x, 16)) * first
    x = ops.bitwise_xor(x, ops.right_shift(x, 15)) * second
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def keyed_draws(shape, key):
    """Draws in [0, `DRAW_RANGE`) as a function of their index and a key: for the i-th
    element (row-major), the low 30 bits of `h(h(i ^ key[0]) ^ key[1])`, `h` = `_lowbias32`.

    Args:
      shape: The shape of the draws (`draws_shape`), at most 2^31 elements; its sizes may be
        scalar tensors where a TensorFlow graph knows them only when it runs.
      key: int32 [2], e.g. from `keras.random.randint`.

    Returns:
      int32 draws of `shape`.
    """
    size = math.prod(shape)
    if isinstance(size, int) and size > 1 << 31:
        raise ValueError(f"keyed dropout draws at most 2^31 numbers a call; shape {shape} has {size}")
    key = ops.cast(key, "uint32")
    index = ops.cast(ops.reshape(ops.arange(size, dtype="int32"), shape), "uint32")
    bits = _lowbias32(ops.bitwise_xor(_lowbias32(ops.bitwise_xor(index, key[0])), key[1]))
    return ops.cast(ops.bitwise_and(bits, DRAW_RANGE - 1), "int32")


def drop_threshold(rate):
    """The count of 15-bit values (of 2^15) that drop an element at `rate`."""
    return round(rate * _LEVELS)


def _dropout_forward(x, draws, threshold):
    """`x` scaled by the inverse keep probability where kept, 0 where dropped.

    Args:
      x: float [..., width].
      draws: int32 [..., 1, width / 2] in [0, 2^30) (two decisions each: the first half of the
        last axis of `x` reads their low 15 bits, the second half their high 15 bits), or
        [..., 1, width] (one decision each, from the low bits) where `width` is odd or unknown.
      threshold: `drop_threshold(rate)`.
    """
    shape = ops.shape(x)
    pairs = 1 if draws.shape[-1] is None or draws.shape[-1] == x.shape[-1] else 2
    # The width given, not -1: JAX cannot infer a size beside an empty batch.
    halves = ops.reshape(x, (*shape[:-1], pairs, shape[-1] // pairs))
    shifts = ops.reshape(ops.arange(pairs, dtype="int32") * _BITS, (pairs, 1))
    keep = ops.bitwise_and(ops.right_shift(draws, shifts), _LEVELS - 1) >= threshold
    scale = _LEVELS / (_LEVELS - threshold)
    return ops.reshape(ops.where(keep, halves * ops.cast(scale, x.dtype), ops.zeros_like(halves)), shape)


@functools.cache  # one function (and one set of compiled traces) for every layer of a rate
def dropout_training_form(threshold, compile_fn=None, keyed=False):
    """Dropout of a tensor given its draws (or their key), with its gradient written out.

    The gradient is the forward function itself applied to the upstream gradient: the same
    mask, recomputed from the draws (half an int32 per element), or from the key, instead of
    kept as a tensor.

    Args:
      threshold: `drop_threshold(rate)`.
      compile_fn: None, or a function that compiles a function of tensors, e.g. TensorFlow's
        XLA, which makes the forward and the backward pass one pass over memory each, where
        TensorFlow's kernels take three (compare, scale, select) and two.
      keyed: The function takes the key of `keyed_draws` instead of the draws.

    Returns:
      A function of `(x, draws)` or `(x, key)`, with its gradient for `x` (None for the other).
    """

    def forward(x, source):
        draws = keyed_draws(draws_shape(ops.shape(x)), source) if keyed else source
        return _dropout_forward(x, draws, threshold)

    if compile_fn:
        forward = compile_fn(forward)

    @ops.custom_gradient
    def dropout_for_training(x, source):
        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return forward(upstream, source), None

        return forward(x, source), gradient

    return dropout_for_training


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Layer):
    """Dropout with `rate` in training, the identity otherwise (see the module docstring).

    Args:
      rate: The probability that an element is dropped, in [0, 1).
      seed: Seed of the layer's `keras.random.SeedGenerator`.
      keyed: Whether the draws are `keyed_draws` of a key drawn each call, recomputed in the
        backward pass, rather than drawn whole and kept; None: on the JAX backend.
    """

    def __init__(self, rate, seed=None, keyed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.seed = seed
        self.threshold = drop_threshold(self.rate)
        if self.threshold:
            self.seed_generator = keras.random.SeedGenerator(seed)
        # Keyed draws where XLA compiles every step and fuses them (see the module docstring).
        self.keyed = keras.backend.backend() == "jax" if keyed is None else bool(keyed)
        self.training_form = dropout_training_form(self.threshold, keyed=self.keyed)
        self.built = True

    def compile_training_form(self, compile_fn):
        """Has the training form run its computations as `compile_fn` compiles them (the
        TensorFlow trainer: with XLA, one pass over memory each way).

        Args:
          compile_fn: Maps a function of tensors to a compiled one.
        """
        self.training_form = dropout_training_form(self.threshold, compile_fn, self.keyed)

    def drops(self, training):
        """Whether a call with `training` drops anything: a rate below 2^-16 rounds to none."""
        return bool(training) and self.threshold > 0

    def call(self, inputs, training=False):
        """Args:
          inputs: A float tensor.
          training: Whether the dropout applies.

        Returns:
          A tensor of the shape and dtype of `inputs`.
        """
        if not self.drops(training):
            return inputs
        # `ops.shape` gives the static width where it is known, which decides the pairs.
        shape = (2,) if self.keyed else draws_shape(ops.shape(inputs))
        source = keras.random.randint(shape, 0, DRAW_RANGE, dtype="int32", seed=self.seed_generator)
        return self.training_form(inputs, source)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed)
        return config
