/* liveness: see liveness.h. */
#include "sim/lower/liveness.h"

#include <stdlib.h>
#include <string.h>

/* o as proto, then its own fields: the copy whole first and the fields stored into it after (built
 * in one temporary, the fields' narrow stores stalled the copy's wide loads of them: a sixth of a
 * VGG-16 evaluation). */
static inline void mark(sched_step *restrict o, const sched_step *restrict proto, const sched *s, sched_op op, int b)
{
    memcpy(o, proto, sizeof *o);
    sched_buffer_step_own(o, s, op, b);
}

void liveness_place(sched *s, bool lean)
{
    int nb = s->n_buf, ns = s->n_step;
    int *first = err_realloc(NULL, (size_t)nb * sizeof(int)), *last = err_realloc(NULL, (size_t)nb * sizeof(int));
    memset(first, -1, (size_t)nb * sizeof(int)), memset(last, -1, (size_t)nb * sizeof(int));
    for (int i = 0; i < ns; i++) {
        sched_step *t = &s->steps[i];
        int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
        for (int u = 0; u < nu; u++) {
            if (first[uses[u]] < 0) first[uses[u]] = i;
            last[uses[u]] = i;
        }
        if (t->buf >= 0) last[t->buf] = i > last[t->buf] ? i : last[t->buf];
    }
    /* ALLOCs bucketed by first use and FREEs by last use; persistent buffers are placed apart */
    int n_persist = 0;
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) first[b] = last[b] = -1, n_persist++;
    lower_buckets al = lower_bucket(first, nb, ns), fr = lower_bucket(last, nb, ns);
    int n_temp = al.start[ns];
    int total = ns + 2 * n_temp + 2 * n_persist;
    /* every step written below (so no zeroing), an ALLOC or FREE as a copy of one made once; lean,
     * only the places of the steps there are (steps[0, ns) stay where they are) */
    sched_step *steps = lean ? NULL : err_realloc(NULL, (size_t)total * sizeof(sched_step)), *o = steps;
    int *at = lean ? err_realloc(NULL, ((size_t)ns + 1) * sizeof(int)) : NULL, place = 0;
    free(s->mem); /* room for every step (the moves the passes before placed are events too) */
    sched_event *ev = s->mem = err_realloc(NULL, ((size_t)total + 1) * sizeof *ev);
    const sched_step proto = sched_buffer_step(s, SCHED_ALLOC, 0);
    int first_bwd = -1;
#define MARK(opv, b) (*ev++ = (sched_event){place++, (b), (opv)}, lean ? (void)0 : mark(o++, &proto, s, (opv), (b)))
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_ALLOC, b);
    for (int i = 0; i < ns; i++) {
        for (int k = al.start[i]; k < al.start[i + 1]; k++) MARK(SCHED_ALLOC, al.list[k]);
        const sched_step *t = &s->steps[i];
        if (sched_op_is_event(t->op)) *ev++ = (sched_event){place, t->buf, t->op};
        if (t->op == SCHED_BWD && first_bwd < 0) first_bwd = place;
        if (lean) at[i] = place++;
        else *o++ = *t, place++;
        for (int k = fr.start[i]; k < fr.start[i + 1]; k++) MARK(SCHED_FREE, fr.list[k]);
    }
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_FREE, b);
#undef MARK
    CHECK(place == total);
    if (lean) free(s->at), s->at = at, s->n_list = ns;
    else free(s->steps), s->steps = steps;
    s->n_step = total, s->n_mem = (int)(ev - s->mem), s->first_bwd = first_bwd >= 0 ? first_bwd : total;
    lower_buckets_free(&al), lower_buckets_free(&fr);
    free(first), free(last);
}
