#!/usr/bin/env bash
# run.sh: runs the libFuzzer targets of tests/fuzz (README "Fuzzing").
#
#   tests/fuzz/run.sh [--build DIR] [--runs N | --seconds S] [--seed K] [--jobs J] [TARGET...]
#       Longer runs, one target after another (default: all five, 1,000,000 runs each, seed 1, from
#       build-fuzz/ — cmake --preset fuzz && cmake --build --preset fuzz). Each starts from the
#       committed corpus plus a fresh working corpus outside the tree (under $TMPDIR), where new
#       inputs go; findings (crash-*, leak-*, timeout-*, oom-* inputs) and the log land in a
#       results directory that is printed. Prints per target: execs, time, exec/s, corpus size
#       (committed + new), findings (lrcnn's; libhdf5's own counted apart, see keep_going). --jobs J
#       (default 1): the HDF5 targets fuzz in J processes at once (libFuzzer's -fork=J), and the
#       saved inputs are classified J at a time. Exit status 1 if any target had a finding of lrcnn's.
#   tests/fuzz/run.sh --ctest BINARY RUNS
#       What ctest's `fuzz` label runs: one target for RUNS runs from seed 1 over the committed
#       corpus, new inputs into a scratch corpus in the current directory; non-zero on a finding.
#
# Per-target options (below): the largest input, the dictionary of the text formats, and limits
# that make a slow input (-timeout, seconds) or a huge allocation (-malloc_limit_mb: no parser
# should allocate that much for a file of a few KB; the code refuses huge sizes before
# allocating) a finding. ASan checks leaks too; UBSan stops at the first report.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

options() { # the libFuzzer options of target $1
  local t=$1
  printf '%s\n' -rss_limit_mb=2048 -print_final_stats=1
  case $t in
    net) printf '%s\n' -max_len=8192 -malloc_limit_mb=512 -timeout=20 ;; # resnet50.net is 6 KB
    plan | spec) printf '%s\n' -max_len=4096 -malloc_limit_mb=512 -timeout=20 ;;
    # malloc limit: see asan_options; a file of 64 KB reads in milliseconds (about 2 ms here under
    # ASan), and libhdf5's hangs (keep_going) never end, so a short timeout: each hang costs the run
    # that long, and fork mode meets one every few hundred inputs of export's
    weights | export) printf '%s\n' -max_len=65536 -timeout=1 ;;
  esac
  [ -f "$here/dict/$t.dict" ] && printf '%s\n' "-dict=$here/dict/$t.dict"
  return 0
}

# The HDF5 targets: libhdf5 itself allocates what a damaged header declares (a 184 GiB local heap,
# say) and copes when malloc says no, as glibc's would. So there ASan answers any malloc over 64
# MiB (the seeds are tens of KB) with NULL instead of libFuzzer calling it a finding; lrcnn's own allocations go through
# err_calloc, which aborts on NULL, so a huge one of ours is still a finding (a crash). The slow
# unwinder walks libhdf5's frames (no frame pointers), so that lsan.supp can match them; asan.supp
# leaves libhdf5's own out-of-bounds copies to it (not instrumented, not ours).
# libhdf5 1.10.8 also crashes (H5HG_read copying past a global heap), hangs (a heap object that
# does not advance) and leaks on damaged files, every few hundred inputs. So the HDF5 targets run
# in libFuzzer's fork mode, which goes on after a crash, hang or leak, and every saved input is then
# replayed and classified by its stack: the first frame that is neither the sanitizers', libFuzzer's
# nor libc's is in libhdf5 (the library's, counted apart and not fatal) or in lrcnn (a finding).
keep_going() {
  case $1 in
    weights | export) printf '%s\n' -fork="${jobs:-1}" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 ;;
  esac
  return 0
}

# Replays the saved input $2 of target binary $1 and prints "hdf5" or "lrcnn" (whose frame comes
# first: a frame in libhdf5, or one with a source line, which only lrcnn's code has here), then the
# frame; "norepro" when it runs clean alone (a leak that depends on libhdf5's free lists from earlier
# inputs, or the empty input fork mode saves for a job that died): counted apart, not fatal.
# A replay still running after the target's own time limit is a hang: SIGABRT then has ASan print
# where it was (handle_abort), at once rather than at libFuzzer's next alarm. A report in lrcnn's
# code is replayed once more without asan.supp: when libhdf5 had already read or written past its
# own buffers (what asan.supp lets pass), the first report is that one, and what followed is
# libhdf5's doing (seen: its H5HG_read overflow, then a bad free of lrcnn's bookkeeping).
classify() {
  local t=$(basename "$1") frame first limit
  t=${t#fuzz_}
  limit=$(options "$t" | sed -n 's/^-timeout=//p')
  frame=$(replay_frame "$1" "$2" "$limit" "$(asan_options "$t")")
  case $frame in
    *libhdf5*) echo "hdf5 ${frame#*in }" ;;
    '') echo "norepro (no report when replayed alone)" ;;
    *)
      first=$(replay_frame "$1" "$2" "$limit" "$(asan_options "$t" | sed 's/:suppressions=[^:]*//')")
      case $first in
        *libhdf5*) echo "hdf5 ${first#*in } (first; then in lrcnn's code: ${frame#*in })" ;;
        *) echo "lrcnn ${frame#*in }" ;;
      esac ;;
  esac
}

# The first frame of the first report replaying input $2 of binary $1 (limit $3 s, ASAN_OPTIONS $4)
# that is libhdf5's or has a source line.
replay_frame() {
  ASAN_OPTIONS="$4:handle_abort=1" timeout -s ABRT "$3" "$1" -runs=1 "$2" 2>&1 |
    grep -E '^ +#[0-9]+ 0x' | grep -E 'libhdf5|\.c:[0-9]+' | grep -v sysdeps | head -1
}

# While fuzzing ($2 = run), the HDF5 targets' reports go unsymbolized: in fork mode every libhdf5
# crash would otherwise wait on llvm-symbolizer (seconds each, a third of the run), and each saved
# input is replayed and symbolized by classify anyway.
asan_options() {
  local quiet=""
  case $1 in weights | export) [ "${2:-}" = run ] && quiet=":symbolize=0" ;; esac
  case $1 in
    weights | export) echo "$ASAN_OPTIONS:suppressions=$here/asan.supp:allocator_may_return_null=1:max_allocation_size_mb=64:fast_unwind_on_malloc=0:malloc_context_size=16$quiet" ;;
    *) echo "$ASAN_OPTIONS" ;;
  esac
}

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMP_WAIT_POLICY=PASSIVE HDF5_USE_FILE_LOCKING=FALSE

if [ "${1:-}" = --ctest ]; then
  bin=$2 runs=$3
  t=$(basename "$bin")
  t=${t#fuzz_}
  rm -rf "corpus-$t" "artifacts-$t"
  mkdir -p "corpus-$t" "artifacts-$t"
  mapfile -t opts < <(options "$t")
  mapfile -t more < <(keep_going "$t")
  rc=0
  ASAN_OPTIONS=$(asan_options "$t" run) "$bin" "${opts[@]}" "${more[@]}" -runs="$runs" -seed=1 -artifact_prefix="artifacts-$t/" \
    "corpus-$t" "$here/corpus/$t" || rc=$?
  [ ${#more[@]} -eq 0 ] && exit $rc # libFuzzer: non-zero on any finding
  # fork mode: non-zero whenever it saved an input; what counts is whose each one is
  bad=0 saved=0
  for a in artifacts-"$t"/*; do
    [ -f "$a" ] || continue
    saved=1
    c=$(classify "$bin" "$a")
    echo "run.sh: $a: $c"
    case ${c%% *} in hdf5 | norepro) ;; *) bad=1 ;; esac
  done
  [ "$rc" -ne 0 ] && [ $saved -eq 0 ] && bad=1
  exit $bad
fi

build="$root/build-fuzz" runs=1000000 seconds="" seed=1 jobs=1 targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=(net plan spec weights export)
out=$(mktemp -d "${TMPDIR:-/tmp}/lrcnn-fuzz-run.XXXXXX")
echo "run.sh: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), seed $seed, ${seconds:+$seconds s}${seconds:-$runs runs} per target; logs, corpora and findings in $out"
printf '%-8s %10s %8s %8s %16s %s\n' target execs time_s exec/s corpus findings
bad=0
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$t"
  [ -x "$bin" ] || { echo "run.sh: no $bin (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; exit 2; }
  mkdir -p "$out/$t/corpus" "$out/$t/findings"
  mapfile -t opts < <(options "$t")
  if [ -n "$seconds" ]; then limit=(-max_total_time="$seconds"); else limit=(-runs="$runs"); fi
  start=$EPOCHREALTIME
  set +e
  mapfile -t more < <(keep_going "$t")
  ASAN_OPTIONS=$(asan_options "$t" run) "$bin" "${opts[@]}" "${more[@]}" "${limit[@]}" -seed="$seed" -artifact_prefix="$out/$t/findings/" \
    "$out/$t/corpus" "$here/corpus/$t" >"$out/$t/log" 2>&1
  rc=$?
  set -e
  time_s=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  # fork mode prints no final stats: its last status line "#N: ..." has the runs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t/log" | tail -1)
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\): cov:.*/\1/p' "$out/$t/log" | tail -1)
  rate=$(awk -v n="${execs:-0}" -v s="$time_s" 'BEGIN { printf "%.0f", n / s }')
  seeds=$(find "$here/corpus/$t" -type f | wc -l)
  new=$(find "$out/$t/corpus" -type f | wc -l)
  : >"$out/$t/findings.txt"
  for a in "$out/$t/findings"/*; do # classified $jobs at a time, a line each
    [ -f "$a" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    echo "$(basename "$a"): $(classify "$bin" "$a")" >>"$out/$t/findings.txt" &
  done
  wait
  lib=$(grep -c ': hdf5 ' "$out/$t/findings.txt" || true)
  norepro=$(grep -c ': norepro ' "$out/$t/findings.txt" || true)
  ours=$(grep -c ': lrcnn ' "$out/$t/findings.txt" || true)
  what=""
  [ $((ours + lib + norepro)) -gt 0 ] && what=" (+$lib in libhdf5, $norepro not reproducible alone: $out/$t/findings.txt)"
  [ "$rc" -ne 0 ] && [ "$ours" -eq 0 ] && what="$what (exit $rc, see $out/$t/log)"
  printf '%-8s %10s %8.0f %8s %16s %s\n' "$t" "${execs:-?}" "$time_s" "$rate" "$seeds+$new" "$ours$what"
  if [ "$rc" -ne 0 ] || [ "$ours" -gt 0 ]; then bad=1; fi
done
exit $bad
