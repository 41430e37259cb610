#!/usr/bin/python3
"""tools/check_results.py on files made stale one way at a time: a file written now by the built
lrcnn from this tree's spec passes when the tree is clean, and each of an old schema, a changed
spec, a dirty-tree flag, a commit outside this history, a machine's absolute spec path and
absolute net paths is named; --known passes a listed stale file and fails a listed current one.
Two runs of one simulation spec, from different directories with the spec named differently, are
the same file value for value but for the fields that say when, where and by what it ran, and
--same says so. --rerun regenerates a simulation file from its spec and passes it unchanged, and
names one whose numbers the code would no longer write.

    /usr/bin/python3 tests/test_check_results.py path/to/lrcnn
"""

import os
import shutil
import subprocess
import sys
import tempfile

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "tools", "check_results.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from check_results import MACHINE_FIELDS, differences  # noqa: E402
fails = 0


def check(label, ok, detail=""):
    global fails
    print("%s %s%s" % ("ok  " if ok else "FAIL", label, (": " + detail) if detail and not ok else ""))
    fails += not ok


def run_check(*args):
    p = subprocess.run([sys.executable, TOOL, "--root", ROOT] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main(lrcnn):
    tmp = tempfile.mkdtemp()
    try:
        # a file written now from a spec of the tree (simulation only: seconds)
        good = os.path.join(tmp, "good.h5")
        subprocess.run([lrcnn, "sweep", os.path.join(ROOT, "experiments", "arena.spec"), "-o", good, "--quiet"], check=True,
                       stdout=subprocess.DEVNULL)
        with h5py.File(good, "r") as f:
            clean = int(f.attrs["git_dirty"]) == 0
            check("the spec recorded from the root", f.attrs["spec"] == "experiments/arena.spec", str(f.attrs["spec"]))
            net_path = f["runs/00000"].attrs["net_path"]
            check("net files recorded from the root", net_path == "nets/vgg16.net", str(net_path))
        if not clean:  # a working tree with local changes writes dirty files: mark this one clean to test the rest
            with h5py.File(good, "r+") as f:
                f.attrs["git_dirty"] = 0
        rc, out = run_check(good)
        check("a file written now is current", rc == 0 and "0 of 1" in out, out)

        def variant(name, change, want):
            path = os.path.join(tmp, name.replace(" ", "_") + ".h5")
            shutil.copy(good, path)
            with h5py.File(path, "r+") as f:
                change(f)
            rc, out = run_check(path)
            check("%s is stale" % name, rc == 1 and want in out and "regenerate: " in out, out)
            return path

        variant("old schema", lambda f: f.attrs.modify("schema_version", 1), "schema_version 1")
        changed = variant("changed spec", lambda f: f.attrs.modify("spec_digest", "0123456789abcdef"), "changed since")
        dirty = variant("dirty tree", lambda f: f.attrs.modify("git_dirty", 1), "local changes")
        variant("foreign commit", lambda f: f.attrs.modify("git_commit", "deadbee"), "not HEAD or an ancestor")
        variant("absolute spec", lambda f: f.attrs.modify("spec", "/home/someone/lrcnn/experiments/arena.spec"),
                "path of the machine")
        variant("absolute net path", lambda f: f["runs/00000"].attrs.modify("net_path", "/home/someone/nets/vgg16.net"),
                "net files recorded")

        # the same simulation from another directory, its spec named another way: the same file but for
        # the fields that say when, where and by which command it ran
        again = os.path.join(tmp, "again.h5")
        subprocess.run([lrcnn, "sweep", "experiments/arena.spec", "-o", again, "--quiet"], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        diffs = differences(good, again)
        check("two runs of a simulation spec differ only in %s" % ", ".join(sorted(MACHINE_FIELDS)), not diffs,
              "; ".join(diffs[:5]))
        seen = differences(good, changed)
        check("... and the comparison sees the one changed attribute", len(seen) == 1 and "spec_digest" in seen[0], str(seen))
        rc, out = run_check("--same", good, again)
        check("--same: the same results", rc == 0 and "the same results" in out, out)
        rc, out = run_check("--same", good, changed)
        check("--same: one difference, named", rc == 1 and "spec_digest" in out and out.rstrip().endswith(": 1 difference"), out)

        # --rerun: the file regenerated from its spec; one number changed is named (a run's predicted
        # peak, as if the simulator had changed since the file was written)
        rc, out = run_check("--rerun", lrcnn, good)
        check("--rerun: a file written now regenerates the same", rc == 0 and "0 of 1 simulation result files differ" in out, out)
        moved = os.path.join(tmp, "moved.h5")
        shutil.copy(good, moved)
        with h5py.File(moved, "r+") as f:
            peak = f["runs/00000/prediction/replay"].attrs["peak"]
            f["runs/00000/prediction/replay"].attrs.modify("peak", peak + 1)
        rc, out = run_check("--rerun", lrcnn, moved)
        check("--rerun: a changed number is named with the command", rc == 1 and "moved.h5: 1 difference" in out and
              "prediction/replay/@peak" in out and "regenerate: ./lrcnn sweep experiments/arena.spec" in out, out)

        known = os.path.join(tmp, "STALE")  # files outside the root are listed as given
        with open(known, "w") as k:
            k.write("# known\n%s  # the dirty one\n" % dirty)
        rc, out = run_check("--known", known, dirty)
        check("--known passes a listed stale file", rc == 0, out)
        with open(known, "w") as k:
            k.write("%s\n" % good)
        rc, out = run_check("--known", known, good)
        check("--known fails a listed file that is current", rc == 1 and "take it off the list" in out, out)
    finally:
        shutil.rmtree(tmp)
    print("%d failed" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
