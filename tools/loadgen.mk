# The load generator (included by the Makefile): see tools/loadgen.c and the
# README's "Load generator" section.
#> make build/tools/loadgen                    the load generator for OpenAI-compatible chat servers
#>                                             on this machine (build/tools/loadgen --help)
#
# Its test runs it against fake servers of the test's own making (tests/loadgen).

$(BUILD)/tools/loadgen: tools/loadgen.c $(BUILD)/obj/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(COMMON_INC) -o $@ $^ $(LDLIBS)

LOADGEN_TEST_SRC := $(wildcard tests/loadgen/*.c)
$(BUILD)/tests/loadgen: $(LOADGEN_TEST_SRC) tests/harness.c $(BUILD)/obj/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itests/loadgen $(COMMON_INC) -o $@ $^ $(LDLIBS)
EXTRA_TESTS += $(BUILD)/tests/loadgen

# The test runs the program: make test builds it.
test: $(BUILD)/tools/loadgen
