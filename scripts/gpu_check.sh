#!/usr/bin/env bash
# A short, prepared check of attnlab on a machine with a CUDA GPU (a few minutes).
#
#   scripts/gpu_check.sh                          # outputs under /tmp/attnlab_gpu_check
#   OUT_DIR=/some/dir scripts/gpu_check.sh        # outputs elsewhere
#   PYTHON=.venv/bin/python scripts/gpu_check.sh  # another interpreter (attnlab installed in it)
#
# Run from anywhere; it installs nothing: attnlab and a CUDA build of torch must already be
# installed for $PYTHON. It
#   1. prints nvidia-smi and the torch / CUDA versions (exit 1 if torch sees no CUDA device);
#   2. trains the attention reader, then the fixed reader, with `preset=gpu` for 300 steps
#      (validation every 100) into $OUT_DIR/gpu_run/{attention,fixed}, and prints each run's
#      training throughput (strips/s, from its metrics.json) and validation accuracy;
#   3. runs `scripts/bench.py --only train,eval --device cuda`, evaluating the attention run
#      just trained, which prints strips/s and peak GPU memory (torch.cuda.max_memory_allocated)
#      and writes them to $OUT_DIR/bench.json;
#   4. runs a short 2-reader sweep (`attnlab sweep lengths preset=gpu`, 200 steps) with
#      hydra.launcher.jobs_per_gpu=1 and then 2 into $OUT_DIR/sweep_jpg{1,2}, and prints both
#      wall times and the GPU each job was given (metrics.json "device");
#   5. runs `attnlab cost` on cuda for the fixed, attention and transformer readers at lengths
#      8, 16 and 32 into $OUT_DIR/cost, which prints FLOPs (cuDNN's RNN counted by attnlab's
#      formula), time per strip and the CUDA peaks of a training step: max_memory_allocated
#      and max_memory_reserved, for one batch of 128, 4 accumulated micro-batches of 32 and
#      bf16 (footprint.csv);
#   6. pretrains the 64-px packaged reader's recipe (`scripts/pretrain.py --height 64`: faces,
#      bent glyphs, captcha-like clutter, damage) with `preset=gpu` for 2 minutes into
#      $OUT_DIR/pretrain (80 minutes of one CPU thread made pretrained-64: --minutes 80 is it),
#      packaged into $OUT_DIR/pretrained (attnlab/weights/ and lock-pins.toml untouched), and
#      prints its steps, strips/s and what it reads on the fixed synthetic test strips.
# Earlier outputs of this script under $OUT_DIR are replaced.
set -euo pipefail

OUT_DIR=${OUT_DIR:-/tmp/attnlab_gpu_check}
PYTHON=${PYTHON:-python}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "gpu_check: no Python interpreter '$PYTHON' (set PYTHON=...)" >&2
    exit 1
fi
# The attnlab command next to the interpreter (a venv), else the one on PATH.
ATTNLAB=$(dirname "$(command -v "$PYTHON")")/attnlab
[[ -x "$ATTNLAB" ]] || ATTNLAB=$(command -v attnlab || true)
if [[ -z "$ATTNLAB" ]]; then
    echo "gpu_check: the attnlab command is not installed (pip install -e . first)" >&2
    exit 1
fi

echo "== GPU"
if ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "gpu_check: torch sees no CUDA device here (torch $("$PYTHON" -c \
        'import torch; print(torch.__version__)' 2>/dev/null || echo '?')); this check needs" \
        "a CUDA GPU and a CUDA build of torch" >&2
    echo "gpu_check: no GPU, so no sweep comparison (1 and 2 jobs per GPU) either" >&2
    exit 1
fi
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi
else
    echo "(nvidia-smi not on PATH)"
fi
"$PYTHON" - <<'EOF'
import torch
print(f"torch {torch.__version__}  CUDA {torch.version.cuda}  cuDNN {torch.backends.cudnn.version()}")
print(f"device 0: {torch.cuda.get_device_name(0)}  bf16 {torch.cuda.is_bf16_supported()}")
EOF

mkdir -p "$OUT_DIR"
rm -rf "$OUT_DIR/gpu_run/attention" "$OUT_DIR/gpu_run/fixed" "$OUT_DIR/bench.json" \
    "$OUT_DIR/sweep_jpg1" "$OUT_DIR/sweep_jpg2" "$OUT_DIR/cost" "$OUT_DIR/pretrain" \
    "$OUT_DIR/pretrained"

for reader in attention fixed; do
    run="$OUT_DIR/gpu_run/$reader"
    echo
    echo "== train: $reader reader, preset=gpu, 300 steps -> $run"
    start=$(date +%s)
    "$ATTNLAB" train preset=gpu "model=$reader" train.steps=300 train.val_every=100 \
        train.checkpoint_every=300 train.progress=plain "hydra.run.dir=$run"
    echo "($reader: $(($(date +%s) - start)) s wall, start-up and validation included)"
    "$PYTHON" - "$run/metrics.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
print(
    f"{m['reader']}: {m['strips_per_s']:,.0f} strips/s over {m['step']} steps "
    f"({m['elapsed_s']} s, validation included); validation exact "
    f"{100 * m['val']['exact_acc']:.1f}%, CER {100 * m['val']['cer']:.2f}%"
)
EOF
done

echo
echo "== bench: train and eval on cuda"
cd "$ROOT"
"$PYTHON" scripts/bench.py --only train,eval --device cuda \
    --run "$OUT_DIR/gpu_run/attention" --json "$OUT_DIR/bench.json"

declare -A WALL
for per_gpu in 1 2; do
    sweep="$OUT_DIR/sweep_jpg$per_gpu"
    echo
    echo "== sweep: 2 readers, preset=gpu, 200 steps, hydra.launcher.jobs_per_gpu=$per_gpu"
    start=$(date +%s)
    "$ATTNLAB" sweep lengths preset=gpu train.steps=200 train.val_every=100 \
        train.checkpoint_every=200 train.progress=plain "hydra.launcher.jobs_per_gpu=$per_gpu" \
        "hydra.sweep.dir=$sweep"
    WALL[$per_gpu]=$(($(date +%s) - start))
    "$PYTHON" - "$sweep" <<'EOF'
import json, pathlib, sys
for m in sorted(pathlib.Path(sys.argv[1]).glob("*/metrics.json")):
    r = json.loads(m.read_text())
    print(f"  {r['reader']}: {r.get('device')}, {r['strips_per_s']:,.0f} strips/s")
EOF
done
echo
echo "sweep of 2 readers: ${WALL[1]} s wall with 1 job per GPU, ${WALL[2]} s with 2 jobs per GPU"

echo
echo "== cost: fixed, attention and transformer by length on cuda (CUDA peaks of a step)"
"$ATTNLAB" cost 'cost.readers=[fixed,attention,transformer]' 'cost.lengths=[8,16,32]' \
    train.device=cuda "cost.out=$OUT_DIR/cost"

echo
echo "== pretrain: the 64-px packaged reader's recipe, preset=gpu, 2 minutes -> $OUT_DIR/pretrained"
"$PYTHON" scripts/pretrain.py --height 64 --out "$OUT_DIR/pretrain" \
    --into "$OUT_DIR/pretrained" --minutes 2 preset=gpu train.progress=plain
"$PYTHON" - "$OUT_DIR/pretrain/metrics.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"pretrain: {m['step']} steps, {m['strips_per_s']:,.0f} strips/s ({m['elapsed_s']} s)")
EOF

echo
echo "gpu_check: done; runs in $OUT_DIR/gpu_run, figures in $OUT_DIR/bench.json and $OUT_DIR/cost"
