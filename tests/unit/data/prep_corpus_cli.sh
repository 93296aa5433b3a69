#!/usr/bin/env bash
# `chimera prep` on a corpus from the command line: JSON lines into shards on two threads,
# progress lines in a log, `inspect DIR`, training on a glob of the shards, a full disk (a file
# size limit) and other bad input: status 2, one line, no partial shard under a final name.
# Usage: prep_corpus_cli.sh CHIMERA_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
chimera="$1"
src="$2"
work="$3"
tokenizer="$src/inputs/gpt2-tokenizer"
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A JSON-lines corpus: the paragraphs of the bundled corpus, one document per line, gzipped.
python3 - "$src/inputs/austen/austen.txt.gz" "$work/austen.jsonl" <<'PY'
import gzip, json, sys
text = gzip.open(sys.argv[1], "rt", encoding="utf-8").read()
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for paragraph in text.split("\n\n"):
        if paragraph.strip():
            f.write(json.dumps({"text": paragraph, "id": 1}) + "\n")
PY
gzip -k "$work/austen.jsonl"

"$chimera" prep --tokenizer "$tokenizer" --output "$work/shards" --jsonl-key text --threads 2 \
  --shard-tokens 200000 --progress-every 0.01 "$work/austen.jsonl.gz" 2>"$work/progress.txt" \
  >/dev/null
grep -Eq '^prep: .* read \(.*%\), [0-9]+ documents, .* M tokens, .* MB/s' "$work/progress.txt" ||
  fail "no progress line on stderr: $(cat "$work/progress.txt")"
if [ ! -f "$work/shards/train-00004.h5" ] || [ -f "$work/shards/train-00005.h5" ]; then
  fail "expected train-00000.h5 ... train-00004.h5: $(ls "$work/shards")"
fi

"$chimera" prep --tokenizer "$tokenizer" --output "$work/quiet" --jsonl-key text --quiet \
  --progress-every 0.01 "$work/austen.jsonl" 2>"$work/quiet.txt" >/dev/null
! grep -q ' read (' "$work/quiet.txt" || fail "--quiet printed progress"

"$chimera" inspect "$work/shards" >"$work/inspect.txt"
grep -q "train .* tokens in 5 files (train-00000.h5 ... train-00004.h5)" "$work/inspect.txt" ||
  fail "inspect DIR: $(cat "$work/inspect.txt")"
grep -q "prep .*complete (10298 documents)" "$work/inspect.txt" ||
  fail "inspect DIR: $(cat "$work/inspect.txt")"

# One stream from a glob of shards: two steps train, with validation on the val shards.
"$chimera" train --set model.n_layer=2 --set model.n_embd=32 --set model.n_head=2 \
  --set model.n_ctx=16 --set data.seq_len=16 --set parallel.stages=1 --set parallel.scheme=gpipe \
  --set "data.train=$work/shards/train-*.h5" --set "data.val=$work/shards/val-*.h5" --steps 2 \
  --eval-every 2 >"$work/train.txt" 2>&1 || fail "train on a glob: $(tail -3 "$work/train.txt")"

expect_status_2() {
  local status=0
  "$@" 2>"$work/stderr.txt" >/dev/null || status=$?
  [ "$status" = 2 ] || fail "expected exit status 2, got $status from: $* ($(cat "$work/stderr.txt"))"
  [ "$(wc -l <"$work/stderr.txt")" -le 1 ] || fail "more than one error line from: $*"
}
# A full disk, as a file size limit (SIGXFSZ ignored, so that writes fail with EFBIG).
full="$work/full"
mkdir -p "$full"
(
  trap '' XFSZ
  ulimit -f 300
  expect_status_2 "$chimera" prep --tokenizer "$tokenizer" --output "$full" --quiet \
    --shard-tokens 200000 "$src/inputs/austen/austen.txt.gz"
)
grep -q "cannot write the token dataset" "$work/stderr.txt" || fail "full disk: $(cat "$work/stderr.txt")"
# A shard (400 kB) does not fit the 300 kB limit: none may appear under its final name.
for f in "$full"/*.h5*; do
  [ ! -e "$f" ] || fail "a partial file under a final name, or a temporary one: $f"
done
# With room again, --resume finishes the run.
"$chimera" prep --tokenizer "$tokenizer" --output "$full" --quiet --shard-tokens 200000 \
  --resume "$src/inputs/austen/austen.txt.gz" >/dev/null 2>&1
"$chimera" inspect "$full" | grep -q "train .* in 5 files" || fail "resume after a full disk"

touch "$work/empty.jsonl"
expect_status_2 "$chimera" prep --tokenizer "$tokenizer" --output "$work/o" --jsonl-key text \
  "$work/empty.jsonl"
grep -q "empty.jsonl: empty input file" "$work/stderr.txt" || fail "empty input: $(cat "$work/stderr.txt")"
printf '{"text": "one"}\n{"text": 2}\n' >"$work/bad.jsonl"
expect_status_2 "$chimera" prep --tokenizer "$tokenizer" --output "$work/o" --jsonl-key text \
  "$work/bad.jsonl"
grep -q "bad.jsonl: line 2: " "$work/stderr.txt" || fail "bad line: $(cat "$work/stderr.txt")"
touch "$work/a_file"
expect_status_2 "$chimera" prep --tokenizer "$tokenizer" --output "$work/a_file/out" \
  "$work/austen.jsonl.gz" --jsonl-key text
expect_status_2 "$chimera" inspect "$work"
expect_status_2 "$chimera" train --set "data.train=$work/none-*.h5" --steps 1

# --help explains every flag.
help="$("$chimera" prep --help)"
for flag in --tokenizer --output --jsonl-key --skip-bad-lines --threads --shard-tokens --resume \
  --val-fraction --split-block --invalid-utf8 --quiet --progress-every; do
  grep -q -- "$flag" <<<"$help" || fail "prep --help does not explain $flag"
done
echo "prep corpus from the command line: ok"
