/* join_cpu: the CPU kernels that join maps or select their channels — add, concat, slice and
 * shuffle (ops_cpu.h) — copies and sums of whole channel planes over rows [a, b), each plane by one
 * thread. A tensor a layer reads at several places gets one gradient, at the first (net_input_first). */
#include <string.h>

#include "engine/cpu/ops_cpu.h"

/* --- add and concat --------------------------------------------------------------------------- */

/* y = x0 + x1 + ..., left to right as PyTorch's chain of adds. */
void add_cpu_forward(const ops_call *c)
{
    const ten *y = &c->y; /* (N, C, H, W), as every input */
    cpu_check_rows(y, c->a, c->b, c->l->h);
    for (int j = 0; j < c->l->n_in; j++) cpu_check_rows(&c->x[j], c->a, c->b, c->in_h[j]);
    int64_t len = cpu_plane_len(y, c->a, c->b);
    int m = c->l->n_in;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * len * m))
    for (int n = 0; n < y->n; n++)
        for (int ch = 0; ch < y->c; ch++) {
            const float *ar = cpu_row(&c->x[0], n, ch, c->a), *br = cpu_row(&c->x[1], n, ch, c->a);
            float *yr = cpu_row(y, n, ch, c->a);
            for (int64_t i = 0; i < len; i++) yr[i] = ar[i] + br[i];
            for (int j = 2; j < m; j++) {
                const float *xr = cpu_row(&c->x[j], n, ch, c->a);
                for (int64_t i = 0; i < len; i++) yr[i] += xr[i];
            }
        }
}

/* Input j's gradient, channels [off, off + C_j) of dy, into the gradient of the tensor it reads:
 * dx[j], or, where the layer read that tensor at an earlier place i (net_input_first), dx[i],
 * which the scheduler gave the gradient and which has its first contribution already. */
static void dx_from_channels(const ops_call *c, int j, int off)
{
    int i = net_input_first(c->l, j);
    const ten *dx = &c->dx[i], *dy = &c->dy;
    if (!dx->p) return;
    bool store = i == j && cpu_dx_store(c, j);
    cpu_check_rows(dx, c->a, c->b, c->in_h[j]);
    int64_t len = cpu_plane_len(dy, c->a, c->b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dx->n * dx->c * len))
    for (int n = 0; n < dx->n; n++)
        for (int ch = 0; ch < dx->c; ch++) {
            const float *dyr = cpu_row(dy, n, off + ch, c->a);
            float *dxr = cpu_row(dx, n, ch, c->a);
            if (store)
                for (int64_t k = 0; k < len; k++) dxr[k] = dyr[k];
            else
                for (int64_t k = 0; k < len; k++) dxr[k] += dyr[k];
        }
}

/* dx_j = dy for every input. */
void add_cpu_backward(const ops_call *c)
{
    cpu_check_rows(&c->dy, c->a, c->b, c->l->h);
    for (int j = 0; j < c->l->n_in; j++) dx_from_channels(c, j, 0);
}

/* y = (x0, x1, ...) along channels, rows [a, b). */
void concat_cpu_forward(const ops_call *c)
{
    const ten *y = &c->y;
    cpu_check_rows(y, c->a, c->b, c->l->h);
    int64_t len = cpu_plane_len(y, c->a, c->b);
    for (int j = 0, off = 0; j < c->l->n_in; off += c->in_c[j], j++) {
        const ten *x = &c->x[j];
        cpu_check_rows(x, c->a, c->b, c->in_h[j]);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * len))
        for (int n = 0; n < x->n; n++)
            for (int ch = 0; ch < x->c; ch++)
                memcpy(cpu_row(y, n, off + ch, c->a), cpu_row(x, n, ch, c->a), (size_t)len * sizeof(float));
    }
}

/* dx_j = dy's channels of input j. */
void concat_cpu_backward(const ops_call *c)
{
    cpu_check_rows(&c->dy, c->a, c->b, c->l->h);
    for (int j = 0, off = 0; j < c->l->n_in; off += c->in_c[j], j++) dx_from_channels(c, j, off);
}

/* --- channel selections (slice, shuffle) ------------------------------------------------------- */

/* y's channel o = x's channel net_channel_src(o), rows [a, b). */
void channels_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    cpu_check_rows(y, c->a, c->b, c->l->h), cpu_check_rows(x, c->a, c->b, c->in_h[0]);
    int64_t len = cpu_plane_len(y, c->a, c->b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * len))
    for (int n = 0; n < y->n; n++)
        for (int o = 0; o < y->c; o++)
            memcpy(cpu_row(y, n, o, c->a), cpu_row(x, n, net_channel_src(c->l, c->in_c[0], o), c->a), (size_t)len * sizeof(float));
}

/* dx's channel net_channel_src(o) = dy's channel o; a slice's other channels get no gradient (zero
 * where the kernel stores into a view of its own rows). */
void channels_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    if (!dx->p) return;
    cpu_check_rows(dy, c->a, c->b, c->l->h), cpu_check_rows(dx, c->a, c->b, c->in_h[0]);
    bool store = cpu_dx_store(c, 0);
    int64_t len = cpu_plane_len(dy, c->a, c->b);
    if (store && dy->c < dx->c)
        for (int n = 0; n < dx->n; n++)
            for (int ch = 0; ch < dx->c; ch++)
                if (ch < c->l->u.slice.start || ch >= c->l->u.slice.start + dy->c)
                    memset(cpu_row(dx, n, ch, c->a), 0, (size_t)len * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * len))
    for (int n = 0; n < dy->n; n++)
        for (int o = 0; o < dy->c; o++) {
            const float *dyr = cpu_row(dy, n, o, c->a);
            float *dxr = cpu_row(dx, n, net_channel_src(c->l, c->in_c[0], o), c->a);
            if (store)
                memcpy(dxr, dyr, (size_t)len * sizeof(float));
            else
                for (int64_t k = 0; k < len; k++) dxr[k] += dyr[k];
        }
}
