"""Sentence (pair) classification, the original's `run_classifier.py`.

Importing this package registers `BertClassifier` with Keras, as importing the module that held it
did: a `.keras` file of the model loads after `import bert_tf.tasks.classifier`.
"""

from bert_tf.tasks.classifier.task import BertClassifier

__all__ = ["BertClassifier"]
