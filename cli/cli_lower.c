/* lrcnn lower: a plan as data — what a runtime outside lrcnn (PyTorch) needs to execute it, in JSON:
 * the net's layers, the plan's segments in order with their modes (which layers are checkpointed,
 * which offloaded and which of their maps, when), and for every row segment its band geometry —
 * per band and layer the output rows it computes, the rows it holds (its halo: what its consumers
 * in the band read), the 2PS boundary it hands on and the rows it owns for whole-map statistics,
 * forward and (OverL with other counts) backward — plus the plan's BatchNorm mode, encodings and
 * migration; and the replay's prediction of the memory it takes. Rows are [a, b) of the full map,
 * as everywhere in lrcnn (sim/geometry/band.h). The schema is `lrcnn-lowering` version 1
 * (docs/commands.md). Not here: the schedule's steps. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/outfile.h"
#include "sim/lower/pipeline.h"
#include "sim/net/kind.h"

static const char usage[] =
    "usage: lrcnn lower --net NET --plan PLAN [--batch N] [--image S|HxW] [--bn MODE] [--optimizer sgd|adam]\n"
    "                   [--device NAME] [-o FILE.json [--force]]\n"
    "\n"
    "Writes a plan's segments and band geometry as JSON (stdout without -o): what a runtime outside lrcnn\n"
    "needs to execute it — the layers, each segment's mode (layer, ckpt, offload and which maps, rows),\n"
    "and per row segment, band and layer the rows computed, held (with the halo its consumers read),\n"
    "handed to the next band (2PS) and owned for BatchNorm's statistics; rows are [a, b) of the full map.\n"
    "ckpt-opt[:B] is resolved first (for --batch and --optimizer). With it, the whole maps kept encoded\n"
    "and the replay's prediction: the peak, and the bytes by category when the backward begins and at\n"
    "their most (on --device, default cpu); with +torch or +torch2 (PyTorch 1.13's or 2.x's rules),\n"
    "what python/lrcnn_torch keeps running the plan in PyTorch. Schema: docs/commands.md.\n"
    "example: lrcnn lower --net vgg16 --plan 2ps-h:4 --batch 8 -o /tmp/plan.json\n";

/* A growing text. */
typedef struct {
    char *s;
    size_t n, cap;
} buf;

static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)(k > 0 ? k : 0)) * 2 + 4096;
        b->s = err_realloc(b->s, b->cap);
    }
}

/* A JSON string (names are [A-Za-z0-9_.-]; plan texts may hold anything printable). */
static void str(buf *b, const char *s)
{
    put(b, "\"");
    for (; *s; s++) put(b, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    put(b, "\"");
}

static void rows(buf *b, band_rows r) { put(b, "[%d, %d]", r.a, r.b > r.a ? r.b : r.a); }

/* One direction's geometry: per band, the segment input's rows it reads and per layer its rows. */
static void geometry(buf *b, const net *n, const band_seg *s, const band_geom *g)
{
    put(b, "{\"bands\": %d, \"cuts\": [", g->n_bands);
    for (int r = 0; r <= g->n_bands; r++) put(b, "%s%d", r ? ", " : "", g->cuts[r]);
    put(b, "], \"band\": [");
    for (int r = 0; r < g->n_bands; r++) {
        put(b, "%s\n        {\"input\": ", r ? "," : "");
        rows(b, g->src_rows[r]);
        put(b, ", \"layers\": {");
        for (int L = s->first; L <= s->last; L++) {
            int i = L - s->first;
            put(b, "%s\n          ", L > s->first ? "," : "");
            str(b, n->layers[L].name);
            put(b, ": {\"out\": "), rows(b, g->out[r * g->n_layers + i]);
            put(b, ", \"held\": "), rows(b, band_buffer_rows(n, g, s, r, L));
            put(b, ", \"keep\": "), rows(b, g->keep[r * g->n_layers + i]);
            put(b, ", \"own\": "), rows(b, band_own(g, s, r, L));
            put(b, ", \"grad\": "), rows(b, g->grad[r * g->n_layers + i]);
            put(b, "}");
        }
        put(b, "}}");
    }
    put(b, "]}");
}

/* A staged row segment's stages (plan.h, plan_passes.staged): per layer the forward stage computing
 * it, the backward stage back-propagating it, and which of its whole maps are kept between them. */
static void stages(buf *b, const net *n, const plan_seg *ps)
{
    const plan_passes *pp = &ps->passes;
    if (!pp->staged) return;
    put(b, "\"stages\": {");
    for (int i = 0; i < pp->nl; i++) {
        put(b, "%s\n        ", i ? "," : "");
        str(b, n->layers[ps->first + i].name);
        put(b, ": {\"forward\": %d, \"backward\": %d, \"map\": \"%s\", \"grad_whole\": %s}", pp->fst[i], pp->bst[i],
            !pp->keep_act[i] ? "band" : pp->rebuilt[i] ? "rebuilt" : pp->offloaded[i] ? "offloaded" : "whole",
            pp->keep_grad[i] ? "true" : "false");
    }
    put(b, "},\n      ");
}

static const char *const modes[] = {"layer", "ckpt", "offload", "rows"};
static const char *const offloads[] = {"all", "conv", "pick"};

static void segment(buf *b, const net *n, const plan_seg *ps)
{
    put(b, "\n    {\"mode\": \"%s\", \"first\": ", modes[ps->mode]);
    str(b, n->layers[ps->first].name), put(b, ", \"last\": "), str(b, n->layers[ps->last].name);
    if (ps->mode == PLAN_OFFLOAD) {
        put(b, ", \"offload\": \"%s\"", offloads[ps->offload]);
        if (ps->offload == PLAN_OFFLOAD_PICK) {
            put(b, ", \"maps\": [");
            for (int k = 0; k < ps->n_pick; k++) {
                put(b, "%s{\"layer\": ", k ? ", " : "");
                str(b, n->layers[ps->picks[k].layer].name);
                put(b, ", \"free\": %d, \"fetch\": %d}", ps->picks[k].free, ps->picks[k].fetch);
            }
            put(b, "]");
        }
    }
    if (ps->mode == PLAN_ROWS) {
        put(b, ", \"policy\": \"%s\", \"input\": ", band_policy_name(ps->policy));
        str(b, n->layers[ps->band.src].name);
        put(b, ", \"stats_passes\": [%d, %d], ", ps->passes.n_fwd, ps->passes.n_bwd);
        stages(b, n, ps);
        put(b, "\"forward\": ");
        geometry(b, n, &ps->band, ps->fwd);
        put(b, ",\n      \"backward\": ");
        if (ps->bwd == ps->fwd) put(b, "\"forward\"");
        else geometry(b, n, &ps->band, ps->bwd);
    }
    put(b, "}");
}

/* The replay's prediction: device bytes at the peak, by category when the backward begins (what
 * the forward kept, and the persistent bytes; host: the moved maps not yet fetched back) and each
 * category's own maximum (host: every map the forward moves), and, for a torch plan, what
 * PyTorch's CUDA caching allocator would reserve. */
static void prediction(buf *b, const sim_result *r)
{
    put(b, ",\n  \"prediction\": {\"peak\": %lld, \"at_backward\": {", (long long)r->replay.peak);
    for (int c = 0; c < MEM_NCAT; c++)
        put(b, "%s\"%s\": %lld", c ? ", " : "", mem_cat_name((mem_cat)c), (long long)r->replay.at_backward[c]);
    put(b, "}, \"max\": {");
    for (int c = 0; c < MEM_NCAT; c++)
        put(b, "%s\"%s\": %lld", c ? ", " : "", mem_cat_name((mem_cat)c), (long long)r->replay.max[c]);
    put(b, "}");
    if (r->reserved) put(b, ", \"reserved\": %lld", (long long)r->reserved);
    put(b, "}");
}

/* The whole maps the schedule keeps encoded from the forward to the backward, and how: what a
 * runtime's saved-tensor hooks encode (band pieces, which a runtime recomputes, are not listed). */
static void encoded(buf *b, const net *n, const sched *s)
{
    put(b, ",\n  \"encoded\": [");
    for (int i = 0, k = 0; i < s->n_buf; i++) {
        const sched_buf *sb = &s->bufs[i];
        if (sb->kind != BUF_ENC || sb->band >= 0) continue;
        put(b, "%s{\"layer\": ", k++ ? ", " : ""), str(b, n->layers[sb->layer].name);
        put(b, ", \"encoding\": \"%s\", \"bytes\": %lld}", enc_name(sb->enc), (long long)sb->bytes);
    }
    put(b, "]");
}

/* The whole maps the schedule moves to host memory between the forward and the backward, by the
 * layer whose output (or, "aux", whose argmax, mask or statistics) each is: what a runtime's
 * saved-tensor hooks move (encoded first where the plan encodes it; band pieces are not listed). */
static void moved(buf *b, const net *n, const sched *s)
{
    put(b, ",\n  \"moved\": [");
    for (int i = 0, k = 0; i < s->n_buf; i++) {
        const sched_buf *sb = &s->bufs[i];
        if (!sb->offload || sb->band >= 0) continue;
        bool output = sb->kind == BUF_INPUT || sb->kind == BUF_ACT || sb->kind == BUF_ENC;
        put(b, "%s{\"layer\": ", k++ ? ", " : ""), str(b, n->layers[sb->layer].name);
        put(b, ", \"what\": \"%s\", \"bytes\": %lld}", output ? "output" : "aux", (long long)sb->bytes);
    }
    put(b, "]");
}

static void lowering(buf *b, const net *n, const plan *p, const sched_cfg *cfg, const sched *s, const sim_result *r)
{
    char text[2 * PLAN_TEXT_LEN];
    put(b, "{\"schema\": \"lrcnn-lowering\", \"version\": 1, \"net\": "), str(b, n->name);
    put(b, ", \"image\": [%d, %d, %d], \"batch\": %d, \"optimizer\": \"%s\",\n  \"plan\": ", n->layers[0].c, n->layers[0].h,
        n->layers[0].w, cfg->batch, cli_optimizer_name(cfg->optimizer));
    str(b, p->text);
    plan_describe(p, n, text, sizeof text);
    put(b, ", \"resolved\": "), str(b, text);
    char bn[PLAN_BN_TEXT_LEN];
    put(b, ", \"bn\": \"%s\", \"encodings\": [", plan_bn_text(p, bn, sizeof bn));
    for (int k = 0; k < p->n_mod; k++) {
        enc_mod_describe(&p->mods[k], text, sizeof text);
        put(b, "%s", k ? ", " : ""), str(b, text);
    }
    put(b, "], \"migrate\": {\"weights\": %s, \"grads\": %s, \"optim\": %s},\n  \"layers\": [",
        p->migrate & PLAN_MIGRATE_WEIGHTS ? "true" : "false", p->migrate & PLAN_MIGRATE_GRADS ? "true" : "false",
        p->migrate & PLAN_MIGRATE_OPTIM ? "true" : "false");
    for (int L = 0; L < n->n; L++) {
        const net_layer *l = &n->layers[L];
        put(b, "%s\n    {\"name\": ", L ? "," : ""), str(b, l->name);
        put(b, ", \"kind\": \"%s\", \"shape\": [%d, %d, %d], \"in\": [", kind_name(l->kind), l->c, l->h, l->w);
        for (int j = 0; j < l->n_in; j++) put(b, "%s", j ? ", " : ""), str(b, n->layers[l->in[j]].name);
        put(b, "]}");
    }
    put(b, "],\n  \"segments\": [");
    for (int k = 0; k < p->n_seg; k++) put(b, "%s", k ? "," : ""), segment(b, n, &p->segs[k]);
    put(b, "]");
    encoded(b, n, s);
    moved(b, n, s);
    prediction(b, r);
    put(b, "}\n");
}

static int fill(void *ctx, void *bytes, size_t size, err *e)
{
    (void)e;
    memcpy(bytes, ((buf *)ctx)->s, size);
    return 0;
}

int cli_lower(int argc, char **argv)
{
    cli_config o = {.batch = 8, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *dev = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, "lower", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--device", &dev)) > 0) continue;
        return cli_unknown("lower", argc, argv, i, got);
    }
    if (!o.net || !o.plan) return cli_fail("lower", "--net and --plan are required (see lrcnn lower --help)");
    if (o.iters || o.seed || o.host || o.calibrate || o.profile)
        return cli_fail("lower", "only --net --plan --batch --image --bn --optimizer --device -o --force apply");
    err e;
    if (o.out && outfile_check(o.out, o.force, &e)) return cli_fail("lower", "%s", e.msg);
    sched_cfg cfg = {.batch = o.batch, .optimizer = o.optimizer};
    cli_inputs in;
    if (cli_inputs_load(&in, &o, dev, &cfg, &e)) return cli_fail("lower", "%s", e.msg);
    plan p;
    int rc = cli_plan_parse(&p, &in.n, o.plan, o.bn, &cfg, &in.dev, &e);
    if (rc) {
        cli_inputs_free(&in);
        return cli_fail("lower", "%s", e.msg);
    }
    sched s;
    if (pipeline_lower(&s, &in.n, &p, &cfg, &e)) {
        plan_free(&p);
        cli_inputs_free(&in);
        return cli_fail("lower", "%s", e.msg);
    }
    sim_result r;
    sim_predict(&in.n, &p, &cfg, &s, &in.dev, &r, NULL);
    buf b = {0};
    lowering(&b, &in.n, &p, &cfg, &s, &r);
    sched_free(&s);
    plan_free(&p);
    cli_inputs_free(&in);
    outfile f = {0};
    if (!o.out) fwrite(b.s, 1, b.n, stdout);
    else if (outfile_open(&f, o.out, o.force, NULL, &e) || outfile_fill(&f, b.n, fill, &b, &e) || outfile_commit(&f, &e))
        rc = (outfile_abort(&f), cli_fail("lower", "%s", e.msg));
    free(b.s);
    return rc;
}
