/* heap: the one place that tunes glibc's malloc, a process-wide setting that two users want set
 * differently. Every mode sets every parameter, so no mode can half-undo another.
 *   HEAP_DEFAULT  glibc's starting thresholds, and what was kept goes back to the kernel: before
 *                 anything whose resident set is measured (the engine's forked runs inherit it).
 *   HEAP_SWEEP    a stretch of many simulator runs and nothing large besides: freed memory stays in
 *                 the process for the next run (mmap and trim thresholds raised), so a run stops
 *                 paying first-touch page faults on a fresh schedule (about 40% of a
 *                 10,000-configuration sweep).
 *   HEAP_ENGINE   the CPU engine: large blocks from the heap, never unmapped or trimmed, so a freed
 *                 activation is reused by the next allocation instead of being faulted in again page
 *                 by page every iteration (that cost ~0.3 s per VGG-16 iteration). */
#ifndef LRCNN_HEAP_H
#define LRCNN_HEAP_H

typedef enum { HEAP_DEFAULT, HEAP_SWEEP, HEAP_ENGINE } heap_mode;

void heap_tune(heap_mode m);

#endif
