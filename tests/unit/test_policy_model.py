"""The embedded policy: word-level tokenizer and tiny Qwen3 (docs/architecture.md, "The embedded default")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, Qwen3ForCausalLM

from mage_core.policy.model import (
    MANIFEST,
    SAVED_KEY,
    TinyModelSpec,
    build_tiny_qwen3,
    load_policy,
    save_policy,
    verify_policy,
)
from mage_core.policy.tokenizer import build_tokenizer
from tests.envcases import Case

pytestmark = pytest.mark.unit

CASES = [Case("tic_tac_toe", "random", 0), Case("kuhn_poker", "random", 1), Case("sokoban", None, 0)]


def _pieces(text: str) -> list[str]:
    """Reference split written independently of the tokenizer: tags whole,
    every other non-alphanumeric, non-space character alone (also "_"), words between."""
    out: list[str] = []
    i, word = 0, ""
    tags = ("<action>", "</action>", "<remark>", "</remark>")
    while i < len(text):
        tag = next((t for t in tags if text.startswith(t, i)), None)
        ch = text[i]
        if tag or ch.isspace() or not ch.isalnum():
            if word:
                out.append(word)
                word = ""
            if tag:
                out.append(tag)
                i += len(tag)
                continue
            if not ch.isspace():
                out.append(ch)
        else:
            word += ch
        i += 1
    if word:
        out.append(word)
    return out


# -- tokenizer -----------------------------------------------------------------


def test_ids_are_specials_then_tags_then_sorted_words_then_extras() -> None:
    tok = build_tokenizer(["b a", "c, a"], extra_tokens=["zeta", "a"])
    expected = ["<pad>", "<unk>", "<bos>", "<eos>", "<action>", "</action>", "<remark>", "</remark>",
                ",", "a", "b", "c", "zeta"]
    assert tok.convert_ids_to_tokens(list(range(len(tok)))) == expected
    assert len(tok) == 13
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2, 3)


def test_actions_split_into_tags_punctuation_and_words() -> None:
    tok = build_tokenizer(["<action>(2, 3)</action> <remark>BET</remark>"])
    ids = tok.encode("<action>(2, 3)</action><remark>BET</remark>", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(ids) == ["<action>", "(", "2", ",", "3", ")", "</action>",
                                              "<remark>", "BET", "</remark>"]
    assert tok.decode(ids) == "<action> ( 2 , 3 ) </action> <remark> BET </remark>"


def test_unknown_words_map_to_unk_and_encode_adds_no_specials() -> None:
    tok = build_tokenizer(["you hold the King"])
    ids = tok.encode("you hold the Queen", add_special_tokens=False)
    assert ids == tok.encode("you hold the Queen")
    assert ids[-1] == tok.unk_token_id == 1
    assert tok.convert_ids_to_tokens(ids[:3]) == ["you", "hold", "the"]


def test_vocabulary_is_deterministic_in_the_corpus_not_its_order() -> None:
    corpus = ["x: 1 2 3", "Board:\n. X O", "you won."]
    a = build_tokenizer(corpus).get_vocab()
    b = build_tokenizer(list(reversed(corpus)) + corpus[:1]).get_vocab()
    assert a == b


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="holds no words"):
        build_tokenizer(["", "  \n"])
    with pytest.raises(ValueError, match="single non-empty word"):
        build_tokenizer(["a"], extra_tokens=["two words"])
    with pytest.raises(ValueError, match="not one string"):
        build_tokenizer(["a"], extra_tokens="abc")
    with pytest.raises(ValueError, match="corpus item 1"):
        build_tokenizer(["a", 3])  # type: ignore[list-item]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_game_text_round_trips_and_decoded_actions_parse(case: Case) -> None:
    envs = [case.build(seed) for seed in range(4)]
    corpus = []
    for env in envs:
        env.reset()
        corpus += [env.observation(), env.compact_observation(), " ".join(env.legal_actions())]
    tok = build_tokenizer(corpus)
    for env in envs:
        observation = env.observation()
        ids = tok.encode(observation, add_special_tokens=False)
        assert tok.unk_token_id not in ids
        assert tok.convert_ids_to_tokens(ids) == _pieces(observation)
        assert tok.decode(ids).split(" ") == _pieces(observation)
        for action in env.legal_actions():
            response = f"<remark>my move</remark> <action>{action}</action>"
            ids = tok.encode(f"<action>{action}</action>", add_special_tokens=False)
            decoded = tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True)
            assert env.parse_action(decoded) == action, (decoded, action)
            assert env.parse_action(tok.decode(tok.encode(response))) == action


def test_tokenizer_saves_and_loads_with_auto_tokenizer(tmp_path: Path) -> None:
    tok = build_tokenizer(["<action>(1, 1)</action> PASS BET"], extra_tokens=["(invalid)"])
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    text = "<action>(1, 1)</action> (invalid) BET Queen"
    assert loaded.encode(text) == tok.encode(text)
    assert loaded.convert_ids_to_tokens(tok.encode(text)) == ["<action>", "(", "1", ",", "1", ")", "</action>",
                                                              "(invalid)", "BET", "<unk>"]
    assert loaded.get_vocab() == tok.get_vocab()
    assert loaded.pad_token_id == 0 and loaded.eos_token_id == 3


# -- model ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer(["<action>(1, 2)</action> PASS BET you hold the King ."])


def _build(tok, seed: int = 0, spec: TinyModelSpec = TinyModelSpec()) -> Qwen3ForCausalLM:
    return build_tiny_qwen3(spec, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                            bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, seed=seed)


def test_built_model_is_the_qwen3_class_with_the_spec(tok) -> None:
    model = _build(tok)
    cfg = model.config
    assert type(model) is Qwen3ForCausalLM and cfg.model_type == "qwen3"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.head_dim, cfg.intermediate_size, cfg.max_position_embeddings) == (64, 2, 4, 2, 16, 128, 2048)
    assert cfg.vocab_size == len(tok) and (cfg.pad_token_id, cfg.bos_token_id, cfg.eos_token_id) == (0, 2, 3)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not model.training
    # Parameters by hand: embeddings V x 64; per layer q 64x64, k,v 32x64, o 64x64, q/k norms 16 each,
    # MLP 3 x 64x128, two RMSNorms 64; final norm 64.
    per_layer = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 16 + 3 * 64 * 128 + 2 * 64
    assert sum(p.numel() for p in model.parameters()) == len(tok) * 64 + 2 * per_layer + 64


def test_build_is_deterministic_and_leaves_the_global_rng_alone(tok) -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a, b, c = _build(tok, seed=7), _build(tok, seed=7), _build(tok, seed=8)
    assert torch.equal(torch.rand(3), expected_next)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["model.layers.0.self_attn.q_proj.weight"], sc["model.layers.0.self_attn.q_proj.weight"])


def test_spec_and_build_arguments_are_validated(tok) -> None:
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        TinyModelSpec(num_heads=4, num_kv_heads=3)
    with pytest.raises(ValueError, match="hidden_size must be an int >= 1"):
        TinyModelSpec(hidden_size=0)
    with pytest.raises(ValueError, match="head_dim must be even"):
        TinyModelSpec(head_dim=15)
    with pytest.raises(ValueError, match="eos_token_id"):
        build_tiny_qwen3(TinyModelSpec(), vocab_size=3, pad_token_id=0, bos_token_id=1, eos_token_id=3, seed=0)
    with pytest.raises(ValueError, match="seed"):
        build_tiny_qwen3(TinyModelSpec(), vocab_size=9, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                         seed=1.5)  # type: ignore[arg-type]


def test_save_and_load_round_trip(tok, tmp_path: Path) -> None:
    model = _build(tok, seed=3)
    target = tmp_path / "policy"
    save_policy(model, tok, target)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(target))
    assert os.listdir(tmp_path) == ["policy"]  # no staging folders left behind
    made = tmp_path / "plain"
    made.mkdir()
    assert target.stat().st_mode == made.stat().st_mode  # a plain folder's mode, not mkdtemp's 0700
    loaded, loaded_tok = load_policy(target)
    assert type(loaded) is Qwen3ForCausalLM and not loaded.training
    assert loaded_tok.get_vocab() == tok.get_vocab()
    ids = torch.tensor([tok.encode("you hold the King . <action>(1, 2)</action>")])
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    half, _ = load_policy(target, dtype=torch.bfloat16)
    assert half.model.embed_tokens.weight.dtype == torch.bfloat16
    save_policy(loaded, loaded_tok, tmp_path / "again")  # what a resumed run saves: the same bytes
    for name in os.listdir(target):
        assert (tmp_path / "again" / name).read_bytes() == (target / name).read_bytes(), name


def test_save_replaces_an_existing_policy_and_a_failed_save_changes_nothing(tok, tmp_path: Path) -> None:
    target = tmp_path / "policy"
    save_policy(_build(tok, seed=1), tok, target)
    second = _build(tok, seed=2)
    save_policy(second, tok, target)
    assert os.listdir(tmp_path) == ["policy"]
    reloaded, _ = load_policy(target)
    assert torch.equal(reloaded.model.norm.weight, second.model.norm.weight)
    assert torch.equal(reloaded.model.embed_tokens.weight, second.model.embed_tokens.weight)

    class BrokenTokenizer:
        def save_pretrained(self, directory: Path) -> None:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_policy(_build(tok, seed=9), BrokenTokenizer(), target)
    assert os.listdir(tmp_path) == ["policy"]
    kept, _ = load_policy(target)
    assert torch.equal(kept.model.embed_tokens.weight, second.model.embed_tokens.weight)


def _as_downloaded(folder: Path) -> None:
    """A saved policy made to look like a downloaded model: no manifest, no mark of this project."""
    os.remove(folder / MANIFEST)
    config = json.loads((folder / "config.json").read_text())
    del config[SAVED_KEY]
    (folder / "config.json").write_text(json.dumps(config))


def test_load_errors_name_the_problem(tok, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_policy(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_policy(tmp_path)
    target = tmp_path / "policy"
    save_policy(_build(tok), tok, target)
    _as_downloaded(target)  # the checks below are the loader's own, as for a downloaded model
    config = json.loads((target / "config.json").read_text())

    (target / "config.json").write_text(json.dumps({**config, "hidden_size": 32}))
    with pytest.raises(ValueError, match="cannot load the model"):
        load_policy(target)
    (target / "config.json").write_text(json.dumps({**config, "vocab_size": len(tok) - 2}))
    with pytest.raises(ValueError, match="cannot load the model"):
        load_policy(target)
    (target / "config.json").write_text(json.dumps(config))

    weights = load_file(target / "model.safetensors")
    trimmed = {k: v for k, v in weights.items() if k != "model.norm.weight"}
    save_file(trimmed, target / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing keys: model.norm.weight"):
        load_policy(target)
    os.remove(target / "model.safetensors")
    with pytest.raises(FileNotFoundError, match="no weights"):
        load_policy(target)


def test_a_saved_policy_is_checked_against_its_digests_when_loaded(tok, tmp_path: Path) -> None:
    """Issue 25: a bit flipped in best/model.safetensors was loaded silently."""
    target = tmp_path / "policy"
    save_policy(_build(tok, seed=4), tok, target)
    recorded = json.loads((target / MANIFEST).read_text())["sha256"]
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(recorded)
    assert verify_policy(target) is True
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x10  # one bit of one weight
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model\.safetensors changed since it was saved .*corrupted"):
        load_policy(target)
    data[len(data) // 2] ^= 0x10
    weights.write_bytes(bytes(data))
    load_policy(target)  # restored: loads again
    os.remove(target / "tokenizer.json")
    with pytest.raises(ValueError, match=r"tokenizer\.json is missing"):
        verify_policy(target)
    (target / MANIFEST).write_text("{")
    with pytest.raises(ValueError, match="unreadable"):
        verify_policy(target)


def test_a_saved_policy_that_lost_its_manifest_or_gained_a_file_is_refused(tok, tmp_path: Path) -> None:
    """Issue 39: with its manifest deleted, a saved policy whose weights had a bit flipped loaded
    unchecked; a file the manifest does not list was accepted. A downloaded model (no mark of
    this project in its config.json) still loads unchecked."""
    target = tmp_path / "policy"
    save_policy(_build(tok, seed=5), tok, target, json_files={"warm_start.json": {"env.name": "sokoban"}})
    recorded = json.loads((target / MANIFEST).read_text())["sha256"]
    assert "warm_start.json" in recorded  # saved with the policy: checked like its other files
    assert json.loads((target / "config.json").read_text())[SAVED_KEY] == MANIFEST
    for extra in ("notes.txt", "sub/extra.safetensors"):
        (target / extra).parent.mkdir(exist_ok=True)
        (target / extra).write_text("x")
        with pytest.raises(ValueError, match=rf"{target / extra} was not saved with the policy \({MANIFEST} does not"):
            load_policy(target)
        (target / extra).unlink()
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x10
    weights.write_bytes(bytes(data))
    os.remove(target / MANIFEST)
    with pytest.raises(ValueError, match=rf"{target / MANIFEST} is missing, yet {target / 'config.json'} says this "
                                         rf"project saved the folder \({SAVED_KEY}\)"):
        load_policy(target)
    config = json.loads((target / "config.json").read_text())
    del config[SAVED_KEY]  # what a downloaded model's config.json is: nothing says this project saved it
    (target / "config.json").write_text(json.dumps(config))
    assert verify_policy(target) is False
    load_policy(target)  # unchecked, as docs/faults.md says of a downloaded model


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tok, tmp_path: Path) -> None:
    small = build_tiny_qwen3(TinyModelSpec(), vocab_size=len(tok) - 1, pad_token_id=0, bos_token_id=2,
                             eos_token_id=3, seed=0)
    save_policy(small, tok, tmp_path / "p")
    with pytest.raises(ValueError, match="not saved together"):
        load_policy(tmp_path / "p")


def test_every_compact_action_is_one_token_of_the_embedded_tokenizer() -> None:
    # Single-token candidates are read at one position and packed by TorchEngine (4x faster
    # Tic-Tac-Toe iterations than one row per multi-token candidate).
    import numpy as np

    from mage_core.config import parse_config
    from mage_core.envs.registry import make_env
    from mage_core.opponents.registry import make_opponent
    from mage_core.rollout.corpus import action_tokens, game_corpus
    from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec
    from mage_core.stages.train import make_codec
    from mage_core.trainers.meta_rl import meta_settings

    for game, opponent in (("tic_tac_toe", "random"), ("kuhn_poker", "random"), ("sokoban", None),
                           ("minesweeper", None)):
        cfg = parse_config({"env": {"name": game}})  # a run's tokenizer covers the game it plays
        tok = build_tokenizer(game_corpus(cfg, "compact", meta_episodes_per_game=4), extra_tokens=action_tokens(cfg))
        codec = make_codec(tok)
        env = make_env(game, getattr(cfg.env, game), np.random.default_rng(1),
                       make_opponent(game, opponent, cfg.opponents.settings()) if opponent else None, 0)
        env.reset()
        expected = {"tic_tac_toe": ("(2, 3)", "(2,3)"), "kuhn_poker": ("BET", "meBET"),
                    "sokoban": ("up, left", "up,left"), "minesweeper": ("(2, 3)", "(2,3)")}[game]
        assert env.compact_action(expected[0]) == expected[1]
        meta = MetaEpisode(MetaEpisodeSpec(game, opponent, 0, 1, 0), env, meta_settings(cfg, game, 1, False),
                           codec.encode_prompt, codec.encode_action)
        request = meta.request()
        assert request.candidate_ids is not None and len(request.candidate_ids) >= 2
        assert all(len(ids) == 1 and ids[0] != tok.unk_token_id for ids in request.candidate_ids), game
        assert request.candidate_texts == env.legal_actions()  # the env still gets its own action text


def test_word_encoder_equals_the_tokenizer_on_every_prompt_and_refuses_other_tokenizers(tmp_path: Path) -> None:
    # Equivalence: the cached word-by-word path gives the tokenizer's own ids on the
    # games' prompts of both styles (and on a saved-and-reloaded tokenizer).
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from mage_core.config import parse_config
    from mage_core.policy.tokenizer import word_encoder
    from mage_core.rollout.corpus import action_tokens, game_corpus

    cfg = parse_config({})
    texts = [*game_corpus(cfg, "compact", meta_episodes_per_game=3), *game_corpus(cfg, "paper", meta_episodes_per_game=3)]
    tok = build_tokenizer(texts, extra_tokens=[*action_tokens(cfg), "(invalid)"])
    tok.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    for t in (tok, reloaded):
        fast = word_encoder(t)
        assert fast is not None
        for text in [*texts, "<action> (2,3) </action> never-seen words", "  spaced\n\nlines  ", ""]:
            assert fast(text) == t.encode(text, add_special_tokens=False), text
    # A word-level tokenizer that does not split on whitespace first has no fast path.
    other = Tokenizer(models.WordLevel(vocab={"<unk>": 0, "a": 1}, unk_token="<unk>"))
    other.pre_tokenizer = pre_tokenizers.Punctuation()
    assert word_encoder(PreTrainedTokenizerFast(tokenizer_object=other, unk_token="<unk>")) is None
    assert word_encoder(object()) is None
