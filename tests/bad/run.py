#!/usr/bin/python3
"""The bad-input corpus: several hundred inputs lrcnn must refuse cleanly, and the check that it does.

    /usr/bin/python3 tests/bad/run.py path/to/lrcnn [--list] [--class NAME] [--table]

Every case is a command line of lrcnn with one thing wrong in it — a malformed or huge net file,
plan, spec, option, HDF5 file or image, or an output it must not write — built here from a valid
base by one mutation (the cases are data: tests/bad/inputs.py for malformed inputs, tests/bad/faults.py
for numbers planted in real files, faults where results are written, and the importer; their input
files are written into a temporary directory when the corpus runs). A case passes when lrcnn exits with status 2 within TIMEOUT
seconds, prints exactly one line on stderr (with the expected words, where the case names them),
no sanitizer report, and writes nothing: no output file, no temporary left beside it, an existing
file untouched. Prints one line per failing case and a table per input class: cases, clean exit
2, findings. Exit status 0 when every case passed.
"""
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile

TIMEOUT = 60  # seconds; a hang is a finding

from inputs import (SPEC, h5_cases, image_cases, net_cases, option_cases, output_cases, plan_cases,  # noqa: E402
                    spec_cases)
from faults import (BASE, BIG_SPEC, FAULT_CASES, IMPORT_CASES, refusal_problem, run_fault, run_import, value_cases)  # noqa: E402


def all_cases():
    return net_cases() + plan_cases() + spec_cases() + option_cases() + h5_cases() + image_cases() + output_cases() + value_cases()


# Faults where results are written: outputs that are not regular files (made in the case's own
# directory, never under the real /dev), a full file system (a 64 KiB tmpfs, 40 KiB taken, where
# root may mount one), and signals mid-run. (label, target, command with {out}, stderr words)

# --------------------------------------------------------------------------------------------
# Running

def run_case(lrcnn, case, tmp, k):
    cls, label, args, data, want = case
    d = os.path.join(tmp, "c%04d" % k)
    os.makedirs(d)
    subs = {"tmp": d, "o": os.path.join(d, "out.h5"), "spec": os.path.join(tmp, "ok.spec"), "base_part2": BASE.get("part2", ""),
            "existing": os.path.join(d, "existing.h5"), "result": os.path.join(tmp, "result.h5"),
            "emptydir": os.path.join(d, "empty"), "imgdir": os.path.join(d, "img"), "tabledir": os.path.join(d, "tables")}
    with open(subs["existing"], "wb") as fp:
        fp.write(b"keep me")
    os.makedirs(os.path.join(subs["emptydir"], "cat"))
    os.makedirs(subs["tabledir"])
    open(os.path.join(subs["tabledir"], "runs.tsv"), "w").write("keep me")
    if cls == "image" and data is not None:
        os.makedirs(os.path.join(subs["imgdir"], "cat"))
        with open(os.path.join(subs["imgdir"], "cat", "a.ppm"), "wb") as fp:
            fp.write(data)
    elif callable(data):
        subs["file"] = os.path.join(d, "in.h5")
        data(subs["file"])
    elif data is not None:
        subs["file"] = os.path.join(d, "in.txt")
        with open(subs["file"], "w", encoding="utf-8", errors="surrogateescape") as fp:
            fp.write(data)
    argv = [a.format(**subs) if "{" in a and "}" in a else a for a in args]
    before = set(os.listdir(d))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        p = subprocess.run([lrcnn] + argv, cwd=d, capture_output=True, timeout=TIMEOUT, env=env)
        rc, err = p.returncode, p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return "hang (over %d s)" % TIMEOUT
    lines = [l for l in err.splitlines() if l.strip()]
    if "Sanitizer" in err or "runtime error:" in err:
        return "sanitizer report: " + next((l for l in lines if "Sanitizer" in l or "runtime error" in l), "")[:100]
    problem = refusal_problem(rc, lines, want)
    if problem:
        return problem
    after = set(os.listdir(d))
    made = sorted(f for f in after - before if f.endswith((".h5", ".tmp")) or ".tmp" in f or f == "exported")
    if made:
        return "wrote %s" % ", ".join(made)
    if open(subs["existing"], "rb").read() != b"keep me" or open(os.path.join(subs["tabledir"], "runs.tsv")).read() != "keep me":
        return "changed an existing file"
    return None


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    lrcnn, opts = os.path.abspath(argv[1]), argv[2:]
    cases = all_cases()
    if "--class" in opts:
        want = opts[opts.index("--class") + 1]
        cases = [c for c in cases if c[0] == want]
    only = opts[opts.index("--class") + 1] if "--class" in opts else None
    faults = FAULT_CASES if only in (None, "fault") else []
    imports = IMPORT_CASES if only in (None, "import") else []
    if "--list" in opts:
        for c in cases:
            print("%-7s %s" % (c[0], c[1]))
        for c in faults:
            print("%-7s %s" % ("fault", c[0]))
        for c in imports:
            print("%-7s %s" % ("import", c[0]))
        print("%d cases" % (len(cases) + len(faults) + len(imports)))
        return 0
    tally = {}
    with tempfile.TemporaryDirectory(prefix="lrcnn-bad-") as tmp:
        with open(os.path.join(tmp, "ok.spec"), "w") as fp:
            fp.write(SPEC)
        subprocess.run([lrcnn, "sim", "--net", "vgg-small", "--plan", "layer", "-o", os.path.join(tmp, "result.h5")],
                       capture_output=True, check=True)
        with open(os.path.join(tmp, "big.spec"), "w") as fp:
            fp.write(BIG_SPEC)
        for k in (1, 2):  # a sweep in two shards, for merge
            subprocess.run([lrcnn, "sweep", os.path.join(tmp, "ok.spec"), "--shard", "%d/2" % k, "--quiet", "-o",
                            os.path.join(tmp, "part%d.h5" % k)], capture_output=True, check=True)
            BASE["part%d" % k] = os.path.join(tmp, "part%d.h5" % k)
        src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        BASE["profile"] = os.path.join(src, "results", "profile_cpu.h5")
        BASE["calib"], BASE["weights"] = os.path.join(tmp, "calib.h5"), os.path.join(tmp, "weights.h5")
        subprocess.run([lrcnn, "validate", "--net", "vgg-small", "--batch", "2", "--plan", "layer+gist", "-o", BASE["calib"]],
                       capture_output=True, check=True)
        subprocess.run([lrcnn, "train", "--net", "vgg-small", "--iters", "1", "--dump", BASE["weights"]], capture_output=True, check=True)
        for k, case in enumerate(cases):
            why = run_case(lrcnn, case, tmp, k)
            t = tally.setdefault(case[0], [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL %-7s %s: %s" % (case[0], case[1], why), flush=True)
        for k, case in enumerate(faults):
            why = run_fault(lrcnn, case, tmp, k)
            if why and why.startswith("skip:"):
                print("skip fault   %s (%s)" % (case[0], why[6:]), flush=True)
                continue
            t = tally.setdefault("fault", [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL fault   %s: %s" % (case[0], why), flush=True)
        for k, case in enumerate(imports):
            why = run_import(case, tmp, k)
            t = tally.setdefault("import", [0, 0])
            t[0] += 1
            t[1] += why is None
            if why:
                print("FAIL import  %s: %s" % (case[0], why), flush=True)
    digest = hashlib.sha1("\n".join(["%s|%s|%s" % (c[0], c[1], c[2]) for c in cases] +
                                    ["fault|%s|%s" % (c[0], c[2]) for c in faults] +
                                    ["import|%s|%s" % (c[0], c[2]) for c in imports]).encode()).hexdigest()[:12]
    print("\n%-8s %7s %14s %9s" % ("class", "cases", "clean exit 2", "findings"))
    total = [0, 0]
    for cls, (n, ok) in tally.items():
        print("%-8s %7d %14d %9d" % (cls, n, ok, n - ok))
        total[0] += n
        total[1] += ok
    print("%-8s %7d %14d %9d   (corpus %s)" % ("all", total[0], total[1], total[0] - total[1], digest))
    return 0 if total[0] == total[1] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
