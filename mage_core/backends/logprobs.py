"""The log-probabilities of a micro-batch of samples under a causal LM: how the
samples are laid out in rows, packed into micro-batches, and read from one
forward pass. ``TorchEngine`` (and the DeepSpeed engine through it) scores and
trains with these; they live apart from its optimizer and state, and
``torch_engine`` re-exports them.

Log-probabilities (used for old/reference log-probs and inside ``step``):

- free mode: a row is prompt + response (right-padded; the response's last
  token is only a target, so it is left out of the row); the log-probability of
  each response token given its prefix, and the entropy of the full-vocabulary
  distribution at that position.
- constrained mode: the score of candidate j is the sum of its tokens'
  log-probabilities given the prompt; the choice's log-probability is the
  log-softmax of the scores over the sample's candidates, the entropy that of
  this softmax. When every candidate of a sample is one token, the sample is
  read at one position: the last of its prompt. Otherwise, unpacked, one row
  per (prompt, candidate); packed, see below.

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

Candidates of several tokens (a command read word by word) pack too: every
candidate's tokens but its last are appended to the row of the sample's prefix
group as a *tail*, which attends to the sample's own prompt and to its own
earlier tokens only (a 4-D attention mask) and is numbered from len(prompt)
(position ids), so each tail token sees exactly what it would see in a row of
its own, prompt + candidate. A sample's candidates share one query for their
first token (the prompt's last position). A decision with K candidates of n
tokens then costs K(n-1) tokens of its meta-episode's row instead of K rows of
prompt length. Rows without tails keep the plain causal path (no mask).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from mage_core.algos.losses import entropy_from_logits
from mage_core.backends.base import Sample

# Score of a missing candidate slot when a sample has fewer candidates than the
# widest sample of its micro-batch: exp() of it is exactly 0 in float32, and it
# is finite, so 0 * FILL stays 0 (no NaN in the entropy or its gradient).
_MISSING_CANDIDATE = -1.0e9


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
    # per row, the candidate tails appended to it: (start, length, length of the prompt they extend)
    tails: list[list[tuple[int, int, int]]] = field(default_factory=list)


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


def _tail_tokens(sample: Sample) -> int:
    """Tokens a constrained sample appends to its packed row: each candidate but its last token."""
    assert sample.candidates is not None
    return sum(len(c) - 1 for c in sample.candidates)


def _units(samples: Sequence[Sample], pack_prefixes: bool) -> list[tuple[list[int], int, int]]:
    """What goes into a micro-batch together: (sample indices, rows, longest row).
    With packing, a prefix group of constrained samples is one unit of one row (the
    group's longest prompt and its members' candidate tails); every other sample is
    a unit of its own."""
    packed = [i for i, s in enumerate(samples) if pack_prefixes and s.candidates is not None]
    units: list[tuple[list[int], int, int]] = []
    for i, s in enumerate(samples):
        if not (pack_prefixes and s.candidates is not None):
            units.append(([i], *_cost(s)))
    for group in prefix_groups([samples[i].prompt for i in packed]):
        members = sorted(packed[g] for g in group)
        length = len(samples[packed[group[-1]]].prompt) + sum(_tail_tokens(samples[m]) for m in members)
        units.append((members, 1, length))
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
    # Packed, every constrained sample is read from the row of its prefix group (its
    # candidates' tails appended to that row); unpacked, a single-token sample has a
    # row of its own and a multi-token one a row per candidate. A group's row is
    # added when its first member comes.
    if pack_prefixes:
        groups = prefix_groups([s.prompt for s in candidate_samples])
    else:
        groups = [[k] for k, s in enumerate(candidate_samples) if _single_token(s)]
    group_of: dict[int, int] = {}  # constrained-table row -> its group
    for g, group in enumerate(groups):
        for m in group:
            group_of[m] = g
    group_row: dict[int, int] = {}  # group -> its row in plan.rows
    plan.tails = [[] for _ in plan.rows]
    # Candidate tokens come after all free tokens, so that the free part of the
    # token gathers is one contiguous block.
    plan.cand_tok_start = len(plan.tok_q)
    num_candidates = 0
    for row_in_table, s in enumerate(candidate_samples):
        assert s.candidates is not None and s.choice is not None
        p = len(s.prompt)
        plan.choices.append(s.choice)
        plan.max_candidates = max(plan.max_candidates, len(s.candidates))
        grouped = row_in_table in group_of
        if grouped:  # first tokens: the next-token distribution after the prompt, one query for all
            g = group_of[row_in_table]
            if g not in group_row:
                group_row[g] = len(plan.rows)
                plan.rows.append(list(candidate_samples[groups[g][-1]].prompt))
                plan.tails.append([])
            r = group_row[g]
            first = len(plan.q_row)
            plan.q_row.append(r)
            plan.q_pos.append(p - 1)
        for j, cand in enumerate(s.candidates):
            if grouped:
                queries = [first]
                if len(cand) > 1:  # its tail: the tokens whose next token is read
                    start = len(plan.rows[r])
                    plan.rows[r].extend(cand[:-1])
                    plan.tails[r].append((start, len(cand) - 1, p))
                    queries += range(len(plan.q_row), len(plan.q_row) + len(cand) - 1)
                    plan.q_row.extend([r] * (len(cand) - 1))
                    plan.q_pos.extend(range(start, start + len(cand) - 1))
            else:
                plan.rows.append(s.prompt + cand[:-1])
                plan.tails.append([])
                queries = list(range(len(plan.q_row), len(plan.q_row) + len(cand)))
                plan.q_row.extend([len(plan.rows) - 1] * len(cand))
                plan.q_pos.extend(range(p - 1, p - 1 + len(cand)))
            for q, tok in zip(queries, cand):
                plan.tok_q.append(q)
                plan.tok_target.append(tok)
                plan.cand_of_tok.append(num_candidates)
            plan.cand_sample.append(row_in_table)
            plan.cand_slot.append(j)
            num_candidates += 1
    return plan


def query_logits(model: torch.nn.Module, ids: torch.Tensor, q_row: torch.Tensor,
                 q_pos: torch.Tensor, inputs: dict | None = None) -> torch.Tensor:
    """The model's logits at (q_row[q], q_pos[q]) for every query q: [Q, V].

    Only the queried hidden states go through the output layer (a pre-hook on
    ``get_output_embeddings()`` gathers them): a packed row has queries spread
    over its length, and logits for all of its positions would cost rows x
    length x vocab memory for a real vocabulary. What the model's forward does
    to the logits after that layer (e.g. soft-capping) is elementwise and still
    applies. A model without an output-embeddings module falls back to
    ``logits_to_keep`` (all positions from the earliest query on). ``inputs``: more
    keyword arguments of the forward (``tail_inputs``: a packed row's mask and positions)."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if get_head is not None else None
    if head is None:
        first = int(q_pos.min())
        out = model(input_ids=ids, use_cache=False, logits_to_keep=ids.shape[1] - first, **(inputs or {}))
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
        out = model(input_ids=ids, use_cache=False, **(inputs or {}))
    finally:
        handle.remove()
    return out.logits[0]


def right_padded(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """``rows`` as one [R, L] id tensor, right-padded with 0 (the pad id is never
    read: causal attention keeps real tokens from seeing the pads to their right)."""
    length = max(len(r) for r in rows)
    return torch.tensor([list(r) + [0] * (length - len(r)) for r in rows], dtype=torch.long)


def tail_inputs(model: torch.nn.Module, rows: Sequence[Sequence[int]], tails: Sequence[Sequence[tuple[int, int, int]]],
                length: int, device: torch.device) -> dict:
    """The forward's ``attention_mask`` and ``position_ids`` for rows that carry candidate
    tails (``_Plan.tails``: (start, length, prompt length) each), or {} when none does (the
    plain causal path). A tail token attends to the first ``prompt length`` tokens of its
    row and to its own tail up to itself, and is numbered as if it followed that prompt;
    every other position is plain causal. The mask is boolean (True: attend) for SDPA and
    additive for eager attention; other attention kernels take no such mask."""
    if not any(tails):
        return {}
    allowed = torch.ones(length, length, dtype=torch.bool, device=device).tril().repeat(len(rows), 1, 1)
    positions = torch.arange(length, device=device).repeat(len(rows), 1)
    for r, row_tails in enumerate(tails):
        for start, n, prompt in row_tails:
            end = start + n
            allowed[r, start:end] = False
            allowed[r, start:end, :prompt] = True
            allowed[r, start:end, start:end] = torch.ones(n, n, dtype=torch.bool, device=device).tril()
            positions[r, start:end] = torch.arange(prompt, prompt + n, device=device)
    kind = getattr(getattr(model, "config", None), "_attn_implementation", "sdpa")
    if kind == "sdpa":
        mask = allowed[:, None]
    elif kind == "eager":
        dtype = next(model.parameters()).dtype
        mask = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
            ~allowed, torch.finfo(dtype).min)[:, None]
    else:
        raise ValueError(f"packed candidates of several tokens need a 4-D attention mask, which {kind!r} attention "
                         "does not take: load the model with sdpa or eager attention, or build the engine with "
                         "pack_prefixes=False")
    return {"attention_mask": mask, "position_ids": positions}


def chunked_token_logprobs(model: torch.nn.Module, ids: torch.Tensor, q_row: torch.Tensor, q_pos: torch.Tensor,
                           tok_q: torch.Tensor, tok_target: torch.Tensor, chunk: int,
                           with_entropy: bool, inputs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
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
        out = model(input_ids=ids, use_cache=False, **(inputs or {}))
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
    # No attention mask unless a row carries candidate tails: with right padding and
    # causal attention a real token only ever attends to earlier, real tokens, so the
    # mask would change nothing we read, and without it torch takes its faster
    # plain-causal path.
    ids = right_padded(plan.rows).to(device)
    inputs = tail_inputs(model, plan.rows, plan.tails, ids.shape[1], device)
    q_row, q_pos = torch.tensor(plan.q_row, device=device), torch.tensor(plan.q_pos, device=device)
    tok_q = torch.tensor(plan.tok_q, device=device, dtype=torch.long)
    tok_target = torch.tensor(plan.tok_target, device=device, dtype=torch.long)
    free_q = tok_q[: plan.cand_tok_start]
    free_entropy = None
    if logits_chunk > 0:
        need_entropy = with_entropy and plan.cand_tok_start > 0
        tok_logp, query_entropy = chunked_token_logprobs(model, ids, q_row, q_pos, tok_q, tok_target, logits_chunk,
                                                         need_entropy, inputs)  # [T], [Q]
        if with_entropy:
            free_entropy = query_entropy[free_q] if query_entropy is not None else torch.zeros(0, device=device)
    else:
        logits = query_logits(model, ids, q_row, q_pos, inputs).float()  # [Q, V]
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
