"""The export's JSON sidecar (``attnlab-onnx.json``) and the checks a graph passes before
onnxruntime loads it. Torch-free: the reference loop (``attnlab.export.runtime``) uses it.

An export folder is data from elsewhere. Nothing in it is run as code: the sidecar is JSON
with a fixed set of keys, each of one type (any other key, a wrong type, a file name that
is not ``<graph>.onnx`` is refused); each graph file must have the sidecar's sha256, parse
as an ONNX model using only the standard operator domain at the sidecar's opset, hold its
weights inside (no external data files), and have exactly the inputs and outputs the
sidecar declares for a reader of its kind. Only then is it handed to onnxruntime.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from attnlab.data import pixels
from attnlab.errors import UserError
from attnlab.models.tokens import BOS, DIGIT0, EOS, PAD

SIDECAR = "attnlab-onnx.json"
PARITY = "parity.json"
FORMAT, FORMAT_VERSION, OPSET = "attnlab-onnx", 2, 17
TOKENS = {"pad": PAD, "bos": BOS, "eos": EOS, "first_char": DIGIT0}
KINDS = {"stepwise": ("encoder", "step"), "ctc": ("ctc",)}
MEMORY_NAME = re.compile(r"^[a-z][a-z_]{0,31}$")
RESERVED = {"images", "widths", "state", "prev", "next_state", "logits", "weights"}
STANDARD_DOMAINS = {"", "ai.onnx"}
MAX_GRAPH_BYTES = 512 * 2**20
MAX_SIDECAR_BYTES = 2**20
MAX_DEPTH = 6  # the sidecar's deepest value (graphs.<name>.inputs[i]) is at depth 3
# The keys every graph's ONNX metadata holds, copied from the sidecar when it is written
# (``meta`` -> value as text): what ties the graphs to their sidecar and their run.
BOUND = {
    "checkpoint_sha256": lambda m: m["source"]["checkpoint_sha256"],
    "reader": lambda m: m["reader"],
    "kind": lambda m: m["kind"],
    "charset": lambda m: m["charset"],
    "height": lambda m: str(m["height"]),
    "stride": lambda m: str(m["stride"]),
}
PREFIX = "attnlab."

# key -> type (a tuple: any of them); the keys of each kind, no more and no fewer.
COMMON = {
    "format": str,
    "format_version": int,
    "reader": str,
    "kind": str,
    "charset": str,
    "height": int,
    "stride": int,
    "tokens": dict,
    "decoding": dict,
    "opset": int,
    "graphs": dict,
    "source": dict,
    "pixels": dict,
}
STEPWISE = {"memory": list, "weights": bool}
DECODING = {"step_limit": str, "beam_alpha": (int, float), "ctc_blank": str}
SOURCE = {"checkpoint": str, "checkpoint_sha256": str, "step": int, "which": str}
GRAPH = {"file": str, "sha256": str, "inputs": list, "outputs": list}
TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


def require_extra() -> None:
    """onnx and onnxruntime, or one line saying how to get them."""
    import importlib

    missing = []
    for name in ("onnx", "onnxruntime"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UserError(f"ONNX export needs {' and '.join(missing)}: pip install 'attnlab[export]'")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _keys(obj: Any, spec: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown, missing = sorted(set(obj) - set(spec)), sorted(set(spec) - set(obj))
    if unknown or missing:
        what = (f"unknown key(s) {unknown}" if unknown else "") + (
            f"{'; ' if unknown else ''}missing key(s) {missing}" if missing else ""
        )
        raise UserError(f"{where}: {what}")
    for key, kind in spec.items():
        value = obj[key]
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
        if not ok:
            raise UserError(f"{where}: {key} must be {_type_name(kind)}, got {value!r:.60}")


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(TYPE_NAMES[k] for k in kinds)


def expected_io(meta: dict) -> dict[str, tuple[list[str], list[str]]]:
    """Each graph's inputs and outputs for a reader of this kind: what its graph must have."""
    if meta["kind"] == "ctc":
        return {"ctc": (["images", "widths"], ["log_probs", "columns"])}
    memory = meta["memory"]
    step_out = ["logits", "next_state", *(["weights"] if meta["weights"] else [])]
    return {
        "encoder": (["images", "widths"], [*memory, "state"]),
        "step": ([*memory, "state", "prev"], step_out),
    }


def check_meta(meta: Any, where: str) -> dict:
    """The sidecar's content, checked key by key (see the module docstring)."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise UserError(f"{where}: not an attnlab ONNX export (format is not {FORMAT!r})")
    if meta.get("kind") not in KINDS:
        raise UserError(f"{where}: kind must be one of {sorted(KINDS)}, got {meta.get('kind')!r}")
    _keys(meta, COMMON | (STEPWISE if meta["kind"] == "stepwise" else {}), where)
    if meta["format_version"] != FORMAT_VERSION:
        raise UserError(
            f"{where}: format_version {meta['format_version']} (this attnlab reads "
            f"{FORMAT_VERSION})"
        )
    if meta["opset"] != OPSET:
        raise UserError(f"{where}: opset {meta['opset']} (exports use opset {OPSET})")
    if meta["tokens"] != TOKENS:
        raise UserError(f"{where}: tokens must be {TOKENS}, got {meta['tokens']!r:.80}")
    if meta["pixels"] != pixels.CONTRACT:
        raise UserError(
            f"{where}: pixels is not the pixel contract of this attnlab (edited, or "
            "written by another version; export the run again)"
        )
    _keys(meta["decoding"], DECODING, f"{where}: decoding")
    _keys(meta["source"], SOURCE, f"{where}: source")
    charset = meta["charset"]
    if not charset or len(set(charset)) != len(charset) or not charset.isprintable():
        raise UserError(f"{where}: charset must be distinct printable characters")
    for key in ("height", "stride"):
        if not 1 <= meta[key] <= 4096:
            raise UserError(f"{where}: {key} {meta[key]} is out of range")
    if meta["kind"] == "stepwise":
        names = meta["memory"]
        bad = [n for n in names if not isinstance(n, str) or not MEMORY_NAME.match(n)]
        if bad or len(set(names)) != len(names) or set(names) & RESERVED or "mask" not in names:
            raise UserError(
                f"{where}: memory must be distinct lower-case names with mask, got {names!r:.80}"
            )
    if set(meta["graphs"]) != set(KINDS[meta["kind"]]):
        raise UserError(
            f"{where}: graphs must be {list(KINDS[meta['kind']])}, got {sorted(meta['graphs'])}"
        )
    for name, entry in meta["graphs"].items():
        at = f"{where}: graphs.{name}"
        _keys(entry, GRAPH, at)
        if entry["file"] != f"{name}.onnx":
            raise UserError(f"{at}: file must be {name}.onnx, got {entry['file']!r:.80}")
        if not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise UserError(f"{at}: sha256 must be 64 hex digits")
        ins, outs = expected_io(meta)[name]
        # The exporter drops memory inputs a step never reads: a subset of them, in order.
        subset = [i for i in ins if i in entry["inputs"]]
        if name == "step" and entry["inputs"] == subset and {"state", "prev"} <= set(subset):
            ins = subset
        if entry["inputs"] != ins or entry["outputs"] != outs:
            raise UserError(
                f"{at}: inputs/outputs {entry['inputs']} -> {entry['outputs']} "
                f"are not the {meta['kind']} reader's {ins} -> {outs}"
            )
    return meta


def read_meta(folder: Path) -> dict:
    path = Path(folder) / SIDECAR
    if not Path(folder).is_dir():
        raise UserError(f"{folder}: no such export folder (attnlab export RUN OUT writes one)")
    if not path.is_file():
        raise UserError(f"{path}: missing (not an attnlab ONNX export folder)")
    if path.stat().st_size > MAX_SIDECAR_BYTES:
        raise UserError(f"{path}: over {MAX_SIDECAR_BYTES // 2**10} KiB, not an attnlab sidecar")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: not valid JSON ({err})") from err
    except RecursionError as err:
        raise UserError(f"{path}: JSON nested too deeply for an attnlab sidecar") from err
    if _depth(meta) > MAX_DEPTH:
        raise UserError(
            f"{path}: JSON nested deeper than {MAX_DEPTH} levels, not an attnlab sidecar"
        )
    return check_meta(meta, str(path))


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (0: a plain value), without recursion."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth + 1)
            if depth + 1 <= MAX_DEPTH:  # beyond that the answer is known
                todo.extend(
                    (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
                )
    return deepest


def graph_bytes(folder: Path, meta: dict, name: str) -> bytes:
    """The graph file's bytes, after every check of the module docstring."""
    entry = meta["graphs"][name]
    path = Path(folder) / entry["file"]
    if not path.is_file() or path.is_symlink():
        raise UserError(f"{path}: missing, or not a regular file")
    if path.stat().st_size > MAX_GRAPH_BYTES:
        raise UserError(f"{path}: over {MAX_GRAPH_BYTES // 2**20} MiB, not an attnlab graph")
    data = path.read_bytes()
    if sha256(data) != entry["sha256"]:
        raise UserError(f"{path}: sha256 does not match {SIDECAR} (changed since export)")
    check_graph(data, entry["inputs"], entry["outputs"], str(path), bound(meta))
    return data


def bound(meta: dict) -> dict[str, str]:
    """The metadata every graph of this export holds (``BOUND``, keys prefixed)."""
    return {PREFIX + key: value(meta) for key, value in BOUND.items()}


def check_graph(
    data: bytes, inputs: list[str], outputs: list[str], where: str, tied: dict[str, str]
) -> None:
    """Parse the model (protobuf only) and refuse anything but a plain standard-domain graph
    with exactly these inputs and outputs, made for this sidecar (``tied``: its metadata)."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise UserError(f"{where}: not an ONNX model ({type(err).__name__})") from err
    domains = {(o.domain, o.version) for o in model.opset_import}
    if any(d not in STANDARD_DOMAINS or v != OPSET for d, v in domains) or len(model.functions):
        raise UserError(
            f"{where}: operator domains {sorted(domains)} (only the standard domain "
            f"at opset {OPSET}; no custom operators or functions)"
        )
    _check_nodes(model.graph, where)
    given = [i.name for i in model.graph.input if i.name not in _initializers(model.graph)]
    got = [o.name for o in model.graph.output]
    if given != inputs or got != outputs:
        raise UserError(
            f"{where}: the graph takes {given} -> {got}, the sidecar says {inputs} -> {outputs}"
        )
    _check_tied(model, tied, where)


def _check_tied(model, tied: dict[str, str], where: str) -> None:
    """The graph's metadata against its sidecar's: graphs of another run or checkpoint, or a
    sidecar whose charset, height or stride was edited, are refused naming the first key."""
    held = {p.key: p.value for p in model.metadata_props if p.key.startswith(PREFIX)}
    if not held:
        raise UserError(
            f"{where}: the graph does not say which run it was exported from (an export of an "
            "older attnlab, or not attnlab's): export the run again"
        )
    for key, want in tied.items():
        got = held.get(key)
        if got != want:
            what = key.removeprefix(PREFIX)
            if what == "checkpoint_sha256":
                why = (
                    f"was exported from checkpoint {str(got)[:12]}, {SIDECAR} names "
                    f"{want[:12]}: the graphs are another run's or another checkpoint's"
                )
            else:
                why = (
                    f"was exported with {what} {got!r:.40}, {SIDECAR} says {want!r:.40}: "
                    "the sidecar was edited or belongs to another export"
                )
            raise UserError(f"{where}: {why}")


def _initializers(graph) -> set[str]:
    return {t.name for t in graph.initializer}


def _check_nodes(graph, where: str) -> None:
    import onnx

    for tensor in graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            raise UserError(f"{where}: weights in an external file ({tensor.name}) are refused")
    for node in graph.node:
        if node.domain not in STANDARD_DOMAINS:
            raise UserError(
                f"{where}: node {node.name or node.op_type!r} uses the custom "
                f"operator domain {node.domain!r}"
            )
        for attr in node.attribute:  # If, Loop, Scan bodies
            for sub in [attr.g, *attr.graphs] if attr.type in (5, 10) else []:
                _check_nodes(sub, where)
