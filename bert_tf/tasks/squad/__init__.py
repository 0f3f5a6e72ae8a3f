"""SQuAD 1.1 and 2.0, the original's `run_squad.py`.

Importing this package registers `BertSquad` with Keras, as importing the module that held it
did: a `.keras` file of the model loads after `import bert_tf.tasks.squad`.
"""

from bert_tf.tasks.squad.task import BertSquad

__all__ = ["BertSquad"]
