"""Writes `tests/data/hf_offsets/{uncased,cased}.json`: Hugging Face's fast BertTokenizer's tokens
and `offset_mapping` on the tokenizer's test corpora, the independent reference that
`tests/test_offsets.py` checks `tokenize_with_offsets` against (bert_tf needs no transformers).

Run once, by hand, from the repository root, with `../shared` beside it, in a separate
environment that has transformers (not bert_tf's):

    python3 -m venv /tmp/hfenv
    /tmp/hfenv/bin/pip install torch==2.13.0 transformers==5.24.0
    /tmp/hfenv/bin/python tests/data/make_hf_offsets.py

The vocabulary is the shared fixture's `google_tiny/vocab.txt`, read as lower-cased and as cased.
transformers' WordPiece gives up on words of more than 100 characters, the original on more than
200, so the backend's limit is set to 200 before tokenizing. The texts: every line the original
tokenized for the shared fixture (`tokenization/sample_text.jsonl`), then `TEXTS` below (the
targeted cases of the tokenizer tests and more of the same kinds: accents composed and
decomposed, CJK, control and format characters inside and at the edges of words, words at and
over the length limit, punctuation of every kind). Each file holds
`{"do_lower_case", "rows": [{"text", "tokens", "offsets"}]}`, offsets as `[start, end)` code
points.
"""

import json
import os

from transformers import BertTokenizerFast

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(REPO), "shared", "fixtures")
VOCAB = os.path.join(FIXTURES, "google_tiny", "vocab.txt")
OUT = os.path.join(REPO, "tests", "data", "hf_offsets")

TEXTS = [
    "",
    "   \t\n ",
    "Hello, World!",
    "BERT模型很好",
    "BERT模型很好 and 東京",
    "ひらがな",
    "ひらがな カタカナ 한국어",
    "Héllo Naïve CAFÉ",
    "He\u0301llo Nai\u0308ve CAFE\u0301",
    "a\x00b\ufffdc\u200bd\u200de\x07f",
    "\x00lead \u200btrail\u200b \x07 \ufffdboth\x00",
    "one\ttwo\u00a0three\u3000four",
    "one\ttwo\u00a0three\u3000four\r\nfive",
    "a¿b«c»d$e^f`g",
    "[CLS] hi [SEP]",
    "[CLS] hi [SEP] [MASK]",
    "unaffable",
    "unaffable hello unaffable.",
    "x" * 201,
    "x" * 250,
    "x" * 200,
    "é" * 200,
    "é" * 201,
    "before " + "y" * 230 + " after",
    "x\u2028y\u2029z",
    "İstanbul ß ǅ",
    "İstanbul ΣΟΦΟΣ ß ǅ",
    "\u0300abc",
    "https://example.com/a?b=c&d=e#f",
    "emoji 😀👍🏽 flags 🇫🇷",
    "Привет, мир!",
    "مرحبا بالعالم",
    "ＦＵＬＬ ｗｉｄｔｈ １２３",
    "tab\tand\x0bvertical\x0cform\x1cfile",
    "\U00020000\U0002a6d6 \uf900",
    "Ångström's façade—naïve “quotes” … and ‘more’",
    "Crème brûlée, jalapeño, Zürich.",
    "ÀÉÎÕÜ àéîõü ñÑ çÇ",
    "The 1990s' U.S.A. e-mail (re: #42) cost $3.50!!",
    "don't won't y'all",
    "東京タワーは333メートルです。",
    "中文字符,标点。混合English",
    "ﬁne ﬂow ligatures",
    "x\u0301\u0302y q\u0327\u0301z",
    "a\u00adb soft\u00adhyphen",
    "  leading and trailing spaces  ",
    "multiple   spaces\t\ttabs\n\nnewlines",
]


def rows(tokenizer, texts):
    out = []
    for text in texts:
        encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        out.append(
            {
                "text": text,
                "tokens": tokenizer.convert_ids_to_tokens(encoding["input_ids"]),
                "offsets": [list(pair) for pair in encoding["offset_mapping"]],
            }
        )
    return out


def main():
    with open(os.path.join(FIXTURES, "tokenization", "sample_text.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f] + TEXTS
    os.makedirs(OUT, exist_ok=True)
    for name, do_lower_case in (("uncased", True), ("cased", False)):
        tokenizer = BertTokenizerFast(VOCAB, do_lower_case=do_lower_case)
        tokenizer.backend_tokenizer.model.max_input_chars_per_word = 200
        with open(os.path.join(OUT, f"{name}.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": do_lower_case, "rows": rows(tokenizer, texts)}, f, ensure_ascii=False)
            f.write("\n")


if __name__ == "__main__":
    main()
