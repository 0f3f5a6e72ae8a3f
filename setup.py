"""bert_tf: Google's original BERT in TensorFlow 2.21 / Keras 3."""

from setuptools import find_packages, setup

setup(
    name="bert_tf",
    version="0.1.0",
    description=(
        "Google's original BERT (google-research/bert) in TensorFlow 2 / Keras 3, "
        "checkpoint-compatible and numerically verified."
    ),
    packages=find_packages(include=["bert_tf", "bert_tf.*"]),
    python_requires=">=3.11",
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        "tensorflow-text==2.21.1",
        "numpy>=1.26,<2.5",
        "absl-py>=2.1,<3",
        "tensorboard==2.21.0",
        # Hugging Face model directories in and out (bert_tf.checkpoints.hf), through its NumPy API.
        "safetensors==0.8.0",
    ],
    extras_require={
        # `make demo` draws the pretraining loss curve; the package itself does not need it.
        "demo": ["matplotlib==3.11.2"],
        # `make bench`: the peers the benchmarks compare against (never imported by bert_tf).
        "bench": [
            "keras-hub==0.32.0",
            "torch==2.13.0",
            "transformers==5.23.0",
            "sentence-transformers==6.2.0",
        ],
        # `--runner=...`: scale mode on Apache Beam (DirectRunner, Dataflow, Flink, Spark). Beam
        # 2.77 needs protobuf < 7, so beside TensorFlow 2.21 (>= 6.31.1) pip settles on 6.33.
        # google-crc32c: Beam's TFRecord sink checksums each record 10x faster than with crcmod.
        # Dataflow also needs apache-beam[gcp]==2.77.0 (docs/pretraining.md, "Pretraining data").
        # `--word_segmenter=jieba`: Chinese words for whole-word masking (create_pretraining_data).
        "zh": ["jieba==0.42.1"],
        "beam": ["apache-beam[tfrecord]==2.77.0", "google-crc32c==1.9.0"],
        # `tools/export_edge.py`: LiteRT's interpreter (the converter is TensorFlow's), and
        # tf2onnx with onnxruntime (its quantization and float16 tools) for ONNX. Both sit
        # beside TensorFlow 2.21's and Beam's protobuf 6.33 (BUILD_NOTES, "Edge export").
        "tflite": ["ai-edge-litert==2.3.0"],
        "onnx": ["tf2onnx==1.17.0", "onnx==1.23.2", "onnxruntime==1.32.0"],
        "test": [
            "pytest==9.0.3",
            "pytest-xdist==3.8.0",
            "hypothesis==6.155.2",
            "jax[cpu]==0.10.2",
            "ruff==0.17.6",
            # The reference of GLUE's metrics (tests/test_classifier_metrics.py); SciPy with it.
            "scikit-learn==1.9.1",
        ],
    },
)
