#!/usr/bin/python3
"""Which committed result files are current: written by this tree's code, from its specs, from a
clean tree. Reads attributes only; reruns nothing.

    /usr/bin/python3 tools/check_results.py [--root DIR] [--known LIST] [--all] [FILE.h5 ...]
    /usr/bin/python3 tools/check_results.py --same A.h5 B.h5

Without files: every results/**/*.h5 under the root (default: this file's repository), except the
demo's own file (git-ignored). A file is current when
  - its schema_version equals the code's (io/h5.h, H5_SCHEMA_VERSION);
  - it was written from a clean tree (git_dirty 0) at a commit that is HEAD or an ancestor of it;
  - a sweep's file names its spec relative to the root (not a path of the machine that wrote it),
    that spec exists, and its spec_digest (64-bit FNV-1a of the spec's text) equals the spec's now;
  - its runs name their net files relative to the root.
Prints one line per stale file, "FILE: why; regenerate: COMMAND", then a count; --all prints the
current ones too. --known LIST names files known to be stale (one path relative to the root per
line, '#' comments): they pass, but a listed file that is current, or missing, fails, so the list
only shrinks. Exit status 0 when all are current, 1 when any is stale, 2 on bad usage.
--same: whether two result files hold the same results, attribute for attribute and value for value
(numbers bit for bit), but for the root fields that say when, where and by what they ran
(MACHINE_FIELDS): two runs of one simulation spec on different machines, or a committed file against
its regeneration; prints each difference, exit status 0 when there is none, 1 otherwise.
"""

import glob
import os
import re
import subprocess
import sys

import h5py


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


# What may differ between two runs of one simulation spec (results/SCHEMA.md): when, on which host
# and CPU, with how many threads, under which HDF5 and commit, by which command line.
MACHINE_FIELDS = {"date", "host", "cpu", "threads", "omp_wait_policy", "hdf5_version", "git_commit", "git_dirty",
                  "lrcnn_command"}


def differences(a_path, b_path):
    """Every attribute and dataset that differs between two result files, the root's MACHINE_FIELDS aside."""
    import numpy as np
    out = []

    def walk(a, b, where):
        for k in sorted(set(a.attrs) | set(b.attrs)):
            if where == "/" and k in MACHINE_FIELDS:
                continue
            if k not in a.attrs or k not in b.attrs:
                out.append("%s@%s in one file only" % (where, k))
            elif not np.array_equal(np.asarray(a.attrs[k]), np.asarray(b.attrs[k])):
                out.append("%s@%s: %r vs %r" % (where, k, a.attrs[k], b.attrs[k]))
        if isinstance(a, h5py.Dataset):
            x, y = a[()], b[()]  # strings (variable length) by value, numbers bit for bit
            same = x.tolist() == y.tolist() if a.dtype.hasobject else x.tobytes() == y.tobytes()
            if a.dtype != b.dtype or a.shape != b.shape or not same:
                out.append("%s: data differ" % where)
            return
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append("%s%s in one file only" % (where, k))
            else:
                walk(a[k], b[k], where + k + "/")

    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        walk(a, b, "/")
    return out


def same(a_path, b_path):
    for p in (a_path, b_path):
        if not os.path.isfile(p):
            print("check_results: %s: no such file" % p, file=sys.stderr)
            return 2
    diffs = differences(a_path, b_path)
    for d in diffs:
        print(d)
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        where = ["%s (%s, %s)" % (p, _text(f.attrs.get("cpu", "?")), _text(f.attrs.get("date", "?"))) for p, f in ((a_path, a), (b_path, b))]
    print("%s and %s: %s" % (where[0], where[1], "%d difference%s" % (len(diffs), "s" * (len(diffs) != 1)) if diffs else
                             "the same results (they differ only in %s)" % ", ".join(sorted(MACHINE_FIELDS))))
    return 1 if diffs else 0


def schema_version(root):
    with open(os.path.join(root, "io", "h5.h")) as f:
        m = re.search(r"#define\s+H5_SCHEMA_VERSION\s+(\d+)", f.read())
    if not m:
        raise SystemExit("check_results: io/h5.h has no H5_SCHEMA_VERSION")
    return int(m.group(1))


def is_ancestor(root, commit):
    """True, False, or None when git cannot tell (no repository, no git)."""
    try:
        p = subprocess.run(["git", "-C", root, "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True)
    except OSError:
        return None
    if p.returncode in (0, 1):
        return p.returncode == 0
    known = subprocess.run(["git", "-C", root, "rev-parse", "--verify", "--quiet", "HEAD"], capture_output=True)
    return False if known.returncode == 0 else None  # an unknown commit is not an ancestor


def regenerate(root, rel, attrs):
    spec = _text(attrs.get("spec", ""))
    if spec and os.path.isabs(spec) and os.path.isfile(os.path.join(root, "experiments", os.path.basename(spec))):
        spec = "experiments/" + os.path.basename(spec)  # written before paths were recorded from the root
    if spec and not os.path.isabs(spec):
        return "./lrcnn sweep %s -o %s --force" % (spec, rel)
    if "lrcnn_command" in attrs:
        return _text(attrs["lrcnn_command"])
    return "./lrcnn reproduce"


def problems(root, path, version):
    """Why the file at path is stale (an empty list when it is current)."""
    why = []
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        return ["cannot open (%s)" % e], "./lrcnn reproduce"
    with f:
        a = dict(f.attrs)
        rel = os.path.relpath(path, root)
        if int(a.get("schema_version", 0)) != version:
            why.append("schema_version %s, the code writes %d" % (a.get("schema_version", "missing"), version))
        dirty = int(a.get("git_dirty", -1))
        if dirty != 0:
            why.append("written from a tree with local changes" if dirty == 1 else "no git_dirty flag")
        commit = _text(a.get("git_commit", "unknown"))
        anc = is_ancestor(root, commit) if commit != "unknown" else False
        if anc is False:
            why.append("commit %s is not HEAD or an ancestor of it" % commit)
        spec = _text(a.get("spec", ""))
        if spec:
            if os.path.isabs(spec):
                why.append("spec recorded as a path of the machine that wrote it (%s)" % spec)
            elif not os.path.isfile(os.path.join(root, spec)):
                why.append("its spec %s is not in the tree" % spec)
            else:
                with open(os.path.join(root, spec), "rb") as s:
                    now = fnv1a64(s.read())
                had = _text(a.get("spec_digest", ""))
                if had != now:
                    why.append("spec %s changed since (digest %s, now %s)" % (spec, had or "missing", now))
        runs = f.get("runs")
        if runs is not None and len(runs):
            net_path = _text(runs[sorted(runs)[0]].attrs.get("net_path", ""))
            if os.path.isabs(net_path):
                why.append("net files recorded as paths of the machine that wrote it (%s)" % net_path)
        return why, regenerate(root, rel, a)


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files, show_all, known_path = [], False, None
    args = iter(argv[1:])
    for x in args:
        if x == "--same":
            pair = [next(args, None), next(args, None)]
            if None in pair or next(args, None) is not None:
                print("check_results: --same takes two result files and nothing after them", file=sys.stderr)
                return 2
            return same(*pair)
        if x == "--root":
            root = os.path.abspath(next(args, ""))
        elif x == "--known":
            known_path = next(args, "")
        elif x == "--all":
            show_all = True
        elif x in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif x.startswith("-"):
            print("check_results: unknown option %s" % x, file=sys.stderr)
            return 2
        else:
            files.append(x)
    version = schema_version(root)
    if not files:
        ignored = {os.path.join(root, "results", "demo.h5")}
        files = sorted(p for p in glob.glob(os.path.join(root, "results", "**", "*.h5"), recursive=True) if p not in ignored)
    known = {}
    if known_path:
        with open(known_path) as k:
            for line in k:
                line = line.split("#", 1)[0].strip()
                if line:
                    known[line.split()[0]] = False
    stale = 0
    for p in files:
        if not os.path.isfile(p):
            print("check_results: %s: no such file" % p, file=sys.stderr)
            return 2
        why, cmd = problems(root, p, version)
        rel = os.path.relpath(p, root) if os.path.abspath(p).startswith(root + os.sep) else p
        if rel in known:
            known[rel] = True
            if not why:
                stale += 1
                print("%s: current, but listed in %s as stale: take it off the list" % (rel, known_path))
            elif show_all:
                print("%s: stale, listed (%s)" % (rel, "; ".join(why)))
        elif why:
            stale += 1
            print("%s: %s; regenerate: %s" % (rel, "; ".join(why), cmd))
        elif show_all:
            print("%s: current" % rel)
    for rel in (r for r, seen in known.items() if not seen):
        stale += 1
        print("%s: listed in %s but not checked (no such result file): take it off the list" % (rel, known_path))
    listed = sum(known.values())
    print("%d of %d result files stale%s" % (stale, len(files), ", besides %d listed in %s" % (listed, known_path) if listed else ""))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
