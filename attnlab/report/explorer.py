"""The explorer's data: every run's ``explore.json`` -> one JSON document the page embeds.

Runs are grouped by training range and evaluation; within a group there is one view per run
(labelled by its reader, and by its seed or folder when a reader has several runs there),
in the registry's reader order. A strip is named by its length and index in the fixed set,
and its image is stored once (keyed by a digest of pixels and label): a run whose strip of
that length and index has another digest read another strip, and its reading is left out
of that strip's views (the page says so). The page's own script (``templates/explorer.js``)
draws everything from this document; nothing is fetched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from attnlab.evaluation import explore
from attnlab.report.html import display_path
from attnlab.report.reader_styles import colours, reader_key
from attnlab.report.run_info import RunInfo
from attnlab.report.variants import counted
from attnlab.runs.jsonfiles import RunFileError
from attnlab.runs.rundir import RunDir


@dataclass(frozen=True)
class Explorer:
    """What the page's explorer section embeds: data (JSON, safe inside <script>), code."""

    data: str | None  # None: no evaluation that counts has an explore.json
    script: str
    style: str
    notes: tuple[str, ...] = ()


def _label(run: RunInfo, same_variant: list[RunInfo]) -> str:
    """The view's name: its variant (report.variants), with the seed when it has several."""
    name = run.variant or run.reader_name
    if len(same_variant) == 1:
        return name
    seeds = [r.seed for r in same_variant]
    if run.seed is not None and seeds.count(run.seed) == 1:
        return f"{name}, seed {run.seed}"
    return f"{name}, {display_path(run.path)}"


def _read(run: RunInfo, name: str, notes: list[str]) -> dict[str, Any] | None:
    path = RunDir(run.path).eval_dir(name).explore
    if not path.is_file():
        return None
    try:
        return explore.read(path)
    except RunFileError as exc:
        notes.append(f"{display_path(path)}: {exc}")
        return None


def _reading(s: dict[str, Any], stride: int) -> dict[str, Any]:
    out = {k: s.get(k) for k in ("reading", "confidence", "steps", "columns", "weights")}
    out["weight_steps"] = s.get("weight_steps")
    out["stride"] = stride
    return out


def explorer_data(runs: list[RunInfo]) -> tuple[dict[str, Any] | None, list[str]]:
    """The explorer's document for `runs` (from discover_runs), or None when no evaluation
    that counts has an explore.json; with notes on files that could not be used."""
    notes: list[str] = []
    images: dict[str, dict[str, Any]] = {}
    groups = []
    palette = colours(r.reader_name for r in runs)
    for train in sorted({r.train for r in runs if r.evals}):
        in_train = [r for r in counted(runs) if r.train == train and r.evals]
        evals = []
        for name in sorted({e for r in in_train for e in r.evals}):
            ran = sorted(
                (r for r in in_train if name in r.evals),
                key=lambda r: (reader_key(r.reader_name), str(r.path)),
            )
            views, strips, left_out = [], {}, 0
            for run in ran:
                doc = _read(run, name, notes)
                if doc is None:
                    continue
                same = [
                    r for r in ran if (r.variant, r.reader_name) == (run.variant, run.reader_name)
                ]
                v = len(views)
                views.append(
                    {
                        "reader": run.reader_name,
                        "label": _label(run, same),
                        "run": display_path(run.path),
                        "colour": palette.get(run.reader_name, "#57606a"),
                        "has_weights": bool(doc.get("has_weights")),
                    }
                )
                for s in doc["strips"]:
                    key = (int(s["length"]), int(s["index"]))
                    if key not in strips:
                        strips[key] = {
                            "length": key[0],
                            "index": key[1],
                            "source": str(s.get("source", "")),
                            "truth": str(s["truth"]),
                            "image": s["digest"],
                            "reads": {},
                        }
                        images.setdefault(
                            s["digest"],
                            {
                                "png": s["image"],
                                "width": s["width"],
                                "height": int(doc.get("height", 0)) or None,
                                "spans": s.get("spans"),
                            },
                        )
                    if strips[key]["image"] != s["digest"]:
                        left_out += 1  # this run read another strip under this index
                        continue
                    strips[key]["reads"][v] = _reading(s, int(doc.get("stride", 1)))
            if not views:
                continue
            lengths = _by_length(strips, len(views), set(ran[0].seen_lengths))
            evals.append(
                {
                    "eval": name,
                    "views": views,
                    "lengths": lengths,
                    "left_out": left_out,
                    "start": start(lengths),
                }
            )
        if evals:
            groups.append({"train": train, "evals": evals})
    if not groups:
        return None, notes
    return {"trains": groups, "images": images}, notes


def _by_length(strips: dict, n_views: int, seen: set[int]) -> list[dict[str, Any]]:
    """One eval's strips, keyed (length, index), as rows by length, seen or unseen."""
    lengths = []
    for length in sorted({k[0] for k in strips}):
        rows = [strips[k] for k in sorted(strips) if k[0] == length]
        for row in rows:  # one entry per view, null where the run has no reading
            row["reads"] = [row["reads"].get(i) for i in range(n_views)]
        split = "seen" if length in seen else "unseen"
        lengths.append({"length": length, "split": split, "strips": rows})
    return lengths


def start(lengths: list[dict[str, Any]]) -> dict[str, int]:
    """Where the explorer opens: the longest seen length (the longest length when none is
    seen), on its first strip where the readers disagree, else its first failure, else its
    first strip. Indices into `lengths` and into that length's strips."""
    seen = [i for i, entry in enumerate(lengths) if entry["split"] == "seen"]
    li = seen[-1] if seen else len(lengths) - 1
    strips = lengths[li]["strips"] if lengths else []

    def readings(s: dict[str, Any]) -> list[str]:
        return [r["reading"] for r in s["reads"] if r is not None]

    disagree = [i for i, s in enumerate(strips) if len(set(readings(s))) > 1]
    wrong = [i for i, s in enumerate(strips) if any(r != s["truth"] for r in readings(s))]
    return {"length": max(li, 0), "strip": (disagree or wrong or [0])[0]}


def script_json(data: Any) -> str:
    """JSON that is safe inside a <script> element: no "<", ">" or "&" left (so no
    "</script>" and no "<!--"), every string from a file or a run name kept as text."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _asset(name: str) -> str:
    return resources.files("attnlab.report").joinpath("templates", name).read_text("utf-8")


def explorer(runs: list[RunInfo]) -> Explorer:
    """The explorer section's content; without data the page says why there is none."""
    data, notes = explorer_data(runs)
    text = None if data is None else script_json(data)
    return Explorer(text, _asset("explorer.js"), _asset("explorer.css"), tuple(notes))


SECTION = "Explorer"


def left_out(ex: Explorer, runs: list[RunInfo]) -> str | None:
    """Why there is no explorer though runs were evaluated (the page says it too)."""
    if ex.data is not None or not any(r.evals for r in runs):
        return None
    return (
        "no evaluation that counts has an explore.json (attnlab eval writes one with "
        "eval.explore_n > 0)"
    )
