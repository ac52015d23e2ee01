#!/usr/bin/env bash
# Tokenization throughput of `zero tokenize` next to Hugging Face's tokenizers library (the npm
# binding of the Rust crate), on the same generated corpus and machine, for each tokenizer
# family in tests/fixtures/tokenizers. Every figure is a whole process, loading the
# tokenizer.json included: MB/s = corpus bytes / wall seconds.
#   zero        `zero tokenize --tokenizer T.json CORPUS` (one text; cut into line-start chunks
#               on all cores where that is exact)
#   hf one      Tokenizer.fromFile(T.json).encode(CORPUS) (one text, as `zero tokenize` does)
#   hf batch    the corpus cut at blank lines into documents, encodeBatch (all cores)
# It also checks that zero's ids equal the library's for the whole corpus.
#
#   bench/tokenize_throughput.sh [MEGABYTES]     (default 20)
# Environment: ZERO (the zero binary; default build/default/src/zero), FAMILIES (default
# "gpt2 llama3 qwen3 llama2"). Needs node; installs tests/fixtures/tokenizers/node_modules with
# npm when missing. The corpus (not checked in) is made by tokenize_throughput.js: the
# repository's code and docs plus the multilingual fixture corpus, lines shuffled, repeated.
set -euo pipefail
cd "$(dirname "$0")/.."

megabytes=${1:-20}
zero=${ZERO:-build/default/src/zero}
families=${FAMILIES:-gpt2 llama3 qwen3 llama2}
fixtures=tests/fixtures/tokenizers
if [ ! -x "$zero" ]; then
  echo "no zero binary at $zero: build it (cmake --preset default && cmake --build build/default" \
       "--target zero_cli) or set ZERO" >&2
  exit 2
fi
if [ ! -d "$fixtures/node_modules/tokenizers" ]; then
  (cd "$fixtures" && npm install --no-audit --no-fund >/dev/null)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node bench/tokenize_throughput.js corpus "$work/corpus.txt" "$megabytes"
bytes=$(stat -c %s "$work/corpus.txt")
: > "$work/empty.txt"

now() { date +%s.%N; }
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.2f", b / 1048576 / s }'; }
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

echo "corpus: $((bytes / 1048576)) MiB ($bytes bytes), $(nproc) cores, $(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "tokenizers $(node -p "require('./$fixtures/node_modules/tokenizers/package.json').version") (npm), node $(node --version)"
echo
echo "| family | zero MB/s | zero load s | zero wall s | hf one text MB/s | hf load s | hf wall s | hf batch MB/s | hf batch wall s | zero / hf one | zero / hf batch | ids identical |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for family in $families; do
  json="$work/$family.json"
  if [ -f "$fixtures/$family/tokenizer.json.gz" ]; then
    gzip -dc "$fixtures/$family/tokenizer.json.gz" > "$json"
  else
    cp "$fixtures/$family/tokenizer.json" "$json"
  fi
  t0=$(now); "$zero" tokenize --tokenizer "$json" "$work/empty.txt" > /dev/null; t1=$(now)
  zero_load=$(span "$t0" "$t1")
  t0=$(now); "$zero" tokenize --tokenizer "$json" "$work/corpus.txt" > "$work/zero.ids"; t1=$(now)
  zero_wall=$(span "$t0" "$t1")
  t0=$(now); hf=$(node bench/tokenize_throughput.js hf "$json" "$work/corpus.txt" "$work/hf.ids"); t1=$(now)
  hf_wall=$(span "$t0" "$t1")
  hf_load=$(echo "$hf" | awk '{ printf "%.3f", $1 }')
  t0=$(now); node bench/tokenize_throughput.js hf-batch "$json" "$work/corpus.txt" > /dev/null; t1=$(now)
  batch_wall=$(span "$t0" "$t1")
  same=no
  cmp -s "$work/zero.ids" "$work/hf.ids" && same=yes
  echo "| $family | $(rate "$zero_wall") | $zero_load | $zero_wall | $(rate "$hf_wall") | $hf_load | $hf_wall | $(rate "$batch_wall") | $batch_wall | $(awk -v a="$hf_wall" -v b="$zero_wall" 'BEGIN { printf "%.1fx", a / b }') | $(awk -v a="$batch_wall" -v b="$zero_wall" 'BEGIN { printf "%.1fx", a / b }') | $same |"
done
