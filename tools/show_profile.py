#!/usr/bin/env python3
"""Prints a device profile's checks (lrcnn calibrate's /profile/checks, results/SCHEMA.md): each plan's
iteration time as the fitted model predicts it beside the engine's measured median, the fitting plans
(in-sample) first, then the held-out ones, with the command and commit that wrote the file.
Usage: tools/show_profile.py PROFILE.h5"""
import sys

import h5py


def main(path):
    f = h5py.File(path, "r")
    a = f.attrs
    if a.get("kind") != "profile":
        sys.exit(f"{path}: not a device profile (root attribute kind is {a.get('kind')!r})")
    dirty = " (with uncommitted changes)" if a.get("git_dirty") else ""
    print(f"# {path}: written by `{a['lrcnn_command']}` at commit {a['git_commit']}{dirty}, {a['date']}, "
          f"{a['threads']} threads")
    print("# predicted iteration time (the fitted model) vs measured median; fitting plans first (in-sample)\n")
    print(f"  {'net':12s} {'batch':>5s}  {'plan':24s} {'predicted':>12s} {'measured':>12s} {'error':>8s} {'fitted':>8s}")
    c = f["profile/checks"][()]
    for held in (0, 1):
        if held:
            print("  held out of the fit:")
        for r in c[c["held_out"] == held]:
            p, m = r["predicted_us"], r["measured_us"]
            print(f"  {r['net'].decode():12s} {r['batch']:5d}  {r['plan'].decode():24s} {p / 1e3:10.1f} ms "
                  f"{m / 1e3:10.1f} ms {100 * (p - m) / m:+7.1f}% {100 * r['fitted']:7.0f}%")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[-1])
    main(sys.argv[1])
