#!/usr/bin/env bash
# Long-sequence benchmark on the CPU backend (issue 15): for a tiny-Llama-shaped model, peak
# activation bytes and seconds per step against sequence length, with each long-sequence option
# on and off, next to the analytical estimate (`zero estimate`, sharding/activation_estimator.h).
# Not a test: it prints a table (and writes it to OUT when given).
#
#   bench/long_sequence.sh [ZERO_BINARY] [OUT]
#
# Environment:
#   SEQ_LENS       lengths run with every option set      (default "4096 8192 16384")
#   LONG_SEQ_LENS  lengths run with LONG_OPTIONS only, 1 step (default "32768", "" for none; attention is
#                  O(T^2): 32k takes minutes a step on 2 cores)
#   LONG_OPTIONS   option sets for LONG_SEQ_LENS           (default "plain all")
#   VOCAB          vocabulary of the model (default 8192, so the [T, V] logits matter)
#   STEPS          steps per run at SEQ_LENS (default 2)
#
# Option sets (a set is skipped when `zero train --help` lacks one of its flags):
#   plain       --gradient-checkpointing false --tiled-mlp off --tiled-logits off
#   ckpt        --gradient-checkpointing true  (tiles off)
#   ckpt+tiled  + --tiled-mlp auto --tiled-logits auto
#   all         + activation_checkpointing.cpu_checkpointing in the DeepSpeed config
# The model: hidden 128, 4 layers, 4 heads (2 KV heads), FFN 352 (the tiny-llama preset's shape)
# with VOCAB tokens and max_position_embeddings 2048, so every length here needs
# --allow-long-sequences (rotary positions extend).
set -euo pipefail

ZERO=${1:-build/default/src/zero}
OUT=${2:-}
SEQ_LENS=${SEQ_LENS:-"4096 8192 16384"}
LONG_SEQ_LENS=${LONG_SEQ_LENS-"32768"}
LONG_OPTIONS=${LONG_OPTIONS:-"plain all"}
VOCAB=${VOCAB:-8192}
STEPS=${STEPS:-2}

if [[ ! -x "$ZERO" ]]; then
  echo "long_sequence.sh: no zero binary at $ZERO (build the zero_cli target, or pass its path)" >&2
  exit 2
fi

WORK=$(mktemp -d /tmp/zero_long_sequence.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# A Hugging Face folder: config.json + model.safetensors with small deterministic weights
# (zero train loads weights from a folder; presets cannot change the vocabulary).
python3 - "$WORK/model" "$VOCAB" <<'PY'
import array, json, os, struct, sys
out, vocab = sys.argv[1], int(sys.argv[2])
h, layers, heads, kv_heads, ffn = 128, 4, 4, 2, 352
d = h // heads
os.makedirs(out, exist_ok=True)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
           "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "intermediate_size": ffn,
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "hidden_act": "silu"},
          open(os.path.join(out, "config.json"), "w"), indent=1)
shapes = [("model.embed_tokens.weight", [vocab, h])]
for i in range(layers):
    p = f"model.layers.{i}."
    shapes += [(p + "input_layernorm.weight", [h]), (p + "self_attn.q_proj.weight", [heads * d, h]),
               (p + "self_attn.k_proj.weight", [kv_heads * d, h]),
               (p + "self_attn.v_proj.weight", [kv_heads * d, h]),
               (p + "self_attn.o_proj.weight", [h, heads * d]),
               (p + "post_attention_layernorm.weight", [h]),
               (p + "mlp.gate_proj.weight", [ffn, h]), (p + "mlp.up_proj.weight", [ffn, h]),
               (p + "mlp.down_proj.weight", [h, ffn])]
shapes += [("model.norm.weight", [h]), ("lm_head.weight", [vocab, h])]
header, blobs, offset, state = {}, [], 0, 12345
for name, shape in shapes:
    n = 1
    for s in shape:
        n *= s
    if len(shape) == 1:
        values = array.array("f", [1.0]) * n
    else:
        values = array.array("f", bytes(4 * n))
        for k in range(n):  # uniform in [-0.04, 0.04) from a 32-bit LCG
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            values[k] = (state / 2**32 - 0.5) * 0.08
    data = values.tobytes()
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    for blob in blobs:
        f.write(blob)
PY

cat > "$WORK/plain.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
JSON
cat > "$WORK/cpu_ckpt.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "steps_per_print": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
 "activation_checkpointing": {"cpu_checkpointing": true}}
JSON

HELP=$("$ZERO" train --help 2>&1 || true)

# name -> "train flags | estimate flags | deepspeed config | required train flags"
declare -A TRAIN EST CONFIG NEEDS
TRAIN[plain]="--gradient-checkpointing false --tiled-mlp off --tiled-logits off"
EST[plain]=""
CONFIG[plain]=plain.json
NEEDS[plain]="tiled-mlp tiled-logits"
TRAIN[ckpt]="--gradient-checkpointing true --tiled-mlp off --tiled-logits off"
EST[ckpt]="--activation-checkpointing"
CONFIG[ckpt]=plain.json
NEEDS[ckpt]="tiled-mlp tiled-logits"
TRAIN[ckpt+tiled]="--gradient-checkpointing true --tiled-mlp auto --tiled-logits auto"
EST[ckpt+tiled]="--activation-checkpointing --tiled-mlp auto --tiled-logits auto"
CONFIG[ckpt+tiled]=plain.json
NEEDS[ckpt+tiled]="tiled-mlp tiled-logits"
TRAIN[all]="--gradient-checkpointing true --tiled-mlp auto --tiled-logits auto"
EST[all]="--activation-checkpointing --tiled-mlp auto --tiled-logits auto --cpu-checkpointing"
CONFIG[all]=cpu_ckpt.json
NEEDS[all]="tiled-mlp tiled-logits"
ORDER="plain ckpt ckpt+tiled all"

available() {
  local flag
  for flag in ${NEEDS[$1]}; do
    grep -q -- "--$flag " <<<"$HELP" || return 1
  done
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

table=$(mktemp "$WORK/table.XXXXXX")
printf "%8s  %-11s  %14s  %14s  %8s  %9s  %s\n" "seq len" "options" "act peak MiB" \
  "estimate MiB" "est/meas" "s/step" "host ckpt MiB (est)" | tee -a "$table"

run_one() {  # seq_len option steps
  local n=$1 opt=$2 steps=$3 log line peak toks est_json est host
  if ! available "$opt"; then
    printf "%8s  %-11s  %s\n" "$n" "$opt" "skipped: zero train lacks --${NEEDS[$opt]// / or --}" | tee -a "$table"
    return
  fi
  log="$WORK/run_${n}_${opt}.log"
  # shellcheck disable=SC2086
  if ! OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$ZERO" train --model "$WORK/model" --data synthetic \
      --deepspeed "$WORK/${CONFIG[$opt]}" --steps "$steps" --seq-len "$n" --micro-batch 1 \
      --allow-long-sequences true ${TRAIN[$opt]} >"$log" 2>&1; then
    printf "%8s  %-11s  %s\n" "$n" "$opt" "failed: $(tail -1 "$log")" | tee -a "$table"
    return
  fi
  line=$(grep "^step" "$log" | tail -1)
  peak=$(sed -n 's/.*act peak \([0-9.]*\)).*/\1/p' <<<"$line")
  toks=$(sed -n 's/.*| *\([0-9.]*\) tok\/s.*/\1/p' <<<"$line")
  # shellcheck disable=SC2086
  est_json=$("$ZERO" estimate --model "$WORK/model" --stage 0 --seq-len "$n" --micro-batch 1 \
    --activation-dtype f32 --json ${EST[$opt]} 2>/dev/null)
  est=$(python3 -c 'import json,sys; a=json.load(sys.stdin)["activations"]; print(a["peak_bytes"], a["host_bytes"])' <<<"$est_json")
  host=${est#* }
  est=${est% *}
  printf "%8s  %-11s  %14s  %14s  %8s  %9s  %s\n" "$n" "$opt" "$peak" "$(mib "$est")" \
    "$(awk -v e="$(mib "$est")" -v m="$peak" 'BEGIN { printf "%.3f", e / m }')" \
    "$(awk -v n="$n" -v t="$toks" 'BEGIN { printf "%.2f", n / t }')" \
    "$( [[ $host == 0 ]] && echo - || mib "$host")" | tee -a "$table"
}

for n in $SEQ_LENS; do
  for opt in $ORDER; do run_one "$n" "$opt" "$STEPS"; done
done
for n in $LONG_SEQ_LENS; do
  for opt in $LONG_OPTIONS; do run_one "$n" "$opt" 1; done
done

echo "act peak: the kActivations peak of zero train's last step line (allocator accounting, f32);"
echo "estimate: zero estimate's device peak for the same options; s/step: seq len / tok/s."
if [[ -n "$OUT" ]]; then
  {
    echo "# bench/long_sequence.sh on the CPU backend, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (+ uncommitted work)"
    echo "# model: hidden 128, 4 layers, 4 heads / 2 KV, FFN 352, vocab $VOCAB, f32, micro-batch 1; $(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}"
    cat "$table"
  } >"$OUT"
fi
