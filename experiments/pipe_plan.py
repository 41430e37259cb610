#!/usr/bin/python3
"""Pipelines under a per-device budget, predicted (lrcnn plan --pipeline; no engine runs, a minute):
VGG-16, VGG-16 with a global-average-pooling classifier (its memory is the convolutions', where
VGG-16's is its 102 M-parameter fc6) and ResNet-50 at 224x224, batch 32 in 8 micro-batches of 4, SGD, over 4 devices, 1F1B,
stage times from the H100 roofline (uncalibrated: no GPU here), NVLink 4. For each per-device budget
from the least any choice needs to 2.5 times it, two searches: stages that all run `layer`, and
stages that each run a plan of their own from the default candidates (layer, ckpt-sqrt, 2ps:4,
2ps:8, overl:4, overl:8); the throughput (images a second over the predicted iteration, bubble
included) and the largest device's exact peak. Then the two solvers at 8 devices (16 micro-batches
of 2), their answers and solve times. Output: results/pipe_plan.txt (every command, then a table
the figure reads: plots/pipe_plan.py). Usage: experiments/pipe_plan.py [BUILD_DIR]"""
import math
import os
import re
import subprocess
import sys

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
LRCNN = os.path.join(BUILD, "lrcnn")
BASE = ["--micro-batches", "8", "--batch", "32", "--schedule", "1f1b", "--device", "h100", "--link", "nvlink"]
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def run(args, log):
    cmd = [LRCNN, "plan", "--pipeline"] + args
    log.append("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    log.append((p.stdout + p.stderr).rstrip("\n"))
    log.append("")
    return p.returncode, p.stdout + p.stderr


def mib(text):
    v, u = text.split()
    return float(v) * UNITS[u] / 2**20


def parse(out):
    """(iteration ms, largest exact peak MiB, largest stage sums MiB, the plans chosen) of an answer."""
    it = float(re.search(r"iteration\s+([\d.]+) ms", out).group(1))
    peaks, sums = [], []
    for line in out.splitlines():
        m = re.match(r"\s+\d+\s+\S+.*?\s+\d+\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s+([\d.]+ \w+)\s*$", line)
        if m:
            peaks.append(mib(m.group(3)))
            sums.append(mib(m.group(4)))
    plans = re.findall(r"stage \d plan: .*\(from (\S+)\)$", out, re.M)
    return it, max(peaks), max(sums), plans


def main():
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    log, rows = ["# commit " + commit, "# " + " ".join(sys.argv)], []
    for net in ["vgg16", "vgg16-gap", "resnet50"]:
        rc, out = run(["4", "--net", net, "--budget", "1"] + BASE, log)
        least = float(re.search(r"least any needs is ([\d.]+) MiB", out).group(1))
        for k in range(31):
            budget = math.ceil(least * (1 + 0.05 * k) * 100) / 100 + 0.01  # MiB: the least is printed rounded
            for label, extra in [("layer", ["--candidates", "layer"]), ("a plan a stage", [])]:
                rc, out = run(["4", "--net", net, "--budget", "%.2fMiB" % budget] + BASE + extra, log)
                if rc == 0:
                    it, peak, sums, plans = parse(out)
                    rows.append("%s\t%s\t%.2f\t%.3f\t%.1f\t%.2f\t%.2f\t%s" % (net, label, budget, it, 32e3 / it, peak, sums, ",".join(plans)))
                else:
                    rows.append("%s\t%s\t%.2f\tnone\t0\t\t\t" % (net, label, budget))
    for net in ["vgg16", "resnet50"]:
        for solver in ["dp", "ilp"]:
            run(["8", "--net", net, "--budget", "2GiB", "--solver", solver, "--micro-batches", "16", "--batch", "32", "--schedule", "1f1b",
                 "--device", "h100"], log)
    log.append("# throughput under a per-device budget (plots/pipe_plan.py): net, stages, budget MiB, iteration ms,")
    log.append("# images/s, largest device's exact peak MiB, its stage sums MiB, each stage's candidate")
    log.append("TABLE\tnet\tstages\tbudget_mib\titeration_ms\timages_per_s\tpeak_mib\tstage_sums_mib\tplans")
    log += ["ROW\t" + r for r in rows]
    os.makedirs("results", exist_ok=True)
    with open("results/pipe_plan.txt", "w") as f:
        f.write("\n".join(log) + "\n")


if __name__ == "__main__":
    main()
