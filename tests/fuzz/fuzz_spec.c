/* fuzz_spec: the experiment spec parser (io/spec.c: spec_read, the body of spec_load; format in
 * experiments/README.md), plan lists included (plan_list_expand; the plans themselves are parsed
 * later, per net, by lrcnn sweep — fuzz_plan covers that).
 *
 * Input: the text of a spec file, read through a stream as spec_load reads the file. A spec that
 * parses has its runs counted and is freed. A finding: a crash, an out-of-bounds access, a leak,
 * undefined behaviour (an overflowing range or count) or an allocation past the malloc limit;
 * every input must give a spec or one error message. */
#include <stdio.h>

#include "io/spec.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0; /* fmemopen may refuse an empty buffer; the empty spec is in the corpus as "\n" */
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f) fuzz_fail("fmemopen", NULL);
    spec s;
    err e;
    if (spec_read(&s, f, "experiments/fuzz.spec", &e) == 0) {
        if (spec_runs(&s) > SPEC_MAX_RUNS) fuzz_fail("spec_read accepted more runs than SPEC_MAX_RUNS", NULL);
        spec_free(&s);
    }
    fclose(f);
    return 0;
}
