/* randnet: random network texts for property tests (see randnet.h). Every layer is appended with
 * put(); channel counts are tracked so that an add's inputs always agree in shape (heights
 * agree by construction: an identity block keeps them, a strided block's k x k stride-2 branch
 * with padding k/2 and its 1x1 stride-2 shortcut both give (H - 1) / 2 + 1). Of the layers drawn
 * as a pooling, every fourth is an upsampling instead (nearest by 2 or 3, or bilinear by 2 to 4,
 * its corners aligned one time in two) and another fourth a transposed convolution of the pool's window (drawn as the pool was, so the draws that follow are
 * unchanged). */
#include "tests/randnet.h"

#include <stdarg.h>
#include <stdio.h>

int randnet_below(randnet_rng *g, int n)
{
    g->state = g->state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((g->state >> 33) % (unsigned long long)n);
}

typedef struct {
    char *buf;
    size_t len, at;
} out;

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
    va_end(ap);
    if (k > 0) o->at += (size_t)k;
    if (o->at >= o->len) o->at = o->len - 1; /* truncated (8 KiB holds any net drawn here) */
}

/* The elementwise activations, dropout (a draw a value, or an image), layer norm over the channels
 * and layer scale, taken in turn by layer index (no extra draw, so the nets' shapes stay the
 * original generator's); the first three can run in place. */
static const char *const acts[] = {"relu",      "relu6",   "leakyrelu",   "sigmoid", "silu",  "gelu",
                                   "hardswish", "dropout", "hardsigmoid", "lnorm",   "scale", "dropout"};
static const char *act(int i, bool inplace) { return acts[i % (inplace ? 3 : 12)]; }
/* Layer i's line as one of them, reading `in`. */
static void act_line(out *o, int i, const char *in)
{
    put(o, "%s l%d in=%s%s\n", act(i, false), i, in, i % 12 == 11 ? " sample=1" : "");
}

/* test_band's nets: 2 channels, width 3; the order of draws is the original generator's. */
static void small_net(randnet_rng *g, out *o, int h)
{
    put(o, "input data c=2 h=%d w=3\n", h);
    int ops = 2 + randnet_below(g, 7);
    for (int i = 0; i < ops; i++) {
        int kind = randnet_below(g, 10);
        char in[32] = "data";
        if (i) snprintf(in, sizeof in, "l%d", i - 1);
        if (kind <= 3) {
            int k = 1 + randnet_below(g, 7), d = 1;
            if (k > 1 && randnet_below(g, 3) == 0) d = 2;
            int s = 1 + (randnet_below(g, 3) == 0);
            s += randnet_below(g, 8) == 0;
            int p = randnet_below(g, (d * (k - 1)) / 2 + 1);
            put(o, "conv l%d in=%s c=2 k=%d s=%d p=%d d=%d groups=%d\n", i, in, k, s, p, d, i % 3 ? 1 : 2); /* depthwise */
        } else if (kind == 4) {
            int k = 2 + randnet_below(g, 2), s = 1 + randnet_below(g, 2), p = randnet_below(g, k / 2 + 1);
            const char *pool = randnet_below(g, 2) ? "maxpool" : "avgpool";
            if (i % 8 == 3) put(o, "upsample l%d in=%s scale=%d\n", i, in, 2 + i % 2); /* same draws, no pool */
            else if (i % 8 == 7) put(o, "bilinear l%d in=%s scale=%d align=%d\n", i, in, 2 + i % 3, i % 16 == 15);
            else if (i % 4 == 1) put(o, "convt l%d in=%s c=2 k=%d s=%d p=%d op=%d\n", i, in, k, s, p, s > 1 && i % 8 == 1);
            else put(o, "%s l%d in=%s k=%d s=%d p=%d%s\n", pool, i, in, k, s, p, pool[0] == 'm' && i % 3 == 2 ? " ceil=1" : "");
        } else if (kind == 5) {
            act_line(o, i, in);
        } else if (kind == 6) {
            put(o, "bn l%d in=%s\n", i, in);
        } else {
            bool down = kind == 9;
            int k = down ? 3 : 1 + 2 * randnet_below(g, 3);
            put(o, "conv l%d_a in=%s c=2 k=%d s=%d p=%d\n", i, in, k, down ? 2 : 1, k / 2);
            put(o, "relu l%d_r in=l%d_a\n", i, i);
            put(o, "conv l%d_b in=l%d_r c=2 k=3 p=1\n", i, i);
            if (down) {
                put(o, "conv l%d_s in=%s c=2 k=1 s=2\n", i, in);
                put(o, "add l%d in=l%d_b,l%d_s\n", i, i, i);
            } else {
                put(o, "add l%d in=l%d_b,%s\n", i, i, in);
            }
        }
    }
    put(o, "gap g in=l%d\nfc f c=2\nloss loss\n", ops - 1);
}

/* A residual block on `in` (ch channels) named l<i>: conv, relu, conv, add (every fifth: concat, and
 * every tenth that one's channels shuffled; every sixth's branch on a slice of the input's channels),
 * and sometimes a relu on the sum (in place, as in ResNets). A strided block takes a 1x1 stride-2 shortcut and may change
 * the channel count. Returns the block's output channels. */
static int block(randnet_rng *g, out *o, int i, const char *in, int ch)
{
    bool down = randnet_below(g, 3) == 0, relu = randnet_below(g, 2);
    int k = down ? 3 + 2 * randnet_below(g, 3) : 1 + 2 * randnet_below(g, 3);
    int mid = 1 + randnet_below(g, 4), oc = down ? 1 + randnet_below(g, 4) : ch;
    char branch[32];
    snprintf(branch, sizeof branch, "%s", in);
    if (!down && ch > 1 && i % 6 == 1) { /* every sixth block's branch reads the input's upper channels (ShuffleNetV2's split) */
        put(o, "slice l%d_x in=%s start=%d c=%d\n", i, in, ch / 2, ch - ch / 2);
        snprintf(branch, sizeof branch, "l%d_x", i);
    }
    put(o, "conv l%d_a in=%s c=%d k=%d s=%d p=%d\n", i, branch, mid, k, down ? 2 : 1, k / 2);
    put(o, "relu l%d_r in=l%d_a\n", i, i);
    put(o, "conv l%d_b in=l%d_r c=%d k=3 p=1\n", i, i, oc);
    char sc[32];
    snprintf(sc, sizeof sc, "%s", in);
    if (down) {
        put(o, "conv l%d_s in=%s c=%d k=1 s=2\n", i, in, oc);
        snprintf(sc, sizeof sc, "l%d_s", i);
    }
    char b[32];
    snprintf(b, sizeof b, "l%d_b", i);
    if (i % 3 == 2) { /* every third block squeezes and excites its branch (MobileNetV3's SE) */
        put(o, "gap l%d_g in=l%d_b\nconv l%d_e in=l%d_g c=%d k=1\nhardsigmoid l%d_h in=l%d_e\n", i, i, i, i, oc, i, i);
        put(o, "mul l%d_m in=l%d_h,l%d_b\n", i, i, i);
        snprintf(b, sizeof b, "l%d_m", i);
    }
    /* every fifth block joins by channels, with the branch's middle too (DenseNet, U-Net); every
     * seventh adds its branch twice */
    bool cat = i % 5 == 4;
    const char *join = cat ? "concat" : "add";
    char third[40] = "";
    if (cat) snprintf(third, sizeof third, ",l%d_r", i);
    else if (i % 7 == 6) snprintf(third, sizeof third, ",%s", b);
    int out_ch = cat ? oc + (down ? oc : ch) + mid : oc;
    bool shuffle = cat && i % 10 == 9 && out_ch % 2 == 0; /* and every other concat's channels shuffled in two groups */
    put(o, "%s l%d%s in=%s,%s%s\n", join, i, relu || shuffle ? "_sum" : "", b, sc, third);
    if (shuffle) put(o, "shuffle l%d%s in=l%d_sum groups=2\n", i, relu ? "_sh" : "", i);
    if (relu) put(o, "relu l%d in=l%d%s\n", i, i, shuffle ? "_sh" : "_sum");
    return out_ch;
}

/* Wider nets for the closed form: the shapes a user's net has (odd sizes, stride-2 convolutions
 * with 5x5 and 7x7 kernels, padded pools (every third max pool with ceil=1), relus after
 * convolutions and blocks). */
static void wide_net(randnet_rng *g, out *o, int h)
{
    int ch = 1 + randnet_below(g, 3), w = 1 + randnet_below(g, 12);
    put(o, "input data c=%d h=%d w=%d\n", ch, h, w);
    int ops = 2 + randnet_below(g, 11);
    char in[32] = "data";
    for (int i = 0; i < ops; i++) {
        int kind = randnet_below(g, 12);
        if (kind <= 3 || kind == 11) { /* a convolution, strided with a large kernel one time in four */
            int k = 1 + randnet_below(g, 7), d = 1, s = 1 + (randnet_below(g, 3) == 0);
            if (randnet_below(g, 4) == 0) k = 5 + randnet_below(g, 3), s = 2;
            if (k > 1 && randnet_below(g, 4) == 0) d = 2;
            if (randnet_below(g, 10) == 0) s = 3;
            int p = randnet_below(g, (d * (k - 1)) / 2 + 1);
            int in_ch = ch;
            ch = 1 + randnet_below(g, 4);
            /* every third convolution in channel groups: as many as both channel counts allow */
            int groups = i % 3 ? 1 : in_ch % ch == 0 ? ch : ch % in_ch == 0 ? in_ch : 1;
            if (i % 7 == 5) /* factorized, as Inception's: the same window along H, 1 x k along W after it */
                put(o, "conv l%d%s in=%s c=%d k=%dx%d s=%dx1 p=%dx%d d=%dx1 groups=%d\n", i, kind == 11 ? "_c" : "", in, ch, k,
                    1 + 2 * (k / 2), s, p, k / 2, d, groups);
            else
                put(o, "conv l%d%s in=%s c=%d k=%d s=%d p=%d d=%d groups=%d\n", i, kind == 11 ? "_c" : "", in, ch, k, s, p, d, groups);
            if (kind == 11) put(o, "%s l%d in=l%d_c\n", act(i, true), i, i); /* after a conv: in place */
        } else if (kind <= 5) {
            int k = 2 + randnet_below(g, 4), s = 1 + randnet_below(g, 2), p = randnet_below(g, k / 2 + 1);
            const char *pool = randnet_below(g, 2) ? "maxpool" : "avgpool";
            if (i % 8 == 3) put(o, "upsample l%d in=%s scale=%d\n", i, in, 2 + i % 2); /* same draws, no pool */
            else if (i % 8 == 7) put(o, "bilinear l%d in=%s scale=%d align=%d\n", i, in, 2 + i % 3, i % 16 == 15);
            else if (i % 4 == 1) /* a transposed convolution, depthwise one time in two */
                put(o, "convt l%d in=%s c=%d k=%d s=%d p=%d op=%d groups=%d\n", i, in, ch, k, s, p, s > 1 && i % 8 == 1, i % 8 == 5 ? ch : 1);
            else put(o, "%s l%d in=%s k=%d s=%d p=%d%s\n", pool, i, in, k, s, p, pool[0] == 'm' && i % 3 == 2 ? " ceil=1" : "");
        } else if (kind == 6) {
            act_line(o, i, in);
        } else if (kind == 7) {
            if (i % 4 == 2) put(o, "gnorm l%d in=%s groups=1\n", i, in); /* whole maps: a row segment ends before it */
            else put(o, "bn l%d in=%s\n", i, in);
        } else {
            ch = block(g, o, i, in, ch);
        }
        snprintf(in, sizeof in, "l%d", i);
    }
    put(o, "gap g in=%s\nfc f c=%d\nloss loss\n", in, 2 + randnet_below(g, 4));
}

void randnet_text(randnet_rng *g, randnet_kind kind, char *buf, size_t len, int h)
{
    out o = {buf, len, 0};
    buf[0] = 0;
    if (kind == RANDNET_SMALL) small_net(g, &o, h);
    else wide_net(g, &o, h);
}
