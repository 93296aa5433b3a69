#!/usr/bin/env bash
# `chimera prep` scaling with --threads: builds a JSON-lines corpus from the bundled Austen text
# (its paragraphs, one document per line, repeated REPEAT times: 21.5 MB per 5), then runs, ROUNDS
# times: prep with 1 thread, prep with N threads, and (the machine's own ceiling) N independent
# 1-thread preps at once, each pinned to one CPU. It prints wall time, CPU time and MB/s of each
# run, and the median speedups. Run it on a quiet machine; on a shared one the wall times say more
# about the neighbours than about prep.
# Usage: bench/prep_threads.sh [BUILD_DIR] [N=2] [REPEAT=25] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
threads="${2:-2}"
repeat="${3:-25}"
rounds="${4:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
python3 - inputs/austen/austen.txt.gz "$out/corpus.jsonl" "$repeat" <<'PY'
import gzip, json, sys
text = gzip.open(sys.argv[1], "rt", encoding="utf-8").read()
paragraphs = [p for p in text.split("\n\n") if p.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for r in range(int(sys.argv[3])):
        for p in paragraphs:
            f.write(json.dumps({"text": p, "copy": r}) + "\n")
PY
bytes=$(stat -c %s "$out/corpus.jsonl")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs available; corpus $((bytes / 1000000)) MB of JSON lines"
prep() {  # prep THREADS OUTPUT [taskset CPU]: times one run into OUTPUT.time
  local t="$1" o="$2"
  shift 2
  /usr/bin/time -f "%e %U %S" -o "$o.time" "$@" "$build/bin/chimera" prep --quiet \
    --tokenizer inputs/gpt2-tokenizer --output "$o" --jsonl-key text --threads "$t" \
    "$out/corpus.jsonl" >/dev/null 2>&1
}
report() {  # report LABEL TIME_FILE: prints the run, appends its wall time to walls[LABEL]
  local wall user sys
  read -r wall user sys <"$2"
  walls[$1]+="$wall "
  awk -v l="$1" -v r="$round" -v w="$wall" -v u="$user" -v s="$sys" -v b="$bytes" 'BEGIN {
    printf "round %d, %s: %.2f s wall, %.2f s CPU, %.1f MB/s, %.1f MB/s per CPU second\n",
           r, l, w, u + s, b / w / 1e6, b / (u + s) / 1e6 }'
}
declare -A walls
for round in $(seq "$rounds"); do
  prep 1 "$out/one" && report "1 thread" "$out/one.time"
  prep "$threads" "$out/many" && report "$threads threads" "$out/many.time"
  for i in $(seq 0 $((threads - 1))); do prep 1 "$out/pair$i" taskset -c "$i" & done
  wait
  for i in $(seq 0 $((threads - 1))); do report "$threads independent 1-thread runs" "$out/pair$i.time"; done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
one=$(median <<<"${walls[1 thread]}")
many=$(median <<<"${walls[$threads threads]}")
pair=$(median <<<"${walls[$threads independent 1-thread runs]}")
awk -v a="$one" -v b="$many" -v p="$pair" -v t="$threads" 'BEGIN {
  printf "median wall: 1 thread %.2f s, %d threads %.2f s: speedup %.2fx\n", a, t, b, a / b
  printf "machine ceiling: %d independent 1-thread runs at once do %.2fx the work of one\n", t, t * a / p }'
