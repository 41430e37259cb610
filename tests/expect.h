/* expect.h: the unit tests' one check. EXPECT(cond, fmt, ...) counts a check in `checks` and, when
 * cond is false, a failure in `failures`, printing where and what ("FAIL file:line: ..."). */
#ifndef LRCNN_TESTS_EXPECT_H
#define LRCNN_TESTS_EXPECT_H

#include <stdio.h>

static int failures, checks;

#define EXPECT(cond, ...)                                \
    do {                                                 \
        checks++;                                        \
        if (!(cond)) {                                   \
            failures++;                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);  \
            printf(__VA_ARGS__);                         \
            printf("\n");                                \
        }                                                \
    } while (0)

#endif
