#!/usr/bin/env bash
# Builds the seed corpus of every fuzz target from the shared real transcripts.
#
#   fuzz/seed_corpus.sh [TRANSCRIPTS_DIR]     (default: $PITH_TRANSCRIPTS or ../shared/transcripts)
#
# For each importer target, corpus/<target>/ gets every transcript of that format whole (when
# under 1 MiB) plus windows of 1, 4 and 16 consecutive lines from its start, middle and end, so
# libFuzzer starts from records of every kind without having to read megabytes per run.
# import_detect gets the seeds of all formats. The SSE targets get well-formed streams of both
# protocols (text, tool calls, thinking, usage, errors).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:-${PITH_TRANSCRIPTS:-$here/../../shared/transcripts}}
if [ ! -d "$src" ]; then
  echo "seed_corpus: transcripts not found at $src (pass the directory as the first argument)" >&2
  exit 1
fi
corpus="$here/corpus"
mkdir -p "$corpus"

target_of() {
  case "$1" in
    claude-code-session) echo import_claude_code ;;
    codex-rollout) echo import_codex ;;
    pi-session) echo import_pi ;;
    swe-agent) echo import_swe_agent ;;
    mini-swe-agent) echo import_mini_swe_agent ;;
    openhands) echo import_openhands ;;
    aider) echo import_aider ;;
    *) echo "" ;;
  esac
}

n=0
for dir in "$src"/*/; do
  format=$(basename "$dir")
  target=$(target_of "$format")
  [ -n "$target" ] || continue
  mkdir -p "$corpus/$target" "$corpus/import_detect"
  for file in "$dir"*; do
    [ -f "$file" ] || continue
    base=$(basename "$file")
    size=$(wc -c <"$file")
    lines=$(wc -l <"$file")
    if [ "$size" -lt 1048576 ]; then
      cp "$file" "$corpus/$target/$base.whole"
    fi
    for width in 1 4 16; do
      for start in 1 $((lines / 2 + 1)) $((lines > width ? lines - width + 1 : 1)); do
        out="$corpus/$target/$base.l$start+$width"
        # head closes the pipe early on long lines; that is not an error here.
        (set +o pipefail; sed -n "${start},$((start + width - 1))p" "$file" | head -c 65536) >"$out"
        cp "$out" "$corpus/import_detect/$base.l$start+$width"
        n=$((n + 1))
      done
    done
  done
done

mkdir -p "$corpus/sse_openai" "$corpus/sse_anthropic"
oa='data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":'
printf '%s{"content":"Hel"},"finish_reason":null}]}\n\n%s{"content":"lo"},"finish_reason":"stop"}]}\n\ndata: {"id":"c","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}\n\ndata: [DONE]\n\n' \
  "$oa" "$oa" >"$corpus/sse_openai/text"
printf '%s{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]},"finish_reason":null}]}\n\n%s{"tool_calls":[{"index":0,"function":{"arguments":"{\\"path\\":\\"a\\"}"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n' \
  "$oa" "$oa" >"$corpus/sse_openai/tool_call"
printf 'data: {"error":{"message":"This model'"'"'s maximum context length is 8192 tokens","code":"context_length_exceeded"}}\n\n' \
  >"$corpus/sse_openai/error"
cat >"$corpus/sse_anthropic/text" <<'SSE'
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

SSE
cat >"$corpus/sse_anthropic/tool_use" <<'SSE'
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"read","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"a\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

SSE
cat >"$corpus/sse_anthropic/error" <<'SSE'
event: error
data: {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}

SSE
echo "seed_corpus: $n transcript windows and 6 SSE streams in $corpus"
