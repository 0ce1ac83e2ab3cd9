#!/bin/sh
# fuzz-seeds.sh BUILD: writes the fuzz targets' seed corpora into tests/fuzz/corpus/
# (`make fuzz-seeds`; the result is committed). Small valid inputs made by the
# project's own tools: GGUF models from mkmodel, JSON from model-generate --json
# and the shapes of the chat server's requests and answers, text for the
# tokenizer and the chat template. Run from the top of the repository.
set -eu
BUILD=${1:-build}
C=tests/fuzz/corpus
mkdir -p $C/gguf $C/json $C/tokenizer $C/chat $C/http

# GGUF: the smallest shapes mkmodel allows, one per kind of tensor layout.
mk() { "$BUILD/tools/mkmodel" --layers 1 --heads 2 --kv-heads 1 --ctx 64 "$@" >/dev/null; }
mk --hidden 16 --head-dim 8 --ffn 32 --vocab 512 --type f32 -o $C/gguf/f32-vocab512.gguf
mk --hidden 32 --head-dim 16 --ffn 32 --vocab 300 --type q8_0 --untied -o $C/gguf/q8_0-untied.gguf
mk --hidden 32 --head-dim 16 --ffn 64 --vocab 300 --type f16 -o $C/gguf/f16.gguf

# JSON: what the programs print and the server reads and writes.
# (its timings replaced by fixed numbers, so that the seeds do not change from run to run)
"$BUILD/II.2/model-generate" --json --quiet --backend scalar $C/gguf/f32-vocab512.gguf "Once upon a time" 3 |
    sed -E 's/"(ttft_ms|decode_tokens_per_s|min|max|mean|ms)":[0-9.]+/"\1":0.25/g; s/"each":\[[0-9.,]*\]/"each":[0.5,0.125,1e-3]/' \
    > $C/json/model-generate.json
printf '%s' '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \u00e9\ud83d\ude00\n"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.7,"top_p":0.95,"stop":["\n\n"],"seed":-1}' > $C/json/chat-request.json
printf '%s' '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}],"usage":null}' > $C/json/chat-chunk.json
printf '%s' '{"error":{"message":"bad \"max_tokens\": -1","type":"invalid_request_error","param":null,"code":400}}' > $C/json/error.json
printf '%s' '[0,-0,1e308,-2.5E-3,123456789012345678901234567890,true,false,null,"\\/\b\f\n\r\t",[],{},[[{"a":{}}]]]' > $C/json/values.json

# Tokenizer: the first byte picks the mode (0 encode, 1 encode with special
# tokens, 2 decode ids, 3 stream UTF-8); see tests/fuzz/fuzz_tokenizer.c.
printf '\000Once upon a time, there was a boy named Luke. 123 4567!!  \n\n\t' > $C/tokenizer/encode.txt
printf '\001<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' > $C/tokenizer/encode-special.txt
printf '\002\001\000\000\000\040\000\000\000\377\001\000\000\377\377\377\377\000\002\000\000' > $C/tokenizer/decode.bin
printf '\003h\303\251llo \360\237\230\200 \344\270\255\346\226\207 \377\300\200 \355\240\200' > $C/tokenizer/stream.bin

# Chat: a flags byte, then NUL-separated messages whose first byte is the role
# (0 system, 1 user, 2 assistant, 3 tool, 4 skipped); see tests/fuzz/fuzz_chat.c.
printf '\001\000You are helpful.\000\001Hello\000\002<think>\nhmm\n</think>\n\nHi!\000\001And now?' > $C/chat/turns.bin
printf '\003\001Use the tool\000\002\000\003<tool_response>42</tool_response>\000\003{"x":1}\000\004dropped' > $C/chat/tools.bin

# HTTP: the first byte picks the limits (0 the server's, 1 tiny ones); the rest
# is what a client sends on one connection; see tests/fuzz/fuzz_http.c.
chat_body=$(cat $C/json/chat-request.json)
printf '\000GET /health HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/7.88\r\nAccept: */*\r\n\r\n' > $C/http/get.txt
printf '\000POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer sk-1\r\nContent-Length: %d\r\n\r\n%s' \
    "${#chat_body}" "$chat_body" > $C/http/post-json.txt
printf '\000POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n7;ext=1\r\n{"a":"b\r\n3\r\n"}\n\r\n0\r\nX-Trailer: t\r\n\r\n' > $C/http/chunked.txt
printf '\000\r\nGET /v1/models?x=1#f HTTP/1.1\nHost: h\nConnection: keep-alive\n\nHEAD /metrics HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nDELETE /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n' > $C/http/pipelined.txt
printf '\001POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 64\r\n\r\n%064d' 0 > $C/http/tiny-limits.txt
printf '\001PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n%032d\r\n20\r\n%032d\r\n0\r\n\r\nGET /%020d HTTP/1.1\r\nHost: h\r\n\r\n' 0 0 0 > $C/http/tiny-chunked.txt
ls -l $C/*/ | awk '/^-/ {n++; b += $5} END {print "fuzz-seeds: " n " files, " b " bytes"}'
