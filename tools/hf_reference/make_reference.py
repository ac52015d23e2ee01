"""Writes Hugging Face reference fixtures for zero.cpp's tests (run where torch + transformers are
installed; zero.cpp itself never needs Python).

For each tiny model: OUT/<name>/config.json + model.safetensors as save_pretrained writes them
(float32), and OUT/<name>/reference.safetensors with one float64 forward/backward pass:
input_ids, labels (int64 [B, T]), logits (f64 [B, T, V]), loss (f64 [1]) and grad.<name> for every
parameter (a tied weight once) — the same layout as the GPT-2 / Llama fixtures.

usage: python3 make_reference.py OUT_DIR
"""
import os
import sys

import torch
from safetensors.torch import save_file
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM)


def write_fixture(out_dir, name, model, batch=2, seq_len=16, seed=3):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    model = model.float()
    model.save_pretrained(folder, safe_serialization=True)
    model = model.double()
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, model.config.vocab_size, (batch, seq_len), generator=generator)
    result = model(input_ids=input_ids, labels=input_ids)
    result.loss.backward()
    dump = {
        "input_ids": input_ids,
        "labels": input_ids.clone(),
        "logits": result.logits.detach().contiguous(),
        "loss": result.loss.detach().reshape(1).double(),
    }
    seen = set()
    for param_name, param in model.named_parameters():
        if param.grad is None or id(param) in seen:
            continue
        seen.add(id(param))
        dump["grad." + param_name] = param.grad.detach().contiguous()
    save_file(dump, os.path.join(folder, "reference.safetensors"))
    print(f"{name}: loss {float(result.loss):.10f}, {len(dump)} tensors, transformers {transformers.__version__}")


def main(out_dir):
    torch.manual_seed(0)
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-5, attn_implementation="eager")
    # Qwen2: q/k/v biases (and nothing else), tied embeddings.
    write_fixture(out_dir, "tiny-qwen2", Qwen2ForCausalLM(Qwen2Config(
        **common, rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False)))
    # Mistral: a sliding window shorter than the sequence, so the window changes the result.
    write_fixture(out_dir, "tiny-mistral", MistralForCausalLM(MistralConfig(
        **common, rope_theta=10000.0, sliding_window=5, tie_word_embeddings=False)))
    # Llama with every optional bias on, head_dim not hidden/heads, and MQA.
    llama = dict(common)
    llama.update(num_key_value_heads=1, head_dim=8)
    write_fixture(out_dir, "tiny-llama-bias", LlamaForCausalLM(LlamaConfig(
        **llama, rope_theta=10000.0, attention_bias=True, mlp_bias=True, tie_word_embeddings=False)))


if __name__ == "__main__":
    main(sys.argv[1])
