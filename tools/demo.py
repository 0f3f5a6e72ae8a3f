"""`make demo`: bert_tf end to end on the bundled sample data, running the tools as a user would.

1. Google checkpoint -> Keras, checked against the float64 reference (convert_checkpoint.py).
2. Pretraining TFRecords from sample_text.txt (create_pretraining_data.py), then one batch of
   them read back and scored by the pretraining model (the MLM and NSP losses).
3. A tiny BERT pretrained from scratch on them for a few hundred steps (run_pretraining.py), its
   loss curve drawn to out/demo/pretraining_loss.png.
4. The trained model exported for TF Serving (export_saved_model.py) and asked about a sentence
   through its raw-text signature.
5. Per-token features of a few sentences (extract_features.py).
Everything is written under out/demo/.
"""

import os
import shutil
import subprocess
import sys

from bert_tf import cli  # first, as in every tool: TensorFlow's start-up lines hidden

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


# A BERT small enough to pretrain on a CPU in the demo.
TINY_CONFIG = dict(
    vocab_size=30522,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=256,
    max_position_embeddings=128,
    type_vocab_size=2,
)


def pretrain_tiny_bert(tfrecord, vocab):
    """Pretrains TINY_CONFIG from scratch with run_pretraining.py; returns its output directory."""
    from bert_tf import BertConfig

    directory = os.path.join(OUT, "pretraining")
    shutil.rmtree(directory, ignore_errors=True)  # the demo trains afresh, not resuming
    os.makedirs(directory)
    config_file = os.path.join(directory, "bert_config.json")
    BertConfig(**TINY_CONFIG).to_json_file(config_file)
    run_tool(
        "run_pretraining.py",
        f"--input_file={tfrecord}",
        f"--output_dir={directory}",
        f"--bert_config_file={config_file}",
        "--do_train=True",
        "--do_eval=True",
        "--train_batch_size=16",
        "--eval_batch_size=16",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--num_train_steps=300",
        "--num_warmup_steps=30",
        "--learning_rate=1e-3",
        "--save_checkpoints_steps=100",
        "--iterations_per_loop=25",
        "--max_eval_steps=4",
        "--seed=12345",
    )
    with open(os.path.join(directory, "eval_results.txt")) as f:
        print(f"\n{directory}/eval_results.txt:\n" + f.read())
    plot_loss_curve(directory, os.path.join(OUT, "pretraining_loss.png"))
    return directory


def read_scalars(directory, tag):
    """The `(step, value)` pairs of the TensorBoard scalar `tag` in the events of `directory`.

    An events file is TFRecords of `Event` protos, read here without TensorFlow's deprecated
    `summary_iterator` (which logs a deprecation warning of `tf_record_iterator`).
    """
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    points = []
    for path in sorted(tf.io.gfile.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            points += [
                (event.step, float(tf.make_ndarray(v.tensor))) for v in event.summary.value if v.tag == tag
            ]
    return points


def plot_loss_curve(directory, png):
    """Draws the `loss` scalars of the TensorBoard events in `directory` (matplotlib, the demo extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = read_scalars(directory, "loss")
    if not points:
        print(f"No loss was logged in {directory}: no curve drawn")
        return
    steps, losses = zip(*points, strict=True)
    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.plot(steps, losses, marker="o")
    axes.set(xlabel="step", ylabel="loss (masked LM + next sentence)", title="Pretraining a tiny BERT")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(png, dpi=100)
    print(f"Loss {losses[0]:.3f} at step {steps[0]} -> {losses[-1]:.3f} at step {steps[-1]}; curve in {png}")


def export_and_ask(pretraining_dir, vocab):
    """Exports the pretrained model and calls its `text` signature, as a serving client would."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the text signature's ops)

    export_dir = os.path.join(OUT, "export")
    shutil.rmtree(export_dir, ignore_errors=True)
    run_tool(
        "export_saved_model.py",
        f"--bert_config_file={pretraining_dir}/bert_config.json",
        f"--init_checkpoint={pretraining_dir}",
        f"--vocab_file={vocab}",
        "--max_seq_length=128",
        f"--export_dir={export_dir}",
    )
    served = tf.saved_model.load(os.path.join(export_dir, "1"))
    outputs = served.signatures["text"](text=tf.constant(["The man went to the store."]))
    shapes = {name: tuple(value.shape) for name, value in outputs.items()}
    print(f"The text signature answers {shapes}")


def main(argv):
    del argv
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

    pretraining_dir = pretrain_tiny_bert(tfrecord, vocab)
    export_and_ask(pretraining_dir, vocab)

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
    cli.run(main)
