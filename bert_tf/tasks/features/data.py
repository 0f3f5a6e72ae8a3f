"""Feature extraction's output, as the original's `extract_features.py` writes it (its input,
one example a line, is `bert_tf.text.text_lines`).

Output: JSON lines, one per input line, in the original's structure:
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": -1, "values": [...]}, ...]}]}`
with a feature for every real token ([CLS] and [SEP] included) and values rounded to 6 places;
with `--pooling`, `{"linex_index": i, "sentence_embedding": [...]}` (rounded the same way).
"""

import json

from bert_tf.files import atomic_output, open_file


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
