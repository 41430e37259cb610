#!/usr/bin/env python3
"""PyTorch 1.13 (CPU) peer for bench/bench_engine.c: one training iteration (forward, loss,
backward, SGD with momentum) of a net built from our own net file by tests/torch_net.py's
independent interpreter, on both cores, batch 2 at 224x224 by default. Prints "PEER NET SECONDS"
(best of N iterations after one warm-up), then its RSS high-water mark and how far that rose above
the process before the net was built (torch imported), for ./lrcnn bench to put beside ours: run
one net per process for the second figure to be that net's alone."""
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch  # noqa: E402
import torch_net  # noqa: E402


def rss_high_water():
    """The process's RSS high-water mark so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    nets = sys.argv[1:] or ["vgg16", "resnet50"]
    batch, iters = int(os.environ.get("BENCH_BATCH", "2")), int(os.environ.get("BENCH_ITERS", "3"))
    torch.set_num_threads(os.cpu_count() or 2)  # torch defaults to 1 thread here; we use both cores
    torch.manual_seed(0)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nets")
    for name in nets:
        rss0 = rss_high_water()
        _, layers = torch_net.parse_net(os.path.join(src, name + ".net"))
        model = torch_net.RefNet(layers)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        shape = layers[0].shape
        x = torch.randn(batch, *shape)
        logits = layers[-2].shape  # classes first; a per-pixel loss (the U-Net's) labels every place
        per_pixel = layers[-1].kind == "loss" and layers[-1].args.get("pixel")
        y = torch.randint(0, logits[0], (batch, *logits[1:]) if per_pixel else (batch,))
        best = float("inf")
        for i in range(iters + 1):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            model(x, y).backward()
            opt.step()
            dt = time.perf_counter() - t0
            if i > 0:
                best = min(best, dt)
        rss = rss_high_water()
        print("PEER %s %.6f %.1f  (torch %s, %d threads, best of %d, RSS high-water %.0f MiB, "
              "%.0f MiB above the process before the net)"
              % (name, best, rss - rss0, torch.__version__, torch.get_num_threads(), iters, rss, rss - rss0))


if __name__ == "__main__":
    main()
