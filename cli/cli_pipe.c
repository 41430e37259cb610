/* lrcnn pipe: the memory and time of pipelined model-parallel training (sim/predict/pipe.h) — a
 * net cut into stages over devices, a batch into micro-batches, one of three schedules — per
 * device and for the iteration, from one lowering of the net at the micro-batch size under a plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/units.h"
#include "sim/planner/pipe_split.h"

static const char usage[] =
    "usage: lrcnn pipe --net NET --devices P --micro-batches M [--schedule gpipe|1f1b|interleaved] [--chunks V]\n"
    "                  [--batch N] [--image S|HxW] [--optimizer sgd|adam] [--plan PLAN] [--bn MODE]\n"
    "                  [--profile PROFILE.h5 | --device NAME] [--link nvlink|pcie4|pcie5|ib|GBPS] [--budget BYTES]\n"
    "\n"
    "Pipelined model parallelism: the net cut at clean cuts into P stages (V a device, interleaved)\n"
    "balancing their forward times, the batch N into M micro-batches of N/M, and each device running its\n"
    "stages' forwards and backwards in the schedule's order (gpipe: every forward, then every backward;\n"
    "1f1b: PipeDream-Flush; interleaved: Megatron-LM's 1F1B over V chunks a device, M a multiple of P).\n"
    "From that order the command walks how many micro-batches each device holds at once, and prints per\n"
    "device: its stages, micro-batches in flight at the peak, what a stage keeps per micro-batch (its\n"
    "backward's reads under PLAN), its parameters, gradients and optimizer state, and its peak: those, the\n"
    "stashes in flight, the running stage's working bytes and a buffer for each activation and gradient it\n"
    "receives; then the iteration's time (each device in its order, an op when its input has crossed the\n"
    "link) and the bubble. Stage times come from the device's model (--profile, else the --device\n"
    "roofline, cpu by default); the link between devices: nvlink 450 GB/s (NVLink 4, H100), pcie4 25,\n"
    "pcie5 50, ib 50 (InfiniBand NDR 400 Gb/s), or GB/s. --budget B (GPipe and 1F1B): the stages instead\n"
    "from a dynamic program over the clean cuts, the split whose slowest stage (forward and backward of\n"
    "a micro-batch) is fastest with every device's peak within B; exit 2 naming the least budget any\n"
    "split needs when none fits. Defaults: --schedule 1f1b --chunks 1 --plan layer --batch 32\n"
    "--optimizer sgd --link nvlink.\n"
    "\n"
    "example: lrcnn pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 --schedule 1f1b\n"
    "example: lrcnn pipe --net vgg16 --devices 2 --micro-batches 4 --schedule interleaved --chunks 2 --plan ckpt-sqrt\n"
    "example: lrcnn pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 --budget 300MiB --plan ckpt-sqrt\n";

/* GB/s of a named link, or a number; -1 if neither. */
static double link_gbps(const char *s)
{
    static const struct { const char *name; double gbps; } links[] = {{"nvlink", 450}, {"pcie4", 25}, {"pcie5", 50}, {"ib", 50}};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++)
        if (!strcmp(s, links[i].name)) return links[i].gbps;
    char *end;
    double v = strtod(s, &end);
    return end != s && !*end && v > 0 && v < 1e6 ? v : -1;
}

static void print_devices(const pipe_cfg *c, const net *n, const pipe_stage *st, int mb_size, double busy, double span)
{
    char a[32], b[32], d[32];
    printf("  %-6s %-40s %9s %12s %12s %12s\n", "device", "stages (layers)", "in flight", "stash / mb", "persistent", "peak");
    int S = pipe_stages(c);
    for (int dev = 0; dev < c->devices; dev++) {
        int64_t persistent = 0, kept = 0;
        char names[256] = "";
        size_t at = 0;
        for (int s = dev; s < S; s += c->devices) {
            persistent += st[s].persistent, kept += st[s].stash;
            at += (size_t)snprintf(names + at, sizeof names - (at < sizeof names ? at : sizeof names), "%s%s..%s", at ? ", " : "",
                                   n->layers[st[s].first].name, n->layers[st[s].last].name);
        }
        printf("  %-6d %-40.40s %9d %12s %12s %12s\n", dev, names, pipe_in_flight(c, dev, NULL, NULL, NULL),
               units_fmt_bytes(kept, a, sizeof a), units_fmt_bytes(persistent, b, sizeof b),
               units_fmt_bytes(pipe_device_peak(c, dev, st), d, sizeof d));
    }
    printf("\n  iteration  %.1f ms (%d micro-batches of %d); the devices compute %.1f%% of it (bubble %.1f%%)\n", span / 1e3, c->micro,
           mb_size, 100 * busy, 100 * (1 - busy));
    printf("  peak = persistent + the stashes of the micro-batches in flight + the running stage's working bytes\n"
           "  + a buffer for each activation and gradient the device receives (predicted, per device)\n");
}

int cli_pipe(int argc, char **argv)
{
    cli_config o = {.batch = 32, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *devices = NULL, *micro = NULL, *sched_name = "1f1b", *chunks = NULL, *device = NULL, *link = "nvlink", *budget_s = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, "pipe", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--devices", &v)) > 0) devices = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--micro-batches", &v)) > 0) micro = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--schedule", &v)) > 0) sched_name = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--chunks", &v)) > 0) chunks = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--device", &v)) > 0) device = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--link", &v)) > 0) link = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--budget", &v)) > 0) budget_s = v;
        if (got <= 0) return cli_unknown("pipe", argc, argv, i, got);
    }
    pipe_cfg c = {.chunks = 1};
    if (!o.net || !devices || !micro) return cli_fail("pipe", "--net, --devices and --micro-batches are required (see lrcnn pipe --help)");
    if (cli_parse_int(devices, 1, 64, &c.devices)) return cli_fail("pipe", "--devices %s: expected 1..64", devices);
    if (cli_parse_int(micro, 1, 4096, &c.micro)) return cli_fail("pipe", "--micro-batches %s: expected 1..4096", micro);
    if (chunks && cli_parse_int(chunks, 1, 16, &c.chunks)) return cli_fail("pipe", "--chunks %s: expected 1..16", chunks);
    int kind = pipe_kind_of(sched_name);
    if (kind < 0) return cli_fail("pipe", "--schedule %s: expected gpipe, 1f1b or interleaved", sched_name);
    c.kind = (pipe_kind)kind;
    double gbps = link_gbps(link);
    if (gbps < 0) return cli_fail("pipe", "--link %s: expected nvlink, pcie4, pcie5, ib or GB/s", link);
    if (o.iters || o.seed || o.host || o.calibrate || o.out) return cli_fail("pipe", "it predicts: --iters, --seed, -o and the like do not apply");
    err e;
    int64_t budget = 0;
    if (budget_s && units_parse_bytes(budget_s, &budget)) return cli_fail("pipe", "--budget %s: expected bytes like 16GiB, 12G, 80e9", budget_s);
    if (pipe_check(&c, &e)) return cli_fail("pipe", "%s", e.msg);
    if (o.batch % c.micro) return cli_fail("pipe", "--batch %d is not a multiple of --micro-batches %d", o.batch, c.micro);
    sched_cfg cfg = {.batch = o.batch / c.micro, .optimizer = o.optimizer};
    cli_inputs in;
    if (cli_inputs_load(&in, &o, device, &cfg, &e)) return cli_fail("pipe", "%s", e.msg);
    int S = pipe_stages(&c), rc = CLI_OK;
    int *first = calloc((size_t)S + 1, sizeof *first);
    pipe_stage *st = calloc((size_t)S + 1, sizeof *st);
    double *fw = calloc((size_t)S + 1, sizeof *fw), *bw = calloc((size_t)S + 1, sizeof *bw), *lk = calloc((size_t)S + 1, sizeof *lk);
    plan p;
    if (!first || !st || !fw || !bw || !lk) abort();
    if (cli_plan_parse(&p, &in.n, o.plan ? o.plan : "layer", o.bn, &cfg, &in.dev, &e)) {
        rc = cli_fail("pipe", "%s", e.msg);
    } else if (budget ? pipe_split(&in.n, &p, &cfg, &in.dev, &c, budget, first, &e) : pipe_balanced_cuts(&in.n, &cfg, &in.dev, S, first, &e)) {
        rc = cli_fail("pipe", "%s", e.msg);
        plan_free(&p);
    } else {
        if (pipe_stage_costs(&in.n, &p, &cfg, &in.dev, first, S, st, &e)) rc = cli_fail("pipe", "%s", e.msg);
        plan_free(&p);
    }
    if (rc == CLI_OK) {
        double *tail = calloc((size_t)c.devices + 1, sizeof *tail);
        if (!tail) abort();
        for (int s = 0; s < S; s++)
            fw[s] = st[s].fwd_us, bw[s] = st[s].bwd_us, lk[s] = (double)st[s].boundary / (gbps * 1e3), tail[pipe_device_of(&c, s)] += st[s].update_us;
        double busy, span = pipe_makespan(&c, fw, bw, lk, tail, &busy);
        free(tail);
        char t[600];
        printf("%s @ %dx%d, batch %d in %d micro-batches of %d, %s, plan %s: %s over %d devices%s\n  time model: %s; link %g GB/s\n\n",
               in.n.name, in.n.layers[0].h, in.n.layers[0].w, o.batch, c.micro, cfg.batch, cli_optimizer_name(o.optimizer),
               o.plan ? o.plan : "layer", pipe_kind_name(c.kind), c.devices, c.kind == PIPE_INTERLEAVED ? ", interleaved" : "",
               cli_time_source(&in.dev, t, sizeof t), gbps);
        if (budget) {
            char b[32];
            printf("  stages: the split whose slowest stage is fastest with every device's peak within %s\n\n", units_fmt_bytes(budget, b, sizeof b));
        }
        print_devices(&c, &in.n, st, cfg.batch, busy, span);
    }
    free(first), free(st), free(fw), free(bw), free(lk);
    cli_inputs_free(&in);
    return rc;
}
