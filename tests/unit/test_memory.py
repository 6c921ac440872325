"""Memory arithmetic of ``mage doctor`` on Qwen3-4B, against hand-derived figures.

Qwen3-4B's config.json (Hugging Face, Qwen/Qwen3-4B): vocab 151936, hidden 2560,
36 layers, 32 query heads and 8 KV heads of size 128, MLP 9728, tied embeddings.
"""

from __future__ import annotations

import pytest

from mage_core.backends.memory import ModelShape, kv_cache_sequences, training_memory

pytestmark = pytest.mark.unit

QWEN3_4B = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 2560, "num_hidden_layers": 36,
            "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 9728,
            "tie_word_embeddings": True, "max_position_embeddings": 40960}
P = 4_022_468_096


def test_qwen3_4b_parameter_count_and_kv_cache_per_token() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    # embeddings 151936*2560 = 388,956,160; per layer: q and o 2*2560*4096 = 20,971,520,
    # k and v 2*2560*1024 = 5,242,880, q/k norms 2*128 = 256, MLP 3*2560*9728 = 74,711,040,
    # two RMSNorms 5,120 -> 100,930,816; x36 = 3,633,509,376; + final norm 2,560.
    assert shape.parameters() == P  # Qwen's model card: 4.0B, 3.6B of them non-embedding
    assert shape.kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2 == 147_456


def test_zero_stages_shard_what_the_zero_paper_says() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    common = dict(gpus=8, precision="bf16", offload_optimizer=False, micro_batch=8, seq_len=7168,
                  gradient_checkpointing=True, flash_attention=True, reference_model=True)
    by_stage = {stage: training_memory(shape, zero_stage=stage, **common) for stage in (0, 1, 2, 3)}
    # (weights, gradients, optimizer, reference) in bytes: 16-bit weights and gradients, 12 bytes of fp32 state.
    assert (by_stage[0].weights, by_stage[0].gradients, by_stage[0].optimizer) == (2 * P, 2 * P, 12 * P)
    assert (by_stage[1].weights, by_stage[1].gradients, by_stage[1].optimizer) == (2 * P, 2 * P, 12 * P / 8)
    assert (by_stage[2].weights, by_stage[2].gradients, by_stage[2].optimizer) == (2 * P, 2 * P / 8, 12 * P / 8)
    assert (by_stage[3].weights, by_stage[3].gradients, by_stage[3].optimizer) == (2 * P / 8, 2 * P / 8, 12 * P / 8)
    # The reference policy is a whole copy per rank at every stage (the engine does not shard it).
    assert by_stage[2].reference == by_stage[3].reference == 2 * P
    # Checkpointed activations: 36 layer inputs of 2*s*b*h bytes + one layer's 70*s*b*h (the bf16
    # coefficient measured on Hugging Face's Qwen3, backends/memory.py).
    assert by_stage[2].activations == (36 * 2 + 70) * 7168 * 8 * 2560 == 20_845_690_880
    # Logits of the micro-batch, every position scored: b*s*V values of 29 bytes (measured).
    assert by_stage[2].logits == 8 * 7168 * 151936 * 29 == 252_665_921_536
    # 2P + 2P/8 + 12P/8 + 2P + 20,845,690,880 + 252,665,921,536 bytes.
    assert by_stage[2].gpu_total == 2 * P + 2 * P / 8 + 12 * P / 8 + 2 * P + 20_845_690_880 + 252_665_921_536


def test_scored_positions_and_chunks_bound_the_logits() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    common = dict(gpus=8, zero_stage=2, precision="bf16", offload_optimizer=False, micro_batch=8, seq_len=8192,
                  gradient_checkpointing=True, flash_attention=True, reference_model=True)
    # A free response of 4096 tokens: 8 rows x 4096 scored positions, all at once.
    dense = training_memory(shape, scored_positions=4096, **common)
    assert dense.logits == 8 * 4096 * 151936 * 29 == 144_380_526_592
    # 1024 at a time: 1024 x 151936 x 29 bytes = 4.20 GiB whatever the micro-batch.
    chunked = training_memory(shape, scored_positions=4096, logits_chunk=1024, **common)
    assert chunked.logits == 1024 * 151936 * 29 == 4_511_891_456
    assert chunked.gpu_total - dense.gpu_total == 4_511_891_456 - 144_380_526_592
    # A chunk larger than the micro-batch's positions changes nothing; fp32: 20 bytes a value.
    assert training_memory(shape, scored_positions=16, logits_chunk=1024, **common).logits == 8 * 16 * 151936 * 29
    fp32 = training_memory(shape, **{**common, "precision": "fp32"}, scored_positions=1, logits_chunk=1)
    assert fp32.logits == 151936 * 20


def test_offload_moves_the_optimizer_to_host_memory_and_fp32_needs_no_master_copy() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    common = dict(gpus=1, zero_stage=2, micro_batch=1, seq_len=1024, gradient_checkpointing=False,
                  flash_attention=False, reference_model=False)
    offloaded = training_memory(shape, precision="bf16", offload_optimizer=True, **common)
    assert (offloaded.optimizer, offloaded.optimizer_on_cpu) == (0.0, 12 * P)
    fp32 = training_memory(shape, precision="fp32", offload_optimizer=False, **common)
    assert (fp32.weights, fp32.gradients, fp32.optimizer) == (4 * P, 4 * P, 8 * P)
    # Without flash attention a fp32 layer also keeps the attention scores, 2 x 5*a*s/h (a=32, s=1024,
    # h=2560), beside its measured 120*s*b*h.
    assert fp32.activations == 36 * 1024 * 1 * 2560 * (120 + 2 * 5 * 32 * 1024 / 2560)


def test_kv_cache_sequences_on_an_80_gib_gpu() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    # Half of 80 GiB minus the bf16 weights, over 147,456 bytes x 7168 tokens per sequence.
    fits = kv_cache_sequences(shape, gpu_bytes=80 * 2**30, memory_fraction=0.5, seq_len=7168, weights_bytes=2 * P)
    assert fits == pytest.approx((40 * 2**30 - 2 * P) / (147_456 * 7168)) and int(fits) == 33


def test_bad_settings_are_named() -> None:
    shape = ModelShape.from_hf_config(QWEN3_4B)
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2 or 3"):
        training_memory(shape, gpus=1, zero_stage=4, precision="bf16", offload_optimizer=False, micro_batch=1,
                        seq_len=8, gradient_checkpointing=False, flash_attention=True, reference_model=False)
    with pytest.raises(KeyError, match="hidden_size"):
        ModelShape.from_hf_config({k: v for k, v in QWEN3_4B.items() if k != "hidden_size"})
