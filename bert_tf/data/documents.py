"""Reading a text corpus into documents of tokenized segments, stored as compact int arrays.

Input format (the original's): one sentence (segment) per line, a blank line between
documents. Lines are decoded as UTF-8 with invalid bytes dropped (with a warning naming the file
and its first such line) and stripped of surrounding whitespace; lines that tokenize to nothing
are skipped.

With a word segmenter (`--word_segmenter`, for whole-word masking) each line is cut into words
on its own, and a token that continues a word (`word_continuations`) is stored as `~id`, the
mark `Masker(marked_words=True)` reads and removes.
"""

import array
import logging

import numpy as np

from bert_tf.files import open_file, original_line
from bert_tf.text.word_segmentation import word_continuations

logger = logging.getLogger(__name__)

# The first bytes of a gzip file (RFC 1952): a compressed corpus would read as garbage text.
_GZIP_MAGIC = b"\x1f\x8b"


class Corpus:
    """Documents of segments of token ids, held in three flat arrays.

    `tokens` holds every id (`~id` where it continues a segmenter's word); segment `s` is
    `tokens[segment_starts[s]:segment_starts[s + 1]]`; document `d` is segments
    `document_starts[d]` to `document_starts[d + 1]`. Four bytes a token instead of a Python
    string each.
    """

    def __init__(self, tokens, segment_starts, document_starts):
        self.tokens = tokens
        self.segment_starts = segment_starts
        self.document_starts = document_starts

    @property
    def num_documents(self):
        return len(self.document_starts) - 1

    @property
    def num_tokens(self):
        return len(self.tokens)

    def document(self, index):
        """Document `index` as a list of segments, each a list of ids."""
        starts = self.segment_starts
        first, last = self.document_starts[index], self.document_starts[index + 1]
        flat = self.tokens[starts[first] : starts[last]].tolist()
        base = starts[first]
        return [flat[starts[s] - base : starts[s + 1] - base] for s in range(first, last)]


def check_not_compressed(path, reader):
    """Raises a ValueError naming `path` if the file open in `reader` (binary, seekable) starts
    as a gzip file, whose bytes would be read as garbage text (`tf.gfile` does not decompress
    either). Leaves `reader` at an unspecified position."""
    reader.seek(0)
    if reader.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC:
        raise ValueError(f"{path}: a gzip-compressed file; the corpus must be plain text (gunzip it)")


def is_blank_line(raw_line):
    """Whether a line (bytes, split at "\\n") is blank, i.e. ends a document.

    The original's rule: the line is empty once decoded and `strip()`ped, and `str.strip`
    also removes "\\r" and Unicode whitespace (no-break and ideographic spaces, ...).
    """
    return not raw_line.decode("utf-8", "ignore").strip()


class CorpusBuilder:
    """Accumulates tokenized lines into a `Corpus`, following the original's document rules.

    Args:
      tokenizer: A `FullTokenizer`.
      on_line: None, or called after each line that `add_file` reads with the counts so far
        (keywords `lines`, `bytes`, `documents`, `tokens`), e.g. `Progress.update`.
      segmenter: None, or a function from a line to its words (`load_word_segmenter`): the
        tokens that continue a word are marked (module doc).
    """

    def __init__(self, tokenizer, on_line=None, segmenter=None):
        self._tokenizer = tokenizer
        self._segmenter = segmenter
        self._vocab = tokenizer.vocab
        self._tokens = array.array("i")
        self._segment_starts = array.array("q", [0])
        self._document_starts = array.array("q", [0])
        self._open_segments = 0  # segments of the document being read
        self._on_line = on_line
        self._lines_read = 0
        self._bytes_read = 0

    def add_line(self, line):
        """Adds one decoded line: a blank line (`is_blank_line`) ends the current document."""
        line = line.strip()
        if not line:
            self.end_document()
            return
        if self._segmenter is None:
            tokens = self._tokenizer.tokenize(line)
            ids = [self._vocab[token] for token in tokens]
        else:
            tokens, starts, _ = self._tokenizer.tokenize_with_offsets(line)
            continues = word_continuations(line, starts, self._segmenter(line))
            ids = [~self._vocab[t] if c else self._vocab[t] for t, c in zip(tokens, continues, strict=True)]
        if tokens:
            self._tokens.extend(ids)
            self._segment_starts.append(len(self._tokens))
            self._open_segments += 1

    def end_document(self):
        """Closes the current document (empty documents are dropped, as in the original)."""
        if self._open_segments:
            self._document_starts.append(len(self._segment_starts) - 1)
            self._open_segments = 0

    def add_file(self, path, start=0, end=None):
        """Adds the lines of `path`, local or not (of the lines starting in its byte range
        [start, end) if given).

        Only a blank line ends a document, as in the original, which reads all the files into
        one list of documents: a file that does not end with a blank line has its last document
        continue into the next file's first (`build` ends the last one).
        """
        not_utf8 = 0
        with open_file(path, "rb") as reader:
            if start == 0:
                check_not_compressed(path, reader)
            reader.seek(start)
            offset = start
            for number, raw in enumerate(reader, start=1):
                line = original_line(raw)
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    text = line.decode("utf-8", "ignore")
                    not_utf8 += 1
                    if not_utf8 == 1:
                        where = f"line {number}" if start == 0 else f"the line at byte {offset}"
                        logger.warning("%s: %s is not UTF-8; its invalid bytes are dropped", path, where)
                try:
                    self.add_line(text)
                except ValueError as e:
                    if self._segmenter is None:
                        raise
                    # The segmenter's words are not the line's (`word_continuations`).
                    where = f"line {number}" if start == 0 else f"the line at byte {offset}"
                    raise ValueError(f"{path}: {where}: --word_segmenter: {e}") from None
                # The offset, not a sum of line lengths: tf.io.gfile drops every "\r" of a line.
                position = reader.tell()
                self._lines_read += 1
                self._bytes_read += position - offset
                offset = position
                if self._on_line is not None:
                    self._on_line(
                        lines=self._lines_read,
                        bytes=self._bytes_read,
                        documents=len(self._document_starts) - 1,
                        tokens=len(self._tokens),
                    )
                if end is not None and offset >= end:
                    break
        if not_utf8 > 1:
            logger.warning("%s: %d lines are not UTF-8; their invalid bytes are dropped", path, not_utf8)

    def build(self):
        self.end_document()
        return Corpus(
            np.frombuffer(self._tokens, dtype=np.int32),
            np.frombuffer(self._segment_starts, dtype=np.int64),
            np.frombuffer(self._document_starts, dtype=np.int64),
        )
