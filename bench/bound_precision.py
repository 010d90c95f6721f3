"""How close the trusted bound comes to a kernel's true time (issue: the trusted side measures).

    PYTHONPATH=src python3 bench/bound_precision.py [--device cuda] [--json FILE]

Three elementwise problems sized for about 10 µs, 100 µs and 1 ms per call on an H200 (ReLU of
2^22, 2^26 and 2^29 float32 elements: 16 MiB, 256 MiB and 2 GiB read and written at ~4.5 TB/s), verified with an honest candidate (``clamp_min``) through
kbv's real workers. Per problem: the candidate's claimed median, the bound pass's floor before and
after its margin, and for eager-fp32 (timed by the trusted reference worker itself, so its true
time is known) the floor of the same pass against its rounds' median: the share of the true time
the bound recovers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

PROBLEM = '''import torch
import torch.nn as nn
N = {n}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''
CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''
SIZES = {"10us": 1 << 22, "100us": 1 << 26, "1ms": 1 << 29}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import kbv
    from kbv.checks.bound_rules import BOUND_MARGIN

    out = {}
    with tempfile.TemporaryDirectory() as d:
        for label, n in SIZES.items():
            if a.device == "cpu":
                n //= 512
            p = Path(d) / f"level1/{len(out) + 1}_ReLU_{label}.py"
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(PROBLEM.format(n=n))
            c = Path(d) / f"cand_{label}.py"
            c.write_text(CANDIDATE)
            v = kbv.verify(p, c, {"device": a.device})
            b = v.evidence.get("trusted_bound") or {}
            base = v.timing.get("eager-fp32")
            floors = b.get("baseline_floor_ms") or [{}]
            f_b = floors[0].get("eager-fp32")
            out[label] = {"elements": n, "status": v.status.value,
                          "claimed_ms": b.get("claimed_median_ms"), "floor_ms": b.get("floor_ms"),
                          "floor_over_claim": (b["floor_ms"][0] / b["claimed_median_ms"]) if b.get("floor_ms") else None,
                          "raw_floor_over_claim": (b["floor_ms"][0] / (1 - BOUND_MARGIN) / b["claimed_median_ms"])
                          if b.get("floor_ms") else None,
                          "eager_fp32_median_ms": base.median_ms if base else None,
                          "eager_fp32_pass_floor_ms": f_b,
                          "eager_fp32_recovered": (f_b / base.median_ms) if f_b and base else None,
                          "findings": [f.check for f in v.findings]}
            print(label, json.dumps(out[label]), flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
