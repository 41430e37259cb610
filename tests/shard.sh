#!/usr/bin/env bash
# Sweeps in shards: a spec swept whole equals the merge of its 3 shards, each run by GNU parallel
# as a separate process (h5diff of every run, the root's attributes aside: date, command, shard);
# merges of parts that do not belong together exit 2 with one line and write nothing.
# Usage: shard.sh LRCNN PYTHON SOURCE_DIR
set -u
lrcnn="$1"; python="$2"; src="$3"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0
ok()  { printf 'ok   %s\n' "$1"; }
bad() { fails=$((fails + 1)); printf 'FAIL %s\n' "$1"; sed 's/^/     /' "$tmp/err" 2>/dev/null | head -5; }
cd "$tmp"
# the engine picks its thread count from the machine's load when it starts (engine/threads.h), and the
# shards below run side by side: fix it, so that the root attribute threads is the same everywhere
export OMP_NUM_THREADS=1

# a grid (two nets, two batches, both optimizers, five plans: 40 runs) and a capacity search
cat >grid.spec <<'S'
nets = vgg-small, resnet-small
image = 32
batch = 2, 4
optimizer = sgd, adam
plans = layer, ckpt-sqrt, 2ps:2..3, overl-h
timeline = on
S
cat >search.spec <<'S'
nets = vgg-small
batch = 1, 2
optimizer = sgd
search = image
budgets = 16MiB, 64MiB
plans = layer, 2ps:4, overl-h
S
for s in grid search; do
  "$lrcnn" sweep $s.spec -o $s-whole.h5 --quiet 2>"$tmp/err" || bad "$s: whole sweep"
  parallel --halt now,fail=1 "'$lrcnn'" sweep $s.spec --shard {}/3 -o $s-{}.h5 --quiet ::: 1 2 3 2>"$tmp/err" \
    && ok "$s: 3 shards through GNU parallel" || bad "$s: shards"
  "$lrcnn" merge $s-merged.h5 $s-3.h5 $s-1.h5 $s-2.h5 2>"$tmp/err" && ok "$s: merge (parts in any order)" || bad "$s: merge"
  if h5diff $s-whole.h5 $s-merged.h5 /runs /runs >"$tmp/err" && h5diff $s-whole.h5 $s-merged.h5 /categories /categories >"$tmp/err"; then
    ok "$s: merged = whole (h5diff: every run, every attribute and dataset in it)"
  else bad "$s: merged differs from whole"; fi
  "$python" "$src/tests/check_schema.py" $s-whole.h5 $s-merged.h5 $s-1.h5 >"$tmp/err" 2>&1 && ok "$s: schema of whole, merged and a shard" \
    || bad "$s: schema"
done
# the comparison can fail: one attribute of one run changed is a difference
cp grid-merged.h5 changed.h5
"$python" -c "import h5py; h5py.File('changed.h5', 'r+')['runs/00017'].attrs['batch'] = 3"
h5diff grid-whole.h5 changed.h5 /runs /runs >/dev/null 2>&1; [ $? -eq 1 ] && ok "h5diff sees one changed attribute" || bad "h5diff blind"
"$python" - grid-whole.h5 grid-merged.h5 >"$tmp/err" 2>&1 <<'P' && ok "grid: root attributes equal but for date, command and /shards" || bad "grid: root attributes"
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
skip = {"date", "lrcnn_command"}
assert {k for k in a.attrs if k not in skip} == {k for k in b.attrs if k not in skip}, (set(a.attrs), set(b.attrs))
for k in a.attrs:
    assert k in skip or a.attrs[k] == b.attrs[k], k
s = b["shards"][()]
assert list(s["shard"]) == [1, 2, 3] and sum(s["runs"]) == len(a["runs"]), s
P
# parts from machines that differ: the merged root says "mixed" for each machine attribute the parts
# disagree on (io/merge.c), and keeps the rest; /shards says each part's host and cpu
for i in 1 2 3; do cp grid-$i.h5 mix-$i.h5; done
"$python" -c "import h5py; f = h5py.File('mix-2.h5', 'r+'); f.attrs['blas'] = 'OpenBLAS 0.3.21, Zen kernel'; f.attrs['cpu'] = 'another'"
"$lrcnn" merge mix-merged.h5 mix-1.h5 mix-2.h5 mix-3.h5 2>"$tmp/err" || bad "mixed: merge"
"$python" - grid-whole.h5 mix-merged.h5 >"$tmp/err" 2>&1 <<'P' && ok "mixed: blas and cpu say mixed, host and the rest as the parts" || bad "mixed: root attributes"
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for k in a.attrs:
    want = "mixed: see /shards" if k in ("blas", "cpu") else a.attrs[k]
    assert k in ("date", "lrcnn_command") or b.attrs[k] == want, (k, b.attrs[k])
assert [c.decode() for c in b["shards"][()]["cpu"]][1] == "another", b["shards"][()]
P

# a configuration too large for this machine is recorded in /infeasible and the sweep goes on, whole
# or in shards (the engine's timings differ between runs: the table and the run names must not)
cat >inf.spec <<'S'
nets = vgg-small
image = 32
batch = 2, 1000000
optimizer = sgd
measure = 1
plans = layer, 2ps:2
S
"$lrcnn" sweep inf.spec -o inf-whole.h5 --quiet 2>"$tmp/err" && grep -q "2 configurations could not be run" "$tmp/err" \
  && ok "infeasible configurations recorded, the sweep goes on" || bad "infeasible: whole sweep"
for i in 1 2 3; do "$lrcnn" sweep inf.spec --shard $i/3 -o inf-$i.h5 --quiet 2>/dev/null || bad "infeasible: shard $i"; done
"$lrcnn" merge inf-merged.h5 inf-1.h5 inf-2.h5 inf-3.h5 2>"$tmp/err" && h5diff inf-whole.h5 inf-merged.h5 /infeasible /infeasible >"$tmp/err" \
  && ok "infeasible: merged /infeasible = whole" || bad "infeasible: merge"
"$python" - inf-whole.h5 inf-merged.h5 >"$tmp/err" 2>&1 <<'P' && ok "infeasible: runs 00000, 00001 in both; 2 and 3 in /infeasible" || bad "infeasible: runs"
import sys, h5py
for p in sys.argv[1:]:
    f = h5py.File(p, "r")
    assert sorted(f["runs"]) == ["00000", "00001"], sorted(f["runs"])
    t = f["infeasible"][()]
    assert list(t["first_run"]) == [2, 3] and all(b"memory" in r for r in t["reason"]), t
P
"$python" "$src/tests/check_schema.py" inf-whole.h5 inf-merged.h5 inf-1.h5 inf-3.h5 >"$tmp/err" 2>&1 && ok "infeasible: schema" || bad "infeasible: schema"
sed 's/batch = 2, 1000000/batch = 1000000/' inf.spec >none.spec
"$lrcnn" sweep none.spec -o none.h5 --quiet >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && [ ! -e none.h5 ] && grep -q "no configuration could be run" "$tmp/err" && ok "nothing feasible: exit 2, no file" || bad "nothing feasible"

# merges that must be refused: exit 2, one line, no file
refuse() {
  local label="$1" want="$2"; shift 2
  "$lrcnn" merge "$tmp/bad.h5" "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/err"; then bad "$label: exit $rc"; return; fi
  if [ -e "$tmp/bad.h5" ] || compgen -G "$tmp/bad.h5.*.tmp" >/dev/null; then bad "$label: wrote a file"; return; fi
  ok "$label -> $(cat "$tmp/err")"
}
refuse "a shard missing" "merge needs all 3" grid-1.h5 grid-2.h5
refuse "a shard twice" "are both shard 2/3" grid-1.h5 grid-2.h5 grid-2.h5
refuse "shards of different specs" "come from different specs" grid-1.h5 grid-2.h5 search-3.h5
(cat grid.spec; echo "# the same grid, another text") >grid2.spec
"$lrcnn" sweep grid2.spec --shard 3/3 -o other-3.h5 --quiet 2>/dev/null
refuse "a shard of an edited spec" "come from different specs" grid-1.h5 grid-2.h5 other-3.h5
cp grid-3.h5 commit-3.h5
"$python" -c "import h5py; h5py.File('commit-3.h5', 'r+').attrs['git_commit'] = 'deadbee'"
refuse "shards of different commits" "come from different commits" grid-1.h5 grid-2.h5 commit-3.h5
"$lrcnn" sweep grid.spec --shard 1/2 -o half-1.h5 --quiet 2>/dev/null
refuse "shards of different splits" "parts of different splits" grid-1.h5 grid-2.h5 half-1.h5
refuse "a whole sweep as a part" "not a shard of a sweep" grid-1.h5 grid-2.h5 grid-whole.h5
cp grid-3.h5 cut-3.h5
"$python" -c "import h5py; del h5py.File('cut-3.h5', 'r+')['runs/00002']"
refuse "a shard missing a run" "no part holds run 00002" grid-1.h5 grid-2.h5 cut-3.h5
refuse "a part that is not HDF5" "not an HDF5 file" grid-1.h5 grid-2.h5 grid.spec
refuse "a part that does not exist" "No such file" grid-1.h5 grid-2.h5 nosuch.h5
"$lrcnn" merge grid-whole.h5 grid-1.h5 grid-2.h5 grid-3.h5 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "use --force" "$tmp/err" && ok "merge keeps an existing file without --force" || bad "merge overwrote"
for sh in 0/3 4/3 3/0 2 x/y; do
  "$lrcnn" sweep grid.spec --shard $sh -o s.h5 >/dev/null 2>"$tmp/err"
  [ $? -eq 2 ] && [ ! -e s.h5 ] && ok "--shard $sh refused" || bad "--shard $sh"
done
"$lrcnn" sweep search.spec --shard 13/13 -o s.h5 >/dev/null 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "fewer than 13 parts" "$tmp/err" && ok "more shards than runs refused" || bad "more shards than runs"

# without -o, a spec without output goes to results/NAME.h5 here; results/ is made if missing
"$lrcnn" sweep search.spec --quiet >/dev/null 2>"$tmp/err" && [ -f results/search.h5 ] && ok "sweep makes results/ where it is missing" \
  || bad "sweep without -o and without results/"

[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
