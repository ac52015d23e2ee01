#!/usr/bin/env python3
"""PyTorch reference for the GPU speed benchmark (issue 13): the same two models zero.cpp trains,
the same step, timed the same way, so bench/gpu_speed.sh can put both side by side.

  python3 bench/torch_baseline.py --workload gpt2-124m --mode compile [--out FILE]
  python3 bench/torch_baseline.py --workload llama-1b-mha --mode eager [--out FILE]
  python3 bench/torch_baseline.py --matmul-only            # bf16 matmul rate, a cross-check
  /usr/bin/python3 bench/torch_baseline.py --device cpu --smoke --mode eager --workload gpt2-124m

Workloads (the shapes of zero.cpp's presets, src/model/transformer_config.cpp):
  gpt2-124m     GPT-2 small: vocab 50257 (not padded), 1024 positions, hidden 768, 12 layers,
                12 heads, LayerNorm with bias, GELU-tanh MLP 4x, tied head; B=16, T=1024.
  llama-1b-mha  Llama-shaped 1B ("llama-1b-mha"): vocab 32000, hidden 2048, 16 layers, 16 heads
                and 16 KV heads of 128, SwiGLU FFN 5632, RMSNorm, RoPE theta 1e4, no biases,
                untied head; B=4, T=2048.
  --smoke swaps in the shapes of zero's tiny runs (`zero train --model tiny` on synthetic data,
  and `--model tiny-llama`), B=2, T=32, 12 steps, so a machine without a GPU can test the
  script and the parameter counts against `zero train`.

The step, as zero.cpp runs it: f32 parameters, bf16 autocast, causal attention through
F.scaled_dot_product_attention (flash), AdamW (fused on CUDA) lr 3e-4 betas (0.9, 0.95) eps 1e-8
weight decay 0.1 on 2-D weights only, gradient clipping at 1.0, one loss read per step.
Timing: each step is bracketed by a device synchronisation and time.perf_counter();
tokens/s = window steps * B * T / the window's seconds (steps 11..30; smoke 3..12).
The last line on stdout is one JSON object (also written to --out).
--profile-kernels FILE: one more step after the window under torch.profiler, its device kernels
(or, without a device, its CPU ops) grouped by name and by kind (attention, matmul, fused,
optimizer, ...) as a markdown table in FILE - PyTorch's side of zero's per-kernel table.
"""
import argparse
import contextlib
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Shapes. Each dict is one zero.cpp preset; keys follow TransformerConfig's fields.

GPT2_124M = dict(family="gpt2", vocab=50257, positions=1024, hidden=768, layers=12, heads=12,
                 kv_heads=12, ffn=3072, eps=1e-5, batch=16, seq_len=1024)
LLAMA_1B_MHA = dict(family="llama", vocab=32000, positions=4096, hidden=2048, layers=16, heads=16,
                    kv_heads=16, ffn=5632, eps=1e-5, theta=10000.0, tied=False, batch=4,
                    seq_len=2048)
# zero train --model tiny --data synthetic shrinks the tiny preset to the synthetic source's
# 16-token vocabulary (command_train.cpp, model_shape); --model tiny-llama is used as is.
GPT2_SMOKE = dict(family="gpt2", vocab=16, positions=256, hidden=64, layers=2, heads=4,
                  kv_heads=4, ffn=256, eps=1e-5, batch=2, seq_len=32)
LLAMA_SMOKE = dict(family="llama", vocab=256, positions=256, hidden=128, layers=4, heads=4,
                   kv_heads=2, ffn=352, eps=1e-5, theta=10000.0, tied=False, batch=2, seq_len=32)

WORKLOADS = {"gpt2-124m": (GPT2_124M, GPT2_SMOKE), "llama-1b-mha": (LLAMA_1B_MHA, LLAMA_SMOKE)}

# What zero.cpp reports for these shapes (`zero train` / `zero estimate --json`, 2026-11-25): a
# module that differs from zero.cpp's shows up here, before anything is timed.
KNOWN_ZERO_PARAMETERS = {("gpt2-124m", False): 124439808, ("llama-1b-mha", False): 953223168,
                         ("gpt2-124m", True): 117504, ("llama-1b-mha", True): 803968}


def expected_parameters(cfg):
    """zero.cpp's parameter count (model/config_limits.cpp, checked_parameter_count)."""
    c, head_dim = cfg["hidden"], cfg["hidden"] // cfg["heads"]
    q, kv = cfg["heads"] * head_dim, cfg["kv_heads"] * head_dim
    qkv = q + 2 * kv
    gpt2 = cfg["family"] == "gpt2"
    norm = 2 * c if gpt2 else c
    block = 2 * norm + c * qkv + q * c
    if gpt2:
        block += qkv + c                           # q/k/v and output-projection biases
        block += 2 * c * cfg["ffn"] + cfg["ffn"] + c  # up and down projections with biases
    else:
        block += 3 * c * cfg["ffn"]                # gate, up, down; no biases
    total = cfg["layers"] * block + cfg["vocab"] * c + norm
    if gpt2:
        total += cfg["positions"] * c              # learned positions
    if not cfg.get("tied", gpt2):
        total += cfg["vocab"] * c                  # untied LM head
    return total


def model_flops_per_step(cfg):
    """FLOPs of one forward + backward by zero.cpp's convention (model/model_flops.cpp): matrix
    products only, 2 per multiply-add, backward twice forward, causal attention counting half
    of the T x T scores. gpu_record.py divides by it for the PyTorch MFU figures."""
    c, t, tokens = cfg["hidden"], cfg["seq_len"], cfg["batch"] * cfg["seq_len"]
    head_dim = c // cfg["heads"]
    q, kv = cfg["heads"] * head_dim, cfg["kv_heads"] * head_dim
    up = 2 * cfg["ffn"] if cfg["family"] == "llama" else cfg["ffn"]
    weight_macs = tokens * (c * (q + 2 * kv) + q * c + c * up + cfg["ffn"] * c)
    attention_macs = 2 * cfg["batch"] * (t * t / 2.0) * q
    forward_macs = cfg["layers"] * (weight_macs + attention_macs) + tokens * c * cfg["vocab"]
    return 3.0 * 2.0 * forward_macs


# ---------------------------------------------------------------------------------------------
# Attention. The benchmark path is F.scaled_dot_product_attention; torch 1.13 (the development
# machine's CPU-only build) lacks it, and only --device cpu may fall back to the explicit form.

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def sdpa_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def explicit_attention(q, k, v):
    """Causal softmax attention for torch builds without SDPA (CPU smoke runs only)."""
    t = q.size(-2)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v


ATTENTION = sdpa_attention if HAS_SDPA else explicit_attention


def expand_kv(k, heads):
    """Grouped-query attention: each KV head serves heads / kv_heads query heads (smoke only;
    the benchmark's Llama has as many KV heads as heads, so this returns k unchanged)."""
    groups = heads // k.size(1)
    return k if groups == 1 else k.repeat_interleave(groups, dim=1)


# ---------------------------------------------------------------------------------------------
# GPT-2

class Gpt2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["hidden"]
        self.heads = cfg["heads"]
        self.ln_1 = nn.LayerNorm(c, eps=cfg["eps"])
        self.c_attn = nn.Linear(c, 3 * c)       # fused q, k, v (zero.cpp's layout)
        self.attn_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c, eps=cfg["eps"])
        self.c_fc = nn.Linear(c, cfg["ffn"])
        self.mlp_proj = nn.Linear(cfg["ffn"], c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        # Plain statements (no generator expression), so torch.compile traces one graph.
        q = q.view(shape).transpose(1, 2)
        k = k.view(shape).transpose(1, 2)
        v = v.view(shape).transpose(1, 2)
        y = ATTENTION(q, k, v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab"], cfg["hidden"])
        self.wpe = nn.Embedding(cfg["positions"], cfg["hidden"])
        self.blocks = nn.ModuleList(Gpt2Block(cfg) for _ in range(cfg["layers"]))
        self.ln_f = nn.LayerNorm(cfg["hidden"], eps=cfg["eps"])

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------------------------
# Llama

class RmsNorm(nn.Module):
    def __init__(self, c, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        # In f32, as Hugging Face's LlamaRMSNorm; the residual stream is f32 under autocast.
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["hidden"]
        self.heads, self.kv_heads = cfg["heads"], cfg["kv_heads"]
        self.head_dim = c // self.heads
        self.ffn = cfg["ffn"]
        self.input_norm = RmsNorm(c, cfg["eps"])
        # One q/k/v product and one gate+up product, as zero.cpp runs them (same parameters as
        # separate projections; fewer launches, so the baseline is not handicapped).
        self.qkv = nn.Linear(c, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, c, bias=False)
        self.post_norm = RmsNorm(c, cfg["eps"])
        self.gate_up = nn.Linear(c, 2 * cfg["ffn"], bias=False)
        self.down = nn.Linear(cfg["ffn"], c, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        d = self.head_dim
        q, k, v = self.qkv(self.input_norm(x)).split(
            [self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=2)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, d).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = ATTENTION(q, expand_kv(k, self.heads), expand_kv(v, self.heads))
        x = x + self.o_proj(y.transpose(1, 2).contiguous().view(b, t, self.heads * d))
        gate, up = self.gate_up(self.post_norm(x)).split(self.ffn, dim=2)
        return x + self.down(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c = cfg["hidden"]
        self.embed = nn.Embedding(cfg["vocab"], c)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg["layers"]))
        self.norm = RmsNorm(c, cfg["eps"])
        self.lm_head = nn.Linear(c, cfg["vocab"], bias=False)  # untied
        # Rotary tables for every position (rotate-half convention), not parameters.
        d = c // cfg["heads"]
        inv_freq = 1.0 / (cfg["theta"] ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(cfg["positions"], dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx, targets):
        t = idx.size(1)
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def build_model(cfg):
    model = Gpt2(cfg) if cfg["family"] == "gpt2" else Llama(cfg)
    # GPT-2's initialisation (normal 0.02, zero biases, unit norms): the speed does not depend
    # on it, but finite, moving losses show the step is real.
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            nn.init.normal_(p, std=0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
        else:
            nn.init.ones_(p)
    return model


# ---------------------------------------------------------------------------------------------
# The run

def matmul_rate(device, n=8192, repeats=20):
    """Median bf16 matmul FLOP/s of an n^3 product (a cross-check of zero's measured peak)."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return 2.0 * n ** 3 / times[len(times) // 2]


def make_batches(cfg, steps, token_range, seed, pin):
    """Token ids for every step, made before the loop and kept on the host: each step copies
    its batch to the device inside the timed region, as zero.cpp uploads its batch."""
    g = torch.Generator().manual_seed(seed)
    high = cfg["vocab"] if token_range <= 0 else min(token_range, cfg["vocab"])
    batches = []
    for _ in range(steps):
        tokens = torch.randint(0, high, (cfg["batch"], cfg["seq_len"] + 1), generator=g)
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        if pin:
            x, y = x.pin_memory(), y.pin_memory()
        batches.append((x, y))
    return batches


# Kinds of device kernel, first match wins: what a zero kernel table row is compared against.
KERNEL_KINDS = [
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "sm90_", "sm80_")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("cross-entropy", ("cross_entropy", "nll_loss", "log_softmax")),
    ("embedding", ("embedding", "index_put", "indexing_backward", "scatter", "gather")),
    ("inductor (fused)", ("triton",)),
    ("copy / fill", ("memcpy", "memset", "copy", "fill")),
    ("aten elementwise / reductions", ("elementwise", "reduce_kernel", "reduction")),
]


def kernel_kind(name):
    lower = name.lower()
    for kind, keys in KERNEL_KINDS:
        if any(key in lower for key in keys):
            return kind
    return "other"


def profile_table(prof, step_seconds, on_cuda, title):
    """Markdown: the profiled step's device kernels (CPU ops without a device) by name and kind."""
    rows = {}
    if on_cuda:
        # Device-side events (kernels, memcpy, memset): their own device interval.
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                us = e.time_range.elapsed_us()
                calls, total = rows.get(e.name, (0, 0.0))
                rows[e.name] = (calls + 1, total + us)
        what = "device kernels"
    else:
        for e in prof.key_averages():
            if e.self_cpu_time_total > 0:
                rows[e.key] = (e.count, float(e.self_cpu_time_total))
        what = "CPU ops (self time; no device)"
    total_us = sum(us for _, us in rows.values())
    step_ms = 1e3 * step_seconds
    lines = ["## " + title, "",
             "Profiled step: %.2f ms wall; %s %.2f ms." % (step_ms, what, total_us / 1e3), "",
             "| kind | calls | ms | % of step |", "|---|---:|---:|---:|"]
    kinds = {}
    for name, (calls, us) in rows.items():
        kind = kernel_kind(name)
        c, t = kinds.get(kind, (0, 0.0))
        kinds[kind] = (c + calls, t + us)
    for kind, (calls, us) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        lines.append("| %s | %d | %.3f | %.1f |" % (kind, calls, us / 1e3, 100 * us / 1e3 / step_ms))
    lines += ["", "| kernel | kind | calls | ms | % of step |", "|---|---|---:|---:|---:|"]
    for name, (calls, us) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:40]:
        short = name if len(name) <= 110 else name[:107] + "..."
        lines.append("| `%s` | %s | %d | %.3f | %.1f |" % (short.replace("|", "/"), kernel_kind(name),
                                                           calls, us / 1e3, 100 * us / 1e3 / step_ms))
    return "\n".join(lines) + "\n"


def compile_stats():
    """(graphs compiled, graph breaks) from dynamo's counters; None where this torch lacks them."""
    try:
        from torch._dynamo.utils import counters
        return counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
    except Exception:  # an internal API: its absence must not cost the measurement
        return None, None


def fail(message):
    print("torch_baseline.py: " + message, file=sys.stderr)
    sys.exit(2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="gpt2-124m")
    ap.add_argument("--mode", choices=["compile", "eager"], default="compile")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, 12 steps (no GPU needed)")
    ap.add_argument("--steps", type=int, default=None, help="default 30 (smoke 12)")
    ap.add_argument("--window-start", type=int, default=None,
                    help="first timed step, 1-based (default 11; smoke 3); the window ends at the last step")
    ap.add_argument("--batch", type=int, default=None, help="override B")
    ap.add_argument("--seq-len", type=int, default=None, help="override T")
    ap.add_argument("--token-range", type=int, default=16,
                    help="draw ids from [0, N): zero's synthetic source emits 16 ids, so the "
                         "embedding gradient's repeats match; 0 = the whole vocabulary")
    ap.add_argument("--sdpa", choices=["flash", "auto"], default="flash",
                    help="flash: only the flash kernel may run (an error otherwise); auto: "
                         "PyTorch picks")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", default="", help="also write the JSON result here")
    ap.add_argument("--profile-kernels", default="", metavar="FILE",
                    help="profile one more step after the window; its kernel table (markdown) here")
    ap.add_argument("--matmul-only", action="store_true",
                    help="print the bf16 matmul rate and exit")
    return ap.parse_args()


def main():
    args = parse_args()
    on_cuda = args.device.startswith("cuda")
    if on_cuda and not torch.cuda.is_available():
        fail("--device %s but torch.cuda.is_available() is False (torch %s)"
             % (args.device, torch.__version__))
    if args.matmul_only:
        if not on_cuda:
            fail("--matmul-only needs a CUDA device")
        rate = matmul_rate(args.device)
        print(json.dumps({"matmul_bf16_tflops": rate / 1e12, "device": torch.cuda.get_device_name(),
                          "torch_version": torch.__version__}))
        return
    if on_cuda and not HAS_SDPA:
        fail("torch %s lacks F.scaled_dot_product_attention; the benchmark needs torch >= 2.0"
             % torch.__version__)
    if args.mode == "compile" and not hasattr(torch, "compile"):
        fail("--mode compile needs torch.compile, which torch %s lacks (use --mode eager)"
             % torch.__version__)

    full, smoke = WORKLOADS[args.workload]
    cfg = dict(smoke if args.smoke else full)
    if args.batch:
        cfg["batch"] = args.batch
    if args.seq_len:
        cfg["seq_len"] = args.seq_len
    steps = args.steps or (12 if args.smoke else 30)
    window_start = args.window_start or (3 if args.smoke else 11)
    if not 1 <= window_start <= steps:
        fail("--window-start %d must be between 1 and --steps %d" % (window_start, steps))
    if cfg["seq_len"] > cfg["positions"]:
        fail("--seq-len %d exceeds the model's %d positions" % (cfg["seq_len"], cfg["positions"]))

    if on_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        if args.sdpa == "flash":
            # Only the flash kernel may serve SDPA: a shape or dtype it cannot take is an error
            # instead of a silent, slower fallback. The flags hold for compiled graphs too.
            torch.backends.cuda.enable_flash_sdp(True)
            torch.backends.cuda.enable_mem_efficient_sdp(False)
            torch.backends.cuda.enable_math_sdp(False)
            if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
                torch.backends.cuda.enable_cudnn_sdp(False)
    attention = ("sdpa-" + args.sdpa) if HAS_SDPA else "explicit-softmax (no SDPA in this torch)"
    autocast_dtype = torch.bfloat16
    autocast_ok = hasattr(torch, "autocast")
    autocast_name = "bf16" if autocast_ok else "none (f32: this torch has no torch.autocast)"
    device_name = torch.cuda.get_device_name() if on_cuda else "cpu"
    print("torch %s on %s: %s %s, attention %s, autocast %s, B=%d T=%d, %d steps (window %d..%d)"
          % (torch.__version__, device_name, args.workload + (" (smoke shapes)" if args.smoke else ""),
             args.mode, attention, autocast_name, cfg["batch"], cfg["seq_len"], steps,
             window_start, steps), flush=True)

    torch.manual_seed(args.seed)
    # Build on the device where torch can (2.0+), so a 1B model's init does not run on the host.
    build_ctx = torch.device(args.device) if hasattr(torch.device, "__enter__") \
        else contextlib.nullcontext()
    with build_ctx:
        model = build_model(cfg)
    model.to(args.device)
    parameters = sum(p.numel() for p in model.parameters())  # a tied weight counts once
    expected = expected_parameters(cfg)
    known = KNOWN_ZERO_PARAMETERS[(args.workload, args.smoke)]
    if parameters != expected or known != expected:
        fail("parameter count %d, zero.cpp's formula says %d, zero.cpp reported %d: the modules do not "
             "match zero.cpp's model" % (parameters, expected, known))
    print("parameters: %d (matches zero.cpp's formula)" % parameters, flush=True)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    adam_kwargs = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if on_cuda:
        optimizer = torch.optim.AdamW(groups, fused=True, **adam_kwargs)
        optimizer_name = "AdamW(fused=True)"
    else:
        optimizer = torch.optim.AdamW(groups, **adam_kwargs)  # fused AdamW is CUDA-only in 1.x
        optimizer_name = "AdamW(default implementation)"
    step_fn = torch.compile(model) if args.mode == "compile" else model
    params = list(model.parameters())
    batches = make_batches(cfg, steps, args.token_range, args.seed, pin=on_cuda)

    def sync():
        if on_cuda:
            torch.cuda.synchronize()

    def run_step(x_host, y_host):
        """One training step, timed between device synchronisations: (loss, seconds)."""
        sync()
        start = time.perf_counter()
        x = x_host.to(args.device, non_blocking=True)
        y = y_host.to(args.device, non_blocking=True)
        autocast = torch.autocast(args.device.split(":")[0], dtype=autocast_dtype) \
            if autocast_ok else contextlib.nullcontext()
        with autocast:
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()  # the one read per step (zero.cpp reads its loss once too)
        sync()
        return value, time.perf_counter() - start

    step_seconds, losses = [], []
    for step in range(steps):
        value, seconds = run_step(*batches[step])
        losses.append(value)
        step_seconds.append(seconds)
        if not math.isfinite(losses[-1]):
            fail("the loss became %r at step %d" % (losses[-1], step + 1))
        print("step %3d | loss %.4f | %.1f ms" % (step + 1, losses[-1], 1e3 * step_seconds[-1]),
              flush=True)

    graphs, graph_breaks = compile_stats() if args.mode == "compile" else (None, None)
    if args.profile_kernels:
        # After the window, so the timed steps carry no profiler; the last batch again. A
        # profiler failure costs the table, never the measurement.
        try:
            from torch.profiler import ProfilerActivity, profile
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
            with profile(activities=activities) as prof:
                _, profiled_seconds = run_step(*batches[-1])
            title = "PyTorch %s, %s (torch %s, %s)" % (
                args.mode, args.workload + ("-smoke" if args.smoke else ""), torch.__version__,
                device_name)
            with open(args.profile_kernels, "w") as f:
                f.write(profile_table(prof, profiled_seconds, on_cuda, title))
            print("kernel profile of one more step: %s" % args.profile_kernels, flush=True)
        except Exception as e:  # noqa: BLE001 - any profiler problem is reported, not fatal
            print("torch_baseline.py: no kernel profile (%s: %s)" % (type(e).__name__, e),
                  file=sys.stderr, flush=True)
    window = step_seconds[window_start - 1:]
    tokens_per_s = len(window) * cfg["batch"] * cfg["seq_len"] / sum(window)
    result = {
        "workload": args.workload + ("-smoke" if args.smoke else ""),
        "mode": args.mode,
        "tokens_per_s": tokens_per_s,
        # The whole run (weights, gradients, optimizer state, activations): zero's peak_total.
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if on_cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if on_cuda else None,
        "parameters": parameters,
        "model_flops_per_step": model_flops_per_step(cfg),
        "step_seconds": step_seconds,
        "losses": losses,
        "torch_version": torch.__version__,
        "device": device_name,
        "window": [window_start, steps],
        "batch": cfg["batch"],
        "seq_len": cfg["seq_len"],
        "attention": attention,
        "autocast": autocast_name,
        "optimizer": optimizer_name,
        "token_range": args.token_range,
        # A model traced whole is one graph with no breaks; more graphs or any break mean Python
        # ran between compiled pieces, a weaker baseline than torch.compile can give.
        "compiled_graphs": graphs,
        "graph_breaks": graph_breaks,
    }
    print("tokens/s over steps %d..%d: %.0f" % (window_start, steps, tokens_per_s), flush=True)
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
