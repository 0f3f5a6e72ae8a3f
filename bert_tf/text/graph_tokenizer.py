"""`FullTokenizer` in the TensorFlow graph: the same ids, for SavedModels and tf.data pipelines.

Built on tensorflow-text's `FastWordpieceTokenizer`, with the original's basic tokenization
rebuilt from TF string ops, because tensorflow-text's own `BertTokenizer` normalises differently
(NFKC case folding instead of `lower()`, control characters as spaces instead of dropped, a
100-byte word limit instead of 200 characters). Step by step (as in `bert_tf.tokenization`):

1. drop NUL, U+FFFD and Cc/Cf characters except tab, newline and carriage return, which stay
   as word separators, like every Zs character (made a space);
2. pad CJK ideographs with spaces;
3. uncased: `tf.strings.lower` (full Unicode lower-casing, like Python's `str.lower()`), NFD,
   drop Mn;
4. and 5. put spaces around punctuation (P* and the ASCII symbols) and split at spaces, tabs
   and line breaks (U+2028/U+2029, which cleaning keeps but Python's `str.split()` splits at,
   are made spaces in step 1);
6. words of more than 200 characters become "[UNK]"; the rest go through FastWordpiece.

`tokenize_with_offsets` also gives each token's span in the text, in UTF-8 bytes, as
`FullTokenizer.tokenize_with_offsets` gives it in characters: a token spans from the character
its first character came from to the one its last came from. The words are tokenized with
FastWordpiece's byte offsets into the normalised word; each character of the text is normalised
alone by the same steps, which gives how many normalised characters it becomes (lower-casing and
NFD act on each character alone but for the final sigma and the order of combining marks, which
change no count), and so which character a normalised one came from.

The text is first cut at ASCII whitespace into chunks, and each distinct chunk of a batch is
tokenized once (the memoisation of `FullTokenizer`, in the graph). No step moves a chunk
boundary: the only ASCII whitespace the original drops rather than splits at, vertical tab and
form feed, is dropped before the cut, and every other step only splits a chunk further. Chunks
of printable ASCII, most of them in most text, take a shorter path with the same result: ASCII
lower-casing, then FastWordpiece's own punctuation splitting (for ASCII the original's; with
`max_bytes_per_word=200` its word limit is the original's too, as a byte is a character there).
"""

import functools

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf.text.tokenization import _CJK_RANGES, _is_control, _is_whitespace, load_vocab

_CJK_CLASS = "[" + "".join(f"\\x{{{low:X}}}-\\x{{{high:X}}}" for low, high in _CJK_RANGES) + "]"
_PUNCTUATION_CLASS = r"[\p{P}!-/:-@\[-`{-~]"
_MAX_CHARS_PER_WORD = 200
# The Zs characters other than U+0020, and U+2028/U+2029, which survive the original's cleaning
# but split words in `str.split()`.
_SPACES_OTHER_THAN_SPACE = r"[\x{A0}\x{1680}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}\x{2028}\x{2029}]"
# NUL, U+FFFD and the Cc/Cf characters, except tab, newline and carriage return, which stay and
# split words in `tf.strings.split` as the original's whitespace does.
_DROPPED = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\x{FFFD}\p{Cf}]"
# The ASCII ones among them: vertical tab and form feed would cut chunks, and the rest go too so
# that a chunk of printable ASCII needs no cleaning.
_DROPPED_ASCII = r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]"


def _wordpiece_vocab(vocab):
    """The vocab as a tuple indexed by id, as FastWordpiece wants it (a tuple: the key of
    `_wordpiece_model`'s cache).

    Ids no token maps to (a duplicated line keeps only its later id, as the original), empty
    lines, and tokens no word can match (holding a character the basic tokenization drops or
    splits at, which FastWordpiece's builder may also fail on) get unmatchable placeholders, so
    every id means what it means in `FullTokenizer`.
    """
    tokens = [f"[bert_tf unused id {i}]" for i in range(max(vocab.values()) + 1)]
    for token, index in vocab.items():
        if token and not any(_never_in_a_word(char) for char in token):
            tokens[index] = token
    return tuple(tokens)


@functools.lru_cache(maxsize=8)
def _wordpiece_model(vocab, max_bytes_per_word, no_pretokenization):
    """FastWordpiece's model of `vocab` (a tuple, from `_wordpiece_vocab`), the flatbuffer
    `FastWordpieceTokenizer(vocab, ...)` builds for itself, with `##` suffixes and `[UNK]`:
    built once per process for each vocab and settings (an export's tokenizer builds two, and
    a process may make many tokenizers of one vocab).

    Raises:
      RuntimeError: FastWordpiece's builder cannot build the vocab (as the tokenizer's own
        build raises it).
    """
    return tf_text.build_fast_wordpiece_model(
        list(vocab), max_bytes_per_word, "##", "[UNK]", no_pretokenization, False
    )


@functools.cache
def _icu_lower_case_gaps():
    """The capitals `tf.strings.lower` leaves as they are where Python's `str.lower()` maps them
    to one lower-case character, as sorted code points `(capitals, lower)`, or None.

    TensorFlow's ICU has older case tables than Python's Unicode database: with Python 3.11 and
    TensorFlow 2.21, the 40 capitals Unicode 14 added (U+2C2F, U+A7C0, U+A7D0, U+A7D6, U+A7D8,
    Vithkuqi U+10570-U+10595). Found by lower-casing every such character both ways (once per
    process), so another pair of versions gets its own list.
    """
    capitals = [
        c
        for c in range(0x80, 0x110000)
        if not 0xD800 <= c <= 0xDFFF and len(chr(c).lower()) == 1 and chr(c).lower() != chr(c)
    ]
    icu = tf.strings.lower(tf.constant([chr(c) for c in capitals]), encoding="utf-8").numpy()
    gaps = [
        (c, ord(chr(c).lower()))
        for c, lower in zip(capitals, icu, strict=True)
        if lower.decode() != chr(c).lower()
    ]
    return tuple(zip(*gaps, strict=True)) if gaps else None


def _never_in_a_word(char):
    """Whether basic tokenization drops `char` or splits words at it."""
    return char in "\x00\ufffd" or _is_control(char) or _is_whitespace(char)


class GraphTokenizer(tf.Module):
    """Strings -> WordPiece ids in the graph, identical to `FullTokenizer(vocab_file, do_lower_case)`.

    `tokenize(text)` maps a [batch] string tensor to ragged int64 ids, and
    `tokenize_with_offsets(text)` to the same ids with their byte spans; `pack(text_a, text_b,
    max_seq_length)` gives padded model inputs. Both are `tf.function`s with fixed signatures,
    exported when the module is saved with `tf.saved_model.save`. `id_tokens(ids)` maps ids back
    to the vocab's tokens.

    Args:
      vocab_file: The model's `vocab.txt`.
      do_lower_case: True for uncased models.

    Raises:
      ValueError: The vocab cannot be read, or lacks `[CLS]`, `[SEP]` or `[UNK]`; the message
        names the file and the token.
    """

    def __init__(self, vocab_file, do_lower_case=True, name=None):
        super().__init__(name=name)
        self.do_lower_case = do_lower_case
        vocab = load_vocab(vocab_file)
        for token in ("[CLS]", "[SEP]", "[UNK]"):
            if token not in vocab:
                raise ValueError(f"{vocab_file}: the vocab has no {token} token, which GraphTokenizer needs")
        self.vocab_size = max(vocab.values()) + 1
        self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]

        self._lower_case_gaps = _icu_lower_case_gaps() if do_lower_case else None
        wordpiece_vocab = _wordpiece_vocab(vocab)
        self._tokens = tf.constant(wordpiece_vocab)

        def wordpiece(max_bytes_per_word, no_pretokenization):
            model = _wordpiece_model(wordpiece_vocab, max_bytes_per_word, no_pretokenization)
            return tf_text.FastWordpieceTokenizer(
                token_out_type=tf.int64, model_buffer=tf.constant(np.frombuffer(model, np.uint8))
            )

        # Words split and checked against the character limit in TF ops: no word that reaches
        # it is longer than 200 characters, so at most 800 bytes.
        self._wordpiece = wordpiece(4 * _MAX_CHARS_PER_WORD, no_pretokenization=True)
        # Printable ASCII chunks, split into words by FastWordpiece itself.
        self._ascii_wordpiece = wordpiece(_MAX_CHARS_PER_WORD, no_pretokenization=False)
        # Bound here rather than decorated: a decorated method holds its module weakly, so
        # `GraphTokenizer(...).tokenize(x)` on a temporary would fail.
        # Not converted by AutoGraph: they branch on Python values only, and a conversion costs
        # more than the rest of a trace.
        self.tokenize = tf.function(
            self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
        )
        self.tokenize_with_offsets = tf.function(
            self._tokenize_with_offsets, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
        )
        self.pack = tf.function(
            self._pack,
            input_signature=[
                tf.TensorSpec([None], tf.string),
                tf.TensorSpec([None], tf.string),
                tf.TensorSpec([], tf.int32),
            ],
            autograph=False,
        )

    def _words(self, chunks):
        """Steps 1-5 on a 1-D tensor of chunks (from `_chunks`) -> ragged [chunks, (words)].

        Bytes that are not UTF-8 are dropped first, as the original's `decode("utf-8", "ignore")`.
        """
        chunks = tf.strings.unicode_transcode(chunks, "UTF-8", "UTF-8", errors="ignore")
        chunks = tf.strings.regex_replace(chunks, _SPACES_OTHER_THAN_SPACE, " ")
        chunks = tf.strings.regex_replace(chunks, _DROPPED, "")
        chunks = tf.strings.regex_replace(chunks, f"({_CJK_CLASS})", r" \1 ")
        if self.do_lower_case:
            # ICU lower-cases by the process's locale (LC_ALL, LANG): under tr_TR or az_AZ "I"
            # becomes a dotless "ı". Python's `str.lower()` takes no locale; so A-Z are
            # lower-cased first, byte by byte, and what ICU does to the rest differs by locale
            # only in dots above an "i", which NFD and the Mn removal below take away.
            chunks = self._lower_what_icu_leaves(tf.strings.lower(tf.strings.lower(chunks), encoding="utf-8"))
            chunks = tf_text.normalize_utf8(chunks, "NFD")
            chunks = tf.strings.regex_replace(chunks, r"\p{Mn}", "")
        chunks = tf.strings.regex_replace(chunks, f"({_PUNCTUATION_CLASS})", r" \1 ")
        return tf.strings.split(chunks)

    def _lower_what_icu_leaves(self, chunks):
        """Maps the capitals that ICU's case tables leave as they are to Python's lower case
        (`_icu_lower_case_gaps`), in the chunks that hold one."""
        if self._lower_case_gaps is None:
            return chunks
        capital_class = "[" + "".join(f"\\x{{{c:X}}}" for c in self._lower_case_gaps[0]) + "]"
        capitals, lower = (tf.constant(points, tf.int32) for points in self._lower_case_gaps)
        rows = tf.where(tf.strings.regex_full_match(chunks, f"(?s).*{capital_class}.*"))
        chars = tf.strings.unicode_decode(tf.gather_nd(chunks, rows), "UTF-8")
        flat = chars.flat_values
        index = tf.minimum(tf.searchsorted(capitals, flat), tf.size(capitals) - 1)
        flat = tf.where(tf.gather(capitals, index) == flat, tf.gather(lower, index), flat)
        fixed = tf.strings.unicode_encode(chars.with_flat_values(flat), "UTF-8")
        return tf.tensor_scatter_nd_update(chunks, rows, fixed)

    def _chunks(self, text):
        """A [batch] string tensor -> ragged [batch, (chunks)], cut at ASCII whitespace.

        The ASCII control characters are dropped first (vertical tab and form feed would cut
        chunks). In the rows that hold one (few), bytes that are not UTF-8 are dropped before
        them, as the original decodes (`decode("utf-8", "ignore")`) before its cleaning: a
        control byte dropped first could join the bytes around it into a character
        (`caf\\xc3\\x00\\xa9` would read `café`). `_words` drops them from the other rows.
        """
        cleaned = tf.strings.regex_replace(text, _DROPPED_ASCII, "")
        rows = tf.where(tf.strings.length(cleaned) < tf.strings.length(text))
        decoded = tf.strings.unicode_transcode(tf.gather_nd(text, rows), "UTF-8", "UTF-8", errors="ignore")
        decoded = tf.strings.regex_replace(decoded, _DROPPED_ASCII, "")
        cleaned = tf.tensor_scatter_nd_update(cleaned, rows, decoded)
        return tf.strings.split(cleaned)

    def basic_tokenize(self, text):
        """Steps 1-5: a [batch] string tensor -> ragged [batch, (words)] of basic tokens."""
        chunks = self._chunks(text)
        return _merged(chunks, self._words(chunks.flat_values))

    def _chunk_ids(self, chunks):
        """Steps 1-6 on a 1-D tensor of chunks -> ragged int64 [chunks, (ids)]."""
        words = self._words(chunks)
        flat, _ = self._within_limit(words.flat_values)
        return _merged(words, self._wordpiece.tokenize(flat))

    @staticmethod
    def _within_limit(words):
        """Step 6's word limit: words of more than 200 characters made "[UNK]" (and which)."""
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > _MAX_CHARS_PER_WORD
        return tf.where(too_long, tf.constant("[UNK]"), words), too_long

    def _tokenize_with_offsets(self, text):
        """`tokenize(text)` with each token's byte span in `text`.

        Returns:
          (ids, starts, ends): ragged int64 [batch, (tokens)] each; `ids` is `tokenize(text)`,
          and bytes `starts` to `ends` (exclusive) of a text are where its token came from.
        """
        words = self.basic_tokenize(text)
        flat, too_long = self._within_limit(words.flat_values)
        ids, piece_starts, piece_ends = self._wordpiece.tokenize_with_offsets(flat)
        # Byte offsets into the normalised word -> its characters; an "[UNK]" for a word
        # over the limit covers the word.
        word_of_piece = ids.value_rowids()
        piece_words = tf.gather(words.flat_values, word_of_piece)
        word_chars = tf.strings.length(words.flat_values, unit="UTF8_CHAR")

        def chars_before(byte_offsets):
            lengths = tf.cast(byte_offsets, tf.int32)
            prefixes = tf.strings.substr(piece_words, tf.zeros_like(lengths), lengths)
            return tf.cast(tf.strings.length(prefixes, unit="UTF8_CHAR"), tf.int64)

        whole = tf.gather(too_long, word_of_piece)
        first = tf.where(
            whole, tf.zeros_like(piece_starts.flat_values), chars_before(piece_starts.flat_values)
        )
        last = (
            tf.where(
                whole,
                tf.cast(tf.gather(word_chars, word_of_piece), tf.int64),
                chars_before(piece_ends.flat_values),
            )
            - 1
        )
        # Positions in the batch's normalised characters, words one after the other.
        word_starts = tf.cumsum(tf.cast(word_chars, tf.int64), exclusive=True)
        first += tf.gather(word_starts, word_of_piece)
        last += tf.gather(word_starts, word_of_piece)
        # The text's characters, each normalised alone: how many normalised characters each gives.
        chars, char_starts = tf.strings.unicode_split_with_offsets(text, "UTF-8", errors="ignore")
        distinct, index = tf.unique(chars.flat_values)
        counts = tf.reduce_sum(tf.strings.length(self._words(distinct), unit="UTF8_CHAR"), axis=1)
        counts = tf.gather(tf.cast(counts, tf.int64), index)
        char_ends = tf.cumsum(counts)
        row_bytes = char_starts.flat_values
        char_bytes = tf.cast(tf.strings.length(chars.flat_values), tf.int64)
        first_char = tf.searchsorted(char_ends, first, side="right")
        last_char = tf.searchsorted(char_ends, last, side="right")
        starts = tf.gather(row_bytes, first_char)
        ends = tf.gather(row_bytes, last_char) + tf.gather(char_bytes, last_char)

        by_text = _merged(words, ids)
        return by_text, by_text.with_flat_values(starts), by_text.with_flat_values(ends)

    def _ascii_chunk_ids(self, chunks):
        """`_chunk_ids` for chunks of printable ASCII only."""
        if self.do_lower_case:
            chunks = tf.strings.lower(chunks)
        return self._ascii_wordpiece.tokenize(chunks)

    def _tokenize(self, text):
        """A [batch] string tensor -> ragged int64 [batch, (tokens)] of WordPiece ids."""
        chunks = self._chunks(text)
        distinct, index = tf.unique(chunks.flat_values)
        is_ascii = tf.strings.regex_full_match(distinct, "[!-~]*")
        ascii_rows, other_rows = tf.where(is_ascii)[:, 0], tf.where(~is_ascii)[:, 0]
        ids = tf.concat(
            [
                self._ascii_chunk_ids(tf.gather(distinct, ascii_rows)),
                self._chunk_ids(tf.gather(distinct, other_rows)),
            ],
            axis=0,
        )
        # Row i of `ids` is distinct chunk `order[i]`.
        order = tf.concat([ascii_rows, other_rows], axis=0)
        index = tf.gather(tf.math.invert_permutation(order), index)
        return _merged(chunks, tf.gather(ids, index))

    def id_tokens(self, ids):
        """The vocab's token of each id: int ids of any shape -> strings of that shape."""
        return tf.gather(self._tokens, ids)

    def _pack(self, text_a, text_b, max_seq_length):
        """`[CLS] a [SEP] b [SEP]` model inputs, as `bert_tf.text.packing.pack_inputs` makes them.

        Rows whose `text_b` tokenizes to nothing are packed as single sequences.

        Returns:
          A dict of int32 [batch, max_seq_length] `input_ids`, `input_mask`, `segment_ids`.
        """
        return pack_ids(
            self.tokenize(text_a), self.tokenize(text_b), max_seq_length, self.cls_id, self.sep_id
        )


def _merged(rows, inner):
    """`rows.with_flat_values(inner).merge_dims(1, 2)`: ragged [batch, (n)] `rows` whose n values
    are the rows of ragged [n, (m)] `inner` -> ragged [batch, (sum of their m)] of `inner`'s values.

    Both row partitions come from TensorFlow's ragged ops, so the merged one is not validated
    again (`merge_dims` adds assertions that it is well formed to every trace).
    """
    splits = tf.gather(inner.row_splits, rows.row_splits)
    return tf.RaggedTensor.from_row_splits(inner.values, splits, validate=False)


def _pair_lengths(len_a, len_b, budget):
    """`bert_tf.text.packing.truncated_pair_lengths` for a batch of rows."""
    excess = len_a + len_b - budget
    fits = excess <= 0
    trim_a_only = len_a - len_b >= excess
    trim_b_only = len_b - len_a >= excess
    balanced_a = (budget + 1) // 2
    new_a = tf.where(fits | trim_b_only, len_a, tf.where(trim_a_only, len_a - excess, balanced_a))
    new_b = tf.where(fits | trim_a_only, len_b, tf.where(trim_b_only, len_b - excess, budget - balanced_a))
    return new_a, new_b


def pack_ids(ids_a, ids_b, max_seq_length, cls_id, sep_id, max_a=None, offsets=None, pad_to_multiple=None):
    """Packs ragged id rows into padded model inputs, like `bert_tf.text.packing.pack_inputs`.

    Each row is `[CLS] a [SEP] b [SEP]`, built directly at its positions of the padded [batch, seq]
    tensors (a few dense ops, rather than ragged concatenations and their validation).

    Args:
      ids_a: Ragged int [batch, (tokens)].
      ids_b: Ragged int [batch, (tokens)]; rows may be empty (single sequences).
      max_seq_length: Length of the packed rows.
      cls_id, sep_id: Ids of `[CLS]` and `[SEP]`.
      max_a: None: a pair too long is truncated longest first (`truncate_seq_pair`). Else
        `ids_a` is cut to `max_a` tokens and `ids_b` to the rest, as the original's SQuAD packs
        a question and the first window of its paragraph (`max_query_length`).
      offsets: None, or `((starts_a, ends_a), (starts_b, ends_b))`, ragged int [batch, (tokens)]
        shaped as `ids_a` and `ids_b` (from `GraphTokenizer.tokenize_with_offsets`): packed
        along as `start_offsets` and `end_offsets`, -1 at `[CLS]`, `[SEP]` and the padding.
      pad_to_multiple: None pads every row to `max_seq_length`. Else the rows are padded to the
        longest packed row of the batch rounded up to a multiple of this, at most
        `max_seq_length`.

    Returns:
      A dict of int32 [batch, seq] `input_ids`, `input_mask`, `segment_ids` (and int64
      `start_offsets`, `end_offsets` with `offsets`), seq `max_seq_length` or, with
      `pad_to_multiple`, the batch's.

    Raises:
      InvalidArgumentError: `max_seq_length` leaves no room for a pair's `[SEP]`s (below 3).
    """
    ids_a, ids_b = tf.cast(ids_a, tf.int32), tf.cast(ids_b, tf.int32)
    max_seq_length = tf.cast(max_seq_length, tf.int64)
    len_a, len_b = tf.cast(ids_a.row_lengths(), tf.int64), tf.cast(ids_b.row_lengths(), tf.int64)
    has_b = len_b > 0
    if max_a is None:
        pair_a, pair_b = _pair_lengths(len_a, len_b, max_seq_length - 3)
    else:
        len_a = tf.minimum(len_a, max_a)
        pair_a, pair_b = len_a, tf.minimum(len_b, tf.maximum(max_seq_length - 3 - len_a, 0))
    new_a = tf.where(has_b, pair_a, tf.minimum(len_a, max_seq_length - 2))
    new_b = tf.where(has_b, pair_b, tf.zeros_like(len_b))
    # A pair whose `b` truncation left empty is a single sequence, as the original's `if tokens_b`
    # after `_truncate_seq_pair` (at max_seq_length 3 or 4); SQuAD's packing always closes its window.
    b_sep = tf.cast(new_b > 0 if max_a is None else has_b, tf.int64)
    segment_b = new_b + b_sep
    fits = tf.debugging.assert_non_negative(
        segment_b, message="max_seq_length leaves no room for the [SEP]s of a pair"
    )
    with tf.control_dependencies([fits]):
        # The tokens of `a` and `b` taken (a negative length takes none).
        taken_a = tf.maximum(new_a, 0)
        taken_b = tf.maximum(new_b, 0)
    sep_at = 1 + taken_a  # the first [SEP]
    lengths = sep_at + 1 + taken_b + b_sep
    seq_length = max_seq_length
    if pad_to_multiple is not None:
        longest = tf.reduce_max(tf.concat([lengths, [1]], axis=0))
        seq_length = tf.minimum(-(-longest // pad_to_multiple) * pad_to_multiple, max_seq_length)
    positions = tf.range(seq_length)[None, :]  # [1, seq], against [batch, 1] row by row
    b_at = (sep_at + 1)[:, None]
    in_a = (positions >= 1) & (positions < sep_at[:, None])
    in_b = (positions >= b_at) & (positions < b_at + taken_b[:, None])
    is_cls = tf.equal(positions, 0)
    is_sep = tf.equal(positions, sep_at[:, None]) | (
        tf.equal(positions, b_at + taken_b[:, None]) & (b_sep[:, None] > 0)
    )
    # Where each position's token is in `concat([a's values, b's values, [fill]])`.
    starts_a = tf.cast(ids_a.row_starts(), tf.int64)[:, None]
    starts_b = tf.cast(ids_b.row_starts(), tf.int64)[:, None]
    size_a = tf.size(ids_a.flat_values, out_type=tf.int64)
    fill_at = size_a + tf.size(ids_b.flat_values, out_type=tf.int64)
    index = tf.where(
        in_a, starts_a + positions - 1, tf.where(in_b, size_a + starts_b + positions - b_at, fill_at)
    )

    def packed(rows_a, rows_b, cls_value, sep_value, fill):
        """`[CLS] a [SEP] b [SEP]` of the truncated rows, with the given values at the specials
        and `fill` after them."""
        dtype = rows_a.dtype
        fill = tf.fill([1], tf.constant(fill, dtype))
        values = tf.concat([rows_a.flat_values, rows_b.flat_values, fill], axis=0)
        specials = tf.where(is_cls, tf.constant(cls_value, dtype), tf.constant(sep_value, dtype))
        return tf.where(is_cls | is_sep, specials, tf.gather(values, index))

    inputs = {
        "input_ids": packed(ids_a, ids_b, cls_id, sep_id, 0),
        "input_mask": tf.sequence_mask(lengths, seq_length, dtype=tf.int32),
        "segment_ids": tf.cast(
            (positions >= (new_a + 2)[:, None]) & (positions < (new_a + 2 + segment_b)[:, None]), tf.int32
        ),
    }
    if offsets is not None:
        (starts_a, ends_a), (starts_b, ends_b) = offsets
        for name, rows_a, rows_b in (("start_offsets", starts_a, starts_b), ("end_offsets", ends_a, ends_b)):
            inputs[name] = packed(tf.cast(rows_a, tf.int64), tf.cast(rows_b, tf.int64), -1, -1, -1)
    return inputs
