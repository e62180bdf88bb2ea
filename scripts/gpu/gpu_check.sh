#!/usr/bin/env bash
# One GPU run: the extension (built here, or a wheel built elsewhere), info, the whole test suite (GPU
# tests included), compute-sanitizer (memcheck + racecheck) over a representative subset, the masked
# counts race under PDL (redo), optionally ncu, and the benchmarks. Logs go to $OUT (default ./gpu_out);
# a short summary is printed last. Uses the machine's python3 and torch (no installs from an index).
#
#   scripts/gpu/gpu_check.sh            # everything, building the extension here
#   STEPS="wheel tests sanitizer redo bench" WHEEL=wheelhouse/sgl_quant-*.whl scripts/gpu/gpu_check.sh
#   STEPS="build tests bench" TEST_FILES="test_golden" BENCH_ARGS="--quick" scripts/gpu/gpu_check.sh
#   STEPS="build results" scripts/gpu/gpu_check.sh   # benchmark/results/<gpu model>/ anew
#   STEPS="build ncu" NCU_CASE=masked scripts/gpu/gpu_check.sh
#   PACK_OUTPUTS=1 OUT=$OUT/gc scripts/gpu/gpu_check.sh   # two files back (summary.txt, outputs.tgz)
# Step "wheel" instead of "build": `pip install --no-deps` of the given wheel (e.g. the one `make wheel`
# made on a machine without a GPU, with another Python and torch: the stable ABI's promise) into a folder
# of its own; every later step then imports sgl_quant from there, running from a copy of tests/ outside the
# source tree (where the tree's sgl_quant/ would shadow it).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
STEPS=${STEPS:-"build tests sanitizer redo bench"}  # "ncu" adds an Nsight Compute profile (scripts/gpu/profile_case.py)
NCU_CASE=${NCU_CASE:-dense}                      # which launches ncu profiles: dense or masked
BENCH_ARGS=${BENCH_ARGS:-}
# BENCHES: which benchmarks step "bench" runs: v2 (bench_per_token_group_quant.py), rms (bench_rmsnorm_quant.py),
# scaled (bench_scaled_quant.py), host (bench_host_overhead.py: host time per eager call)
# TEST_FILES: which tests/<name>.py files step "tests" runs; default every one
TEST_FILES=${TEST_FILES:-$(cd tests && ls test_*.py | sed 's/\.py$//' | tr '\n' ' ')}
summary=()
t_start=$(date +%s)

step() {  # step NAME TIMEOUT LOG CMD...
  local name=$1 limit=$2 log=$3; shift 3
  local t0=$(date +%s)
  timeout "$limit" "$@" >"$log" 2>&1
  local rc=$?
  summary+=("$(printf '%-10s rc=%-3s %4ss  %s' "$name" "$rc" "$(( $(date +%s) - t0 ))" "$(basename "$log")")")
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$OUT/summary.txt" 2>&1
WORK=$ROOT  # where python runs: the tree (editable build), or a folder outside it (wheel)
if [[ " $STEPS " == *" build "* ]]; then
  step build 600 "$OUT/build.log" $PY -m pip install --no-build-isolation --no-deps -v -e . || tail -40 "$OUT/build.log"
fi
if [[ " $STEPS " == *" wheel "* ]]; then
  site=/tmp/sgl_quant_wheel_site
  rm -rf "$site" && step wheel 300 "$OUT/wheel.log" $PY -m pip install --no-deps --target "$site" ${WHEEL:-wheelhouse/*.whl}
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  WORK=$(mktemp -d) && cp -r tests "$WORK/tests"
  summary+=("wheel      $(basename ${WHEEL:-wheelhouse/*.whl}) -> $(cd "$WORK" && $PY -c 'import sgl_quant; print(sgl_quant.__file__)')")
fi
(cd "$WORK" && $PY -m sgl_quant info) >>"$OUT/summary.txt" 2>&1

if [[ " $STEPS " == *" tests "* ]]; then
  # With pytest-xdist (there on the device image) TEST_WORKERS processes share the GPU and the CPU reference
  # work. TEST_RUN=one (default): every file in one pytest run, the workers started once (each run pays
  # ~10 s of worker start-up), a line per file from its JUnit XML; xdist replaces a worker that crashes and
  # fails its test. If that run ends otherwise than passed/failed (a hang past its timeout, an internal error), or
  # with TEST_RUN=files, one run per file, so that one file cannot hide the others' results.
  t0=$(date +%s); : >"$OUT/tests.log"
  xdist=$($PY -c "import xdist" 2>/dev/null && echo "-n ${TEST_WORKERS:-8}")
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / ${TEST_WORKERS:-8} ))}  # no oversubscription by the workers' CPU ops
  rc=2
  if [[ ${TEST_RUN:-one} == one ]]; then
    (cd "$WORK" && timeout 480 $PY -m pytest $(printf 'tests/%s.py ' $TEST_FILES) -q -rfEs --durations=15 \
      -p no:cacheprovider --junitxml="$OUT/tests.xml" $xdist) >>"$OUT/tests.log" 2>&1
    rc=$?; echo "rc=$rc" >>"$OUT/tests.log"
    if [[ $rc == 0 || $rc == 1 ]]; then
      while read -r line; do summary+=("tests      $line"); done < <($PY scripts/gpu/junit_files.py "$OUT/tests.xml" $TEST_FILES)
      summary+=("tests      rc=$rc one run: $(grep -E '[0-9]+ (passed|failed|skipped|error)' "$OUT/tests.log" | tail -1)")
    fi
  fi
  if [[ $rc != 0 && $rc != 1 ]]; then
    [[ ${TEST_RUN:-one} == one ]] && summary+=("tests      rc=$rc: the one run did not finish; one run per file")
    for f in $TEST_FILES; do
      part=$(mktemp)
      (cd "$WORK" && timeout 300 $PY -m pytest "tests/$f.py" -q -rfEs --durations=5 -p no:cacheprovider $xdist) >"$part" 2>&1
      rc=$?; { echo "== tests/$f.py"; cat "$part"; echo "rc=$rc"; } >>"$OUT/tests.log"
      # this file's own result line (a file whose tests all skip has no "passed")
      summary+=("$(printf 'tests      rc=%-3s %-26s %s' "$rc" "$f" "$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$part" | tail -1)")")
      rm -f "$part"
    done
  fi
  summary+=("tests      total $(( $(date +%s) - t0 ))s")
fi

if [[ " $STEPS " == *" sanitizer "* ]]; then
  {
    echo "== memcheck"; timeout 300 "$SAN" --tool memcheck --error-exitcode 3 $PY "$ROOT/scripts/gpu/sanitize_subset.py"; echo "rc=$?"
    echo "== racecheck"; timeout 300 "$SAN" --tool racecheck --error-exitcode 3 $PY "$ROOT/scripts/gpu/sanitize_subset.py"; echo "rc=$?"
    # the argument fuzz's CUDA calls (valid ones and the mutated calls the checks let through) under memcheck
    echo "== memcheck fuzz"; (cd "$WORK" && SGLQ_FUZZ_CALLS=400 timeout 300 "$SAN" --tool memcheck --error-exitcode 3 \
      $PY -m pytest tests/test_fuzz_args.py -q -k cuda -p no:cacheprovider); echo "rc=$?"
  } >"$OUT/tools.log" 2>&1
  # the subset's own verdict too (launches, mismatches), or its exception: rc=1 alone would hide it
  summary+=("sanitizer  $(grep -E '^rc=|ERROR SUMMARY|RACECHECK SUMMARY|^sanitize_subset:|Error:|[0-9]+ (passed|failed)' "$OUT/tools.log" | tr '\n' ' ')")
fi

if [[ " $STEPS " == *" redo "* ]]; then
  # masked counts rewritten by a producer that is still running when the kernel starts under PDL: the
  # kernel's early read of the counts is wrong and it must start over (tests/cuda/masked_counts_under_pdl.cu;
  # memcheck too: the guessed first task's loads must stay in bounds)
  NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc | head -1)
  step redo 300 "$OUT/redo.log" bash -c "$NVCC -O3 -std=c++17 --use_fast_math -gencode arch=compute_90a,code=sm_90a \
    -I csrc tests/cuda/masked_counts_under_pdl.cu -o /tmp/masked_counts_under_pdl && /tmp/masked_counts_under_pdl &&
    $SAN --tool memcheck --error-exitcode 3 /tmp/masked_counts_under_pdl"
  summary+=("redo       $(grep -c 'same bytes' "$OUT/redo.log") of 4 same bytes; $(grep -m1 'ERROR SUMMARY' "$OUT/redo.log")")
fi

if [[ " $STEPS " == *" ncu "* ]]; then
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "== ncu" >>"$OUT/tools.log"
  timeout 300 "$NCU" --clock-control none -k regex:per_token_group_quant_kernel -c 3 --section SpeedOfLight \
    --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    $PY "$ROOT/scripts/gpu/profile_case.py" "$NCU_CASE" >>"$OUT/tools.log" 2>&1
  summary+=("ncu        rc=$?  tools.log")
fi

BENCHES=${BENCHES:-"v2 rms scaled host"}
if [[ " $STEPS " == *" bench "* ]]; then
  [[ " $BENCHES " == *" v2 "* ]] &&
    step bench 420 "$OUT/bench.log" $PY benchmark/bench_per_token_group_quant.py --out "$OUT" $BENCH_ARGS
  [[ " $BENCHES " == *" rms "* ]] &&
    step bench-rms 420 "$OUT/bench_rmsnorm.log" $PY benchmark/bench_rmsnorm_quant.py --out "$OUT" \
    $(printf '%s\n' $BENCH_ARGS | grep -E '^--(quick|no-baselines)$')
  [[ " $BENCHES " == *" scaled "* ]] &&
    step bench-scaled 420 "$OUT/bench_scaled.log" $PY benchmark/bench_scaled_quant.py --out "$OUT" \
    $(printf '%s\n' $BENCH_ARGS | grep -E '^--quick$')
  [[ " $BENCHES " == *" host "* ]] &&
    step bench-host 120 "$OUT/bench_host.log" $PY benchmark/bench_host_overhead.py --out "$OUT/host"
fi
if [[ " $STEPS " == *" results "* ]]; then
  step results 600 "$OUT/results.log" $PY benchmark/results.py
  summary+=("results    $(tail -1 "$OUT/results.log")")
fi

failures=$([[ -f "$OUT/tests.log" ]] && grep -E "^FAILED|^ERROR" "$OUT/tests.log" | head -20)

{
  echo "== steps (total $(( $(date +%s) - t_start ))s)"; printf '%s\n' "${summary[@]}"
  [[ -n $failures ]] && { echo "== failed tests"; echo "$failures"; }
  if [[ -f "$OUT/bench.txt" ]]; then echo "== bench"; cat "$OUT/bench.txt"; fi
  if [[ -f "$OUT/rmsnorm.txt" ]]; then echo "== bench rmsnorm"; cat "$OUT/rmsnorm.txt"; fi
  if [[ -f "$OUT/scaled.txt" ]]; then echo "== bench scaled"; cat "$OUT/scaled.txt"; fi
  if [[ -f "$OUT/host/host_overhead.txt" ]]; then echo "== bench host"; cat "$OUT/host/host_overhead.txt"; fi
} | tee -a "$OUT/summary.txt"
# At most 8 files come back from the device machine: the logs (and the host benchmark's files, whose table
# is in the summary) travel as one archive, logs.tgz. That leaves summary.txt, logs.tgz and the two
# benchmarks' JSON, plot and table: 8 already. PACK_OUTPUTS=1: everything but summary.txt in one archive,
# outputs.tgz (unpack it here: tar xzf outputs.tgz).
if [[ -n ${PACK_OUTPUTS:-} ]]; then
  archive=outputs.tgz packed=$(cd "$OUT" && ls -A | grep -vx summary.txt)
else
  archive=logs.tgz packed=$(cd "$OUT" && ls -d *.log *.xml host 2>/dev/null)
fi
[[ -n $packed ]] && (cd "$OUT" && tar czf "$archive" $packed && rm -rf $packed)
# Exit status: 1 when a step, a test file or a sanitizer run failed (the summary says which), else 0.
if printf '%s\n' "${summary[@]}" | grep -qE 'rc=[1-9]' || [[ -n $failures ]]; then exit 1; fi
exit 0
