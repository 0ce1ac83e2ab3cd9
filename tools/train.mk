# The embedded default model, models/default.gguf: a tiny Qwen3 trained by
# tools/train on children's stories it generates itself (see tools/train/README.md).
#
#   make train-default   retrain it (about 25-30 minutes on 2 cores, see the README);
#                        deterministic for the same Debian torch + OpenBLAS and 2 threads
#   make train-check     compare the engine with the torch model on models/default.gguf,
#                        and this tool's tokenizer/forward with llama.cpp's reference data
#
# Needs Debian's python3-torch (CPU) and OpenBLAS (without it torch falls back to
# the reference BLAS and training is about 10 times slower); installed with apt-get
# when missing. Always /usr/bin/python3: Debian's torch is installed for it.

TRAIN_PYTHON := PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3
TRAIN_DEBS   := python3-torch libopenblas0-pthread

.PHONY: train-deps train-default train-check

train-deps:
	@dpkg -s $(TRAIN_DEBS) >/dev/null 2>&1 || apt-get install -y $(TRAIN_DEBS)

train-default: train-deps
	$(TRAIN_PYTHON) tools/train/train.py --threads 2 -o models/default.gguf

train-check: train-deps $(BUILD)/II.1/model-generate
	$(TRAIN_PYTHON) tools/train/check_llamacpp.py
	$(TRAIN_PYTHON) tools/train/check_engine.py --engine $(BUILD)/II.1/model-generate \
	  --model models/default.gguf
