"""Memory of a training step and of the rollout KV cache, from first principles.

Pure arithmetic on a model's shape (``ModelShape``, read from a Hugging Face
``config.json``), used by ``mage doctor`` to say whether a profile fits its GPUs
before anything is launched. Every figure is bytes per GPU; each term is kept
apart so the report shows what dominates.

Sources of the formulas:
- mixed-precision Adam keeps 16-bit weights and gradients and 12 bytes of fp32
  state per parameter (master weights, momentum, variance); ZeRO stage 1 shards
  the optimizer state over the data-parallel GPUs, stage 2 also the gradients,
  stage 3 also the weights (Rajbhandari et al., "ZeRO", 2020, section 5); fp32
  training keeps 4 + 4 + 8 bytes per parameter, the same 16 in all;
- activations of one decoder layer: ``s*b*h*c`` bytes with a fused (flash)
  attention, ``s*b*h*(c + 5*a*s/h)`` (16 bits; twice the score term in fp32)
  without: the shape of Korthikanti et al., "Reducing Activation
  Recomputation", 2022, section 4, whose ``c`` = 34 is a GPT layer's in 16 bits.
  Hugging Face's Qwen3 layer keeps more (fp32 copies in its RMSNorms and q/k
  norms, the SwiGLU's three projections, rotary copies): measured, ``c`` = 70
  in bf16 (70.4 on an H200 through the CUDA allocator's statistics,
  ``benchmarks/gpu_check.py``; 70.2 on a CPU, ``benchmarks/bench_memory_terms.py``)
  and 120 in fp32 (CPU). With full gradient checkpointing only each layer's
  input is kept (2 or 4 bytes per value), plus one layer's activations while it
  is recomputed;
- the logits: only the positions whose next token is scored go through the
  output layer (a free response's tokens, not its prompt's), so a micro-batch
  has ``b*r`` queried positions (``r`` the response budget); each logit value
  costs 29 bytes in bf16 at the step's peak (the layer's output, its fp32 copy,
  the log-softmax, the entropy's softmax and product, the copies that indexing
  makes, and their gradients: measured on an H200 with the torch engine's dense
  path, 29.0; the same path measures 22 on a CPU) and 20 in fp32 (15.2 measured
  on a CPU, raised by the GPU/CPU ratio of the bf16 figures until a GPU measures
  it). Dense, all ``b*r`` rows
  at once; chunked (``backend.logits_chunk_tokens`` = c), at most ``c`` rows at
  once, forward or backward (``torch_engine.chunked_token_logprobs``; measured
  26 bytes per value of a chunk, so the estimate errs high);
- the KV cache: 2 (keys, values) x layers x KV heads x head size x 2 bytes per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

GIB = 1024**3


@dataclass(frozen=True)
class ModelShape:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tied_embeddings: bool

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any]) -> "ModelShape":
        """From a Qwen3/Llama-style ``config.json`` mapping; KeyError names a missing key."""
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        return cls(vocab_size=int(config["vocab_size"]), hidden_size=hidden,
                   num_layers=int(config["num_hidden_layers"]), num_heads=heads,
                   num_kv_heads=int(config.get("num_key_value_heads", heads)),
                   head_dim=int(config.get("head_dim") or hidden // heads),
                   intermediate_size=int(config["intermediate_size"]),
                   tied_embeddings=bool(config.get("tie_word_embeddings", False)))

    def parameters(self) -> int:
        """Parameter count of a Qwen3 decoder (q/k norms, no biases)."""
        h, d = self.hidden_size, self.head_dim
        attention = h * self.num_heads * d * 2 + h * self.num_kv_heads * d * 2 + 2 * d  # q, o, k, v, q/k norms
        mlp = 3 * h * self.intermediate_size
        per_layer = attention + mlp + 2 * h  # two RMSNorms
        embeddings = self.vocab_size * h * (1 if self.tied_embeddings else 2)
        return embeddings + self.num_layers * per_layer + h  # final norm

    def kv_bytes_per_token(self, bytes_per_value: int = 2) -> int:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * bytes_per_value


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes per GPU of one training step, by term."""

    weights: float
    gradients: float
    optimizer: float  # on the GPU (0 when offloaded)
    optimizer_on_cpu: float  # in host memory, per GPU's share
    reference: float  # the frozen reference policy of the KL term
    activations: float
    logits: float

    @property
    def gpu_total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.reference + self.activations + self.logits


def logit_bytes(precision: str) -> int:
    """Bytes per logit value alive at a training step's peak (module docstring: measured)."""
    return 29 if precision == "bf16" else 20


#: Bytes one decoder layer keeps for the backward pass per token and hidden unit, fused attention
#: (the ``c`` of ``s*b*h*c``; module docstring: measured on Hugging Face's Qwen3).
ACTIVATION_BYTES = {"bf16": 70, "fp32": 120}


def training_memory(shape: ModelShape, *, gpus: int, zero_stage: int, precision: str, offload_optimizer: bool,
                    micro_batch: int, seq_len: int, gradient_checkpointing: bool, flash_attention: bool,
                    reference_model: bool, scored_positions: int | None = None,
                    logits_chunk: int = 0) -> TrainingMemory:
    """Bytes per GPU of a training step under ZeRO ``zero_stage`` (0 = plain data parallel).
    ``scored_positions``: positions per row that go through the output layer (default
    ``seq_len``); ``logits_chunk``: 0 for all of a micro-batch's at once, else at most
    that many at once."""
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    if precision not in ("bf16", "fp32"):
        raise ValueError(f"precision must be bf16 or fp32, got {precision!r}")
    p = shape.parameters()
    width = 2 if precision == "bf16" else 4
    optimizer_bytes = 12 if precision == "bf16" else 8  # fp32 master + m + v, or m + v
    weights = width * p / (gpus if zero_stage >= 3 else 1)
    gradients = width * p / (gpus if zero_stage >= 2 else 1)
    optimizer = optimizer_bytes * p / (gpus if zero_stage >= 1 else 1)
    # The frozen reference policy is a whole 16-bit copy on every rank, at every ZeRO stage
    # (the DeepSpeed engine does not shard it: its forward needs no collective).
    reference = 2 * p if reference_model else 0.0
    b, s, h = micro_batch, seq_len, shape.hidden_size
    scores = 0 if flash_attention else 5 * shape.num_heads * s / h * width / 2
    per_layer = s * b * h * (ACTIVATION_BYTES[precision] + scores)
    activations = (shape.num_layers * width * s * b * h + per_layer) if gradient_checkpointing else (
        shape.num_layers * per_layer)
    if logits_chunk < 0:
        raise ValueError(f"logits_chunk must be >= 0, got {logits_chunk}")
    rows = b * (s if scored_positions is None else scored_positions)
    logits = (min(rows, logits_chunk) if logits_chunk else rows) * shape.vocab_size * logit_bytes(precision)
    return TrainingMemory(weights, gradients, 0.0 if offload_optimizer else optimizer,
                          optimizer if offload_optimizer else 0.0, reference, activations, logits)


def kv_cache_sequences(shape: ModelShape, *, gpu_bytes: float, memory_fraction: float, seq_len: int,
                       weights_bytes: float) -> float:
    """How many full-length sequences the rollout engine's KV cache holds at once
    on one GPU: the fraction it may use, minus the weights, over one sequence's cache."""
    free = gpu_bytes * memory_fraction - weights_bytes
    return max(free, 0.0) / (shape.kv_bytes_per_token() * seq_len)
