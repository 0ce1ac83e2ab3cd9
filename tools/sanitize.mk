# Sanitizer runs (included by the Makefile, which sets the flags and the
# build tree: SANITIZE=1 -> build/san-address, SANITIZE=thread -> build/san-thread).
#> make test SANITIZE=1                        the whole suite under AddressSanitizer + UBSan, built
#>                                             in build/san-address (any target takes SANITIZE=)
#> make test SANITIZE=thread                   the whole suite under ThreadSanitizer (build/san-thread)
#> tools/ci-sanitize.sh                        both, then a short make fuzz, timed (what CI runs)
#
# The tests find the programs and models of the sanitized tree through
# BUILD_DIR. The exercise grader (tools/exercises/grade.sh), which the tests
# run, compiles students' code with CFLAGS from the environment: exported, so
# that code is sanitized too and links with the sanitized common/. Any report
# ends the process at once with SIGABRT, so a test binary dies without its
# summary line and a program that a test runs exits abnormally instead of
# with the status the test expects: either way a failure.
ifneq ($(SANITIZE),)
export BUILD_DIR    := $(BUILD)
export CFLAGS
export ASAN_OPTIONS := detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1:abort_on_error=1
export TSAN_OPTIONS := halt_on_error=1:abort_on_error=1:second_deadlock_stack=1
# The thread pool keeps every worker at work even when a slow (sanitized) run
# makes it stall, so the threaded paths are the ones checked (see threadpool.h).
export POOL_SOLO    := 0
endif
