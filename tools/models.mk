# Models the project makes with tools/mkmodel (deterministic, seeded, nothing
# downloaded). Included by the Makefile.
#   tiny:    2 layers, hidden 64, 4/2 heads, head_dim 16 (q width = hidden)
#   small:   4 layers, hidden 128, 8/2 heads, head_dim 32 (q width 256 != hidden)
#   medium:  4 layers, hidden 256, 8/4 heads, head_dim 64; what `make run` uses when the
#            trained default model, models/default.gguf, is absent

MKMODEL := $(BUILD)/tools/mkmodel

$(BUILD)/models/medium.gguf: $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset medium -o $@

$(BUILD)/models/tiny-%.gguf: $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset tiny --type $* -o $@

$(BUILD)/models/small-%.gguf: $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset small --type $* -o $@

$(BUILD)/models/small-untied.gguf: $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset small --type f32 --untied -o $@

TEST_MODELS := $(addprefix $(BUILD)/models/,tiny-f32.gguf tiny-f16.gguf tiny-bf16.gguf \
	tiny-q8_0.gguf small-f32.gguf small-q8_0.gguf small-untied.gguf medium.gguf)
