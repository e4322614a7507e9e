#!/usr/bin/env bash
# Runs every Go fuzz target of the tree (each `func FuzzX(f *testing.F)` of a _test.go
# file) for FUZZTIME (default 2m) each, one after the other, and prints the executions of
# each and their total. A failing target leaves its input in its package's
# testdata/fuzz/FuzzX/, where it stays as a regression test once the bug is fixed; the
# run goes on with the other targets and exits 1.
#
# FUZZMINIMIZETIME (default 0: off) is how long the fuzzer may shrink an input that finds
# new code or fails. Go does not count the executions it spends shrinking, and on the
# slow targets (the whole render) shrinking takes most of a short budget; an input that
# fails is kept whole either way.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-2m}
minimize=${FUZZMINIMIZETIME:-0}
logs=$(mktemp -d "${TMPDIR:-/tmp}/nodegroup-fuzz.XXXXXX")

targets=()
while IFS=: read -r file line; do
  name=${line#func }
  targets+=("./$(dirname "$file") ${name%%(*}")
done < <(git ls-files -z --cached --others --exclude-standard -- '*_test.go' | xargs -0 grep -HoE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' | sort)
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

rows=()
total=0
failed=0
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  log="$logs/$name.log"
  echo "fuzz: $name ($pkg) for $fuzztime" >&2
  result=ok
  go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >"$log" 2>&1 || result=FAIL
  # The coordinator's last progress line holds the executions of the whole run. Go
  # counts neither the replay of the corpus (seeds, testdata and the inputs it cached
  # from earlier runs) that comes first nor shrinking, so the replayed inputs are shown
  # on their own.
  execs=$(sed -nE 's/^fuzz: elapsed: .*, execs: ([0-9]+) .*/\1/p' "$log" | tail -n 1)
  execs=${execs:-0}
  replayed=$(sed -nE 's/^fuzz: elapsed: .*gathering baseline coverage: ([0-9]+\/[0-9]+) completed.*/\1/p' "$log" | tail -n 1)
  if [[ $result == FAIL ]]; then
    failed=1
    cat "$log" >&2
  fi
  total=$((total + execs))
  rows+=("$(printf '%-26s %-22s %12s %14s  %s' "$name" "$pkg" "$execs" "${replayed:--}" "$result")")
done

printf '\n%-26s %-22s %12s %14s  %s\n' TARGET PACKAGE EXECUTIONS "CORPUS REPLAY" RESULT
printf '%s\n' "${rows[@]}"
printf '%-26s %-22s %12s\n' total "${#targets[@]} x $fuzztime" "$total"
echo "logs: $logs"
exit "$failed"
