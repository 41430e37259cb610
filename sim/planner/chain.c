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
typedef struct {
    int64_t stash, local;
    int64_t conv_in;     /* of the stash, what convolutions read (offload(conv) moves it) */
    bool reads_in, conv_reads_in;
} seg_model;

static seg_model segment(chain *c, int a, int b)
{
    seg_model s = {0};
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
    sched_free(&s);
    return 0;
}

static size_t dp_row(void) { return (size_t)(DP_BUCKETS + 1) * N_MODES; }

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
    c->out_kept = err_calloc((size_t)c->m + 1, sizeof(bool));
    c->stamp = err_calloc((size_t)n->n, sizeof(int));
    c->conv_stamp = err_calloc((size_t)n->n, sizeof(int));
    for (int k = 1; k <= c->m; k++) /* the layers sharing the crossing tensor precede the cut */
        for (int L = c->pos[k] - 1; L >= 1 && c->cn->tensor[L] == c->cn->tensor[c->pos[k] - 1]; L--)
            if (kind_of(&n->layers[L])->keeps_y) c->out_kept[k] = true;
    size_t cells = (size_t)(c->m + 1) * dp_row();
    c->best = err_calloc(cells, sizeof *c->best);
    c->from = err_calloc(cells, sizeof *c->from);
}

void chain_free(chain *c)
{
    free(c->pos), free(c->out_kept), free(c->stamp), free(c->conv_stamp), free(c->best), free(c->from);
}

/* The DP over (position, kept bytes in buckets of q, the mode of the segment ending there):
 * best[cell(k, j, mode)] the least extra time of a split of positions [0, k) keeping j buckets,
 * from[] how it got there. The tensor crossing a cut is charged once: to the segment before it when
 * that one is `layer` and keeps it, else to the segment after it if that one keeps it (its
 * checkpoint, or a layer's saved input). */
int chain_dp(chain *c, int64_t extra, char *buf, size_t len)
{
    const search_req *r = c->r;
    int m = c->m, NB = DP_BUCKETS;
    int64_t avail = r->budget - c->cn->base - extra;
    buf[0] = 0;
    if (avail <= 0) return -1;
    int64_t q = (avail + NB - 1) / NB;
    size_t row = dp_row(), cells = (size_t)(m + 1) * row;
#define CELL(k, j, md) ((size_t)(k) * row + (size_t)(j) * N_MODES + (size_t)(md))
    double *best = c->best;
    int *from = c->from;
    for (size_t i = 0; i < cells; i++) best[i] = INFINITY;
    /* the buckets reached at each (position, mode), lo[] to hi[]: the loops over buckets skip the rest */
    int *lo = err_calloc((size_t)(m + 1) * N_MODES, sizeof *lo), *hi = err_calloc((size_t)(m + 1) * N_MODES, sizeof *hi);
    for (int i = 0; i < (m + 1) * N_MODES; i++) lo[i] = NB + 1, hi[i] = -1;
    best[CELL(0, 0, MODE_CKPT)] = 0; /* the image: nothing to charge */
    lo[MODE_CKPT] = hi[MODE_CKPT] = 0;
    bool off = (r->space & SEARCH_OFFLOAD) != 0;
    bool allowed[N_MODES] = {true, (r->space & SEARCH_CKPT) != 0, off, off};
    for (int a = 0; a < m; a++)
        for (int b = a + 1; b <= m; b++) {
            int la = c->pos[a], lb = c->pos[b];
            seg_model sm = segment(c, la, lb);
            int64_t stash = sm.stash, in = la > 1 ? c->cn->bytes[c->cn->tensor[la - 1]] : 0;
            double recompute = 0;
            for (int L = la; L < lb; L++) recompute += c->cn->fwd_us[L];
            for (int mode = 0; mode < N_MODES; mode++) {
                if (!allowed[mode] || (b == m && mode != MODE_LAYER)) continue; /* the last backs up at once */
                bool needs_in = mode == MODE_CKPT || sm.reads_in;
                int64_t keep = mode == MODE_LAYER ? stash : mode == MODE_OFFLOAD_CONV ? stash - sm.conv_in : 0;
                double cost = mode == MODE_CKPT ? recompute : mode == MODE_OFFLOAD ? link_us(c, stash)
                              : mode == MODE_OFFLOAD_CONV ? link_us(c, sm.conv_in) : 0;
                /* the input stays on the device unless this segment offloads it */
                bool in_moved = mode == MODE_OFFLOAD || (mode == MODE_OFFLOAD_CONV && sm.conv_reads_in);
                for (int pm = 0; pm < N_MODES; pm++) {
                    /* the input: already in the prefix when the previous layer segment keeps it */
                    bool had = a == 0 || (pm == MODE_LAYER && c->out_kept[a]);
                    int64_t in_now = needs_in && !had ? in : 0;
                    int64_t local = sm.local + in_now;
                    int64_t kq = (keep + (in_moved ? 0 : in_now) + q - 1) / q;
                    if (local > avail || kq > NB) continue;
                    /* j buckets kept before: j * q + local must fit, j + kq must be a bucket */
                    int64_t top = (avail - local) / q < NB - kq ? (avail - local) / q : NB - kq;
                    int j0 = lo[a * N_MODES + pm], j1 = hi[a * N_MODES + pm] < top ? hi[a * N_MODES + pm] : (int)top;
                    for (int j = j0; j <= j1; j++) {
                        double t = best[CELL(a, j, pm)];
                        if (t == INFINITY) continue;
                        size_t to = CELL(b, j + kq, mode);
                        if (t + cost < best[to]) {
                            best[to] = t + cost, from[to] = (int)CELL(a, j, pm);
                            int *l = &lo[b * N_MODES + mode], *h = &hi[b * N_MODES + mode];
                            if (j + kq < *l) *l = (int)(j + kq);
                            if (j + kq > *h) *h = (int)(j + kq);
                        }
                    }
                }
            }
        }
    size_t end = 0;
    for (int j = 0; j <= NB; j++)
        if (best[CELL(m, j, MODE_LAYER)] < (end ? best[end] : INFINITY)) end = CELL(m, j, MODE_LAYER);
    int found = end ? 0 : -1;
    if (end) {
        /* walk back, then write the segments in order */
        int segs[256][3], ns = 0;
        for (size_t at = end; at / row > 0 && ns < 256;) {
            size_t prev = (size_t)from[at];
            segs[ns][0] = c->pos[prev / row], segs[ns][1] = c->pos[at / row] - 1, segs[ns][2] = (int)(at % N_MODES), ns++;
            at = prev;
        }
        size_t at = 0;
        for (int i = ns - 1; i >= 0 && at < len; i--) {
            if (segs[i][2] == MODE_LAYER) continue;
            /* offloaded neighbours of one policy are one offload segment (the policy is per activation) */
            int md = segs[i][2];
            while (md != MODE_CKPT && i > 0 && segs[i - 1][2] == md) segs[i - 1][0] = segs[i][0], i--;
            at += (size_t)snprintf(buf + at, len - at, "%s%s@%s..%s", at ? "; " : "",
                                   md == MODE_CKPT ? "ckpt" : md == MODE_OFFLOAD ? "offload(all)" : "offload(conv)",
                                   c->n->layers[segs[i][0]].name, c->n->layers[segs[i][1]].name);
        }
        if (at >= len) found = -1; /* too long to say */
    }
#undef CELL
    free(lo), free(hi);
    return found;
}

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
