# The chapter tools (included by the Makefile): the manifest check and the
# chapter diff. They use libc only, so they build even when common/ or a
# chapter does not. See book/tooling.md.
#
#> make [chapter=II.2] manifest-check          every chapter (or one) against its MANIFEST and the one before
#> make diff from=II.1 to=II.2                 what a chapter changed, coloured (chapter=II.2 diff: from the
#>   [FORMAT=html] [COLOR=never]               one before); FORMAT=html: build/diff/II.1..II.2.html
#> make diff from=III.4 to=III.7 stage=III.5   one lesson of the chapter alone (a stage of its MANIFEST; from=
#>                                             and to= may be left out); FORMAT=html: build/diff/III.4..III.5.html
#> make diff-stages                            the stages: chapter, stage, the view it starts from, title

CHAPTOOLS_SRC := $(filter-out tools/chapters/manifest-check.c tools/chapters/chapter-diff.c,\
	$(wildcard tools/chapters/*.c))
CHAPTOOLS_HDR := $(wildcard tools/chapters/*.h)

$(BUILD)/tools/manifest-check: tools/chapters/manifest-check.c $(CHAPTOOLS_SRC) $(CHAPTOOLS_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/chapters -o $@ $(filter %.c,$^)

$(BUILD)/tools/chapter-diff: tools/chapters/chapter-diff.c $(CHAPTOOLS_SRC) $(CHAPTOOLS_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itools/chapters -o $@ $(filter %.c,$^)
EXTRA_TOOLS += $(BUILD)/tools/manifest-check $(BUILD)/tools/chapter-diff

# The tools' tests; they also check the real chapters' manifests, which is
# how `make test` fails on drift between chapters.
TOOLS_TEST_SRC := $(wildcard tests/tools/*.c)
$(BUILD)/tests/tools: $(TOOLS_TEST_SRC) tests/harness.c tests/harness.h $(CHAPTOOLS_SRC) $(CHAPTOOLS_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Itools/chapters -o $@ $(filter %.c,$^)
EXTRA_TESTS += $(BUILD)/tests/tools

.PHONY: manifest-check diff diff-stages
manifest-check: $(BUILD)/tools/manifest-check
	@$(BUILD)/tools/manifest-check --chapters-dir chapters $(if $(filter command,$(origin chapter)),$(chapter))

# to= defaults to chapter= (itself II.2 by default); from= to the chapter before.
# With stage=, to= defaults to the stage's chapter.
diff: $(BUILD)/tools/chapter-diff
	@$(BUILD)/tools/chapter-diff --chapters-dir chapters $(if $(COLOR),--color $(COLOR)) \
	  $(if $(filter html HTML,$(FORMAT)),--html $(BUILD)/diff) $(if $(stage),--stage $(stage) $(from) $(to),\
	  $(from) $(or $(to),$(chapter)))
diff-stages: $(BUILD)/tools/chapter-diff
	@$(BUILD)/tools/chapter-diff --chapters-dir chapters --stages
