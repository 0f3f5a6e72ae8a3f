"""Token tagging (e.g. CoNLL-2003 named entities), bert_tf's.

Importing this package registers `BertTagger` with Keras, as importing the module that held it
did: a `.keras` file of the model loads after `import bert_tf.tasks.tagging`.
"""

from bert_tf.tasks.tagging.task import BertTagger

__all__ = ["BertTagger"]
