"""The cost view: parameters and forward FLOPs by part, counted by torch's counter and
checked against each part's closed form (within 1%), and ``attnlab cost`` for every
registered reader. No timing is asserted: speed is what the command shows."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.flop_counter import FlopCounterMode

from attnlab.errors import UserError
from attnlab.evaluation import cost_count
from attnlab.evaluation.cost_match import matched_width
from attnlab.models import costs, registry
from attnlab.models.scoring import Attention, Scorer
from attnlab.report.cost_files import lab_table
from attnlab.tasks.compose import compose
from attnlab.tasks.cost_run import disagreeing

WITHIN = 0.01  # the closed forms must match the counter within 1%


def counted(fn) -> int:
    cost_count.register_formulas()
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def close(a: float, b: float) -> bool:
    return abs(a - b) <= WITHIN * max(abs(b), 1)


@pytest.mark.parametrize("layers", [1, 2])
def test_bigru_closed_form_matches_the_counter(layers):
    gru = nn.GRU(12, 7, num_layers=layers, bidirectional=True, batch_first=True)
    got = counted(lambda: gru(torch.randn(1, 9, 12)))
    assert got > 0
    assert close(got, costs.gru(9, 12, 7, layers, 2))
    # packed (as the encoder runs it): every real column of every strip, no padding
    packed = pack_padded_sequence(torch.randn(3, 9, 12), [9, 5, 2], batch_first=True)
    assert close(counted(lambda: gru(packed)), costs.gru(9 + 5 + 2, 12, 7, layers, 2))


def test_gru_cell_closed_form_matches_the_counter():
    cell = nn.GRUCell(10, 6)
    x, h = torch.randn(1, 10), torch.zeros(1, 6)
    assert close(counted(lambda: [cell(x, h) for _ in range(5)]), costs.gru_cell(5, 10, 6))


@pytest.mark.parametrize("scorer", list(Scorer))
def test_scorer_closed_forms_match_the_counter_per_module(scorer):
    """Keys once per column, the query once per step, scores and weighted sums once per
    (step, column) pair: each term against the counted FLOPs of the module it names."""
    t, s, state, query = 11, 4, 8, 6
    attention = Attention(scorer, query, state, 5)
    states, mask = torch.randn(1, t, state), torch.ones(1, t, dtype=torch.bool)
    with cost_count.ModuleFlops(attention) as counter:
        keys = attention.keys(states)
        for _ in range(s):
            attention(torch.randn(1, query), keys, states, mask)
    terms = attention.flop_terms(t, s, "decoder", "")
    terms = [costs.Term(x.name, x.part, x.module.lstrip("."), x.growth, x.flops) for x in terms]
    got = cost_count.term_counted(terms, dict(counter.own))
    assert [x.growth for x in terms].count("pair") >= 1
    for term, n in zip(terms, got, strict=True):
        assert n > 0 and close(n, term.flops), (term, n)
    assert close(sum(got), counter.get_total_flops())


def test_cudnn_rnn_formula_counts_what_the_gru_counts_on_cpu():
    """On CUDA the GRU is one cuDNN kernel torch's counter has no formula for: ours gives
    the count the same GRU decomposes into on CPU (packed and padded inputs)."""
    gru = nn.GRU(12, 7, num_layers=2, bidirectional=True, batch_first=True)
    x = torch.randn(3, 9, 12)
    cpu = counted(lambda: gru(x))
    assert cost_count.cudnn_rnn_flops((3, 9, 12), 7, 2, True, 3, packed=False) == cpu
    packed = pack_padded_sequence(x, [9, 5, 2], batch_first=True)
    cpu = counted(lambda: gru(packed))
    assert cost_count.cudnn_rnn_flops((16, 12), 7, 2, True, 3, packed=True) == cpu


def test_fused_attention_on_cpu_is_counted():
    """F.scaled_dot_product_attention on CPU runs a fused kernel the counter has no formula
    for (it counted 0): registered, it counts QK^T and AV as the explicit matmuls do."""
    q, k, v = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 8)
    mask = torch.ones(1, 1, 5, 7, dtype=torch.bool)
    fused = counted(lambda: nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    explicit = counted(lambda: torch.softmax(q @ k.transpose(-1, -2), -1) @ v)
    assert fused == explicit == 2 * (2 * 2 * 5 * 7 * 8)


@pytest.mark.parametrize("name", registry.names())
def test_every_readers_closed_form_matches_the_counter(name):
    """Every registered reader at test size: each closed-form term within 1% of the counted
    FLOPs of its module, the parts summing to the total, at two lengths."""
    cfg = compose([f"model={name}", "preset=tiny"])
    model = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
    parts = cost_count.params_by_part(model)
    assert sum(parts.values()) == sum(p.numel() for p in model.parameters())
    for length in (2, 5):
        (c,) = cost_count.count_strips(model, cost_count.strips(cfg, length, 1))
        assert c["steps"] == length + 1
        assert c["terms"] is not None, f"{name} has no closed form"
        got = cost_count.term_counted(c["terms"], c["own"])
        for term, n in zip(c["terms"], got, strict=True):
            assert close(n, term.flops), (name, length, term, n)
        assert sum(cost_count.by_part(model, c["own"]).values()) == c["total"]
        assert close(sum(t.flops for t in c["terms"]), c["total"])


def test_variant_cost_is_the_configs_parameters_and_mflop():
    cfg = compose(["model=fixed", "preset=tiny"])
    wide = compose(["model=fixed", "preset=tiny", "model.dec_hidden=64"])
    a, b = cost_count.variant_cost(cfg, 4, n=1), cost_count.variant_cost(wide, 4, n=1)
    assert a["params"] == a["params_encoder"] + a["params_decoder"] + a["params_output"]
    assert b["params_encoder"] == a["params_encoder"] and b["params_decoder"] > a["params_decoder"]
    assert b["mflop"] > a["mflop"] > 0
    assert cost_count.variant_cost(cfg, 8, n=1)["mflop"] > a["mflop"]
    # from the closed form, which is the counter's count
    model = registry.build(cfg.model, cfg.data.height, cfg.data.charset)
    (c,) = cost_count.count_strips(model, cost_count.strips(cfg, 4, 1))
    assert close(a["mflop"], c["total"] / 1e6)


@pytest.mark.slow  # every reader built, counted and timed at two lengths: ~15 s of CPU
def test_cost_command_for_every_registered_reader(tmp_path, attnlab_run):
    names = registry.names()
    res = attnlab_run(
        "cost", "preset=tiny", "train.threads=1", f"cost.readers=[{','.join(names)}]",
        "cost.lengths=[2,4]", "cost.strips=1", "cost.repeats=1", "cost.read_batches=[1,2]",
        "cost.footprint_batch=8", "train.batch_size=4", f"cost.out={tmp_path / 'c'}",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    frame = pd.read_csv(tmp_path / "c" / "cost.csv", dtype={"reader": str})
    assert sorted(set(frame["reader"])) == sorted(names)
    assert len(frame) == 2 * len(names)
    for col in [
        "params_encoder", "params_output", "params", "flops_encoder", "flops_output", "flops",
        "flops_decoder_per_step", "flops_per_pair", "formula_flops", "flop_source",
        "read_b1_ms", "read_b2_ms", "train_ms", "mem_kind", "mem_peak_mib", "device",
        "threads", "load", "time_spread",
    ]:  # fmt: skip
        assert col in frame, col
    assert (frame["formula_max_error"] <= WITHIN).all()
    assert (frame[["read_b1_ms", "read_b2_ms", "train_ms"]] > 0).all().all()
    # a reader with attention does work per (step, column) pair; the fixed reader none
    pairs = frame.set_index(["reader", "length"])["flops_per_pair"]
    assert pairs["attention", 4] > pairs["attention", 2] > 0
    assert pairs["fixed", 2] == 0
    growth = pd.read_csv(tmp_path / "c" / "growth.csv", dtype={"reader": str})
    pair = growth[(growth["reader"] == "attention") & (growth["quantity"] == "flops_per_pair")]
    assert pair["chapter"].tolist() == [4]
    foot = pd.read_csv(tmp_path / "c" / "footprint.csv", dtype={"reader": str})
    assert set(foot["accumulate"]) == {1, 4} and set(foot["bf16"].map(str)) == {"True", "False"}
    text = (tmp_path / "c" / "cost.md").read_text()
    assert "cost(2L) / cost(L)" in text and "attention" in text
    assert (tmp_path / "c" / "cost_flops.png").stat().st_size > 0
    # the README's lab step 8 table (scripts/lab_figures.py) from the same files
    table = lab_table(tmp_path / "c" / "cost.csv", tmp_path / "c" / "growth.csv", (2, 4))
    assert all(f"| {n} " in table for n in names) and "From 2 to 4 digits" in table


@pytest.mark.parametrize(
    "args, key",
    [
        (["cost.readers=[nope]"], "cost.readers"),
        (["cost.match=nope"], "cost.match"),
        (["cost.lengths=[0]"], "cost.lengths"),
        (["cost.footprint_batch=6"], "cost.footprint_batch"),
        (["run=/nowhere/run"], "/nowhere/run"),
        (["cost.lengths=[1000000]"], "cost.lengths"),  # was a std::bad_alloc traceback
        (["cost.lengths=[65]"], "cost.lengths"),  # eval.lengths stops at 64 too
        (["cost.footprint_length=1000"], "cost.footprint_length"),
        (["cost.read_batches=[1000000]"], "cost.read_batches"),
        (["cost.match=fixed", "cost.match_key=data.height"], "cost.match_key"),
        # a key that does not change the count: was an endless doubling
        (["model=transformer", "cost.match=fixed", "cost.match_key=model.max_len"], "max_len"),
        # the ctc reader has no model.dec_hidden: named as cost.match_key, before measuring
        (["model=ctc", "cost.match=fixed"], "cost.match_key=model.dec_hidden"),
    ],
)
def test_cost_command_refuses_bad_input_in_one_line_before_measuring(
    tmp_path, attnlab_run, args, key
):
    res = attnlab_run("cost", "preset=tiny", *args, cwd=tmp_path)
    assert res.returncode == 2
    assert key in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "cost:" not in res.stdout  # refused before any reader was measured
    assert not (tmp_path / "cost").exists()


def test_a_file_as_the_cost_folder_is_refused_before_measuring(tmp_path, attnlab_run):
    taken = tmp_path / "taken.txt"
    taken.write_text("mine\n")
    res = attnlab_run("cost", "preset=tiny", f"cost.out={taken}", cwd=tmp_path)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert f"cost.out={taken}: is a file" in res.stderr and "cost:" not in res.stdout
    assert taken.read_text() == "mine\n"


def _run_folder(tmp_path, config: str | None = None):
    """A run folder as Hydra leaves it: ``.hydra/config.yaml`` (the composed tiny config,
    or ``config`` as the file's text)."""
    from omegaconf import OmegaConf

    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    if config is None:
        OmegaConf.save(compose(["preset=tiny", "model=attention"]), run / ".hydra" / "config.yaml")
    else:
        (run / ".hydra" / "config.yaml").write_text(config)
    return run


@pytest.mark.parametrize(
    "config, args, said",
    [
        ("model: [attention\n  data: {", [], "is not YAML"),  # was a 308-line traceback
        ("- just\n- a list\n", [], "no model.name"),
        (None, ["model=fixed"], "model=fixed: attnlab cost RUN measures the run as it trained"),
        (None, ["model.dec_hidden=8"], "its attention reader"),
        (None, ["data.height=48"], "only cost.*, train.threads and train.device apply"),
    ],
)
def test_cost_of_a_run_refuses_what_it_cannot_honour_in_one_line(
    tmp_path, attnlab_run, config, args, said
):
    run = _run_folder(tmp_path, config)
    res = attnlab_run("cost", str(run), "train.threads=1", *args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert said in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "cost:" not in res.stdout and not (run / "cost").exists()


def test_cost_lists_are_measured_sorted_and_once_with_a_word(tmp_path, attnlab_run):
    """Unsorted and repeated lengths, a reader named twice: each measured once, in order,
    said on a line; the matched control is in cost.md."""
    out = tmp_path / "c"
    res = attnlab_run(
        "cost", "preset=tiny", "train.threads=1", "cost.lengths=[4,2,2]",
        "cost.readers=[fixed,fixed]", "cost.strips=1", "cost.repeats=1", "cost.read_batches=[1]",
        "cost.train=false", "cost.footprint_batch=0", "cost.match=attention", f"cost.out={out}",
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "note: cost.lengths=[4, 2, 2] measured as [2, 4] (sorted, each once)" in res.stdout
    assert "note: cost.readers=['fixed', 'fixed'] measured as ['fixed'] (each once)" in res.stdout
    frame = pd.read_csv(out / "cost.csv", dtype={"reader": str})
    assert frame[["reader", "length"]].values.tolist() == [["fixed", 2], ["fixed", 4]]
    assert (
        "parameter-matched control: model=fixed model.dec_hidden=" in (out / "cost.md").read_text()
    )


def test_the_matched_control_is_one_the_reader_accepts():
    """The transformer matched to the fixed reader: only widths its heads divide (it once
    printed model.dec_hidden=70 with 4 heads, which training refuses), the closest of them."""
    from attnlab.config.experiment import model_schema

    t, f = compose(["model=transformer"]), compose(["model=fixed"])
    target = registry.check_size(f.model, f.data.height, f.data.charset)
    n, got = matched_width(t, target)
    heads = int(t.model.heads)
    assert n % heads == 0

    def params(width: int) -> int:
        wide = compose(["model=transformer", f"model.dec_hidden={width}"])
        model_schema(wide.model).check(wide.model, wide.data.height)  # trainable: no error
        return registry.check_size(wide.model, wide.data.height, wide.data.charset)

    assert got == params(n)
    for other in (n - heads, n + heads):
        assert abs(got - target) <= abs(params(other) - target)


def test_reader_names_are_checked_in_one_place():
    assert registry.check_names(["fixed", "attention"], "cost.readers") == ["fixed", "attention"]
    with pytest.raises(UserError, match=r"^cost\.readers: unknown reader 'nope'; registered: "):
        registry.check_names(["fixed", "nope"], "cost.readers")


def test_matched_width_is_the_closest_parameter_match():
    """The parameter-matched control: the fixed reader's model.dec_hidden that comes closest
    to the attention reader's parameter count (no other width comes closer)."""
    fixed, att = compose(["model=fixed"]), compose(["model=attention"])
    target = registry.check_size(att.model, att.data.height, att.data.charset)
    n, got = matched_width(fixed, target)

    def params(width: int) -> int:
        wide = compose(["model=fixed", f"model.dec_hidden={width}"])
        return registry.check_size(wide.model, wide.data.height, wide.data.charset)

    assert got == params(n) and n > fixed.model.dec_hidden
    assert abs(got - target) <= min(abs(params(n - 1) - target), abs(params(n + 1) - target))


def test_cpu_peak_is_the_resident_growth_over_the_block():
    """The CPU memory a step's measure reports: the resident growth while the block ran."""
    from attnlab.evaluation.cost_time import RssPeak

    with RssPeak() as rss:
        kept = torch.ones(16 * 2**20)  # 64 MiB of float32, written
    assert 60 <= rss.growth_mib < 200
    assert kept.sum() == kept.numel()


def test_cost_times_on_one_thread_unless_asked_and_says_when_timings_disagree():
    assert compose(["model=attention"], "cost").train.threads == 1
    assert compose(["model=attention", "train.threads=2"], "cost").train.threads == 2
    row = {"reader": "attention", "length": 8, "threads": 2, "load": 3.1, "time_spread": 1.2}
    assert disagreeing([row]) is None
    said = disagreeing([row, {**row, "length": 16, "time_spread": 4.0}])
    assert said.startswith("warning: repeated timings disagree by up to x4.0")
    assert "length 16; 1 of 2 rows" in said and "2 thread(s) at load 3.1" in said


def test_the_counter_uses_no_private_api_of_torch():
    """Issue 57: torch is unpinned (torch>=2.1), so the counter keeps to torch's public API
    (FlopCounterMode, get_total_flops, register_flop_formula, module hooks): no override of
    FlopCounterMode's private _count_flops, no read of its flop_registry."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(cost_count))
    private = {
        node.attr if isinstance(node, ast.Attribute) else node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Attribute, ast.FunctionDef))
    } | {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not private & {"_count_flops", "flop_registry", "mod_tracker"}, private
    imported = {
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "torch.utils.flop_counter"
        for a in n.names
    }
    from torch.utils import flop_counter

    assert imported <= set(flop_counter.__all__), imported - set(flop_counter.__all__)
