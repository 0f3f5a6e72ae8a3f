"""The original's `gather_indexes`: the vectors at given positions of each sequence."""

from keras import ops


def gather_indexes(sequence_tensor, positions):
    """Gathers the vectors at `positions` of each sequence, as the original's `gather_indexes`:
    rows `positions + b * seq` of the sequence flattened to [batch * seq, H] (a row gather,
    whose gradient is a sparse update of those rows).

    Args:
      sequence_tensor: float [batch, seq, H].
      positions: int [batch, P] positions in each sequence.

    Returns:
      float [batch * P, H], rows in batch-major order as the original flattens them.
    """
    batch, seq = ops.shape(sequence_tensor)[0], ops.shape(sequence_tensor)[1]
    offsets = ops.expand_dims(ops.arange(batch, dtype=positions.dtype) * ops.cast(seq, positions.dtype), -1)
    flat_positions = ops.reshape(positions + offsets, (-1,))
    flat_sequence = ops.reshape(sequence_tensor, (-1, sequence_tensor.shape[-1]))
    return ops.take(flat_sequence, flat_positions, axis=0)
