"""The files of a cost folder (``attnlab cost``: ``cost/``, ``RUN/cost/`` or ``cost.out``):
their names, ``cost.md`` (the cost by length, the growth against the chapter, the
footprint), the plots, and the lab's step 8 table read back from them. Each file is written
whole (attnlab.io); the report reads ``cost.csv`` as it reads any other table
(attnlab.report.cost)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

COST_DIR = "cost"  # attnlab cost RUN writes RUN/cost/
COST_CSV, GROWTH_CSV, FOOTPRINT_CSV, COST_MD = (
    "cost.csv",
    "growth.csv",
    "footprint.csv",
    "cost.md",
)
PLOTS = ("cost_flops.png", "cost_time.png")


def write(
    out: Path, rows: list[dict], growth: list[dict], foot: list[dict], notes: list[str]
) -> None:
    from attnlab.io import csv_text, write_text

    write_text(out / COST_CSV, csv_text(pd.DataFrame(rows)))
    write_text(out / GROWTH_CSV, csv_text(pd.DataFrame(growth)))
    if foot:
        write_text(out / FOOTPRINT_CSV, csv_text(pd.DataFrame(foot)))
    write_text(out / COST_MD, markdown(rows, growth, foot, notes) + "\n")
    plots(out, pd.DataFrame(rows))


def _fmt(frame: pd.DataFrame, digits: dict[str, int]) -> str:
    shown = frame.copy()
    for col, d in digits.items():
        if col in shown:
            shown[col] = shown[col].map(lambda v, d=d: "-" if pd.isna(v) else f"{v:,.{d}f}")
    return shown.to_markdown(index=False)


def markdown(rows: list[dict], growth: list[dict], foot: list[dict], notes: list[str]) -> str:
    """cost.md: the cost by length, the growth ratios against the chapter, the footprint."""
    frame = pd.DataFrame(rows)
    kflop = [c for c in frame if c.startswith("flops_") and not c.startswith("flops_per_")]
    shown = frame[["reader", "length", "columns", "steps", "params"]].copy()
    for col in [*kflop, "flops"]:
        shown[col.replace("flops", "MFLOP")] = frame[col] / 1e6
    times = [c for c in frame if c.startswith("read_") or c == "train_ms"]
    for col in [*times, "mem_peak_mib"]:
        if col in frame:
            shown[col] = frame[col]
    mflop = {c: 3 for c in shown if c.startswith("MFLOP")}
    lines = ["## Cost by strip length (per strip; FLOPs of the forward, teacher forcing)", ""]
    timed = {c: 3 for c in times} | {"mem_peak_mib": 1}
    lines += [_fmt(shown, {"columns": 1, "steps": 1, "params": 0, **mflop, **timed}), ""]
    lines += [f"times in ms per strip on {frame['device'].iloc[0]}; memory: "]
    lines[-1] += str(frame["mem_kind"].iloc[0]) if "mem_kind" in frame else "not measured"
    if growth:
        g = pd.DataFrame(growth)
        g = g.pivot_table(index=["reader", "quantity"], columns="length", values="ratio")
        g.columns = [f"{n}->{2 * n}" for n in g.columns]
        lines += [
            "",
            "## cost(2L) / cost(L): the chapter predicts 2 per column or step, 4 per pair",
        ]
        lines += ["", g.reset_index().to_markdown(index=False, floatfmt=".2f")]
    if foot:
        f = pd.DataFrame(foot)[["reader", "length", "setting", "batch", "micro_batch", "step_ms"]]
        full = pd.DataFrame(foot)
        f["mem_peak_mib"] = full["mem_peak_mib"]
        if full["mem_reserved_mib"].notna().any():
            f["mem_reserved_mib"] = full["mem_reserved_mib"]
        lines += ["", "## One training step: one batch, accumulated micro-batches, bf16", ""]
        lines += [_fmt(f, {"step_ms": 1, "mem_peak_mib": 1, "mem_reserved_mib": 1})]
        lines += ["", f"memory: {full['mem_kind'].iloc[0]}"]
    lines += ["", *(f"- {n}" for n in notes)] if notes else []
    return "\n".join(lines)


def plots(out: Path, frame: pd.DataFrame) -> None:
    """cost_flops.png (MFLOP per strip by part, log axes) and cost_time.png (ms per strip)."""
    from matplotlib.figure import Figure

    from attnlab.io import write_figure

    readers = list(dict.fromkeys(frame["reader"]))
    parts = [c for c in frame if c.startswith("flops_") and not c.startswith("flops_per")]
    parts = [c for c in parts if c != "flops_decoder_per_step" and frame[c].fillna(0).any()]
    fig = Figure(figsize=(4 * len(readers), 3.4))
    for i, r in enumerate(readers):
        ax = fig.add_subplot(1, len(readers), i + 1)
        sub = frame[frame["reader"] == r]
        for col in [*parts, "flops_per_pair"]:
            if col in sub and sub[col].fillna(0).any():
                ax.plot(sub["length"], sub[col] / 1e6, marker="o", label=col.removeprefix("flops_"))
        ax.set(xscale="log", yscale="log", title=r, xlabel="digits", ylabel="MFLOP per strip")
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure(out / PLOTS[0], fig)
    times = [c for c in frame if c.startswith("read_") or c == "train_ms"]
    fig = Figure(figsize=(4 * max(1, len(times)), 3.4))
    for i, col in enumerate(times):
        ax = fig.add_subplot(1, len(times), i + 1)
        for r in readers:
            sub = frame[frame["reader"] == r]
            ax.plot(sub["length"], sub[col], marker="o", label=r)
        ax.set(xscale="log", yscale="log", title=col, xlabel="digits", ylabel="ms per strip")
        ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure(out / PLOTS[1], fig)


def lab_table(cost_csv: Path, growth_csv: Path, lengths: tuple[int, ...] = (8, 16, 32)) -> str:
    """The README's lab step 8 figure: per reader the parameters, MFLOP per strip at
    ``lengths``, the pairwise share and times at the longest; then cost(2L) / cost(L) from
    half the longest length to the longest, FLOPs by part and times."""
    frame = pd.read_csv(cost_csv, dtype={"reader": str})
    growth = pd.read_csv(growth_csv, dtype={"reader": str})
    top, half = lengths[-1], lengths[-1] // 2
    times = [c for c in frame if c.startswith("read_b")] + ["train_ms"]
    named = {c: f"read, batch {c[6:-3]}" for c in times} | {"train_ms": "train step"}
    rows, ratios = [], []
    for reader, sub in frame.groupby("reader", sort=False):
        at = sub.set_index("length")
        row = [reader, f"{int(at['params'].iloc[0]):,}"]
        row += [f"{at.loc[n, 'flops'] / 1e6:.2f}" for n in lengths]
        row += [f"{at.loc[top, 'flops_per_pair'] / 1e6:.2f}"]
        row += [f"{at.loc[top, c]:.2f}" for c in times]
        rows.append(row)
        g = growth[(growth["reader"] == reader) & (growth["length"] == half)]
        got = dict(zip(g["quantity"], g["ratio"], strict=True))
        qs = ["flops_encoder", "flops_decoder", "flops_per_pair", "flops", *times]
        ratios.append([reader, *(f"×{got[q]:.2f}" if q in got else "-" for q in qs)])
    head = ["reader", "parameters", *(f"MFLOP at {n}" for n in lengths)]
    head += [f"pairwise MFLOP at {top}", *(f"ms/strip at {top}: {named[c]}" for c in times)]
    one = pd.DataFrame(rows, columns=head).to_markdown(index=False, disable_numparse=True)
    head = ["reader", "encoder FLOPs", "decoder FLOPs", "pairwise FLOPs (chapter: ×4)"]
    head += ["all FLOPs", *(f"{named[c]} time" for c in times)]
    two = pd.DataFrame(ratios, columns=head).to_markdown(index=False, disable_numparse=True)
    at = frame.groupby("length")[["columns", "steps"]].mean()
    cols, steps = at.loc[top] / at.loc[half]
    return (
        f"{one}\n\nFrom {half} to {top} digits (columns ×{cols:.2f}, output steps ×{steps:.2f}):"
        f"\n\n{two}"
    )
