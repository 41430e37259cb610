"""The bad-input corpus's cases where results are written or trusted: numbers planted in real files
(value), faults of the file system and signals (fault), and the importer's inputs (import);
tests/bad/run.py runs them."""
import os
import subprocess

TIMEOUT = 60



def refusal_problem(rc, lines, want):
    """What is wrong with a refusal (exit status rc, stderr's non-empty lines): None when it is exit
    2 with one line holding `want`. Every class of the corpus judges its cases by this."""
    if rc < 0:
        return "killed by signal %d" % -rc
    if rc != 2:
        return "exit %d, want 2%s" % (rc, (": " + lines[-1][:100]) if lines else "")
    if len(lines) != 1:
        return "%d stderr lines, want 1: %s" % (len(lines), " | ".join(lines)[:160])
    if want and want not in lines[0]:
        return "stderr lacks '%s': %s" % (want, lines[0][:120])
    return None


BASE = {}  # real files made once per corpus run (main): the numbers below are planted in copies of them


def value_cases():
    """Numbers no reader may trust: infinities, NaNs, negatives and huge values planted in real files
    (a device profile, a calibration, weights), parts of a sweep missing what a run needs, and sizes
    and counts past what any machine has or with spaces inside."""
    import shutil
    import h5py
    import numpy as np

    def planted(base, edit):
        def w(path):
            shutil.copy(BASE[base], path)
            with h5py.File(path, "r+") as f:
                edit(f)
        return w

    def table(name, field, value, row=0):
        def edit(f):
            t = f[name][()]
            t[field][row] = value
            f[name][...] = t
        return edit

    def weight(value):
        def edit(f):
            w = f["params/conv1_1/weight"][()]
            w.flat[5] = value
            f["params/conv1_1/weight"][...] = w
        return edit

    def encoded(value):
        def edit(f):
            for run in f["runs"].values():
                if "measured/encoded" in run:
                    table_edit = run["measured/encoded"][()]
                    table_edit["factor_measured"][0] = value
                    run["measured/encoded"][...] = table_edit
        return edit

    def drop(what):
        def edit(f):
            run = f["runs"][sorted(f["runs"])[0]]
            if what.startswith("@"):
                del run.attrs[what[1:]]
            else:
                del run[what]
        return edit

    out = []
    for v in (np.inf, -np.inf, np.nan, -5.0, 1e300):
        out.append(("value", "profile: a sample's time %g" % v, ["plan", "--net", "vgg-small", "--budget", "1GiB", "--profile", "{file}"],
                    planted("profile", table("profile/samples", "us", v)), "not a finite number"))
        out.append(("value", "profile: a sample's size %g" % v, ["sim", "--net", "vgg-small", "--profile", "{file}"],
                    planted("profile", table("profile/samples", "x", v)), "not a finite number"))
        out.append(("value", "profile: a check's measured time %g" % v, ["sim", "--net", "vgg-small", "--profile", "{file}"],
                    planted("profile", table("profile/checks", "measured_us", v)), "not a finite number"))
        out.append(("value", "calibration: a measured factor %g" % v, ["sim", "--net", "vgg-small", "--plan", "layer+gist", "--calibrate", "{file}"],
                    planted("calib", encoded(v)), "not a finite number"))
        if not (v == -5.0 or v == 1e300):
            out.append(("value", "weights: a weight %g" % v, ["train", "--net", "vgg-small", "--iters", "1", "--init-weights", "{file}"],
                        planted("weights", weight(v)), "finite"))
    for what in ("prediction", "prediction/replay", "layers", "plan_segments", "@plan", "@batch"):
        out.append(("value", "merge: a part's run without %s" % what.lstrip("@"), ["merge", "{o}", "{file}", BASE_PATH("part2")],
                    planted("part1", drop(what)), "not a complete run"))
    for opt, v in (("--budget", "9e18"), ("--budget", "2EiB"), ("--budget", " 8GiB"), ("--budget", "8 GiB"), ("--batch", " 8"),
                   ("--batch", "8 "), ("--iters", "\t2")):
        args = ["plan", "--net", "vgg-small", opt, v] + (["--budget", "1GiB"] if opt != "--budget" else [])
        out.append(("value", "%s '%s'" % (opt, v), args, None, None))
    for p in ("layer  bn=frozen", "2ps: 4", "ckpt :3", "layer\tbn=frozen", "rows(2ps,4)@c1..r1;  layer@p1..l"):
        out.append(("value", "--plan '%s'" % p, ["sim", "--net", "vgg-small", "--plan", p], None, "column"))
    return out


def BASE_PATH(name):
    return "{base_%s}" % name



SIM = ["sim", "--net", "vgg-small", "--plan", "layer,2ps:2,ckpt-sqrt"]
FAULT_CASES = [
    ("--force over a FIFO", "fifo", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("--force over a device node", "chardev", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("--force over a symbolic link", "symlink", SIM + ["-o", "{out}", "--force"], "not a regular file"),
    ("merge --force over a FIFO", "fifo", ["merge", "{out}", "{part1}", "{part2}", "--force"], "not a regular file"),
    ("train --dump --force over a FIFO", "fifo", ["train", "--net", "vgg-small", "--iters", "1", "--dump", "{out}", "--force"],
     "not a regular file"),
    ("sim -o on a full disk", "fullfs", SIM + ["-o", "{out}"], "No space left"),
    ("train -o on a full disk", "fullfs", ["train", "--net", "vgg-small", "--iters", "1", "-o", "{out}"], "No space left"),
    ("validate -o on a full disk", "fullfs", ["validate", "--net", "vgg-small", "--plan", "layer,2ps:2", "-o", "{out}"], "No space left"),
    ("merge on a full disk", "fullfs", ["merge", "{out}", "{part1}", "{part2}"], "No space left"),
    ("export -o on a full disk", "fullfs", ["export", "{committed}", "-o", "{outdir}"], "No space left"),
    ("sweep -o on a completely full disk", "fulldisk", ["sweep", "{spec}", "-o", "{out}"], "No space left"),
    ("SIGTERM mid-sweep", "signal:15", ["sweep", "{bigspec}", "-o", "{out}"], None),
    ("SIGINT mid-validate", "signal:2", ["validate", "--net", "vgg16", "--image", "64", "--batch", "2",
                                         "--plan", "layer,2ps:2,overl:2", "-o", "{out}"], None),
]

# The importer (tools/torch2net.py) under the same rules: hostile or broken model files, bad names
# and outputs. (label, model file text or None, arguments with {model} and {out}, stderr words)
GOOD_MODEL = """import torch.nn as nn
def f():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
"""
IMPORT_CASES = [
    ("a model file that exits 0", "import sys\nsys.exit(0)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a model file that exits 3", "import sys\nsys.exit(3)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a factory that exits", "import sys\ndef f():\n    sys.exit(0)\n", ["{model}:f", "-o", "{out}"], "exits"),
    ("a model file that raises", "raise RuntimeError('no\\nway')\n", ["{model}:f", "-o", "{out}"], "does not load"),
    ("a factory that raises", "def f():\n    raise ValueError('bad')\n", ["{model}:f", "-o", "{out}"], "failed"),
    ("a factory returning no module", "def f():\n    return 3\n", ["{model}:f", "-o", "{out}"], "nn.Module"),
    ("a model file with a syntax error", "def f(:\n", ["{model}:f", "-o", "{out}"], "does not load"),
    ("no such factory", GOOD_MODEL, ["{model}:g", "-o", "{out}"], "has no"),
    ("no such model file", None, ["{tmp}/nope.py:f", "-o", "{out}"], "no such file"),
    ("not a torchvision model", None, ["not_a_model", "-o", "{out}"], "not a torchvision model"),
    ("--name with a newline", GOOD_MODEL, ["{model}:f", "--image", "8", "--name", "a\nconv x c=3", "-o", "{out}"], "--name"),
    ("--name with a space", GOOD_MODEL, ["{model}:f", "--image", "8", "--name", "a b", "-o", "{out}"], "--name"),
    ("--channels 0", GOOD_MODEL, ["{model}:f", "--image", "8", "--channels", "0", "-o", "{out}"], "--channels"),
    ("--image 0", GOOD_MODEL, ["{model}:f", "--image", "0", "-o", "{out}"], "--image"),
    ("an unknown option", GOOD_MODEL, ["{model}:f", "--bogus", "-o", "{out}"], "unrecognized"),
    ("-o in a missing directory", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{tmp}/nodir/x.net"], "no directory"),
    ("-o an existing file", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{existing}"], "exists"),
    ("--force over a FIFO", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{fifo}", "--force"], "not a regular file"),
    ("-o a directory", GOOD_MODEL, ["{model}:f", "--image", "8", "-o", "{tmp}"], "directory"),
]


def run_import(case, tmp, k):
    label, model, args, want = case
    d = os.path.join(tmp, "i%04d" % k)
    os.makedirs(d)
    subs = {"tmp": d, "out": os.path.join(d, "out.net"), "model": os.path.join(d, "model.py"),
            "existing": os.path.join(d, "existing.net"), "fifo": os.path.join(d, "fifo")}
    if model is not None:
        with open(subs["model"], "w") as fp:
            fp.write(model)
    with open(subs["existing"], "w") as fp:
        fp.write("keep me")
    os.mkfifo(subs["fifo"])
    before = set(os.listdir(d))
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = [a.format(**subs) if "{" in a else a for a in args]
    try:
        p = subprocess.run(["/usr/bin/python3", os.path.join(src, "tools", "torch2net.py")] + argv, cwd=d, capture_output=True,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    problem = refusal_problem(p.returncode, lines, want)
    if problem:
        return problem
    if p.stdout:
        return "wrote %d bytes on stdout" % len(p.stdout)
    left = sorted(set(os.listdir(d)) - before)
    if left:
        return "left %s" % ", ".join(left)
    if open(subs["existing"]).read() != "keep me":
        return "changed an existing file"
    return None


BIG_SPEC = """name = big
nets = resnet50, unet
batch = 8, 16, 32
image = 224, 320
plans = layer, 2ps:2..8, overl:2..8, 2ps:8 bn=train-recompute, overl:8 bn=train-recompute
"""  # seconds of work (bn=train-recompute's passes), so that a signal lands mid-sweep


def run_fault(lrcnn, case, tmp, k):
    """None when the fault is met cleanly; 'skip: why' when this machine cannot stage it; else what went wrong."""
    import signal
    import stat
    import time
    label, target, args, want = case
    d = os.path.join(tmp, "f%04d" % k)
    os.makedirs(d)
    where = d
    out = os.path.join(d, "out.h5")
    if target == "fifo":
        os.mkfifo(out)
    elif target == "chardev":
        try:
            os.mknod(out, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # the null device's numbers, in our own directory
        except PermissionError:
            return "skip: mknod needs root"
    elif target == "symlink":
        os.symlink(os.path.join(d, "elsewhere.h5"), out)
    elif target in ("fullfs", "fulldisk"):
        where = os.path.join(d, "fs")
        os.makedirs(where)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where], capture_output=True).returncode:
            return "skip: cannot mount a small tmpfs (needs root)"
        out = os.path.join(where, "out.h5")
        with open(os.path.join(where, "fill"), "wb") as fp:
            fp.write(b"\0" * (56 << 10 if target == "fullfs" else 64 << 10))
    before = {f: os.lstat(os.path.join(where, f)) for f in os.listdir(where)}
    subs = {"out": out, "outdir": os.path.join(where, "tables"), "result": os.path.join(tmp, "result.h5"),
            "spec": os.path.join(tmp, "ok.spec"), "bigspec": os.path.join(tmp, "big.spec"),
            "part1": os.path.join(tmp, "part1.h5"), "part2": os.path.join(tmp, "part2.h5"),
            "committed": os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                      "results", "arena.h5")}
    argv = [a.format(**subs) if "{" in a else a for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        if target.startswith("signal:"):
            sig = int(target.split(":")[1])
            p = subprocess.Popen([lrcnn] + argv, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                 restore_signals=True, start_new_session=True)
            t0 = time.time()
            while time.time() - t0 < 30 and not any(".tmp" in f for f in os.listdir(d)) and p.poll() is None:
                time.sleep(0.05)
            if p.poll() is not None:
                return "finished before the signal (exit %d)" % p.returncode
            time.sleep(0.3)
            os.kill(p.pid, sig)
            _, err = p.communicate(timeout=TIMEOUT)
            rc = p.returncode
            if rc != -sig:
                return "exit %s after signal %d, want death by it" % (rc, sig)
            lines = []
        else:
            p = subprocess.run([lrcnn] + argv, cwd=d, capture_output=True, timeout=TIMEOUT, env=env)
            rc, err = p.returncode, p.stderr
            notes = ("warning: load average", "merge: the parts were written from a tree with local changes")  # not errors
            lines = [l for l in err.decode("utf-8", "replace").splitlines() if l.strip() and not l.startswith(notes)]
            problem = refusal_problem(rc, lines, want)
            if problem:
                return problem
        after = {f: os.lstat(os.path.join(where, f)) for f in os.listdir(where)}
        left = sorted(set(after) - set(before))
        if left:
            return "left %s" % ", ".join(left)
        changed = [f for f in before if (before[f].st_mode, before[f].st_ino, before[f].st_size) !=
                   (after[f].st_mode, after[f].st_ino, after[f].st_size)]
        if changed:
            return "changed %s" % ", ".join(changed)
        return None
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    finally:
        if target in ("fullfs", "fulldisk"):
            subprocess.run(["umount", where], capture_output=True)


