/* fuzz_net: the net file parser (sim/net/load.c: net_parse, nets/FORMAT.md).
 *
 * Input: the text of a net file. A parsed net is then resized (net_set_input, as --image does) and
 * its totals summed, as every command does next. A finding: a crash, an out-of-bounds access, a
 * leak, undefined behaviour (a wrapped shape or count, say) or an allocation past the malloc limit
 * — for any input, which must give either a net or one error message. */
#include <stdlib.h>

#include "sim/net/net.h"
#include "sim/net/load.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    net n;
    err e;
    if (net_parse(&n, text, "fuzz.net", &e) == 0) {
        volatile int64_t sum = net_params(&n) + net_macs(&n) + net_forward_values(&n);
        (void)sum;
        /* resized as `--image` does: the limits must hold at any size, and an error leaves n valid */
        int h = n.layers[0].h, w = n.layers[0].w;
        if (net_set_input(&n, h < (1 << 20) ? 2 * h + 1 : h, w < (1 << 20) ? w + 3 : w, &e) == 0) sum = net_forward_values(&n);
        net_set_input(&n, 1, 1, &e);
        net_free(&n);
    }
    free(text);
    return 0;
}
