"""Writes Hugging Face reference fixtures for zero.cpp's tests (run where torch + transformers are
installed; zero.cpp itself never needs Python).

For each tiny model: OUT/<name>/config.json + model.safetensors as save_pretrained writes them
(float32), and OUT/<name>/reference.safetensors with one float64 forward/backward pass:
input_ids, labels (int64 [B, T]), logits (f64 [B, T, V]), loss (f64 [1]) and grad.<name> for every
parameter (a tied weight once) — the same layout as the GPT-2 / Llama fixtures.

Everything is float64: the loss is computed here from the float64 logits (transformers' own loss
upcasts logits with .float(), which rounds every gradient to float32), attention uses the default
(sdpa) path, which stays in float64, and two transformers modules that compute in float32 whatever
the model dtype are replaced for the pass by float64 versions of the same formula: RMSNorm (it
casts to float32) and the rotary embedding (its cos/sin are evaluated in float32; the float32
angles, inv_freq * t, are kept, since they define the positions). The inverse frequencies used are
dumped as rope.inv_freq so a test can check zero.cpp computes the same float32 values. The
mixture-of-experts routers take their softmax with dtype=float32 (and so would eager attention):
during the pass a softmax asked for float32 of a float64 input stays in float64.

usage: python3 make_reference.py OUT_DIR [EXISTING_FOLDER ...]
  EXISTING_FOLDER: an HF folder to (re)compute a pure-float64 reference for, written as
  EXISTING_FOLDER/reference_f64.safetensors with the input_ids of its reference.safetensors.
"""
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)


def rms_norm_f64(module):
    def forward(hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return module.weight * (hidden_states * torch.rsqrt(variance + module.variance_epsilon))
    return forward


def rotary_f64(module):
    def forward(x, position_ids):
        inv_freq = module.inv_freq.float()
        freqs = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
        angles = torch.cat((freqs, freqs), dim=-1).double()
        return ((angles.cos() * module.attention_scaling).to(x.dtype),
                (angles.sin() * module.attention_scaling).to(x.dtype))
    return forward


def make_float64_exact(model):
    """Swaps in float64 versions of the modules that compute in float32; returns inv_freq."""
    inv_freq = None
    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm"):
            module.forward = rms_norm_f64(module)
        elif name.endswith("RotaryEmbedding"):
            module.forward = rotary_f64(module)
            inv_freq = module.inv_freq.float().clone()
    return inv_freq


class Float64Softmax:
    """Within the block, softmax(x, dtype=torch.float32) of a float64 x stays float64 (through
    torch.nn.functional.softmax, torch.softmax and Tensor.softmax alike)."""

    def __enter__(self):
        self.saved = (F.softmax, torch.softmax, torch.Tensor.softmax)

        def keep_f64(original):
            def softmax(x, *args, **kwargs):
                if x.dtype == torch.float64 and kwargs.get("dtype") == torch.float32:
                    kwargs["dtype"] = torch.float64
                return original(x, *args, **kwargs)
            return softmax
        F.softmax = keep_f64(self.saved[0])
        torch.softmax = keep_f64(self.saved[1])
        torch.Tensor.softmax = keep_f64(self.saved[2])
        return self

    def __exit__(self, *exc):
        F.softmax, torch.softmax, torch.Tensor.softmax = self.saved
        return False


def reference_pass(model, input_ids):
    """One float64 forward/backward; returns the tensors of a reference dump."""
    model = model.double()
    inv_freq = make_float64_exact(model)
    model.zero_grad()
    with Float64Softmax():
        logits = model(input_ids=input_ids).logits
    vocab = logits.shape[-1]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), input_ids[:, 1:].reshape(-1))
    loss.backward()
    dump = {
        "input_ids": input_ids,
        "labels": input_ids.clone(),
        "logits": logits.detach().contiguous(),
        "loss": loss.detach().reshape(1),
    }
    if inv_freq is not None:
        dump["rope.inv_freq"] = inv_freq
    seen = set()
    for param_name, param in model.named_parameters():
        if param.grad is None or id(param) in seen:
            continue
        seen.add(id(param))
        dump["grad." + param_name] = param.grad.detach().contiguous()
    return dump


def write_fixture(out_dir, name, model, batch=2, seq_len=16, seed=3):
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    model = model.float()
    model.save_pretrained(folder, safe_serialization=True)
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, model.config.vocab_size, (batch, seq_len), generator=generator)
    dump = reference_pass(model, input_ids)
    save_file(dump, os.path.join(folder, "reference.safetensors"))
    print(f"{name}: loss {float(dump['loss']):.12f}, {len(dump)} tensors, transformers {transformers.__version__}")


def rewrite_reference(folder, out_path):
    from transformers import AutoModelForCausalLM
    input_ids = load_file(os.path.join(folder, "reference.safetensors"))["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(folder)
    dump = reference_pass(model, input_ids)
    save_file(dump, out_path)
    print(f"{folder}: float64 reference, loss {float(dump['loss']):.12f}")


def main(out_dir):
    torch.manual_seed(0)
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  rms_norm_eps=1e-5)
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
    # Qwen3: per-head q/k norms, head_dim 24 (96 query channels from 64), tied embeddings.
    qwen3 = dict(common)
    qwen3.update(head_dim=24, rms_norm_eps=1e-6)
    write_fixture(out_dir, "tiny-qwen3", Qwen3ForCausalLM(Qwen3Config(
        **qwen3, rope_theta=1000000.0, attention_bias=False, tie_word_embeddings=True,
        use_sliding_window=False)))
    # Qwen3 with use_sliding_window: layer 0 full, layer 1 within 5 positions (T = 16).
    write_fixture(out_dir, "tiny-qwen3-window", Qwen3ForCausalLM(Qwen3Config(
        **qwen3, rope_theta=1000000.0, attention_bias=False, tie_word_embeddings=True,
        use_sliding_window=True, sliding_window=5, max_window_layers=1)))
    # Qwen3-MoE: Qwen3's attention, 4 experts of 48, 2 per token, not renormalised (the config's
    # default), untied. 32 tokens over 4 experts: every expert gets some.
    write_fixture(out_dir, "tiny-qwen3-moe", Qwen3MoeForCausalLM(Qwen3MoeConfig(
        **qwen3, rope_theta=1000000.0, attention_bias=False, tie_word_embeddings=False,
        use_sliding_window=False, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48,
        norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
        output_router_logits=False)))
    # Mixtral: 4 experts of 176, 2 per token (renormalised), no window.
    write_fixture(out_dir, "tiny-mixtral", MixtralForCausalLM(MixtralConfig(
        **common, rope_theta=1000000.0, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None, router_jitter_noise=0.0, output_router_logits=False,
        tie_word_embeddings=False)))


if __name__ == "__main__":
    main(sys.argv[1])
    for existing in sys.argv[2:]:
        rewrite_reference(existing, os.path.join(sys.argv[1], os.path.basename(existing.rstrip("/")) +
                                                 "-reference_f64.safetensors"))
