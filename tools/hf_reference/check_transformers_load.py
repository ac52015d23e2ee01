"""Loads model folders that zero.cpp wrote with Hugging Face transformers and compares the logits
on a reference batch with the reference dump of the model they came from: proof that a folder
zero.cpp saves is a folder transformers loads unchanged.

usage: python3 check_transformers_load.py SAVED_DIR REFERENCE_DIR [SAVED_DIR REFERENCE_DIR ...]
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def check(saved_dir, reference_dir):
    reference = load_file(reference_dir + "/reference.safetensors")
    model = AutoModelForCausalLM.from_pretrained(saved_dir).double()
    with torch.no_grad():
        logits = model(input_ids=reference["input_ids"]).logits
    ref = reference["logits"].double()
    error = float((logits - ref).norm() / ref.norm())
    # The saved weights may be bf16 (rounded): then only closeness is expected.
    limit = 1e-9 if model.config.dtype in (torch.float32, "float32") else 2e-2
    ok = error < limit
    print(f"{saved_dir}: {type(model).__name__} relative logits error {error:.3e} {'OK' if ok else 'FAIL'}")
    return ok


def main(args):
    pairs = list(zip(args[0::2], args[1::2]))
    results = [check(saved, ref) for saved, ref in pairs]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
