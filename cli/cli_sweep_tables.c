/* cli_sweep_tables: lrcnn sweep's tables (cli_sweep.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_sweep.h"

void sweep_print_capacity(const spec *s, const cell *cells, long count)
{
    int pw = cli_plan_width((const char *const *)s->plans, s->n_plans, 18);
    char a[32];
    bool by_image = !strcmp(s->search, "image");
    for (long i = 0; i < count; i += (long)s->n_plans * s->n_budgets) {
        const cell *c = &cells[i];
        char at[32];
        int h = s->images[c->image], w = s->images_w[c->image];
        if (by_image) snprintf(at, sizeof at, "batch %d", s->batches[c->batch]);
        else if (!h) snprintf(at, sizeof at, "the net's own input");
        else snprintf(at, sizeof at, "image %dx%d", h, w ? w : h);
        printf("\n%s: largest %s that fits, %s, %s\n  %-*s", s->nets[c->net], by_image ? "square input" : "batch",
               s->optimizers[c->opt], at, pw, "plan");
        for (int g = 0; g < s->n_budgets; g++) printf(" %10s", units_fmt_bytes(s->budgets[g], a, sizeof a));
        printf("\n");
        for (int p = 0; p < s->n_plans; p++) {
            printf("  %-*s", pw, s->plans[p]);
            for (int g = 0; g < s->n_budgets; g++) {
                const cell *x = &cells[i + (long)p * s->n_budgets + g];
                if (x->infeasible) printf(" %10s", "infeasible");
                else printf(" %10d", x->max_value);
            }
            printf("\n");
        }
    }
    if (count)
        printf("\n  the largest %s (at most %d) whose footprint - the arena its static memory plan reserves, and the bytes\n"
               "  apart from it - fits each budget; 0 = not even the smallest; infeasible = the file's /infeasible table says why\n",
               by_image ? "square input" : "batch", by_image ? 1 << 15 : 1 << 20);
}

/* The net's BatchNorm mode: the spec's bn, or the default (exact train mode); NULL when it has none. */
static const char *bn_text(const spec *s, const net *n)
{
    for (int l = 0; l < n->n; l++)
        if (n->layers[l].kind == NET_BN) return s->bn[0] && strcmp(s->bn, "auto") ? s->bn : "train (exact, the default)";
    return NULL;
}

void sweep_print_tables(const spec *s, const sim_device *d, net *nets, const cell *cells, long count)
{
    char a[32], b[32], t[600];
    int pw = cli_plan_width((const char *const *)s->plans, s->n_plans, 18);
    for (long i = 0; i < count; i++) {
        const cell *c = &cells[i];
        if (c->plan != 0) continue; /* first plan of each group opens its table */
        const net *n = &nets[c->net * s->n_images + c->image];
        const char *bn = bn_text(s, n);
        printf("\n%s @ %dx%d, batch %d, %s, %s%s; predicted times: %s\n", n->name, n->layers[0].h, n->layers[0].w,
               s->batches[c->batch], s->optimizers[c->opt], bn ? "bn=" : "no BatchNorm", bn ? bn : "", cli_time_source(d, t, sizeof t));
        printf("  %-*s %12s %12s %7s %12s %8s %9s %10s %9s", pw, "plan", "replay peak", "arena", "gap", "closed peak", "closed", "vs layer",
               "FLOPs", "vs layer");
        if (s->measure) printf(" %12s %8s %9s %8s", "measured", "replay", "time/iter", "vs layer");
        printf("\n");
        const sim_result *base = NULL;
        const cell *m0 = NULL;
        for (int p = 0; p < s->n_plans; p++)
            if (!strcmp(s->plans[p], "layer") && !cells[i + p].infeasible) base = &cells[i + p].r, m0 = &cells[i + p];
        for (int p = 0; p < s->n_plans; p++) {
            const sim_result *r = &cells[i + p].r;
            if (cells[i + p].infeasible) {
                printf("  %-*s infeasible (the file's /infeasible table says why)\n", pw, s->plans[p]);
                continue;
            }
            char red[16] = "-", fl[16] = "-", ce[16];
            if (base) {
                snprintf(red, sizeof red, "%.1f%%", 100.0 * (1.0 - (double)r->replay.peak / (double)base->replay.peak));
                snprintf(fl, sizeof fl, "%.3fx", r->flops / base->flops);
            }
            char ar[32];
            printf("  %-*s %12s %12s %6.2f%% %12s %8s %9s %9.4gG %9s", pw, s->plans[p], units_fmt_bytes(r->replay.peak, a, sizeof a),
                   units_fmt_bytes(r->arena.size, ar, sizeof ar), cli_arena_gap(&r->arena), cli_fmt_closed(r, -1, b, sizeof b),
                   cli_fmt_closed_err(r, r->replay.peak, "%+.1f%%", ce, sizeof ce), red, r->flops / 1e9, fl);
            if (s->measure) {
                const cell *m = &cells[i + p];
                printf(" %12s %+7.3f%% %7.0f ms %7.2fx", units_fmt_bytes(m->measured, a, sizeof a),
                       100.0 * (double)(r->replay.peak - m->measured) / (double)m->measured, m->us / 1e3,
                       m0 ? m->us / m0->us : 0.0);
            }
            printf("\n");
        }
    }
    if (count) {
        printf("\n  predicted: replay peak = the simulator's step-by-step live bytes at the peak; arena = what the plan's static\n"
               "  memory plan reserves (gap = its excess over the live peak); closed peak = the closed form, closed = its error vs\n"
               "  replay; vs layer = memory saved against 'layer' (FLOPs: ratio, recompute included)\n");
        if (s->measure)
            printf("  measured on the CPU engine, %d iterations: measured = its peak of allocated bytes, replay = the replay's error\n"
                   "  vs it, time/iter = the median iteration after the first (vs layer: ratio)\n", s->measure);
    }
}

