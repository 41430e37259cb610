/* net: the net as data — see net.h. Window arithmetic and the sizes of a net already inferred;
 * nothing here knows the kinds (sim/net/kind.c) or the file format (sim/net/load.c). */
#include "sim/net/net.h"

#include <stdlib.h>
#include <string.h>

void net_free(net *n)
{
    free(n->layers);
    n->layers = NULL;
    n->n = 0;
}

int net_find(const net *n, const char *name)
{
    for (int i = 0; i < n->n; i++)
        if (!strcmp(n->layers[i].name, name)) return i;
    return -1;
}

net_window net_layer_window(const net_layer *l) { return l->win; }

net_window net_convt_window(const net_layer *l)
{
    net_window w = l->win;
    return (net_window){w.k, w.u, w.d * (w.k - 1) - w.p, w.d};
}

int64_t net_labels_per_image(const net *n)
{
    const net_layer *l = &n->layers[n->n - 1];
    return (int64_t)l->h * l->w; /* the loss is (classes, 1, 1), or (classes, H, W) per pixel */
}

static int floor_div(int a, int u) { return a >= 0 ? a / u : -((-a + u - 1) / u); }

void net_window_rows(net_window w, int a, int b, int *lo, int *hi)
{
    int u = w.u > 1 ? w.u : 1;
    *lo = w.z ? -floor_div(-(a * w.s - w.p), u) : floor_div(a * w.s - w.p, u);
    *hi = floor_div((b - 1) * w.s - w.p + w.d * (w.k - 1), u) + 1;
}

int net_window_out(net_window w, int in)
{
    int u = w.u > 1 ? w.u : 1;
    int64_t up = w.z ? (int64_t)(in - 1) * u + 1 + w.op : (int64_t)in * u;
    int64_t span = up + 2 * (int64_t)w.p - (int64_t)w.d * (w.k - 1) - 1; /* keys go to INT_MAX / 4 */
    if (span < 0) return 0;
    int64_t out = w.ceil ? (span + w.s - 1) / w.s + 1 : span / w.s + 1;
    if (w.ceil && (out - 1) * w.s >= up + w.p) out--; /* PyTorch: the last window starts inside */
    return (int)out;
}

int64_t net_params(const net *n)
{
    int64_t s = 0;
    for (int i = 0; i < n->n; i++) s += n->layers[i].params;
    return s;
}

int64_t net_macs(const net *n)
{
    int64_t s = 0;
    for (int i = 0; i < n->n; i++) s += n->layers[i].macs;
    return s;
}

int64_t net_layer_values(const net_layer *l) { return (int64_t)l->c * l->h * l->w; }
