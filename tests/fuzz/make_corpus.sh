#!/usr/bin/env bash
# make_corpus.sh: how the HDF5 seeds of tests/fuzz/corpus/{weights,export} were made (they are
# committed; rerun only to refresh them: files carry the date and commit, so they differ each run).
#   tests/fuzz/make_corpus.sh [LRCNN_BINARY]     (default build/lrcnn)
# Seeds: files lrcnn writes on small nets (a sim result with a timeline, a train result with
# measured encodings, a device profile, a weights dump), a params-only weights file, foreign files
# (wrong type, shape, schema version, missing objects: h5py) and damaged ones (truncated, bytes
# overwritten). The text corpora are nets/*.net, experiments/*.spec and plan strings, copied by hand.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lrcnn="$(realpath "${1:-$here/../../build/lrcnn}")"
w="$here/corpus/weights" x="$here/corpus/export"
mkdir -p "$w" "$x"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1
cd "$tmp"
"$lrcnn" sim --net kernels --batch 2 --plan 2ps:2 -o "$x/sim.h5" --force >/dev/null
"$lrcnn" train --net bn-cover --batch 1 --iters 2 --plan layer+gist -o "$x/train_gist.h5" --force >/dev/null
"$lrcnn" calibrate --net bn-cover --batch 1 --iters 2 --plan layer --check ckpt:2 -o "$x/profile.h5" --force >/dev/null
"$lrcnn" train --net bn-cover --batch 1 --iters 1 --dump "$tmp/dump.h5" >/dev/null

/usr/bin/python3 - "$w" "$x" "$tmp" <<'EOF'
import sys, h5py, numpy as np
w, x, t = sys.argv[1], sys.argv[2], sys.argv[3]
# weights: /params only (what --init-weights reads), then foreign variants of it
with h5py.File(f"{t}/dump.h5", "r") as d, h5py.File(f"{w}/params.h5", "w") as o:
    d.copy("params", o)
def variant(name, edit):
    with h5py.File(f"{w}/params.h5", "r") as d, h5py.File(f"{w}/{name}", "w") as o:
        d.copy("params", o)
        edit(o)
def retype(o):
    a = o["params/c1/weight"][...]; del o["params/c1/weight"]; o["params/c1/weight"] = a.astype("f8")
def reshape(o):
    a = o["params/f/weight"][...]; del o["params/f/weight"]; o["params/f/weight"] = a.reshape(-1)
def rank8(o):
    del o["params/b1/bias"]; o["params/b1/bias"] = np.zeros((1,) * 8, "f4")
def as_group(o):
    del o["params/b2/running_var"]; o.create_group("params/b2/running_var")
variant("f64_weight.h5", retype)
variant("flat_fc.h5", reshape)
variant("rank8.h5", rank8)
variant("group_not_dataset.h5", as_group)
variant("no_conv_bias.h5", lambda o: o.__delitem__("params/c3/bias"))
variant("no_running.h5", lambda o: [o.__delitem__(f"params/{b}/running_mean") for b in ("b1", "b2", "b3")])
# export: foreign result files
with h5py.File(f"{x}/sim.h5", "r") as d:
    def result(name, edit):
        with h5py.File(f"{x}/{name}", "w") as o:
            for k, v in d.attrs.items(): o.attrs[k] = v
            for k in d: d.copy(k, o)
            edit(o)
    result("schema_99.h5", lambda o: o.attrs.__setitem__("schema_version", 99))
    result("schema_str.h5", lambda o: o.attrs.__setitem__("schema_version", "2"))
    result("no_categories.h5", lambda o: o.__delitem__("categories"))
    def int_categories(o):
        del o["categories"]; o["categories"] = np.arange(8)
    result("int_categories.h5", int_categories)
    def bad_run(o):
        g = o["runs/00000"]; del g.attrs["batch"]; g.attrs["net"] = 7
        del o["runs/00000/prediction/replay/at_peak"]; o["runs/00000/prediction/replay/at_peak"] = np.zeros(3, "i8")
    result("bad_run.h5", bad_run)
    def long_timeline(o):
        del o["runs/00000/timeline"]; o.create_dataset("runs/00000/timeline", shape=(1 << 40,), dtype="i8", chunks=(1024,))
    result("sparse_timeline.h5", long_timeline)
# regression (h5_read_vlen): categories in two chunks whose second chunk's first string points at
# no heap collection; HDF5 fails the read after converting the first chunk's strings
import struct
with h5py.File(f"{x}/sim.h5", "r") as d, h5py.File(f"{x}/categories_bad_heap.h5", "w") as o:
    for k, v in d.attrs.items(): o.attrs[k] = v
    for k in d:
        if k != "categories": d.copy(k, o)
    o.create_dataset("categories", data=list(d["categories"][...]), dtype=h5py.string_dtype(), chunks=(4,))
with h5py.File(f"{x}/categories_bad_heap.h5", "r") as o:
    at = o["categories"].id.get_chunk_info(1).byte_offset + 4  # a heap id: length (4), collection (8), index (4)
b = bytearray(open(f"{x}/categories_bad_heap.h5", "rb").read())
b[at:at + 8] = struct.pack("<Q", 10**9)
open(f"{x}/categories_bad_heap.h5", "wb").write(b)
# a profile with a string where a number belongs
with h5py.File(f"{x}/profile.h5", "r") as d, h5py.File(f"{x}/profile_kind.h5", "w") as o:
    for k, v in d.attrs.items(): o.attrs[k] = v
    o.attrs["kind"] = "result"
    d.copy("categories", o)
EOF
# damaged copies: truncated, and bytes overwritten in the middle
head -c 4096 "$x/sim.h5" >"$x/sim_truncated.h5"
head -c 8192 "$w/params.h5" >"$w/params_truncated.h5"
damage() { cp "$1" "$2"; printf '\xff\xff\xff\xff\x00\x00\x00\x00' | dd of="$2" bs=1 seek="$3" conv=notrunc status=none; }
damage "$x/sim.h5" "$x/sim_damaged_800.h5" 800
damage "$x/sim.h5" "$x/sim_damaged_4000.h5" 4000
damage "$w/params.h5" "$w/params_damaged_1200.h5" 1200
damage "$w/params.h5" "$w/params_damaged_6000.h5" 6000
cp "$w/params.h5" "$x/weights_not_result.h5"
cp "$x/sim.h5" "$w/result_not_weights.h5"
printf 'not an HDF5 file\n' >"$w/text.h5"
cp "$w/text.h5" "$x/text.h5"
ls -la "$w" "$x"
