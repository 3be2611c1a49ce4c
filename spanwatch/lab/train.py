"""The lab's training job: one rank of a synchronous data-parallel run, gloo over TCP (system Python + torch).

Each step: compute (forward and backward of a small MLP on random data), a barrier (waiting for the slowest
rank: a straggler shows here, not as communication), then one ``all_reduce`` of every gradient flattened
into one buffer (gloo's ring: each rank sends to the next, so the ring crosses the sites twice a step), then
the optimizer step. One JSONL line per step in the analyzer's plain step log format plus the split::

    {"step": 7, "rank": 0, "start": 1764583200.12, "end": 1764583200.31,
     "compute_seconds": 0.05, "wait_seconds": 0.001, "comm_seconds": 0.13, "loss": 0.98}

Ranks agree on the start (rank 0 broadcasts it) and on the stop (rank 0 sets a flag carried in the same
all_reduce buffer), so no rank is left waiting in a collective. This file runs on the system Python that
carries torch, not in the project's venv; it imports nothing from the project.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import torch
import torch.distributed as dist

WARMUP_STEPS = 3
START_MARGIN_S = 1.0


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True, help="host:port of rank 0's rendezvous")
    p.add_argument("--log", required=True, help="this rank's JSONL step log")
    p.add_argument("--start-file", required=True, help="rank 0 writes the agreed start time here")
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--width", type=int, default=256, help="MLP width (parameters ~ 2 x width x hidden)")
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--stall", action="append", default=[], help="START:SECONDS from the run start")
    p.add_argument("--profile", default="", help="write a torch.profiler trace of a few steps here")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def model(width: int, hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(width, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, width)
    )


class Rank:
    """One rank's state: the model, its flat gradient buffer and the step log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        torch.manual_seed(args.seed)  # the same initial weights on every rank
        self.net = model(args.width, args.hidden)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01)
        self.params = [p for p in self.net.parameters()]
        size = sum(p.numel() for p in self.params)
        self.flat = torch.zeros(size + 1)  # + the stop flag, set by rank 0 only
        gen = torch.Generator().manual_seed(args.seed * 1000 + args.rank)
        self.x = torch.randn(args.batch, args.width, generator=gen)
        self.y = torch.randn(args.batch, args.width, generator=gen)
        self.stalls = [tuple(float(v) for v in s.split(":")) for s in args.stall]
        self.log: Any = open(args.log, "w", buffering=1)  # noqa: SIM115 (open for the run)

    def compute(self) -> float:
        self.opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(self.net(self.x), self.y)
        loss.backward()
        return float(loss.item())

    def exchange(self, stop: bool) -> bool:
        """All-reduce the gradients; True when rank 0 said stop."""
        offset = 0
        for p in self.params:
            n = p.numel()
            self.flat[offset : offset + n].copy_(p.grad.reshape(-1))
            offset += n
        self.flat[-1] = 1.0 if stop else 0.0
        dist.all_reduce(self.flat)
        offset = 0
        for p in self.params:
            n = p.numel()
            p.grad.copy_(self.flat[offset : offset + n].reshape(p.shape) / self.args.world)
            offset += n
        return bool(self.flat[-1].item() > 0)

    def stall(self, now: float, start: float) -> None:
        """A compute stall: sleep to the end of a stall window this step starts in (once per window)."""
        for i, (at, seconds) in enumerate(self.stalls):
            if start + at <= now < start + at + seconds:
                time.sleep(start + at + seconds - now)
                self.stalls[i] = (at, 0.0)

    def step(self, index: int, start: float, deadline: float) -> bool:
        t0 = time.time()
        loss = self.compute()
        self.stall(time.time(), start)
        t1 = time.time()
        dist.barrier()
        t2 = time.time()
        stop = self.exchange(self.args.rank == 0 and t2 >= deadline)
        t3 = time.time()
        self.opt.step()
        t4 = time.time()
        if index >= 0:
            line = {
                "step": index,
                "rank": self.args.rank,
                "start": round(t0, 6),
                "end": round(t4, 6),
                "compute_seconds": round(t1 - t0, 6),
                "wait_seconds": round(t2 - t1, 6),
                "comm_seconds": round(t3 - t2, 6),
                "loss": round(loss, 6),
            }
            self.log.write(json.dumps(line) + "\n")
        return stop


def agreed_start(rank: int) -> float:
    """Rank 0's clock plus a margin, broadcast to every rank."""
    t = torch.tensor([time.time() + START_MARGIN_S if rank == 0 else 0.0], dtype=torch.float64)
    dist.broadcast(t, src=0)
    return float(t.item())


def main() -> None:
    args = arguments()
    torch.set_num_threads(1)  # four ranks share two cores
    dist.init_process_group("gloo", init_method=f"tcp://{args.master}", rank=args.rank, world_size=args.world)
    rank = Rank(args)
    for _ in range(WARMUP_STEPS):  # connections up, windows open, allocations done
        rank.step(-1, 0.0, float("inf"))
    start = agreed_start(args.rank)
    if args.rank == 0:
        with open(args.start_file + ".tmp", "w") as f:
            json.dump({"start": start, "pid": os.getpid()}, f)
        os.replace(args.start_file + ".tmp", args.start_file)
    time.sleep(max(0.0, start - time.time()))
    deadline = start + args.duration
    profiler = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

        profiler = profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=5, warmup=2, active=5, repeat=1),
            on_trace_ready=tensorboard_trace_handler(args.profile, worker_name=f"rank{args.rank}"),
        )
        profiler.start()
    index = 0
    while not rank.step(index, start, deadline):
        index += 1
        if profiler is not None:
            profiler.step()
    if profiler is not None:
        profiler.stop()
    rank.log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
