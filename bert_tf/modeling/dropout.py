"""Dropout as the original applies it, drawing half as many random numbers as Keras' dropout.

In training, each element is kept with probability `1 - rate` and scaled by the inverse of
that probability, or set to 0. The keep decision reads 15 random bits: each random int32 in
[0, 2^30) that `keras.random.randint` draws gives two of them (its low and its high 15 bits),
where Keras' own dropout draws one float32 per element. On TensorFlow's CPU kernels the draw
is the largest part of dropout's cost, and half the numbers take about 60% of the time. The
element is dropped when its 15 bits are below `round(rate * 2^15)`: the rate is that count over
2^15 (0.1 becomes 0.100006), and the scale is exactly the inverse of the keep probability, so
the expectation of the output is the input.
"""

import functools

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
    halves = ops.reshape(x, (*shape[:-1], pairs, -1))
    shifts = ops.reshape(ops.arange(pairs, dtype="int32") * _BITS, (pairs, 1))
    keep = ops.bitwise_and(ops.right_shift(draws, shifts), _LEVELS - 1) >= threshold
    scale = _LEVELS / (_LEVELS - threshold)
    return ops.reshape(ops.where(keep, halves * ops.cast(scale, x.dtype), ops.zeros_like(halves)), shape)


@functools.cache  # one function (and one set of compiled traces) for every layer of a rate
def dropout_training_form(threshold, compile_fn=None):
    """Dropout of a tensor given its draws, with its gradient written out.

    The gradient is the forward function itself applied to the upstream gradient: the same
    mask, recomputed from the draws (half an int32 per element) instead of kept as a tensor.

    Args:
      threshold: `drop_threshold(rate)`.
      compile_fn: None, or a function that compiles a function of tensors, e.g. TensorFlow's
        XLA, which makes the forward and the backward pass one pass over memory each, where
        TensorFlow's kernels take three (compare, scale, select) and two.

    Returns:
      A function of `(x, draws)`, with its gradient for `x` (None for the draws).
    """
    forward = functools.partial(_dropout_forward, threshold=threshold)
    if compile_fn:
        forward = compile_fn(forward)

    @ops.custom_gradient
    def dropout_for_training(x, draws):
        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return forward(upstream, draws), None

        return forward(x, draws), gradient

    return dropout_for_training


@keras.saving.register_keras_serializable(package="bert_tf")
class Dropout(keras.layers.Layer):
    """Dropout with `rate` in training, the identity otherwise (see the module docstring).

    Args:
      rate: The probability that an element is dropped, in [0, 1).
      seed: Seed of the layer's `keras.random.SeedGenerator`.
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.seed = seed
        self.threshold = drop_threshold(self.rate)
        if self.threshold:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.training_form = dropout_training_form(self.threshold)
        self.built = True

    def compile_training_form(self, compile_fn):
        """Has the training form run its computations as `compile_fn` compiles them (the
        TensorFlow trainer: with XLA, one pass over memory each way).

        Args:
          compile_fn: Maps a function of tensors to a compiled one.
        """
        self.training_form = dropout_training_form(self.threshold, compile_fn)

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
        shape = draws_shape(ops.shape(inputs))
        draws = keras.random.randint(shape, 0, DRAW_RANGE, dtype="int32", seed=self.seed_generator)
        return self.training_form(inputs, draws)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed)
        return config
