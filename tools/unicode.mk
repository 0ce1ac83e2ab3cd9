# Unicode tables for the tokenizer (included by the Makefile).
#> make unicode-tables                         regenerates common/text/unicode_data.c from Debian's unicode-data
# The generated file is committed, so a normal build never needs this; run it to
# move to a newer Unicode version. UnicodeData.txt comes from the Debian package
# unicode-data, installed here when missing.

UNICODE_DATA ?= /usr/share/unicode/UnicodeData.txt

# Built on its own (not against libcommon.a, which contains the tables it writes).
$(BUILD)/tools/gen_unicode: tools/gen_unicode.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<
EXTRA_TOOLS += $(BUILD)/tools/gen_unicode

.PHONY: unicode-tables
unicode-tables: $(BUILD)/tools/gen_unicode
	@[ -f $(UNICODE_DATA) ] || tools/apt-install.sh unicode-tables unicode-data
	$(BUILD)/tools/gen_unicode $(UNICODE_DATA) common/text/unicode_data.c \
	  "$$(dpkg-query -W -f='$${Version}' unicode-data 2>/dev/null | sed 's/-.*//')"
