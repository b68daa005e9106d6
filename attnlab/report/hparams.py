"""``<report>/tensorboard/``: one TensorBoard HParams session per run, so that
``tensorboard --logdir report/tensorboard`` shows a sweep as one row per run, sortable and
filterable by the keys that make its variant.

Written with tensorboard's own protobufs and event writer (no torch, no TensorFlow). The
hparams of a run: ``reader``, ``train``, its variant's swept keys (``RunInfo.swept``) and
``seed``. Its metrics: each evaluation's split totals (exact_acc, cer) and per-length exact
accuracy, from the same per-run rows the report aggregates (``aggregate.long_frame``).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pandas as pd

from attnlab.evaluation.metrics import TOTAL
from attnlab.report.run_info import RunInfo

TENSORBOARD = "tensorboard"  # the folder in the report


def session_params(run: RunInfo) -> dict[str, str | int]:
    """The hparams of one run: what makes its variant, then its seed."""
    params: dict[str, str | int] = {"reader": run.reader_name, "train": run.train}
    params.update(run.swept)
    if run.seed is not None:
        params["seed"] = run.seed
    return params


def session_metrics(long: pd.DataFrame, run: RunInfo) -> dict[str, float]:
    """tag -> value: ``<eval>/<split>/exact_acc``, ``<eval>/<split>/cer`` and
    ``<eval>/exact_acc/len<NN>`` of one run (a metric not measured is left out)."""
    out: dict[str, float] = {}
    if long.empty:
        return out
    for rec in long[long["run"] == str(run.path)].to_dict("records"):
        if rec["length"] == TOTAL:
            for name in ("exact_acc", "cer"):
                out[f"{rec['eval']}/{rec['split']}/{name}"] = rec[name]
        else:
            out[f"{rec['eval']}/exact_acc/len{int(rec['length']):02d}"] = rec["exact_acc"]
    return {k: float(v) for k, v in out.items() if pd.notna(v)}


def _session_end(status: str):
    """The session's end: the run's status as HParams' Status column shows it."""
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2, summary_v2

    code = {"complete": api_pb2.STATUS_SUCCESS, "failed": api_pb2.STATUS_FAILURE}
    code["running"] = api_pb2.STATUS_RUNNING  # interrupted, stale, unknown: UNKNOWN
    end = plugin_data_pb2.SessionEndInfo(status=code.get(status, api_pb2.STATUS_UNKNOWN))
    data = plugin_data_pb2.HParamsPluginData(
        session_end_info=end, version=metadata.PLUGIN_DATA_VERSION
    )
    return summary_v2._summary_pb(metadata.SESSION_END_INFO_TAG, data)  # its own builder


def _session_dir(i: int, run: RunInfo) -> str:
    label = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{run.variant or run.reader_name}_seed{run.seed}")
    return f"{i:03d}_{label}"


def write_hparams(out: Path, runs: list[RunInfo], long: pd.DataFrame) -> Path:
    """Write ``out/tensorboard/``: the experiment (every hparam and metric) at its top and
    one session per run in a folder of its own; returns the folder."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    root = Path(out) / TENSORBOARD
    now = time.time()
    sessions = [(r, session_params(r), session_metrics(long, r)) for r in runs]
    names = sorted({k for _, p, _ in sessions for k in p})
    tags = sorted({t for _, _, m in sessions for t in m})

    def write(folder: Path, events: list[Event]) -> None:
        writer = EventFileWriter(str(folder))
        for ev in events:
            writer.add_event(ev)
        writer.close()

    config = hp.hparams_config_pb([hp.HParam(n) for n in names], [hp.Metric(t) for t in tags])
    write(root, [Event(wall_time=now, summary=config)])
    for i, (run, params, metrics) in enumerate(sessions):
        step = run.step or 0
        events = [Event(wall_time=now, summary=hp.hparams_pb(params, trial_id=str(run.path)))]
        for tag, value in metrics.items():
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            events.append(Event(wall_time=now, step=step, summary=summary))
        events.append(Event(wall_time=now, step=step, summary=_session_end(run.status)))
        write(root / _session_dir(i, run), events)
    return root
