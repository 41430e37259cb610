/* lrcnn plan: the largest batch (--max-batch) or square input (--max-image) whose predicted peak
 * fits a memory budget, for each plan. The budget is compared with the replay peak (the engine's
 * allocated bytes); peaks grow monotonically with batch and input size, so a doubling search
 * followed by bisection finds the boundary. */
#include <string.h>

#include "cli/cli.h"


static const char *usage =
    "usage: lrcnn plan --budget BYTES --net NET (--max-batch | --max-image) [--plan PLANS]\n"
    "                  [--image S] [--batch N] [--optimizer sgd|adam] [--bn MODE] [--calibrate RUNS.h5]\n"
    "\n"
    "For each plan, the largest batch (at --image, default the net's) or the largest square input (at\n"
    "--batch, default 8) whose predicted peak (replay) fits BYTES (16GiB, 12G, 80e9 ...).\n"
    "\n"
    "example: lrcnn plan --max-batch --budget 12GiB --net vgg16 --plan layer,2ps:6,overl-h\n";

int cli_plan(int argc, char **argv)
{
    cli_config o = {.plan = "layer,ckpt-sqrt,vdnn-all,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h", .batch = 8,
                    .optimizer = SCHED_ADAM, .host_budget = -1};
    const char *budget = NULL, *v;
    int mode = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--max-batch") || !strcmp(argv[i], "--max-image")) {
            mode = mode ? -1 : argv[i][6] == 'b' ? 1 : 2;
            continue;
        }
        int got = cli_common(argc, argv, &i, "plan", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--budget", &v)) > 0) budget = v;
        else return cli_unknown("plan", argc, argv, i, got);
    }
    const char *plans = o.plan, *bn = o.bn;
    cli_probe pr = {.net_name = o.net, .image = o.image, .batch = o.batch, .cfg = {.batch = o.batch, .optimizer = o.optimizer}};
    if (mode <= 0) return cli_fail("plan", "say --max-batch or --max-image (one of them)");
    if (!budget) return cli_fail("plan", "--budget is required (e.g. --budget 16GiB)");
    if (units_parse_bytes(budget, &pr.budget)) return cli_fail("plan", "--budget %s: expected bytes like 16GiB, 12G, 80e9", budget);
    if (!pr.net_name) return cli_fail("plan", "--net is required");
    err e;
    net n;
    enc_calib cal; /* data-sized encodings at measured densities and ratios (sim --help) */
    if (cli_load_calib(o.calibrate, &cal, &pr.cfg, &e)) return cli_fail("plan", "%s", e.msg);
    if (cli_load_net(&n, pr.net_name, pr.image, &e)) {
        enc_calib_free(&cal);
        return cli_fail("plan", "%s", e.msg);
    }
    if (!pr.image) pr.image = n.layers[0].h;
    char **items;
    int count;
    if (plan_list_expand(plans, &items, &count, &e)) {
        net_free(&n);
        enc_calib_free(&cal);
        return cli_fail("plan", "--plan: %s", e.msg);
    }
    /* every plan checked before the search: an unknown preset or layer is an error, not a plan that
     * fits nowhere. --max-batch at its input size; --max-image at the starting size or, failing
     * that (more bands than a small input has rows), at a large one */
    char (*texts)[320] = err_calloc((size_t)count, sizeof *texts);
    for (int k = 0; k < count; k++) {
        plan p;
        cli_plan_text(items[k], bn, texts[k], sizeof texts[k]);
        int bad = plan_parse(&p, &n, texts[k], &e);
        if (bad && mode == 2) {
            net big;
            err e2;
            if (!cli_load_net(&big, pr.net_name, 4096, &e2)) {
                if (!(bad = plan_parse(&p, &big, texts[k], &e2))) plan_free(&p);
                net_free(&big);
            }
            if (!bad) continue;
        }
        if (bad) {
            plan_list_free(items, count);
            net_free(&n);
            enc_calib_free(&cal);
            free(texts);
            return cli_fail("plan", "%s", e.msg);
        }
        plan_free(&p);
    }
    char a[32], b[32];
    printf("%s, budget %s, %s, %s\n\n", n.name, units_fmt_bytes(pr.budget, a, sizeof a), cli_optimizer_name(pr.cfg.optimizer),
           mode == 1 ? "largest batch" : "largest square input");
    printf("  %-18s %12s %14s\n", "plan", mode == 1 ? "max batch" : "max image", "peak there");
    for (int k = 0; k < count; k++) {
        pr.plan_text = texts[k];
        pr.peak = 0;
        int best = cli_max_fit(&pr, mode == 2);
        if (best) printf("  %-18s %12d %14s\n", items[k], best, units_fmt_bytes(pr.peak, b, sizeof b));
        else printf("  %-18s %12s %14s\n", items[k], "none", "-");
    }
    printf("\n  peak = replay prediction (engine-allocated bytes) at %s %d\n", mode == 1 ? "image" : "batch",
           mode == 1 ? pr.image : pr.batch);
    plan_list_free(items, count);
    net_free(&n);
    enc_calib_free(&cal);
    free(texts);
    return CLI_OK;
}
