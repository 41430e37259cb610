/* conv_split (engine/cuda/conv_split.h): for random windows, heights and bands, the pieces cover
 * the band once, and a one-dimensional model of what cuDNN computes (symmetric zero padding around
 * the view of real rows) gives every row of the band exactly what the band convolution gives
 * (zero padding only at the image borders). Integer data, so equality is exact. No GPU needed. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/cuda/conv_split.h"

static long band_row(const long *x, int in_h, net_window w, int o)
{
    long s = 0;
    for (int i = 0; i < w.k; i++) {
        int r = o * w.s - w.p + w.d * i;
        if (r >= 0 && r < in_h) s += x[r] * (i + 1);
    }
    return s;
}

/* cuDNN's output row j of a piece: view rows j*s - pad + d*i of the real rows [v0, v1). */
static long cudnn_row(const long *x, net_window w, const conv_piece *c, int j)
{
    long s = 0;
    for (int i = 0; i < w.k; i++) {
        int v = j * w.s - c->pad + w.d * i;
        if (v >= 0 && v < c->v1 - c->v0) s += x[c->v0 + v] * (i + 1);
    }
    return s;
}

int main(void)
{
    srand(7);
    long x[400];
    int failures = 0, cases = 0, direct = 0, pieces = 0;
    for (int trial = 0; trial < 20000 && failures < 10; trial++) {
        net_window w = {.k = 1 + rand() % 7, .s = 1 + rand() % 3, .d = 1 + rand() % 2};
        w.p = rand() % (w.d * (w.k - 1) / 2 + 2);
        int in_h = 1 + rand() % 120, dk = w.d * (w.k - 1) + 1;
        if (in_h + 2 * w.p < dk) continue;
        int out_h = (in_h + 2 * w.p - dk) / w.s + 1;
        for (int i = 0; i < in_h; i++) x[i] = rand() % 1000 - 500;
        int a = rand() % out_h, b = a + 1 + rand() % (out_h - a);
        conv_piece c[3];
        int n = conv_split(w, in_h, a, b, c);
        cases++, pieces += n, direct += n == 1 && conv_piece_direct(&c[0]);
        int next = a;
        for (int k = 0; k < n; k++) {
            bool ok = c[k].a == next && c[k].b > c[k].a && c[k].o0 <= c[k].a && c[k].o0 + c[k].out >= c[k].b && c[k].v0 >= 0 &&
                      c[k].v1 <= in_h && (c[k].pad < w.p + w.s + dk);
            if (ok && c[k].v0 >= c[k].v1) { /* reads only padding (k = 1, p > 0): zero rows, no cuDNN call */
                for (int o = c[k].a; ok && o < c[k].b; o++) ok = band_row(x, in_h, w, o) == 0;
                if (ok) {
                    next = c[k].b;
                    continue;
                }
            }
            for (int o = c[k].a; ok && o < c[k].b; o++) ok = cudnn_row(x, w, &c[k], o - c[k].o0) == band_row(x, in_h, w, o);
            if (!ok) {
                printf("FAIL k=%d s=%d p=%d d=%d in_h=%d rows [%d,%d): piece %d [%d,%d) o0=%d out=%d pad=%d v=[%d,%d)\n", w.k, w.s,
                       w.p, w.d, in_h, a, b, k, c[k].a, c[k].b, c[k].o0, c[k].out, c[k].pad, c[k].v0, c[k].v1);
                failures++;
            }
            if (c[k].out > conv_split_stage_rows(w, b - a)) {
                printf("FAIL staging bound: %d rows > %d\n", c[k].out, conv_split_stage_rows(w, b - a));
                failures++;
            }
            next = c[k].b;
        }
        if (next != b) printf("FAIL pieces end at %d, not %d\n", next, b), failures++;
    }
    printf("%d bands, %d pieces, %d one direct call: %s\n", cases, pieces, direct, failures ? "FAILED" : "ok");
    return failures != 0;
}
