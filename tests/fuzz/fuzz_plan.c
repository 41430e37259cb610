/* fuzz_plan: the plan parser (sim/plan/plan.c: plan_parse, plan_list_expand; syntax in docs/plans.md).
 *
 * Input: a plan text — a preset, a custom plan, modifiers, " bn=..." — or a comma-separated list
 * of them with ranges ("layer,2ps:2..8"). The text is expanded as a list, then parsed as one plan
 * against three fixed nets from nets/: ResNet-small (residual blocks, bn), kernels (odd sizes,
 * strides, dilation, avgpool padding) and VGG-16 at 64x64 (the authors-* presets name its layers).
 * A plan that parses is described, and on the two small nets lowered to a schedule (pipeline_lower:
 * where a modifier that encodes nothing is refused). A finding: a crash, an out-of-bounds access,
 * a leak, undefined behaviour, a failed CHECK (an internal invariant the parser let through) or an
 * allocation past the malloc limit; every input must give a plan or one error message. */
#include <stdlib.h>

#include "sim/plan/plan.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "sim/lower/sched.h"
#include "tests/fuzz/fuzz.h"

static net nets[3];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    static const char *names[] = {"resnet-small", "kernels", "vgg16"};
    err e;
    for (int i = 0; i < 3; i++)
        if (net_load_named(&nets[i], names[i], &e)) fuzz_fail("cannot load the fixed net", &e);
    if (net_set_input(&nets[2], 64, 64, &e)) fuzz_fail("vgg16 at 64x64", &e);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    err e;
    char **items;
    int count;
    if (plan_list_expand(text, &items, &count, &e) == 0) plan_list_free(items, count);
    for (int i = 0; i < 3; i++) {
        plan p;
        if (plan_parse(&p, &nets[i], text, &e)) continue;
        char line[4096];
        plan_describe(&p, &nets[i], line, sizeof line);
        volatile int family = plan_family(&p)[0] + plan_bn_approximate(&p, &nets[i]);
        (void)family;
        if (i < 2) {
            sched s;
            sched_cfg cfg = {.batch = 2, .optimizer = (size & 1) ? SCHED_ADAM : SCHED_SGD};
            if (pipeline_lower(&s, &nets[i], &p, &cfg, &e) == 0) sched_free(&s);
        }
        plan_free(&p);
    }
    free(text);
    return 0;
}
