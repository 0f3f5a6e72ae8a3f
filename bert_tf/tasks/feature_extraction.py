"""Feature extraction like the original's `extract_features.py`: per-token encoder activations.

Input: a text file, one example a line, `text_a` or `text_a ||| text_b`.
Output: JSON lines, one per input line, in the original's structure:
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": -1, "values": [...]}, ...]}]}`
with a feature for every real token ([CLS] and [SEP] included) and values rounded to 6 places.
"""

import collections
import dataclasses
import json
import re

import numpy as np

from bert_tf.files import atomic_output, exists, isdir, open_file, original_line
from bert_tf.text.packing import pack_inputs

_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
    """One input line: `text_b` is None for a single sequence."""

    unique_id: int
    text_a: str
    text_b: str = None


def read_examples(input_file):
    """Yields the `InputExample`s of a file (local or `gs://...`), one per line (the line
    stripped, as the original).

    Bytes that are not UTF-8 are dropped, as the original's `convert_to_unicode` does.

    Raises:
      ValueError: The file does not exist, or it is empty (where the original writes an empty
        output): raised at the first read, so an output being written from it is not replaced.
    """
    if not exists(input_file) or isdir(input_file):
        raise ValueError(f"{input_file}: no such input file")
    unique_id = -1
    with open_file(input_file, "rb") as reader:
        for unique_id, line in enumerate(reader):
            line = original_line(line).decode("utf-8", "ignore").strip()
            match = _PAIR_SEPARATOR.match(line)
            if match:
                yield InputExample(unique_id, match.group(1), match.group(2))
            else:
                yield InputExample(unique_id, line)
    if unique_id < 0:
        raise ValueError(f"{input_file}: the input file is empty (one example a line)")


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
        packed = [
            pack_inputs(
                tokenizer.tokenize(example.text_a),
                tokenizer.tokenize(example.text_b) if example.text_b else None,
                max_seq_length,
                tokenizer,
            )
            for example in batch
        ]
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


def write_jsonl(records, output_file):
    """Writes records as JSON lines through a temporary file renamed into place.

    Returns:
      The number of records written.
    """
    count = 0
    with atomic_output(output_file) as tmp, open_file(tmp, "w") as writer:
        for record in records:
            writer.write(json.dumps(record) + "\n")
            count += 1
    return count
