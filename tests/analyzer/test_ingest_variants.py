"""Real-world variants of each log format that the shared test data does not cover.

Every input line is typed here in the exact shape the printing code produces (the source is named above
each test); a few pasted lines from public issues are cited with their URL. Each test checks detection, the
parsed counts and values, and that a genuinely broken line is still reported with its line number.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analyzer.ingest import detect, parse_file

ESC = "\x1b"


def _write(path: Path, lines: list[str], compress: bool = False) -> Path:
    text = "\n".join(lines) + "\n"
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as stream:
            stream.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _problem_lines(path: Path) -> list[int]:
    return [problem.line for problem in parse_file(path).problems]


# --- Megatron-LM / Megatron-DeepSpeed -------------------------------------------------------------------
# Megatron-LM megatron/training/training.py training_log(): f" [{datetime.now():%Y-%m-%d %H:%M:%S.%f}]" then
# ' iteration {:8d}/{:8d} |', ' consumed samples: {:12d} |', ' elapsed time per iteration (ms): {:.1f} |',
# ' learning rate: {:.6E} |', ' global batch size: {:5d} |', ' {key}: {:.6E} |' per loss, ' loss scale:
# {:.1f} |', ' grad norm: {:.3f} |', ' number of skipped iterations: {:3d} |', ' number of nan iterations:
# {:3d} |'; printed by print_rank_last, so torchrun --tee adds "[rankN]:" (role "rank") to it.


def _megatron_new(clock: str, step: int, ms: float, loss: str) -> str:
    return (
        f"[rank31]: [{clock}] iteration {step:8d}/  500000 | consumed samples: {step * 4096:12d} | "
        f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 410.2 | "
        f"learning rate: 2.999993E-04 | global batch size:  4096 | lm loss: {loss} | loss scale: 1.0 | "
        "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def test_megatron_lm_current_layout_with_microsecond_clock_and_rank_prefix(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "train.log",
        [
            "[rank0]: > building GPT model ...",
            _megatron_new("2025-06-01 12:00:00.250000", 100, 1234.5, "7.123456E+00"),
            _megatron_new("2025-06-01 12:02:03.700000", 200, 1234.5, "6.500000E+00"),
        ],
    )
    assert detect(path) == ["megatron"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [100, 200]
    assert steps["end_time"].to_list() == [
        datetime(2025, 6, 1, 12, 0, 0, 250000, tzinfo=UTC),
        datetime(2025, 6, 1, 12, 2, 3, 700000, tzinfo=UTC),
    ]
    assert steps["start_time"][1] == steps["end_time"][0]
    assert steps["duration_seconds"].to_list() == pytest.approx([1.2345, 1.2345])
    assert steps["loss"].to_list() == pytest.approx([7.123456, 6.5])
    assert steps["interval_steps"].to_list() == [100, 100]
    assert result.problems == []


def test_megatron_lm_2020_layout_without_consumed_samples_or_clock(tmp_path: Path) -> None:
    # Megatron-LM v1 (2020) megatron/training.py: no clock, no consumed samples, loss keys as '{}: {:.6E}'.
    line = (
        " iteration {:8d}/{:8d} | elapsed time per iteration (ms): {:.1f} | learning rate: 1.500E-04 |"
        " lm loss: {} | loss scale: 65536.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    path = _write(
        tmp_path / "gpt2.out",
        [
            "using world size: 8, data-parallel-size: 2, tensor-model-parallel size: 4, pipeline-model-parallel size: 1",
            line.format(50, 300000, 812.3, "9.876543E+00"),
            line.format(100, 300000, 790.0, "8.000000E+00"),
        ],
    )
    assert detect(path) == ["megatron"]
    steps = parse_file(path).table("steps")
    assert steps["step"].to_list() == [50, 100]
    assert steps["duration_seconds"].to_list() == pytest.approx([0.8123, 0.79])
    assert steps["end_time"].null_count() == 2
    assert steps["loss"].to_list() == pytest.approx([9.876543, 8.0])


def test_megatron_deepspeed_layout_with_srun_prefix(tmp_path: Path) -> None:
    # microsoft/Megatron-DeepSpeed megatron/training.py training_log(): consumed tokens, actual seqlen,
    # samples per second, TFLOPs; "srun -l" prefixes the task number.
    line = (
        "{rank}:  iteration {step:8d}/  250000 | consumed samples:        {samples} | consumed tokens:     "
        "{tokens} | elapsed time per iteration (ms): 5120.4 | learning rate: 6.000E-05 | global batch size:   "
        "512 | lm loss: 4.321000E+00 | loss scale: 4096.0 | grad norm: 0.512 | actual seqlen:  2048 | number of "
        "skipped iterations:   0 | number of nan iterations:   0 | samples per second: 99.992 | tokens per gpu "
        "per second (tgs): 3199.7 | TFLOPs: 150.23 |"
    )
    path = _write(
        tmp_path / "megatron_ds.out",
        [line.format(rank=63, step=s, samples=s * 512, tokens=s * 512 * 2048) for s in (10, 20, 30)],
    )
    assert detect(path) == ["megatron"]
    steps = parse_file(path).table("steps")
    assert steps["step"].to_list() == [10, 20, 30]
    assert steps["duration_seconds"].to_list() == pytest.approx([5.1204] * 3)
    assert steps["loss"].to_list() == pytest.approx([4.321] * 3)
    assert steps["rank"].null_count() == 3  # Megatron logs from the last rank only: not a per-rank row


def test_megatron_fork_layouts(tmp_path: Path) -> None:
    # ROCm/Megatron-LM prints "elapsed time per iteration (ms): {now:.1f}/{running mean:.1f}"; a fork's
    # report_iteration_metrics prints "lm loss {:.6E}" without a colon; another "iteration {:8d}/infinity".
    path = _write(
        tmp_path / "fork.log",
        [
            " iteration       10/    1000 | consumed samples:          640 | elapsed time per iteration (ms): "
            "1300.2/1250.1 | learning rate: 1.000E-04 | lm loss: 5.000000E+00 |",
            " iteration       20/    1000 | elapsed time per iteration (ms): 1200.0 | learning rate 1.000E-04 |"
            " lm loss 4.500000E+00 |",
            " iteration       30/infinity | consumed samples:         1920 | elapsed time per iteration (ms): 1100.0 |"
            " learning rate: 1.000E-04 | global batch size:    64 |",
        ],
    )
    steps = parse_file(path).table("steps")
    assert steps["step"].to_list() == [10, 20, 30]
    assert steps["duration_seconds"].to_list() == pytest.approx([1.3002, 1.2, 1.1])
    assert steps["loss"].to_list() == pytest.approx([5.0, 4.5, None], nan_ok=True)


def test_megatron_restart_from_checkpoint_in_an_appended_log(tmp_path: Path) -> None:
    line = " [2025-01-01 00:{:02d}:00] iteration {:8d}/    1000 | elapsed time per iteration (ms): 6000.0 |"
    path = _write(
        tmp_path / "resumed.log",
        [
            line.format(1, 10),
            line.format(2, 20),
            line.format(3, 30),
            "Traceback (most recent call last):",  # the job died; it resumes from the checkpoint at 20
            line.format(9, 30),
            line.format(10, 40),
        ],
    )
    steps = parse_file(path).table("steps")
    assert steps["step"].to_list() == [10, 20, 30, 30, 40]
    assert steps["interval_steps"].to_list() == [10, 10, 10, 10, 10]
    # The first line after the restart has no start: the previous line was another process.
    assert steps["start_time"].is_null().to_list() == [True, False, False, True, False]


def test_megatron_broken_iteration_lines_are_reported_other_mentions_ignored(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "train.log",
        [
            " iteration       10/     100 | elapsed time per iteration (ms): 900.0 |",
            " validation loss at iteration 10 | lm loss value: 5.1E+00 | lm loss PPL: 1.6E+02 |",
            "saving checkpoint at iteration      10 to /ckpt",
            " iteration       20/     100 | consumed samples:  1280 | learning rate: 1.0E-04 |",
            " iteration       30/     100 | elapsed time per iteration (ms): garbage |",
        ],
    )
    result = parse_file(path)
    assert result.table("steps")["step"].to_list() == [10]
    assert [p.line for p in result.problems] == [4, 5]
    assert all(p.file == str(path) for p in result.problems)


# --- DeepSpeed engine ------------------------------------------------------------------------------------
# deepspeed/utils/logging.py: "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s]
# %(message)s", log_dist prepends "[Rank {rank}] " (-1 before torch.distributed is up); runtime/engine.py
# _report_progress: f"step={step}, skipped={self.skipped_steps}, lr={lr}, mom={mom}"; utils/timer.py logs
# "time (ms) | name: 1.23 | .." and the throughput "epoch=../micro_step=../global_step=.., ..".


def test_deepspeed_multi_node_pdsh_prefix_and_timer_lines(tmp_path: Path) -> None:
    prefix = "worker-3: [2024-05-01 12:00:{:02d},{:03d}] [INFO] "
    path = _write(
        tmp_path / "ds.log",
        [
            "worker-3: [2024-05-01 11:59:00,000] [INFO] [launch.py:145:main] WORLD INFO DICT: {'worker-0': [0]}",
            prefix.format(10, 0) + "[logging.py:128:log_dist] [Rank 0] step=10, skipped=2, lr=[0.0001], "
            "mom=[(0.9, 0.999)]",
            prefix.format(10, 5) + "[logging.py:128:log_dist] [Rank 0] time (ms) | fwd_microstep: 120.34 | "
            "bwd_microstep: 250.10 | optimizer_step: 12.50",
            prefix.format(10, 9) + "[timer.py:264:stop] epoch=0/micro_step=10/global_step=10, "
            "RunningAvgSamplesPerSec=41.7, CurrSamplesPerSec=40.2, MemAllocated=20.1GB, MaxMemAllocated=30.2GB",
            prefix.format(40, 0) + "[logging.py:128:log_dist] [Rank 0] step=20, skipped=2, lr=[0.0001], "
            "mom=[(0.9, 0.999)]",
        ],
    )
    assert detect(path) == ["deepspeed"]
    steps = parse_file(path).table("steps")
    assert steps["step"].to_list() == [10, 20]
    assert steps["rank"].to_list() == [0, 0]
    assert steps["end_time"][0] == datetime(2024, 5, 1, 12, 0, 10, tzinfo=UTC)
    assert steps["duration_seconds"].to_list() == pytest.approx([None, 3.0], nan_ok=True)


def test_deepspeed_pipeline_line_with_extra_losses_and_memory(tmp_path: Path) -> None:
    # deepspeed/runtime/pipe/engine.py train_batch(): f'steps: {n} loss: {l:0.4f} ' + per extra loss
    # f'{name}: {v:0.4f} ' + f'iter time (s): {t:0.3f} samples/sec: {s:0.3f}' (+ mem_log's peak alloc (MB)).
    path = _write(
        tmp_path / "pipe.log",
        [
            "steps: 10 loss: 2.3456 moe_loss: 0.0123 iter time (s): 1.234 samples/sec: 51.864",
            "[rank0]:steps: 20 loss: 2.1000 iter time (s): 1.200 samples/sec: 53.333 peak alloc (MB): 1024.000",
            "steps: 30 loss: 2.0000 iter time (s): n/a samples/sec: 53.333",
        ],
    )
    assert detect(path) == ["deepspeed"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [10, 20]
    assert steps["duration_seconds"].to_list() == pytest.approx([1.234, 1.2])
    assert steps["loss"].to_list() == pytest.approx([2.3456, 2.1])
    assert [p.line for p in result.problems] == [3]


def test_deepspeed_restart_and_broken_step_line(tmp_path: Path) -> None:
    stamp = "[2024-05-01 12:00:{:02d},000] [INFO] [logging.py:96:log_dist] "
    path = _write(
        tmp_path / "ds.log",
        [
            stamp.format(0) + "[Rank 0] step=10, skipped=0, lr=[1e-4], mom=[(0.9, 0.95)]",
            stamp.format(10) + "[Rank 0] step=20, skipped=0, lr=[1e-4], mom=[(0.9, 0.95)]",
            stamp.format(30) + "[Rank 0] step=10, skipped=0, lr=[1e-4], mom=[(0.9, 0.95)]",  # resumed at 0
            stamp.format(31) + "[Rank 0] step=oops, skipped=0",
        ],
    )
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [10, 20, 10]
    assert steps["duration_seconds"].to_list() == pytest.approx([None, 1.0, None], nan_ok=True)
    assert [p.line for p in result.problems] == [4]


# --- torchtitan ------------------------------------------------------------------------------------------
# torchtitan tools/logging.py: "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s";
# components/metrics.py log(): f"{red}step: {step:2}  {green}loss: {loss:7.4f}  {orange}grad_norm: ..  "
# f"{turquoise}memory: ..GiB(..%)  {blue}tps: {tps:,}  {cyan}tflops: ..  {magenta}mfu: ..%{reset}", and
# log_validation(): f"{yellow}validate step: {step:2}  {green}loss: ..  {turquoise}memory: ..  {blue}tps: ..".
# run_train.sh launches torchrun --role rank --tee 3 ("[rank0]:"); without --role the tag is "[default0]:".


def _titan(prefix: str, clock: str, message: str) -> str:
    return f"{prefix}[titan] {clock} - root - INFO - {message}{ESC}[39m"


def _titan_step(step: int, loss: str, mfu: str = "4.59%") -> str:
    return (
        f"{ESC}[31mstep: {step:2}  {ESC}[32mloss: {loss}  {ESC}[38;2;255;165;0mgrad_norm:  1.2345  "
        f"{ESC}[38;2;54;234;195mmemory: 21.01GiB(22.11%)  {ESC}[34mtps: 8,143  {ESC}[36mtflops: 123.40  "
        f"{ESC}[35mmfu: {mfu}"
    )


def test_torchtitan_default_role_prefix_validation_lines_and_na_mfu(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "titan.log",
        [
            _titan("[default0]:", "2025-03-01 10:00:00,000", _titan_step(1, "12.2500")),
            _titan("[default0]:", "2025-03-01 10:00:20,000", _titan_step(11, " 9.5000", mfu="N/A")),
            _titan(
                "[default0]:",
                "2025-03-01 10:00:25,000",
                f"{ESC}[33mvalidate step: 11  {ESC}[32mloss:  9.9000  {ESC}[38;2;54;234;195mmemory: 21.01GiB(22.11%)"
                f"  {ESC}[34mtps: 40,000",
            ),
            _titan("[default0]:", "2025-03-01 10:00:40,000", _titan_step(21, " 8.0000")),
        ],
    )
    assert detect(path) == ["torchtitan"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["step"].to_list() == [1, 11, 21]  # the validation line is not a training step
    assert result.counts["validation_lines"] == 1
    assert steps["rank"].to_list() == [0, 0, 0]
    assert steps["loss"].to_list() == pytest.approx([12.25, 9.5, 8.0])
    assert steps["duration_seconds"].to_list() == pytest.approx([None, 2.0, 2.0], nan_ok=True)


def test_torchtitan_srun_prefix_old_fields_and_broken_line(tmp_path: Path) -> None:
    # An early torchtitan (wps, no grad_norm) under "srun -l": the task number is the rank.
    old = f"{ESC}[31mstep: {{}}  {ESC}[32mloss: {{}}  {ESC}[33mmemory: 30.00GiB(40.00%)  {ESC}[34mwps: 3,000"
    path = _write(
        tmp_path / "titan_srun.log",
        [
            _titan("3: ", "2024-06-01 09:00:00,000", old.format(10, " 7.9000")),
            _titan("3: ", "2024-06-01 09:00:30,500", old.format(20, " 7.1000")),
            _titan("3: ", "2024-06-01 09:00:31,000", old.format(21, "what")),
        ],
    )
    result = parse_file(path)
    steps = result.table("steps")
    assert steps["rank"].to_list() == [3, 3]
    assert steps["end_time"][1] == datetime(2024, 6, 1, 9, 0, 30, 500000, tzinfo=UTC)
    assert steps["duration_seconds"][1] == pytest.approx(3.05)
    assert [p.line for p in result.problems] == [3]


# --- NCCL_DEBUG=INFO -------------------------------------------------------------------------------------
# NCCL src/debug.cc: "%s:%d:%d [%d] NCCL INFO " (host truncated at the first '.', pid, tid, cudaDev), with
# NCCL_DEBUG_TIMESTAMP_FORMAT (default "[%F %T] ", "%Nf" for fractions) before it since 2.26. src/init.cc:
# "comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE" (2.x), "+ nvmlDev %d .. commId 0x%llx"
# (2.18), a leading "%s" function name (2.20+), "[Rank %d] %s comm .. - Init START" (2.27), "ncclCommSplit
# comm .. parent %p color %d key %d - Init COMPLETE". src/transport/*.cc: "Channel %02d/%d : %d[%d] -> %d[%d]
# [send] via NET/%s/%d%s%s" (net.cc), "via P2P/%s%s" with "direct pointer", "IPC", "CUMEM" (p2p.cc).


def test_nccl_init_start_and_complete_count_each_rank_once(tmp_path: Path) -> None:
    comm = (
        "comm 0x55d8ac4ad300 rank {r} nranks 16 cudaDev {r} nvmlDev {r} busId {bus} commId 0x9ad9b5e4ab2566da"
    )
    path = _write(
        tmp_path / "nccl.log",
        [
            # NVIDIA/nccl#1029 (https://github.com/NVIDIA/nccl/issues/1029): pdsh prefixes the host name.
            "rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19484:21054 [0] NCCL INFO comm 0x557e83314500 "
            "rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 4f000 commId 0x9ad9b5e4ab2566da - Init START",
            "rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19484:21054 [0] NCCL INFO comm 0x557e83314500 "
            "rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 4f000 commId 0x9ad9b5e4ab2566da - Init COMPLETE",
            "node-1:2001:2001 [1] NCCL INFO ncclCommInitRankConfig "
            + comm.format(r=1, bus="52000")
            + " - Init START",
            "node-1:2001:2100 [1] NCCL INFO comm 0x55d8ac4ad300 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 "
            "MNNVL 0",
            "node-1:2001:2001 [1] NCCL INFO ncclCommInitRankConfig "
            + comm.format(r=1, bus="52000")
            + " - Init COMPLETE",
            "node-1:2001:2001 [1] NCCL INFO Init timings - ncclCommInitRankConfig: rank 1 nranks 16 total 1.23 "
            "(kernels 0.10, alloc 0.01, bootstrap 0.50, allgathers 0.02, topo 0.30, graphs 0.01, connections "
            "0.20, rest 0.09)",
            # NCCL 2.27+: "[Rank %d] %s comm .. - Init START"; a split communicator completes with its parent.
            "node-1:2002:2002 [2] NCCL INFO [Rank 2] ncclCommInitRank "
            + comm.format(r=2, bus="55000")
            + " - Init START",
            "node-1:2002:2002 [2] NCCL INFO ncclCommSplit comm 0x7f0001 rank 0 nranks 2 cudaDev 2 nvmlDev 2 "
            "busId 55000 parent 0x55d8ac4ad300 childCount 1 color 1 key 0 - Init COMPLETE",
        ],
    )
    assert detect(path) == ["nccl_debug"]
    result = parse_file(path)
    ranks = result.table("nccl_ranks")
    assert ranks.select("host", "rank", "nranks", "cuda_device", "bus_id").rows() == [
        ("rdma-gpu-train-worker-0", 0, 16, 0, "4f000"),
        ("node-1", 1, 16, 1, "52000"),
        ("node-1", 0, 2, 2, "55000"),
    ]
    assert ranks["comm"].to_list() == ["0x557e83314500", "0x55d8ac4ad300", "0x7f0001"]
    assert result.counts["nccl_inits_incomplete"] == 1  # rank 2 of the 16-rank comm never completed
    assert result.problems == []


def test_nccl_channel_transports_across_versions(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "nccl.log",
        [
            # NCCL 2.7-2.11: no "/N" after the channel, bus ids in hex in the brackets.
            "gpu-a:100:200 [0] NCCL INFO Channel 00 : 0[7000] -> 1[b000] via P2P/IPC",
            "gpu-a:100:200 [0] NCCL INFO Channel 00/24 :    0   1   2   3",  # ring order, not a connection
            "gpu-a:100:200 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/direct pointer/read",
            "gpu-a:101:201 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0",
            "gpu-b:300:400 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/1(0)/GDRDMA",
            "gpu-a:101:201 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/AWS Libfabric/0/GDRDMA",
            "gpu-b:300:400 [0] NCCL INFO Channel 02/0 : 2[0] -> 3[1] via SHM/direct/direct",
            "gpu-b:300:400 [0] NCCL INFO Connected all rings",
            "gpu-b:300:400 [0] NCCL INFO Trees [0] 3/-1/-1->2->0 [1] 3/-1/-1->2->0",
            "gpu-b:300:400 [0] NCCL INFO Channel 03/0 : 2[0] -> ??? via",
        ],
    )
    result = parse_file(path)
    links = result.table("nccl_connections")
    assert links["transport"].to_list() == [
        "P2P/IPC",
        "P2P/direct pointer",
        "NET/Socket",
        "NET/IB",
        "NET/AWS Libfabric",
        "SHM/direct",
    ]
    assert links["transport_detail"][4] == "NET/AWS Libfabric/0/GDRDMA"
    assert links["crosses_network"].to_list() == [False, False, True, True, True, False]
    assert links.select("rank", "peer").rows()[3] == (2, 1)  # [receive]: the logging rank is the receiver
    assert [p.line for p in result.problems] == [10]


def test_nccl_debug_timestamps_and_host_names(tmp_path: Path) -> None:
    info = "NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"
    path = _write(
        tmp_path / "nccl.log",
        [
            f"[2025-03-01 12:00:00.123456789] ip-10-0-0-1:1234:1240 [3] {info}",  # FORMAT="[%F %T.%9f] "
            f"2025-03-01 12:00:01 dgx-h100-017.cluster:1234:1240 [3] {info}",  # FORMAT="%F %T "
            f"[rank3]:[2025-03-01 12:00:03] node-7:1234:1240 [3] transport/net.cc:123 {info}",
        ],
    )
    links = parse_file(path).table("nccl_connections")
    assert links["time"].to_list()[:2] == [
        datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
        datetime(2025, 3, 1, 12, 0, 1, tzinfo=UTC),
    ]
    assert links["host"].to_list()[:2] == ["ip-10-0-0-1", "dgx-h100-017.cluster"]
    assert links.height == 3  # torchrun's tag goes before NCCL's clock, "file.cc:line" before "NCCL"
    assert links["time"][2] == datetime(2025, 3, 1, 12, 0, 3, tzinfo=UTC)


def test_nccl_broken_init_line_is_reported(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "nccl.log",
        [
            "node-b:2001:2001 [0] NCCL INFO comm 0xdef rank 2 nranks 4 cudaDev 0 busId 7000 - Init COMPLETE",
            "node-b:2002:2002 [1] NCCL INFO comm 0xdef nranks 4 - Init COMPLETE",
        ],
    )
    assert _problem_lines(path) == [2]


# --- nccl-tests ------------------------------------------------------------------------------------------
# nccl-tests src/common.cu: the header "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s .." names size
# count type redop root, then per group time ("cputime" with -C 1) algbw busbw #wrong; results "  %7s  %6.2f
# %6.2f  %5g" with "N/A" for #wrong under -c 0; devices "#  Rank %2d Group %2d Pid %6d on %10s device %2d
# [%04x:%02x:%02x] %s". 2.17+ (src/util.cu writeResultHeader) adds "#bitdiff", per-iteration "i_min i_max
# i_p99 i_cv%" and a trailing "timestamp" ("%Y-%m-%d %H:%M:%S").

_DEVICES = [
    "# nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602",
    "# Collective test starting: all_gather_perf",
    "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
    "validation: 0 graph: 1",
    "#",
    "# Using devices",
    "#  Rank  0 Group  0 Pid 223120 on cnode2-001 device  0 [0000:1b:00] NVIDIA H100 80GB HBM3",
    "#  Rank  1 Group  0 Pid 256267 on cnode2-002 device  0 [0000:1b:00] NVIDIA H100 80GB HBM3",
    "#",
]


def test_nccl_tests_cputime_and_no_check(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "results.txt",
        [
            *_DEVICES,
            "#                                                              out-of-place                       in-place",
            "#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
            "        1024           128     float    none      -1    20.31    0.05    0.03    N/A    19.80    0.05    0.03    N/A",
            "        2048           256     float    none      -1    21.00    0.10    0.05    N/A    20.50    0.10    0.05    N/A",
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : 0.04 ",
            "#",
            "# Collective test concluded: all_gather_perf",
        ],
    )
    assert detect(path) == ["nccl_tests"]
    result = parse_file(path)
    rows = result.table("collectives")
    assert rows.height == 4
    assert rows["collective"].unique().to_list() == ["all_gather"]
    assert rows["duration_seconds"].to_list() == pytest.approx([20.31e-6, 19.8e-6, 21e-6, 20.5e-6])
    assert rows["in_place"].to_list() == [False, True, False, True]
    assert rows["wrong"].null_count() == 4
    assert result.table("nccl_ranks").select("rank", "host", "bus_id").rows() == [
        (0, "cnode2-001", "0000:1b:00"),
        (1, "cnode2-002", "0000:1b:00"),
    ]


def test_nccl_tests_per_iteration_and_timestamp_columns_and_g_format_errors(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "all_reduce_perf.out",
        [
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
            "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%           timestamp",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)"
            "     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%) %Y-%m-%d %H:%M:%S",
            "  1073741824     268435456     float     sum      -1   4512.3  237.96  446.17       0   4490.1   4601.0"
            "   4598.2     0.51   4509.9  238.08  446.41  1.2e+06   4488.0   4599.9   4597.5     0.49 2025-06-01 12:00:00",
            "  2147483648     536870912     float     sum      -1   8999.0  238.64  447.44       0",
        ],
    )
    result = parse_file(path)
    rows = result.table("collectives")
    assert rows["collective"].to_list() == ["all_reduce", "all_reduce"]
    assert rows["size_bytes"].to_list() == [1073741824.0] * 2
    assert rows["busbw_gbps"].to_list() == pytest.approx([446.17, 446.41])
    assert rows["wrong"].to_list() == [0, 1_200_000]
    assert rows["duration_seconds"].to_list() == pytest.approx([4512.3e-6, 4509.9e-6])
    assert rows["iteration_min_seconds"].to_list() == pytest.approx([4490.1e-6, 4488.0e-6])
    assert rows["iteration_max_seconds"].to_list() == pytest.approx([4601.0e-6, 4599.9e-6])
    assert rows["iteration_p99_seconds"].to_list() == pytest.approx([4598.2e-6, 4597.5e-6])
    assert rows["iteration_cv"].to_list() == pytest.approx([0.0051, 0.0049])
    assert [p.line for p in result.problems] == [4]  # a row cut short is malformed


def test_nccl_tests_under_srun_label(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "sendrecv.log",
        [
            "0: # Collective test starting: sendrecv_perf",
            "0: #  Rank  0 Group  0 Pid  41000 on     node-a device  0 [0x07] NVIDIA A100-SXM4-80GB",
            "0: #       size         count      type   redop    root     time   algbw   busbw #wrong     time"
            "   algbw   busbw #wrong",
            "0:            8             2     float     sum      -1    30.10    0.00    0.00      0    29.90"
            "    0.00    0.00      0",
        ],
    )
    assert detect(path) == ["nccl_tests"]
    result = parse_file(path)
    assert result.table("collectives")["collective"].to_list() == ["sendrecv", "sendrecv"]
    assert result.table("nccl_ranks")["host"].to_list() == ["node-a"]


# --- NCCL Inspector --------------------------------------------------------------------------------------
# Inspector v4.3 (NCCL plugins/profiler/inspector): header and metadata once in a dump_stats marker, bare
# coll_perf / p2p_perf records after it, proxy_trace records for the proxy thread.


def test_inspector_v43_markers_give_context_to_bare_records(tmp_path: Path) -> None:
    records = [
        {
            "header": {"id": "0xabc", "rank": 3, "n_ranks": 16, "nnodes": 2},
            "metadata": {"inspector_output_format_version": "v4.3", "hostname": "node-b", "pid": 77},
            "dump_stats": {"coll_dropped_since_last_dump": 5, "p2p_dropped_since_last_dump": 1},
        },
        {
            "coll_perf": {
                "coll": "ReduceScatter",
                "coll_sn": 9,
                "coll_msg_size_bytes": 4096,
                "coll_exec_time_us": 12,
            }
        },
        {"p2p_perf": {"p2p": "Send", "p2p_sn": 2, "p2p_msg_size_bytes": 64, "p2p_exec_time_us": 3}},
        {"proxy_trace": {"channel": 0, "steps": 4}},
        {"coll_perf": {"coll": "AllReduce"}},
    ]
    path = _write(tmp_path / "inspector.jsonl", [json.dumps(record) for record in records])
    assert detect(path) == ["nccl_inspector"]
    result = parse_file(path)
    rows = result.table("collectives")
    assert rows.select("collective", "rank", "group_size", "host", "sequence").rows() == [
        ("ReduceScatter", 3, 16, "node-b", 9),
        ("Send", 3, 16, "node-b", 2),
    ]
    assert result.counts["inspector_dropped"] == 6
    assert result.counts["inspector_proxy_records"] == 1
    assert [p.line for p in result.problems] == [5]


# --- PyTorch profiler (Kineto) ---------------------------------------------------------------------------
# Kineto's JSON: CPU "ProfilerStep#N" (cat user_annotation), mirrored on the GPU timeline as cat
# gpu_user_annotation (pid = device, tid = stream, no stream in args); kernels carry args.stream and
# args.correlation, linked to the cuda_runtime launch with the same correlation.


def _trace(kernel: str) -> dict[str, object]:
    return {
        "schemaVersion": 1,
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000},
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#5", "pid": 0, "tid": 7, "ts": 1010,
             "dur": 980, "args": {"External id": 3}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1100, "dur": 5,
             "args": {"correlation": 11}},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": 1200, "dur": 300,
             "args": {"stream": 7, "correlation": 11, "device": 0}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1110, "dur": 5,
             "args": {"correlation": 12}},
            {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": 8, "ts": 1150,
             "dur": 200, "args": {"stream": 8, "correlation": 12, "device": 0}},
        ],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "collective"),
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "AllReduce"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8(ncclWorkElem)", "AllGather"),
        ("ncclAllReduceRingLLKernel_sum_f32(ncclColl)", "AllReduce"),  # NCCL < 2.7
    ],
)
def test_kineto_gpu_step_annotation_and_kernel_names(tmp_path: Path, kernel: str, collective: str) -> None:
    path = tmp_path / "worker_rank-3.1700000000.pt.trace.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as stream:
        json.dump(_trace(kernel), stream)  # no distributedInfo: the rank comes from the file name
    assert detect(path) == ["kineto"]
    result = parse_file(path)
    steps = result.table("steps")
    assert steps.select("rank", "step").rows() == [(3, 5)]  # the GPU mirror is not a second step
    nccl = result.table("collectives")
    assert nccl.select("rank", "step", "collective").rows() == [(3, 5, collective)]
    summary = result.table("kineto_steps")
    assert summary["communication_seconds"].to_list() == pytest.approx([300e-6])
    assert summary["exposed_communication_seconds"].to_list() == pytest.approx([150e-6])
