#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] — runs the decoders' fuzz targets (fuzz/, cargo-fuzz + libFuzzer
# on the nightly toolchain) for SECONDS each (default 30), one after the other:
#   binlog       the MySQL/MariaDB binlog framing + decoder on arbitrary bytes as a file
#   pgoutput     the pgoutput decoder on arbitrary bytes as one XLogData payload
#   mysql_value  one binlog row-image cell for a column type and its metadata
#   pg_value     a PostgreSQL text-format value for a type OID; a logical message's content
# OUTBOXD_FUZZ_DEV=1 builds the targets unoptimised (cargo fuzz --dev: about half the build
# time, fewer runs per second; debug assertions and AddressSanitizer either way): what CI's
# brief run uses.
# Fails when a target panics, runs out of memory or hangs on an input, printing the input's
# path (the reproducer) and the command that replays it.
#
# The build lives in target/fuzz, the corpora (kept between runs, growing) in
# .state/fuzz/corpus/<target>, crash inputs in .state/fuzz/artifacts/<target>, logs in
# .state/fuzz/<target>.log. Seeds: fuzz/seeds/<target>/ (committed, our own bytes; written by
# fuzz/seeds/make_seeds.py) and, for binlog, the real binlog files in
# ../shared/fixtures/mysql-binlogs ($OUTBOXD_TEST_BINLOG_FIXTURES) split into one file per event
# (fuzz/seeds/split_binlogs.py) into .state/fuzz/seeds/binlog; without that folder the binlog
# target starts from its corpus alone (it says so).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
secs="${1:-30}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS per target, default 30]" >&2
  exit 2
fi
targets=(binlog pgoutput mysql_value pg_value)
state=.state/fuzz
target_dir=target/fuzz
# The same folder tests/binlog_fixtures.rs reads (and the same variable to point elsewhere).
fixtures="${OUTBOXD_TEST_BINLOG_FIXTURES:-$ROOT/../shared/fixtures/mysql-binlogs}"

# Small builds: no incremental state, line tables only (fuzz/Cargo.toml's release profile).
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
export CARGO_PROFILE_DEV_DEBUG=line-tables-only

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz: no nightly toolchain; trying rustup toolchain install nightly"
  rustup toolchain install nightly --profile minimal || {
    echo "fuzz: SKIPPED: cargo-fuzz needs the nightly toolchain, which could not be installed"
    exit 0
  }
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io"
  cargo install cargo-fuzz --locked
fi

profile=()
if [[ "${OUTBOXD_FUZZ_DEV:-}" == 1 ]]; then
  profile=(--dev)
fi
t0=$(date +%s)
cargo +nightly fuzz build "${profile[@]}" --target-dir "$target_dir"
echo "fuzz: built ${#targets[@]} targets in $(( $(date +%s) - t0 ))s ($(cargo fuzz --version))"

mkdir -p "$state/seeds"
rm -rf "$state/seeds/binlog"
if [[ ! -d "$fixtures" ]]; then
  echo "fuzz: binlog: no seeds from real binlog files: $fixtures is absent"
elif ! command -v python3 >/dev/null; then
  echo "fuzz: binlog: no seeds from real binlog files: python3 (to split them) is absent"
else
  n=$(python3 fuzz/seeds/split_binlogs.py "$fixtures" "$state/seeds/binlog" 16384)
  echo "fuzz: binlog: $n seeds from the binlog files in $fixtures"
fi

failed=()
for t in "${targets[@]}"; do
  corpus="$state/corpus/$t"
  artifacts="$state/artifacts/$t"
  log="$state/$t.log"
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  for d in "fuzz/seeds/$t" "$state/seeds/$t"; do
    [[ -d "$d" ]] && seeds+=("$d")
  done
  case "$t" in
    binlog) max_len=16384 ;;
    *) max_len=4096 ;;
  esac
  before=$(find "$artifacts" -type f | wc -l)
  start=$(date +%s)
  status=0
  # The first directory receives the new inputs; the seed directories are only read.
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: libFuzzer's default, explicit.
  cargo +nightly fuzz run "${profile[@]}" --target-dir "$target_dir" "$t" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1 || status=$?
  took=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[bKM]?b?' "$log" | tail -1 || true)
  echo "fuzz: $t: ${runs:-?} runs in ${took}s (${rate:-?}/s), ${cov:-no coverage line}," \
    "corpus $(find "$corpus" -type f | wc -l) files, exit $status"
  if (( status != 0 )) || (( $(find "$artifacts" -type f | wc -l) > before )); then
    failed+=("$t")
    echo "fuzz: $t FAILED (log: $log):"
    grep -E '^(==[0-9]+==|thread .* panicked|SUMMARY|ERROR)|panicked at' "$log" | head -20 || true
    find "$artifacts" -type f -newermt "@$start" | while read -r f; do
      echo "fuzz: reproducer: $f"
      echo "fuzz:   replay: cargo +nightly fuzz run ${profile[*]} --target-dir $target_dir $t $f"
    done
  fi
done

if (( ${#failed[@]} > 0 )); then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each: no crash"
