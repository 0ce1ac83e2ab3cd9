# Reliability tests (included by the Makefile): bad input from outside, end to
# end. Part of make test; see also tools/fuzz.mk and tools/sanitize.mk.
#
#   build/tests/reliability    hundreds of seeded corruptions of a small model, each given to
#                              every chapter's model-generate: refused with one line or run,
#                              never a crash, hang or sanitizer report
# The server's fault tests (slow and vanishing clients, connection limits, hostile
# requests, SIGTERM) belong here too once chat-server exists: tests/reliability/test_server_*.c.

RELIABILITY_TEST_SRC := $(wildcard tests/reliability/*.c)
$(BUILD)/tests/reliability: $(RELIABILITY_TEST_SRC) tests/harness.c $(BUILD)/obj/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TESTS += $(BUILD)/tests/reliability
