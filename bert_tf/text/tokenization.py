"""The original's `FullTokenizer` (basic tokenization, then greedy WordPiece), same API, same output.

The rules, from the original code (BUILD_NOTES.md, "Tokenizer", lists the ones easy to get wrong):
1. Clean: drop NUL, U+FFFD and control characters (categories Cc and Cf, but not tab, newline,
   carriage return); whitespace (space, tab, newline, carriage return, category Zs) becomes a
   space.
2. Put spaces around CJK ideographs, so each is a word of its own.
3. Split on whitespace (Python's `str.split()`).
4. With `do_lower_case`: `str.lower()`, then NFD, then drop combining marks (category Mn).
5. Split off every punctuation character: ASCII non-letters/non-digits and category P*.
6. WordPiece each word greedily, longest match first, continuations prefixed "##"; a word of
   more than 200 characters, or one that cannot be covered, becomes "[UNK]".

Everything after step 2 depends only on the word, so words are memoised: a corpus repeats its
words, and the cache makes the tokenizer faster without changing its output.

`tokenize_with_offsets` gives each token's span in the text as given, in characters (code
points), end exclusive: a token spans from the character its first character came from to the one
its last character came from. So a word piece covers its own characters, an "[UNK]" for a whole
word covers the word, a character that lower-casing expands or NFD decomposes counts whole for
each token it reaches, and characters dropped by cleaning or accent stripping are covered only
between two characters of the same token (Hugging Face's fast BertTokenizer's `offset_mapping`
follows the same rules). The spans come from the same steps as the tokens: the words' cleaned
characters keep their positions, and the normalised word is mapped back to them character by
character.

Setting an attribute the output depends on (`do_lower_case`, `vocab`, `unk_token`,
`max_input_chars_per_word`, a `FullTokenizer`'s `basic_tokenizer` or `wordpiece_tokenizer`)
empties the memos that depend on it; changing the vocabulary dict in place does not.
"""

import collections
import re
import unicodedata

_CACHE_LIMIT = 1 << 20

# The original's CJK Unified Ideographs blocks (not Hiragana, Katakana or Hangul).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Step 1 for ASCII text, as one `str.translate` table: controls dropped, \t \n \r to spaces.
_ASCII_CLEAN = dict.fromkeys(list(range(32)) + [127])
_ASCII_CLEAN.update({ord(c): " " for c in "\t\n\r"})

# Google's released checkpoints whose directory names say how they were cased.
_LOWER_CASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)


def released_model_casing(init_checkpoint):
    """Whether the released Google checkpoint `init_checkpoint` names was lower-cased: True or
    False for a checkpoint under a directory named like Google's releases
    (`.../uncased_L-12_H-768_A-12/bert_model.ckpt`), None for any other path.

    Returns:
      (the casing or None, the release's name or None).
    """
    match = re.match(r"^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint or "")
    if match is None:
        return None, None
    model_name = match.group(1)
    if model_name in _LOWER_CASED_MODELS:
        return True, model_name
    if model_name in _CASED_MODELS:
        return False, model_name
    return None, model_name


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Raises if `do_lower_case` contradicts the name of a released Google checkpoint.

    Only checkpoints under a directory named like Google's releases
    (`.../uncased_L-12_H-768_A-12/bert_model.ckpt`) are checked; anything else passes.

    Raises:
      ValueError: The flag and the checkpoint disagree; the message says which flag to pass.
    """
    wanted, model_name = released_model_casing(init_checkpoint)
    if wanted is None or bool(do_lower_case) == wanted:
        return
    kind = "lower-cased" if wanted else "cased"
    raise ValueError(
        f"--do_lower_case={do_lower_case} does not match --init_checkpoint={init_checkpoint}: "
        f"{model_name} is a {kind} model, so pass --do_lower_case={wanted} to tokenize as it "
        "was pretrained."
    )


def convert_to_unicode(text):
    """Returns `text` as `str`; bytes are decoded as UTF-8, invalid bytes dropped."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError(f"unsupported string type: {type(text)}")


def printable_text(text):
    """Returns `text` as a `str` suitable for printing or logging."""
    return convert_to_unicode(text)


def load_vocab(vocab_file):
    """Reads a vocab file (a local path or one like `gs://...`), one token a line, into an
    ordered `{token: id}`.

    As in the original, every line counts (the id is the line number) and a token seen twice
    keeps its first position in the order but takes the later id.

    Raises:
      ValueError: The file cannot be read; the message names it.
    """
    from bert_tf.files import open_file, original_line  # here, to keep this module's names the original's

    vocab = collections.OrderedDict()
    try:
        with open_file(vocab_file, "rb") as reader:
            for index, line in enumerate(reader):
                vocab[convert_to_unicode(original_line(line)).strip()] = index
    except OSError as e:
        raise ValueError(f"{vocab_file}: cannot read the vocab file ({e.strerror})") from None
    if not vocab:
        raise ValueError(f"{vocab_file}: the vocab file is empty")
    return vocab


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (tokens to ids, or ids to tokens); an unknown item raises `KeyError`."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """The ids of `tokens` in `vocab` (`{token: id}`, as `load_vocab` returns it).

    Raises:
      KeyError: A token is not in `vocab` (tokens from `FullTokenizer.tokenize` always are).
    """
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """The tokens of `ids` in `inv_vocab` (`{id: token}`, as `FullTokenizer.inv_vocab`).

    Raises:
      KeyError: An id is not in `inv_vocab`.
    """
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Splits on whitespace after stripping it from both ends."""
    return text.split()


def _is_whitespace(char):
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char):
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    return any(low <= cp <= high for low, high in _CJK_RANGES)


class _Memo(dict):
    """`memo[key]` is `make(key)`, computed on the first lookup only.

    A hit is a plain dict lookup; a miss calls `__missing__`. The memo is emptied when it holds
    `limit` entries: text keeps reusing its frequent words, so they are back soon after.
    """

    def __init__(self, make, limit=_CACHE_LIMIT):
        super().__init__()
        self._make = make
        self._limit = limit

    def __missing__(self, key):
        if len(self) >= self._limit:
            self.clear()
        value = self[key] = self._make(key)
        return value


class _Setting:
    """An attribute of a `_Memoising` tokenizer that its memo depends on: setting it empties the
    memo. The tokenizer's own code reads the value as `_<name>`, without this descriptor."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, tokenizer, owner=None):
        return self if tokenizer is None else getattr(tokenizer, self.slot)

    def __set__(self, tokenizer, value):
        setattr(tokenizer, self.slot, value)
        tokenizer.forget()


class _Part(_Setting):
    """A sub-tokenizer (a `_Memoising` one): a change of its settings empties the memo of the
    tokenizer it is part of too."""

    def __set__(self, tokenizer, value):
        value.listeners.append(tokenizer.forget)
        super().__set__(tokenizer, value)


class _Memoising:
    """A tokenizer that memoises `make(word)` (in `_memo`) on its `_Setting` attributes."""

    def __init__(self, make):
        self._memos = []
        self._memo = self._memoise(make)
        # Called after the memo is emptied: the forgetting of tokenizers this one is part of.
        self.listeners = []

    def _memoise(self, make):
        """A `_Memo` of `make` that `forget` empties too."""
        memo = _Memo(make)
        self._memos.append(memo)
        return memo

    def forget(self):
        """Empties the memos, and those of the tokenizers this one is part of."""
        for memo in self._memos:
            memo.clear()
        for listener in self.listeners:
            listener()


class BasicTokenizer(_Memoising):
    """Steps 1-5: cleaning, CJK splitting, lower-casing and accent stripping, punctuation."""

    do_lower_case = _Setting()

    def __init__(self, do_lower_case=True):
        """Args:
        do_lower_case: Lower-case and strip accents (uncased models).
        """
        super().__init__(self.tokenize_word_uncached)
        self._span_memo = self._memoise(self._word_spans)
        self._normalized_lengths = self._memoise(lambda char: len(self._normalize(char)))
        self.do_lower_case = do_lower_case
        self._char_replacements = _Memo(self._replace_char)

    def tokenize(self, text):
        """Returns the basic tokens of `text` (a list of `str`)."""
        tokens = []
        for word in self.split_words(text):
            tokens.extend(self.tokenize_word(word))
        return tokens

    def tokenize_with_offsets(self, text):
        """`tokenize(text)` with each token's character span in `text`.

        Returns:
          (tokens, starts, ends): lists of equal length; `text[starts[i]:ends[i]]` is where
          `tokens[i]` came from (ends exclusive, in code points of `text` as `str`).
        """
        tokens, starts, ends = [], [], []
        for word, positions in self.split_words_with_offsets(text):
            for token, origins in self._spans[word]:
                tokens.append(token)
                starts.append(positions[origins[0]])
                ends.append(positions[origins[-1]] + 1)
        return tokens, starts, ends

    def split_words(self, text):
        """Steps 1-3: the whitespace-separated words of the cleaned, CJK-padded text."""
        text = convert_to_unicode(text)
        if text.isascii():
            return text.translate(_ASCII_CLEAN).split()
        replacements = self._char_replacements
        return "".join([replacements[char] for char in text]).split()

    def split_words_with_offsets(self, text):
        """`split_words(text)` as `(word, positions)` pairs: `positions[i]` is where in `text`
        (a code point index) the word's character `i` is; dropped characters have none."""
        text = convert_to_unicode(text)
        replacements = self._char_replacements
        words, chars, positions = [], [], []
        for position, char in enumerate(text):
            replacement = replacements[char]
            if replacement == char and not char.isspace():
                chars.append(char)
                positions.append(position)
            elif replacement:
                # A separator (whitespace, or U+2028/U+2029, which `str.split` splits at) or a
                # CJK ideograph, a word of its own.
                if chars:
                    words.append(("".join(chars), positions))
                    chars, positions = [], []
                if not replacement.isspace():
                    words.append((char, [position]))
        if chars:
            words.append(("".join(chars), positions))
        return words

    @staticmethod
    def _replace_char(char):
        """A character's replacement in steps 1 and 2."""
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            return ""
        if _is_whitespace(char):
            return " "
        if _is_chinese_char(cp):
            return f" {char} "
        return char

    def tokenize_word(self, word):
        """Steps 4-5 for one word from `split_words`; memoised."""
        return self._memo[word]

    def tokenize_word_uncached(self, word):
        """`tokenize_word` without the memo (for callers that memoise a later step)."""
        return self._split(self._normalize(word))

    def _normalize(self, word):
        """Step 4 (with `do_lower_case`)."""
        return self._strip_accents(word.lower()) if self._do_lower_case else word

    def _split(self, normalized):
        """Step 5 on a normalised word."""
        return " ".join(self._split_on_punctuation(normalized)).split()

    @property
    def _spans(self):
        """`{word: [(token, origins)]}`, memoised: the basic tokens of a word from `split_words`,
        each with the index in the word of the character each of its characters came from."""
        return self._span_memo

    def _word_spans(self, word):
        normalized = self._normalize(word)
        # The word's character each normalised character came from: lower-casing and NFD act
        # on each character alone (but for the final sigma and the order of combining marks,
        # which change no count), so each character gives as many as it gives alone.
        if word.isascii() or not self._do_lower_case:
            origins = range(len(word))
        else:
            counts = self._normalized_lengths
            origins = [index for index, char in enumerate(word) for _ in range(counts[char])]
        spans, position = [], 0
        for token in self._split(normalized):
            start = normalized.index(token, position)
            position = start + len(token)
            spans.append((token, origins[start:position]))
        return spans

    @staticmethod
    def _strip_accents(text):
        if text.isascii():
            return text
        return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")

    @staticmethod
    def _split_on_punctuation(text):
        pieces, current = [], []
        for char in text:
            if _is_punctuation(char):
                if current:
                    pieces.append("".join(current))
                    current = []
                pieces.append(char)
            else:
                current.append(char)
        if current:
            pieces.append("".join(current))
        return pieces


class WordpieceTokenizer(_Memoising):
    """Step 6: greedy longest-match-first WordPiece."""

    vocab = _Setting()
    unk_token = _Setting()
    max_input_chars_per_word = _Setting()

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        """Args:
        vocab: `{token: id}`; continuation pieces are spelt with a "##" prefix.
        unk_token: The token for words that cannot be covered or are too long.
        max_input_chars_per_word: Longer words become `unk_token`.
        """
        super().__init__(self._greedy_pieces)
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        """WordPieces of every whitespace-separated word of `text` (already basic-tokenized)."""
        output = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self.tokenize_word(word))
        return output

    def tokenize_word(self, word):
        """The WordPieces of one word; memoised."""
        return self._memo[word]

    def tokenize_with_offsets(self, text):
        """`tokenize(text)` with each piece's character span in `text`.

        Returns:
          (tokens, starts, ends): lists of equal length, ends exclusive, in code points of
          `text` as `str`. A piece covers its own characters; `unk_token` for a word covers the
          word.
        """
        tokens, starts, ends = [], [], []
        for match in re.finditer(r"\S+", convert_to_unicode(text)):
            for piece, start, end in self.word_spans(match.group()):
                tokens.append(piece)
                starts.append(match.start() + start)
                ends.append(match.start() + end)
        return tokens, starts, ends

    def word_spans(self, word):
        """`tokenize_word(word)` as `(piece, start, end)` triples, spans of characters of `word`."""
        pieces = self._memo[word]
        if pieces == [self._unk_token]:
            return [(pieces[0], 0, len(word))]
        spans, start = [], 0
        for index, piece in enumerate(pieces):
            end = start + len(piece) - (2 if index else 0)
            spans.append((piece, start, end))
            start = end
        return spans

    def _greedy_pieces(self, word):
        if len(word) > self._max_input_chars_per_word:
            return [self._unk_token]
        vocab = self._vocab
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in vocab:
                    break
            else:
                return [self._unk_token]
            pieces.append(piece)
            start = end
        return pieces


class FullTokenizer(_Memoising):
    """Basic tokenization followed by WordPiece, with the original's API."""

    basic_tokenizer = _Part()
    wordpiece_tokenizer = _Part()

    def __init__(self, vocab_file, do_lower_case=True):
        """Args:
        vocab_file: The model's `vocab.txt`.
        do_lower_case: True for uncased models, False for cased ones.
        """
        # Whole words to their WordPieces: one lookup per word once the memo is warm.
        super().__init__(self._pieces_of_word)
        self._span_memo = self._memoise(self._word_spans)
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def _pieces_of_word(self, word):
        return [
            piece
            for token in self._basic_tokenizer.tokenize_word_uncached(word)
            for piece in self._wordpiece_tokenizer.tokenize_word(token)
        ]

    def tokenize(self, text):
        """The WordPiece tokens of `text`."""
        word_pieces = self._memo
        tokens = []
        for word in self._basic_tokenizer.split_words(text):
            tokens.extend(word_pieces[word])
        return tokens

    def tokenize_with_offsets(self, text):
        """`tokenize(text)` with each token's character span in `text`.

        Args:
          text: `str`, or UTF-8 `bytes` (decoded as `tokenize` decodes them; the offsets are
            then into the decoded `str`).

        Returns:
          (tokens, starts, ends): lists of equal length; `tokens` is `tokenize(text)`, and
          `text[starts[i]:ends[i]]` is where `tokens[i]` came from (code point indices, ends
          exclusive). A word piece covers its own characters, an "[UNK]" for a word the word.
        """
        word_spans = self._span_memo
        tokens, starts, ends = [], [], []
        for word, positions in self._basic_tokenizer.split_words_with_offsets(text):
            for piece, start, end in word_spans[word]:
                tokens.append(piece)
                starts.append(positions[start])
                ends.append(positions[end - 1] + 1)
        return tokens, starts, ends

    def _word_spans(self, word):
        """The word's WordPieces as `(piece, start, end)`, spans of the word's characters."""
        return [
            (piece, origins[start], origins[end - 1] + 1)
            for token, origins in self._basic_tokenizer._spans[word]
            for piece, start, end in self._wordpiece_tokenizer.word_spans(token)
        ]

    def convert_tokens_to_ids(self, tokens):
        return convert_tokens_to_ids(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        return convert_ids_to_tokens(self.inv_vocab, ids)
