# Models the project makes with tools/mkmodel (deterministic, seeded, nothing
# downloaded). Included by the Makefile.
#   tiny:    2 layers, hidden 64, 4/2 heads, head_dim 16 (q width = hidden)
#   small:   4 layers, hidden 128, 8/2 heads, head_dim 32 (q width 256 != hidden)
#   medium:  4 layers, hidden 256, 8/4 heads, head_dim 64; what `make run` uses when the
#            trained default model, models/default.gguf, is absent
#   kquant:  see KQUANT_TYPES below

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

# kquant: 8 layers whose rows are all whole K-quant super-blocks (256), one
# model per llama-quantize file type, written with its per-tensor mix; f32 is
# the reference they are compared with.
KQUANT_TYPES := f32 q4_0 q5_0 q2_k q3_k_m q4_k_s q4_k_m q5_k_m q6_k iq4_nl iq4_xs

$(BUILD)/models/kquant-%.gguf: $(MKMODEL)
	@mkdir -p $(dir $@)
	$(MKMODEL) --preset kquant --type $* -o $@

TEST_MODELS += $(foreach t,$(KQUANT_TYPES),$(BUILD)/models/kquant-$(t).gguf)
