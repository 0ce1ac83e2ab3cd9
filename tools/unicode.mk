# Unicode tables for the tokenizer (included by the Makefile).
#   make unicode-tables   regenerates common/unicode_data.c from UnicodeData.txt
# The generated file is committed, so a normal build never needs this; run it to
# move to a newer Unicode version. UnicodeData.txt comes from the Debian package
# unicode-data, installed here when missing.

UNICODE_DATA ?= /usr/share/unicode/UnicodeData.txt

# Built on its own (not against libcommon.a, which contains the tables it writes).
$(BUILD)/tools/gen_unicode: tools/gen_unicode.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

.PHONY: unicode-tables
unicode-tables: $(BUILD)/tools/gen_unicode
	@if [ ! -f $(UNICODE_DATA) ]; then \
	  echo "installing the unicode-data package"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y unicode-data; \
	  else sudo apt-get install -y unicode-data; fi; \
	fi
	$(BUILD)/tools/gen_unicode $(UNICODE_DATA) common/unicode_data.c \
	  "$$(dpkg-query -W -f='$${Version}' unicode-data 2>/dev/null | sed 's/-.*//')"
