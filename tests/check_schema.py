#!/usr/bin/env python3
"""Checks an lrcnn result file against results/SCHEMA.md (schema_version 2).

    /usr/bin/python3 tests/check_schema.py FILE.h5 [more.h5 ...]

An independent reading of SCHEMA.md with h5py: root attributes and `categories`, then every run
group's attributes, prediction groups, and optional `timeline` and `layers`, each with its exact
type (little-endian int32 / int64 / float64, variable-length UTF-8 strings) and shape. Members
the schema does not document are errors too, so the document stays the whole truth. Prints
"FILE: ok (N runs)" per file; on the first problem prints "FILE: OBJECT: what" and exits 1
(2 for usage or an unreadable file). Checks layout only, not whether the numbers are plausible.
"""
import re
import sys

import h5py
import numpy as np

SCHEMA_VERSION = 2

I32, I64, F64 = np.dtype("<i4"), np.dtype("<i8"), np.dtype("<f8")
STR = "str"  # variable-length UTF-8 string

ROOT_ATTRS = {"schema_version": I32, "git_commit": STR, "date": STR, "host": STR,
              "hdf5_version": STR, "lrcnn_command": STR}
# what the machine was, on every file written since they were added (older committed files lack them)
MACHINE_ATTRS = {"git_dirty": I32, "cpu": STR, "threads": I32, "omp_wait_policy": STR}
# a shard of a sweep (lrcnn sweep --shard I/N): which part, of how many runs in all
SHARD_ATTRS = {"shard": STR, "sweep_runs": I32}
# a merged sweep (lrcnn merge): one row per part
# configurations a sweep could not run, in place of their runs
INFEASIBLE_FIELDS = [("first_run", I32), ("runs", I32), ("net", STR), ("image_h", I32), ("image_w", I32), ("batch", I32),
                     ("optimizer", STR), ("plan", STR), ("reason", STR)]
SHARD_FIELDS = [("shard", I32), ("path", STR), ("runs", I32), ("host", STR), ("cpu", STR), ("threads", I32),
                ("date", STR), ("command", STR)]
RUN_ATTRS = {"kind": STR, "net": STR, "net_path": STR, "image_h": I32, "image_w": I32, "batch": I32,
             "plan": STR, "plan_resolved": STR, "optimizer": STR, "bn": STR, "device": STR,
             "fp_bands": I32, "bp_bands": I32, "n_steps": I32, "flops": F64, "time_us": F64,
             "plan_family": STR, "plan_preset": STR, "plan_count": I32, "bn_exact": I32}
PLAN_FAMILIES = ("layer", "torch", "ckpt", "vdnn", "2ps", "overl", "hybrid")
PRED_ATTRS = {"peak": I64, "peak_step": I32}
ARENA_ATTRS = {"size": I64, "live": I64, "host_size": I64, "host_live": I64, "apart": I64, "align": I64, "order": STR}
PRED_DSETS = ("at_peak", "max")
MEAS_ATTRS = {"peak": I64, "host_peak": I64, "rss_peak": I64, "seed": I64, "data": STR, "backend": STR}
MEAS_DSETS = {"at_peak": I64, "max": I64, "loss": np.dtype("<f4"), "iter_us": F64, "timeline": I64, "layer_us": F64}
# measured/device: what the GPU itself saw (backend cuda)
DEVICE_ATTRS = {"name": STR, "capability": STR, "driver": STR, "runtime": STR, "cudnn": STR, "cublas": STR,
                "context_bytes": I64, "device_peak": I64, "pool_reserved_peak": I64, "pool_used_peak": I64,
                "cupti_reserved_peak": I64, "cupti_suballoc_peak": I64, "dropped_records": I64,
                "outside_pool": I64, "host_arena": I64, "host_outside": I64,
                "profiled": I32, "valid": I32, "kernel_us": F64}
DEVICE_DSETS = {"layer_kernel_us": (F64, 2), "conv_algo": (I32, 3), "conv_workspace": (I64, 3)}
LAYER_FIELDS = [("name", STR), ("kind", STR), ("c", I32), ("h", I32), ("w", I32),
                ("params", I64), ("macs", I64)]
STEP_FIELDS = [("op", STR), ("layer", STR), ("band", I32)]
SEGMENT_FIELDS = [("mode", STR), ("first", STR), ("last", STR), ("policy", STR), ("fp", I32), ("bp", I32)]
ENCODED_FIELDS = [("layer", STR), ("encoding", STR), ("modifier", STR), ("band", I32), ("images", I32),
                  ("calibrated", I32), ("values", I64), ("predicted_bytes", I64), ("measured_bytes", I64),
                  ("acc", F64), ("factor", F64), ("factor_measured", F64), ("bound", F64), ("model_error", F64)]
ENCODINGS = ("sign", "argmax", "sparse", "fp16", "bf16", "fp8", "zfp-rate", "zfp-acc")


class Problem(Exception):
    pass


def is_vlen_utf8(dt):
    info = h5py.check_string_dtype(dt)
    return info is not None and info.length is None and info.encoding == "utf-8"


def type_ok(dt, want):
    return is_vlen_utf8(dt) if want is STR else dt == want


def type_name(dt):
    info = h5py.check_string_dtype(dt)
    if info is not None:
        return "string(%s, %s)" % (info.encoding, "variable" if info.length is None else info.length)
    return str(dt.newbyteorder("=") if dt.byteorder == ">" else dt) + (" big-endian" if dt.byteorder == ">" else "")


def want_name(want):
    return "variable-length UTF-8 string" if want is STR else str(want)


def join(where, name):
    return where.rstrip("/") + "/" + name


def check_attr(obj, where, name, want):
    if name not in obj.attrs:
        raise Problem("%s: missing attribute %s" % (where, name))
    a = h5py.h5a.open(obj.id, name.encode())
    if a.shape != ():
        raise Problem("%s: attribute %s has shape %s, want a scalar" % (where, name, a.shape))
    if not type_ok(a.dtype, want):
        raise Problem("%s: attribute %s is %s, want %s" % (where, name, type_name(a.dtype), want_name(want)))
    return obj.attrs[name]


def check_dset(parent, where, name, want, shape=None):
    """shape: a tuple, or None for any 1-d shape."""
    if name not in parent:
        raise Problem("%s: missing dataset %s" % (where, name))
    d = parent.get(name)
    path = join(where, name)
    if not isinstance(d, h5py.Dataset):
        raise Problem("%s: not a dataset" % path)
    if (shape is None and len(d.shape) != 1) or (shape is not None and d.shape != shape):
        raise Problem("%s: shape %s, want %s" % (path, d.shape, shape if shape else "(n,)"))
    if want is not None and not type_ok(d.dtype, want):
        raise Problem("%s: type %s, want %s" % (path, type_name(d.dtype), want_name(want)))
    return d


def check_group(parent, where, name):
    g = parent.get(name)
    if g is None:
        raise Problem("%s: missing group %s" % (where, name))
    if not isinstance(g, h5py.Group):
        raise Problem("%s: not a group" % join(where, name))
    return g


def check_only(obj, where, attrs, members):
    extra = sorted(set(obj.attrs) - set(attrs))
    if extra:
        raise Problem("%s: attribute %s is not in SCHEMA.md" % (where, extra[0]))
    extra = sorted(set(obj) - set(members))
    if extra:
        raise Problem("%s: member %s is not in SCHEMA.md" % (where, extra[0]))


def check_table(run, where, name, fields):
    """A 1-d compound dataset with exactly these fields and types."""
    d = check_dset(run, where, name, None)
    dt = d.dtype
    names = list(dt.names or ())
    if names != [f for f, _ in fields]:
        raise Problem("%s/%s: fields %s, want %s" % (where, name, names, [f for f, _ in fields]))
    for f, want in fields:
        if not type_ok(dt.fields[f][0], want):
            raise Problem("%s/%s: field %s is %s, want %s" % (where, name, f, type_name(dt.fields[f][0]),
                                                               want_name(want)))
    return d


def check_plan(run, where):
    family = run.attrs["plan_family"]
    if family not in PLAN_FAMILIES:
        raise Problem("%s: plan_family '%s', want one of %s" % (where, family, ", ".join(PLAN_FAMILIES)))
    segs = check_table(run, where, "plan_segments", SEGMENT_FIELDS)
    if segs.shape[0] < 1:
        raise Problem("%s/plan_segments: no segments" % where)
    modes = {m.decode() if isinstance(m, bytes) else m for m in segs["mode"]}
    if not modes <= {"layer", "ckpt", "offload", "rows"}:
        raise Problem("%s/plan_segments: modes %s" % (where, sorted(modes)))


def check_run(run, where, ncat):
    for name, want in RUN_ATTRS.items():
        check_attr(run, where, name, want)
    pred = check_group(run, where, "prediction")
    pwhere = where + "/prediction"
    check_only(pred, pwhere, (), ("replay", "closed", "arena"))
    if "arena" in pred:  # files written since 2026-11-27
        a = check_group(pred, pwhere, "arena")
        awhere = pwhere + "/arena"
        for name, want in ARENA_ATTRS.items():
            check_attr(a, awhere, name, want)
        check_only(a, awhere, ARENA_ATTRS, ())
        if a.attrs["size"] < a.attrs["live"] or a.attrs["host_size"] < a.attrs["host_live"]:
            raise Problem("%s: an arena smaller than its live peak" % awhere)
    # the closed form does not model encodings (plan modifiers after a '+'): no closed group then
    # nor the torch plan (what PyTorch keeps beyond our backward's reads)
    encoded = "+" in str(run.attrs.get("plan", "")) or run.attrs.get("plan_family") == "torch"
    if encoded and "closed" in pred:
        raise Problem("%s: a closed group for a plan the closed form does not model (modifiers, torch)" % pwhere)
    # nor BatchNorm statistics gathered in stages inside a row segment (bn=train, train-offload,
    # train-rebuild on a net with a bn there): a row plan in those modes may go without one
    staged = re.split("[:/]", str(run.attrs.get("bn", "")))[0] in ("train", "train-offload", "train-rebuild") and run.attrs.get("plan_family") not in (
        "layer", "ckpt", "vdnn", "torch")
    for model in ("replay",) if encoded or (staged and "closed" not in pred) else ("replay", "closed"):
        m = check_group(pred, pwhere, model)
        mwhere = "%s/%s" % (pwhere, model)
        for name, want in PRED_ATTRS.items():
            check_attr(m, mwhere, name, want)
        for name in PRED_DSETS:
            check_dset(m, mwhere, name, I64, (ncat,))
        extra = ()
        if "at_backward" in m:  # the replay's, in files written since it was added
            if model != "replay":
                raise Problem("%s: at_backward is the replay's alone" % mwhere)
            check_dset(m, mwhere, "at_backward", I64, (ncat,))
            extra = ("at_backward",)
        attrs = dict(PRED_ATTRS)
        if "reserved" in m.attrs:  # torch plans: PyTorch's CUDA caching allocator
            if model != "replay" or run.attrs.get("plan_family") != "torch":
                raise Problem("%s: reserved belongs to a torch plan's replay" % mwhere)
            attrs["reserved"] = I64
            check_attr(m, mwhere, "reserved", I64)
        check_only(m, mwhere, attrs, PRED_DSETS + extra)
    if "timeline" in run:
        check_dset(run, where, "timeline", I64)
    check_table(run, where, "layers", LAYER_FIELDS)
    check_plan(run, where)
    if "measured" in run:
        check_measured(run, where, ncat)
    if "timeline_steps" in run:  # what each step of the timelines does (files written since 2026-11-24)
        t = check_table(run, where, "timeline_steps", STEP_FIELDS)
        if "timeline" in run and t.shape != run["timeline"].shape:
            raise Problem("%s/timeline_steps: %s rows for a timeline of %s" % (where, t.shape, run["timeline"].shape))
    if "timeline_by_category" in run:
        n = run["timeline"].shape[0] if "timeline" in run else None
        check_dset(run, where, "timeline_by_category", I64, (n, ncat) if n is not None else None)
    search = {"search": STR, "budget": I64, "max_value": I32}
    if "search" in run.attrs:
        for name, want in search.items():
            check_attr(run, where, name, want)
    if "calibration" in run.attrs:
        check_attr(run, where, "calibration", STR)
    check_only(run, where, dict(RUN_ATTRS, calibration=STR, **search),
               ("prediction", "timeline", "timeline_by_category", "timeline_steps", "layers", "plan_segments", "measured"))


def check_measured(run, where, ncat):
    m = check_group(run, where, "measured")
    mwhere = where + "/measured"
    for name, want in MEAS_ATTRS.items():
        check_attr(m, mwhere, name, want)
    for name in ("at_peak", "max"):
        check_dset(m, mwhere, name, I64, (ncat,))
    loss = check_dset(m, mwhere, "loss", MEAS_DSETS["loss"])
    check_dset(m, mwhere, "iter_us", F64, loss.shape)
    if "timeline" in m:
        check_dset(m, mwhere, "timeline", I64)
    if "layer_us" in m:
        check_dset(m, mwhere, "layer_us", F64, (run["layers"].shape[0], 2) if "layers" in run else None)
    if "encoded" in m:
        if "+" not in str(run.attrs.get("plan", "")):
            raise Problem("%s/encoded: encoded maps in a plan without modifiers" % mwhere)
        t = check_table(m, mwhere, "encoded", ENCODED_FIELDS)[()]
        for r in t:
            enc = r["encoding"].decode() if isinstance(r["encoding"], bytes) else r["encoding"]
            if enc not in ENCODINGS:
                raise Problem("%s/encoded: encoding '%s'" % (mwhere, enc))
            sized = enc in ("sparse", "zfp-acc")
            if not sized and r["predicted_bytes"] != r["measured_bytes"]:
                raise Problem("%s/encoded: a fixed-size %s map measured %d bytes, predicted %d"
                              % (mwhere, enc, r["measured_bytes"], r["predicted_bytes"]))
            if sized and not (r["factor"] > 0 and r["factor_measured"] >= 0):
                raise Problem("%s/encoded: a %s map without its factors" % (mwhere, enc))
    if "device" in m:
        check_device(m, mwhere, run["layers"].shape[0] if "layers" in run else None)
    hparams = {"lr": F64, "momentum": F64, "beta1": F64, "beta2": F64, "eps": F64}  # files since 2026-11-24
    if "lr" in m.attrs:
        opt = run.attrs["optimizer"]
        for name in ("lr",) + (("beta1", "beta2", "eps") if opt == "adam" else ("momentum",)):
            check_attr(m, mwhere, name, F64)
    compared = {"grad_deviation": F64, "loss_deviation": F64, "worst_tensor": STR}
    if "grad_deviation" in m.attrs:
        for name, want in compared.items():
            check_attr(m, mwhere, name, want)
    alloc = {"alloc": STR}  # files since 2026-11-27
    arena = {"arena_size": I64, "arena_extent": I64, "arena_host_size": I64, "arena_host_extent": I64, "arena_resident": I64}
    if "alloc" in m.attrs:
        check_attr(m, mwhere, "alloc", STR)
        how = m.attrs["alloc"]
        how = how.decode() if isinstance(how, bytes) else how
        if how not in ("arena", "pool"):
            raise Problem("%s: alloc '%s', want arena or pool" % (mwhere, how))
        for name, want in arena.items() if how == "arena" else ():
            check_attr(m, mwhere, name, want)
        if how == "arena" and (m.attrs["arena_extent"] > m.attrs["arena_size"] or
                               m.attrs["arena_host_extent"] > m.attrs["arena_host_size"]):
            raise Problem("%s: a block past its arena" % mwhere)
        if how == "pool" and set(arena) & set(m.attrs):
            raise Problem("%s: arena figures from a pool run" % mwhere)
    check_only(m, mwhere, dict(MEAS_ATTRS, **compared, **hparams, **alloc, **arena), tuple(MEAS_DSETS) + ("encoded", "device"))


def check_device(m, mwhere, n_layers):
    if m.attrs["backend"] != "cuda":
        raise Problem("%s/device: on the %s backend (only cuda watches a device)" % (mwhere, m.attrs["backend"]))
    d = check_group(m, mwhere, "device")
    where = mwhere + "/device"
    for name, want in DEVICE_ATTRS.items():
        check_attr(d, where, name, want)
    for name, (want, cols) in DEVICE_DSETS.items():
        rows = n_layers if n_layers is not None else (d[name].shape[0] if name in d and d[name].ndim == 2 else -1)
        check_dset(d, where, name, want, (rows, cols))
    profiled, dropped = int(d.attrs["profiled"]), int(d.attrs["dropped_records"])
    if int(d.attrs["valid"]) != (dropped <= 0):
        raise Problem("%s: valid is %d with %d dropped records" % (where, d.attrs["valid"], dropped))
    cupti = ("cupti_reserved_peak", "cupti_suballoc_peak", "device_peak", "dropped_records")
    for name in cupti:  # -1 exactly when CUPTI did not run
        if (int(d.attrs[name]) < 0) == bool(profiled):
            raise Problem("%s: %s is %d with profiled %d" % (where, name, d.attrs[name], profiled))
    if "profiled_iter" in d.attrs:  # files since 2026-11-28: the iteration CUPTI watched, not timed (-1: none)
        check_attr(d, where, "profiled_iter", I32)
        it, iters = int(d.attrs["profiled_iter"]), len(m["iter_us"])
        if it not in (-1, iters - 1) or (profiled and it != iters - 1):
            raise Problem("%s: profiled_iter is %d with profiled %d and %d iterations" % (where, it, profiled, iters))
    if "cudnn_policy" in d.attrs:  # files since 2026-11-30: how the convolutions ran (cuDNN's algorithm policy)
        check_attr(d, where, "cudnn_policy", STR)
    check_only(d, where, dict(DEVICE_ATTRS, profiled_iter=I32, cudnn_policy=STR), tuple(DEVICE_DSETS))


PROFILE_SAMPLES = {"net": STR, "plan": STR, "key": STR, "class": STR, "batch": I32, "step": I32,
                   "x": F64, "work": F64, "us": F64}
PROFILE_CHECKS = {"net": STR, "plan": STR, "batch": I32, "image": I32, "held_out": I32,
                  "predicted_us": F64, "measured_us": F64, "fitted": F64}
PROFILE_ALGOS = {"key": STR, "algo": I32, "ws": I64, "ms": F64, "call": STR}
PARETO_POINTS = {"plan": STR, "source": STR, "peak": I64, "arena": I64, "time_us": F64, "frontier": I32}
PARETO_POINTS_BEFORE_ARENA = {k: v for k, v in PARETO_POINTS.items() if k != "arena"}  # files written before 2026-11-27


def check_profile(f):
    """A device profile (lrcnn calibrate): root backend, cpu, threads; /profile/samples and checks."""
    for name, want in (("backend", STR), ("cpu", STR), ("threads", I32)):
        check_attr(f, "/", name, want)
    g = check_group(f, "/", "profile")
    check_only(g, "/profile", {}, ("samples", "checks", "algos"))
    samples = check_table(g, "/profile", "samples", list(PROFILE_SAMPLES.items()))
    if samples.shape[0] == 0:
        raise Problem("/profile/samples: empty")
    check_table(g, "/profile", "checks", list(PROFILE_CHECKS.items()))
    if "algos" in g:  # cuda's measured algorithm choices (LRCNN_CUDNN_FIND=1), since 2026-11-30
        algos = check_table(g, "/profile", "algos", list(PROFILE_ALGOS.items()))
        for name in ("format", "device"):
            check_attr(algos, "/profile/algos", name, STR)
        extra = sorted(set(algos.attrs) - {"format", "device"})
        if extra:
            raise Problem("/profile/algos: attribute %s is not in SCHEMA.md" % extra[0])


def check_pareto(f):
    """lrcnn plan --pareto: root net, optimizer, device; /pareto with its points."""
    for name in ("net", "optimizer", "device"):
        check_attr(f, "/", name, STR)
    g = check_group(f, "/", "pareto")
    attrs = {"batch": I32, "image_h": I32, "image_w": I32}
    for name, want in attrs.items():
        check_attr(g, "/pareto", name, want)
    check_only(g, "/pareto", attrs, ("points",))
    fields = PARETO_POINTS if "arena" in (g["points"].dtype.names or ()) else PARETO_POINTS_BEFORE_ARENA
    pts = check_table(g, "/pareto", "points", list(fields.items()))
    if pts.shape[0] == 0 or not pts["frontier"].any():
        raise Problem("/pareto/points: no points, or none on the frontier")


def check_file(path):
    with h5py.File(path, "r") as f:
        if "schema_version" not in f.attrs:
            raise Problem("/: not an lrcnn result file (no schema_version)")
        for name, want in ROOT_ATTRS.items():
            check_attr(f, "/", name, want)
        version = int(f.attrs["schema_version"])
        if version != SCHEMA_VERSION:
            raise Problem("/: schema_version %d, this checker knows %d" % (version, SCHEMA_VERSION))
        date = f.attrs["date"]
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", date):
            raise Problem("/: attribute date '%s' is not ISO 8601 UTC (YYYY-MM-DDTHH:MM:SSZ)" % date)
        kind = f.attrs.get("kind", "")
        # all of them, or none (an older file; a device profile has always had its own cpu and threads)
        if "git_dirty" in f.attrs or "omp_wait_policy" in f.attrs:
            for name, want in MACHINE_ATTRS.items():
                check_attr(f, "/", name, want)
            merged = "shards" in f  # parts run with different thread counts: 0
            if int(f.attrs["git_dirty"]) not in (-1, 0, 1) or int(f.attrs["threads"]) < (0 if merged else 1):
                raise Problem("/: git_dirty must be -1, 0 or 1 and threads at least 1 (0 in a merge of mixed parts)")
        for name in f.attrs:  # command-specific extras must be strings too (the machine's and shard's ints aside)
            if name not in ROOT_ATTRS:
                check_attr(f, "/", name, dict(MACHINE_ATTRS, **SHARD_ATTRS).get(name, STR))
        shard = None
        if "shard" in f.attrs:
            m = re.fullmatch(r"(\d+)/(\d+)", f.attrs["shard"])
            if not m or not 1 <= int(m.group(1)) <= int(m.group(2)) or "sweep_runs" not in f.attrs:
                raise Problem("/: shard '%s' is not I/N with 1 <= I <= N, or sweep_runs is missing" % f.attrs["shard"])
            shard = (int(m.group(1)), int(m.group(2)), int(f.attrs["sweep_runs"]))
        cats = check_dset(f, "/", "categories", STR)
        ncat = cats.shape[0]
        names = list(cats.asstr()[()])
        if ncat == 0 or len(set(names)) != ncat or "" in names:
            raise Problem("/categories: want distinct non-empty names, found %s" % names)
        runs = check_group(f, "/", "runs")
        members = ("categories", "runs")
        if kind == "profile":
            check_profile(f)
            members += ("profile",)
        elif kind == "pareto":
            check_pareto(f)
            members += ("pareto",)
        if "shards" in f:
            if shard:
                raise Problem("/: a shard (attribute shard) with a /shards table")
            check_table(f, "", "shards", SHARD_FIELDS)
            members += ("shards",)
        skipped = set()  # run numbers an /infeasible row stands for
        if "infeasible" in f:
            for r in check_table(f, "", "infeasible", INFEASIBLE_FIELDS)[()]:
                if r["runs"] < 1 or not r["reason"]:
                    raise Problem("/infeasible: row for run %d: want runs >= 1 and a reason" % r["first_run"])
                skipped.update(range(r["first_run"], r["first_run"] + r["runs"]))
            members += ("infeasible",)
        check_only(f, "/", f.attrs, members)
        keys = sorted(runs)
        if shard:  # a shard's runs keep their places in the whole sweep: ours are every N-th
            for key in keys:
                if not re.fullmatch(r"\d{5}", key) or int(key) >= shard[2] or int(key) in skipped:
                    raise Problem("/runs: member %s, want five digits below sweep_runs %d, not infeasible" % (key, shard[2]))
        else:  # every run from 00000 on, but for those infeasible
            want = ["%05d" % k for k in range(len(keys) + len(skipped)) if k not in skipped]
            if keys != want:
                bad = next((k for k, w in zip(keys, want) if k != w), keys[-1] if keys else "none")
                raise Problem("/runs: member %s breaks the sequence 00000, 00001, ... (gaps only where /infeasible says)" % bad)
        for key in keys:
            where = "/runs/" + key
            run = check_group(runs, "/runs", key)
            check_run(run, where, ncat)
        return len(keys)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    for path in argv[1:]:
        try:
            n = check_file(path)
        except Problem as p:
            print("%s: %s" % (path, p), file=sys.stderr)
            return 1
        except OSError as e:
            print("%s: cannot read: %s" % (path, e), file=sys.stderr)
            return 2
        print("%s: ok (%d runs)" % (path, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
