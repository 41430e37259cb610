/* stash: what a lowered schedule keeps between its forward and backward passes, and how (lower.h).
 *
 * A *kept map* is an activation, a 2PS boundary or a pool argmax that some forward-pass step uses
 * and some backward-pass step reads again. Three passes over the finished compute steps decide
 * what happens to kept maps, each from the steps alone:
 *   stash_mark_offloads  which of them an offload segment moves to the host (vDNN: everything
 *                        its backward reads, or only convolution inputs);
 *   stash_encode         which encoding stores each (the plan's modifiers, sim/plan/enc.h): ENCODE
 *                        after its last forward use, DECODE into a fresh copy before its first
 *                        backward use, the backward reading the copy; an encoded map that was
 *                        to be offloaded is offloaded encoded (less to move);
 *   stash_place_moves    OFFLOAD after the last forward use, PREFETCH one backward step ahead of
 *                        the first backward use.
 * ALLOC and FREE are placed afterwards (liveness.c), so the encoded form lives from ENCODE to
 * DECODE, the map itself until ENCODE and its copy from DECODE on. */
#include <string.h>

#include "sim/net/kind.h"
#include "sim/lower/stash.h"

void stash_mark_offloads(lower *c)
{
    sched *s = c->s;
    bool offloads = false; /* some segment offloads (by policy or picks): else no walk over the steps */
    for (int k = 0; k < c->p->n_seg; k++) offloads |= c->p->segs[k].mode == PLAN_OFFLOAD;
    bool *seen = err_calloc((size_t)s->n_buf, sizeof(bool));
    for (int i = 0; offloads && i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op != SCHED_BWD) continue;
        const plan_seg *ps = &c->p->segs[t->seg];
        for (int u = 0; u < t->n_x + 2; u++) {
            int b = u < t->n_x ? t->x[u] : u == t->n_x ? t->y : t->aux;
            if (b < 0 || seen[b]) continue;
            seen[b] = true; /* the first backward step to read it decides */
            bool conv_in = c->n->layers[t->layer].kind == NET_CONV && b == t->x[0];
            const sched_buf *sb = &s->bufs[b];
            /* offload(all|conv) by the segment that reads it first; offload(ITEMS) by its layer */
            bool policy = ps->mode == PLAN_OFFLOAD && (ps->offload == PLAN_OFFLOAD_ALL || (ps->offload == PLAN_OFFLOAD_CONV && conv_in));
            if (sb->cat == MEM_ACT && sb->kind != BUF_LABEL && sb->kind != BUF_PROB && (policy || plan_pick_of(c->p, sb->layer)))
                s->bufs[b].offload = true;
        }
    }
    free(seen);
    /* the whole maps a row segment's stages keep (plan_passes) at the levels whose choice is
     * offloaded (bn=train-offload[:K], bn=train:LETTERS) */
    for (int k = 0; k < c->p->n_seg; k++) {
        const plan_seg *ps = &c->p->segs[k];
        bool any = false;
        for (int i = 0; ps->passes.staged && i < ps->passes.nl; i++) any |= ps->passes.offloaded[i];
        for (int b = 0; any && b < s->n_buf; b++) { /* no walk over the buffers for other segments */
            const sched_buf *sb = &s->bufs[b];
            if (sb->kind == BUF_ACT && sb->band < 0 && sb->layer >= ps->first && sb->layer < ps->last &&
                ps->passes.offloaded[sb->layer - ps->first])
                s->bufs[b].offload = true;
        }
    }
}

/* How the steps use a buffer: the last forward-pass use, the first backward-pass use, the most
 * the backward reads of it, whether the backward writes it, and whether a relu wrote it last. */
typedef struct {
    int last_fwd, first_bwd;
    int reads; /* rank: 0 shape, 1 sign, 2 values (read_rank) */
    bool sign; /* some backward reads its sign (a relu's mask) */
    bool bwd_writes, relu_out;
    bool recomputed_from; /* a recomputation in the backward pass reads it */
} use_info;

static int read_rank(kind_reads r) { return r == KIND_READS_SHAPE ? 0 : r == KIND_READS_SIGN ? 1 : 2; }

/* The slots of step t that can hold a map (activation, boundary, argmax): those it reads, into
 * rd (returns how many), and those it writes, into wr (-1: unused). Gradients, parameters and
 * scratch never hold one. */
enum { MAP_READS = NET_MAX_IN + 1 + 3 };
static int map_slots(const sched_step *t, int rd[MAP_READS], int wr[3])
{
    bool bwd = t->op == SCHED_BWD, stats = t->op == SCHED_STATS || t->op == SCHED_STATS_END;
    int n = 0;
    for (int j = 0; j < t->n_x; j++) rd[n++] = t->x[j];
    rd[n++] = t->src;
    rd[n++] = bwd ? t->y : -1; /* a backward reads the output it keeps, and its auxiliary */
    rd[n++] = bwd || stats ? t->aux : -1;
    wr[0] = t->dst;
    wr[1] = bwd ? -1 : t->y;
    wr[2] = bwd || stats ? -1 : t->aux;
    return n;
}

/* b is one of step t's inputs. */
static bool reads_input(const sched_step *t, int b)
{
    for (int j = 0; j < t->n_x; j++)
        if (t->x[j] == b) return true;
    return false;
}

static void use_scan(const lower *c, use_info *u)
{
    const sched *s = c->s;
    for (int b = 0; b < s->n_buf; b++) u[b] = (use_info){.last_fwd = -1, .first_bwd = -1};
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        int rd[MAP_READS], wr[3], nrd = map_slots(t, rd, wr);
        for (int k = 0; k < nrd + 3; k++) {
            int b = k < nrd ? rd[k] : wr[k - nrd];
            bool read = k < nrd;
            if (b < 0) continue;
            use_info *ub = &u[b];
            if (!t->bwd_phase) {
                ub->last_fwd = i;
                if (!read) ub->relu_out = t->layer >= 0 && c->n->layers[t->layer].kind == NET_RELU;
                continue;
            }
            if (ub->first_bwd < 0) ub->first_bwd = i;
            ub->recomputed_from |= read && t->op != SCHED_BWD; /* a recomputation, a boundary's copy */
            if (!read) {
                ub->bwd_writes = true;
                continue;
            }
            /* a backward reads of what it keeps what its kind says; anything else reads values */
            bool kept = t->op == SCHED_BWD && (reads_input(t, b) || b == t->y);
            kind_reads how = kept ? kind_of(&c->n->layers[t->layer])->reads : KIND_READS_VALUES;
            if (read_rank(how) > ub->reads) ub->reads = read_rank(how);
            ub->sign |= how == KIND_READS_SIGN;
        }
    }
}

/* The encoding of kept map b, and the modifier (an index into p->mods) that chose it. */
static enc_kind choose(const lower *c, const sched_buf *sb, const use_info *u, int *mod)
{
    const plan *p = c->p;
    const enc_mod *gist = plan_gist(p), *lossy = plan_lossy(p);
    *mod = gist ? (int)(gist - p->mods) : -1;
    /* lrcnn_torch keeps PyTorch's int64 argmax as it is */
    if (sb->kind == BUF_IDX) return gist && gist->binarize && !p->torch ? ENC_ARGMAX : ENC_NONE;
    if (gist && gist->binarize && u->reads <= read_rank(KIND_READS_SIGN)) return ENC_SIGN;
    if (gist && gist->sparse && u->relu_out) return ENC_SPARSE;
    *mod = lossy ? (int)(lossy - p->mods) : -1;
    return lossy ? lossy->format : ENC_NONE;
}

/* An ENCODE or DECODE of map sb (the caller sets src, dst and ws). */
static sched_step data_step(sched_op op, const sched_buf *sb, int seg, bool bwd)
{
    return (sched_step){.op = op, .layer = sb->layer, .band = sb->band, .seg = seg, .rows = sb->rows, .bwd_phase = bwd,
                        .buf = -1, .y = -1, .aux = -1, .w = -1, .dw = -1, .ws = -1, .dy = -1, .sums = -1};
}

/* Why modifier m of plan p claimed no map (stash_encode's refusal): gist finds no map it encodes;
 * dpr and zfp no map the plan keeps for the backward, which gist, if also there, leaves them. */
static const char *encodes_nothing_why(const plan *p, const enc_mod *m)
{
    if (m->kind == ENC_MOD_GIST)
        return p->torch ? "no kept map is read back only for its sign, or written by a relu (under PyTorch's rules a "
                          "max-pool's argmax stays int64)"
                        : "no kept map is read back only for its sign, written by a relu, or a max-pool's argmax";
    for (int k = 0; k < p->n_mod; k++)
        if (p->mods[k].kind == ENC_MOD_GIST) return "the plan keeps no map from the forward pass for the backward that gist leaves";
    return "the plan keeps no map from the forward pass for the backward";
}

int stash_encode(lower *c, err *e)
{
    sched *s = c->s;
    const plan *p = c->p;
    if (!p->n_mod) return 0;
    int nb = s->n_buf, claimed[ENC_MAX_MODS] = {0}, n_ins = 0;
    use_info *u = err_calloc((size_t)nb, sizeof(use_info));
    use_scan(c, u);
    int *copy_of = err_calloc((size_t)nb, sizeof(int)); /* [map] its decoded copy, -1 none */
    int *enc_of = err_calloc((size_t)nb, sizeof(int));  /* [map] its encoded form */
    lower_ins *ins = err_realloc(NULL, ((size_t)nb * 2 + 1) * sizeof(lower_ins)); /* written as used */
    for (int b = 0; b < nb; b++) {
        copy_of[b] = -1;
        const sched_buf *sb = &s->bufs[b];
        bool map = sb->kind == BUF_ACT || sb->kind == BUF_BOUND || sb->kind == BUF_IDX;
        /* kept across the passes, with steps in between, and only read by the backward */
        if (!map || sb->persistent || u[b].last_fwd < 0 || u[b].first_bwd < u[b].last_fwd + 2 || u[b].bwd_writes) continue;
        /* in PyTorch a checkpoint (a ckpt segment, a band) holds its inputs as they are, outside
         * the saved-tensor hooks that encode: lrcnn_torch leaves those maps plain */
        if (p->torch && u[b].recomputed_from) continue;
        int mod;
        enc_kind k = choose(c, sb, &u[b], &mod);
        if (k == ENC_NONE) continue;
        claimed[mod]++;
        const net_layer *l = &c->n->layers[sb->layer];
        enc_shape shape = {s->batch, l->w, (int64_t)l->c * band_rows_len(sb->rows), k == ENC_ARGMAX ? enc_argmax_bits(l) : 0,
                           !enc_lossless(k) && u[b].sign && !p->torch}; /* lrcnn_torch keeps no sign bitmap */
        /* a data-sized encoding's prediction takes the layer's calibrated factor where there is one */
        double cal = enc_calib_factor(c->cfg->calib, l->name, k, p->mods[mod].acc);
        enc_mod used = cal > 0 ? enc_with_factor(&p->mods[mod], k, cal) : p->mods[mod];
        int64_t bytes = enc_bytes(k, &used, shape), scratch = enc_scratch_bytes(k, shape);
        const sched_buf m = *sb; /* lower_buf may move the array: sb is not read again until retaken */
        int enc = lower_buf(c, BUF_ENC, m.cat, m.layer, m.band, m.rows, bytes);
        int ws = scratch ? lower_buf(c, BUF_WS, MEM_WORKSPACE, m.layer, m.band, m.rows, scratch) : -1;
        int dec = lower_buf(c, m.kind, m.cat, m.layer, m.band, m.rows, m.bytes);
        sb = &s->bufs[b];
        s->bufs[enc].enc = k, s->bufs[enc].mod = mod, s->bufs[enc].shape = shape;
        s->bufs[enc].factor = enc_factor(k, &used), s->bufs[enc].calibrated = cal > 0;
        s->bufs[enc].offload = sb->offload, s->bufs[b].offload = false; /* offloaded encoded: less to move */
        copy_of[b] = dec, enc_of[b] = enc;
        sched_step t = data_step(SCHED_ENCODE, sb, s->steps[u[b].last_fwd].seg, false);
        t.src = b, t.dst = enc, t.ws = ws, t.bytes_moved = (double)(sb->bytes + bytes);
        ins[n_ins++] = (lower_ins){u[b].last_fwd, true, t};
        t = data_step(SCHED_DECODE, sb, s->steps[u[b].first_bwd].seg, true);
        t.src = enc, t.dst = dec, t.bytes_moved = (double)(sb->bytes + bytes);
        ins[n_ins++] = (lower_ins){u[b].first_bwd, false, t};
    }
    /* the backward reads the decoded copies. Under PyTorch's rules (no engine) each backward step
     * that reads one holds its encoded form too: autograd keeps what the saved-tensor hook stored
     * until the node that saved it has run (the first such map where a step reads two) */
    bool hold = lower_predicts_torch(c);
    for (int i = 0; i < s->n_step; i++) {
        sched_step *t = &s->steps[i];
        if (!t->bwd_phase) continue;
        int *reads[NET_MAX_IN + 1 + 3], nr = 0, held = -1;
        for (int j = 0; j < t->n_x; j++) reads[nr++] = &t->x[j];
        reads[nr++] = &t->y, reads[nr++] = &t->aux, reads[nr++] = &t->src;
        for (int r = 0; r < nr; r++)
            if (*reads[r] >= 0 && *reads[r] < nb && copy_of[*reads[r]] >= 0) {
                if (held < 0) held = enc_of[*reads[r]];
                *reads[r] = copy_of[*reads[r]];
            }
        if (hold && t->op == SCHED_BWD && held >= 0) t->src = held;
    }
    lower_insert(c, ins, n_ins);
    free(u), free(copy_of), free(enc_of), free(ins);
    for (int m = 0; m < p->n_mod; m++) {
        if (claimed[m]) continue;
        char d[64];
        enc_mod_describe(&p->mods[m], d, sizeof d);
        return err_set(e, "plan '%s': +%s encodes nothing here: %s", p->text, d, encodes_nothing_why(p, &p->mods[m]));
    }
    return 0;
}

/* Where kept map b's moves go: OFFLOAD after step *off — its last forward use, or `free` forward
 * steps later — and PREFETCH before step *pf — `fetch` backward steps ahead of its first backward
 * use (vDNN's one where no pick says otherwise; at the use itself if no backward step comes
 * between). A pick that asks for more steps than there are is an error. */
static int move_places(const lower *c, int b, const use_info *u, int *off, int *pf, err *e)
{
    const sched *s = c->s;
    const plan_pick *k = plan_pick_of(c->p, s->bufs[b].layer);
    int free_steps = k ? k->free : 0, fetch = k ? k->fetch : 1;
    *off = u->last_fwd;
    for (int i = u->last_fwd + 1, left = free_steps; left > 0; i++) {
        if (i >= s->n_step || s->steps[i].bwd_phase)
            return err_set(e, "offload(%s:%d:...): fewer than %d forward steps follow its last forward use",
                           c->n->layers[k->layer].name, free_steps, free_steps);
        if (s->steps[i].op == SCHED_FWD) *off = i, left--;
    }
    *pf = u->first_bwd;
    for (int i = u->first_bwd - 1, left = fetch; left > 0 && i > *off; i--)
        if (s->steps[i].op == SCHED_BWD && --left == 0) *pf = i;
    if (k && k->named && fetch > 1 && *pf == u->first_bwd)
        return err_set(e, "offload(%s:%d:%d): fewer than %d backward steps come between its release and its first backward use",
                       c->n->layers[k->layer].name, free_steps, fetch, fetch);
    return 0;
}

/* Every layer an offload segment names alone must have a map that moves (moved[layer]). */
static int check_named(const lower *c, const bool *moved, err *e)
{
    for (int i = 0; i < c->p->n_seg; i++) {
        const plan_seg *ps = &c->p->segs[i];
        for (int k = 0; ps->mode == PLAN_OFFLOAD && k < ps->n_pick; k++) {
            const net_layer *l = &c->n->layers[ps->picks[k].layer];
            if (!ps->picks[k].named || moved[ps->picks[k].layer]) continue;
            return err_set(e, "offload(%s): %s keeps nothing for the backward here%s%s", l->name, l->name,
                           l->inplace ? ": it writes in place over " : "", l->inplace ? c->n->layers[l->in[0]].name : "");
        }
    }
    return 0;
}

int stash_place_moves(lower *c, err *e)
{
    sched *s = c->s;
    int nb = s->n_buf, n_ins = 0, rc = 0;
    bool *moved = err_calloc((size_t)c->n->n + 1, sizeof(bool)); /* [layer] some map of it moves */
    bool any = false; /* most plans move nothing: then no scan of the uses */
    for (int b = 0; b < nb && !any; b++) any = s->bufs[b].offload;
    if (!any) {
        rc = check_named(c, moved, e);
        free(moved);
        return rc;
    }
    use_info *u = err_calloc((size_t)nb, sizeof(use_info));
    use_scan(c, u);
    lower_ins *ins = err_realloc(NULL, ((size_t)nb * 2 + 1) * sizeof(lower_ins)); /* written as used */
    for (int b = 0; b < nb && !rc; b++) {
        if (!s->bufs[b].offload || u[b].last_fwd < 0 || u[b].first_bwd < 0) {
            s->bufs[b].offload = false;
            continue;
        }
        int off = 0, pf = 0;
        rc = move_places(c, b, &u[b], &off, &pf, e);
        if (rc) break;
        moved[s->bufs[b].layer] = true;
        ins[n_ins++] = (lower_ins){pf, false, lower_buffer_step(s, SCHED_PREFETCH, b, -1, s->steps[pf].seg)};
        ins[n_ins++] = (lower_ins){off, true, lower_buffer_step(s, SCHED_OFFLOAD, b, -1, s->steps[off].seg)};
    }
    if (!rc) rc = check_named(c, moved, e);
    if (!rc) lower_insert(c, ins, n_ins);
    free(u), free(ins), free(moved);
    return rc;
}
