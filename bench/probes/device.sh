#!/usr/bin/env bash
# The probes that wait for a device session (docs/development.md, sessions 12-13), by part, each
# writing its table to $OUT/PART.txt. Run from the device command after the line that
# ../shared/device/prepare.sh prints (wgtune on PYTHONPATH), with R the repository root:
#
#   bash $R/bench/probes/device.sh tail staircase    # about 5 minutes
#   bash $R/bench/probes/device.sh hundreds short-k  # about 5 minutes
#   bash $R/bench/probes/device.sh narrow ab:NAME           # about 5 minutes (NAME: a bench/probes/NAME.patch)
#
# GENERAL, HUNDREDS, SHORT_K, NARROW, SHAPES and SWEEP_*, if set, replace those parts' shapes, and CHECKS_WORK the checks'
# bound on a shape's work (a smoke test on a small adapter).
#
# Parts:
#   tail       the general class's leaders plain and with split-K tails (tail.txt), 14 shapes
#   k-sweep    the leaders at M x N fixed and K stepped (k-sweep.txt): bench/k_sweep.py splits time into a
#              fixed cost and a steady rate along K, beside torch's
#   staircase  leaders with M stepped by two 96-row block rows (staircase.txt): where each wave ends, and
#              bench/waves.py's fit of how many workgroups of each run at once (W, for tail=W)
#   hundreds   one side of 55-400, the other in the thousands (hundreds.txt), 13 shapes
#   short-k    K of 129-256, M and N in the hundreds to thousands (short-k.txt), 13 shapes
#   narrow     session 11's narrow kgrid tiles in a tune: bench/shapes.py on their shapes with
#              this wheel and with .whl/pre-narrow's (8997445^, the set without them), side by side
#   draw       a fresh held-out draw of 30 matmul shapes (seed printed), the tune against torch
#   wake       the wake before a tune (core/gpu/wake.py): its readings after the GPU idled, the fma on 1 GiB
#              arrays' first tune with and without it (fresh processes, 6 s idle before each), and the first
#              tune's cost through the tuning process with and without it
#   reductions bench/short_kernels.py --all on REDUCTION_KEYS: every candidate's GPU time beside torch's CUDA graph
#   dawn-tune  bench/subgroup_matrix_tune.py on its fixed shapes (f16 products, no draw): each tune's seconds on
#              Dawn, whose pipelines Dawn's workers compile since session 34 (16 threads of ours before: set
#              beside h200-subgroup-matrix-tune-48725-final.txt's 0.4-2.8 s)
#   first-trace bench/tune_trace.py at 4096^3 in process and through the tuning process, twice: where the
#              tuning process's extra second of the first tune goes (BEFORE=NAME: .whl/NAME's wheel too, in turn)
#   first-costs bench/tune_trace.py at 4096^3 through the tuning process with the wake and the checks, without
#              each, and without both, and with the inputs' copies through the pipe (--pipe, as before session
#              37's shared memory), twice: what each costs the first tune
#   input-copies bench/input_copies.py: a 4096^3 call's three buffers copied to the tuning process, through shared
#              memory, through the pipe, and through shared memory from bytes made first (before session 38) in
#              turn, seven rounds (the copies were 0.54-0.67 s of the first tune)
#   dawn-compiles bench/first_tune.py --full --dawn with 4304a40's wheel (.whl/pre-dawn: 16 threads of ours; or
#              BEFORE=NAME's) and this one (Dawn's own workers) in turn, twice: how much each overlaps the compiles
#   short      bench/short_kernels.py on SHORT_KEYS (default: the picks the H100's duels found over 2% more than
#              once, sessions 18-24): each candidate by the tuner's own figure, the GPU's timestamps, one pass, a
#              batch and alone, so whether such a miss is the tune's spread or its timing shows
#   placement  bench/placement.py on PLACEMENT_KEYS (default: keys whose time moved most with where their buffers lie,
#              session 25), copying all of a call's buffers, then its output only, then its inputs only: which
#              buffer's place moves the time (if the inputs', a tune could share the call's own, read-only)
#   checks     every candidate of every family on 15 fresh shapes a family at a GPU's sizes (bench/fresh_checks.py:
#              outputs checked on NaN-filled buffers, within the H200's binding limit), a few minutes
#   sweep:NAME the tiles of bench/probes/<NAME>.txt on sweep-ab's shapes, with bench/k_sweep.py
#   staircase:NAME  the tiles of bench/probes/<NAME>.txt on the staircase's shapes, with bench/waves.py
#   probe:NAME the tiles of bench/probes/<NAME>.txt on the general and hundreds classes' shapes (GENERAL, HUNDREDS),
#              or on SHAPES where that is set
#   probe-dawn:NAME  probe:NAME natively, then on Dawn's device without robustness (Tint, no float atomics: what a
#              browser compiles and lacks), each its own table
#   sweep-ab:NAME  the K sweep's tiles on 2048x2048xK (SWEEP_MN, SWEEP_K) and four mid-size shapes (SWEEP_AB), this wheel
#              and .whl/NAME's (as ab:NAME) in turn, twice: whether a change to the tiles' WGSL moves
#              their fixed cost or their steady rate (bench/k_sweep.py on each)
#   dawn       one draw of 30 (SEED, if set, else a fresh one) tuned on wgpu-native's device (naga compiles the
#              WGSL), on Dawn's with its robustness off (Tint, as Chromium compiles it), on Dawn's as it ships, and
#              on wgpu-native's again: whether the compiler in front of the driver moves the kernels' rates
#   stages-ab:NAME  bench/stage_times.py with this wheel and .whl/NAME's in turn, twice, on STAGE_SHAPES with
#              STAGE_CANDIDATES (the two-pass leaders of the few-block shapes), then bench/stage_ab.py's
#              table: whether a change to one stage of a multi-stage candidate moves that stage and the whole
#   ab:NAME    one fresh draw of 30 (SEED, if set, else a fresh one; SHAPES, if set, instead) tuned with this wheel, then with
#              .whl/NAME's: a wheel built here from this tree with bench/probes/NAME.patch applied (the set
#              with the candidates a probe found, say), so whether they move the draw in a tune, tune time
#              and regret included, is known before they are committed (docs/development.md, session 13);
#              FLAGS, if set, go to both tunes (FLAGS=--dawn: on Dawn's device, as a browser runs them);
#              LIMIT, if set, stops each tune after that many seconds, so that the part still ends with
#              the shapes both reached side by side (a call's time running out otherwise loses them)
set -u
R=${R:?set R to the repository root}
OUT=${OUT:?set OUT to the folder the tables go to}
P="python3 $R/bench/kernel_probe.py --full --only matmul --each"
GENERAL=${GENERAL:-"927x1095x7028 706x7203x2905 870x2083x4302 2550x1412x7257 1147x406x1007 1668x189x1090 753x124x831
  685x223x944 2961x205x271 3423x289x1402 1579x789x1529 689x216x2025 5391x7196x390 2559x803x206"}
# The draws' shapes of the class under 80%, then eight fresh ones (seed 20261205).
HUNDREDS=${HUNDREDS:-"1668x189x1090 133x3326x279 753x124x831 1147x406x1007 5235x55x551 397x2597x2132 2093x219x823
  202x1961x793 3837x159x1544 161x4091x386 2432x143x1565 373x2769x1612 323x2918x858"}
# The draws' shapes of K 129-256 under 75%, then six fresh ones (seed 202612051).
SHORT_K=${SHORT_K:-"2694x1325x222 1146x2550x199 2231x2153x197 2236x709x144 1706x1765x160 2204x1885x145 1099x4973x174
  5112x5787x159 3169x502x248 1322x5050x226 3024x3387x239 1826x3672x241 5576x1132x252"}
# The mid-size shapes beside the K sweep in sweep-ab: one each of the general, short-K and hundreds classes.
SWEEP_AB=${SWEEP_AB:-"1984x907x688 2231x2153x197 397x2597x2132 1147x406x1007"}
# Picks the duels found over 2% on two or more draws: a vec4 flat kernel undervalued against a tile at K of 12-21,
# one column group of 512 invocations against two of 256, a two-pass 128x16 tile against a float-atomic 64x64.
SHORT_KEYS=${SHORT_KEYS:-"693x5648x12 1410x2720x21 2861x916x21 6270x1x2178 1260x2x1883 1673x2x2408 1410x46x1361"}
# Reductions and fma of 1-4M elements and a few beside them, against torch's CUDA graph (issue 29, session 33).
REDUCTION_KEYS=${REDUCTION_KEYS:-"row_sum:1024x1024 row_sum:4096x1023 row_sum:2048x2048 row_sum:1000x1000
  row_sum:3000x1000 row_sum:8192x512 row_sum:700x1500 fma:1000000 fma:3000000"}
# Keys whose candidates' times moved most between sets of copies of their buffers (session 25).
PLACEMENT_KEYS=${PLACEMENT_KEYS:-"1410x2720x21 752x20x3093 1x811x5126 893x1424x20"}
# Few-block shapes and their two-pass leaders (sessions 27-28), for stages-ab.
STAGE_SHAPES=${STAGE_SHAPES:-"437x869x1061 194x529x6966 500x321x5545 895x346x2587 64x64x65536 256x256x16384 781x133x1668
  302x271x1518"}
STAGE_CANDIDATES=${STAGE_CANDIDATES:-"tile64x64_k8_reg8x4_pad_db_a2_sc_kg1024_2p tile128x128_k16_reg8x8_db_sc_kg1056_w132_2p
  tile128x32_k16_reg8x4_db_sc_kg256_2p tile128x128_k16_reg8x8_v4_db_kg128_2p"}
SWEEP_MN=${SWEEP_MN:-2048x2048}
CHECKS_WORK=${CHECKS_WORK:-2e10}
SWEEP_K=${SWEEP_K:-"64 128 256 512 1024 2048 4096"}
NARROW=${NARROW:-"4206x14x7801 8192x16x1024 4000x12x3000 1500x10x9000 17x5794x2066 19x2048x2048 12x3000x3000 9x1135x4811
  2594x19x5983 4726x25x626"}

shapes() { for s in "$@"; do echo --shape "$s"; done; }
sweep_shapes() { for k in $SWEEP_K; do echo --shape "$SWEEP_MN"x$k; done; shapes $SWEEP_AB; }
# The tiles of the probe file $1 with M stepped by two 96-row block rows (N 1408, K 2048), kept in $2, and
# bench/waves.py's fit of the steps: how many workgroups of each tile the device runs at once.
staircase() {
  $P --out "$2" --tiles @"$1" $(for r in $(seq 4 2 48); do echo --shape $((96 * r))x1408x2048; done)
  python3 "$R"/bench/waves.py "$2"/probe.jsonl
}
# The wheel in .whl/$1/ (a variant's, or pre-narrow's), installed in /tmp/ab_$1 for PYTHONPATH to put first.
install_variant() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "/tmp/ab_$1" "$R/.whl/$1"/*.whl
}
# The PYTHONPATH that runs wheel $1: "this" (the tree's own), or a variant install_variant installed.
wheel_path() { if [ "$1" = this ]; then echo "$PYTHONPATH"; else echo "/tmp/ab_$1:$PYTHONPATH"; fi; }

# The parts that run on Dawn's device need wgpudawn, whose wheel .whl/ holds only if it was put there
# (docs/development.md): without it each such tune fails at once, so say it before any part spends the call.
needs_dawn() {
  for part in "$@"; do
    case $part in
      dawn | dawn-tune | dawn-compiles | checks | probe-dawn:*) return 0 ;;
      ab:*) [[ " ${FLAGS:-} " == *" --dawn "* ]] && return 0 ;;
    esac
  done
  return 1
}
# Each part writes its table to $OUT/PART.txt and prints its tail: a caller whose stdout is that file has two
# writers on it, which overwrite each other (session 31 lost most of a draw's table so). Refuse that first.
stdout=$(readlink -f /proc/$$/fd/1 2>/dev/null || true)
for part in "$@"; do
  if [ -n "$stdout" ] && [ "$stdout" = "$(readlink -f "$OUT/${part/:/-}.txt" 2>/dev/null)" ]; then
    echo "device.sh: stdout is $OUT/${part/:/-}.txt, the table part $part writes itself: send stdout elsewhere" >&2
    exit 2
  fi
done
if needs_dawn "$@" && ! python3 -c "import wgpudawn" 2>/dev/null; then
  echo "device.sh: $* runs on Dawn's device, and wgpudawn is not installed: put its wheel in .whl/" \
    "(pip download --no-deps wgpudawn==0.32.0.4 -d .whl; docs/development.md)" >&2
  exit 2
fi

for part in "$@"; do
  echo "== $part ($(date -u +%H:%M:%S))"
  case $part in
    tail) $P --tiles @"$R"/bench/probes/tail.txt $(shapes $GENERAL) ;;
    staircase) staircase "$R"/bench/probes/staircase.txt "$OUT"/staircase ;;
    staircase:*) staircase "$R/bench/probes/${part#staircase:}.txt" "$OUT/staircase-${part#staircase:}" ;;
    k-sweep)
      $P --out "$OUT"/k-sweep --tiles @"$R"/bench/probes/k-sweep.txt \
        $(for k in 64 128 192 256 384 512 768 1024 1536 2048 3072 4096; do echo --shape 2048x2048x$k; done) \
        $(for k in 128 256 512 1024 2048 4096 8192; do echo --shape 1024x1024x$k; done)
      python3 "$R"/bench/k_sweep.py "$OUT"/k-sweep/probe.jsonl ;;
    hundreds) $P --tiles @"$R"/bench/probes/hundreds.txt $(shapes $HUNDREDS) ;;
    short-k) $P --tiles @"$R"/bench/probes/short-k.txt $(shapes $SHORT_K) ;;
    narrow)
      install_variant pre-narrow || exit 1
      for round in 1 2; do
        echo "-- round $round: this wheel"
        python3 "$R"/bench/shapes.py --full --only matmul $(shapes $NARROW)
        echo "-- round $round: without the narrow tiles (8997445^)"
        PYTHONPATH=$(wheel_path pre-narrow) python3 "$R"/bench/shapes.py --full --only matmul $(shapes $NARROW)
      done ;;
    draw) python3 "$R"/bench/shapes.py --full --only matmul --draw 30 --shapes 0:0 ;;
    wake)
      python3 "$R"/bench/wake_probe.py --idle "${WAKE_IDLE:-6}" --wakes 3
      for setting in default WGTUNE_WAKE=0; do  # each in a fresh process on a GPU left idle
        sleep "${WAKE_IDLE:-6}"
        python3 "$R"/bench/tune_samples.py --key fma:268435456 --setting "$setting"
      done
      for wake in 1 0; do
        echo "-- WGTUNE_WAKE=$wake"
        WGTUNE_WAKE=$wake python3 "$R"/bench/first_tune.py --full --tunes-only --isolate --rounds 2
      done ;;
    reductions) python3 "$R"/bench/short_kernels.py --all --rounds 5 $(for k in $REDUCTION_KEYS; do echo --key "$k"; done) ;;
    dawn-tune) python3 "$R"/bench/subgroup_matrix_tune.py --draw 0 --sets f16-products ;;
    first-trace)  # where the tuning process's extra second of the first tune goes (H100: 3.3 s against 2.3 in process)
      [ -n "${BEFORE:-}" ] && { install_variant "$BEFORE" || exit 1; }
      for round in 1 2; do
        for wheel in ${BEFORE:-} this; do
          for isolate in "" --isolate; do
            echo "-- round $round: $wheel wheel, ${isolate:-in process}"
            PYTHONPATH=$(wheel_path "$wheel") python3 "$R"/bench/tune_trace.py --shape 4096x4096x4096 $isolate
          done
        done
      done ;;
    first-costs)  # what the wake and the output checks cost the first tune through the tuning process
      for round in 1 2; do
        for flags in "" --no-wake --no-checks "--no-wake --no-checks" --pipe; do
          echo "-- round $round: --isolate $flags"
          python3 "$R"/bench/tune_trace.py --shape 4096x4096x4096 --isolate $flags
        done
      done ;;
    input-copies) python3 "$R"/bench/input_copies.py --rounds 7 --pipe-too --bytes-first-too ;;
    dawn-compiles)  # Dawn's own workers (this wheel) against 16 threads (.whl/pre-dawn: 4304a40's wheel), or BEFORE's
      before=${BEFORE:-pre-dawn}
      install_variant "$before" || exit 1
      for round in 1 2; do
        for wheel in "$before" this; do
          echo "-- round $round: $wheel wheel"
          PYTHONPATH=$(wheel_path "$wheel") python3 "$R"/bench/first_tune.py --full --dawn --rounds 1
        done
      done ;;
    short) python3 "$R"/bench/short_kernels.py --all $(for k in $SHORT_KEYS; do echo --key matmul:"$k"; done) ;;
    placement) for copy in all out in; do
        python3 "$R"/bench/placement.py --copy $copy --copies 5 --tunes 2 $(for k in $PLACEMENT_KEYS; do echo --key "$k"; done)
      done ;;
    sweep:*)
      name=${part#sweep:}
      $P --out "$OUT/sweep-$name" --tiles @"$R/bench/probes/$name.txt" $(sweep_shapes)
      python3 "$R"/bench/k_sweep.py "$OUT/sweep-$name"/probe.jsonl ;;
    probe:*) $P --tiles @"$R/bench/probes/${part#probe:}.txt" $(shapes ${SHAPES:-$GENERAL $HUNDREDS}) ;;
    probe-dawn:*)
      for flags in "" --dawn; do
        echo "-- ${flags:-wgpu-native}"
        $P $flags --tiles @"$R/bench/probes/${part#probe-dawn:}.txt" $(shapes ${SHAPES:-$GENERAL $HUNDREDS})
      done ;;
    sweep-ab:*)
      name=${part#sweep-ab:}
      install_variant "$name" || exit 1
      for round in 1 2; do
        for wheel in this "$name"; do
          echo "-- round $round: $wheel wheel"
          PYTHONPATH=$(wheel_path "$wheel") $P --out "$OUT/sweep-ab-$name/$wheel$round" --tiles @"$R"/bench/probes/k-sweep.txt \
            $(sweep_shapes)
          python3 "$R"/bench/k_sweep.py "$OUT/sweep-ab-$name/$wheel$round"/probe.jsonl
        done
        echo "-- round $round side by side"
        python3 "$R"/bench/k_sweep.py "$OUT/sweep-ab-$name/this$round"/probe.jsonl \
          --versus "$OUT/sweep-ab-$name/$name$round"/probe.jsonl
      done ;;
    checks)  # fma last: its largest arrays take half a minute a shape, and a call's time may run out
      python3 "$R"/bench/fresh_checks.py --count 15 --work "$CHECKS_WORK" \
        --only matmul --only matmul_f16 --only row_sum --only row_max
      echo "-- on Dawn"
      python3 "$R"/bench/fresh_checks.py --count 8 --work "$CHECKS_WORK" --dawn --only matmul --only matmul_f16
      echo "-- fma"
      python3 "$R"/bench/fresh_checks.py --count 15 --work "$CHECKS_WORK" --only fma ;;
    dawn)
      seed=${SEED:-$(python3 -c 'import secrets; print(secrets.randbelow(1000000))')}
      for run in native unchecked dawn native; do
        flags=""; [ $run = unchecked ] && flags="--dawn --unchecked"; [ $run = dawn ] && flags="--dawn"
        echo "-- $run, seed $seed"
        python3 "$R"/bench/shapes.py --full --only matmul --draw 30 --seed "$seed" --shapes 0:0 $flags
      done ;;
    stages-ab:*)
      name=${part#stages-ab:}
      install_variant "$name" || exit 1
      for round in 1 2; do
        for wheel in this "$name"; do
          echo "-- round $round: $wheel wheel"
          PYTHONPATH=$(wheel_path "$wheel") python3 "$R"/bench/stage_times.py $(shapes $STAGE_SHAPES) \
            $(for c in $STAGE_CANDIDATES; do echo --candidate "$c"; done)
        done
      done ;;
    ab:*)
      name=${part#ab:}
      install_variant "$name" || exit 1
      seed=${SEED:-$(python3 -c 'import secrets; print(secrets.randbelow(1000000))')}
      given="--draw 30 --seed $seed --shapes 0:0"; [ -n "${SHAPES:-}" ] && seed="none (SHAPES)" && given=$(shapes $SHAPES)
      echo "-- this wheel, seed $seed${FLAGS:+, $FLAGS}"
      timeout "${LIMIT:-0}" python3 "$R"/bench/shapes.py --full --only matmul $given ${FLAGS:-}
      echo "-- with bench/probes/$name.patch, seed $seed${FLAGS:+, $FLAGS}"
      PYTHONPATH=$(wheel_path "$name") timeout "${LIMIT:-0}" python3 "$R"/bench/shapes.py --full --only matmul \
        $given ${FLAGS:-} ;;
    *) echo "unknown part $part (tail, staircase, staircase:NAME, k-sweep, hundreds, short-k, narrow, draw, wake, reductions, short, placement, checks, dawn, probe:NAME, probe-dawn:NAME, sweep:NAME, sweep-ab:NAME, stages-ab:NAME, ab:NAME)"; exit 2 ;;
  esac > "$OUT/${part/:/-}.txt" 2>&1
  case $part in  # the pairs of tables side by side, shape by shape
    narrow | ab:* | dawn) python3 "$R"/bench/ab_tables.py "$OUT/${part/:/-}.txt" > "$OUT/${part/:/-}-compared.txt" 2>&1
      tail -n 8 "$OUT/${part/:/-}-compared.txt" ;;
    stages-ab:*) python3 "$R"/bench/stage_ab.py "$OUT/${part/:/-}.txt" > "$OUT/${part/:/-}-compared.txt" 2>&1
      cat "$OUT/${part/:/-}-compared.txt" ;;
  esac
  tail -n 25 "$OUT/${part/:/-}.txt"
done
