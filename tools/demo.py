"""`make demo`: bert_tf end to end on the bundled sample data, running the tools as a user would.

1. Google checkpoint -> Keras, checked against the float64 reference (convert_checkpoint.py).
2. Pretraining TFRecords from sample_text.txt (create_pretraining_data.py), then one batch of
   them read back and scored by the pretraining model (the MLM and NSP losses).
3. Per-token features of a few sentences (extract_features.py).
Everything is written under out/demo/.
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "tools", "demo_data")
OUT = os.path.join(REPO, "out", "demo")
GOOGLE_TINY = os.path.join(REPO, "..", "shared", "fixtures", "google_tiny")


def run_tool(name, *args):
    command = [sys.executable, os.path.join(REPO, "tools", name), *args]
    print(f"\n$ python tools/{name} " + " ".join(args), flush=True)
    subprocess.run(command, check=True, cwd=REPO)


def tiny_google_checkpoint():
    """The shared google_tiny checkpoint, or a random tiny one written in Google's layout."""
    if os.path.exists(os.path.join(GOOGLE_TINY, "bert_model.ckpt.index")):
        print(f"Using the Google-layout checkpoint in {os.path.normpath(GOOGLE_TINY)}")
        return os.path.join(GOOGLE_TINY, "bert_config.json"), os.path.join(GOOGLE_TINY, "bert_model.ckpt")
    from bert_tf import BertConfig, BertPretrainer, save_google_checkpoint

    directory = os.path.join(OUT, "random_tiny")
    os.makedirs(directory, exist_ok=True)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        type_vocab_size=2,
    )
    config_file = os.path.join(directory, "bert_config.json")
    config.to_json_file(config_file)
    prefix = save_google_checkpoint(BertPretrainer(config), os.path.join(directory, "bert_model.ckpt"))
    print(f"../shared is not here: wrote a randomly initialised tiny BERT to {prefix}")
    return config_file, prefix


def score_pretraining_batch(config_file, checkpoint, tfrecord):
    from bert_tf import BertConfig, BertPretrainer, load_google_checkpoint, masked_lm_loss, next_sentence_loss
    from bert_tf.data import make_pretraining_dataset

    model = BertPretrainer(BertConfig.from_json_file(config_file))
    load_google_checkpoint(model, checkpoint)
    dataset = make_pretraining_dataset(
        tfrecord, batch_size=8, max_seq_length=128, max_predictions_per_seq=20, is_training=False
    )
    batch = next(iter(dataset))
    outputs = model(batch)
    mlm, _ = masked_lm_loss(
        outputs["masked_lm_log_probs"], batch["masked_lm_ids"], batch["masked_lm_weights"]
    )
    nsp, _ = next_sentence_loss(outputs["next_sentence_log_probs"], batch["next_sentence_labels"])
    print(
        f"\nOne batch of {tfrecord}: masked LM loss {float(mlm):.4f}, "
        f"next sentence loss {float(nsp):.4f}, total {float(mlm + nsp):.4f}"
    )


def main():
    os.makedirs(OUT, exist_ok=True)
    config_file, checkpoint = tiny_google_checkpoint()
    vocab = os.path.join(DATA, "vocab.txt")

    run_tool(
        "convert_checkpoint.py",
        f"--bert_config_file={config_file}",
        f"--init_checkpoint={checkpoint}",
        f"--output={OUT}/bert_tiny.keras",
    )

    tfrecord = os.path.join(OUT, "pretraining.tfrecord")
    run_tool(
        "create_pretraining_data.py",
        f"--input_file={DATA}/sample_text.txt",
        f"--output_file={tfrecord}",
        f"--vocab_file={vocab}",
        "--do_lower_case=True",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        "--dupe_factor=5",
    )
    score_pretraining_batch(config_file, checkpoint, tfrecord)

    run_tool(
        "extract_features.py",
        f"--input_file={DATA}/sentences.txt",
        f"--output_file={OUT}/features.jsonl",
        f"--vocab_file={vocab}",
        f"--bert_config_file={config_file}",
        f"--init_checkpoint={checkpoint}",
        "--layers=-1,-2",
        "--max_seq_length=32",
        "--batch_size=2",
    )
    print(f"\nDemo finished; outputs are in {os.path.relpath(OUT, REPO)}/")


if __name__ == "__main__":
    main()
