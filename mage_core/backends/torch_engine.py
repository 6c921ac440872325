"""The plain-torch TrainEngine: policy, frozen reference, AdamW (CPU default).

Implements ``mage_core.backends.base.TrainEngine`` for any HF causal LM (the
embedded default is a tiny ``Qwen3ForCausalLM``). docs/method.md section 6: PPO
clipped surrogate, token-mean aggregation, entropy bonus, KL loss to the
reference policy.

Log-probabilities (used for old/reference log-probs and inside ``step``):

- free mode: a row is prompt + response (right-padded; the response's last
  token is only a target, so it is left out of the row); the log-probability of
  each response token given its prefix, and the entropy of the full-vocabulary
  distribution at that position.
- constrained mode: the score of candidate j is the sum of its tokens'
  log-probabilities given the prompt; the choice's log-probability is the
  log-softmax of the scores over the sample's candidates, the entropy that of
  this softmax. When every candidate of a sample is one token, the sample is
  read at one position: the last of its prompt; otherwise one row per
  (prompt, candidate).

Prefix packing (``pack_prefixes``, on by default): the decisions of one
meta-episode share an append-only context, so each decision's prompt is a
prefix of the next one's. Single-token constrained samples whose prompt is a
prefix of another such sample's prompt in the same micro-batch are read from
that longer prompt's row, at position len(prompt) - 1: with causal attention
and positions counted from 0 in every row (right padding only), the logits
there are those of the prompt alone. A meta-episode of k decisions then costs
one row instead of k rows of growing length. The grouping sorts the prompts,
so it does not depend on the order of the samples (a shuffled mini-batch
packs as well as an ordered batch), and the token budget counts a packed row
once. Only the hidden states at the queried positions go through the output
layer, so a packed row does not hold logits (vocabulary-wide) for all of its
positions.

A free sample contributes len(response) tokens to the token-mean, a
constrained one exactly one. Samples are packed into micro-batches by a token
budget (rows x padded length); gradients are accumulated with each
micro-batch's loss scaled by its share of the mini-batch's tokens, so the
update does not depend on the budget (up to float rounding).

The model is kept in eval mode (dropout off) so that the log-probs of
``logprobs`` and those of ``step`` come from the same function: the first PPO
step of an iteration sees a ratio of exactly 1.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from mage_core.algos.losses import entropy_from_logits, kl_penalty, masked_mean, ppo_clip_loss
from mage_core.backends.base import LossSettings, Sample

# Score of a missing candidate slot when a sample has fewer candidates than the
# widest sample of its micro-batch: exp() of it is exactly 0 in float32, and it
# is finite, so 0 * FILL stays 0 (no NaN in the entropy or its gradient).
_MISSING_CANDIDATE = -1.0e9
POLICIES = ("current", "reference")


@dataclass
class _Plan:
    """How one micro-batch is laid out: rows to run, positions to read, gathers."""

    rows: list[list[int]] = field(default_factory=list)
    q_row: list[int] = field(default_factory=list)  # query q reads logits at (q_row[q], q_pos[q])
    q_pos: list[int] = field(default_factory=list)
    tok_q: list[int] = field(default_factory=list)  # token gather t: log p(tok_target[t]) at query tok_q[t]
    tok_target: list[int] = field(default_factory=list)
    # per sample, in micro-batch order: ("free", first token gather, num tokens)
    # or ("constrained", row of the constrained table)
    layout: list[tuple] = field(default_factory=list)
    cand_tok_start: int = 0  # token gathers from here on belong to candidates
    cand_of_tok: list[int] = field(default_factory=list)  # candidate id of each candidate token
    cand_sample: list[int] = field(default_factory=list)  # constrained-table row of each candidate
    cand_slot: list[int] = field(default_factory=list)  # its column (index among the sample's candidates)
    choices: list[int] = field(default_factory=list)  # per constrained-table row
    max_candidates: int = 0


def _single_token(sample: Sample) -> bool:
    """A constrained sample whose candidates are all one token: one query, at the
    prompt's last position (packable into a longer prompt's row)."""
    return sample.candidates is not None and all(len(c) == 1 for c in sample.candidates)


def _rows_of(sample: Sample) -> list[list[int]]:
    # The last token of a continuation is only a target, never an input.
    if sample.response is not None:
        return [sample.prompt + sample.response[:-1]]
    assert sample.candidates is not None
    if _single_token(sample):
        return [list(sample.prompt)]
    return [sample.prompt + c[:-1] for c in sample.candidates]


def _cost(sample: Sample) -> tuple[int, int]:
    """(rows, longest row) of a sample."""
    rows = _rows_of(sample)
    return len(rows), max(len(r) for r in rows)


def num_tokens(sample: Sample) -> int:
    """What a sample weighs in the token-mean: len(response), or 1 for a choice."""
    return len(sample.response) if sample.response is not None else 1


def prefix_groups(prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Indices of ``prompts`` grouped so that every prompt of a group is a prefix
    of the group's last prompt (its longest; the row the group is read from).

    Sorted lexicographically, the prompts that extend a prompt p form a block
    right after p; so p is a prefix of some other prompt exactly when it is a
    prefix of its successor, and walking the sorted list, a group ends at the
    first prompt that is not a prefix of the next one. That gives the fewest
    rows (one per prompt that no other prompt extends) whatever the input
    order; equal prompts share a row. Groups come in sorted order."""
    order = sorted(range(len(prompts)), key=lambda i: (tuple(prompts[i]), i))
    groups: list[list[int]] = []
    current: list[int] = []
    for k, i in enumerate(order):
        current.append(i)
        nxt = prompts[order[k + 1]] if k + 1 < len(order) else None
        p = prompts[i]
        if nxt is None or len(nxt) < len(p) or list(nxt[: len(p)]) != list(p):
            groups.append(current)
            current = []
    return groups


def _units(samples: Sequence[Sample], pack_prefixes: bool) -> list[tuple[list[int], int, int]]:
    """What goes into a micro-batch together: (sample indices, rows, longest row).
    A packed group of single-token constrained samples is one unit of one row;
    every other sample is a unit of its own."""
    packed = [i for i, s in enumerate(samples) if pack_prefixes and _single_token(s)]
    units: list[tuple[list[int], int, int]] = []
    for i, s in enumerate(samples):
        if not (pack_prefixes and _single_token(s)):
            units.append(([i], *_cost(s)))
    for group in prefix_groups([samples[i].prompt for i in packed]):
        members = sorted(packed[g] for g in group)
        units.append((members, 1, len(samples[packed[group[-1]]].prompt)))
    return units


def micro_batches(samples: Sequence[Sample], max_tokens: int, pack_prefixes: bool = True) -> list[list[int]]:
    """Indices of ``samples`` packed into micro-batches of at most ``max_tokens``
    padded tokens (rows x longest row). Sorted by length first so that rows of
    similar length share a micro-batch (less padding); a unit larger than the
    budget goes alone. With ``pack_prefixes`` a prefix group (see
    ``prefix_groups``) is kept in one micro-batch and counted as its one row."""
    units = _units(samples, pack_prefixes)
    order = sorted(range(len(units)), key=lambda u: (units[u][2], units[u][0][0]), reverse=True)
    batches: list[list[int]] = []
    current: list[int] = []
    rows = longest = 0
    for u in order:
        members, n, length = units[u]
        if current and (rows + n) * max(longest, length) > max_tokens:
            batches.append(current)
            current, rows, longest = [], 0, 0
        current += members
        rows += n
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches


def _plan(samples: Sequence[Sample], pack_prefixes: bool = True) -> _Plan:
    plan = _Plan()
    candidate_samples: list[Sample] = []
    for s in samples:
        if s.response is not None:
            r = len(plan.rows)  # row index of this sample
            plan.rows.append(s.prompt + s.response[:-1])
            p, n = len(s.prompt), len(s.response)
            plan.layout.append(("free", len(plan.tok_q), n))
            for t in range(n):  # the logits at position p-1+t predict response token t
                plan.tok_q.append(len(plan.q_row))
                plan.tok_target.append(s.response[t])
                plan.q_row.append(r)
                plan.q_pos.append(p - 1 + t)
        else:
            plan.layout.append(("constrained", len(candidate_samples)))
            candidate_samples.append(s)
    # Single-token samples read from the row of their prefix group (a group of
    # one without packing); a group's row is added when its first member comes.
    singles = [k for k, s in enumerate(candidate_samples) if _single_token(s)]
    groups = (prefix_groups([candidate_samples[k].prompt for k in singles]) if pack_prefixes
              else [[g] for g in range(len(singles))])
    group_of: dict[int, int] = {}  # constrained-table row -> its group
    for g, group in enumerate(groups):
        for m in group:
            group_of[singles[m]] = g
    group_row: dict[int, int] = {}  # group -> its row in plan.rows
    # Candidate tokens come after all free tokens, so that the free part of the
    # token gathers is one contiguous block.
    plan.cand_tok_start = len(plan.tok_q)
    num_candidates = 0
    for row_in_table, s in enumerate(candidate_samples):
        assert s.candidates is not None and s.choice is not None
        p = len(s.prompt)
        plan.choices.append(s.choice)
        plan.max_candidates = max(plan.max_candidates, len(s.candidates))
        single = row_in_table in group_of
        if single:  # one query: the next-token distribution after the prompt
            g = group_of[row_in_table]
            if g not in group_row:
                group_row[g] = len(plan.rows)
                plan.rows.append(list(candidate_samples[singles[groups[g][-1]]].prompt))
            q = len(plan.q_row)
            plan.q_row.append(group_row[g])
            plan.q_pos.append(p - 1)
        for j, cand in enumerate(s.candidates):
            if not single:
                plan.rows.append(s.prompt + cand[:-1])
                q = len(plan.q_row)
                for t in range(len(cand)):
                    plan.q_row.append(len(plan.rows) - 1)
                    plan.q_pos.append(p - 1 + t)
            for t, tok in enumerate(cand):
                plan.tok_q.append(q if single else q + t)
                plan.tok_target.append(tok)
                plan.cand_of_tok.append(num_candidates)
            plan.cand_sample.append(row_in_table)
            plan.cand_slot.append(j)
            num_candidates += 1
    return plan


def query_logits(model: torch.nn.Module, ids: torch.Tensor, q_row: torch.Tensor,
                  q_pos: torch.Tensor) -> torch.Tensor:
    """The model's logits at (q_row[q], q_pos[q]) for every query q: [Q, V].

    Only the queried hidden states go through the output layer (a pre-hook on
    ``get_output_embeddings()`` gathers them): a packed row has queries spread
    over its length, and logits for all of its positions would cost rows x
    length x vocab memory for a real vocabulary. What the model's forward does
    to the logits after that layer (e.g. soft-capping) is elementwise and still
    applies. A model without an output-embeddings module falls back to
    ``logits_to_keep`` (all positions from the earliest query on)."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if get_head is not None else None
    if head is None:
        first = int(q_pos.min())
        out = model(input_ids=ids, use_cache=False, logits_to_keep=ids.shape[1] - first)
        return out.logits[q_row, q_pos - first]

    def gather(module: torch.nn.Module, args: tuple) -> tuple:
        hidden = args[0]
        if tuple(hidden.shape[:2]) != tuple(ids.shape):
            raise RuntimeError(f"evaluate_samples: the output layer of {type(model).__name__} got hidden states "
                               f"of shape {tuple(hidden.shape)}, expected ({ids.shape[0]}, {ids.shape[1]}, hidden); "
                               "this model's forward does not apply get_output_embeddings() to all positions")
        return (hidden[q_row, q_pos].unsqueeze(0), *args[1:])

    handle = head.register_forward_pre_hook(gather)
    try:
        out = model(input_ids=ids, use_cache=False)
    finally:
        handle.remove()
    return out.logits[0]


def right_padded(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """``rows`` as one [R, L] id tensor, right-padded with 0 (the pad id is never
    read: causal attention keeps real tokens from seeing the pads to their right)."""
    length = max(len(r) for r in rows)
    return torch.tensor([list(r) + [0] * (length - len(r)) for r in rows], dtype=torch.long)


def chunked_token_logprobs(model: torch.nn.Module, ids: torch.Tensor, q_row: torch.Tensor, q_pos: torch.Tensor,
                           tok_q: torch.Tensor, tok_target: torch.Tensor, chunk: int,
                           with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """What ``query_logits`` + log-softmax give, without the [Q, V] logits: the
    log-probability of ``tok_target[t]`` at query ``tok_q[t]`` ([T]) and the
    entropy at every query ([Q], or None), both in float32.

    The queries go through the output layer ``chunk`` at a time; each chunk's
    logits live only inside a ``torch.utils.checkpoint`` region that keeps its
    input (the chunk's hidden states) and recomputes the logits in the backward
    pass, so at most one chunk's logits (chunk x vocabulary) exist at once,
    forward or backward. Exact: the same formulas per query (log p = z - logsumexp
    z; entropy as ``entropy_from_logits``), equal to the dense path up to float
    rounding (tests/unit/test_chunked_logprobs.py, values and gradients).

    The chunks run inside the output layer's own call (its ``forward`` is swapped
    for the call's duration), so a wrapper that gathers the layer's weights around
    its call, such as DeepSpeed ZeRO-3, sees one ordinary call. The model's
    ``logits`` output carries the packed results; a model that changes its logits
    after the output layer (e.g. soft-capping) is refused, as its chunked values
    would not be its own."""
    if chunk < 1:
        raise ValueError(f"chunked_token_logprobs: chunk must be >= 1, got {chunk}")
    config = getattr(model, "config", None)
    if getattr(config, "final_logit_softcapping", None):
        raise ValueError(f"backend.logits_chunk_tokens: {type(model).__name__} soft-caps its logits after the "
                         "output layer, which the chunked path does not apply; set backend.logits_chunk_tokens: 0")
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if get_head is not None else None
    if head is None:
        raise ValueError(f"backend.logits_chunk_tokens: {type(model).__name__} has no get_output_embeddings(); "
                         "set backend.logits_chunk_tokens: 0")
    num_queries, num_tokens_ = int(q_row.numel()), int(tok_q.numel())
    starts = list(range(0, num_queries, chunk))
    order = torch.argsort(tok_q, stable=True)  # tokens grouped by query, so by chunk
    bounds = torch.searchsorted(tok_q[order], torch.tensor(starts + [num_queries], device=tok_q.device)).tolist()
    inverse = torch.argsort(order)
    original = head.forward

    def stats(hidden: torch.Tensor, local_q: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = original(hidden).float()  # [c, V]: the only logits alive at a time
        lse = torch.logsumexp(logits, dim=-1)  # [c]
        logp = logits[local_q, targets] - lse[local_q]  # [t]
        if not with_entropy:
            return (logp,)
        return logp, entropy_from_logits(logits)

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        if tuple(hidden.shape[:2]) != tuple(ids.shape):
            raise RuntimeError(f"chunked_token_logprobs: the output layer of {type(model).__name__} got hidden "
                               f"states of shape {tuple(hidden.shape)}, expected ({ids.shape[0]}, {ids.shape[1]}, "
                               "hidden); set backend.logits_chunk_tokens: 0 for this model")
        queried = hidden[q_row, q_pos]  # [Q, H]
        logps, entropies = [], []
        for c, start in enumerate(starts):
            sel = order[bounds[c]: bounds[c + 1]]
            args = (queried[start: start + chunk], tok_q[sel] - start, tok_target[sel])
            if torch.is_grad_enabled() and queried.requires_grad:
                out = torch.utils.checkpoint.checkpoint(stats, *args, use_reentrant=False)
            else:
                out = stats(*args)
            logps.append(out[0])
            if with_entropy:
                entropies.append(out[1])
        packed = torch.cat(logps)[inverse] if num_tokens_ else queried.new_zeros(0, dtype=torch.float32)
        if with_entropy:
            packed = torch.cat([packed, torch.cat(entropies)])
        return packed.unsqueeze(0)

    head.forward = forward  # type: ignore[method-assign]
    try:
        out = model(input_ids=ids, use_cache=False)
    finally:
        del head.forward  # back to the class's forward
    packed = out.logits[0]
    if tuple(packed.shape) != (num_tokens_ + (num_queries if with_entropy else 0),):
        raise RuntimeError(f"chunked_token_logprobs: {type(model).__name__} changed the output layer's result "
                           f"(shape {tuple(out.logits.shape)}); set backend.logits_chunk_tokens: 0 for this model")
    return packed[:num_tokens_], (packed[num_tokens_:] if with_entropy else None)


def evaluate_flat(
    model: torch.nn.Module, samples: Sequence[Sample], with_entropy: bool = True, pack_prefixes: bool = True,
    logits_chunk: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One forward pass over a micro-batch: the log-probs (and entropies) of every
    sample's tokens, flat in sample order: [sum of num_tokens(s)] each (a free
    sample's response tokens, one entry per constrained sample). Differentiable
    (call under ``torch.no_grad()`` to score). Computed in float32 whatever the
    model's dtype. ``pack_prefixes``: see the module docstring. ``logits_chunk``:
    0 computes the queries' logits at once ([Q, V]); N > 0 N queries at a time
    (``chunked_token_logprobs``: the same values, bounded memory).

    Flat, so that the loss of a mini-batch of thousands of one-token samples is
    a few tensor ops and its backward one gather, not a graph node per sample."""
    plan = _plan(samples, pack_prefixes)
    device = next(model.parameters()).device
    # No attention mask: with right padding and causal attention a real token
    # only ever attends to earlier, real tokens, so the mask would change nothing
    # we read, and without it torch takes its faster plain-causal path.
    ids = right_padded(plan.rows).to(device)
    q_row, q_pos = torch.tensor(plan.q_row, device=device), torch.tensor(plan.q_pos, device=device)
    tok_q = torch.tensor(plan.tok_q, device=device, dtype=torch.long)
    tok_target = torch.tensor(plan.tok_target, device=device, dtype=torch.long)
    free_q = tok_q[: plan.cand_tok_start]
    free_entropy = None
    if logits_chunk > 0:
        need_entropy = with_entropy and plan.cand_tok_start > 0
        tok_logp, query_entropy = chunked_token_logprobs(model, ids, q_row, q_pos, tok_q, tok_target, logits_chunk,
                                                         need_entropy)  # [T], [Q]
        if with_entropy:
            free_entropy = query_entropy[free_q] if query_entropy is not None else torch.zeros(0, device=device)
    else:
        logits = query_logits(model, ids, q_row, q_pos).float()  # [Q, V]
        query_logp = torch.log_softmax(logits, dim=-1)  # [Q, V]
        tok_logp = query_logp[tok_q, tok_target]  # [T]
        if with_entropy:
            free_entropy = entropy_from_logits(logits[free_q])  # [T_free]

    choice_logp = choice_entropy = torch.zeros(0, device=device)
    if plan.choices:
        num_candidates = len(plan.cand_sample)
        cand_tok = tok_logp[plan.cand_tok_start:]  # [T_cand]
        scores = torch.zeros(num_candidates, device=device, dtype=cand_tok.dtype).index_add(
            0, torch.tensor(plan.cand_of_tok, device=device), cand_tok)  # [Ncand]
        table = torch.full((len(plan.choices), plan.max_candidates), _MISSING_CANDIDATE,
                           device=device, dtype=scores.dtype)  # [S_c, C]
        table = table.index_put((torch.tensor(plan.cand_sample, device=device),
                                 torch.tensor(plan.cand_slot, device=device)), scores)
        table_logp = torch.log_softmax(table, dim=-1)  # [S_c, C]
        rows = torch.arange(len(plan.choices), device=device)
        choice_logp = table_logp[rows, torch.tensor(plan.choices, device=device)]  # [S_c]
        if with_entropy:
            choice_entropy = entropy_from_logits(table)  # [S_c]

    # Sample order: a free sample's tokens sit at [start, start + n) of the free
    # block, constrained sample k right after the free block, at its offset + k.
    order: list[int] = []
    for entry in plan.layout:
        if entry[0] == "free":
            order.extend(range(entry[1], entry[1] + entry[2]))
        else:
            order.append(plan.cand_tok_start + entry[1])
    index = torch.tensor(order, device=device, dtype=torch.long)
    logp = torch.cat([tok_logp[: plan.cand_tok_start], choice_logp])[index]
    entropy = torch.cat([free_entropy, choice_entropy])[index] if free_entropy is not None else None
    return logp, entropy


def evaluate_samples(
    model: torch.nn.Module, samples: Sequence[Sample], with_entropy: bool = True, pack_prefixes: bool = True,
    logits_chunk: int = 0,
) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """``evaluate_flat`` split per sample: free sample -> [len(response)] each;
    constrained sample -> [1] each."""
    logp, entropy = evaluate_flat(model, samples, with_entropy, pack_prefixes, logits_chunk)
    counts = [num_tokens(s) for s in samples]
    return list(logp.split(counts)), (list(entropy.split(counts)) if entropy is not None else None)


def _validate(samples: Sequence[Sample], what: str) -> None:
    if not samples:
        raise ValueError(f"{what}: samples is empty")
    for i, s in enumerate(samples):
        if not s.prompt:
            raise ValueError(f"{what}: samples[{i}].prompt is empty; a prompt needs at least one token "
                             "(e.g. BOS) to condition the first action token on")


class TorchEngine:
    """``TrainEngine`` on one device with plain torch (docs/architecture.md, "Backends behind protocols").

    ``reference_model``: None (no KL; ``logprobs(policy="reference")`` raises),
    "copy" (a frozen deepcopy of the initial policy) or a module to use as is
    (frozen here). ``max_grad_norm`` None or <= 0 disables clipping.
    ``pack_prefixes``: read single-token constrained samples whose prompt is a
    prefix of another's from that longer row (module docstring); False gives
    every sample its own row(s) (same results up to float rounding).
    ``logits_chunk_tokens``: 0 computes a micro-batch's logits at once; N > 0
    N queried positions at a time (``chunked_token_logprobs``: the same values,
    at most N x vocabulary logits in memory; ``backend.logits_chunk_tokens``).
    """

    #: Whether a process holds only slices of the weights (the DeepSpeed engine at ZeRO-3).
    sharded_weights = False

    def __init__(
        self,
        model: torch.nn.Module,
        learning_rate: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        max_grad_norm: float | None = 1.0,
        max_tokens_per_micro_batch: int = 16384,
        reference_model: None | str | torch.nn.Module = None,
        pack_prefixes: bool = True,
        logits_chunk_tokens: int = 0,
    ) -> None:
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        if max_tokens_per_micro_batch < 1:
            raise ValueError(f"max_tokens_per_micro_batch must be >= 1, got {max_tokens_per_micro_batch}")
        self.model = model
        self.model.eval()  # dropout off: see the module docstring
        if reference_model is None:
            self.reference: torch.nn.Module | None = None
        elif isinstance(reference_model, str):
            if reference_model != "copy":
                raise ValueError(f"reference_model must be None, 'copy' or a module, got {reference_model!r}")
            self.reference = copy.deepcopy(model)
        else:
            self.reference = reference_model
        if self.reference is not None:
            self.reference.eval()
            self.reference.requires_grad_(False)
        self.max_grad_norm = max_grad_norm
        self.max_tokens_per_micro_batch = max_tokens_per_micro_batch
        self.pack_prefixes = pack_prefixes
        if not isinstance(logits_chunk_tokens, int) or logits_chunk_tokens < 0:
            raise ValueError(f"logits_chunk_tokens must be an int >= 0 (0: all at once), got {logits_chunk_tokens!r}")
        self.logits_chunk_tokens = logits_chunk_tokens
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=learning_rate, betas=betas,
                                           weight_decay=weight_decay)
        self.num_steps = 0
        self.num_skipped_steps = 0  # steps whose gradient was not finite (no update)

    # -- log-probabilities --------------------------------------------------------------------

    def _model(self, policy: str) -> torch.nn.Module:
        if policy == "current":
            return self.model
        if policy == "reference":
            if self.reference is None:
                raise ValueError("logprobs(policy='reference'): this engine has no reference model; "
                                 "build it with reference_model='copy' to use a KL loss")
            return self.reference
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")

    @torch.no_grad()
    def score_samples(
        self, samples: Sequence[Sample], policy: str = "current", with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
        """Per-sample log-probs and entropies (as ``evaluate_samples``), micro-batched,
        in the order of ``samples``, without gradients, on the CPU."""
        _validate(samples, "logprobs")
        model = self._model(policy)
        logps: list[torch.Tensor | None] = [None] * len(samples)
        entropies: list[torch.Tensor | None] = [None] * len(samples)
        batches = micro_batches(samples, self.max_tokens_per_micro_batch, self.pack_prefixes)
        for k in range(self._forward_passes(len(batches), policy)):
            # A pass beyond this rank's micro-batches keeps step with a rank that has more
            # (ZeRO-3 gathers the weights collectively at every forward); its result is dropped.
            batch = batches[k] if k < len(batches) else batches[0]
            lp, ent = evaluate_samples(model, [samples[i] for i in batch], with_entropy, self.pack_prefixes,
                                       self.logits_chunk_tokens)
            if k >= len(batches):
                continue
            for j, i in enumerate(batch):
                logps[i] = lp[j].detach().cpu()
                if ent is not None:
                    entropies[i] = ent[j].detach().cpu()
        return logps, (entropies if with_entropy else None)  # type: ignore[return-value]

    def logprobs(self, samples: Sequence[Sample], policy: str = "current") -> list[torch.Tensor]:
        return self.score_samples(samples, policy, with_entropy=False)[0]

    # -- the update ---------------------------------------------------------------------------

    def set_learning_rate(self, learning_rate: float) -> None:
        if not learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def _check_step_inputs(self, samples: Sequence[Sample], old_logprobs: Sequence[torch.Tensor],
                           ref_logprobs: Sequence[torch.Tensor] | None, loss: LossSettings) -> None:
        _validate(samples, "step")
        if len(old_logprobs) != len(samples):
            raise ValueError(f"step: {len(old_logprobs)} old_logprobs for {len(samples)} samples")
        if ref_logprobs is not None and len(ref_logprobs) != len(samples):
            raise ValueError(f"step: {len(ref_logprobs)} ref_logprobs for {len(samples)} samples")
        if loss.kl_coef > 0 and ref_logprobs is None:
            raise ValueError(f"step: loss.kl_coef is {loss.kl_coef} but ref_logprobs is None; "
                             "pass engine.logprobs(samples, policy='reference')")
        for name, seq in (("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
            for i, (s, t) in enumerate(zip(samples, seq or [])):
                if tuple(t.shape) != (num_tokens(s),):
                    raise ValueError(f"step: {name}[{i}] has shape {tuple(t.shape)}, expected "
                                     f"({num_tokens(s)},) for a {s.mode}-mode sample")

    def step(
        self,
        samples: Sequence[Sample],
        old_logprobs: Sequence[torch.Tensor],
        ref_logprobs: Sequence[torch.Tensor] | None,
        loss: LossSettings,
    ) -> dict[str, float]:
        """One AdamW step on one PPO mini-batch (docs/method.md section 6).

        loss = ppo_clip_loss - entropy_coef * entropy + kl_coef * kl, each a
        token-mean over the whole mini-batch. Returns floats: loss, pg_loss,
        entropy, kl (when ref_logprobs is given), clip_frac, approx_kl,
        grad_norm (before clipping), num_tokens, skipped (1.0 when the gradient
        was not finite and no update was made).
        """
        self._check_step_inputs(samples, old_logprobs, ref_logprobs, loss)
        device = next(self.model.parameters()).device
        total = sum(num_tokens(s) for s in samples)
        sums = {"loss": 0.0, "pg_loss": 0.0, "entropy": 0.0, "clip_frac": 0.0, "approx_kl": 0.0}
        if ref_logprobs is not None:
            sums["kl"] = 0.0
        self.optimizer.zero_grad(set_to_none=True)
        batches = list(micro_batches(samples, self.max_tokens_per_micro_batch, self.pack_prefixes))
        passes, scale = self._gradient_plan(len(batches), total)
        for k in range(passes):
            # A data-parallel rank with fewer micro-batches than another keeps step with
            # it by running its first micro-batch again with weight 0: a real forward,
            # so the gradients become ready in the same order on every rank (ZeRO
            # buckets them in that order).
            real = k < len(batches)
            batch = batches[k] if real else batches[0]
            part = [samples[i] for i in batch]
            self._before_forward()
            logp, entropy = evaluate_flat(self.model, part, with_entropy=True, pack_prefixes=self.pack_prefixes,
                                          logits_chunk=self.logits_chunk_tokens)  # [n_m] each
            assert entropy is not None
            old = torch.cat([old_logprobs[i] for i in batch]).to(device, torch.float32)  # [n_m]
            adv = torch.tensor([samples[i].advantage for i in batch], dtype=torch.float32).repeat_interleave(
                torch.tensor([num_tokens(samples[i]) for i in batch])).to(device)  # [n_m]
            mask = torch.ones_like(logp)
            share = logp.numel() / total if real else 0.0  # this micro-batch's share of the token-mean
            pg_loss, clip_frac, approx_kl = ppo_clip_loss(logp, old, adv, mask, loss.clip_ratio)
            entropy_mean = masked_mean(entropy, mask)
            objective = pg_loss - loss.entropy_coef * entropy_mean
            if ref_logprobs is not None:
                ref = torch.cat([ref_logprobs[i] for i in batch]).to(device, torch.float32)  # [n_m]
                kl_mean = masked_mean(kl_penalty(logp, ref, loss.kl_estimator), mask)
                objective = objective + loss.kl_coef * kl_mean
                sums["kl"] += share * kl_mean.item()
            self._backward(objective * (share * scale), last=k == passes - 1)
            sums["loss"] += share * objective.item()
            sums["pg_loss"] += share * pg_loss.item()
            sums["entropy"] += share * entropy_mean.item()
            sums["clip_frac"] += share * clip_frac.item()
            sums["approx_kl"] += share * approx_kl.item()
        grad_norm, applied = self._apply_update()
        if applied:
            self.num_steps += 1
        else:  # as verl: a non-finite gradient would poison AdamW's moments
            self.num_skipped_steps += 1
        return {**sums, "grad_norm": grad_norm, "num_tokens": float(total), "skipped": float(not applied)}

    def _forward_passes(self, num_micro_batches: int, policy: str) -> int:
        """Forward passes ``score_samples`` runs for this many micro-batches: as many
        (one process; a sharded-weights engine agrees on the most across ranks)."""
        return num_micro_batches

    def _gradient_plan(self, num_micro_batches: int, num_tokens: int) -> tuple[int, float]:
        """(backward passes to run, factor on each micro-batch's loss). One process:
        every micro-batch once, factor 1. Data-parallel engines agree on these
        across ranks (the DeepSpeed engine)."""
        return num_micro_batches, 1.0

    def _before_forward(self) -> None:
        """Bookkeeping before a training micro-batch's forward pass (none here)."""

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        """Accumulate one micro-batch's gradient (``last``: the mini-batch's final one)."""
        loss.backward()

    def _apply_update(self) -> tuple[float, bool]:
        """Clip and apply the accumulated gradient; returns (norm before clipping, applied).
        A non-finite norm skips the update; the gradient is cleared either way."""
        clip = self.max_grad_norm if self.max_grad_norm and self.max_grad_norm > 0 else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        applied = math.isfinite(grad_norm)
        if applied:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, applied

    # -- state --------------------------------------------------------------------------------

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """The live policy weights (detached views, not copies): sync them into a
        generator right away, or clone them to keep them."""
        return {k: v.detach() for k, v in self.model.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """A snapshot (copies) of policy, reference, optimizer and counters."""
        return {
            "policy": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "reference": (None if self.reference is None
                          else {k: v.detach().clone() for k, v in self.reference.state_dict().items()}),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
            "num_steps": self.num_steps,
            "num_skipped_steps": self.num_skipped_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a ``state_dict()``; a missing "reference" key means no reference."""
        missing = [k for k in ("policy", "optimizer", "num_steps") if k not in state]
        if missing:
            raise ValueError(f"TorchEngine.load_state_dict: state lacks {missing}")
        reference = state["reference"] if "reference" in state else None
        if (reference is None) != (self.reference is None):
            has = "has" if reference is not None else "has no"
            this = "has" if self.reference is not None else "has no"
            raise ValueError(f"TorchEngine.load_state_dict: the state {has} reference model but this engine "
                             f"{this}; build the engine with the same reference_model setting")
        self.model.load_state_dict(state["policy"])
        if self.reference is not None:
            self.reference.load_state_dict(reference)
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_steps = int(state["num_steps"])
        self.num_skipped_steps = int(state.get("num_skipped_steps", 0))
