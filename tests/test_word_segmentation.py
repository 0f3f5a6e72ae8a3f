"""Chinese whole-word masking (`--word_segmenter`): the words a segmenter marks, and the pretraining
data made with them, checked against the segmenter's own words of the corpus."""

import logging
import os
import sys

import jieba
import pytest
import tensorflow as tf

from bert_tf.data import PretrainingDataOptions, create_pretraining_data, make_pretraining_dataset, shards
from bert_tf.text.tokenization import BasicTokenizer, FullTokenizer
from bert_tf.text.word_segmentation import load_word_segmenter, word_continuations
from tests import pretraining_fixtures as pf
from tests import word_segmenters

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZH_SAMPLE = os.path.join(REPO, "tests", "data", "zh_sample.txt")
ORIGINAL_WWM = os.path.join(REPO, "tests", "data", "original_wwm_s7.tfrecord")
DEMO = os.path.join(REPO, "tools", "demo_data")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def zh_vocab(tmp_path_factory):
    """A vocabulary of the sample's characters; ASCII words are split into single-character
    pieces ("2018" -> 2 ##0 ##1 ##8), so "##" pieces and segmenter words meet."""
    basic = BasicTokenizer(do_lower_case=True)
    with open(ZH_SAMPLE, encoding="utf-8") as f:
        tokens = {token for line in f for token in basic.tokenize(line)}
    pieces = {token for token in tokens if not (token.isascii() and token.isalnum())}
    for token in tokens - pieces:
        pieces.update(token)
        pieces.update("##" + char for char in token[1:])
    path = tmp_path_factory.mktemp("zh") / "vocab.txt"
    path.write_text("\n".join(SPECIAL + sorted(pieces)) + "\n", encoding="utf-8")
    return str(path)


def zh_options(vocab, **overrides):
    values = dict(
        vocab_file=vocab,
        do_lower_case=True,
        do_whole_word_mask=True,
        word_segmenter="jieba",
        max_seq_length=64,
        max_predictions_per_seq=10,
        masked_lm_prob=0.15,
        random_seed=5,
        dupe_factor=3,
        short_seq_prob=0.1,
    )
    return PretrainingDataOptions(**dict(values, **overrides))


def reference_documents(vocab, segment):
    """The sample's documents as lists of `(id, word)`: each token with the number of the
    segmenter's word its first character is in (numbered over the whole corpus)."""
    tokenizer = FullTokenizer(vocab, do_lower_case=True)
    documents, document, number = [], [], 0
    with open(ZH_SAMPLE, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                documents.append(document)
                document = []
                continue
            owner, position = {}, 0
            for word in segment(line):
                start = line.index(word, position)
                owner.update((char, number) for char in range(start, start + len(word)))
                position = start + len(word)
                number += 1
            tokens, starts, _ = tokenizer.tokenize_with_offsets(line)
            document.extend((tokenizer.vocab[t], owner[s]) for t, s in zip(tokens, starts, strict=True))
    documents.append(document)
    return [d for d in documents if d]


def check_whole_words(records, documents):
    """Asserts that in every record each segmenter word is masked whole or not at all.

    A record's segments A and B, their masked tokens restored, are runs of a document's tokens:
    the check holds if it holds at one place where the run occurs in the corpus.

    Returns:
      The number of masked words of two or more tokens (all records).
    """
    stream = "\0".join("".join(chr(token_id + 1) for token_id, _ in d) for d in documents)
    words = [word for d in documents for word in [*(w for _, w in d), None]]
    masked_words = 0
    for record in records:
        length = sum(record["input_mask"])
        ids = record["input_ids"][:length]
        masked = set()
        for position, label, weight in zip(
            record["masked_lm_positions"], record["masked_lm_ids"], record["masked_lm_weights"], strict=True
        ):
            if weight:
                ids[position] = label
                masked.add(position)
        segments = record["segment_ids"][:length]
        a_end = segments.index(1) - 1 if 1 in segments else length - 1
        for first, last in ((1, a_end), (a_end + 1, length - 1)):
            run = "".join(chr(token_id + 1) for token_id in ids[first:last])
            consistent = []
            start = stream.find(run)
            while start >= 0 and run:
                fates = {}
                for k in range(len(run)):
                    fates.setdefault(words[start + k], set()).add(first + k in masked)
                consistent.append(all(len(fate) == 1 for fate in fates.values()))
                start = stream.find(run, start + 1)
            assert not run or any(consistent), (record, first, last)
            if run:
                sizes = {}
                for k in range(len(run)):
                    if first + k in masked:
                        key = words[stream.find(run) + k]
                        sizes[key] = sizes.get(key, 0) + 1
                masked_words += sum(size > 1 for size in sizes.values())
    return masked_words


def masked_share(records):
    tokens = sum(sum(r["input_mask"]) for r in records)
    return sum(sum(r["masked_lm_weights"]) for r in records) / tokens


@pytest.fixture(scope="module")
def jieba_exact(zh_vocab, tmp_path_factory):
    output = str(tmp_path_factory.mktemp("exact") / "zh.tfrecord")
    summary = create_pretraining_data(ZH_SAMPLE, output, zh_options(zh_vocab))
    return output, summary


def test_a_word_mixing_cjk_with_other_characters_is_one_word(zh_vocab):
    line = "她买了一件T恤，2018年去唱卡拉OK。"
    tokenizer = FullTokenizer(zh_vocab, do_lower_case=True)
    tokens, starts, _ = tokenizer.tokenize_with_offsets(line)
    assert " ".join(tokens) == "她 买 了 一 件 t 恤 ， 2 ##0 ##1 ##8 年 去 唱 卡 拉 o ##k 。"
    words = ["她", "买", "了", "一件", "T恤", "，", "2018年", "去", "唱", "卡拉OK", "。"]
    # 件 continues 一件; 恤 continues T恤; 0, 1, 8 and 年 continue 2018年; 拉, o and k 卡拉OK.
    expected = "0 0 0 0 1 0 1 0 0 1 1 1 1 0 0 0 1 1 1 0"
    assert word_continuations(line, starts, words) == [flag == "1" for flag in expected.split()]
    # Text between the words belongs to none; a token starting inside a word continues it.
    assert word_continuations("ab cd", [0, 1, 3, 4], ["ab", "cd"]) == [False, True, False, True]
    assert word_continuations("ab cd", [0, 3], ["ab", " ", "cd"]) == [False, False]
    # jieba's default cut keeps T恤 whole (and cuts 2018 | 年, 卡拉 | OK).
    assert "T恤" in jieba.lcut(line)


def test_jieba_masks_whole_words_at_the_asked_rate(jieba_exact, zh_vocab):
    output, summary = jieba_exact
    records = pf.read_records(output)
    assert len(records) == summary.instances > 100
    documents = reference_documents(zh_vocab, jieba.lcut)
    assert check_whole_words(records, documents) > 100
    assert abs(masked_share(records) - 0.15) <= 0.03
    # The written ids are the vocabulary's, unmarked.
    vocab_size = len(FullTokenizer(zh_vocab).vocab)
    assert all(0 <= i < vocab_size for r in records for i in r["input_ids"] + r["masked_lm_ids"])


def test_jieba_output_parses_with_make_pretraining_dataset(jieba_exact):
    output, summary = jieba_exact
    dataset = make_pretraining_dataset(output, 16, 64, 10, is_training=False, drop_remainder=False)
    batches = list(dataset.as_numpy_iterator())
    assert sum(len(b["input_ids"]) for b in batches) == summary.instances
    assert all(b["input_ids"].shape[1] == 64 and b["masked_lm_ids"].shape[1] == 10 for b in batches)
    assert all((b["input_ids"] >= 0).all() for b in batches)


def test_exact_mode_is_reproducible_for_a_seed(jieba_exact, zh_vocab, tmp_path):
    output, _ = jieba_exact
    again, other_seed = str(tmp_path / "again"), str(tmp_path / "seed6")
    create_pretraining_data(ZH_SAMPLE, again, zh_options(zh_vocab))
    create_pretraining_data(ZH_SAMPLE, other_seed, zh_options(zh_vocab, random_seed=6))
    assert read_bytes(again) == read_bytes(output)
    assert read_bytes(other_seed) != read_bytes(output)


def test_scale_mode_workers_segment_reproducibly(zh_vocab, tmp_path):
    """The spawned workers' shards are the ones this process makes from the same plan."""
    options = zh_options(zh_vocab)
    prefix = str(tmp_path / "zh")
    summary = create_pretraining_data(ZH_SAMPLE, prefix, options, num_workers=1, shard_size_mb=0.003)
    plan = shards.plan_scale_mode([ZH_SAMPLE], prefix, options, 0.003)
    assert len(plan) == len(summary.output_files) >= 2
    maker = shards.ShardMaker(options, exact=False)
    for index, (ranges, path) in enumerate(zip(plan, summary.output_files, strict=True)):
        records, _ = maker.make_shard(index, ranges)
        assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == records
    records = [r for path in summary.output_files for r in pf.read_records(path)]
    assert check_whole_words(records, reference_documents(zh_vocab, jieba.lcut)) > 50
    assert abs(masked_share(records) - 0.15) <= 0.03


def test_a_module_function_segmenter_in_spawned_workers(zh_vocab, tmp_path):
    name = "tests.word_segmenters:character_pairs"
    assert load_word_segmenter(name) is word_segmenters.character_pairs
    options = zh_options(zh_vocab, word_segmenter=name)
    summary = create_pretraining_data(
        ZH_SAMPLE, str(tmp_path / "pairs"), options, num_workers=1, shard_size_mb=0.003
    )
    records = [r for path in summary.output_files for r in pf.read_records(path)]
    documents = reference_documents(zh_vocab, word_segmenters.character_pairs)
    assert check_whole_words(records, documents) > 100
    # jieba's words are not pairs: its check fails on this output.
    with pytest.raises(AssertionError):
        check_whole_words(records, reference_documents(zh_vocab, jieba.lcut))


def test_beams_workers_load_the_segmenter_by_its_name(zh_vocab, tmp_path):
    """Beam ships the DoFn pickled, its options holding the segmenter's name; a worker's
    `setup` loads it. (Skipped only without the `beam` extra, which `make install` installs.)"""
    beam_pipeline = pytest.importorskip("bert_tf.data.beam_pipeline")
    from apache_beam.internal import pickler

    options = zh_options(zh_vocab, word_segmenter="tests.word_segmenters:character_pairs")
    fn = pickler.loads(pickler.dumps(beam_pipeline.MakeShardFn(options)))
    fn.setup()
    plan = shards.plan_scale_mode([ZH_SAMPLE], str(tmp_path / "zh"), options, 0.003)
    path = str(tmp_path / "beam.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for shard in enumerate(plan):
            for record in fn.process(shard):
                writer.write(record)
    records = pf.read_records(path)
    assert check_whole_words(records, reference_documents(zh_vocab, word_segmenters.character_pairs)) > 100
    assert abs(masked_share(records) - 0.15) <= 0.03


def test_none_is_the_originals_whole_word_masking(tmp_path):
    output = str(tmp_path / "wwm.tfrecord")
    options = PretrainingDataOptions(
        vocab_file=os.path.join(DEMO, "vocab.txt"),
        do_whole_word_mask=True,
        word_segmenter="none",
        max_seq_length=64,
        max_predictions_per_seq=10,
        random_seed=7,
        dupe_factor=2,
    )
    create_pretraining_data(os.path.join(DEMO, "sample_text.txt"), output, options)
    assert read_bytes(output) == read_bytes(ORIGINAL_WWM)


def test_without_whole_word_masking_the_segmenter_changes_nothing(zh_vocab, tmp_path, caplog):
    output = str(tmp_path / "out.tfrecord")
    options = PretrainingDataOptions(**dict(pf.FIXTURE_ARGS, word_segmenter="jieba"))
    with caplog.at_level(logging.WARNING):
        create_pretraining_data(pf.SAMPLE_TEXT, output, options)
    assert read_bytes(output) == read_bytes(os.path.join(pf.DATA_DIR, "sample_s12345.tfrecord"))
    assert "--word_segmenter=jieba changes nothing without --do_whole_word_mask" in caplog.text
    # On Chinese text too: the same bytes as without a segmenter.
    plain, segmented = str(tmp_path / "plain"), str(tmp_path / "segmented")
    create_pretraining_data(
        ZH_SAMPLE, plain, zh_options(zh_vocab, do_whole_word_mask=False, word_segmenter="none")
    )
    create_pretraining_data(ZH_SAMPLE, segmented, zh_options(zh_vocab, do_whole_word_mask=False))
    assert read_bytes(plain) == read_bytes(segmented)


@pytest.mark.parametrize(
    "name, message",
    [
        ("nosuchmodule_zh:cut", "--word_segmenter=nosuchmodule_zh:cut: cannot import nosuchmodule_zh"),
        ("tests.word_segmenters:missing", "tests.word_segmenters has no function missing"),
        ("tests.word_segmenters:NOT_CALLABLE", "tests.word_segmenters has no function NOT_CALLABLE"),
        ("ltp", "--word_segmenter=ltp: give none, jieba or module:function"),
        ("a:b:c", "--word_segmenter=a:b:c: give none, jieba or module:function"),
    ],
)
def test_a_bad_segmenter_name_is_one_line_and_writes_nothing(zh_vocab, tmp_path, name, message):
    with pytest.raises(ValueError) as error:
        create_pretraining_data(ZH_SAMPLE, str(tmp_path / "out"), zh_options(zh_vocab, word_segmenter=name))
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    assert os.listdir(tmp_path) == []


def test_missing_jieba_names_the_zh_extra(zh_vocab, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # `import jieba` raises ImportError
    with pytest.raises(ValueError, match=r"^--word_segmenter=jieba needs jieba: pip install -e '\.\[zh\]'"):
        create_pretraining_data(ZH_SAMPLE, str(tmp_path / "out"), zh_options(zh_vocab))
    assert os.listdir(tmp_path) == []


def test_words_that_are_not_the_line_name_the_file_and_line(zh_vocab, tmp_path):
    name = "tests.word_segmenters:not_the_line"
    with pytest.raises(ValueError) as error:
        create_pretraining_data(ZH_SAMPLE, str(tmp_path / "out"), zh_options(zh_vocab, word_segmenter=name))
    assert str(error.value).startswith(f"{ZH_SAMPLE}: line 1: --word_segmenter: ")
    assert os.listdir(tmp_path) == []
