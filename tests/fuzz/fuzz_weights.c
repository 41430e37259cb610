/* fuzz_weights: the weights reader (io/weights.c: weights_load, what --init-weights reads; layout
 * in io/weights.h), over HDF5 files.
 *
 * Input: the bytes of an HDF5 file, loaded into an executor of nets/bn-cover.net (conv with bias,
 * bn with running statistics, fc: every tensor kind) started once. A finding: a crash, an
 * out-of-bounds access (a dataset read into a slice of the wrong size), a leak, undefined
 * behaviour, an HDF5 object left open, or an allocation past the malloc limit; every file must
 * load or give one error message. Crashes inside libhdf5 itself (not instrumented) show as SEGV
 * with HDF5 frames: those are the library's, recorded in RESULTS.md, not the reader's. */
#include "engine/exec.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "io/weights.h"
#include "tests/fuzz/fuzz.h"

static net n;
static plan p;
static sched s;
static exec x;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    err e;
    if (net_load_named(&n, "bn-cover", &e) || plan_parse(&p, &n, "layer", &e)) fuzz_fail("setup", &e);
    sched_cfg cfg = {.batch = 1, .optimizer = SCHED_SGD};
    if (pipeline_lower(&s, &n, &p, &cfg, &e)) fuzz_fail("setup", &e);
    exec_init(&x, &n, &p, &s, &ops_cpu, SCHED_SGD, exec_default_hparams(SCHED_SGD), 1);
    exec_start(&x);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    err e;
    weights_load(&x, path, &e);
    fuzz_h5_all_closed("weights_load");
    return 0;
}
