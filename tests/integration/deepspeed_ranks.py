"""One rank of the 2-process DeepSpeed test (run by torchrun from test_deepspeed_engine.py).

Each rank builds the same model, trains ZeRO-2 on its part of every mini-batch
(rank 0 the first ``split`` samples, rank 1 the rest), checks that the ranks end with equal weights, and rank 0
saves them to argv[1]."""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integration.test_deepspeed_engine import batches, make, train  # noqa: E402


def main() -> None:
    out, settings = Path(sys.argv[1]), json.loads(sys.argv[2])
    torch.set_num_threads(1)
    engine = make("deepspeed", zero_stage=2)  # joins torchrun's process group (gloo)
    rank, world = dist.get_rank(), dist.get_world_size()
    split = settings.pop("split")
    assert world == 2, "this script splits every mini-batch in two"
    data = [batch[:split] if rank == 0 else batch[split:] for batch in batches(**settings)]
    train(engine, data)
    flat = torch.cat([v.float().flatten() for v in engine.policy_state_dict().values()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    agree = all(torch.equal(gathered[0], g) for g in gathered)
    if rank == 0:
        policy = {k: v.detach().clone().float() for k, v in engine.policy_state_dict().items()}
        torch.save({"policy": policy, "world_size": world, "ranks_agree": agree}, out)
    dist.barrier()


if __name__ == "__main__":
    main()
