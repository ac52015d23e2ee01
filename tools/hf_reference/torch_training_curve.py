"""The same 20-step run as zero.cpp's comparison program, in PyTorch: tiny GPT-2 from the fixture
weights, AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 except biases and
LayerNorm weights), DeepSpeed's WarmupLR (min 0, max 1e-3, 10 log-warmup steps, stepped after each
optimizer step), gradient clipping at 1.0, the fixture's input_ids as the batch every step, float32.

usage: python3 torch_training_curve.py FIXTURE_DIR ZERO_CURVE_FILE
Prints both curves and the largest relative difference.
"""
import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def warmup_lr(last_batch_iteration, min_lr=0.0, max_lr=1e-3, warmup=10):
    if last_batch_iteration < 0:
        return min_lr
    gamma = 1.0
    if last_batch_iteration < warmup:
        gamma = math.log(last_batch_iteration + 1) / math.log(warmup)
    return min_lr + (max_lr - min_lr) * gamma


def main(fixture, zero_curve_path):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(fixture).float()
    model.train()
    ids = load_file(fixture + "/reference.safetensors")["input_ids"]
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim == 1 else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=0.0, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for step in range(20):
        for group in opt.param_groups:
            group["lr"] = warmup_lr(step - 1)
        logits = model(input_ids=ids).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss))
    ours = [float(x) for x in open(zero_curve_path).read().split()]
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, losses))
    for i, (a, b) in enumerate(zip(ours, losses)):
        print(f"step {i:2d} zero.cpp {a:.7f} torch {b:.7f} rel diff {abs(a - b) / abs(b):.2e}")
    print(f"largest relative difference over 20 steps: {worst:.3e}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
