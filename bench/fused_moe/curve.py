#!/usr/bin/env python3
"""curve.py: the [curve.NAME] section of models/hw/fused-moe-NAME.ini from benchmark runs of
fused_moe_bench.py (CSV), at the M every run measured up to --max-m: layer_us the mean of the
runs' per-layer time_us (each run its own seeded routings), layer_sd_us half the spread of the runs
(two runs: |a - b| / 2, the routing's sampling variation, larger than the trials' standard
deviation of one graph) or, with one run, its trials' standard deviation.

Usage: python3 curve.py --name sglang_triton --max-m 512 RUN.csv [RUN.csv ...]"""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--max-m", type=float, default=float("inf"))
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    runs = []
    for p in a.runs:
        with open(p) as f:
            runs.append({float(r["m"]): r for r in csv.DictReader(f)})
    ms = sorted(m for m in runs[0] if m <= a.max_m and all(m in r for r in runs))
    t, sd = [], []
    for m in ms:
        v = [float(r[m]["time_us"]) for r in runs]
        t.append(sum(v) / len(v))
        sd.append((max(v) - min(v)) / 2 if len(v) > 1 else float(runs[0][m]["time_sd_us"]))
    print(f"[curve.{a.name}]")
    print("m = " + ", ".join(f"{m:g}" for m in ms))
    print("layer_us = " + ", ".join(f"{x:.2f}" for x in t))
    print("layer_sd_us = " + ", ".join(f"{x:.2f}" for x in sd))


if __name__ == "__main__":
    main()
