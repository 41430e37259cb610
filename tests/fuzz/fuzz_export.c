/* fuzz_export: the result-file readers (io/export.c: h5_export, what `lrcnn export` runs, and
 * h5_open_result under it; io/calib.c: calib_read, what --calibrate reads; io/profile.c:
 * profile_read, what --profile reads), over HDF5 files (layout in results/SCHEMA.md).
 *
 * Input: the bytes of an HDF5 file. It is exported to TSV tables in a scratch directory (emptied
 * after each input), then read as a calibration and as a device profile. A finding: a crash, an
 * out-of-bounds access, a leak, undefined behaviour, an HDF5 object left open, or an allocation
 * past the malloc limit (a header declaring 2^40 elements must be refused before allocating:
 * h5_check_extent); every file must export or give one error message, and likewise for the other
 * two readers. Crashes inside libhdf5 itself (not instrumented) show as SEGV with HDF5 frames:
 * those are the library's, recorded in RESULTS.md, not the readers'. */
#include <stdio.h>

#include "io/calib.h"
#include "io/h5.h"
#include "io/profile.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    char out[600];
    snprintf(out, sizeof out, "%s/tables", fuzz_dir());
    err e;
    h5_export(path, out, true, false, NULL, &e);
    fuzz_h5_all_closed("h5_export");
    fuzz_remove_tree(out);

    enc_calib c;
    if (calib_read(path, &c, &e) == 0) enc_calib_free(&c);
    fuzz_h5_all_closed("calib_read");

    timing_model m;
    if (profile_read(path, &m, &e) == 0) timing_free(&m);
    fuzz_h5_all_closed("profile_read");
    return 0;
}
