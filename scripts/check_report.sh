#!/usr/bin/env bash
# Screenshot a generated report with headless Chromium, to look at it as a reader would.
#
#   scripts/check_report.sh REPORT_DIR [OUT_PNG]
#
# REPORT_DIR holds index.html (from `attnlab report`); OUT_PNG defaults to
# REPORT_DIR/screenshot.png. Prints the screenshot path. Exit 1 when no Chromium-like browser
# is on PATH (set CHROMIUM=/path/to/binary to choose one), 2 on a usage error.
set -euo pipefail

usage() { echo "usage: $0 REPORT_DIR [OUT_PNG]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage

report_dir=$1
index="$report_dir/index.html"
if [[ ! -f "$index" ]]; then
    echo "check_report: no index.html in $report_dir" >&2
    exit 2
fi
out=${2:-"$report_dir/screenshot.png"}

browser=${CHROMIUM:-}
if [[ -z "$browser" ]]; then
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then
            browser=$(command -v "$name")
            break
        fi
    done
fi
if [[ -z "$browser" ]]; then
    echo "check_report: no Chromium found (tried chromium, chromium-browser, google-chrome);" \
        "install one, e.g. 'apt-get install -y chromium', or set CHROMIUM=/path/to/browser" >&2
    exit 1
fi

abs_index=$(cd "$(dirname "$index")" && pwd)/index.html
mkdir -p "$(dirname "$out")"
abs_out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
rm -f "$abs_out"

# A throwaway profile keeps the run independent of any user profile (and of its locks).
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

log=$(mktemp)
if ! timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --window-size=1400,3000 --screenshot="$abs_out" \
    "file://$abs_index" >"$log" 2>&1; then
    echo "check_report: $browser failed:" >&2
    tail -n 20 "$log" >&2
    rm -f "$log"
    exit 1
fi
rm -f "$log"

if [[ ! -s "$abs_out" ]]; then
    echo "check_report: $browser wrote no screenshot at $abs_out" >&2
    exit 1
fi
echo "$abs_out"
