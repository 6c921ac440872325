"""The policy's codec (``mage_core.stages.train.make_codec``): prompts as chat turns,
thinking switched on or off, the answer after the thinking, end-of-turn stops.

The chat template is Qwen3's logic for one user turn and the generation prompt
(``<|im_start|>`` / ``<|im_end|>`` turns; with ``enable_thinking`` false an empty
``<think></think>`` block opens the answer), on a word-level tokenizer that knows
those tokens, so every expected id sequence is written out by hand here.
"""

from __future__ import annotations

import pytest

from mage_core.generation import SamplingParams
from mage_core.config import ConfigError, parse_config
from mage_core.policy.tokenizer import build_tokenizer
from mage_core.stages.train import make_codec

pytestmark = pytest.mark.unit

QWEN3_TURN_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
CHAT_TOKENS = ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]


@pytest.fixture
def tokenizer():
    tok = build_tokenizer(["you hold the king user assistant bet check hmm i"], extra_tokens=CHAT_TOKENS)
    tok.chat_template = QWEN3_TURN_TEMPLATE
    return tok


def _ids(tok, words: list[str]) -> list[int]:
    return [tok.convert_tokens_to_ids(w) for w in words]


def _policy(**fields):
    return parse_config({"policy": {"action_mode": "free", **fields}}).policy


def test_plain_prompts_are_bos_and_the_text(tokenizer) -> None:
    codec = make_codec(tokenizer)
    assert codec.encode_prompt("you hold the king") == [tokenizer.bos_token_id] + _ids(tokenizer, [
        "you", "hold", "the", "king"])
    assert codec.answer is None and codec.parse_view() is codec.decode


@pytest.mark.parametrize("thinking", [True, False])
def test_chat_prompts_are_one_user_turn_and_the_assistant_prompt(tokenizer, thinking: bool) -> None:
    codec = make_codec(tokenizer, _policy(chat_template=True, thinking=thinking))
    words = ["<|im_start|>", "user", "you", "hold", "the", "king", "<|im_end|>", "<|im_start|>", "assistant"]
    if not thinking:  # Qwen3 with enable_thinking=False: an empty thinking block, then the answer
        words += ["<think>", "</think>"]
    assert codec.encode_prompt("you hold the king") == _ids(tokenizer, words)


def test_a_thinking_models_answer_is_the_text_after_its_thinking(tokenizer) -> None:
    codec = make_codec(tokenizer, _policy(chat_template=True, thinking=True))
    answer = codec.parse_view()
    thought = _ids(tokenizer, ["<think>", "i", "bet", "<action>", "bet", "</action>", "</think>",
                               "<action>", "check", "</action>"])
    assert answer(thought).split() == ["<action>", "check", "</action>"]
    assert codec.decode(thought).split()[:3] == ["<think>", "i", "bet"]  # transcripts keep the thinking
    assert answer(_ids(tokenizer, ["<think>", "hmm", "<action>", "bet", "</action>"])) == ""  # still thinking
    assert answer(_ids(tokenizer, ["<action>", "check", "</action>"])).split() == ["<action>", "check", "</action>"]


def test_free_text_stops_at_eos_and_the_chat_end_token(tokenizer) -> None:
    codec = make_codec(tokenizer, _policy(chat_template=True, thinking=True))
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert codec.stop_token_ids == tuple(sorted({tokenizer.eos_token_id, end})) and len(codec.stop_token_ids) == 2
    assert make_codec(build_tokenizer(["a b"])).stop_token_ids == (build_tokenizer(["a b"]).eos_token_id,)


def test_the_trainer_samples_with_the_codecs_stops_and_parses_its_answer(tokenizer) -> None:
    from mage_core.trainers.meta_rl import MetaRLTrainer

    cfg = parse_config({"env": {"name": "kuhn_poker"},
                        "policy": {"action_mode": "free", "chat_template": True, "thinking": True}})
    codec = make_codec(tokenizer, cfg.policy)
    trainer = MetaRLTrainer(cfg, None, None, codec)  # type: ignore[arg-type]
    assert trainer.train_sampling() == SamplingParams(temperature=1.0, max_new_tokens=cfg.policy.max_new_tokens,
                                                      stop_token_ids=codec.stop_token_ids)
    assert trainer.actor(trainer.train_sampling()).decode is codec.answer


def test_bad_chat_settings_are_named(tokenizer) -> None:
    with pytest.raises(ConfigError, match="policy.chat_template: true, but the model's tokenizer has no chat"):
        make_codec(build_tokenizer(["a b"]), _policy(chat_template=True))
    with pytest.raises(ConfigError, match="thinking: true needs chat_template: true"):
        parse_config({"policy": {"action_mode": "free", "thinking": True}})
    with pytest.raises(ConfigError, match="thinking: true needs action_mode 'free'"):
        parse_config({"policy": {"chat_template": True, "thinking": True}})
