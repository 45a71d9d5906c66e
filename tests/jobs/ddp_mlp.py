"""A data-parallel job on the CPU (gloo) that the tests start with torchrun or spawn.

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/jobs/ddp_mlp.py \
        STORE [--fail-rank R] [--fail-after-loop] [--steps N] [--batch B] [--phases]
    python tests/jobs/ddp_mlp.py STORE --spawn 2 ...     # torch.multiprocessing.spawn

Each rank profiles its own loop, as the README tells users to; rank R (if given) raises at
step 5, or once its loop is done (``--fail-after-loop``). Every rank prints
``hooks-left <rank> <bool>`` once its block has ended.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket

import torch
import torch.distributed as dist
from torch import nn

import gpuperf_magics as gm


def hooks_left() -> bool:
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optim_mod

    return bool(module_mod._global_forward_pre_hooks or module_mod._global_forward_hooks
                or optim_mod._global_optimizer_pre_hooks
                or optim_mod._global_optimizer_post_hooks)


def train(store: str, fail_rank: int, steps: int, batch: int, after_loop: bool = False,
          rank: int = -1, world: int = -1, phases: bool = False) -> None:
    torch.set_num_threads(1)
    # A short timeout: a test must never wait the default 30 minutes for a dead peer. Well under
    # torchrun's 30 s grace between SIGTERM and SIGKILL: a surviving rank blocked in a collective
    # when its peer fails sees the SIGTERM only once the collective times out, and must still
    # have time to save its partial run (on a loaded machine 30 s lost that race).
    # rank/world -1: from torchrun's environment.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10), rank=rank,
                            world_size=world)
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    model = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    try:
        with gm.profile_training(name="ddp-mlp", store=store, phases=phases):
            for step in range(steps):
                if rank == fail_rank and step == 5 and not after_loop:
                    raise RuntimeError(f"rank {rank} failed at step {step}")
                x, y = torch.randn(batch, 32), torch.randint(0, 10, (batch,))
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            if rank == fail_rank and after_loop:
                raise RuntimeError(f"rank {rank} failed after its loop")
    finally:
        print(f"hooks-left {rank} {hooks_left()}", flush=True)
        for h in list(net._forward_pre_hooks) + list(model._forward_pre_hooks):
            print(f"model-hook-left {rank} {h}", flush=True)
    dist.destroy_process_group()


def spawned(rank: int, world: int, args: argparse.Namespace) -> None:
    train(args.store, args.fail_rank, args.steps, args.batch, args.fail_after_loop, rank, world,
          args.phases)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-after-loop", action="store_true")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--spawn", type=int, default=0, metavar="N")
    parser.add_argument("--phases", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.spawn:
        with socket.socket() as s:  # a free port for the rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.multiprocessing.spawn(spawned, args=(args.spawn, args), nprocs=args.spawn)
    else:
        train(args.store, args.fail_rank, args.steps, args.batch, args.fail_after_loop,
              phases=args.phases)


if __name__ == "__main__":
    main()
