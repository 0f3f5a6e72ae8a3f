"""Entity-level precision, recall and F1 by the conlleval rules (`chunks`), which read IOB1, IOB2
(and IOE) tags alike.
"""

import collections


def _split_tag(label):
    """conlleval's split of a label at its first hyphen: "B-PER" -> ("B", "PER"), "O" -> ("O", "")."""
    tag, _, chunk_type = label.partition("-")
    return tag, chunk_type


def _end_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's endOfChunk: did a chunk end between the previous word and this one?"""
    return (
        (prev_tag, tag)
        in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
        or (prev_tag not in ("O", ".") and prev_type != chunk_type)
        or prev_tag in ("[", "]")
    )


def _start_of_chunk(prev_tag, tag, prev_type, chunk_type):
    """conlleval's startOfChunk: did a chunk start at this word?"""
    return (
        (prev_tag, tag)
        in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}
        or (tag not in ("O", ".") and prev_type != chunk_type)
        or tag in ("[", "]")
    )


def chunks(labels):
    """The chunks of one sentence's labels, by conlleval's rules.

    A chunk ends before a word where `endOfChunk` holds and starts at a word where
    `startOfChunk` holds (given the previous word's tag and type; before the first word and
    after the last one the tag is "O"). So IOB2 chunks start at B; IOB1 chunks start at an I
    after O or after a chunk of another type, and at a B; a type change always ends a chunk.

    Args:
      labels: The sentence's labels ("B-PER", "I-LOC", "O", ...).

    Returns:
      A list of (start, end, type), `end` exclusive.
    """
    found = []
    start, start_type = None, ""
    prev_tag, prev_type = "O", ""
    for i, label in enumerate([*labels, "O"]):
        tag, chunk_type = _split_tag(label)
        starts = _start_of_chunk(prev_tag, tag, prev_type, chunk_type)
        if start is not None and (starts or _end_of_chunk(prev_tag, tag, prev_type, chunk_type)):
            found.append((start, i, start_type))
            start = None
        if starts and i < len(labels):
            start, start_type = i, chunk_type
        prev_tag, prev_type = tag, chunk_type
    return found


def entity_scores(gold_sentences, predicted_sentences):
    """conlleval's overall scores: chunks found in both with the same span and type, over the
    predicted chunks (precision) and the gold ones (recall), and word accuracy.

    Args:
      gold_sentences: A list of label lists.
      predicted_sentences: A list of label lists of the same lengths.

    Returns:
      `{"precision", "recall", "f1", "accuracy"}` as fractions (conlleval prints percentages;
      0 where undefined), and the counts `gold_chunks`, `predicted_chunks`, `correct_chunks`.
    """
    counts = collections.Counter()
    for gold, predicted in zip(gold_sentences, predicted_sentences, strict=True):
        if len(gold) != len(predicted):
            raise ValueError(f"a sentence of {len(gold)} gold labels has {len(predicted)} predicted labels")
        gold_chunks, predicted_chunks = chunks(gold), chunks(predicted)
        counts["gold_chunks"] += len(gold_chunks)
        counts["predicted_chunks"] += len(predicted_chunks)
        counts["correct_chunks"] += len(set(gold_chunks) & set(predicted_chunks))
        counts["correct_words"] += sum(g == p for g, p in zip(gold, predicted, strict=True))
        counts["words"] += len(gold)
    precision = counts["correct_chunks"] / counts["predicted_chunks"] if counts["predicted_chunks"] else 0.0
    recall = counts["correct_chunks"] / counts["gold_chunks"] if counts["gold_chunks"] else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": counts["correct_words"] / counts["words"] if counts["words"] else 0.0,
        "gold_chunks": counts["gold_chunks"],
        "predicted_chunks": counts["predicted_chunks"],
        "correct_chunks": counts["correct_chunks"],
    }
