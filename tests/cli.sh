#!/usr/bin/env bash
# Command-line tests: outputs, exit statuses, and bad input (exit 2, one line naming the problem,
# no output file written, existing files kept). Usage: cli.sh LRCNN PYTHON SOURCE_DIR
set -u
lrcnn="$1"; python="$2"; src="$3"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0

ok()   { passes=$((passes + 1)); printf 'ok   %s\n' "$1"; }
bad()  { fails=$((fails + 1)); printf 'FAIL %s\n' "$1"; [ -f "$tmp/err" ] && sed 's/^/     stderr: /' "$tmp/err" | head -5; }

# expect_fail LABEL WANT_SUBSTRING -- ARGS...: exit 2, exactly one stderr line containing WANT.
expect_fail() {
  local label="$1" want="$2"; shift 3
  "$lrcnn" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 2 ]; then bad "$label: exit $rc, want 2"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$label: $lines stderr lines, want 1"; return; fi
  if ! grep -qF -- "$want" "$tmp/err"; then bad "$label: stderr lacks '$want'"; return; fi
  ok "$label -> $(cat "$tmp/err")"
}
expect_ok() {
  local label="$1"; shift 2
  if "$lrcnn" "$@" >"$tmp/out" 2>"$tmp/err"; then ok "$label"; else bad "$label: exit $?"; fi
}
no_file() { if [ -e "$1" ] || compgen -G "$1.*.tmp" >/dev/null; then bad "$2: $1 was written"; else ok "$2: nothing written"; fi; }

# --- help and outputs ---------------------------------------------------------------------------
expect_ok "lrcnn --help" -- --help

# --- non-square inputs: --image HxW and image = HxW in a spec, recorded as image_h, image_w ---------
printf 'nets = unet-small\nimage = 32, 48x24\nplans = layer, 2ps:2\n' >"$tmp/hw.spec"
if "$lrcnn" sweep "$tmp/hw.spec" -o "$tmp/hw.h5" --quiet >/dev/null 2>"$tmp/err" &&
   "$python" - "$tmp/hw.h5" <<'PY' 2>"$tmp/err"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    sizes = sorted({(int(g.attrs["image_h"]), int(g.attrs["image_w"])) for g in f["runs"].values()})
assert sizes == [(32, 32), (48, 24)], sizes
PY
then ok "spec image = 32, 48x24 -> runs at 32x32 and 48x24"; else bad "spec image HxW"; fi
# --- OpenBLAS's kernel (engine/cpu/blas_cpu.h), as every result file records it: on a CPU with AVX2
# and FMA never one of OpenBLAS's kernels without AVX (Debian's OpenBLAS falls back to Prescott for a
# CPU newer than it knows); a kernel the user names in OPENBLAS_CORETYPE stands, even that one -------
blas_kernel() { # FILE.h5 -> the kernel named by its root attribute blas, then the attribute
  "$python" -c 'import sys, h5py; b = h5py.File(sys.argv[1], "r").attrs["blas"]; b = b.decode() if isinstance(b, bytes) else b
print(b.split(", ", 1)[1].split(" kernel")[0] if ", " in b else "?", "|", b)' "$1" 2>"$tmp/err"
}
pre_avx=" unknown katmai coppermine northwood prescott banias atom core2 penryn dunnington nehalem athlon opteron opteron_sse3 barcelona nano bobcat "
kernel="$(blas_kernel "$tmp/hw.h5")"; core="$(tr 'A-Z' 'a-z' <<<"${kernel%% |*}")"
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then ok "blas: no AVX2 and FMA here: $kernel"
elif [[ "$pre_avx" == *" $core "* ]] || [ "$core" = "?" ]; then bad "blas: a kernel without AVX on a CPU with AVX2: $kernel"
else ok "blas: $kernel"; fi
printf 'nets = vgg-small\nimage = 32\nplans = layer\n' >"$tmp/blas.spec"
OPENBLAS_CORETYPE=Prescott "$lrcnn" sweep "$tmp/blas.spec" -o "$tmp/blas.h5" --quiet >/dev/null 2>"$tmp/err"
kernel="$(blas_kernel "$tmp/blas.h5")"
[[ "$kernel" == "Prescott | "*"(OPENBLAS_CORETYPE)" ]] && ok "blas: the user's OPENBLAS_CORETYPE stands: $kernel" ||
  bad "blas: OPENBLAS_CORETYPE=Prescott gave $kernel"
"$lrcnn" sim --net unet-small --image 48x24 --plan 2ps:2 >"$tmp/out" 2>"$tmp/err"
if grep -q "unet-small @ 48x24" "$tmp/out"; then ok "sim --image 48x24"; else bad "sim --image 48x24"; fi
for c in sim train validate sweep merge plan calibrate export demo reproduce import pipe; do expect_ok "lrcnn $c --help" -- "$c" --help; done
# import runs the importer with Debian's Python whatever PATH holds: a refusal is its one line, exit 2
PATH="/nonexistent:$PATH" expect_fail "import: not a torchvision model" "'nosuch' is not a torchvision model" -- import torchvision:nosuch
expect_ok "sim vgg16 2ps:6" -- sim --net vgg16 --batch 8 --image 224 --plan 2ps:6
for want in "replay@peak" "closed@peak" "boundaries" "peak (device)" "FLOPs"; do
  grep -qF "$want" "$tmp/out" && ok "sim breakdown shows '$want'" || bad "sim breakdown lacks '$want'"
done
expect_ok "sim plan list" -- sim --net resnet50 --plan layer,ckpt-sqrt,2ps:2..4,overl-h
[ "$(grep -cE '^  (layer|ckpt-sqrt|2ps:[234]|overl-h) ' "$tmp/out")" -eq 6 ] && ok "sim list: one row per plan (range expanded)" || bad "sim list rows"
expect_ok "plan --max-batch" -- plan --max-batch --budget 12GiB --net vgg16 --plan layer,2ps:4
grep -qE '^  2ps:4 +[0-9]+ ' "$tmp/out" && ok "plan prints a batch per plan" || bad "plan output"
expect_ok "plan --max-image" -- plan --max-image --budget 2GiB --net vgg-small --batch 4 --plan layer
# a plan that fits nowhere says what its smallest configuration needs; when none fits, one line and no table
expect_ok "plan --max-batch, one plan too large" -- plan --max-batch --budget 1.62GiB --net vgg16 --plan layer,2ps:4
grep -qE '^  layer +none +- +needs 1\.[0-9]+ GiB at batch 1$' "$tmp/out" && ok "plan: a 'none' row says what batch 1 needs" || bad "plan none row: $(cat "$tmp/out")"
expect_fail "plan --max-batch, no plan fits" "the smallest footprint is 1.59 GiB (2ps:4 at batch 1)" -- plan --max-batch --budget 10MiB --net vgg16 --plan layer,2ps:4
[ -s "$tmp/out" ] && bad "plan printed on stdout before failing: $(head -1 "$tmp/out")" || ok "... and nothing on stdout"
expect_fail "plan (the planner), nothing fits" "the smallest footprint found is" -- plan --budget 10MiB --net vgg16
[ -s "$tmp/out" ] && bad "plan printed on stdout before failing: $(head -1 "$tmp/out")" || ok "... and nothing on stdout"
# the planner's time model: the project's calibrated CPU profile unless --profile or --device names one
expect_ok "plan, default time model" -- plan --budget 3MiB --net vgg-small --batch 4
grep -q "calibrated on the cpu backend" "$tmp/out" && grep -q "(the default profile:" "$tmp/out" && ok "... the committed profile, said so" || bad "plan default profile: $(sed -n 2,3p "$tmp/out")"
expect_ok "plan --device cpu" -- plan --budget 3MiB --net vgg-small --batch 4 --device cpu
grep -q "cpu roofline" "$tmp/out" && ! grep -q "default profile" "$tmp/out" && ok "... the roofline" || bad "plan --device cpu: $(sed -n 2p "$tmp/out")"
# --explain: the answer layer by layer, its rows adding up to the plan's time
expect_ok "plan --explain" -- plan --budget 3MiB --net vgg-small --batch 4 --explain --device cpu
"$python" - "$tmp/out" <<'PY' && ok "... a row per layer, the total the plan's time" || bad "plan --explain table"
import re, sys
t = open(sys.argv[1]).read()
want = float(re.search(r"^  time +([0-9.]+) ms per iteration", t, re.M).group(1))
rows = re.findall(r"^  (\S+) +(layer|ckpt|offload\(\w+\)|rows\(\w+,\d+\)) .* ([0-9.]+) +([0-9.]+)$", t, re.M)
total = float(re.search(r"^  all \(\+ load, update\) .* ([0-9.]+) +[0-9.]+$", t, re.M).group(1))
sys.exit(0 if len(rows) >= 10 and abs(total - want) <= 0.05 + 0.01 * want else 1)  # the time is printed to 0.1 ms
PY
expect_fail "plan --explain with --max-batch" "--explain applies to the planner" -- plan --max-batch --budget 3MiB --net vgg-small --explain

# --- pipe: pipelined model parallelism ------------------------------------------------------------
expect_ok "pipe 1f1b" -- pipe --net resnet-small --devices 3 --micro-batches 4 --batch 8
[ "$(grep -cE '^  [0-2] ' "$tmp/out")" -eq 3 ] && grep -qE "^  iteration .*bubble" "$tmp/out" && ok "... a row per device, the iteration and its bubble" || bad "pipe table: $(head -8 "$tmp/out")"
expect_ok "pipe interleaved under a plan" -- pipe --net vgg-small --devices 2 --micro-batches 4 --batch 8 --schedule interleaved --chunks 2 --plan ckpt-sqrt --link pcie4
expect_fail "pipe interleaved, micro-batches not a multiple of devices" "a multiple of the devices" -- pipe --net vgg-small --devices 2 --micro-batches 3 --batch 6 --schedule interleaved --chunks 2
expect_fail "pipe batch not a multiple" "is not a multiple of --micro-batches" -- pipe --net vgg-small --devices 2 --micro-batches 3 --batch 8
expect_fail "pipe more stages than clean cuts" "too few for" -- pipe --net vgg-small --devices 64 --micro-batches 64 --batch 64
expect_fail "pipe unknown schedule" "--schedule zigzag" -- pipe --net vgg-small --devices 2 --micro-batches 2 --schedule zigzag
expect_fail "pipe bad link" "--link fast" -- pipe --net vgg-small --devices 2 --micro-batches 2 --link fast
expect_ok "pipe --budget: the split under a budget" -- pipe --net resnet-small --devices 3 --micro-batches 4 --batch 8 --budget 3MiB
"$python" - "$tmp/out" <<'PY' && ok "... every device's peak within it" || bad "pipe --budget peaks: $(grep -E '^  [0-2] ' "$tmp/out")"
import re, sys
u = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
peaks = [float(a) * u[b] for a, b in re.findall(r"^  [0-2] .* ([0-9.]+) (B|KiB|MiB|GiB)$", open(sys.argv[1]).read(), re.M)]
sys.exit(0 if len(peaks) == 3 and max(peaks) <= 3 * 2**20 else 1)
PY
expect_fail "pipe --budget nothing fits" "the least any needs is" -- pipe --net resnet-small --devices 3 --micro-batches 4 --batch 8 --budget 10KiB
expect_fail "pipe --budget interleaved" "not interleaved" -- pipe --net vgg-small --devices 2 --micro-batches 4 --batch 8 --schedule interleaved --chunks 2 --budget 1GiB
expect_fail "pipe --budget abc" "--budget abc" -- pipe --net vgg-small --devices 2 --micro-batches 2 --budget abc

# --- ckpt-opt[:B]: optimal checkpointing, a plan the planner finds ----------------------------------
expect_ok "sim ckpt-opt at budgets" -- sim --net resnet50 --batch 32 --plan 'ckpt-opt:70%,ckpt-opt:85%,ckpt-opt:2.2GiB,ckpt-opt:ckpt-sqrt,ckpt-opt,ckpt-sqrt,layer' -o "$tmp/opt.h5"
if "$python" - "$tmp/opt.h5" >"$tmp/err" 2>&1 <<'PY'
import sys, h5py
runs = {g.attrs["plan"]: g for g in h5py.File(sys.argv[1])["runs"].values()}
foot = {k: int(g["prediction/arena"].attrs["size"]) + int(g["prediction/arena"].attrs["apart"]) for k, g in runs.items()}
time = {k: float(g.attrs["time_us"]) for k, g in runs.items()}
budget = {"ckpt-opt:70%": 0.70 * foot["layer"], "ckpt-opt:85%": 0.85 * foot["layer"], "ckpt-opt:2.2GiB": 2.2 * 2**30,
          "ckpt-opt:ckpt-sqrt": foot["ckpt-sqrt"]}
for k, b in budget.items():
    assert foot[k] <= b, (k, foot[k], b)  # fits its budget
    for pre in ("ckpt-sqrt", "layer"):  # never slower than a checkpointing preset that fits
        assert foot[pre] > b or time[k] <= time[pre] * (1 + 1e-9), (k, pre, time[k], time[pre])
assert foot["ckpt-opt"] <= foot["ckpt-sqrt"], (foot["ckpt-opt"], foot["ckpt-sqrt"])  # the smallest footprint
for k in list(budget) + ["ckpt-opt"]:
    g = runs[k]
    assert g.attrs["plan_preset"] == "ckpt-opt" and "ckpt@" in g.attrs["plan_resolved"], dict(g.attrs)
PY
then ok "ckpt-opt:B (bytes, share, a plan's footprint) fits B, is no slower than a preset that fits, ckpt-opt no larger than ckpt-sqrt; the plan found recorded"; else bad "ckpt-opt: $(tail -1 "$tmp/err")"; fi
expect_fail "ckpt-opt:B below what checkpointing reaches" "no checkpointing plan fits 10.00 MiB" -- sim --net vgg16 --plan ckpt-opt:10MiB -o "$tmp/x.h5"; no_file "$tmp/x.h5" "ckpt-opt:10MiB"
expect_fail "ckpt-opt:B, B neither bytes nor a plan" "plan 'ckpt-opt:lots': unknown plan 'lots'" -- sim --net vgg16 --plan ckpt-opt:lots
expect_fail "ckpt-opt:ckpt-opt" "ckpt-opt:B takes bytes" -- sim --net vgg16 --plan ckpt-opt:ckpt-opt
expect_fail "ckpt-opt:0%" "above 0 and at most 1000%" -- sim --net vgg16 --plan ckpt-opt:0%
expect_ok "train ckpt-opt (the engine runs the plan found)" -- train --net vgg-small --batch 4 --iters 1 --plan ckpt-opt -o "$tmp/opt_train.h5"
"$python" -c "import h5py,sys; r=h5py.File('$tmp/opt_train.h5')['runs/00000']; sys.exit(0 if r['measured'].attrs['peak'] == r['prediction/replay'].attrs['peak'] and 'ckpt@' in r.attrs['plan_resolved'] else 1)" && ok "... measured peak = replay of the plan found" || bad "ckpt-opt train: measured peak != replay"
printf 'name = opt\nnets = vgg-small\nbatch = 1, 64\nplans = layer, ckpt-opt:3MiB\noutput = %s\n' "$tmp/opt_sweep.h5" >"$tmp/opt.spec"
expect_ok "sweep: ckpt-opt:B where nothing fits is an infeasible cell" -- sweep "$tmp/opt.spec"
"$python" -c "import h5py,sys; f=h5py.File('$tmp/opt_sweep.h5'); p=[g.attrs['plan'] for g in f['runs'].values()]; sys.exit(0 if p.count('ckpt-opt:3MiB') == 1 and len(p) == 3 else 1)" && ok "... the cell that fits is written, the other not" || bad "ckpt-opt sweep cells"

# --- bad input ----------------------------------------------------------------------------------
o="$tmp/out.h5"
expect_fail "unknown preset" "unknown plan 'nosuch'" -- sim --net vgg16 --plan nosuch -o "$o"; no_file "$o" "unknown preset"
expect_fail "more bands than rows" "at most 28 bands" -- sim --net vgg16 --plan 2ps:100 -o "$o"; no_file "$o" "more bands than rows"
expect_fail "2PS over an fc" "needs whole feature maps" -- sim --net vgg16 --plan 'rows(2ps,2)@conv1_1..fc6' -o "$o"
expect_fail "2PS fp != bp" "fp (2) and bp (4) must be equal" -- sim --net vgg16 --plan 'rows(2ps,fp=2,bp=4)@conv1_1..pool2'
expect_fail "segment starting at an in-place relu" "overwrites 'conv1_1' in place" -- sim --net vgg16 --plan 'rows(2ps,3)@relu1_1..pool2'
expect_fail "segment inside a block" "more than one tensor crosses" -- sim --net resnet50 --plan 'ckpt@layer1.0.conv2..layer1.0.add'
expect_fail "segment ending before an in-place relu" "the next layer overwrites its output in place" -- sim --net vgg16 --plan 'rows(2ps,2)@conv1_1..conv1_1'
expect_fail "segment starting at an in-place relu" "which overwrites 'conv1_2' in place" -- sim --net vgg16 --plan 'ckpt@conv1_1..relu1_1; ckpt@relu1_2..pool1'
expect_ok "bn=train in a row segment (exact: statistics passes)" -- sim --net resnet-small --plan 2ps:4 --bn train
[ ! -s "$tmp/err" ] && ok "bn=train: no warning" || bad "bn=train: stderr not empty"
expect_ok "bn=exact is bn=train" -- sim --net resnet-small --plan 2ps:4 --bn exact
grep -q "bn=train" "$tmp/out" && ok "bn=exact resolves to train" || bad "bn=exact does not resolve to train"
expect_ok "default bn in a row segment" -- sim --net resnet-small --plan 2ps:4
grep -q "bn=train" "$tmp/out" && [ ! -s "$tmp/err" ] && ok "bn defaults to train (exact), silently" || bad "default bn is not train"
expect_ok "bn=per-band" -- sim --net resnet-small --plan 2ps:4,overl:4 --bn per-band -o "$tmp/pb.h5"
[ "$(grep -c "warning: bn=per-band" "$tmp/err")" -eq 1 ] && ok "bn=per-band: one warning line" || bad "bn=per-band warning: $(cat "$tmp/err")"
"$python" -c "import h5py,sys; r=h5py.File('$tmp/pb.h5')['runs/00000']; sys.exit(0 if r.attrs['bn']=='per-band' and r.attrs['bn_exact']==0 else 1)" && ok "per-band recorded: bn, bn_exact = 0" || bad "per-band not recorded in the file"
# plan modifiers (sim/plan/enc.h): how kept maps are stored
expect_ok "sim with encodings" -- sim --net vgg16 --batch 8 --plan 'ckpt-sqrt+gist+zfp:rate=8'
grep -q "+gist +zfp:rate=8" "$tmp/out" && grep -q "n/a" "$tmp/out" && ok "modifiers resolved; closed form n/a" || bad "modifier output"
for m in 'foo|unknown modifier' 'dpr:fp12|dpr:fp12 is not one of fp16 bf16 fp8' 'zfp:acc=0|acc=0 is not a number in (0, 1]' \
         'zfp:acc=nan|acc=nan is not a number' 'zfp:rate=64|rate=64 is not a number in [1, 32]' 'zfp|zfp needs rate=R' \
         'zfp:rate=8:acc=1e-3|exactly one of rate=R' 'dpr+zfp:rate=8|a plan takes one lossy encoding' 'gist+gist|+gist given twice' \
         'gist:fast|gist takes binarize, sparse' 'zfp:rate=8:ratio=3|ratio= predicts acc= sizes' '|an empty modifier' \
         'zfp:rate=8:adapt=0.1|adapt= and every= adapt an error bound' 'zfp:acc=1e-3:every=5|every=W says how often' \
         'zfp:acc=1e-3:adapt=0|adapt=0 is not a number in (0, 1]' 'zfp:acc=1e-3:adapt=0.1:every=2.5|not a whole number' \
         'zfp:acc=1e-3:adapt=inf|adapt=inf is not a number' 'migrate:params|expected weights, grads or optim' \
         'migrate:|+migrate:: expected weights' 'migrate:grads:grads|+migrate names grads twice' 'migrate+migrate|+migrate given twice' \
         'zfp:acc=1e-3:adapt=0.1+migrate|which +migrate splits'; do
  mod="${m%%|*}"; want="${m#*|}"
  expect_fail "modifier '+$mod'" "$want" -- sim --net vgg16 --plan "layer+$mod" -o "$o"; no_file "$o" "modifier '+$mod'"
done
# a plan past 255 characters (the planner writes such plans) is read whole
long=""; for l in conv1_1 conv1_2 conv2_1 conv2_2 conv3_1 conv3_2 conv3_3 conv4_1 conv4_2 conv4_3 conv5_1 conv5_2 conv5_3; do
  long="$long${long:+; }layer@$l..relu${l#conv}"; done
expect_ok "a ${#long}-character plan" -- sim --net vgg16 --plan "$long; ckpt@pool5..fc8"
grep -q "ckpt@pool5..fc8" "$tmp/out" && ok "long plan read whole" || bad "long plan truncated: $(head -2 "$tmp/out")"
expect_ok "sim with migration" -- sim --net vgg-small --plan 'ckpt-sqrt+gist+migrate:optim:grads'
grep -q "+gist +migrate:grads:optim" "$tmp/out" && grep -q "n/a" "$tmp/out" && ok "migration resolved; closed form n/a" || bad "migration output"
expect_fail "modifier on a plan keeping nothing it encodes" "+gist encodes nothing here" -- sim --net resnet-small --plan "overl:3+gist bn=train-recompute" -o "$o"
no_file "$o" "modifier encoding nothing"
printf 'nets = resnet-small\nplans = layer, overl:3+gist bn=train-recompute\n' >"$tmp/enc.spec"
expect_fail "spec: modifier encoding nothing" "encodes nothing" -- sweep "$tmp/enc.spec" -o "$o"; no_file "$o" "spec: modifier encoding nothing"
expect_ok "validate with encodings" -- validate --net vgg-small --batch 2 --plan layer,layer+gist,layer+dpr:bf16 -o "$tmp/enc.h5"
"$python" -c "import h5py,sys; f=h5py.File('$tmp/enc.h5'); r=f['runs/00001']; sys.exit(0 if 'closed' not in r['prediction'] and 'replay' in r['prediction'] else 1)" && ok "encoded run: replay written, closed absent" || bad "encoded run's predictions in the file"
expect_ok "export of encoded runs" -- export "$tmp/enc.h5" -o "$tmp/encx"
grep -qP "^00001\t.*\tlayer\+gist\t" "$tmp/encx/runs.tsv" && ok "export: encoded run listed, closed cells empty" || bad "export of encoded runs: $(head -3 "$tmp/encx/runs.tsv")"
# calibration: the measured encodings of one run predict another's data-sized encodings; the same
# configuration calibrated by itself is predicted to the byte
expect_ok "validate writes measured encodings" -- validate --net vgg-small --batch 4 --plan 'layer+gist+zfp:acc=1e-3' -o "$tmp/cal.h5"
grep -qE "data-sized encodings, [0-9]+ maps: predicted .*density .* measured.*zfp ratio" "$tmp/out" && ok "validate: data-sized bytes and factors, predicted vs measured" || bad "validate's encoded line: $(grep data-sized "$tmp/out")"
expect_ok "validate --calibrate (itself)" -- validate --net vgg-small --batch 4 --plan 'layer+gist+zfp:acc=1e-3' --calibrate "$tmp/cal.h5" -o "$tmp/cal2.h5"
grep -qF "(calibrated): predicted" "$tmp/out" && grep -qF "(+0.0%)" "$tmp/out" && ok "calibrated by itself: encoded bytes +0.0%" || bad "self-calibration: $(grep data-sized "$tmp/out")"
"$python" -c "
import h5py, sys
t = h5py.File('$tmp/cal2.h5')['runs/00001/measured/encoded'][()]
sized = [r for r in t if r['encoding'] in (b'sparse', b'zfp-acc')]
sys.exit(0 if sized and all(r['predicted_bytes'] == r['measured_bytes'] and r['calibrated'] for r in t if r in sized) else 1)" \
  && ok "calibrated by itself: every data-sized map predicted to the byte (measured/encoded)" || bad "measured/encoded after self-calibration"
if "$python" "$src/tests/check_schema.py" "$tmp/cal2.h5" >"$tmp/schema" 2>&1; then ok "calibrated file validates against results/SCHEMA.md"; else bad "calibrated schema: $(tail -1 "$tmp/schema")"; fi
expect_ok "sim --calibrate at another batch" -- sim --net vgg-small --batch 64 --plan 'layer+gist+zfp:acc=1e-3' --calibrate "$tmp/cal.h5"
grep -qF "maps at densities/ratios measured in" "$tmp/out" && ok "sim names its calibration" || bad "sim calibration line"
expect_fail "calibrate: missing file" "nosuch.h5: No such file" -- sim --net vgg-small --calibrate "$tmp/nosuch.h5"
"$lrcnn" sim --net vgg-small -o "$tmp/plain.h5" >/dev/null 2>&1
expect_fail "calibrate: a file without encodings" "no measured densities or ratios" -- sim --net vgg-small --calibrate "$tmp/plain.h5"
"$python" -c "
import h5py, numpy as np
with h5py.File('$tmp/cal.h5') as f, h5py.File('$tmp/badcal.h5', 'w') as g:
    for k, v in f.attrs.items(): g.attrs[k] = v
    g.create_dataset('runs/00000/measured/encoded', data=np.zeros(3, dtype=[('layer', 'i4'), ('encoding', 'i4')]))"
expect_fail "calibrate: wrong types in the encoded table" "no layer field of the right type" -- validate --net vgg-small --calibrate "$tmp/badcal.h5" -o "$o"
no_file "$o" "calibrate: wrong types"
printf 'nets = vgg-small\nplans = layer+gist\ncalibrate = %s\n' "$tmp/nosuch.h5" >"$tmp/cal.spec"
expect_fail "spec: calibrate names a missing file" "nosuch.h5" -- sweep "$tmp/cal.spec" -o "$o"; no_file "$o" "spec: missing calibration"
expect_fail "unknown net" "unknown net 'nosuchnet'" -- sim --net nosuchnet
expect_fail "authors' preset on another net" "lacks those layers" -- sim --net kernels --plan authors-2ps
expect_ok "authors' presets" -- sim --net vgg16 --plan authors-2ps,authors-overl,authors-2ps-h,authors-overl-h
printf 'input data c=3 h=32 w=32\nconv c1 c=8 k=3 kernel=3\ngap g\nfc f c=2\nloss l\n' >"$tmp/bad.net"
expect_fail "malformed net file" "bad.net:2: unknown key 'kernel'" -- sim --net "$tmp/bad.net" -o "$o"; no_file "$o" "malformed net"
printf 'input data c=3 h=32 w=32\nrelu a in=b\nrelu b in=a\nadd c in=data,b\ngap g\nfc f c=2\nloss l\n' >"$tmp/cycle.net"
expect_fail "cyclic net file" "cycle through layer" -- sim --net "$tmp/cycle.net"
expect_fail "image too small" "output would be empty" -- sim --net vgg16 --image 16
expect_fail "bad --batch" "--batch zero" -- sim --net vgg16 --batch zero
expect_fail "missing value" "--plan needs a value" -- sim --net vgg16 --plan
expect_fail "unknown option" "unknown argument '--frobnicate'" -- sim --net vgg16 --frobnicate
expect_fail "unknown command" "unknown command 'frob'" -- frob
expect_fail "bad budget" "--budget lots" -- plan --max-batch --net vgg16 --budget lots
expect_fail "plan --max-image: unknown plan" "unknown plan 'nosuch'" -- plan --max-image --budget 2GiB --net vgg-small --plan nosuch
expect_ok "plan --max-image: a band count the starting size cannot take" -- plan --max-image --budget 1GiB --net vgg-small --batch 2 --plan 2ps:8
grep -qE '^  2ps:8 +[0-9]+ ' "$tmp/out" && ok "plan --max-image finds 2ps:8 a size" || bad "plan --max-image 2ps:8: $(cat "$tmp/out")"
many=$(printf 'layer,%.0s' $(seq 70)); many=${many%,}
expect_ok "plan: 70 plans" -- plan --max-batch --budget 1GiB --net vgg-small --plan "$many"
[ "$(grep -c '^  layer ' "$tmp/out")" -eq 70 ] && ok "plan: every one of 70 plans answered" || bad "plan dropped plans: $(grep -c '^  layer ' "$tmp/out") of 70"
expect_fail "rows(): cuts= twice" "says again" -- sim --net kernels --plan 'rows(2ps,2,cuts=3,cuts=4)@conv1..relu3'
expect_fail "rows(): a band count twice" "says again" -- sim --net kernels --plan 'rows(overl,fp=2,3)@conv1..relu3'
expect_fail "--seed overflow" "below 2^63" -- train --net vgg-small --seed 99999999999999999999999 -o "$o"; no_file "$o" "--seed overflow"
expect_fail "unreadable spec" "cannot open spec" -- sweep "$tmp/nope.spec"
printf 'nets = vgg-small\nplans = layer\nbatchsize = 4\n' >"$tmp/badkey.spec"
expect_fail "spec unknown key" "badkey.spec:3: unknown key 'batchsize'" -- sweep "$tmp/badkey.spec" -o "$o"; no_file "$o" "spec unknown key"
printf 'nets = vgg-small\nimage = 32\nplans = layer, 2ps:99\n' >"$tmp/badplan.spec"
expect_fail "spec impossible plan" "badplan.spec:3: vgg-small at 32x32: plan '2ps:99'" -- sweep "$tmp/badplan.spec" -o "$o"; no_file "$o" "spec impossible plan"
# spec keys: a bad value or combination names the file and the line, and nothing is written
spec_fail() { # LABEL WANT LINES...: a spec of vgg-small plans=layer plus LINES must fail with WANT
  local label="$1" want="$2"; shift 2
  printf 'nets = vgg-small\nplans = layer\n' >"$tmp/k.spec"; printf '%s\n' "$@" >>"$tmp/k.spec"
  expect_fail "spec $label" "$want" -- sweep "$tmp/k.spec" -o "$o"; no_file "$o" "spec $label"
}
spec_fail "bad run" "k.spec:3: run = fly: expected sim, validate or train" "run = fly"
spec_fail "unknown figure" "k.spec:3: figure 'nosuch': there is no plots/nosuch.py" "figures = bands, nosuch"
spec_fail "figure name with a path" "k.spec:3: figure '../x'" "figures = ../x"
spec_fail "bad seed" "k.spec:3: seed = -1" "seed = -1"
spec_fail "bad reproduce" "k.spec:3: reproduce = maybe: expected on or off" "reproduce = maybe"
spec_fail "key set twice" "k.spec:4: 'run' is already set on line 3" "run = train" "run = sim"
spec_fail "train without iterations" "k.spec:4: run = train needs an iteration count" "run = train" "measure = off"
spec_fail "search with train" "k.spec:3: search applies to run = sim" "search = batch" "budgets = 1GiB" "run = train"
spec_fail "bad backend" "k.spec:3: backend = tpu: expected cpu or cuda" "backend = tpu"
spec_fail "cuda with run = sim" "k.spec:3: backend = cuda applies to run = validate or train" "backend = cuda"
spec_fail "timeline with validate" "k.spec:4: timeline = on applies to run = sim" "run = validate" "timeline = on"
spec_fail "device with train" "k.spec:4: device = h100: run = train times its plans on the engine" "run = train" "device = h100"
printf 'nets = vgg-small\nimage = 32\nbatch = 2\nrun = train\nmeasure = 2\nplans = layer, 2ps:99\n' >"$tmp/badtrain.spec"
expect_fail "train spec, impossible plan" "badtrain.spec:6: vgg-small at 32x32: plan '2ps:99'" -- sweep "$tmp/badtrain.spec" -o "$o"; no_file "$o" "train spec, impossible plan"
expect_fail "export missing file" "nope.h5" -- export "$tmp/nope.h5"
echo "not hdf5" >"$tmp/fake.h5"
expect_fail "export non-HDF5 file" "fake.h5" -- export "$tmp/fake.h5"

# --- sweep -> HDF5 -> schema, export round trip, no silent overwrite -------------------------------
printf 'name = small\nnets = vgg-small, resnet-small\nimage = 32\nbatch = 2, 4\nplans = layer, ckpt-sqrt, vdnn-conv, 2ps:2..3, overl:2, overl-h\noptimizer = sgd, adam\n' >"$tmp/small.spec"
expect_ok "sweep small spec" -- sweep "$tmp/small.spec" -o "$tmp/small.h5" --quiet
[ -f "$tmp/small.h5" ] && ! compgen -G "$tmp/small.h5.*.tmp" >/dev/null && ok "sweep wrote the file, no temporary left" || bad "sweep output file"
if "$python" "$src/tests/check_schema.py" "$tmp/small.h5" >"$tmp/schema" 2>&1; then ok "sweep file validates against results/SCHEMA.md"; else bad "schema: $(tail -1 "$tmp/schema")"; fi
before=$(md5sum <"$tmp/small.h5")
expect_fail "no silent overwrite" "exists" -- sweep "$tmp/small.spec" -o "$tmp/small.h5"
[ "$(md5sum <"$tmp/small.h5")" = "$before" ] && ok "existing result kept" || bad "existing result changed"
expect_ok "overwrite with --force" -- sweep "$tmp/small.spec" -o "$tmp/small.h5" --force --quiet
mkdir -p "$tmp/tsv"
expect_ok "export to TSV" -- export "$tmp/small.h5" -o "$tmp/tsv"
rows=$(($(wc -l <"$tmp/tsv/runs.tsv") - 1))
[ "$rows" -eq 56 ] && ok "runs.tsv has one row per run (56)" || bad "runs.tsv has $rows rows, want 56"
if "$python" - "$tmp/small.h5" "$tmp/tsv/runs.tsv" >"$tmp/rt" 2>&1 <<'PY'
import csv, sys, h5py
f = h5py.File(sys.argv[1], "r")
rows = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
cats = [c.decode() if isinstance(c, bytes) else c for c in f["categories"][()]]
for row in rows:
    g = f["runs"][row["run"]]
    for model in ("replay", "closed"):
        if model not in g["prediction"]:  # a model the closed form does not cover: empty cells
            assert all(row[f"{model}_{c}_bytes"] == "" for c in cats), (row["run"], model)
            continue
        at = g["prediction"][model]["at_peak"][()]
        for i, c in enumerate(cats):
            assert int(row[f"{model}_{c}_bytes"]) == int(at[i]), (row["run"], model, c)
    assert float(row["flops"]) == float(g["flops"][()]) if "flops" in g else True
print("round trip ok", len(rows))
PY
then ok "export round-trips every category of both models"; else bad "export round trip: $(tail -2 "$tmp/rt")"; fi
expect_ok "export --csv" -- export "$tmp/small.h5" -o "$tmp/csv" --csv
"$python" -c "
import csv, sys
rows = list(csv.DictReader(open('$tmp/csv/runs.csv')))
tsv = list(csv.DictReader(open('$tmp/tsv/runs.tsv'), delimiter='\t'))
assert rows == tsv and len(rows) == 56 and rows[0]['kind'] == 'sim', (len(rows), rows[0])
" 2>"$tmp/err" && ok "runs.csv holds what runs.tsv holds (csv module)" || bad "export --csv: $(tail -1 "$tmp/err")"

# --- specs with run = validate and run = train: one file of engine runs, as the commands write ------
printf 'run = validate\nnets = resnet-small\nbatch = 2\noptimizer = sgd\nbn = frozen\nplans = 2ps:2, overl:2 bn=per-band\nmeasure = 1\n' >"$tmp/val.spec"
expect_ok "sweep run = validate" -- sweep "$tmp/val.spec" -o "$tmp/val.h5"
[ "$(grep -cE '^  (layer|2ps:2|overl:2 bn=per-band) .*\+0\.000%' "$tmp/out")" -eq 3 ] && ok "run = validate: layer first, every plan measured = replay" || bad "run = validate table"
printf 'run = train\nnets = vgg-small, resnet-small\nbatch = 2\nplans = layer, 2ps:2\nmeasure = 3\nseed = 7\nfigures = convergence\n' >"$tmp/tr.spec"
expect_ok "sweep run = train" -- sweep "$tmp/tr.spec" -o "$tmp/tr.h5" --quiet
for f in validate:val train:tr; do
  if "$python" "$src/tests/check_schema.py" "$tmp/${f#*:}.h5" >"$tmp/schema" 2>&1; then ok "run = ${f%:*} file validates against results/SCHEMA.md"; else bad "run = ${f%:*} schema: $(tail -1 "$tmp/schema")"; fi
done
if "$python" - "$tmp/val.h5" "$tmp/tr.h5" >"$tmp/kinds" 2>&1 <<'PY'
import sys, h5py
v, t = (h5py.File(p, "r")["runs"] for p in sys.argv[1:3])
assert [g.attrs["plan"] for g in v.values()] == ["layer", "2ps:2", "overl:2 bn=per-band"], [g.attrs["plan"] for g in v.values()]
assert [g.attrs["bn"] for g in v.values()] == ["frozen", "frozen", "per-band"]
assert all(g.attrs["kind"] == "validate" and "grad_deviation" in g["measured"].attrs for g in v.values())
assert [(g.attrs["net"], g.attrs["plan"]) for g in t.values()] == [(n, p) for n in ("vgg-small", "resnet-small") for p in ("layer", "2ps:2")]
assert all(g.attrs["kind"] == "train" and g["measured/loss"].shape == (3,) and g["measured"].attrs["seed"] == 7 for g in t.values())
print("ok")
PY
then ok "run = validate / train: one run per plan, layer first, kinds, bn per item, iterations and seed"; else bad "spec engine runs: $(tail -2 "$tmp/kinds")"; fi
expect_ok "reproduce --list" -- reproduce --list
grep -qE "validate_vgg16.spec +run = validate" "$tmp/out" && grep -qF "convergence  <- 'results/convergence_resnet.h5' 'results/convergence_vgg.h5'" "$tmp/out" \
  && ! grep -q "demo.spec" "$tmp/out" && ok "reproduce --list: specs in file-name order, figures from the specs naming them, no demo" || bad "reproduce --list: $(cat "$tmp/out")"
! grep -q "gpu_vgg16_b8.spec" "$tmp/out" && ok "reproduce --list: no GPU spec without --backend cuda" || bad "reproduce --list lists a GPU spec"
expect_ok "reproduce --backend cuda --list" -- reproduce --backend cuda --list
grep -qF "gpu_validation <- 'results/gpu/highres.h5' 'results/gpu/resnet50_b32.h5' 'results/gpu/resnet50_b8.h5' 'results/gpu/shipped.h5' 'results/gpu/vgg16_b32.h5' 'results/gpu/vgg16_b8.h5'" "$tmp/out" && ! grep -q "bands.spec" "$tmp/out" \
  && ok "reproduce --backend cuda --list: the GPU specs and their figure only" || bad "reproduce --backend cuda --list: $(cat "$tmp/out")"
expect_fail "reproduce: unknown backend" "--backend tpu: expected cpu or cuda" -- reproduce --backend tpu

# --- train: measured beside predicted, determinism, bad input ------------------------------------
expect_ok "train vgg-small" -- train --net vgg-small --batch 4 --iters 3 --plan 2ps:2 -o "$tmp/t1.h5"
grep -qE "prediction error vs measured: replay \+0\.000%" "$tmp/out" && ok "train: measured peak = replay" || bad "train: measured != replay"
grep -q "RSS high-water" "$tmp/out" && ok "train reports the RSS high-water mark" || bad "train lacks RSS"
expect_ok "train again, same seed" -- train --net vgg-small --batch 4 --iters 3 --plan 2ps:2 -o "$tmp/t2.h5"
if "$python" - "$tmp/t1.h5" "$tmp/t2.h5" >"$tmp/det" 2>&1 <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["runs/00000/measured"] for p in sys.argv[1:3])
assert np.array_equal(a["loss"][()], b["loss"][()]), "losses differ"
assert np.array_equal(a["timeline"][()], b["timeline"][()]), "allocation timelines differ"
assert len(a["timeline"][()]) > 10
print("identical", a["loss"][()])
PY
then ok "determinism: identical losses and allocation timelines"; else bad "determinism: $(tail -1 "$tmp/det")"; fi
if "$python" "$src/tests/check_schema.py" "$tmp/t1.h5" >"$tmp/schema" 2>&1; then ok "train file validates against results/SCHEMA.md"; else bad "train schema: $(tail -1 "$tmp/schema")"; fi
expect_ok "train --dump" -- train --net vgg-small --batch 2 --iters 1 --dump "$tmp/d.h5"
expect_ok "train --init-weights from a dump" -- train --net vgg-small --batch 2 --iters 1 --init-weights "$tmp/d.h5"
expect_fail "weights of another net" "missing dataset /params/conv1/weight" -- train --net kernels --iters 1 --init-weights "$tmp/d.h5" -o "$o"; no_file "$o" "weights of another net"
"$python" -c "import h5py,numpy as np; f=h5py.File('$tmp/shape.h5','w'); f['params/conv1_1/weight']=np.zeros((8,3,5,5),dtype=np.float32)"
expect_fail "weights of the wrong shape" "has shape (8, 3, 5, 5), the net needs (8, 3, 3, 3)" -- train --net vgg-small --iters 1 --init-weights "$tmp/shape.h5"
"$python" -c "import h5py,numpy as np; f=h5py.File('$tmp/int.h5','w'); f['params/conv1_1/weight']=np.zeros((8,3,3,3),dtype=np.int64)"
expect_fail "weights of the wrong type" "not float32" -- train --net vgg-small --iters 1 --init-weights "$tmp/int.h5"
expect_fail "weights file missing" "cannot open weights file" -- train --net vgg-small --iters 1 --init-weights "$tmp/none.h5"
expect_fail "missing image directory" "cannot open image directory" -- train --net vgg-small --iters 1 --data "$tmp/nodir" -o "$o"; no_file "$o" "missing image dir"
mkdir -p "$tmp/imgs/cat" "$tmp/imgs/dog"
printf 'P6\n4 4\n255\n' >"$tmp/imgs/cat/a.ppm"; head -c 48 /dev/urandom >>"$tmp/imgs/cat/a.ppm"
printf 'P6\n5 3\n255\n' >"$tmp/imgs/dog/b.ppm"; head -c 45 /dev/urandom >>"$tmp/imgs/dog/b.ppm"
expect_ok "train on an image directory" -- train --net vgg-small --batch 2 --iters 2 --data "$tmp/imgs"
echo "not an image" >"$tmp/imgs/dog/c.png"
expect_fail "unreadable image" "c.png: not a PNG or PPM image" -- train --net vgg-small --iters 1 --data "$tmp/imgs" -o "$o"; no_file "$o" "unreadable image"
expect_fail "train output exists" "exists; use --force" -- train --net vgg-small --iters 1 -o "$tmp/t1.h5"

# --- validate: predicted beside measured, gradients beside layer's ---------------------------------
expect_ok "validate" -- validate --net resnet-small --batch 4 --bn frozen --plan 2ps:2,overl-h,vdnn-conv -o "$tmp/v.h5"
[ "$(grep -cE '^  (layer|2ps:2|overl-h|vdnn-conv) .*\+0\.000%' "$tmp/out")" -eq 4 ] && ok "validate: layer first, every plan measured = replay" || bad "validate table"
if "$python" "$src/tests/check_schema.py" "$tmp/v.h5" >"$tmp/schema" 2>&1; then ok "validate file validates against results/SCHEMA.md"; else bad "validate schema: $(tail -1 "$tmp/schema")"; fi
# --threads (any command): the engine's thread count, in the header and the file with the command as typed
for n in 1 2; do
  rm -f "$tmp/t$n.h5"
  expect_ok "validate --threads $n" -- validate --net vgg-small --image 32 --batch 2 --iters 2 --plan 2ps:2 --threads $n -o "$tmp/t$n.h5"
  grep -qF ", $n thread" "$tmp/out" && grep -qF "(OMP_NUM_THREADS=$n)" "$tmp/out" && ok "... the header says $n thread(s) and why" || bad "validate --threads $n header: $(head -1 "$tmp/out")"
  "$python" -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
assert int(f.attrs['threads']) == $n, f.attrs['threads']
assert '--threads $n' in f.attrs['lrcnn_command'], f.attrs['lrcnn_command']
assert f.attrs['omp_wait_policy'], 'no wait policy'" "$tmp/t$n.h5" 2>"$tmp/err" && ok "... the file records threads $n and the command as typed" || bad "--threads $n file: $(tail -1 "$tmp/err")"
done
expect_fail "--threads 0" "--threads needs a count" -- validate --net vgg-small --threads 0 -o "$o"; no_file "$o" "--threads 0"
expect_fail "offload with a zero host budget" "offloads" -- validate --net vgg-small --plan vdnn-all --host-budget 0 -o "$o"; no_file "$o" "zero host budget"
expect_fail "train offload, zero host budget" "--host-budget is 0 B" -- train --net vgg-small --plan vdnn-conv --host-budget 0 -o "$o"; no_file "$o" "train zero host budget"
expect_ok "offload within a host budget" -- train --net vgg-small --plan vdnn-conv --iters 1 --host-budget 1GiB
expect_fail "validate: band count beyond the rows" "at most" -- validate --net vgg-small --plan 2ps:2..9 -o "$o"; no_file "$o" "validate bands"
expect_fail "unknown backend" "unknown backend 'tpu'" -- train --net vgg-small --backend tpu --iters 1
expect_fail "validate: unknown backend" "unknown backend 'tpu'" -- validate --net vgg-small --backend tpu
# cuda without a GPU (CI): one line saying why, nothing written; on a GPU machine it trains.
# On a GPU: the device's own view is written with CUPTI and without, as results/SCHEMA.md says.
if ! "$lrcnn" train --net vgg-small --backend cuda --iters 1 --batch 2 >/dev/null 2>"$tmp/err"; then
  expect_fail "cuda without a device" "--backend cuda:" -- train --net vgg-small --backend cuda --iters 1 -o "$tmp/cuda.h5"
  if [ -e "$tmp/cuda.h5" ]; then bad "cuda without a device wrote $tmp/cuda.h5"; fi
  expect_fail "--no-cupti is an option (the device is what is missing)" "--backend cuda:" -- train --net vgg-small --backend cuda --no-cupti --iters 1
  expect_fail "validate on cuda without a device" "--backend cuda:" -- validate --net vgg-small --backend cuda --plan layer,2ps:2 -o "$tmp/cuda.h5"
  expect_fail "the GPU campaign without a device" "lrcnn reproduce: --backend cuda: " -- reproduce --backend cuda
  spec_fail "a cuda spec without a device" "k.spec: backend = cuda: " "run = validate" "backend = cuda"
  if [ -e "$tmp/cuda.h5" ]; then bad "validate on cuda without a device wrote $tmp/cuda.h5"; fi
else
  expect_ok "validate on cuda" -- validate --net vgg-small --backend cuda --plan layer,2ps:2,vdnn-all -o "$tmp/cudav.h5"
  "$python" "$src/tests/check_schema.py" "$tmp/cudav.h5" >"$tmp/out" 2>&1 && ok "validate on cuda: schema" || bad "validate on cuda: $(tail -1 "$tmp/out")"
  for flags in "" --no-cupti; do
    expect_ok "cuda run ${flags:-with CUPTI}" -- train --net vgg-small --backend cuda $flags --iters 2 --batch 2 -o "$tmp/cuda$flags.h5"
    "$python" "$src/tests/check_schema.py" "$tmp/cuda$flags.h5" >"$tmp/out" 2>&1 && ok "cuda run ${flags:-with CUPTI}: schema" || bad "cuda run ${flags:-with CUPTI}: $(tail -1 "$tmp/out")"
  done
fi

# --- calibrate and the planner ---------------------------------------------------------------------
prof="$tmp/prof.h5"
expect_ok "calibrate vgg-small at two batches" -- calibrate --net vgg-small --batch 4,8 --iters 2 --check ckpt-sqrt -o "$prof"
grep -qE '^  vgg-small +4  ckpt-sqrt +[0-9.]+ ms +[0-9.]+ ms' "$tmp/out" && grep -qE '^  vgg-small +8  ckpt-sqrt +[0-9.]+ ms' "$tmp/out" \
  && ok "calibrate prints the held-out check at each batch" || bad "calibrate check lines"
"$python" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
s, c = f['profile/samples'][()], f['profile/checks'][()]
assert set(s['batch']) == {4, 8}, set(s['batch'])
assert sorted(int(b) for b in c[c['held_out'] == 1]['batch']) == [4, 8], c
assert len(c[c['held_out'] == 0]) == 10, len(c)" "$prof" 2>"$tmp/err" && ok "the profile holds samples and checks at both batches" || bad "two batches: $(tail -1 "$tmp/err")"
expect_fail "calibrate: a batch given twice" "4 given twice" -- calibrate --net vgg-small --batch 4,4 -o "$o"; no_file "$o" "batch twice"
expect_fail "calibrate: a batch not a number" "'x' is not an integer" -- calibrate --net vgg-small --batch 4,x -o "$o"; no_file "$o" "batch x"
if "$python" "$src/tests/check_schema.py" "$prof" >"$tmp/schema" 2>&1; then ok "profile validates against results/SCHEMA.md"; else bad "profile schema: $(tail -1 "$tmp/schema")"; fi
expect_ok "sim with a profile" -- sim --net vgg-small --batch 4 --plan layer,2ps:2 --profile "$prof"
grep -qF "calibrated on the cpu backend" "$tmp/out" && ok "sim names its time model" || bad "sim time source"
expect_fail "calibrate output exists" "exists; use --force" -- calibrate --net vgg-small -o "$prof"
expect_fail "calibrate without -o" "-o PROFILE.h5 is required" -- calibrate --net vgg-small
expect_fail "calibrate: a plan for no net" "applies to none of the nets" -- calibrate --net vgg-small,resnet-small --plan 2ps:100 -o "$o"; no_file "$o" "calibrate plan"
expect_fail "profile missing" "--profile: $tmp/nosuch.h5" -- sim --net vgg-small --profile "$tmp/nosuch.h5"
expect_ok "--device names a profile file" -- sim --net vgg-small --batch 4 --plan layer,2ps:2 --device "$prof"
grep -q "calibrated on the cpu backend" "$tmp/out" && ok "--device FILE: times from the profile" || bad "--device FILE: $(head -3 "$tmp/out")"
expect_fail "--device neither built in nor a file" "nor a device profile file" -- sim --net vgg-small --device nosuch
expect_fail "--device FILE and --profile FILE" "give the profile once" -- sim --net vgg-small --device "$prof" --profile "$prof"
expect_fail "profile: a result file" "not a device profile" -- plan --net vgg-small --budget 3MiB --profile "$tmp/v.h5"
"$python" - "$tmp/badprof.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["schema_version"] = np.int32(2)
    for k, v in (("kind", "profile"), ("backend", "cpu")):
        f.attrs[k] = v
    f.create_dataset("profile/samples", data=np.zeros(3, dtype=[("key", "i4"), ("us", "f8")]))
PY
expect_fail "profile with wrong field types" "no net field" -- plan --net vgg-small --budget 3MiB --profile "$tmp/badprof.h5"
expect_ok "plan --budget" -- plan --net vgg-small --batch 16 --budget 2.7MB --profile "$prof"
grep -qE '^  plan +[^ ]' "$tmp/out" && grep -qE '^  peak +[0-9.]+ MiB' "$tmp/out" && ok "plan prints a plan and its peak" || bad "plan output"
best=$(sed -n 's/^  plan  *//p' "$tmp/out")
expect_ok "the planner's plan runs as given" -- sim --net vgg-small --batch 16 --plan "$best" --profile "$prof"
peak=$(sed -n 's/^  peak (device) *\([0-9.]*\) MiB.*/\1/p' "$tmp/out")
"$python" -c "import sys; sys.exit(0 if float('$peak') * 2**20 <= 2.7e6 else 1)" && ok "its peak fits the budget ($peak MiB)" || bad "planner's plan peaks at $peak MiB"
# the margin: on the roofline (no profile, so no margin of its own) an offload list is 2.1% faster than vdnn-conv
expect_ok "plan --margin 5" -- plan --net vgg-small --batch 16 --budget 2.7MB --device cpu --margin 5
grep -qE '^  plan +vdnn-conv$' "$tmp/out" && grep -qE '^  kept +over .*within the margin of 5\.0% \(--margin\)' "$tmp/out" \
  && ok "--margin 5: the preset kept over a plan 2.1% faster, and said so" || bad "--margin 5: $(sed -n 4p "$tmp/out")"
expect_ok "plan --margin 0" -- plan --net vgg-small --batch 16 --budget 2.7MB --device cpu --margin 0
if grep -qE '^  time .*\(preset\)$' "$tmp/out" || grep -q '^  kept' "$tmp/out"; then bad "--margin 0 kept a preset: $(sed -n 4p "$tmp/out")"
else ok "--margin 0: the predicted fastest"; fi
expect_fail "--margin not a number" "--margin x: expected a percentage 0..100" -- plan --net vgg-small --budget 3MB --margin x
expect_fail "--margin over 100" "--margin 101: expected a percentage 0..100" -- plan --net vgg-small --budget 3MB --margin 101
expect_fail "--margin with --max-batch" "--margin applies to the planner" -- plan --net vgg-small --budget 3MB --max-batch --margin 5
expect_fail "budget under every plan" "the smallest footprint found is" -- plan --net vgg-small --batch 16 --budget 1MB --pareto "$o"; no_file "$o" "budget too small"
expect_fail "plan --space bogus" "--space bogus" -- plan --net vgg-small --budget 3MiB --space bogus
expect_fail "plan --measure with --max-batch" "--measure applies to the planner" -- plan --net vgg-small --budget 3MiB --max-batch --measure 2
# offload selection: vDNN's policies beside GLPK's exact answer and the two relaxation heuristics
expect_ok "plan --offload-select" -- plan --net vgg-small --batch 16 --budget 2.5MiB --offload-select --device h100-pcie4 --time-limit 5
[ "$(grep -cE '^  (vdnn-all|vdnn-conv|round|dive|exact) +[0-9.]+ [KM]iB +yes ' "$tmp/out")" -eq 5 ] && ok "offload-select: five plans that fit" || bad "offload-select rows: $(cat "$tmp/out")"
sel=$(sed -n 's/^exact: //p' "$tmp/err")
expect_ok "the exact offload list runs as given" -- sim --net vgg-small --batch 16 --plan "$sel" --device h100-pcie4
expect_ok "... and trains on the engine" -- train --net vgg-small --batch 16 --plan "$sel" --iters 2 -o "$tmp/sel.h5"
expect_ok "plan --pareto" -- plan --net vgg-small --batch 16 --budget 2.7MB --pareto "$tmp/par.h5"
if "$python" "$src/tests/check_schema.py" "$tmp/par.h5" >"$tmp/schema" 2>&1; then ok "frontier file validates against results/SCHEMA.md"; else bad "frontier schema: $(tail -1 "$tmp/schema")"; fi
if "$python" "$src/plots/pareto.py" --out "$tmp/figs" "$tmp/par.h5" >/dev/null 2>"$tmp/err" && [ -s "$tmp/figs/pareto.png" ]; then ok "plots/pareto.py draws it"; else bad "pareto figure"; fi


# --- huge inputs: refused (exit 2, one line) before anything is allocated for them ----------------
mkdir -p "$tmp/huge/cat"
printf 'P6\n100000 100000\n255\n' >"$tmp/huge/cat/a.ppm"; head -c 300 /dev/zero >>"$tmp/huge/cat/a.ppm"
mkdir -p "$tmp/empty/cat"
expect_fail "an image folder whose classes hold no images" "no images in the class directories" -- train --net vgg-small --data "$tmp/empty" --iters 1
expect_fail "a PPM declaring 100000x100000" "at most 2^28 pixels" -- train --net vgg-small --data "$tmp/huge" --iters 1
printf 'P6\n4000 4000\n255\n' >"$tmp/huge/cat/a.ppm"; head -c 300 /dev/zero >>"$tmp/huge/cat/a.ppm"
expect_fail "a PPM shorter than its header says" "truncated PPM (4000x4000" -- train --net vgg-small --data "$tmp/huge" --iters 1
"$python" - "$tmp/huge.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:  # an lrcnn-looking file whose categories declare 2^40 strings, storing none
    f.attrs["schema_version"] = np.int32(2)
    f.create_dataset("categories", shape=(2**40,), dtype=h5py.string_dtype(), chunks=(1024,))
    f.create_group("runs")
PY
expect_fail "export: a dataset declaring 2^40 elements" "declares 1099511627776 elements" -- export "$tmp/huge.h5"
printf 'nets = vgg-small\nbatch = 1..64\nimage = 32..95\nplans = 2ps:1..4096, overl:1..4096\n' >"$tmp/huge.spec"
expect_fail "a spec of 33 million runs" "more than 100000: split the spec" -- sweep "$tmp/huge.spec" -o "$o"; no_file "$o" "huge spec"
expect_fail "a plan list of 69632 plans" "plan list of more than 65536 plans" -- sim --net vgg-small --plan "$(printf '2ps:1..4096,%.0s' $(seq 17))layer"
expect_fail "train too large for this machine" "of this machine's memory" -- train --net vgg-small --image 16384 --batch 256 --iters 1 -o "$o"; no_file "$o" "too large to train"
printf 'input data c=3 h=32 w=32\nconv big c=500000000 k=5000 p=2500\ngap g\nfc f c=10\nloss l\n' >"$tmp/big.net"
expect_fail "a conv whose weights overflow" "its weights (3.75e+16) are more than 2^36" -- sim --net "$tmp/big.net"
printf 'input data c=3 h=4096 w=4096\nconv a c=4096 k=3 p=1\nfc f c=100000\nloss l\n' >"$tmp/big.net"
expect_fail "an fc whose weights overflow" "are more than 2^36" -- sim --net "$tmp/big.net"
"$python" -c "
print('input data c=3 h=8 w=8')
print('conv c0 c=4 k=3 p=1')
for i in range(1, 100000): print('relu r%d' % i)
print('fc f c=10')
print('loss l')" >"$tmp/deep.net"
start=$(date +%s)
expect_ok "a 100,000-layer net parses" -- sim --net "$tmp/deep.net" --plan layer
[ $(( $(date +%s) - start )) -lt 60 ] && ok "... in $(( $(date +%s) - start )) s" || bad "a 100,000-layer net took $(( $(date +%s) - start )) s"
expect_fail "plan --max-image with bands no image admits" "4096 bands" -- plan --net vgg-small --budget 1GiB --max-image --plan 2ps:4096
start=$(date +%s)
expect_ok "plan --max-image where only large inputs admit the bands" -- plan --net vgg-small --budget 8GiB --max-image --plan 2ps:300
grep -qE '^  2ps:300 +3[0-9]{3} ' "$tmp/out" && ok "... the largest (between the first valid input, 2400, and 4096): $(grep 2ps:300 "$tmp/out")" || bad "plan --max-image gap: $(cat "$tmp/out")"
[ $(( $(date +%s) - start )) -lt 60 ] && ok "... in $(( $(date +%s) - start )) s" || bad "plan --max-image took $(( $(date +%s) - start )) s"

printf '\n%d passed, %d failed\n' "$passes" "$fails"
[ "$fails" -eq 0 ]
