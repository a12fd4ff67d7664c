#!/usr/bin/env python3
"""Another tenant of the same GPU, no part of the watched start: in a loop it allocates
2-12 GiB, runs a burst of bf16 matmuls for 3-8 s (power spikes), frees the memory back to
the driver and rests 5-15 s. Runs until it is killed; logs each step with its time."""
import random
import sys
import time


def main():
    import torch
    rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    while True:
        gib = rng.uniform(2, 12)
        block = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
        block.fill_(1)
        burst = rng.uniform(3, 8)
        print("%.2f alloc %.1f GiB, burst %.1f s" % (time.time(), gib, burst), flush=True)
        end = time.monotonic() + burst
        while time.monotonic() < end:
            for _ in range(20):
                torch.matmul(x, x)
            torch.cuda.synchronize()
        del block
        torch.cuda.empty_cache()
        rest = rng.uniform(5, 15)
        print("%.2f freed, rest %.1f s" % (time.time(), rest), flush=True)
        time.sleep(rest)


if __name__ == "__main__":
    main()
