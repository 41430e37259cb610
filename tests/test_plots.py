#!/usr/bin/python3
"""Figure scripts end to end: every plots/<name>.py and both plots/gnuplot/*.gp on real files.

    /usr/bin/python3 tests/test_plots.py path/to/lrcnn

Builds small result files with the real binary in a temporary directory (vgg-small at 32x32: a
grid sweep with band counts and every preset, a sweep with timelines, a batch and an image capacity
search with a budget nothing fits, `lrcnn validate`, a `run = train` spec of two plans), runs each figure
script on the files it is meant for, and checks that it exits 0 and writes a non-empty PNG and PDF
(by their magic bytes). Then the scripts' user errors: a file without the runs a figure needs and
a missing file give exit status 2, one stderr line naming the script, and no figure. Last,
`lrcnn export` of two files and the gnuplot quick-looks on its tables. The scripts run in parallel
(each is a fresh Python importing matplotlib). Exit status 0 when everything passed, 1 otherwise,
with a line per check.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
TIMEOUT = 120  # seconds per command; the whole test takes well under 30 s

SPECS = {
    "encoded": """nets = vgg-small
batch = 4
plans = layer, layer+gist, layer+dpr:fp16, 2ps:2, 2ps:2+zfp:rate=8
""",
    "grid": """nets = vgg-small
image = 32
batch = 2, 4
optimizer = adam
plans = layer, ckpt-sqrt, vdnn-all, vdnn-conv, 2ps:1..3, overl:1..3, 2ps-h, overl-h
""",
    "timeline": """nets = vgg-small
image = 32
batch = 4
optimizer = adam
plans = layer, vdnn-conv, 2ps:2, overl:2
timeline = on
""",
    "cap_batch": """nets = vgg-small
image = 32
optimizer = adam
plans = layer, vdnn-all, 2ps:2, overl:2
search = batch
budgets = 64KiB, 2MiB, 4MiB, 8MiB
""",
    "cap_image": """nets = vgg-small
batch = 2
optimizer = adam
plans = layer, 2ps:2, overl:2
search = image
budgets = 2MiB, 4MiB, 8MiB
""",
    "ckpt": """nets = vgg-small
batch = 8
optimizer = adam
plans = layer, ckpt-sqrt, ckpt-opt:ckpt-sqrt, ckpt-opt, ckpt-opt:80%, ckpt-opt:95%
""",
    "train": """run = train
nets = vgg-small
batch = 4
optimizer = adam
plans = layer, 2ps:2
measure = 5
""",
}

passes, fails = 0, 0


def ok(msg):
    global passes
    passes += 1
    print(f"ok   {msg}")


def bad(msg, detail=""):
    global fails
    fails += 1
    print(f"FAIL {msg}")
    for line in detail.strip().splitlines()[-8:]:
        print(f"     {line}")


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout + p.stderr


def check_image(path, magic, label):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
        size = os.path.getsize(path)
    except OSError:
        return bad(f"{label}: {path} not written")
    if not head.startswith(magic):
        return bad(f"{label}: {path} is not a {magic!r} file (starts {head!r})")
    if size < 2000:
        return bad(f"{label}: {path} has only {size} bytes")
    ok(f"{label}: {os.path.basename(path)} ({size} bytes)")


def gpu_shaped(src, dst):
    """dst: src's engine runs as a CUDA run's file would hold them (results/SCHEMA.md,
    measured/device), with plausible numbers: the pool's used peak equal to the allocated peak,
    its reserved peak 6% above, the device's bytes in use the reserved plus a 500 MiB context."""
    import h5py
    import numpy as np
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for g in f["runs"].values():
            m = g["measured"]
            m.attrs["backend"] = "cuda"
            d = m.create_group("device")
            peak, ctx = int(m.attrs["peak"]), 500 << 20
            strs = {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "driver": "13.0", "runtime": "13.0",
                    "cudnn": "9.19.0", "cublas": "13.1.0"}
            for k, v in strs.items():
                d.attrs.create(k, v, dtype=h5py.string_dtype())
            ints = {"context_bytes": ctx, "device_peak": int(peak * 1.06) + ctx, "pool_reserved_peak": int(peak * 1.06),
                    "pool_used_peak": peak, "cupti_reserved_peak": int(peak * 1.06) + 4096, "cupti_suballoc_peak": peak,
                    "dropped_records": 0, "outside_pool": (32 << 20) + 4096, "host_arena": 0, "host_outside": 0}
            for k, v in ints.items():
                d.attrs.create(k, v, dtype="<i8")
            d.attrs.create("profiled", 1, dtype="<i4")
            d.attrs.create("valid", 1, dtype="<i4")
            d.attrs.create("kernel_us", 1234.5, dtype="<f8")
            L = g["layers"].shape[0]
            d.create_dataset("layer_kernel_us", data=np.full((L, 2), 10.0), dtype="<f8")
            d.create_dataset("conv_algo", data=np.full((L, 3), -1), dtype="<i4")
            d.create_dataset("conv_workspace", data=np.zeros((L, 3)), dtype="<i8")


def _cell(v):
    return "" if v is None or (isinstance(v, float) and v != v) else str(v)


def same_table(a, b):
    """Where table a (read back from CSV) differs from b (load()): every column of a that holds a value
    is in b under its name, equal value for value; run ids are strings; units agree."""
    import numpy as np
    out = []
    if list(a["run"]) != list(b["run"]) or not all(isinstance(r, str) and len(r) == 5 for r in a["run"]):
        out.append("run ids differ or are not 5-digit strings: %s" % list(a["run"])[:3])
    for c in a.columns:
        if a[c].isna().all():
            continue  # a column this file has no value for (search, budget_bytes ... of a sim run)
        if c not in b.columns:
            out.append("%s not in load()'s columns" % c)
            continue
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if a[c].dtype.kind in "if":
            if not np.array_equal(x.astype(float), y.astype(float), equal_nan=True):
                out.append("%s differs" % c)
        elif [_cell(v) for v in x] != [_cell(v) for v in y]:
            out.append("%s differs" % c)
        if a.attrs["units"].get(c) != b.attrs["units"].get(c):
            out.append("%s: unit %s vs %s" % (c, a.attrs["units"].get(c), b.attrs["units"].get(c)))
    return out


def main():
    if len(sys.argv) != 2:
        print("usage: test_plots.py LRCNN", file=sys.stderr)
        return 2
    lrcnn = os.path.abspath(sys.argv[1])
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="lrcnn-plots-")
    try:
        return body(lrcnn, tmp, t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def body(lrcnn, tmp, t0):
    # --- result files from the real binary ---------------------------------------------------
    h5 = {}
    cmds = {}
    for name, text in SPECS.items():
        with open(os.path.join(tmp, f"{name}.spec"), "w") as f:
            f.write(text)
        h5[name] = os.path.join(tmp, f"{name}.h5")
        cmds[name] = [lrcnn, "sweep", f"{name}.spec", "-o", h5[name], "--quiet"]
    h5["validate"] = os.path.join(tmp, "validate.h5")
    cmds["validate"] = [lrcnn, "validate", "--net", "vgg-small", "--batch", "4",
                        "--plan", "layer,2ps:2,overl:2", "-o", h5["validate"]]
    procs = {n: subprocess.Popen(c, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True) for n, c in cmds.items()}
    for name, p in procs.items():
        out, _ = p.communicate(timeout=TIMEOUT)
        if p.returncode == 0 and os.path.exists(h5[name]):
            ok(f"lrcnn {cmds[name][1]} -> {name}.h5")
        else:
            bad(f"lrcnn {' '.join(cmds[name][1:])}: exit {p.returncode}", out)
    if fails:
        return 1
    h5["gpu"] = os.path.join(tmp, "gpu.h5")
    gpu_shaped(h5["validate"], h5["gpu"])
    rc, out = run([PY, os.path.join(SRC, "tests", "check_schema.py"), h5["gpu"]], tmp)
    if rc:
        bad("the GPU-shaped file is not what results/SCHEMA.md says", out)
    else:
        ok("a GPU-shaped copy of validate.h5 (measured/device) passes check_schema.py")
    t_data = time.time() - t0

    # --- every figure script on the files it reads --------------------------------------------
    jobs = {
        "bands": [h5["grid"]],
        "overhead": [h5["grid"], h5["validate"]],
        "baselines": [h5["grid"]],
        "embraced": [h5["encoded"]],
        "capacity": [h5["cap_batch"], h5["cap_image"]],
        "timeline": [h5["timeline"]],
        "validation": [h5["validate"], h5["train"], h5["gpu"]],
        "gpu_validation": [h5["gpu"]],
        "convergence": [h5["train"]],
        "unet": [h5["grid"], h5["cap_image"]],  # any net's band sweep and image search
        "arena": [h5["grid"], h5["validate"], h5["gpu"]],
        "ckpt_opt": [h5["ckpt"]],
    }
    figs = os.path.join(tmp, "figs")
    procs = {}
    for name, files in jobs.items():
        cmd = [PY, os.path.join(SRC, "plots", f"{name}.py"), "--out", figs] + files
        procs[name] = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    # User errors: a file without what the figure needs, and a missing file.
    import h5py
    before_arena = os.path.join(tmp, "before_arena.h5")  # as files were written before prediction/arena
    shutil.copy(h5["grid"], before_arena)
    with h5py.File(before_arena, "r+") as f:
        for g in f["runs"].values():
            del g["prediction/arena"]
    errs = {
        "capacity on a grid file": ("capacity", [h5["grid"]]),
        "convergence on a sweep": ("convergence", [h5["grid"]]),
        "embraced on plans without encodings": ("embraced", [h5["grid"]]),
        "bands on a missing file": ("bands", [os.path.join(tmp, "nope.h5")]),
        "unet without a capacity search": ("unet", [h5["grid"]]),
        "gpu_validation on CPU runs": ("gpu_validation", [h5["validate"]]),
        "arena on a file written before it": ("arena", [before_arena]),
    }
    errdir = os.path.join(tmp, "errfigs")
    for label, (name, files) in errs.items():
        cmd = [PY, os.path.join(SRC, "plots", f"{name}.py"), "--out", errdir] + files
        procs[label] = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
    for name, p in procs.items():
        out, err = p.communicate(timeout=TIMEOUT)
        if name in jobs:
            if p.returncode != 0:
                bad(f"plots/{name}.py: exit {p.returncode}", (out or "") + (err or ""))
                continue
            check_image(os.path.join(figs, f"{name}.png"), b"\x89PNG\r\n\x1a\n", name)
            check_image(os.path.join(figs, f"{name}.pdf"), b"%PDF", name)
        else:
            script = errs[name][0]
            lines = err.strip().splitlines()
            if p.returncode != 2:
                bad(f"{name}: exit {p.returncode}, want 2", out + err)
            elif len(lines) != 1 or not lines[0].startswith(f"plots/{script}.py: "):
                bad(f"{name}: want one stderr line 'plots/{script}.py: ...'", err)
            elif os.path.exists(os.path.join(errdir, f"{script}.png")):
                bad(f"{name}: a figure was written")
            else:
                ok(f"{name}: exit 2, {lines[0]}")
    t_py = time.time() - t0 - t_data

    # --- gnuplot quick-looks on `lrcnn export` tables ------------------------------------------
    gp = shutil.which("gnuplot")
    if not gp:
        bad("gnuplot not found (./lrcnn installs it)")
    else:
        for name, script in (("grid", "peaks"), ("timeline", "timeline")):
            tsv = os.path.join(tmp, f"tsv_{name}")
            rc, out = run([lrcnn, "export", h5[name], "-o", tsv], tmp)
            if rc:
                bad(f"lrcnn export {name}.h5: exit {rc}", out)
                continue
            png = os.path.join(tmp, f"gp_{script}.png")
            rc, out = run([gp, "-e", f"dir='{tsv}'; out='{png}'",
                           os.path.join(SRC, "plots", "gnuplot", f"{script}.gp")], tmp)
            if rc:
                bad(f"gnuplot {script}.gp: exit {rc}", out)
            else:
                check_image(png, b"\x89PNG\r\n\x1a\n", f"gnuplot {script}.gp")
        # One run of the timeline by id, and the error for a directory without tables.
        png = os.path.join(tmp, "gp_timeline_one.png")
        rc, out = run([gp, "-e", f"dir='{os.path.join(tmp, 'tsv_timeline')}'; run='00002'; "
                       f"out='{png}'", os.path.join(SRC, "plots", "gnuplot", "timeline.gp")], tmp)
        if rc:
            bad(f"gnuplot timeline.gp run='00002': exit {rc}", out)
        else:
            check_image(png, b"\x89PNG\r\n\x1a\n", "gnuplot timeline.gp run='00002'")
        rc, out = run([gp, "-e", f"dir='{tmp}/none'; out='{tmp}/x.png'",
                       os.path.join(SRC, "plots", "gnuplot", "peaks.gp")], tmp)
        if rc == 2 and not os.path.exists(f"{tmp}/x.png"):
            ok("gnuplot peaks.gp without tables: exit 2, nothing written")
        else:
            bad(f"gnuplot peaks.gp without tables: exit {rc}, want 2", out)

    # --- plots/load.py: every file as a DataFrame, one row per run ------------------------------
    sys.path.insert(0, os.path.join(SRC, "plots"))
    try:
        from load import load, read_csv
        for name, path in h5.items():
            df = load(path)
            with h5py.File(path, "r") as f:
                runs = len(f["runs"])
            measured = "measured_peak_bytes" in df and df["measured_peak_bytes"].notna().all()
            if len(df) != runs or df["replay_peak_bytes"].isna().any() or df.attrs["units"]["replay_peak_bytes"] != "bytes":
                bad(f"load({name}.h5): {len(df)} rows for {runs} runs, or a missing replay peak or unit")
            elif name in ("train", "validate") and not (measured and (df["measured_iters"] > 1).all()):
                bad(f"load({name}.h5): measured columns missing or one iteration kept")
            else:
                ok(f"load({name}.h5): {len(df)} rows, {len(df.columns)} columns")
            # one data model: export --csv read back with pandas names what load() names, value for value
            csvdir = os.path.join(tmp, f"csv_{name}")
            rc, out = run([lrcnn, "export", path, "-o", csvdir, "--csv"], tmp)
            if rc:
                bad(f"lrcnn export --csv {name}.h5: exit {rc}", out)
                continue
            ex = read_csv(os.path.join(csvdir, "runs.csv"))
            problems = same_table(ex, df)
            if problems:
                bad(f"export --csv vs load({name}.h5): " + "; ".join(problems[:4]))
            else:
                ok(f"export --csv and load({name}.h5) agree: {len(ex.columns)} columns by name, run ids as strings, "
                   f"units by suffix ({len(ex.attrs['units'])} numeric columns with one)")
            back = os.path.join(tmp, f"load_{name}.csv")
            df.to_csv(back, index=False)
            problems = same_table(read_csv(back), df)
            if problems:
                bad(f"load({name}.h5) -> CSV -> read_csv: " + "; ".join(problems[:4]))
        try:
            load(os.path.join(tmp, "nosuch.h5"))
            bad("load(missing file) did not raise")
        except ValueError as e:
            ok(f"load(missing file) raises ValueError: {str(e)[:60]}...")
    except ImportError as e:
        bad(f"plots/load.py: {e} (./lrcnn installs python3-pandas)")

    total = time.time() - t0
    print(f"{passes} passed, {fails} failed in {total:.1f} s "
          f"(result files {t_data:.1f} s, figure scripts {t_py:.1f} s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
