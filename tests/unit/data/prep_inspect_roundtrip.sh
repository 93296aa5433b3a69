#!/usr/bin/env bash
# `chimera prep` -> `chimera inspect --decode-all` gives back the input text, and bad input
# exits with status 2. Usage: prep_inspect_roundtrip.sh CHIMERA_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
chimera="$1"
src="$2"
work="$3"
rm -rf "$work"
mkdir -p "$work"
fixture="$src/tests/unit/data/fixtures/multilingual.txt"
printf 'A second document.\nEnds without a newline' >"$work/second.txt"
"$chimera" prep --tokenizer "$src/inputs/gpt2-tokenizer" --output "$work/out" --val-fraction 0 \
  "$fixture" "$work/second.txt"
"$chimera" inspect --tokenizer "$src/inputs/gpt2-tokenizer" --decode-all "$work/out/train.h5" \
  >"$work/decoded.txt"
{
  printf '<|endoftext|>'
  cat "$fixture"
  printf '<|endoftext|>'
  cat "$work/second.txt"
} >"$work/expected.txt"
cmp "$work/expected.txt" "$work/decoded.txt"
"$chimera" inspect --tokenizer "$src/inputs/gpt2-tokenizer" "$work/out/train.h5" | grep -q "token dataset"

expect_status_2() {
  local status=0
  "$@" 2>"$work/stderr.txt" >/dev/null || status=$?
  if [ "$status" != 2 ]; then
    echo "expected exit status 2, got $status from: $*" >&2
    cat "$work/stderr.txt" >&2
    exit 1
  fi
  [ "$(wc -l <"$work/stderr.txt")" -le 2 ] || { echo "more than one error line from: $*" >&2; exit 1; }
}
expect_status_2 "$chimera" inspect "$work/missing.h5"
printf 'not hdf5' >"$work/text.h5"
expect_status_2 "$chimera" inspect "$work/text.h5"
expect_status_2 "$chimera" prep --tokenizer "$src/inputs/gpt2-tokenizer" --output "$work/o2" "$work/missing.txt"
printf 'bad \377 byte\n' >"$work/bad.txt"
expect_status_2 "$chimera" prep --tokenizer "$src/inputs/gpt2-tokenizer" --output "$work/o3" "$work/bad.txt"
echo "prep -> inspect round trip: ok"
