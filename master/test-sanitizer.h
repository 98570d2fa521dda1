/* test-sanitizer.h: whether a test is built with AddressSanitizer, whose
 * runtime stands in for some of libc's calls: malloc (mallopt is then a
 * no-op that says no: test-malloctune.c) and mlock (a no-op that says yes:
 * test-filepin.c).  1 or 0. */
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DATC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DATC_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef DATC_TEST_UNDER_ASAN
#define DATC_TEST_UNDER_ASAN 0
#endif
