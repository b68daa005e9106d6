"""The bench's sections by name, as ``scripts/bench.py`` runs them: each runs its tested
function of attnlab.bench with the command line's settings, prints its figures and returns
them (for ``--json``)."""

from __future__ import annotations

from argparse import Namespace

from attnlab.bench import common, contention, converge, curves, folder, synth, train, typefaces
from attnlab.bench import eval as evaluation
from attnlab.bench import levers as lever_bench
from attnlab.bench import profile as step_profile

SECTIONS = (
    "synth", "train", "eval", "converge", "typefaces", "folder", "contention", "profile", "levers",
    "curves",
)  # fmt: skip


def run_section(name: str, args: Namespace, device: str) -> dict:
    """Run one section and print its figures."""
    reader = args.reader or "attention"
    if name == "synth":
        r = synth.run(args.synth_seconds)
        synth.show(r)
    elif name == "train":
        results = [
            common.in_child(train.run, x, device, args.train_seconds, args.override)
            for x in ([args.reader] if args.reader else common.registry_names())
        ]
        if not args.reader:  # the own-strips recipe beside the readers at their defaults
            results += train.run_recipes(device, args.train_seconds, args.override)
        train.show(results, device)
        r = {x["reader"]: x for x in results}
    elif name == "eval":
        r = evaluation.run(device, args.run, reader, args.override, args.eval_n, args.eval_full)
        evaluation.show(r, device)
    elif name == "contention":
        readers = [args.reader] if args.reader else ["attention", "fixed"]
        results = contention.run(
            readers, device, args.train_seconds, args.override, args.burners_per_cpu, args.repeats
        )
        contention.show(results, device, args.override)
        r = {x["reader"]: x for x in results}
    elif name == "typefaces":
        r = typefaces.main(["--model", reader])  # it prints its own table
    elif name == "profile":
        configs = step_profile.configs()
        if args.reader:  # one reader at its defaults instead of the recipe's and the plain CRNN
            configs = {args.reader: [f"model={args.reader}"]}
        results = [
            step_profile.run(n, keys, device, args.override, args.profile_steps)
            for n, keys in configs.items()
        ]
        step_profile.show(results, device)
        r = {x["name"]: x for x in results}
    elif name == "levers":
        reader = args.reader or "crnn"
        r = lever_bench.run(
            reader, device, args.override, args.train_seconds, args.lever_steps, args.levers
        )
        lever_bench.show(r, device)
    elif name == "curves":
        r = curves.run(
            *curves_folders(args), args.curves_out, args.minutes, args.candidate or None,
            args.calibrate_minutes, args.jobs, args.override, dict(args.pace or []),
        )  # fmt: skip
        curves.show(r)
    elif name == "folder":
        r = folder.run(reader, device, args.train_seconds, args.override, args.folder_n)
        folder.show(r, device)
    else:
        say = lambda line: print(line, flush=True)  # noqa: E731
        r = converge.run(
            reader, device, args.override, args.max_seconds, args.val_every, args.threshold, say
        )
        converge.show(r, device)
    return r


def curves_folders(args: Namespace) -> tuple:
    """curves: the training, validation and test folders (--curves-data DIR: DIR/train,
    DIR/val, DIR/test)."""
    if args.curves_data is None:
        raise SystemExit("bench: --only curves needs --curves-data DIR (DIR/train, val, test)")
    return tuple(args.curves_data / part for part in ("train", "val", "test"))


def machine_line(info: dict, device: str) -> str:
    """The machine the figures were measured on, and its load at the start."""
    gpu = f" [{info['gpu']}, CUDA {info['cuda']}]" if "gpu" in info else ""
    return (
        f"machine: {info['host']}  nproc {info['nproc']} (usable {info['affinity']})  torch "
        f"{info['torch']} ({info['torch_threads']} threads)  python {info['python']}  "
        f"device {device}{gpu}\nload average at start: {info['load_avg']} (other work skews "
        "the timings)"
    )
