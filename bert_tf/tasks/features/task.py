"""Feature extraction's model side: per-token encoder activations of the chosen layers."""

import collections

import numpy as np

from bert_tf.tasks.features.data import convert_example


def _batches(iterable, batch_size):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def extract_features(model, tokenizer, examples, max_seq_length, layer_indexes, batch_size=32):
    """Runs `model` over `examples` and yields one JSON-ready dict per example, in order.

    Args:
      model: A `BertModel` (or `BertPretrainer`) with its weights loaded.
      tokenizer: A `FullTokenizer` matching the model's vocab and case.
      examples: An iterable of `InputExample`.
      max_seq_length: Tokens per packed sequence ([CLS] and [SEP] included).
      layer_indexes: Encoder layers to output; negative counts from the top (-1 is the last).
      batch_size: Examples per forward pass.

    Yields:
      `OrderedDict(linex_index=..., features=[...])` in the original's output structure.

    Raises:
      ValueError: A layer index outside the model's layers, or a sequence length beyond
        `max_position_embeddings`.
    """
    num_layers = model.config.num_hidden_layers
    bad = [i for i in layer_indexes if not -num_layers <= i < num_layers]
    if bad:
        raise ValueError(f"--layers {bad} outside the model's {num_layers} layers")
    if max_seq_length > model.config.max_position_embeddings:
        raise ValueError(
            f"max_seq_length {max_seq_length} is longer than the model's "
            f"max_position_embeddings {model.config.max_position_embeddings}"
        )
    bert = getattr(model, "bert", model)
    for batch in _batches(examples, batch_size):
        packed = [convert_example(example, tokenizer, max_seq_length) for example in batch]
        # Every batch is padded to `batch_size` rows, so the compiled forward pass (Keras'
        # predict function: a tf.function, or jit on JAX) is traced once.
        padding = [[0] * max_seq_length] * (batch_size - len(packed))
        inputs = {
            key: np.array([p[key] for p in packed] + padding, dtype=np.int32)
            for key in ("input_ids", "input_mask", "segment_ids")
        }
        all_layers = bert.predict_on_batch(inputs)["all_encoder_layers"]
        selected = [np.asarray(all_layers[i]) for i in layer_indexes]
        for row, (example, p) in enumerate(zip(batch, packed, strict=True)):
            features = []
            for position, token in enumerate(p["tokens"]):
                layers = [
                    collections.OrderedDict(
                        index=index,
                        values=[round(float(x), 6) for x in output[row, position]],
                    )
                    for index, output in zip(layer_indexes, selected, strict=True)
                ]
                features.append(collections.OrderedDict(token=token, layers=layers))
            yield collections.OrderedDict(linex_index=example.unique_id, features=features)
