"""Issue 58 item 6 (split by concern, not by cap): the modules that sat near the 400-line
cap with two concerns each, split into one module per concern. Each name lives in the
module of its concern (``__module__``), and the module it left keeps no copy of it (no
re-export shim: an importer names the new home)."""

from __future__ import annotations

import importlib

import pytest

HOMES = {
    # listing a source (folder, list file, LMDB) and checking it without decoding
    "attnlab.data.sources": [
        "Entry", "Source", "open_source", "check_charset", "nfc", "lmdb_count", "lmdb_group",
    ],
    # decoding a source's strips once, into the cache batches are drawn from
    "attnlab.data.strip_cache": [
        "StripCache", "decode_all", "read_source", "median_own_height", "check_widths",
    ],
    "attnlab.data.write_lmdb": ["export_lmdb"],  # writing strips as an LMDB
    "attnlab.data.source_train": ["folder_data", "TrainingData"],  # the folder-data path
    "attnlab.data.source_stream": ["SourceStream", "augment_real", "join"],  # its batches
    "attnlab.data.split_record": ["split_record", "contents_record", "split_changes"],
    "attnlab.data.handwritten": ["write_strips", "partition", "parse_lengths", "open_pool"],
    "attnlab.data.handwritten_pools": [
        "Pool", "digits", "strip", "sklearn_pool", "crop", "written", "npz_pool",
    ],
    "attnlab.data.handwritten_npz": ["load_npz", "split_pools"],
    "attnlab.training.trainer": ["Trainer"],  # the loop
    "attnlab.training.step": ["optimiser_step", "NonFiniteLoss"],  # one optimiser step
    "attnlab.training.run_end": ["finish_run"],  # metrics.json when a run ends
}  # fmt: skip

LEFT = {  # module -> names it held before the split and holds no more
    "attnlab.data.sources": [
        "StripCache", "decode_all", "read_source", "median_own_height", "check_widths",
        "export_lmdb",
    ],
    "attnlab.data.source_train": [
        "SourceStream", "augment_real", "join", "split_changes", "_record", "_contents",
    ],
    "attnlab.data.handwritten": [
        "digits", "strip", "written", "load_npz", "split_pools", "crop", "sklearn_pool",
    ],
    "attnlab.training.trainer": ["NonFiniteLoss", "_no_memory"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(HOMES))
def test_each_name_lives_in_the_module_of_its_concern(module):
    mod = importlib.import_module(module)
    assert (mod.__doc__ or "").strip(), f"{module} says what it is for"
    for name in HOMES[module]:
        assert getattr(mod, name).__module__ == module, name


@pytest.mark.parametrize("module", sorted(LEFT))
def test_the_module_a_name_left_keeps_no_copy(module):
    """Absent, or imported from its new home because the module uses it."""
    mod = importlib.import_module(module)
    kept = [n for n in LEFT[module] if getattr(getattr(mod, n, None), "__module__", "") == module]
    assert kept == []
