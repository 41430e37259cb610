/* Network model: published oracles (paper/peers.md, "Network oracles") and line-numbered errors
 * for malformed net files.
 *   VGG-16: 138,357,544 parameters, 15,470,264,320 MACs and 15,237,608 forward values per image
 *   (input + every conv, pool and fc output) at 224x224; ResNet-50: 25,557,032 parameters and
 *   ~4.09 G MACs. */
#include <stdio.h>
#include <string.h>

#include "sim/net/net.h"
#include "sim/net/load.h"

static int failures;
#define EXPECT_EQ(what, got, want)                                                                    \
    do {                                                                                              \
        long long g_ = (long long)(got), w_ = (long long)(want);                                      \
        if (g_ != w_) {                                                                               \
            fprintf(stderr, "FAIL %s: got %lld, want %lld (diff %lld)\n", what, g_, w_, g_ - w_);     \
            failures++;                                                                               \
        } else {                                                                                      \
            printf("ok   %s = %lld\n", what, g_);                                                     \
        }                                                                                             \
    } while (0)

static void expect_error(const char *label, const char *text, const char *want)
{
    net n;
    err e = {{0}};
    if (!net_parse(&n, text, "bad.net", &e)) {
        fprintf(stderr, "FAIL %s: parsed, expected an error containing \"%s\"\n", label, want);
        failures++;
        net_free(&n);
        return;
    }
    if (!strstr(e.msg, want) || strchr(e.msg, '\n')) {
        fprintf(stderr, "FAIL %s: error \"%s\" lacks \"%s\" (or is not one line)\n", label, e.msg, want);
        failures++;
        return;
    }
    printf("ok   %s -> %s\n", label, e.msg);
}

#define HEAD "input data c=3 h=8 w=8\n"
#define TAIL "gap g\nfc f c=2\nloss l\n"

int main(void)
{
    net n;
    err e;
    if (net_load_named(&n, "vgg16", &e)) return fprintf(stderr, "FAIL %s\n", e.msg), 1;
    EXPECT_EQ("vgg16 parameters", net_params(&n), 138357544LL);
    EXPECT_EQ("vgg16 MACs per image", net_macs(&n), 15470264320LL);
    EXPECT_EQ("vgg16 forward values per image", net_forward_values(&n), 15237608LL);
    EXPECT_EQ("vgg16 relus in place", n.layers[net_find(&n, "relu1_1")].inplace, 1);
    if (net_set_input(&n, 320, 320, &e)) return fprintf(stderr, "FAIL %s\n", e.msg), 1;
    EXPECT_EQ("vgg16 parameters at 320x320 (adaptive pool keeps fc6)", net_params(&n), 138357544LL);
    net_free(&n);
    if (net_load_named(&n, "resnet50", &e)) return fprintf(stderr, "FAIL %s\n", e.msg), 1;
    EXPECT_EQ("resnet50 parameters", net_params(&n), 25557032LL);
    long long macs = net_macs(&n);
    if (macs < 4.05e9 || macs > 4.13e9) fprintf(stderr, "FAIL resnet50 MACs %lld not ~4.09 G\n", macs), failures++;
    else printf("ok   resnet50 MACs per image = %lld (~4.09 G)\n", macs);
    int inside = net_find(&n, "layer1.0.conv2"), after = net_find(&n, "layer2.0.conv1");
    EXPECT_EQ("resnet50 no clean cut inside a block", n.layers[inside].cut_before, 0);
    EXPECT_EQ("resnet50 clean cut between stages", n.layers[after].cut_before, 1);
    net_free(&n);
    const char *others[] = {"vgg-small", "resnet-small", "kernels"};
    for (int i = 0; i < 3; i++) {
        if (net_load_named(&n, others[i], &e)) fprintf(stderr, "FAIL %s\n", e.msg), failures++;
        else printf("ok   %s loads: %d layers, %lld parameters\n", others[i], n.n, (long long)net_params(&n)), net_free(&n);
    }
    expect_error("unknown key", HEAD "conv c1 c=4 k=3 kernel=3\n" TAIL, "bad.net:2: unknown key 'kernel'");
    expect_error("unknown kind", HEAD "swish d1\n" TAIL, "bad.net:2: unknown layer kind 'swish'");
    expect_error("dropout p=1", HEAD "dropout d1 p=1\n" TAIL, "bad.net:2: dropout 'd1': p=1 drops everything (p must be below 1)");
    expect_error("leakyrelu slope<0", HEAD "leakyrelu r1 slope=-0.1\n" TAIL, "bad.net:2: bad value '-0.1' for slope (a number >= 0)");
    expect_error("missing key", HEAD "conv c1 k=3\n" TAIL, "bad.net:2: conv 'c1' needs key 'c'");
    expect_error("bad value", HEAD "conv c1 c=4 k=0\n" TAIL, "bad.net:2: bad value '0' for k");
    expect_error("empty shape", HEAD "conv c1 c=4 k=9\n" TAIL, "bad.net:2: conv 'c1': output would be empty");
    expect_error("missing input", HEAD "conv c1 in=nope c=4 k=3\n" TAIL, "bad.net:2: 'c1' reads unknown layer 'nope'");
    expect_error("cycle", HEAD "relu a in=b\nrelu b in=a\nadd c in=data,b\n" TAIL, "cycle through layer");
    expect_error("duplicate", HEAD "relu a\nrelu a\n" TAIL, "bad.net:3: duplicate layer name 'a'");
    expect_error("add shapes", HEAD "conv a c=4 k=3\nadd b in=a,data\n" TAIL, "bad.net:3: add 'b': inputs");
    expect_error("loss not last", HEAD "gap g\nloss l\nfc f c=2\n", "the loss must be the last layer");
    expect_error("unused layer", HEAD "conv a c=4 k=3\nconv b in=data c=4 k=3\n" TAIL, "bad.net:2: layer 'a' is never used");
    expect_error("no input", "conv a c=4 k=3\n" TAIL, "has no input");
    if (!net_load(&n, "/nonexistent/x.net", &e)) failures++;
    else printf("ok   missing file -> %s\n", e.msg);
    printf("%s\n", failures ? "FAILED" : "all net checks passed");
    return failures != 0;
}
