"""Feature extraction's model side: per-token encoder activations of the chosen layers, of each
example packed as the original packs it, or (`doc_stride`) of each WordPiece of a long text from
the window where it has the most context (`bert_tf.text.windows`); or each example's sentence
vector, its last layer's tokens pooled (`bert_tf.modeling.pooling`)."""

import collections

import numpy as np
from keras import ops

from bert_tf.modeling.pooling import check_pooling, pool_tokens
from bert_tf.text.packing import pack_inputs
from bert_tf.text.text_lines import convert_example
from bert_tf.text.windows import max_context_outputs, window_spans


def _batches(iterable, batch_size):
    batch = []
    for item in iterable:
        batch.append(item)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def encode_documents(
    model, tokenizer, examples, max_seq_length, layer_indexes, batch_size=32, doc_stride=None
):
    """Runs `model` over `examples` and yields each one's tokens and their activations, in order.

    Args:
      model: A `BertModel` (or `BertPretrainer`) with its weights loaded.
      tokenizer: A `FullTokenizer` matching the model's vocab and case.
      examples: An iterable of `InputExample`.
      max_seq_length: Tokens per packed sequence ([CLS] and [SEP] included).
      layer_indexes: Encoder layers to output; negative counts from the top (-1 is the last,
        the model's `sequence_output`).
      batch_size: Sequences per forward pass.
      doc_stride: None: each example packed as the original (a longer one cut); else each
        (single) text read as windows of `max_seq_length` - 2 WordPieces starting at most
        `doc_stride` apart, every WordPiece's activations from its max-context window
        (`bert_tf.text.windows.max_context_outputs`).

    Yields:
      `(example, tokens, layers)`: the tokens (`[CLS]` first, `[SEP]` last; with `doc_stride`
      every WordPiece of the text between them) and, per layer of `layer_indexes`, a float32
      [len(tokens), hidden_size] array.

    Raises:
      ValueError: A layer index outside the model's layers, a sequence length beyond
        `max_position_embeddings`, or a pair with `doc_stride`.
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
        if doc_stride is None:
            packed = [[convert_example(example, tokenizer, max_seq_length)] for example in batch]
            documents = [(p[0]["tokens"], None) for p in packed]
        else:
            packed, documents = [], []
            for example in batch:
                if example.text_b is not None:
                    raise ValueError(f"example {example.unique_id}: a pair; doc_stride reads single texts")
                pieces = tokenizer.tokenize(example.text_a)
                spans = window_spans(len(pieces), max_seq_length - 2, doc_stride)
                windows = [pieces[span.start : span.start + span.length] for span in spans]
                packed.append([pack_inputs(window, None, max_seq_length, tokenizer) for window in windows])
                documents.append((["[CLS]", *pieces, "[SEP]"], spans))
        rows = [window for windows in packed for window in windows]
        selected = [[] for _ in layer_indexes]
        # Every forward pass takes `batch_size` rows (the last padded), so the compiled forward
        # pass (Keras' predict function: a tf.function, or jit on JAX) is traced once.
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            padding = [[0] * max_seq_length] * (batch_size - len(chunk))
            inputs = {
                key: np.array([row[key] for row in chunk] + padding, dtype=np.int32)
                for key in ("input_ids", "input_mask", "segment_ids")
            }
            all_layers = bert.predict_on_batch(inputs)["all_encoder_layers"]
            for outputs, i in zip(selected, layer_indexes, strict=True):
                outputs.append(np.asarray(all_layers[i])[: len(chunk)])
        selected = [np.concatenate(outputs) for outputs in selected]
        first = 0
        for example, windows, (tokens, spans) in zip(batch, packed, documents, strict=True):
            rows = slice(first, first + len(windows))
            first += len(windows)
            if spans is None:
                layers = [output[rows.start, : len(tokens)] for output in selected]
            else:
                layers = [max_context_outputs(output[rows], spans) for output in selected]
            yield example, tokens, layers


def extract_features(
    model, tokenizer, examples, max_seq_length, layer_indexes, batch_size=32, doc_stride=None
):
    """Runs `model` over `examples` and yields one JSON-ready dict per example, in order
    (`encode_documents`).

    Args:
      model, tokenizer, examples, max_seq_length, layer_indexes, batch_size, doc_stride: As
        `encode_documents`'.

    Yields:
      `OrderedDict(linex_index=..., features=[...])` in the original's output structure: a
      feature per token.

    Raises:
      ValueError: As `encode_documents`.
    """
    encoded = encode_documents(
        model, tokenizer, examples, max_seq_length, layer_indexes, batch_size, doc_stride
    )
    for example, tokens, layers in encoded:
        features = []
        for position, token in enumerate(tokens):
            values = [
                collections.OrderedDict(index=index, values=[round(float(x), 6) for x in output[position]])
                for index, output in zip(layer_indexes, layers, strict=True)
            ]
            features.append(collections.OrderedDict(token=token, layers=values))
        yield collections.OrderedDict(linex_index=example.unique_id, features=features)


def sentence_embeddings(
    model, tokenizer, examples, max_seq_length, pooling, normalize=False, batch_size=32, doc_stride=None
):
    """Runs `model` over `examples` and yields each one's sentence vector as a JSON-ready dict, in
    order: the last layer's vectors of its tokens ([CLS] and [SEP] included; with `doc_stride`
    every WordPiece of the text, each from its max-context window) pooled as sentence-transformers'
    `Pooling` (and `Normalize`) modules do.

    Args:
      model, tokenizer, examples, max_seq_length, batch_size, doc_stride: As `encode_documents`'.
      pooling: One of `bert_tf.model_settings.POOLINGS`.
      normalize: Scale each vector to unit L2 norm.

    Yields:
      `OrderedDict(linex_index=..., sentence_embedding=[...])`, the values rounded to 6 places as
      the original rounds its features.

    Raises:
      ValueError: An unknown `pooling`, or as `encode_documents`.
    """
    check_pooling(pooling)
    encoded = encode_documents(model, tokenizer, examples, max_seq_length, [-1], batch_size, doc_stride)
    for example, _, (tokens,) in encoded:
        vector = pool_tokens(tokens[None], np.ones((1, len(tokens)), np.float32), pooling, normalize)
        values = [round(float(x), 6) for x in ops.convert_to_numpy(vector)[0]]
        yield collections.OrderedDict(linex_index=example.unique_id, sentence_embedding=values)
