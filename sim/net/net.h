/* net: a CNN as data. Parses the text format of nets/FORMAT.md, orders the layers topologically,
 * and infers — once, here, for everyone else to read — every layer's output shape, parameter
 * count, multiply-accumulates and the geometry of its window along H.
 *
 * Conventions: shapes are per image, (C, H, W), fp32; N (the batch) is applied by the caller.
 * Layers are stored in topological order; index 0 is the input. A relu whose input has no other
 * consumer runs in place (flag `inplace`), as PyTorch's ReLU(inplace=True) does in torchvision.
 * Not done here: anything about batches, plans or memory (see plan.h, sched.h, sim.h). */
#ifndef LRCNN_NET_H
#define LRCNN_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/base/err.h"

#define NET_NAME_LEN 48
/* The most inputs a layer takes (add and concat; DenseNet-201's widest concat has 49). */
#define NET_MAX_IN 64
/* The longest line of a net file, its newline not counted, plus one. */
#define NET_LINE_MAX 8192

typedef enum {
    NET_INPUT,
    NET_CONV,
    NET_RELU,
    NET_MAXPOOL,
    NET_AVGPOOL,
    NET_BN,
    NET_FC,
    NET_ADD,
    NET_GAP,   /* global average pool: (C, H, W) -> (C, 1, 1) */
    NET_APOOL, /* adaptive average pool to (C, o, o), torchvision's AdaptiveAvgPool2d */
    NET_LOSS,  /* softmax + cross-entropy over the input's C*H*W logits, or (pixel=1) over its C
                  channels at each of its H*W places, each with its own label */
    /* elementwise activations (PyTorch's formulas, engine/act.h) */
    NET_SIGMOID,
    NET_RELU6,
    NET_LEAKY, /* leakyrelu slope=: x, or slope * x below 0 */
    NET_SILU,  /* x * sigmoid(x), also called swish */
    NET_GELU,  /* x * Phi(x), the exact (erf) form */
    NET_HSWISH, /* hardswish: x * relu6(x + 3) / 6 */
    NET_DROPOUT, /* zeroes each value with probability p, scales the rest by 1 / (1 - p) */
    NET_UPSAMPLE, /* nearest-neighbour upsampling by an integer scale along H and W */
    NET_CONCAT,   /* its inputs' channels one after the other (same H and W) */
    NET_HSIGMOID, /* hardsigmoid: relu6(x + 3) / 6 */
    NET_MUL,      /* elementwise product; an input of one value a channel scales the other's (SE) */
    NET_CONVT,    /* transposed convolution (ConvTranspose2d): the adjoint of a conv, upsampling by its stride */
    NET_BILINEAR, /* bilinear upsampling by an integer scale along H and W (align_corners or not) */
    NET_GNORM,    /* group normalization (GroupNorm): each image's channel groups over the whole map */
    NET_LNORM,    /* layer normalization over the channels at each place (ConvNeXt's LayerNorm2d) */
    NET_SCALE,    /* a learned factor a channel (ConvNeXt's layer scale) */
    NET_SLICE,    /* channels [start, start + c) of its input (torch.chunk, split or narrow along the channels) */
    NET_SHUFFLE,  /* channel shuffle in groups (ShuffleNet): output channel o is input channel
                     (o mod groups) * (C / groups) + o / groups */
    NET_NKIND
} net_kind;

/* A sliding window along one axis: output row o reads input rows o*s - p + d*i, i in [0, k), of
 * the input upsampled u times; u = 0 or 1: not upsampled (every kind but upsample and convt).
 * ceil (max pooling's ceil=1, PyTorch's ceil_mode): the output keeps a last window that hangs over
 * the padded map's end, as long as it starts inside the map or its leading padding; the rows it
 * reads past the map are padding (ignored).
 * Upsampled by repeating (nearest; z false), row v of the upsampled map is input row floor(v / u),
 * and the map has in * u rows. By inserting zeros (z: a transposed convolution), row v is input
 * row v / u where u divides v and zero elsewhere, and the map has (in - 1) * u + 1 + op rows (op:
 * the output padding, zero rows added at the bottom). */
typedef struct {
    int k, s, p, d, u;
    bool z;
    int op;
    bool ceil;
} net_window;

typedef struct {
    net_kind kind;
    char name[NET_NAME_LEN];
    int line;               /* line in the net file, for messages */
    int n_in;
    int in[NET_MAX_IN];     /* producer layer indices (topological, < own index) */
    net_window win;         /* conv and pools (avg: zeros padded, / k*k), along H; the identity {1, 1, 0, 1} else */
    net_window win_w;       /* the same along W: a conv's may differ (k=1x7), every other kind's is win */
    union {
        struct { int c, h, w; } input;
        struct { int c_out; bool bias; int groups; } conv; /* groups: channel groups (depthwise: c_in); convt too */
        struct { float eps, momentum; } bn;
        struct { float eps; int groups; } norm; /* gnorm (groups) and lnorm */
        struct { int c_out; bool bias; } fc;
        struct { int o; } apool;
        struct { float slope; } leaky;
        struct { float p; bool sample; } dropout; /* sample: one draw an image (StochasticDepth) */
        struct { int scale; bool align; } up; /* upsample, bilinear (align: align_corners) */
        struct { bool pixel; } loss;
        struct { int start, c; } slice;
        struct { int groups; } shuffle;
    } u;
    /* inferred by net_infer */
    int c, h, w;            /* output shape per image */
    int64_t params;         /* trainable parameters (bn: gamma and beta) */
    int64_t macs;           /* multiply-accumulates per image, forward (conv and fc only) */
    int n_out;              /* number of consumers */
    bool inplace;           /* relu overwriting its input (single consumer) */
    int inplace_by;         /* the relu that overwrites this layer's output in place, or -1 */
    bool rowwise;           /* can run on a band of rows (kind_table): false for fc, gap, apool, loss */
    bool cut_before;        /* exactly one tensor crosses the cut between layer i-1 and i, and layer i
                               is not a relu overwriting it in place */
} net_layer;

typedef struct {
    char name[NET_NAME_LEN];
    char path[256];
    int n;
    net_layer *layers;
} net;

void net_free(net *n);

/* The largest net sizes accepted, per image, checked as shapes are inferred (beyond them: an error,
 * never a wrapped 64-bit count): one layer's output values, all layers' together, one layer's and
 * all parameters, one layer's multiply-accumulates. A batch (at most 2^20) of 4-byte values of
 * them all still fits an int64_t. */
#define NET_MAX_LAYER_VALUES (1LL << 36)
#define NET_MAX_VALUES (1LL << 40)
#define NET_MAX_PARAMS (1LL << 36)
#define NET_MAX_MACS (1LL << 52)

/* Index of the layer called name, or -1. */
int net_find(const net *n, const char *name);

/* Where input j of l is read first: the least i with in[i] == in[j]. A layer reading one tensor
 * several times (add or concat of x with itself) gets one gradient for it, at that first place. */
static inline int net_input_first(const net_layer *l, int j)
{
    for (int i = 0; i < j; i++)
        if (l->in[i] == l->in[j]) return i;
    return j;
}
static inline bool net_input_repeats(const net_layer *l, int j) { return net_input_first(l, j) != j; }

/* The input channel that output channel o of a channel selection (slice, shuffle) copies; its input
 * has in_c channels. */
static inline int net_channel_src(const net_layer *l, int in_c, int o)
{
    if (l->kind == NET_SHUFFLE) {
        int g = l->u.shuffle.groups;
        return o % g * (in_c / g) + o / g;
    }
    return l->u.slice.start + o;
}

/* Input window of a layer along H (identity for pointwise layers); valid only when rowwise. */
net_window net_layer_window(const net_layer *l);
/* A transposed convolution's own window, the k, s, p, d of its net-file line (and of PyTorch's
 * ConvTranspose2d): that of the conv whose adjoint it is, which maps its output to its input.
 * (l->win is that window's mirror over the zero-inserted input, which the band geometry reads.) */
net_window net_convt_window(const net_layer *l);
/* Output size of a window over `in` rows (or columns); 0 when the window does not fit. */
int net_window_out(net_window w, int in);

int64_t net_params(const net *n);
int64_t net_macs(const net *n);
int64_t net_layer_values(const net_layer *l);
/* Labels per image: 1, or the loss's H*W places under a per-pixel loss (pixel=1). */
int64_t net_labels_per_image(const net *n);

/* The layer's `input` rows that output rows [a, b) read, before clipping to [0, h_in):
 * [a*s - p, (b-1)*s - p + d*(k-1) + 1) of the upsampled map, each end divided by u: rounded down
 * when repeated; when zero-inserted, the first end rounded up (rows between are zeros). */
void net_window_rows(net_window w, int a, int b, int *lo, int *hi);

#endif
