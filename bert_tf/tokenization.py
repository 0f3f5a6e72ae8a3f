"""The original's import path, `bert_tf.tokenization`: the same module as `bert_tf.text.tokenization`.

Scripts written for google-research/bert do `import tokenization` and call its functions and
classes (`FullTokenizer`, `convert_to_unicode`, `convert_tokens_to_ids`, ...); with
`from bert_tf import tokenization` they run unchanged.
"""

import sys

from bert_tf.text import tokenization

sys.modules[__name__] = tokenization
