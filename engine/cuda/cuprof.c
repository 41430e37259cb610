/* cuprof: the CUPTI half of cuprof.h. Enables the activity kinds before the first CUDA call,
 * gives CUPTI large buffers, and feeds completed buffers to the parse layer under a lock (CUPTI
 * calls back from its own thread). CUPTI's activity callbacks are process-wide, so there is one
 * profiler per process. Never prints or aborts on a CUPTI failure: it comes back as err with
 * CUPTI's own message. Does not detach CUPTI (cuptiFinalize) at stop. */
#include "engine/cuda/cuprof.h"

#include <pthread.h>
#include <stdlib.h>

#include <cupti.h>

/* Large buffers: few completions, and room for a burst of records without drops. A multiple of
 * ACTIVITY_RECORD_ALIGNMENT (8), which CUPTI requires of the buffer's start. */
#define CUPROF_BUF_BYTES ((size_t)8 << 20)

/* External correlation records are emitted alongside API records only, so RUNTIME and DRIVER are
 * on (cuDNN and cuBLAS launch through either); the parse layer ignores the API records. */
static const CUpti_ActivityKind cuprof_kinds[] = {
    CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
#define CUPROF_NKINDS (sizeof cuprof_kinds / sizeof *cuprof_kinds)
/* Those recorded on every launch (cuprof_watch): cuprof_kinds[CUPROF_FIRST_LAUNCH] onwards. */
#define CUPROF_FIRST_LAUNCH 2
#define CUPROF_EXT_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0   /* the one the parse layer reads */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* All under lock; `on` is only written by the caller's thread, so that thread may read it bare. */
static cuprof_state st;
static bool on;
static CUptiResult tag_status = CUPTI_SUCCESS;   /* first tag/untag failure */

static int cupti_err(err *e, CUptiResult r, const char *call, const char *fn, const char *file,
                     int line)
{
    const char *msg = NULL;
    if (cuptiGetResultString(r, &msg) != CUPTI_SUCCESS || !msg)
        msg = "unknown CUPTI error";
    return err_set(e, "%s failed in %s at %s:%d: %s", call, fn, file, line, msg);
}

#define CUPTI_CHECK(call, e)                                                       \
    do {                                                                           \
        CUptiResult r_ = (call);                                                   \
        if (r_ != CUPTI_SUCCESS)                                                   \
            return cupti_err(e, r_, #call, __func__, __FILE__, __LINE__);          \
    } while (0)

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, CUPROF_BUF_BYTES);
    *size = *buf ? CUPROF_BUF_BYTES : 0;   /* no buffer: CUPTI drops records and counts them */
    *max_records = 0;
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                   size_t valid)
{
    (void)size;
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    pthread_mutex_lock(&lock);
    if (on) {
        CUpti_Activity *rec = NULL;
        CUptiResult r;
        while ((r = cuptiActivityGetNextRecord(buf, valid, &rec)) == CUPTI_SUCCESS)
            cuprof_take(&st, rec);
        /* A buffer that cannot be read to its end lost records just as surely as a drop. */
        st.dropped += dropped + (r != CUPTI_ERROR_MAX_LIMIT_REACHED);
    }
    pthread_mutex_unlock(&lock);
    free(buf);
}

static int flush(err *e)
{
    size_t dropped = 0;
    if (!on)
        return err_set(e, "cuprof: cuprof_start was not called");
    CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), e);
    CUPTI_CHECK(cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped), e);
    pthread_mutex_lock(&lock);
    st.dropped += dropped;
    pthread_mutex_unlock(&lock);
    return 0;
}

static int enable_all(err *e)
{
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buf_requested, buf_completed), e);
    for (size_t i = 0; i < CUPROF_NKINDS; i++)
        CUPTI_CHECK(cuptiActivityEnable(cuprof_kinds[i]), e);
    return 0;
}

int cuprof_start(int n_tags, err *e)
{
    pthread_mutex_lock(&lock);
    bool was_on = on;
    if (!was_on) {
        cuprof_state_init(&st, n_tags);
        tag_status = CUPTI_SUCCESS;
        on = true;
    }
    pthread_mutex_unlock(&lock);
    if (was_on)
        return err_set(e, "cuprof_start: already started");
    if (enable_all(e) == 0)
        return 0;
    cuprof_stop();
    return -1;
}

int cuprof_watch(bool launches, err *e)
{
    if (!on)
        return err_set(e, "cuprof: cuprof_start was not called");
    for (size_t i = CUPROF_FIRST_LAUNCH; i < CUPROF_NKINDS; i++)
        CUPTI_CHECK(launches ? cuptiActivityEnable(cuprof_kinds[i]) : cuptiActivityDisable(cuprof_kinds[i]), e);
    return 0;
}

static void keep_tag_status(CUptiResult r)
{
    if (r == CUPTI_SUCCESS)
        return;
    pthread_mutex_lock(&lock);
    if (tag_status == CUPTI_SUCCESS)
        tag_status = r;
    pthread_mutex_unlock(&lock);
}

void cuprof_tag(uint64_t id)
{
    keep_tag_status(cuptiActivityPushExternalCorrelationId(CUPROF_EXT_KIND, id));
}

void cuprof_untag(void)
{
    keep_tag_status(cuptiActivityPopExternalCorrelationId(CUPROF_EXT_KIND, NULL));
}

int cuprof_mark(err *e)
{
    if (flush(e))
        return -1;
    pthread_mutex_lock(&lock);
    cuprof_state_mark(&st);
    pthread_mutex_unlock(&lock);
    return 0;
}

int cuprof_report_get(cuprof_report *r, err *e)
{
    if (flush(e))
        return -1;
    pthread_mutex_lock(&lock);
    CUptiResult t = tag_status;
    cuprof_fill(&st, r);
    pthread_mutex_unlock(&lock);
    if (t != CUPTI_SUCCESS)
        return cupti_err(e, t, "cuprof_tag/cuprof_untag", __func__, __FILE__, __LINE__);
    return 0;
}

void cuprof_stop(void)
{
    if (!on)
        return;
    /* Best effort: what is still buffered is delivered, then nothing new is recorded. */
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < CUPROF_NKINDS; i++)
        cuptiActivityDisable(cuprof_kinds[i]);
    pthread_mutex_lock(&lock);
    on = false;
    cuprof_state_free(&st);
    pthread_mutex_unlock(&lock);
}
