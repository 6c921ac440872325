"""The policy: the embedded tiny Qwen3 model and its locally built tokenizer.

- ``mage_core.policy.tokenizer``: ``build_tokenizer`` (word level, from the games' text);
- ``mage_core.policy.model``: ``TinyModelSpec``, ``build_tiny_qwen3``, ``save_policy``, ``load_policy``.

Import the submodules directly: this package imports nothing heavy by itself.
"""
