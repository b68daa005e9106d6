"""Speed of attnlab's moving parts, with their targets; each section is a tested function of
attnlab.bench (attnlab/bench/<section>.py, run by name by attnlab/bench/sections.py).
Sections: synth, train (strips/s, FLOPs per strip, GFLOP/s and the ratio to the machine's
fp32 matmul peak), eval; when asked: converge, folder, typefaces, contention (idle and beside
one CPU burner per CPU), profile (one recipe step by phase: the own-strips recipe's readers
and the plain CRNN), levers (channels-last, bf16 autocast, torch.compile if asked: steps/s
and validation accuracy against float32) and curves (what each candidate reader reads after
5, 15, ... minutes of one thread on your own strips, the plain CRNN as the reference: the
recipe's choice, attnlab/bench/curves.py). Wall-clock figures: on a shared machine, run twice.

    python scripts/bench.py                        # synth, train, eval (1-2 minutes on CPU)
    python scripts/bench.py --only eval --run outputs/RUN   # time the default evaluation
    python scripts/bench.py --only converge [--reader fixed] [--max-seconds 300]
    python scripts/bench.py --only contention [--reader fixed] [--train-seconds 10]
    python scripts/bench.py --device cuda --json bench.json --threads 1
    python scripts/bench.py --only profile --threads 1   # crnn 64 px, ctc 32 px, plain CRNN
    python scripts/bench.py --only levers --threads 1 --override model=plain_crnn
    python scripts/bench.py --only levers --threads 1 --override data.height=64   # crnn
    python scripts/bench.py --only levers --threads 1 --override data.height=64 \
        --levers float32,compile --lever-steps 30   # torch.compile (a minute of compiling)
    python scripts/bench.py --only curves --curves-data cap --minutes 5,15 --jobs 2
        # cap/train, cap/val, cap/test: scripts/captcha_strips.py (docs/own-strips.md)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from attnlab.bench import common, levers
from attnlab.bench.sections import SECTIONS, machine_line, run_section
from attnlab.io import write_json


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", default="synth,train,eval", help=f"sections of {','.join(SECTIONS)}")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    p.add_argument("--reader", choices=common.registry_names(), help="one reader only")
    p.add_argument("--synth-seconds", type=float, default=3.0, help="timed seconds (synth)")
    p.add_argument("--train-seconds", type=float, default=10.0, help="timed seconds per reader")
    p.add_argument("--run", type=Path, help="eval: a trained run directory (its best.pt)")
    p.add_argument("--eval-n", type=int, default=0, help="eval: strips per length")
    p.add_argument("--eval-full", action="store_true", help="eval: also time evaluate_run")
    p.add_argument("--folder-n", type=int, default=20_000, help="folder: strips exported")
    p.add_argument("--max-seconds", type=float, default=300.0, help="converge: training limit")
    p.add_argument("--val-every", type=int, default=50, help="converge: steps between checks")
    p.add_argument("--threshold", type=float, default=0.99, help="converge: exact accuracy")
    p.add_argument("--burners-per-cpu", type=int, default=1, help="contention: CPU load")
    p.add_argument("--repeats", type=int, default=2, help="contention: rounds (best kept)")
    p.add_argument("--profile-steps", type=int, default=3, help="profile: steps profiled")
    p.add_argument("--lever-steps", type=int, default=100, help="levers: steps before validation")
    p.add_argument("--levers", type=_levers, default=levers.LEVERS, help="levers: which (+compile)")
    p.add_argument("--curves-data", type=Path, help="curves: DIR with train/, val/, test/")
    p.add_argument("--curves-out", type=Path, default=Path("bench-curves"), help="curves: runs")
    p.add_argument("--minutes", type=_floats, default=[5.0, 15.0], help="curves: budgets (5,15)")
    p.add_argument("--candidate", action="append", help="curves: one candidate (repeatable)")
    p.add_argument("--calibrate-minutes", type=float, default=1.5, help="curves: pace run")
    p.add_argument("--pace", type=_pace, action="append", help="curves: NAME=STEPS_PER_MIN")
    p.add_argument("--jobs", type=int, default=1, help="curves: trainings at once")
    p.add_argument("--threads", type=int, default=0, help="torch threads; 0 = torch's default")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Hydra override of the train config (repeatable)",
    )
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    if unknown := sorted(set(args.sections) - set(SECTIONS)):
        p.error(f"--only: unknown section(s) {', '.join(unknown)}; choose from {SECTIONS}")
    if (args.eval_full and not args.run) or args.threads < 0:
        p.error("--eval-full needs --run" if args.eval_full else "--threads must be >= 0")
    if args.threads:
        args.override = [f"train.threads={args.threads}", *args.override]
    return args


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _levers(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = sorted(set(names) - set(levers.ALL))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{unknown or text!r}: choose from {','.join(levers.ALL)}")
    return names


def _pace(text: str) -> tuple[str, float]:
    name, _, value = text.rpartition("=")
    return name, float(value)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = common.device_name(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = common.machine(device)
    print(machine_line(info, device))
    report: dict = {"machine": info, "sections": {}}
    started = time.perf_counter()
    for name in [s for s in SECTIONS if s in args.sections]:
        print()
        report["sections"][name] = run_section(name, args, device)
        report["total_s"] = round(time.perf_counter() - started, 1)
        if args.json:  # after every section, whole or not at all
            write_json(args.json, report)
    print(f"\nbench done in {round(time.perf_counter() - started, 1)} s")
    return 0


if __name__ == "__main__":
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from attnlab.errors import UserError, one_line

    try:
        sys.exit(main())
    except (UserError, HydraException, OmegaConfBaseException) as err:
        print(f"bench: error: {one_line(err)}", file=sys.stderr)  # a bad --run or --override
        sys.exit(2)
