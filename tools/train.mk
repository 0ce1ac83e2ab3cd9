# The embedded default model, models/default.gguf: a tiny Qwen3 trained by
# tools/train on children's stories it generates itself (see tools/train/README.md).
#
#> make train-default                          retrain models/default.gguf (25-30 min on 2 cores; installs
#>                                             python3-torch and OpenBLAS from Debian as root, naming the size)
#> make train-check                            the engine against the torch model, and the trainer's
#>                                             tokenizer and forward against llama.cpp's reference data
#> make train-deps                             installs python3-torch and OpenBLAS (as root)
#
# Deterministic for the same Debian torch + OpenBLAS and 2 threads.
# Needs Debian's python3-torch (CPU) and OpenBLAS (without it torch falls back to
# the reference BLAS and training is about 10 times slower); installed by
# tools/apt-install.sh when missing. Always /usr/bin/python3: Debian's torch is
# installed for it.

TRAIN_PYTHON := PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3
TRAIN_DEBS   := python3-torch libopenblas0-pthread

.PHONY: train-deps train-default train-check

train-deps:
	@tools/apt-install.sh $(or $(filter train-default train-check,$(MAKECMDGOALS)),train-deps) $(TRAIN_DEBS)

train-default: train-deps
	$(TRAIN_PYTHON) tools/train/train.py --threads 2 -o models/default.gguf

train-check: train-deps $(BUILD)/II.1/model-generate
	$(TRAIN_PYTHON) tools/train/check_llamacpp.py
	$(TRAIN_PYTHON) tools/train/check_engine.py --engine $(BUILD)/II.1/model-generate \
	  --model models/default.gguf
