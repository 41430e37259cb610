/* conv_split: see conv_split.h. */
#include "engine/cuda/conv_split.h"

static int max_i(int x, int y) { return x > y ? x : y; }
static int min_i(int x, int y) { return x < y ? x : y; }
static int mod_pos(int x, int m) { return ((x % m) + m) % m; }

/* The one cuDNN call for rows [a, b): the smallest padding that covers both borders and lines
 * the windows up. */
static conv_piece one_call(net_window w, int in_h, int a, int b)
{
    int lo, hi;
    net_window_rows(w, a, b, &lo, &hi);
    conv_piece c = {.a = a, .b = b, .v0 = max_i(lo, 0), .v1 = min_i(hi, in_h)};
    int pad = max_i(max_i(-lo, 0), max_i(hi - in_h, 0));
    while (mod_pos(c.v0 - pad + w.p, w.s)) pad++;
    int dk = w.d * (w.k - 1) + 1;
    c.pad = pad;
    c.o0 = (c.v0 - pad + w.p) / w.s;
    c.out = (c.v1 - c.v0 + 2 * pad - dk) / w.s + 1;
    return c;
}

int conv_split(net_window w, int in_h, int a, int b, conv_piece piece[3])
{
    piece[0] = one_call(w, in_h, a, b);
    if (conv_piece_direct(&piece[0])) return 1;
    int dk = w.d * (w.k - 1) + 1;
    int t = (w.p + w.s - 1) / w.s;           /* first row whose window starts inside the map */
    int u = (in_h + w.p - dk) / w.s + 1;     /* first row whose window ends below it */
    int top = min_i(max_i(t, a), b), bot = max_i(min_i(u, b), top);
    int n = 0;
    if (top > a) piece[n++] = one_call(w, in_h, a, top);
    if (bot > top) piece[n++] = one_call(w, in_h, top, bot);
    if (b > bot) piece[n++] = one_call(w, in_h, bot, b);
    return n;
}

int conv_split_stage_rows(net_window w, int rows)
{
    /* a border piece has at most ceil(p / s) + rows... bounded by the band; cuDNN adds at most
     * (2 * pad) / s rows, and pad < p + s + dk (the alignment loop adds at most s - 1) */
    int dk = w.d * (w.k - 1) + 1;
    return rows + (2 * (w.p + w.s + dk)) / w.s + 1;
}
