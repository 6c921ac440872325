"""The ranks of a data-parallel training run, and what they exchange.

``mage train`` with ``backend.ranks`` N > 1 runs N processes (one per GPU, or N
CPU processes over gloo), started by ``torchrun`` (``launch_command``; the train
stage starts it itself). Every rank holds the same trainer state: the same
random generators, hence the same meta-episode specs and per-meta-episode seeds.
The work is split, the results are shared:

- rollouts: rank r plays its contiguous share of a call's meta-episodes
  (``Ranks.share``), each from its own seeded generator as in one process, and
  the finished meta-episodes are gathered on every rank in the call's order
  (``Ranks.gather``), so advantages are computed over whole groups whatever rank
  played them, and every rank sees the batch one process would have played;
- the update: every PPO mini-batch (a set of meta-episodes) is split over the
  ranks; the DeepSpeed engine scales each rank's loss so that the averaged
  gradient is the token mean of the whole mini-batch
  (``DeepSpeedEngine._gradient_plan``), and its step metrics are combined by
  token count (``Ranks.token_mean``);
- outputs: rank 0 alone writes (checkpoints, ``best/``, metrics, MLflow); the
  other ranks send it what only they hold (their optimizer shards) and read.

``Ranks.single()`` is the one-process case: every call is the identity.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

import torch

from mage_core.backends.base import collective_device
from mage_core.rollout.pool import contiguous_shares

T = TypeVar("T")


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world: int = 1

    @classmethod
    def single(cls) -> "Ranks":
        return cls(0, 1)

    @classmethod
    def current(cls) -> "Ranks":
        """This process's rank in the initialized process group (one process when there is none)."""
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls.single()

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def share(self, count: int) -> tuple[int, int]:
        """``[start, stop)`` of this rank's contiguous share of ``count`` items
        (sizes differ by at most one; a rank may get none when count < world)."""
        shares = contiguous_shares(count, self.world)
        shares += [(count, count)] * (self.world - len(shares))
        return shares[self.rank]

    def gather(self, local: Sequence[T]) -> list[T]:
        """Every rank's ``local`` list, concatenated in rank order, on every rank
        (rank r's list must be its ``share``: the result is then in the call's order)."""
        if not self.distributed:
            return list(local)
        parts: list[Any] = [None] * self.world
        torch.distributed.all_gather_object(parts, list(local))  # pickled
        return [item for part in parts for item in part]

    def broadcast(self, value: T) -> T:
        """Rank 0's ``value`` on every rank."""
        if not self.distributed:
            return value
        box = [value if self.main else None]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]  # type: ignore[return-value]

    def barrier(self) -> None:
        if self.distributed:
            torch.distributed.barrier()

    def min_max(self, value: int) -> tuple[int, int]:
        """The least and the greatest of every rank's ``value``."""
        if not self.distributed:
            return value, value
        both = torch.tensor([-value, value], dtype=torch.long, device=collective_device())
        torch.distributed.all_reduce(both, op=torch.distributed.ReduceOp.MAX)
        return -int(both[0]), int(both[1])

    def token_mean(self, metrics: dict[str, float], tokens: float, keys: Sequence[str]) -> dict[str, float]:
        """``metrics[key]`` for each of ``keys`` is a token mean over this rank's
        ``tokens``: the token mean over all ranks' tokens; ``num_tokens`` their sum.
        Other keys are taken as they are (equal on every rank, e.g. the global
        gradient norm)."""
        if not self.distributed:
            return dict(metrics)
        values = torch.tensor([metrics[k] * tokens for k in keys] + [tokens], dtype=torch.float64,
                              device=collective_device())
        torch.distributed.all_reduce(values)
        values = values.cpu()
        total = float(values[-1])
        out = dict(metrics)
        out.update({k: float(values[i]) / total for i, k in enumerate(keys)})
        out["num_tokens"] = total
        return out


def launched_world() -> int:
    """The world size the launcher set (``WORLD_SIZE``; 1 when not launched)."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        world = int(value)
    except ValueError:
        raise ValueError(f"WORLD_SIZE={value!r} is not an integer") from None
    if world < 1:
        raise ValueError(f"WORLD_SIZE={world} must be >= 1")
    return world


class RendezvousError(RuntimeError):
    """A rank cannot reach the others (the message names the address and the fix)."""


#: How long a rank other than 0 keeps trying to reach the rendezvous (``MASTER_ADDR``:
#: ``MASTER_PORT``) before it stops; ``MAGE_RENDEZVOUS_TIMEOUT_S`` overrides it.
RENDEZVOUS_TIMEOUT_S = 300.0


def check_rendezvous(timeout_s: float | None = None) -> None:
    """On a rank other than 0: wait until the rendezvous address of the launcher
    (``MASTER_ADDR``:``MASTER_PORT``, where rank 0 or the launcher listens) accepts
    a connection, or stop with what to fix, after ``timeout_s`` (default:
    ``MAGE_RENDEZVOUS_TIMEOUT_S``, else ``RENDEZVOUS_TIMEOUT_S``). Without it a rank
    that cannot reach the others would wait in torch's store connection for the
    process group's 30-minute timeout. Rank 0 returns at once (it hosts the store)."""
    import socket
    import time

    if os.environ.get("RANK", "0") == "0":
        return
    addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not addr or not port or not port.isdigit():
        raise RendezvousError(f"rank {os.environ.get('RANK')}: the launcher set no usable rendezvous address "
                           f"(MASTER_ADDR={addr!r}, MASTER_PORT={port!r}); start the ranks with torchrun")
    if timeout_s is None:
        raw = os.environ.get("MAGE_RENDEZVOUS_TIMEOUT_S", str(RENDEZVOUS_TIMEOUT_S))
        try:
            timeout_s = float(raw)
        except ValueError:
            raise ValueError(f"MAGE_RENDEZVOUS_TIMEOUT_S={raw!r} is not a number of seconds") from None
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((addr, int(port)), timeout=min(5.0, max(timeout_s, 0.1))):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise RendezvousError(
                    f"rank {os.environ['RANK']} cannot reach the other ranks: nothing answered at the rendezvous "
                    f"MASTER_ADDR:MASTER_PORT = {addr}:{port} for {timeout_s:g} s ({err.strerror or err}); start "
                    "every node's launcher with the same rendezvous endpoint, reachable from this node (address, "
                    "firewall), or raise MAGE_RENDEZVOUS_TIMEOUT_S if rank 0 starts later") from None
        time.sleep(0.5)


def launch_command(ranks: int, module_args: Sequence[str]) -> list[str]:
    """The command that runs ``python -m mage_core <module_args>`` as ``ranks``
    processes on this node: ``torchrun --standalone`` (a local rendezvous on a free
    port; when one rank fails, the launcher stops the others and exits non-zero)."""
    if ranks < 2:
        raise ValueError(f"launch_command: ranks must be >= 2, got {ranks}")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(ranks), "--max-restarts", "0", "-m", "mage_core", *module_args]
