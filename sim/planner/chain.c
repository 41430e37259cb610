/* chain: see chain.h. */
#include "sim/planner/chain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/lower/pipeline.h"
#include "sim/net/kind.h"
#include "sim/predict/sim.h"

/* What the segment model knows of layers [a, b) run as one segment: `stash`, the bytes a `layer`
 * segment keeps for its backward (every tensor one of its layers' backward reads — autograd's
 * saved tensors — and their auxiliaries), except its input tensor (the one crossing the cut
 * before a), which the previous segment may keep already: `reads_in` says whether this one does;
 * and `local`, the most it holds at once besides that input: at each layer's backward, what the
 * layers up to it keep (the later ones' are freed by then) plus its output and input gradients
 * and workspace, and at each layer's forward, what the earlier ones keep plus its input, output
 * and workspace. The image is in c->cn->base. */
static chain_seg segment(chain *c, int a, int b)
{
    chain_seg s = {0};
    const chain_net *cn = c->cn;
    int in = a > 0 ? cn->tensor[a - 1] : -1;
    c->stamp_now++;
    for (int L = a; L < b; L++) {
        const net_layer *l = &c->n->layers[L];
        const kind_traits *k = kind_of(l);
        /* an in-place layer writes its output over its input, and its input gradient over its output's */
        int64_t x = l->n_in ? cn->bytes[cn->tensor[l->in[0]]] : 0, y = l->inplace ? 0 : cn->bytes[L];
        int64_t fwd = s.stash + x + y + sched_cfg_workspace(&c->r->cfg, c->n, L, l->h, false);
        int reads[NET_MAX_IN + 1], nr = 0;
        if (k->keeps_x)
            for (int i = 0; i < l->n_in; i++) reads[nr++] = cn->tensor[l->in[i]];
        if (k->keeps_y) reads[nr++] = cn->tensor[L];
        for (int i = 0; i < nr; i++) {
            bool conv = l->kind == NET_CONV && k->keeps_x && i < l->n_in;
            if (reads[i] == in) {
                s.reads_in = true, s.conv_reads_in |= conv;
                continue;
            }
            if (reads[i] <= 0) continue;
            if (c->stamp[reads[i]] != c->stamp_now) c->stamp[reads[i]] = c->stamp_now, s.stash += cn->bytes[reads[i]];
            if (conv && c->conv_stamp[reads[i]] != c->stamp_now) c->conv_stamp[reads[i]] = c->stamp_now, s.conv_in += cn->bytes[reads[i]];
        }
        s.stash += cn->aux[L];
        int64_t bwd = s.stash + cn->bytes[L] + (l->inplace ? 0 : x) + sched_cfg_workspace(&c->r->cfg, c->n, L, l->h, true);
        if (fwd > s.local) s.local = fwd;
        if (bwd > s.local) s.local = bwd;
        s.recompute += cn->fwd_us[L];
    }
    return s;
}

static double link_us(const chain *c, int64_t bytes)
{
    const sim_device *d = c->r->dev;
    double us = 0;
    for (int k = 0; k < 2; k++) {
        timing_probe p = {.x = (double)bytes, .work = (double)bytes};
        snprintf(p.key, sizeof p.key, "%s", k ? "prefetch" : "offload");
        snprintf(p.cls, sizeof p.cls, "%s", p.key);
        timing_how how;
        double roof = (double)bytes / (d->link_gbps * 1e3);
        us += d->model ? timing_step_us(d->model, &p, roof, &how) : roof;
    }
    return us;
}

void chain_net_free(chain_net *cn)
{
    free(cn->tensor), free(cn->bytes), free(cn->aux), free(cn->fwd_us);
    memset(cn, 0, sizeof *cn);
}

int chain_net_init(chain_net *cn, const search_req *r, err *e)
{
    const net *n = r->n;
    memset(cn, 0, sizeof *cn);
    cn->tensor = err_calloc((size_t)n->n, sizeof(int));
    cn->bytes = err_calloc((size_t)n->n, sizeof(int64_t));
    cn->aux = err_calloc((size_t)n->n, sizeof(int64_t));
    cn->fwd_us = err_calloc((size_t)n->n, sizeof(double));
    int64_t N = r->cfg.batch;
    for (int L = 0; L < n->n; L++) {
        const net_layer *l = &n->layers[L];
        cn->tensor[L] = l->inplace ? cn->tensor[l->in[0]] : L;
        cn->bytes[L] = N * net_layer_values(l) * 4;
        cn->aux[L] = kind_aux_bytes(n, L, l->h, (int)N);
    }
    /* forward times and the persistent bytes, from the `layer` schedule */
    plan p;
    sched s;
    int rc = plan_parse(&p, n, "layer", e);
    if (!rc) rc = pipeline_lower(&s, n, &p, &r->cfg, e), plan_free(&p);
    if (rc) {
        chain_net_free(cn);
        return -1;
    }
    for (int i = 0; i < s.n_step; i++) {
        timing_how how;
        if (s.steps[i].op == SCHED_FWD) cn->fwd_us[s.steps[i].layer] += sim_step_us(n, &s, i, r->dev, &how);
    }
    for (int b = 0; b < s.n_buf; b++)
        if (s.bufs[b].persistent || s.bufs[b].kind == BUF_INPUT || s.bufs[b].kind == BUF_LABEL) cn->base += s.bufs[b].bytes;
    sim_mem mem;
    sim_replay(&s, &mem, NULL);
    sched_free(&s);
    int64_t above = mem.peak > cn->base ? mem.peak - cn->base : 1;
    cn->quantum = (above + DP_BUCKETS - 1) / DP_BUCKETS;
    return 0;
}

static size_t cells_per_k(void) { return 2 * (size_t)(DP_BUCKETS + 1); }
#define CELL(c, k, had, M) ((size_t)(k) * cells_per_k() + (size_t)(had) * (DP_BUCKETS + 1) + (size_t)(M))

/* What segment [a, b) in `mode` keeps on the device (bytes), costs in time, and holds at its
 * fullest, after a segment that did (`had`) or did not keep the tensor crossing cut a. */
typedef struct {
    int64_t keep, local;
    double cost;
} seg_choice;

static seg_choice choose(const chain *c, int a, int b, int mode, bool had)
{
    const chain_seg *sm = &c->seg[(size_t)a * (size_t)(c->m + 1) + (size_t)b];
    int la = c->pos[a];
    int64_t in = la > 1 ? c->cn->bytes[c->cn->tensor[la - 1]] : 0;
    bool needs_in = mode == MODE_CKPT || sm->reads_in;
    /* the input stays on the device unless this segment offloads it */
    bool in_moved = mode == MODE_OFFLOAD || (mode == MODE_OFFLOAD_CONV && sm->conv_reads_in);
    int64_t in_now = needs_in && !had ? in : 0;
    int64_t keep = mode == MODE_LAYER ? sm->stash : mode == MODE_OFFLOAD_CONV ? sm->stash - sm->conv_in : 0;
    double cost = mode == MODE_CKPT ? sm->recompute : mode == MODE_OFFLOAD ? sm->move_all : mode == MODE_OFFLOAD_CONV ? sm->move_conv : 0;
    return (seg_choice){keep + (in_moved ? 0 : in_now), sm->local + in_now, cost};
}

/* The table, from the last position back: the rest of the chain from position k, with M buckets
 * left, is its first segment [k, b) in some mode (which needs its `local` bytes within M and
 * leaves M less what it keeps for the segments after it) and the best of the rest from b. The
 * tensor crossing a cut is charged once: to the segment before it when that one is `layer` and
 * keeps it, else to the segment after it if that one keeps it (its checkpoint, or a layer's
 * saved input). */
static void fill(chain *c)
{
    const int m = c->m, NB = DP_BUCKETS;
    const int64_t q = c->cn->quantum;
    bool off = (c->r->space & SEARCH_OFFLOAD) != 0;
    bool allowed[N_MODES] = {true, (c->r->space & SEARCH_CKPT) != 0, off, off};
    for (size_t i = 0; i < (size_t)(m + 1) * cells_per_k(); i++) c->cost[i] = INFINITY;
    for (int had = 0; had < 2; had++)
        for (int M = 0; M <= NB; M++) c->cost[CELL(c, m, had, M)] = 0;
    for (int a = m - 1; a >= 0; a--)
        for (int had = 0; had < 2; had++) {
            if (a == 0 && !had) continue; /* the image: nothing to charge */
            double *row = &c->cost[CELL(c, a, had, 0)];
            int *pick = &c->choice[CELL(c, a, had, 0)];
            for (int b = a + 1; b <= m; b++)
                for (int mode = 0; mode < N_MODES; mode++) {
                    if (!allowed[mode] || (b == m && mode != MODE_LAYER)) continue; /* the last backs up at once */
                    seg_choice s = choose(c, a, b, mode, had || a == 0);
                    int64_t kq = (s.keep + q - 1) / q, lq = (s.local + q - 1) / q;
                    if (kq > NB || lq > NB) continue;
                    int M0 = (int)(kq > lq ? kq : lq);
                    const double *next = &c->cost[CELL(c, b, mode == MODE_LAYER && c->out_kept[b], 0)];
                    for (int M = M0; M <= NB; M++) {
                        double t = s.cost + next[M - kq];
                        if (t < row[M]) row[M] = t, pick[M] = b * N_MODES + mode;
                    }
                }
        }
}

void chain_init(chain *c, const search_req *r, const chain_net *cn, int first)
{
    const net *n = r->n;
    memset(c, 0, sizeof *c);
    c->r = r, c->n = n;
    c->cn = cn;
    c->pos = err_calloc((size_t)n->n + 1, sizeof(int));
    c->pos[c->m++] = first;
    for (int L = first + 1; L < n->n; L++)
        if (n->layers[L].cut_before) c->pos[c->m++] = L;
    c->pos[c->m] = n->n;
    int m = c->m;
    c->out_kept = err_calloc((size_t)m + 1, sizeof(bool));
    c->stamp = err_calloc((size_t)n->n, sizeof(int));
    c->conv_stamp = err_calloc((size_t)n->n, sizeof(int));
    for (int k = 1; k <= m; k++) /* the layers sharing the crossing tensor precede the cut */
        for (int L = c->pos[k] - 1; L >= 1 && c->cn->tensor[L] == c->cn->tensor[c->pos[k] - 1]; L--)
            if (kind_of(&n->layers[L])->keeps_y) c->out_kept[k] = true;
    c->seg = err_calloc((size_t)m * (size_t)(m + 1), sizeof *c->seg);
    bool off = (r->space & SEARCH_OFFLOAD) != 0;
    for (int a = 0; a < m; a++)
        for (int b = a + 1; b <= m; b++) {
            chain_seg *s = &c->seg[(size_t)a * (size_t)(m + 1) + (size_t)b];
            *s = segment(c, c->pos[a], c->pos[b]);
            if (off) s->move_all = link_us(c, s->stash), s->move_conv = link_us(c, s->conv_in);
        }
    c->cost = err_calloc((size_t)(m + 1) * cells_per_k(), sizeof *c->cost);
    c->choice = err_calloc((size_t)(m + 1) * cells_per_k(), sizeof *c->choice);
    fill(c);
}

void chain_free(chain *c)
{
    free(c->pos), free(c->out_kept), free(c->stamp), free(c->conv_stamp), free(c->seg), free(c->cost), free(c->choice);
    memset(c, 0, sizeof *c);
}

int chain_at(const chain *c, int M, char *buf, size_t len)
{
    buf[0] = 0;
    if (M < 0) return -1;
    if (M > DP_BUCKETS) M = DP_BUCKETS;
    if (c->cost[CELL(c, 0, 1, M)] == INFINITY) return -1;
    int segs[256][3], ns = 0;
    for (int a = 0, had = 1; a < c->m && ns < 256;) {
        int pick = c->choice[CELL(c, a, had, M)], b = pick / N_MODES, mode = pick % N_MODES;
        seg_choice s = choose(c, a, b, mode, had);
        segs[ns][0] = c->pos[a], segs[ns][1] = c->pos[b] - 1, segs[ns][2] = mode, ns++;
        M -= (int)((s.keep + c->cn->quantum - 1) / c->cn->quantum);
        had = mode == MODE_LAYER && c->out_kept[b], a = b;
    }
    size_t at = 0;
    for (int i = 0; i < ns && at < len; i++) {
        if (segs[i][2] == MODE_LAYER) continue;
        /* offloaded neighbours of one policy are one offload segment (the policy is per activation) */
        int md = segs[i][2], from = segs[i][0];
        while (md != MODE_CKPT && i + 1 < ns && segs[i + 1][2] == md) i++;
        at += (size_t)snprintf(buf + at, len - at, "%s%s@%s..%s", at ? "; " : "",
                               md == MODE_CKPT ? "ckpt" : md == MODE_OFFLOAD ? "offload(all)" : "offload(conv)",
                               c->n->layers[from].name, c->n->layers[segs[i][1]].name);
    }
    return at >= len ? -1 : 0; /* too long to say */
}

int chain_breaks(const chain *c, double thin, int *at, int most)
{
    double step = thin * c->seg[c->m].recompute, last = INFINITY; /* seg[0][m]: the whole chain */
    int k = 0;
    for (int M = 0; M <= DP_BUCKETS && k < most; M++) {
        double t = c->cost[CELL(c, 0, 1, M)];
        if (t < last - step) at[k++] = M, last = t; /* the first finite one: anything is below INFINITY */
    }
    return k;
}
#undef CELL

/* The split that keeps least from the forward: every segment but the last offloaded (when the space
 * has offload) or checkpointed, one segment per clean cut. */
void chain_min(const chain *c, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    bool off = (c->r->space & SEARCH_OFFLOAD) != 0;
    if (c->m < 2 || !(c->r->space & (SEARCH_OFFLOAD | SEARCH_CKPT))) return;
    if (off) {
        snprintf(buf, len, "offload(all)@%s..%s", c->n->layers[c->pos[0]].name, c->n->layers[c->pos[c->m - 1] - 1].name);
        return;
    }
    for (int k = 0; k + 1 < c->m && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%sckpt@%s..%s", k ? "; " : "", c->n->layers[c->pos[k]].name,
                               c->n->layers[c->pos[k + 1] - 1].name);
    if (at >= len) buf[0] = 0;
}
