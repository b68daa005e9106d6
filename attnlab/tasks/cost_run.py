"""``attnlab cost``'s work: the inputs checked before anything is measured (the cost
section, the output folder, a run's config, the overrides a run's measure can honour, the
parameter-matched control), then every config measured (counts: attnlab.evaluation.cost;
times: attnlab.evaluation.cost_time) and the cost folder written (attnlab.report.cost_files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from attnlab.config.overrides import override_key
from attnlab.errors import UserError, one_line
from attnlab.evaluation import cost_count, cost_time
from attnlab.evaluation.cost import build, flop_row, growth, strip_slice, train_batches
from attnlab.report import cost_files as files

# What ``attnlab cost RUN`` reads from the command line: the run's own config is measured.
WITH_RUN = ("run", "train.threads", "train.device")


def run(cfg: DictConfig, overrides: list[str]) -> Path:
    """Check every input, measure every config, write the cost folder; return it."""
    from attnlab.config import seen_lengths
    from attnlab.config.cost import CostConfig
    from attnlab.models import registry
    from attnlab.runtime import resolve_device

    c = cfg.cost
    CostConfig.check(c)
    for note in CostConfig.normalise(c):
        print(f"note: {note}", flush=True)
    if c.match is not None:
        registry.check_names([str(c.match)], "cost.match")
    measured = configs(cfg, overrides)
    out = out_dir(cfg)
    device = resolve_device(str(cfg.train.device))
    notes = [matched(one, overrides, c) for one in measured] if c.match else []
    rows, foot = [], []
    for one in measured:
        print(f"cost: {one.model.name} at lengths {list(c.lengths)} on {device}", flush=True)
        rows += measure(one, c, device)
        if c.footprint_batch:
            length = c.footprint_length or max(seen_lengths(one.data))
            foot += footprint(one, c, device, int(length))
    if line := disagreeing(rows):
        print(line, flush=True)
        notes.append(line)
    out.mkdir(parents=True, exist_ok=True)
    files.write(out, rows, growth(rows), foot, notes)
    print(files.markdown(rows, growth(rows), foot, notes))
    print(f"cost: {out / files.COST_CSV} (and {files.COST_MD}, {files.GROWTH_CSV}, plots)")
    return out


def out_dir(cfg: DictConfig) -> Path:
    """The cost folder (``cost.out``; RUN/cost with a run; else ./cost), checked before any
    measurement: a folder, or a path a folder can be made at."""
    if cfg.cost.out is not None:
        out, what = Path(str(cfg.cost.out)), f"cost.out={cfg.cost.out}"
    else:
        out = Path(str(cfg.run)) / files.COST_DIR if cfg.run is not None else Path(files.COST_DIR)
        what = f"the cost folder {out}"
    if out.exists() and not out.is_dir():
        raise UserError(f"{what}: is a file, not a folder; name a folder (made if missing)")
    above = next((p for p in [out, *out.parents] if p.exists()), Path("."))
    if not above.is_dir():
        raise UserError(f"{what}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UserError(f"{what}: {above} is not writable here")
    return out


def run_config(run: str) -> DictConfig:
    """The composed config a run trained with (its ``.hydra/config.yaml``), typed; a file
    that is not a run's config is one line."""
    from attnlab.models import registry
    from attnlab.runs.rundir import RunDir

    rd = RunDir(run)
    if not rd.config.is_file():
        raise UserError(f"run={run}: no run here ({rd.config} is missing)")
    try:
        cfg = OmegaConf.load(rd.config)
    except Exception as err:  # not YAML (an edited or truncated file)
        raise UserError(f"run={run}: {rd.config} is not YAML: {one_line(err)}") from None
    name = OmegaConf.select(cfg, "model.name") if isinstance(cfg, DictConfig) else None
    if not isinstance(name, str):
        raise UserError(f"run={run}: {rd.config} is not a run's config (no model.name)")
    try:
        cfg.model = registry.config_node(name, cfg.model)
    except UserError as err:
        raise UserError(f"run={run}: {rd.config}: {err}") from None
    except Exception as err:  # a model section the reader's schema does not take
        raise UserError(f"run={run}: {rd.config}: model: {one_line(err)}") from None
    return cfg


def configs(cfg: DictConfig, overrides: list[str]) -> list[DictConfig]:
    """The training configs measured: a run's own, or for each of ``cost.readers`` the
    command's config with ``model=NAME`` (the rest of its overrides kept)."""
    from attnlab.config import check_experiment
    from attnlab.models import registry
    from attnlab.tasks.compose import compose

    if cfg.run is not None:
        if cfg.cost.readers:
            raise UserError("cost.readers: give readers or a run, not both")
        got = [run_config(str(cfg.run))]
        for o in overrides:
            k = override_key(o)
            if not (k in WITH_RUN or k.startswith(("cost.", "hydra"))):
                raise UserError(
                    f"{o}: attnlab cost RUN measures the run as it trained (its "
                    f"{got[0].model.name} reader and config); with a run only cost.*, "
                    "train.threads and train.device apply (measure this without RUN)"
                )
    elif not cfg.cost.readers:
        got = [cfg]
    else:
        names = registry.check_names(list(cfg.cost.readers), "cost.readers")
        rest = [o for o in overrides if not override_key(o).startswith(("model", "cost.readers"))]
        got = [compose([f"model={n}", *rest], config_name="cost") for n in names]
    for c in got:
        try:
            check_experiment(c)
        except UserError:
            raise
        except Exception as err:  # a run's config missing keys or holding the wrong types
            raise UserError(f"run={cfg.run}: its config: {one_line(err)}") from None
    return got


def matched(cfg: DictConfig, overrides: list[str], c: Any) -> str:
    """The parameter-matched control of ``cfg``'s reader against reader ``c.match``, as
    the override that gives it (attnlab.evaluation.cost_match)."""
    from attnlab.evaluation.cost_match import note
    from attnlab.models import registry
    from attnlab.tasks.compose import compose

    rest = [o for o in overrides if not override_key(o).startswith(("model", "cost.", "run"))]
    target = compose([f"model={c.match}", *rest], config_name="cost")
    want = registry.check_size(target.model, target.data.height, target.data.charset)
    return note(cfg, str(c.match_key), want, str(c.match))


def measure(cfg: DictConfig, c: Any, device: torch.device) -> list[dict[str, Any]]:
    """One row per length of ``c.lengths`` for the reader of ``cfg`` (``c``: the cost
    section)."""
    from attnlab.runtime import bf16_autocast
    from attnlab.training.optim import optimiser

    model = build(cfg, device)
    params = cost_count.params_by_part(model)
    opt, _ = optimiser(model, cfg.optim, cfg.train.steps)
    t = cfg.train
    bf16 = bf16_autocast(t.bf16, device)
    rows = []
    for length in c.lengths:
        row: dict[str, Any] = {"reader": model.name, "length": int(length)}
        row.update({f"params_{p}": v for p, v in params.items()})
        row["params"] = sum(params.values())
        strips = cost_count.strips(cfg, int(length), max(c.strips, max(c.read_batches)))
        counted = cost_count.count_strips(model, strip_slice(strips, 0, c.strips))
        row.update(flop_row(model, counted))
        row["flop_source"] = cost_count.FLOP_SOURCE.get(device.type, "FlopCounterMode")
        spread: list[float] = []
        for size in c.read_batches:
            s = cost_time.read_seconds(model, strips, int(size), device, c.repeats, spread)
            row[f"read_b{size}_ms"] = 1000 * s
        if c.train:
            micro = train_batches(cfg, int(length), t.batch_size * t.accumulate, t.accumulate)
            step = cost_time.measure_step(model, opt, micro, device, bf16, c.repeats, spread)
            row["train_ms"] = 1000 * step.pop("train_s_per_strip")
            row.update(step)
        row.update({"device": str(device), "threads": torch.get_num_threads()})
        row["load"] = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
        row["time_spread"] = round(max(spread), 2) if spread else None
        rows.append(row)
    return rows


FOOTPRINT = (  # (label, accumulate, bf16): the same effective batch each
    ("one batch, float32", 1, False),
    ("micro-batches (accumulate), float32", 4, False),
    ("one batch, bf16 autocast", 1, True),
)


def footprint(cfg: DictConfig, c: Any, device: torch.device, length: int) -> list[dict[str, Any]]:
    """Step time and peak memory of one training step of ``c.footprint_batch`` strips of
    ``length`` digits: in one batch, as 4 accumulated micro-batches, and under bf16 (where
    the device supports it: runtime.bf16_autocast)."""
    from attnlab.runtime import bf16_autocast
    from attnlab.training.optim import optimiser

    rows = []
    for label, acc, bf16 in FOOTPRINT:
        if bf16 and not bf16_autocast(True, device):
            print(f"cost: {label}: not measured, {device} has no bf16", flush=True)
            continue
        model = build(cfg, device)
        opt, _ = optimiser(model, cfg.optim, cfg.train.steps)
        micro = train_batches(cfg, length, c.footprint_batch, acc)
        step = cost_time.measure_step(model, opt, micro, device, bf16, c.repeats)
        rows.append(
            {
                "reader": model.name,
                "length": length,
                "setting": label,
                "batch": c.footprint_batch,
                "micro_batch": c.footprint_batch // acc,
                "accumulate": acc,
                "bf16": bf16,
                "step_ms": 1000 * step["train_s_per_strip"] * step["train_strips"],
                "mem_peak_mib": step.get("mem_peak_mib"),
                "mem_reserved_mib": step.get("mem_reserved_mib"),
                "mem_kind": step.get("mem_kind"),
                "device": str(device),
            }
        )
    return rows


def disagreeing(rows: list[dict[str, Any]]) -> str | None:
    """One line when repeated timings of a measure disagree (``cost_time.DISAGREE``), naming
    the worst, the threads and the load; None when they agree."""
    spread = [r for r in rows if (r.get("time_spread") or 0) > cost_time.DISAGREE]
    if not spread:
        return None
    worst = max(spread, key=lambda r: r["time_spread"])
    return (
        f"warning: repeated timings disagree by up to x{worst['time_spread']:.1f} "
        f"({worst['reader']}, length {worst['length']}; {len(spread)} of {len(rows)} rows) "
        f"on {worst['threads']} thread(s) at load {worst['load']}: the machine was busy, the "
        "times (the best of cost.repeats) may be slowed; measure again on an idle machine"
    )
