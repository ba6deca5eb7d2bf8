#!/bin/sh
# The README's pictures: records a run with the CLI, then opens it in the
# desktop app under Xvfb (Mesa's software renderer, as the headless tests do)
# and writes a screenshot of every view to docs/img/VIEW.png.
#   scripts/screenshots.sh [BUILD_DIR]        (default: build)
# Two runs: a real mlp on 8 virtual chips wired 2x4 with a recompilation at
# step 10 and chip 5 at 85% speed (every view but Fleet), and a simulated
# 512-chip llama pod (8x8x8) with chip 17 at 60% speed (Fleet). Compare
# compares the mlp run with a second one of another batch size.
set -eu
BUILD=${1:-build}
OUT=${OUT:-docs/img}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CLI="$BUILD/shardscope"
UI="$BUILD/shardscope-ui"
SHOT() {  # view db [extra flags]: one picture, 1600x900
  view=$1 db=$2
  shift 2
  xvfb-run -a -s "-screen 0 1600x900x24" "$UI" "$db" --view "$view" --screenshot "$WORK/$view.png" "$@" >/dev/null
  # A 64-colour palette keeps each picture small for the README (Debian's
  # python3-pil when present; else the renderer's own PNG).
  if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    /usr/bin/python3 -c 'import sys; from PIL import Image; Image.open(sys.argv[1]).convert("RGB").quantize(64).save(sys.argv[2], optimize=True)' \
      "$WORK/$view.png" "$OUT/$view.png"
  else
    cp "$WORK/$view.png" "$OUT/$view.png"
  fi
  echo "$OUT/$view.png: $(wc -c <"$OUT/$view.png") bytes"
}
mkdir -p "$OUT"
"$CLI" run mlp --db "$WORK/mlp.db" --mesh 8x1 --batch 256 --steps 16 --topology 2x4 --change-step 10 \
  --fault slow-chip:5:0.85 --quiet
"$CLI" run mlp --db "$WORK/base.db" --mesh 8x1 --batch 128 --steps 16 --topology 2x4 --quiet
"$CLI" run llama --simulate --topology 8x8x8 --steps 5 --fault slow-chip:17:0.6 --db "$WORK/pod.db" --quiet
for view in overview timeline recompilations graph ops memory metrics; do SHOT "$view" "$WORK/mlp.db"; done
SHOT sharding "$WORK/mlp.db" --chip 5
SHOT compare "$WORK/mlp.db" --compare "$WORK/base.db"
SHOT fleet "$WORK/pod.db" --step 3
